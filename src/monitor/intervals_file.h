// The exact mode's intervals file (<out stem>.intervals.csv; docs/monitor.md,
// "The intervals file"): one row per interval a thread of the recorded tree
// ran on a CPU, per piece of a run-queue wait (the waiter, and who held the
// CPU meanwhile), per sleep, and per thread known at the start, born, renamed
// or gone. Times in us since the monitor's origin, to the ns. Writing and
// reading are pure so the gaps and the tests read what the monitor wrote.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "monitor/sched_model.h"

namespace threadburn::monitor {

inline constexpr const char* kIntervalsColumns =
    "kind,tid,pid,name,cpu,start_us,end_us,holder_tid,holder_pid,holder_name,holder";

// The first two lines: "# threadburn intervals 1; origin=monitor_start;
// source=sched_events; t0_unix_ms=..; t0_mono_ms=..; pid=..; monitor_pid=..",
// then the columns.
std::string intervals_header(int64_t unix0_ns, int64_t origin_ns, pid_t pid, pid_t self);

// Rows; times relative to origin_ns.
std::string run_row(const RunInterval& r, const std::string& name, int64_t origin_ns);
std::string wait_row(const WaitPiece& w, int64_t origin_ns);
std::string sleep_row(const SleepInterval& s, const std::string& name, int64_t origin_ns);
// kind: known, born, renamed, gone (start = end = t).
std::string thread_row(pid_t tid, pid_t pid, const std::string& name, int64_t t_ns, ThreadChange change,
                       int64_t origin_ns);
const char* change_kind(ThreadChange c);

// One row back. Times in ns since the origin.
struct IntervalRow {
  std::string kind;  // run, wait, caused, sleep, known, born, renamed, gone
  pid_t tid = 0, pid = 0;
  std::string name;
  int cpu = -1;
  int64_t start_ns = 0, end_ns = 0;
  pid_t holder_tid = 0, holder_pid = 0;
  std::string holder_name, holder;
};
// False on the comment, the column line or a malformed line.
bool parse_interval_row(std::string_view line, IntervalRow* out);

}  // namespace threadburn::monitor
