#include "monitor/intervals_file.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace threadburn::monitor {
namespace {

std::string quoted(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

// us since the origin, to the ns.
std::string us(int64_t t_ns, int64_t origin_ns) {
  const int64_t d = t_ns - origin_ns;
  const int64_t a = d < 0 ? -d : d;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%" PRId64 ".%03" PRId64, d < 0 ? "-" : "", a / 1000, a % 1000);
  return buf;
}

std::string row(const char* kind, pid_t tid, pid_t pid, const std::string& name, const std::string& cpu,
                const std::string& start, const std::string& end, const std::string& holder) {
  return std::string(kind) + "," + std::to_string(tid) + "," + std::to_string(pid) + "," + quoted(name) + "," + cpu +
         "," + start + "," + end + "," + holder + "\n";
}

// Splits one CSV line (RFC 4180 quotes) into fields.
bool split_csv(std::string_view line, std::vector<std::string>* out) {
  out->clear();
  std::string field;
  bool quoted_field = false, in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        field += c;
      }
    } else if (c == '"' && field.empty() && !quoted_field) {
      in_quotes = quoted_field = true;
    } else if (c == ',') {
      out->push_back(std::move(field));
      field.clear();
      quoted_field = false;
    } else if (c != '\r' && c != '\n') {
      field += c;
    }
  }
  if (in_quotes) return false;
  out->push_back(std::move(field));
  return true;
}

bool to_ns(const std::string& text, int64_t* ns) {
  if (text.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (*end != '\0') return false;
  *ns = std::llround(v * 1000.0);
  return true;
}

}  // namespace

const char* change_kind(ThreadChange c) {
  switch (c) {
    case ThreadChange::kKnown: return "known";
    case ThreadChange::kBorn: return "born";
    case ThreadChange::kRenamed: return "renamed";
    case ThreadChange::kGone: break;
  }
  return "gone";
}

std::string intervals_header(int64_t unix0_ns, int64_t origin_ns, pid_t pid, pid_t self) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "# threadburn intervals 1; origin=monitor_start; source=sched_events; t0_unix_ms=%.3f; "
                "t0_mono_ms=%.3f; pid=%d; monitor_pid=%d\n",
                static_cast<double>(unix0_ns / 1000) / 1000.0, static_cast<double>(origin_ns / 1000) / 1000.0,
                static_cast<int>(pid), static_cast<int>(self));
  return std::string(buf) + kIntervalsColumns + "\n";
}

std::string run_row(const RunInterval& r, const std::string& name, int64_t origin_ns) {
  return row("run", r.tid, r.pid, name, std::to_string(r.cpu), us(r.start_ns, origin_ns), us(r.end_ns, origin_ns),
             ",,,");
}

std::string wait_row(const WaitPiece& w, int64_t origin_ns) {
  const std::string holder = std::to_string(w.holder_tid) + "," + std::to_string(w.holder_pid) + "," +
                             quoted(w.holder_tid == 0 ? "idle" : w.holder_name) + "," + holder_name(w.holder);
  return row(w.caused ? "caused" : "wait", w.tid, w.pid, w.name, std::to_string(w.cpu), us(w.start_ns, origin_ns), us(w.end_ns, origin_ns),
             holder);
}

std::string sleep_row(const SleepInterval& s, const std::string& name, int64_t origin_ns) {
  return row("sleep", s.tid, s.pid, name, "", us(s.start_ns, origin_ns), us(s.end_ns, origin_ns), ",,,");
}

std::string thread_row(pid_t tid, pid_t pid, const std::string& name, int64_t t_ns, ThreadChange change,
                       int64_t origin_ns) {
  const std::string t = us(t_ns, origin_ns);
  return row(change_kind(change), tid, pid, name, "", t, t, ",,,");
}

bool parse_interval_row(std::string_view line, IntervalRow* out) {
  if (line.empty() || line[0] == '#' || line.substr(0, 5) == "kind,") return false;
  std::vector<std::string> f;
  if (!split_csv(line, &f) || f.size() != 11) return false;
  IntervalRow r;
  r.kind = f[0];
  r.tid = static_cast<pid_t>(std::atol(f[1].c_str()));
  r.pid = static_cast<pid_t>(std::atol(f[2].c_str()));
  r.name = f[3];
  r.cpu = f[4].empty() ? -1 : std::atoi(f[4].c_str());
  if (!to_ns(f[5], &r.start_ns) || !to_ns(f[6], &r.end_ns)) return false;
  r.holder_tid = f[7].empty() ? 0 : static_cast<pid_t>(std::atol(f[7].c_str()));
  r.holder_pid = f[8].empty() ? 0 : static_cast<pid_t>(std::atol(f[8].c_str()));
  r.holder_name = f[9];
  r.holder = f[10];
  *out = std::move(r);
  return true;
}

}  // namespace threadburn::monitor
