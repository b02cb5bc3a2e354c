#include "monitor/monitor.h"

#include "core/clock.h"
#include "core/timeline.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace threadburn::monitor {
namespace {

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

Row make_row(const Snapshot& prev, const Snapshot& cur, int64_t unix0_ns, pid_t tid,
             const std::string& name, int64_t cpu_ns, const char* change) {
  Row r;
  // Floor, also for instants before 1970 (never, but keeps the math honest).
  const int64_t unix_ns = unix0_ns + cur.t_ns;
  r.unix_ms = unix_ns / 1000000 - (unix_ns % 1000000 < 0 ? 1 : 0);
  r.t_ms = ns_to_ms(cur.t_ns);
  r.dt_ms = ns_to_ms(cur.t_ns - prev.t_ns);
  r.tid = tid;
  r.name = name;
  r.cpu_ms = ns_to_ms(cpu_ns);
  r.cores = r.dt_ms > 0 ? r.cpu_ms / r.dt_ms : 0;
  r.threads = static_cast<int>(cur.threads.size());
  r.change = change;
  return r;
}

}  // namespace

std::vector<Row> interval_rows(const Snapshot& prev, const Snapshot& cur, int64_t unix0_ns) {
  std::map<pid_t, const ThreadStat*> before;
  for (const auto& s : prev.threads) before[s.tid] = &s;
  std::vector<Row> rows(1);
  int64_t total_ns = 0;
  for (const auto& s : cur.threads) {
    auto it = before.find(s.tid);
    const char* change = "";
    int64_t delta = s.cpu_ns;
    if (it == before.end() || s.cpu_ns < it->second->cpu_ns) {
      change = "new";
    } else {
      delta = s.cpu_ns - it->second->cpu_ns;
      if (s.name != it->second->name) change = "renamed";
    }
    if (it != before.end()) before.erase(it);
    total_ns += delta;
    if (delta > 0 || *change != '\0') {
      rows.push_back(make_row(prev, cur, unix0_ns, s.tid, s.name, delta, change));
    }
  }
  for (const auto& [tid, s] : before) {
    rows.push_back(make_row(prev, cur, unix0_ns, tid, s->name, 0, "gone"));
  }
  rows[0] = make_row(prev, cur, unix0_ns, kProcessTid, kProcessName, total_ns, "");
  return rows;
}

std::vector<Row> exit_rows(const Snapshot& last, int64_t unix0_ns) {
  std::vector<Row> out;
  for (const auto& t : last.threads) out.push_back(make_row(last, last, unix0_ns, t.tid, t.name, 0, "gone"));
  return out;
}

std::string recording_header(int64_t unix0_ns, pid_t pid, int64_t period_us, double threshold_cores,
                             const std::vector<std::pair<std::string, std::string>>& extra) {
  char t0[64];
  std::snprintf(t0, sizeof t0, "%.3f", static_cast<double>(unix0_ns / 1000) / 1000.0);
  TimelineMeta meta = {{"t0_unix_ms", t0}, {"pid", std::to_string(pid)}, {"period_us", std::to_string(period_us)}};
  meta.insert(meta.end(), extra.begin(), extra.end());
  return timeline_header("monitor_start", meta, threshold_cores);
}

std::string recording_row(const Row& r) {
  return timeline_row(r.t_ms, r.tid == kProcessTid ? std::string(kSeriesProcess) : thread_series(r.tid, r.name),
                      r.cores);
}

bool RecordingReader::read(const std::string& line, Row* row) {
  if (line.rfind("#", 0) == 0) {
    const auto at = line.find("t0_unix_ms=");
    if (at != std::string::npos) unix0_ms_ = std::strtod(line.c_str() + at + 11, nullptr);
    return false;
  }
  double t_ms = 0, cores = 0;
  std::string series;
  if (!parse_timeline_row(line, &t_ms, &series, &cores)) return false;
  if (series == kSeriesProcess) {
    if (t_ms != clock_ms_) interval_start_ms_ = clock_ms_;
    clock_ms_ = t_ms;
    row->tid = kProcessTid;
    row->name = kProcessName;
  } else {
    // thread:<tid>:<name>; the name may itself hold ':'.
    const auto colon = series.find(':', 7);
    if (series.rfind("thread:", 0) != 0 || colon == std::string::npos) return false;
    row->tid = static_cast<pid_t>(std::strtol(series.c_str() + 7, nullptr, 10));
    row->name = series.substr(colon + 1);
  }
  row->t_ms = t_ms;
  row->dt_ms = t_ms - interval_start_ms_;
  row->cores = cores;
  row->cpu_ms = cores * row->dt_ms;
  row->unix_ms = static_cast<int64_t>(std::floor(unix0_ms_ + t_ms + 1e-6));
  row->threads = 0;
  row->change.clear();
  return true;
}

void SummaryBuilder::close_bucket(ThreadTotals* t) const {
  if (t->bucket < 0) return;
  const double cores = t->bucket_cpu_ms / bucket_ms_;
  t->max_cores = std::max(t->max_cores, cores);
  if (cores > threshold_) {
    const double end = static_cast<double>(t->bucket + 1) * bucket_ms_;
    t->busy_ms += bucket_ms_;
    if (t->first_busy_ms < 0) t->first_busy_ms = end;
    t->last_busy_ms = end;
  }
  t->bucket = -1;
  t->bucket_cpu_ms = 0;
}

void SummaryBuilder::add_to(ThreadTotals* t, const Row& row) const {
  t->cpu_ms += row.cpu_ms;
  // Spread the interval (t - dt, t] over the buckets it overlaps: when the
  // monitor itself is starved (2 busy cores), one interval can span 30 ms.
  const double end = row.t_ms, start = std::max(0.0, row.t_ms - row.dt_ms);
  const int64_t last = std::max<int64_t>(0, static_cast<int64_t>(std::ceil(end / bucket_ms_ - 1e-9)) - 1);
  const int64_t first = std::min(last, static_cast<int64_t>(start / bucket_ms_ + 1e-9));
  for (int64_t k = first; k <= last; ++k) {
    const double lo = std::max(start, static_cast<double>(k) * bucket_ms_);
    const double hi = std::min(end, static_cast<double>(k + 1) * bucket_ms_);
    const double share = end > start ? row.cpu_ms * std::max(0.0, hi - lo) / (end - start)
                                     : (k == last ? row.cpu_ms : 0.0);
    if (k != t->bucket) close_bucket(t);
    t->bucket = k;
    t->bucket_cpu_ms += share;
  }
}

void SummaryBuilder::add(const Row& row) {
  if (row.tid == kProcessTid) {
    ++samples_;
    span_ms_ = std::max(span_ms_, row.t_ms);
    max_threads_ = std::max(max_threads_, row.threads);
    add_to(&process_, row);
    return;
  }
  ThreadTotals& t = threads_[row.tid];
  t.tid = row.tid;
  t.name = row.name;
  add_to(&t, row);
}

ThreadTotals SummaryBuilder::process() const {
  ThreadTotals p = process_;
  close_bucket(&p);
  return p;
}

std::vector<ThreadTotals> SummaryBuilder::threads() const {
  std::vector<ThreadTotals> out;
  for (const auto& [tid, t] : threads_) {
    out.push_back(t);
    close_bucket(&out.back());
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const ThreadTotals& a, const ThreadTotals& b) { return a.cpu_ms > b.cpu_ms; });
  return out;
}

std::string format_summary(const SummaryBuilder& s, size_t top) {
  std::ostringstream out;
  char line[256];
  auto row = [&](const std::string& tid, const std::string& name, const ThreadTotals& t) {
    const std::string last = t.last_busy_ms < 0 ? "-" : fixed(t.last_busy_ms / 1000, 3);
    std::snprintf(line, sizeof line, "  %-8s %-16s %10.1f %9.2f %9.1f %10s\n", tid.c_str(),
                  name.c_str(), t.cpu_ms, t.max_cores, t.busy_ms, last.c_str());
    out << line;
  };
  std::snprintf(line, sizeof line, "  %-8s %-16s %10s %9s %9s %10s\n", "tid", "name", "cpu_ms",
                "max_cores", "busy_ms", "last_busy_s");
  out << line;
  const auto threads = s.threads();
  ThreadTotals rest;
  size_t rest_n = 0;
  for (size_t i = 0; i < threads.size(); ++i) {
    if (i < top) {
      row(std::to_string(threads[i].tid), threads[i].name, threads[i]);
    } else {
      ++rest_n;
      rest.cpu_ms += threads[i].cpu_ms;
      rest.max_cores = std::max(rest.max_cores, threads[i].max_cores);
      rest.busy_ms += threads[i].busy_ms;
      rest.last_busy_ms = std::max(rest.last_busy_ms, threads[i].last_busy_ms);
    }
  }
  if (rest_n > 0) row("", "(" + std::to_string(rest_n) + " others)", rest);
  row("", kProcessName, s.process());
  std::snprintf(line, sizeof line,
                "rates over %g ms buckets; busy = buckets above %.2f cores; last_busy_s = end of "
                "the last such bucket\n",
                s.bucket_ms(), s.threshold());
  out << line;
  return out.str();
}

std::optional<Mark> parse_log_line(const std::string& line) {
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0, used = 0;
  // %n: where the timestamp ended; every field has a fixed width in the format.
  if (std::sscanf(line.c_str(), "%4d-%2d-%2d %2d:%2d:%2d,%3d%n", &y, &mo, &d, &h, &mi, &sec, &ms,
                  &used) != 7 ||
      used != 23) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60 || ms < 0 || ms > 999 ||
      h < 0 || mi < 0 || sec < 0) {
    return std::nullopt;
  }
  const std::string rest = line.substr(used);
  if (rest.rfind(" - ", 0) != 0) return std::nullopt;
  const auto sep = rest.find(" - ", 3);
  if (sep == std::string::npos) return std::nullopt;
  Mark m;
  m.name = rest.substr(3, sep - 3);
  m.event = rest.substr(sep + 3);
  while (!m.event.empty() && (m.event.back() == '\r' || m.event.back() == ' ')) m.event.pop_back();
  if (m.name.empty() || m.event.empty()) return std::nullopt;
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = sec;
  tm.tm_isdst = -1;  // let the zone rules decide, as Python's localtime did
  const time_t t = std::mktime(&tm);
  if (t == static_cast<time_t>(-1)) return std::nullopt;  // also 1969-12-31 23:59:59 UTC: fine
  m.unix_ms = static_cast<int64_t>(t) * 1000 + ms;
  return m;
}

std::vector<Mark> read_marks(std::istream& in) {
  std::vector<Mark> out;
  std::string line;
  while (std::getline(in, line)) {
    if (auto m = parse_log_line(line)) out.push_back(std::move(*m));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Mark& a, const Mark& b) { return a.unix_ms < b.unix_ms; });
  return out;
}

double MarkWindow::length_ms() const {
  const int64_t end = cut() ? end_unix_ms : horizon_unix_ms != INT64_MAX ? horizon_unix_ms : last_row_unix_ms;
  return static_cast<double>(std::max(end, mark.unix_ms) - mark.unix_ms);
}

TailBuilder::TailBuilder(const std::vector<Mark>& marks, const std::string& event, double threshold_cores,
                         pid_t marking_tid, double sleep_min_ms)
    : threshold_(threshold_cores), marking_(marking_tid), sleep_min_(sleep_min_ms) {
  for (size_t i = 0; i < marks.size(); ++i) {
    if (marks[i].event != event) continue;
    MarkWindow w;
    w.mark = marks[i];
    for (size_t j = i + 1; j < marks.size(); ++j) {
      if (marks[j].unix_ms > marks[i].unix_ms) {
        w.horizon_unix_ms = marks[j].unix_ms;
        break;
      }
    }
    windows_.push_back(std::move(w));
  }
  if (!windows_.empty()) quiet_since_ = static_cast<double>(windows_[0].mark.unix_ms);
}

void TailBuilder::close_scan() {
  MarkWindow& w = windows_[scan_];
  // Asleep from its last CPU into the next mark: no action of its own before
  // that mark to leave out (its wake-up is in the mark's own ms or after).
  const double last = static_cast<double>(w.horizon_unix_ms) - quiet_since_;
  if (last >= sleep_min_ && last >= longest_) {
    w.end_t_ms = std::numeric_limits<double>::infinity();
    w.end_unix_ms = INT64_MAX;
  }
  ++scan_;
  longest_ = 0;
  if (scan_ < windows_.size()) quiet_since_ = static_cast<double>(windows_[scan_].mark.unix_ms);
}

void TailBuilder::scan(const Row& row) {
  if (marking_ == kNoMarkingThread) return;
  // Rows of one time (a bin, a sample) share t_ms: the previous time is the
  // end of the last row before the current one began.
  if (row.t_ms != row_t_) {
    prev_t_ = row_t_;
    prev_u_ = row_u_;
    row_t_ = row.t_ms;
    row_u_ = static_cast<double>(row.unix_ms);
  }
  while (scan_ < windows_.size() && row.unix_ms >= windows_[scan_].horizon_unix_ms) close_scan();
  if (scan_ >= windows_.size()) return;
  MarkWindow& w = windows_[scan_];
  if (row.unix_ms <= w.mark.unix_ms || row.tid != marking_ || row.cpu_ms <= 0) return;
  // The marking thread used CPU in this row after its longest stretch
  // without CPU in the window so far: it woke from its sleep in this row
  // (a shorter stretch after it is a wait for a core, or a pause: no
  // sleep). The window ends with the rows that ended before this one began.
  const double quiet = static_cast<double>(row.unix_ms) - row.dt_ms - quiet_since_;
  if (quiet >= sleep_min_ && quiet > longest_ && prev_t_ >= 0) {
    longest_ = quiet;
    w.end_t_ms = prev_t_;
    w.end_unix_ms = static_cast<int64_t>(prev_u_);
  }
  quiet_since_ = static_cast<double>(row.unix_ms);
}

void TailBuilder::add(const Row& row) {
  // Strict at both ends: a row ending in the same ms as a mark mostly ran
  // before the mark was logged (a thread waking from sleep, then logging).
  while (next_ < windows_.size() && row.unix_ms >= windows_[next_].horizon_unix_ms) ++next_;
  // Windows are disjoint and sorted, so a row lands in at most one of them.
  if (next_ >= windows_.size()) return;
  MarkWindow& w = windows_[next_];
  if (row.unix_ms <= w.mark.unix_ms) return;
  if (row.t_ms > w.end_t_ms) return;  // the marking thread's next action, or the rows after it
  w.last_row_unix_ms = std::max(w.last_row_unix_ms, row.unix_ms);
  Tail& t = w.by_tid[row.tid];
  t.burn_ms += row.cpu_ms;
  if (row.cores > threshold_) {
    t.tail_ms = std::max(t.tail_ms, static_cast<double>(row.unix_ms - w.mark.unix_ms));
  }
}

void TailBuilder::add_wait(pid_t tid, double start_unix_ms, double end_unix_ms) {
  waits_known_ = true;
  // Windows are disjoint and sorted by mark: start at the last one whose
  // mark is before the wait's end, walk back while they can overlap.
  auto it = std::lower_bound(windows_.begin(), windows_.end(), end_unix_ms,
                             [](const MarkWindow& w, double t) { return static_cast<double>(w.mark.unix_ms) < t; });
  while (it != windows_.begin()) {
    MarkWindow& w = *--it;
    if (w.last_row_unix_ms == 0) continue;  // no rows: before the recording
    const double lo = std::max(start_unix_ms, static_cast<double>(w.mark.unix_ms));
    const double hi = std::min(end_unix_ms, static_cast<double>(w.mark.unix_ms) + w.length_ms());
    if (hi <= static_cast<double>(w.mark.unix_ms)) continue;
    if (hi > lo) {
      w.by_tid[tid].wait_ms += hi - lo;
      w.by_tid[kProcessTid].wait_ms += hi - lo;
    }
    if (start_unix_ms >= static_cast<double>(w.mark.unix_ms)) break;  // earlier windows end before it
  }
}

std::string format_tails(const TailBuilder& tails, const SummaryBuilder& summary,
                         const std::string& event, size_t top) {
  std::ostringstream out;
  char line[512];
  // Only windows the recording saw (a log appended to by earlier runs holds
  // marks from before the monitor started).
  std::vector<const MarkWindow*> seen;
  size_t cut = 0;
  double window_sum = 0;
  for (const auto& w : tails.windows()) {
    if (w.by_tid.empty()) continue;
    seen.push_back(&w);
    cut += w.cut() ? 1 : 0;
    window_sum += w.length_ms();
  }
  std::string window = "until the next mark";
  if (tails.marking_tid() != kNoMarkingThread) {
    std::snprintf(line, sizeof line,
                  "until the next mark, or until thread %d (it writes the marks) woke for it from a sleep "
                  "(>= %g ms without CPU): %zu of %zu windows ended there, mean %.1f ms",
                  static_cast<int>(tails.marking_tid()), tails.sleep_min_ms(), cut, seen.size(),
                  seen.empty() ? 0.0 : window_sum / static_cast<double>(seen.size()));
    window = line;
  }
  std::snprintf(line, sizeof line,
                "after '%s' (%zu events recorded; window = %s; tail = end of the last interval above %.2f cores):\n",
                event.c_str(), seen.size(), window.c_str(), summary.threshold());
  out << line;
  if (seen.empty()) return out.str();
  const bool waits = tails.waits_known();
  std::snprintf(line, sizeof line, "  %-8s %-16s %12s %11s %11s %12s%s\n", "tid", "name", "mean_tail_ms",
                "min_tail_ms", "max_tail_ms", "mean_burn_ms", waits ? " mean_wait_ms" : "");
  out << line;
  auto print = [&](pid_t tid, const std::string& name) {
    double sum_tail = 0, max_tail = 0, sum_burn = 0, sum_wait = 0, min_tail = std::numeric_limits<double>::infinity();
    for (const MarkWindow* w : seen) {
      auto it = w->by_tid.find(tid);
      const Tail t = it == w->by_tid.end() ? Tail{} : it->second;  // absent: no CPU in that window
      sum_tail += t.tail_ms;
      max_tail = std::max(max_tail, t.tail_ms);
      min_tail = std::min(min_tail, t.tail_ms);
      sum_burn += t.burn_ms;
      sum_wait += t.wait_ms;
    }
    const double n = static_cast<double>(seen.size());
    std::snprintf(line, sizeof line, "  %-8s %-16s %12.1f %11.1f %11.1f %12.1f",
                  tid == kProcessTid ? "" : std::to_string(tid).c_str(), name.c_str(),
                  sum_tail / n, min_tail, max_tail, sum_burn / n);
    out << line;
    if (waits) {
      std::snprintf(line, sizeof line, " %12.1f", sum_wait / n);
      out << line;
    }
    out << '\n';
  };
  const auto threads = summary.threads();
  for (size_t i = 0; i < threads.size() && i < top; ++i) print(threads[i].tid, threads[i].name);
  print(kProcessTid, kProcessName);
  return out.str();
}

}  // namespace threadburn::monitor
