// What /proc says about the threads of a process: per-thread on-CPU time from
// schedstat (ns resolution; /proc/.../stat utime is in 10 ms ticks, too coarse
// for burns that last a few ms), names, and context switches.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace threadburn {

struct ThreadStat {
  pid_t tid = 0;
  std::string name;        // /proc/<pid>/task/<tid>/comm, without the newline
  int64_t cpu_ns = 0;      // first field of schedstat: time on CPU
  int64_t vol_ctxsw = -1;  // voluntary_ctxt_switches, -1 when not read
  int64_t invol_ctxsw = -1;
};

// First field of a schedstat line ("<on-cpu ns> <wait ns> <timeslices>").
std::optional<int64_t> parse_schedstat(const std::string& text);
// voluntary_ctxt_switches / nonvoluntary_ctxt_switches from a status file.
void parse_status_ctxsw(const std::string& text, int64_t* vol, int64_t* invol);

// Every thread of pid (0 = this process). Threads that exit while being read are
// skipped. with_ctxsw also reads each thread's status file (slower).
std::vector<ThreadStat> read_threads(pid_t pid = 0, bool with_ctxsw = false);
// Reads one thread; nullopt when it is gone or unreadable.
std::optional<ThreadStat> read_thread(pid_t pid, pid_t tid, bool with_ctxsw = false);
// Threads alive in pid (0 = this process): entries of /proc/<pid>/task.
int count_threads(pid_t pid = 0);
// Whether /proc/<pid> exists and its tasks can be read; *why gets the reason.
bool process_readable(pid_t pid, std::string* why);
pid_t current_tid();

// CPU used by each thread between two snapshots; a thread born in between
// counts from zero, one that died is dropped (its CPU is in the process total).
struct ThreadDelta {
  pid_t tid = 0;
  std::string name;
  int64_t cpu_ns = 0;
};
std::vector<ThreadDelta> thread_deltas(const std::vector<ThreadStat>& before,
                                       const std::vector<ThreadStat>& after);

// Whole-process context switches from getrusage(RUSAGE_SELF), summed over threads.
struct CtxSwitches {
  int64_t voluntary = 0;
  int64_t involuntary = 0;
};
CtxSwitches process_ctxsw();

}  // namespace threadburn
