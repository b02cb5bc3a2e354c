// What /proc says about threads: per-thread on-CPU time and run-queue wait from
// schedstat, names, and the process's context switches. schedstat is the only
// per-thread CPU source for *another* process (the monitor); for its own
// threads the core reads thread CPU clocks instead (thread_clocks.h), because
// schedstat of a running thread advances only at context switches and
// scheduler ticks.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace threadburn {

// The three fields of a schedstat line: "<on-cpu ns> <run-queue wait ns> <timeslices>".
struct SchedStat {
  int64_t cpu_ns = 0;
  int64_t run_delay_ns = 0;
  int64_t timeslices = 0;
};
std::optional<SchedStat> parse_schedstat(const char* text);

struct ThreadStat {
  pid_t tid = 0;
  std::string name;    // /proc/<pid>/task/<tid>/comm, without the newline
  int64_t cpu_ns = 0;  // schedstat's on-CPU time
  int64_t run_delay_ns = 0;  // schedstat's run-queue wait
};

// Every thread of pid (0 = this process), sorted by tid. Threads that exit
// while being read are skipped.
std::vector<ThreadStat> read_threads(pid_t pid = 0);
// Reads every thread of a process again and again, cheaply: the task list and
// the names at most every relist_every reads, each thread's schedstat through a
// file kept open (pread: ~0.3 us instead of ~1.5 us for open/read/close).
class TaskReader {
 public:
  explicit TaskReader(pid_t pid, int relist_every = 10);
  ~TaskReader();
  TaskReader(const TaskReader&) = delete;
  TaskReader& operator=(const TaskReader&) = delete;
  // Sorted by tid; a thread that exited since the last read is left out.
  std::vector<ThreadStat> read();

 private:
  struct Task {
    pid_t tid;
    int fd;
    std::string name;
  };
  void relist();
  pid_t pid_;
  int relist_every_, reads_ = 0;
  std::vector<Task> tasks_;
};

// Threads alive in pid (0 = this process): entries of /proc/<pid>/task.
int count_threads(pid_t pid = 0);
// A thread's name (comm), "" when it is gone.
std::string thread_name(pid_t pid, pid_t tid);
// Whether /proc/<pid> exists and its threads' schedstat can be read.
Availability process_readable(pid_t pid);
// The state letter of /proc/<pid>/stat (R, S, D, Z, X, ...); '\0' when gone.
char process_state(pid_t pid);
// The real uid of a process (/proc/<pid>/status), -1 when gone.
int process_uid(pid_t pid);
// The process (thread group) a thread belongs to (/proc/<tid>/status's
// Tgid), -1 when it is gone.
pid_t process_of_thread(pid_t tid);
// The CPU a thread last ran on (/proc/<pid>/task/<tid>/stat), -1 when gone.
int thread_last_cpu(pid_t pid, pid_t tid);
// The child processes of every thread of pid (/proc/<pid>/task/*/children).
std::vector<pid_t> child_processes(pid_t pid);

// Whole-process context switches from getrusage(RUSAGE_SELF), summed over threads.
struct CtxSwitches {
  int64_t voluntary = 0;
  int64_t involuntary = 0;
};
CtxSwitches process_ctxsw();

}  // namespace threadburn
