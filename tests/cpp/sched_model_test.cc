// The exact mode's model of a process tree (src/monitor/sched_model.h)
// against made-up records whose answers are known by construction: who ran
// when, how long each thread waited and for whom, what the tree caused, and
// the records some kernels do not deliver (the idle task's, an exited
// thread's last switch-out naming no thread).
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "monitor/sched_model.h"

namespace threadburn::monitor {
namespace {

constexpr int64_t kMs = 1000000;
constexpr pid_t kRoot = 100, kMonitor = 999;

struct Recorded : Sink {
  std::vector<RunInterval> runs;
  std::vector<WaitPiece> waits;
  std::vector<SleepInterval> sleeps;
  std::vector<std::pair<pid_t, ThreadChange>> changes;
  void run(const RunInterval& r) override { runs.push_back(r); }
  void wait(const WaitPiece& w) override { waits.push_back(w); }
  void sleep(const SleepInterval& s) override { sleeps.push_back(s); }
  void thread(pid_t tid, pid_t, const std::string&, int64_t, ThreadChange c) override { changes.push_back({tid, c}); }
  int64_t cpu(pid_t tid) const {
    int64_t s = 0;
    for (const auto& r : runs) s += r.tid == tid ? r.end_ns - r.start_ns : 0;
    return s;
  }
  // tid's waits by holder tid.
  std::map<pid_t, int64_t> waited(pid_t tid, bool caused = false) const {
    std::map<pid_t, int64_t> out;
    for (const auto& w : waits) {
      if (w.tid == tid && w.caused == caused) out[w.holder_tid] += w.end_ns - w.start_ns;
    }
    return out;
  }
};

SchedEvent out(int64_t t, int cpu, pid_t pid, pid_t tid, pid_t next_pid, pid_t next, bool runnable) {
  SchedEvent e;
  e.t_ns = t;
  e.cpu = cpu;
  e.kind = SchedKind::kSwitchOut;
  e.pid = pid;
  e.tid = tid;
  e.b = next_pid;
  e.a = next;
  e.runnable = runnable;
  return e;
}

SchedEvent in(int64_t t, int cpu, pid_t pid, pid_t tid, pid_t prev_pid, pid_t prev) {
  SchedEvent e;
  e.t_ns = t;
  e.cpu = cpu;
  e.kind = SchedKind::kSwitchIn;
  e.pid = pid;
  e.tid = tid;
  e.b = prev_pid;
  e.a = prev;
  return e;
}

// out(prev -> next) then in(next), as perf writes them for one switch.
void switch_to(SchedModel* m, int64_t t, int cpu, pid_t prev_pid, pid_t prev, pid_t next_pid, pid_t next,
               bool runnable) {
  m->add(out(t, cpu, prev_pid, prev, next_pid, next, runnable));
  m->add(in(t + 1000, cpu, next_pid, next, prev_pid, prev));
}

SchedEvent wakeup(int64_t t, pid_t tid, int cpu) {
  SchedEvent e;
  e.t_ns = t;
  e.kind = SchedKind::kWakeup;
  e.a = tid;
  e.b = cpu;
  return e;
}

TEST(SchedModel, PreemptedThreadWaitsForWhoHeldItsCpuAndCausesTheOthersWait) {
  // One CPU: the tree's A runs, is preempted by B (another process) for 20
  // ms, runs 10 ms while B waits, then sleeps.
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "A", 0);
  m.add(in(1 * kMs, 0, kRoot, kRoot, 0, 0));              // A from idle at 1 ms
  switch_to(&m, 11 * kMs, 0, kRoot, kRoot, 200, 201, true);  // B preempts A at 11 ms
  switch_to(&m, 31 * kMs, 0, 200, 201, kRoot, kRoot, true);  // A back at 31 ms, B still runnable
  switch_to(&m, 41 * kMs, 0, kRoot, kRoot, 200, 201, false); // A sleeps at 41 ms, B runs
  m.finish(50 * kMs);
  // A ran [1, 11] and [31, 41]: a CPU is the next task's from the switch-out
  // record on (its switch-in record, 1 us later, changes nothing).
  EXPECT_EQ(r.cpu(kRoot), 20 * kMs);
  // A waited from 11 ms to its switch-in at 31 ms: B held the CPU.
  const auto a = r.waited(kRoot);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_EQ(a.at(201), 20 * kMs);
  EXPECT_EQ(r.waits[0].holder, Holder::kOther);
  // B waited from 31 ms to 41 ms while A held the CPU: the tree caused it.
  const auto b = r.waited(201, true);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b.at(kRoot), 10 * kMs);
  EXPECT_EQ(m.inconsistencies(), 0);
  // The sleep from 41 ms to the end.
  ASSERT_EQ(r.sleeps.size(), 1u);
  EXPECT_EQ(r.sleeps[0].start_ns, 41 * kMs);
  EXPECT_EQ(r.sleeps[0].end_ns, 50 * kMs);
}

TEST(SchedModel, WaitsAreSplitAtAMigrationBetweenTheHoldersOfBothCpus) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "A", 0);
  m.seed_thread(101, kRoot, "worker", 0);
  m.add(in(0, 0, 300, 300, 0, 0));        // X runs on CPU 0 from the start
  m.add(in(0, 1, kRoot, kRoot, 0, 0));    // A on CPU 1
  m.add(wakeup(2 * kMs, 101, 0));         // the worker queues behind X
  SchedEvent mig;
  mig.t_ns = 5 * kMs;
  mig.kind = SchedKind::kMigrate;
  mig.a = 101;
  mig.b = 1;
  m.add(mig);                             // moved behind A at 5 ms
  switch_to(&m, 8 * kMs, 1, kRoot, kRoot, kRoot, 101, false);
  m.finish(10 * kMs);
  const auto w = r.waited(101);
  EXPECT_EQ(w.at(300), 3 * kMs);  // [2, 5] behind X on CPU 0
  EXPECT_EQ(w.at(kRoot), 3 * kMs);  // [5, 8] behind A on CPU 1: its own process
  for (const auto& p : r.waits) {
    if (p.tid == 101 && p.holder_tid == kRoot) {
      EXPECT_EQ(p.holder, Holder::kSameProcess);
    }
  }
}

TEST(SchedModel, IdleRecordsMayBeMissingAndWakeupLatencyIsTheIdleTasks) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "A", 0);
  m.seed_thread(101, kRoot, "worker", 0);
  // A runs; the worker is woken onto idle CPU 1 and switched in 30 us later,
  // with no record from the idle task (only the worker's own switch-in).
  m.add(in(0, 0, kRoot, kRoot, 0, 0));
  m.add(out(1 * kMs, 1, 0, 0, 0, 0, true));  // CPU 1 goes idle (first record there)
  m.add(wakeup(2 * kMs, 101, 1));
  m.add(in(2 * kMs + 30000, 1, kRoot, 101, 0, 0));
  m.add(out(7 * kMs, 1, kRoot, 101, 0, 0, false));  // the worker sleeps
  // Woken again while nobody reports it (a wakeup handled in the idle task):
  // its sleep ends at its switch-in; no wait is invented.
  m.add(in(9 * kMs, 1, kRoot, 101, 0, 0));
  m.finish(10 * kMs);
  EXPECT_EQ(r.cpu(101), 5 * kMs - 30000 + 1 * kMs);
  const auto w = r.waited(101);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w.at(0), 30000);  // the idle CPU's wake-up latency
  EXPECT_EQ(r.waits[0].holder, Holder::kIdle);
  ASSERT_EQ(r.sleeps.size(), 1u);
  EXPECT_EQ(r.sleeps[0].start_ns, 7 * kMs);
  EXPECT_EQ(r.sleeps[0].end_ns, 9 * kMs);
  EXPECT_EQ(m.inconsistencies(), 0);
}

TEST(SchedModel, AThreadBornAndGoneWhileRecordedIsCountedWhole) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "A", 0);
  m.add(in(0, 0, kRoot, kRoot, 0, 0));
  SchedEvent fork;
  fork.t_ns = 1 * kMs;
  fork.kind = SchedKind::kFork;
  fork.pid = kRoot;  // a thread: the parent's process
  fork.tid = 105;
  fork.a = kRoot;
  fork.b = kRoot;
  m.add(fork);
  SchedEvent wn = wakeup(1 * kMs + 10000, 105, 1);
  wn.kind = SchedKind::kWakeupNew;
  m.add(wn);
  m.add(in(1 * kMs + 20000, 1, kRoot, 105, 0, 0));
  SchedEvent exit;
  exit.t_ns = 4 * kMs;
  exit.kind = SchedKind::kExit;
  exit.pid = kRoot;
  exit.tid = 105;
  m.add(exit);
  // Its last switch-out comes after its exit: it names no thread.
  m.add(out(4 * kMs + 5000, 1, kRoot, -1, 0, 0, false));
  m.finish(5 * kMs);
  EXPECT_EQ(r.cpu(105), 3 * kMs - 20000 + 5000);
  ASSERT_GE(r.changes.size(), 3u);
  EXPECT_EQ(r.changes[1], std::make_pair(pid_t{105}, ThreadChange::kBorn));
  EXPECT_EQ(r.changes.back(), std::make_pair(pid_t{105}, ThreadChange::kGone));
  EXPECT_EQ(r.waited(105).at(0), 10000);
}

TEST(SchedModel, ChildProcessesJoinTheTreeOthersDoNot) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "A", 0);
  SchedEvent fork;
  fork.kind = SchedKind::kFork;
  fork.t_ns = 1 * kMs;
  fork.pid = fork.tid = 400;  // a new process of the root
  fork.a = fork.b = kRoot;
  m.add(fork);
  fork.pid = fork.tid = 500;  // a new process of an unrelated one
  fork.a = fork.b = 450;
  m.add(fork);
  EXPECT_TRUE(m.in_tree(400));
  EXPECT_FALSE(m.in_tree(500));
  m.add(in(2 * kMs, 0, 400, 400, 0, 0));
  m.add(out(3 * kMs, 0, 400, 400, 500, 500, false));
  m.add(out(4 * kMs, 0, 500, 500, 0, 0, false));
  m.finish(5 * kMs);
  EXPECT_EQ(r.cpu(400), 1 * kMs);
  EXPECT_EQ(r.cpu(500), 0);
}

TEST(SchedModel, BeforeTheFirstRecordTheCpusOccupantRanSinceTheStart) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 10 * kMs, &r);
  m.seed_thread(kRoot, kRoot, "A", 10 * kMs);
  m.seed_thread(102, kRoot, "queued", 10 * kMs);
  // A switches out first: it ran since the start. The queued thread's first
  // record is its switch-in behind a task: it waited since the start, for
  // nobody known.
  m.add(out(15 * kMs, 0, kRoot, kRoot, kRoot, 102, false));
  m.finish(20 * kMs);
  EXPECT_EQ(r.cpu(kRoot), 5 * kMs);
  EXPECT_EQ(r.cpu(102), 5 * kMs);
  EXPECT_EQ(r.waited(102).at(-1), 5 * kMs);
}

TEST(SchedModel, AThreadAloneOnItsCpuWithoutARecordIsAssumedRunningFromTheStart) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "spinner", 0);
  m.assume_running(kRoot, 1);
  EXPECT_EQ(m.running(7 * kMs).size(), 1u);
  m.finish(8 * kMs);
  EXPECT_EQ(r.cpu(kRoot), 8 * kMs);
}

TEST(SchedModel, AContradictingRecordIsCountedAndRepaired) {
  Recorded r;
  SchedModel m(kRoot, kMonitor, 0, &r);
  m.seed_thread(kRoot, kRoot, "A", 0);
  m.add(in(1 * kMs, 0, kRoot, kRoot, 0, 0));
  // A's switch-out to B and B's switch-in were lost: C's switch-out names B.
  m.add(out(5 * kMs, 0, 600, 601, 0, 0, false));
  EXPECT_EQ(m.inconsistencies(), 1);
  m.finish(6 * kMs);
  EXPECT_EQ(r.cpu(kRoot), 0);  // its end is not known: no interval is made up
}

}  // namespace
}  // namespace threadburn::monitor
