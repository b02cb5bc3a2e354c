#include "monitor/gaps.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <sstream>

#include "core/clock.h"
#include "core/stats.h"

namespace threadburn::monitor {

GapThread Gap::others() const {
  GapThread o;
  o.name = "[others]";
  for (const auto& [tid, t] : threads) {
    o.burn_ns += t.burn_ns;
    o.wait_ns += t.wait_ns;
    o.tail_ns = std::max(o.tail_ns, t.tail_ns);
  }
  return o;
}

void GapFinder::add(const IntervalRow& r) {
  if (r.kind != "sleep" || r.tid != main_ || r.end_ns - r.start_ns < min_) return;
  Gap g;
  g.start_ns = r.start_ns;
  g.end_ns = r.end_ns;
  g.open = r.end_ns >= end_;
  gaps_.push_back(std::move(g));
}

GapBurns::GapBurns(std::vector<Gap> gaps, pid_t main_tid) : gaps_(std::move(gaps)), main_(main_tid) {
  std::sort(gaps_.begin(), gaps_.end(), [](const Gap& a, const Gap& b) { return a.start_ns < b.start_ns; });
}

void GapBurns::add(const IntervalRow& r) {
  const bool run = r.kind == "run", wait = r.kind == "wait";
  if ((!run && !wait) || r.tid == main_) return;
  // The gaps do not overlap (one thread's sleeps): those that start before the
  // row ends, walking back while they end after it starts.
  auto it = std::lower_bound(gaps_.begin(), gaps_.end(), r.end_ns,
                             [](const Gap& g, int64_t t) { return g.start_ns < t; });
  while (it != gaps_.begin()) {
    --it;
    if (it->end_ns <= r.start_ns) break;
    const int64_t lo = std::max(r.start_ns, it->start_ns), hi = std::min(r.end_ns, it->end_ns);
    if (hi <= lo) continue;
    GapThread& t = it->threads[r.tid];
    t.name = r.name;
    if (run) {
      t.burn_ns += hi - lo;
      t.tail_ns = std::max(t.tail_ns, hi - it->start_ns);
    } else {
      t.wait_ns += hi - lo;
    }
  }
}

std::string gaps_csv(const std::vector<Gap>& gaps, pid_t main_tid, int64_t gap_min_ns) {
  char line[256];
  std::snprintf(line, sizeof line, "# threadburn gaps 1; source=sched_events; main_tid=%d; gap_min_ms=%g\n",
                static_cast<int>(main_tid), ns_to_ms(gap_min_ns));
  std::string out = std::string(line) + "gap,start_ms,length_ms,open,tid,name,burn_ms,wait_ms,tail_ms\n";
  for (size_t i = 0; i < gaps.size(); ++i) {
    const Gap& g = gaps[i];
    auto row = [&](pid_t tid, const GapThread& t) {
      std::string name = t.name;
      if (name.find_first_of(",\"") != std::string::npos) {
        std::string q = "\"";
        for (char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        name = q + "\"";
      }
      std::snprintf(line, sizeof line, "%zu,%.3f,%.3f,%d,%d,%s,%.3f,%.3f,%.3f\n", i, ns_to_ms(g.start_ns),
                    ns_to_ms(g.end_ns - g.start_ns), g.open ? 1 : 0, static_cast<int>(tid), name.c_str(),
                    ns_to_ms(t.burn_ns), ns_to_ms(t.wait_ns), ns_to_ms(t.tail_ns));
      out += line;
    };
    for (const auto& [tid, t] : g.threads) row(tid, t);
    row(0, g.others());
  }
  return out;
}

std::string format_gaps(const std::vector<Gap>& gaps, pid_t main_tid, const std::string& main_name,
                        int64_t gap_min_ns, size_t top) {
  std::ostringstream out;
  char line[256];
  std::vector<const Gap*> closed;
  std::vector<double> lengths;
  for (const Gap& g : gaps) {
    if (g.open) continue;
    closed.push_back(&g);
    lengths.push_back(ns_to_ms(g.end_ns - g.start_ns));
  }
  std::snprintf(line, sizeof line,
                "after each sleep of thread %d (%s) of at least %g ms: %zu gaps (%zu open at the end)%s", 
                static_cast<int>(main_tid), main_name.c_str(), ns_to_ms(gap_min_ns), closed.size(),
                gaps.size() - closed.size(), closed.empty() ? "\n" : "");
  out << line;
  if (closed.empty()) return out.str();
  std::snprintf(line, sizeof line, ", median %.3f ms; burn = CPU in the gap, tail = gap start -> end of the last "
                "interval on a CPU in it:\n", median(lengths));
  out << line;
  std::snprintf(line, sizeof line, "  %-8s %-16s %12s %14s %12s %11s %12s\n", "tid", "name", "mean_burn_ms",
                "median_burn_ms", "mean_tail_ms", "max_tail_ms", "mean_wait_ms");
  out << line;
  // Threads by their total burn over the gaps.
  std::map<pid_t, std::pair<std::string, int64_t>> total;
  for (const Gap* g : closed) {
    for (const auto& [tid, t] : g->threads) {
      total[tid].first = t.name;
      total[tid].second += t.burn_ns;
    }
  }
  std::vector<std::pair<int64_t, pid_t>> order;
  for (const auto& [tid, t] : total) order.push_back({t.second, tid});
  std::sort(order.rbegin(), order.rend());
  auto print = [&](const std::string& tid, const std::string& name, auto get) {
    std::vector<double> burn, tail, wait;
    for (const Gap* g : closed) {
      const GapThread t = get(*g);
      burn.push_back(ns_to_ms(t.burn_ns));
      tail.push_back(ns_to_ms(t.tail_ns));
      wait.push_back(ns_to_ms(t.wait_ns));
    }
    std::snprintf(line, sizeof line, "  %-8s %-16s %12.3f %14.3f %12.3f %11.3f %12.3f\n", tid.c_str(), name.c_str(),
                  mean(burn), median(burn), mean(tail), *std::max_element(tail.begin(), tail.end()), mean(wait));
    out << line;
  };
  for (size_t i = 0; i < order.size() && i < top; ++i) {
    const pid_t tid = order[i].second;
    print(std::to_string(tid), total[tid].first, [tid](const Gap& g) {
      const auto it = g.threads.find(tid);
      return it == g.threads.end() ? GapThread{} : it->second;
    });
  }
  print("", "[others]", [](const Gap& g) { return g.others(); });
  return out.str();
}

}  // namespace threadburn::monitor
