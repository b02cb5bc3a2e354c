#include "core/timeline.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>

#include "core/clock.h"
#include "core/rules.h"

namespace threadburn {

std::string class_series(std::string_view cls) { return "class:" + std::string(cls); }

std::string thread_series(pid_t tid, std::string_view label) {
  return "thread:" + std::to_string(tid) + ":" + std::string(label);
}

std::string timeline_header(std::string_view origin, const TimelineMeta& meta, double burn_threshold_cores) {
  std::string out = "# threadburn timeline " + std::to_string(kTimelineVersion) + "; origin=" + std::string(origin);
  // The threshold its tails are read by (the plot's idle line): the file says it.
  out += "; burn_threshold_cores=" + rule_text(burn_threshold_cores);
  for (const auto& [k, v] : meta) out += "; " + k + "=" + v;
  return out + "\n" + kTimelineColumns + "\n";
}

namespace {

std::string quoted(std::string_view s) {
  if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

}  // namespace

std::string timeline_row(double t_ms, std::string_view series, double cores) {
  char a[40], b[40];
  std::snprintf(a, sizeof a, "%.3f", t_ms);
  std::snprintf(b, sizeof b, "%.4f", cores);
  return std::string(a) + "," + quoted(series) + "," + b + "\n";
}

bool TimelineWriter::save(const std::string& path) const {
  std::ofstream out(path);
  out << text_;
  return static_cast<bool>(out.flush());
}

void add_thread_series(const std::vector<ThreadSnapshot>& snaps, int64_t origin_ns, TimelineWriter* tl) {
  for (size_t i = 1; i < snaps.size(); ++i) {
    const double dt = static_cast<double>(snaps[i].t_ns - snaps[i - 1].t_ns);
    if (dt <= 0) continue;
    std::map<pid_t, int64_t> before;
    for (const auto& t : snaps[i - 1].threads) before[t.tid] = t.cpu_ns;
    const double t_ms = ns_to_ms(snaps[i].t_ns - origin_ns);
    for (const auto& t : snaps[i].threads) {
      if (!t.alive || t.cls == ThreadClass::kSampler) continue;
      const auto it = before.find(t.tid);
      const int64_t used = t.cpu_ns - (it == before.end() ? 0 : it->second);
      if (used > 0) tl->add(t_ms, thread_series(t.tid, thread_class_name(t.cls)), static_cast<double>(used) / dt);
    }
  }
}

bool parse_timeline_row(std::string_view line, double* t_ms, std::string* series, double* cores) {
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  const size_t c1 = line.find(',');
  const size_t c2 = line.rfind(',');
  if (line.empty() || line[0] == '#' || c1 == std::string_view::npos || c1 == c2) return false;
  const std::string t(line.substr(0, c1)), c(line.substr(c2 + 1));
  std::string_view s = line.substr(c1 + 1, c2 - c1 - 1);
  char* end = nullptr;
  const double tv = std::strtod(t.c_str(), &end);
  if (t.empty() || *end != '\0') return false;
  const double cv = std::strtod(c.c_str(), &end);
  if (c.empty() || *end != '\0') return false;
  std::string name;
  if (!s.empty() && s.front() == '"') {
    if (s.size() < 2 || s.back() != '"') return false;
    s = s.substr(1, s.size() - 2);
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '"') {
        if (i + 1 >= s.size() || s[i + 1] != '"') return false;
        ++i;
      }
      name += s[i];
    }
  } else {
    if (s.find('"') != std::string_view::npos) return false;
    name = std::string(s);
  }
  *t_ms = tv;
  *series = std::move(name);
  *cores = cv;
  return true;
}

}  // namespace threadburn
