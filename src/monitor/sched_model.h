// What the scheduler's events say about a process tree (docs/monitor.md,
// "Exact mode"): every interval a thread of the tree spent on a CPU, every
// stretch it was runnable but not running (a run-queue wait) split by who
// held that CPU meanwhile, every stretch it slept, and the waits of any other
// thread while a thread of the tree held its CPU (the wait the tree causes).
// A pure state machine over SchedEvents in time order (core/sched_trace.h):
// unit-tested with made-up events whose answers are known.
//
// Per thread it keeps running (on which CPU, since when), runnable (in which
// CPU's queue, since when) or asleep; per CPU who runs now and who waits in
// its queue. A switch on a CPU ends its occupant's interval; each waiter queued
// there is charged the part of its wait the occupant held the CPU. A thread
// not seen since the recording started was, at the start, asleep if its first
// record is a wakeup (or a switch-in from the idle task), on a CPU if it is
// a switch-out, runnable if a switch-in behind a task. Records written in the
// idle task's context may be missing (core/sched_trace.h): a switch-in
// without its switch-out from the idle task, and a sleep that ends without
// its wakeup, are read as such, not as lost records.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/sched_trace.h"

namespace threadburn::monitor {

// Who held the CPU a thread waited for, seen from the tree: a thread of the
// waiter's own process, of another process of the tree, of a process outside
// it, nobody (the idle task: the wait was the wake-up's latency), the monitor
// itself, or not known (before the first switch on that CPU).
enum class Holder : uint8_t { kSameProcess, kTree, kOther, kIdle, kMonitor, kUnknown };
constexpr int kHolders = 6;
const char* holder_name(Holder h);  // same_process, tree, other, idle, monitor, unknown

struct RunInterval {
  pid_t tid = 0, pid = 0;
  int cpu = 0;
  int64_t start_ns = 0, end_ns = 0;
};

struct WaitPiece {
  pid_t tid = 0, pid = 0;  // the waiter
  std::string name;
  int cpu = 0;             // the CPU whose queue it was in
  int64_t start_ns = 0, end_ns = 0;
  pid_t holder_tid = 0, holder_pid = 0;  // who ran there meanwhile (0: idle; -1: unknown)
  std::string holder_name;
  Holder holder = Holder::kUnknown;
  // The waiter is outside the tree and a thread of the tree held its CPU: a
  // wait the tree caused (holder is then kTree).
  bool caused = false;
};

// Off CPU and not runnable: from the switch-out to the wakeup.
struct SleepInterval {
  pid_t tid = 0, pid = 0;
  int64_t start_ns = 0, end_ns = 0;
};

enum class ThreadChange : uint8_t { kKnown, kBorn, kRenamed, kGone };

class Sink {
 public:
  virtual ~Sink() = default;
  virtual void run(const RunInterval& r) = 0;
  // Pieces of waits of the tree's threads, and of other threads' waits while
  // a thread of the tree held the CPU.
  virtual void wait(const WaitPiece& w) = 0;
  virtual void sleep(const SleepInterval& s) = 0;
  // A thread of the tree: known at the start, born, renamed or gone.
  virtual void thread(pid_t tid, pid_t pid, const std::string& name, int64_t t_ns, ThreadChange change) = 0;
};

class SchedModel {
 public:
  // root: the process whose tree is recorded (its descendants join it as they
  // fork); self: the monitor's own pid; start_ns: the tracer's start.
  SchedModel(pid_t root, pid_t self, int64_t start_ns, Sink* sink);

  // What /proc says at the start: a process of the tree (the root and its
  // descendants alive then), and each of their threads.
  void seed_process(pid_t pid) { tree_.insert(pid); }
  // at_ns: when /proc was read (a fork record older than that made this thread).
  void seed_thread(pid_t tid, pid_t pid, const std::string& name, int64_t at_ns);
  // Resolve a thread's process and name when the records never said them
  // (the recording's end; a thread not seen since the start); default: none.
  void set_lookup(std::function<pid_t(pid_t)> pid_of, std::function<std::string(pid_t)> name_of) {
    lookup_ = std::move(pid_of);
    name_lookup_ = std::move(name_of);
  }

  void add(const SchedEvent& e);
  // A thread of the tree no event has named yet, found to have run nearly
  // all the time since the start (its schedstat): it has been on CPU c since
  // the start without a switch (a lone spinner on an idle CPU).
  void assume_running(pid_t tid, int c);
  // The intervals of the tree's threads still on a CPU, from their start to now.
  std::vector<RunInterval> running(int64_t now_ns) const;
  // Ends the recording at end_ns: open intervals, waits and sleeps end there.
  void finish(int64_t end_ns);

  bool in_tree(pid_t pid) const { return pid > 0 && tree_.count(pid) > 0; }
  // Whether any event named this thread since the start.
  bool seen(pid_t tid) const;
  // Events that contradicted the state (a lost event, a thread switched in
  // while believed elsewhere): each is counted, the state repaired.
  int64_t inconsistencies() const { return inconsistent_; }
  // Switches and wakeups inferred because the kernel did not report them
  // (those in the idle task's context, and a few other tasks' on some
  // kernels): expected, unlike inconsistencies.
  int64_t unreported() const { return unreported_; }
  // Wait pieces whose waiter's or holder's process never became known.
  int64_t unresolved() const { return unresolved_; }

 private:
  enum class State : uint8_t { kUnseen, kRunning, kRunnable, kAsleep };
  struct Task {
    pid_t pid = -1;
    std::string name;
    State state = State::kUnseen;
    int cpu = -1;          // running: its CPU; runnable: the CPU whose queue holds it
    int64_t since = 0;     // start of the current interval, wait or sleep
    int64_t seg = 0;       // runnable: start of the part of the wait not yet charged
    bool slept = false;    // asleep since a switch-out seen (not merely unseen, or new)
    bool exiting = false;
    bool announced = false;
    int64_t seeded_ns = -1;  // when /proc named it at the start (-1: it did not)
  };
  struct Cpu {
    pid_t occupant = -1;  // -1: not known before the first switch on it
    int64_t since = 0;
    std::vector<pid_t> queue;
  };

  Task& task(pid_t tid);
  Cpu& cpu(int c);
  void learn(pid_t tid, pid_t pid);
  void name(pid_t tid, const char* comm, int64_t t);
  void announce(pid_t tid, Task& t, int64_t at, ThreadChange change);
  void dequeue(pid_t tid, Task& t);
  // Charges waiter w the part of its wait on CPU c from max(its uncharged
  // start, the holder's start there) to t, to the holder (0: idle, -1: unknown).
  void charge(pid_t w, int c, int64_t t, pid_t holder, int64_t holder_since);
  void piece(pid_t w, int c, int64_t from, int64_t to, pid_t holder);
  void emit(WaitPiece p);
  void release_parked(pid_t tid);
  // The task p leaves CPU c at t (its interval began at from), runnable or not.
  void leave(pid_t p, int c, int64_t from, int64_t t, bool runnable);
  // Task n (0: the idle task) gets CPU c at t.
  void enter(pid_t n, int c, int64_t t, bool from_idle);
  void on_out(const SchedEvent& e);
  void on_in(const SchedEvent& e);
  void on_wakeup(const SchedEvent& e);
  void on_migrate(const SchedEvent& e);

  pid_t self_;
  int64_t start_ns_;
  Sink* sink_;
  std::set<pid_t> tree_;
  std::unordered_map<pid_t, Task> tasks_;
  std::vector<Cpu> cpus_;
  std::map<pid_t, std::vector<WaitPiece>> parked_;   // pieces waiting for a process id
  std::function<pid_t(pid_t)> lookup_;
  std::function<std::string(pid_t)> name_lookup_;
  int64_t inconsistent_ = 0, unreported_ = 0, unresolved_ = 0;
};

}  // namespace threadburn::monitor
