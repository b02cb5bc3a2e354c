// The scheduler's own record of every thread of the machine, through
// perf_event_open, one ring buffer per CPU, every record kept with its
// CLOCK_MONOTONIC time, CPU and current task:
//  - perf's context-switch records (PERF_RECORD_SWITCH_CPU_WIDE), each switch
//    twice: out, written by the outgoing task (with the next one, and whether
//    it stays runnable), and in, written by the incoming task (with the
//    previous one). The in record is what makes a switch from the idle task
//    visible: the sched_switch tracepoint fires in the outgoing task's
//    context, and events fired while the idle task runs are not delivered on
//    every kernel (they are not on the development VM);
//  - perf's task records: fork and exit (with process and thread ids), and
//    comm (a thread's new name: exec, prctl, pthread_setname_np);
//  - the kernel's sched tracepoints sched_wakeup, sched_wakeup_new and
//    sched_migrate_task, whose field offsets come from their format files
//    (core/tracefs.h), read when the tracer opens.
// System-wide records with the tracepoints' raw data need root (or
// CAP_PERFMON, or kernel.perf_event_paranoid = -1): open() says why when they
// are not allowed.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tracefs.h"

namespace threadburn {

enum class SchedKind : uint8_t { kSwitchOut, kSwitchIn, kWakeup, kWakeupNew, kMigrate, kFork, kExit, kComm };

struct SchedEvent {
  int64_t t_ns = 0;  // CLOCK_MONOTONIC
  int32_t cpu = 0;
  SchedKind kind = SchedKind::kSwitchOut;
  // The task the record is about: kSwitchOut the outgoing one, kSwitchIn the
  // incoming one, kFork the child, kExit the thread that exits, kComm the
  // renamed one; the tracepoints: the task current when they fired.
  pid_t pid = 0, tid = 0;
  // kSwitchOut: a = the next tid (0: the idle task), b = its pid; runnable =
  //   the outgoing task stays runnable (preempted, or it yielded)
  // kSwitchIn: a = the previous tid (0: the idle task), b = its pid
  // kWakeup, kWakeupNew: a = the woken tid, b = the CPU whose queue it joins, comm = its name
  // kMigrate: a = the tid, b = the CPU it moves to
  // kFork: a = the parent's tid, b = the parent's pid
  // kComm: comm = the new name; runnable = it came with an exec
  pid_t a = 0, b = 0;
  bool runnable = false;
  char comm[16] = {};
};

class SchedTracer {
 public:
  struct Options {
    int ring_pages = 256;  // per CPU (1 MiB with 4 KiB pages), a power of two
  };
  // Opens and enables the events on every online CPU. Availability::no with
  // one line (what is missing or not allowed, and what would allow it).
  static Availability open(std::unique_ptr<SchedTracer>* out, const Options& options);
  static Availability open(std::unique_ptr<SchedTracer>* out) { return open(out, Options{}); }
  ~SchedTracer();
  SchedTracer(const SchedTracer&) = delete;
  SchedTracer& operator=(const SchedTracer&) = delete;

  // The first instant every CPU was traced: events before it are dropped.
  int64_t start_ns() const { return start_ns_; }
  // Reads every ring and appends to *out, in time order, the events older
  // than before_ns (the others wait for the next call: another CPU's ring may
  // still receive earlier ones). Call stop() first to drain everything.
  void read(std::vector<SchedEvent>* out, int64_t before_ns);
  // Disables every event: after it, read(out, INT64_MAX) returns the rest.
  void stop();
  int64_t lost() const { return lost_; }        // records the kernel dropped (a full ring)
  int64_t records() const { return records_; }  // events decoded
  int cpus() const { return static_cast<int>(rings_.size()); }
  // "context switches, fork, exit, comm, sched_wakeup, ... on 2 CPUs (tracefs /sys/kernel/tracing)"
  std::string description() const;
  bool mounted_tracefs() const { return mounted_; }

 private:
  struct Ring {
    int cpu = 0;
    std::vector<int> fds;  // fds[0] owns the buffer, the others write into it
    uint8_t* base = nullptr;
    size_t length = 0;
  };
  struct Decoder;
  SchedTracer() = default;
  void drain(Ring* ring);
  void decode(const uint8_t* rec, size_t size);
  void decode_sample(const uint8_t* rec, size_t size);

  std::vector<Ring> rings_;
  std::unique_ptr<Decoder> decoder_;
  std::vector<SchedEvent> pending_;
  std::vector<uint8_t> scratch_;
  std::string tracefs_;
  int64_t start_ns_ = 0, lost_ = 0, records_ = 0;
  bool mounted_ = false;
};

}  // namespace threadburn
