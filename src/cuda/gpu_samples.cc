#include "cuda/gpu_samples.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

#include "core/clock.h"
#include "core/stats.h"

namespace threadburn::gpu {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Sorted by time, one sample per instant (the later reading of a duplicate wins).
std::vector<Sample> ordered(std::vector<Sample> s) {
  std::stable_sort(s.begin(), s.end(), [](const Sample& a, const Sample& b) { return a.t_ns < b.t_ns; });
  std::vector<Sample> out;
  for (const Sample& x : s) {
    if (!out.empty() && out.back().t_ns == x.t_ns) {
      out.back() = x;
    } else {
      out.push_back(x);
    }
  }
  return out;
}

}  // namespace

Share window_share(std::vector<Sample> samples, int64_t from_ns, int64_t to_ns, int64_t origin_ns) {
  const std::vector<Sample> s = ordered(std::move(samples));
  Share out;
  out.share = out.period_ms = out.first_ms = out.last_ms = kNaN;
  std::vector<double> spacing;
  for (size_t i = 1; i < s.size(); ++i) spacing.push_back(static_cast<double>(s[i].t_ns - s[i - 1].t_ns));
  const double period = spacing.empty() ? 0 : median(spacing);
  if (!spacing.empty()) out.period_ms = period / kNsPerMs;
  double weighted = 0, weight = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double d = i == 0 ? period : std::min(static_cast<double>(s[i].t_ns - s[i - 1].t_ns), 2 * period);
    double w = 0;
    if (d > 0) {
      const double lo = std::max(static_cast<double>(s[i].t_ns) - d, static_cast<double>(from_ns));
      const double hi = static_cast<double>(std::min(s[i].t_ns, to_ns));
      w = std::max(0.0, hi - lo);
    } else if (s[i].t_ns >= from_ns && s[i].t_ns <= to_ns) {
      w = 1;  // a lone sample: no period known, counted as a point
    }
    if (w <= 0) continue;
    weighted += s[i].share * w;
    weight += w;
    const double t_ms = ns_to_ms(s[i].t_ns - origin_ns);
    if (out.samples == 0) out.first_ms = t_ms;
    out.last_ms = t_ms;
    ++out.samples;
  }
  if (weight > 0) out.share = weighted / weight;
  return out;
}

Summary summarize(const Series& s, int64_t from_ns, int64_t to_ns, int64_t origin_ns) {
  Summary out;
  out.index = s.index;
  out.name = s.name;
  out.source = s.source;
  out.busy = window_share(s.busy, from_ns, to_ns, origin_ns);
  out.memory = window_share(s.memory, from_ns, to_ns, origin_ns);
  out.context = s.context;
  out.listed = s.listed;
  out.cuda_device = s.cuda_device;
  out.wait_policy = s.wait_policy;
  out.memory_mib = s.memory_mib;
  return out;
}

Totals totals(const std::vector<Summary>& gpus) {
  Totals t;
  double sum = 0;
  const bool own = std::any_of(gpus.begin(), gpus.end(), [](const Summary& g) { return g.used(); });
  for (const Summary& g : gpus) {
    if (g.busy.samples == 0 || (own && !g.used())) continue;
    ++t.gpus_sampled;
    t.samples += g.busy.samples;
    sum += g.busy.share;
  }
  t.busy_share = t.gpus_sampled > 0 ? sum / static_cast<double>(t.gpus_sampled) : kNaN;
  return t;
}

void write_gpus(JsonWriter* j, const std::vector<Summary>& gpus) {
  j->begin_array();
  for (const Summary& g : gpus) {
    j->begin_object().field("index", g.index).field("name", g.name).field("source", g.source)
        .field("busy_share", g.busy.share).field("memory_busy_share", g.memory.share)
        .field("samples", g.busy.samples).field("period_ms", g.busy.period_ms)
        .field("first_ms", g.busy.first_ms).field("last_ms", g.busy.last_ms).field("used", g.used())
        .field("used_by", g.context && g.listed ? "context+nvml" : g.context ? "context" : g.listed ? "nvml" : "none")
        .key("cuda_device");
    g.cuda_device >= 0 ? j->value(static_cast<int64_t>(g.cuda_device)) : j->null();
    j->field("wait_policy", g.wait_policy).field("memory_mib", g.memory_mib >= 0 ? g.memory_mib : kNaN).end_object();
  }
  j->end_array();
}

std::string busy_series(int index) { return "gpu" + std::to_string(index) + "_busy"; }

void add_busy_series(const Series& s, int64_t from_ns, int64_t to_ns, int64_t origin_ns, TimelineWriter* tl) {
  const std::string name = busy_series(s.index);
  for (const Sample& x : ordered(s.busy)) {
    if (x.t_ns >= from_ns && x.t_ns <= to_ns) tl->add(ns_to_ms(x.t_ns - origin_ns), name, x.share);
  }
}

std::optional<std::vector<int>> visible_devices(const char* env) {
  if (!env) return std::nullopt;
  std::vector<int> out;
  const std::string v(env);
  size_t pos = 0;
  while (pos <= v.size() && !v.empty()) {
    const size_t comma = std::min(v.find(',', pos), v.size());
    std::string item = v.substr(pos, comma - pos);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    char* end = nullptr;
    const long n = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0') return std::nullopt;  // not a list of device numbers
    out.push_back(static_cast<int>(n));
    pos = comma + 1;
  }
  return out;
}

Clock nearest_clock(uint64_t latest_us, const ClockNow& now) {
  const auto distance = [&](int64_t clock_us) {
    return std::fabs(static_cast<double>(clock_us) - static_cast<double>(latest_us));
  };
  Clock best = Clock::kRealtime;
  double d = distance(now.realtime_us);
  if (distance(now.boottime_us) < d) {
    best = Clock::kBoottime;
    d = distance(now.boottime_us);
  }
  if (distance(now.monotonic_us) < d) best = Clock::kMonotonic;
  return best;
}

int64_t to_monotonic_ns(uint64_t t_us, Clock clock, const ClockNow& now) {
  const int64_t clock_now_us = clock == Clock::kRealtime   ? now.realtime_us
                               : clock == Clock::kBoottime ? now.boottime_us
                                                           : now.monotonic_us;
  return (static_cast<int64_t>(t_us) - clock_now_us + now.monotonic_us) * 1000;
}

const char* clock_name(Clock c) {
  return c == Clock::kRealtime ? "realtime" : c == Clock::kBoottime ? "boottime" : "monotonic";
}

}  // namespace threadburn::gpu
