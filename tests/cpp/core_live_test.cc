// The core against real threads whose answers are known. Every bound here is
// a CPU-time fact, or is derived from what the test measured first (the cost
// of a wake-up, the times the sampler really sampled), never from how fast
// this machine happened to be: the tests must hold on a 3x slower machine and
// with another process keeping a core busy (docs/design.md, "Known answers").
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <thread>
#include <utility>

#include "core/barrier.h"
#include "core/burn.h"
#include "core/clock.h"
#include "core/step_probe.h"
#include "core/procfs.h"
#include "core/sampler.h"
#include "core/thread_clocks.h"

namespace threadburn {
namespace {

constexpr int64_t kMs = 1000000;

// A thread that blocks on a condition variable until told to act: asleep in
// the kernel in between, so it uses no CPU at all while it waits.
class Helper {
 public:
  explicit Helper(ThreadClass cls = ThreadClass::kOther) {
    thread_ = std::thread([this, cls] {
      mark_current_thread(cls);
      tid_ = current_tid();
      std::unique_lock<std::mutex> lock(mu_);
      for (;;) {
        cv_.wait(lock, [&] { return orders_ > done_ || quit_; });
        if (quit_) return;
        const int64_t spin = spin_ns_;
        lock.unlock();
        const int64_t w0 = wall_ns();  // the wall times bracket the CPU times
        const int64_t c0 = thread_cpu_ns();
        if (spin > 0) spin_cpu_ns(spin);
        const int64_t c1 = thread_cpu_ns();
        const int64_t w1 = wall_ns();
        lock.lock();
        spin_wall_begin_ns_ = w0, spin_wall_end_ns_ = w1, spin_cpu_ns_ = c1 - c0;
        ++done_;
        cv_.notify_all();
      }
    });
    while (tid_.load() == 0) std::this_thread::yield();
  }
  ~Helper() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Wakes the helper to spin `ns` of its own CPU; does not wait.
  void order_spin(int64_t ns) {
    std::lock_guard<std::mutex> lock(mu_);
    spin_ns_ = ns;
    ++orders_;
    cv_.notify_all();
  }
  void wait_done() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return done_ == orders_; });
  }
  pid_t tid() const { return tid_.load(); }
  int64_t spin_wall_begin_ns() const { return spin_wall_begin_ns_; }
  int64_t spin_wall_end_ns() const { return spin_wall_end_ns_; }
  int64_t spin_cpu() const { return spin_cpu_ns_; }
  int64_t cpu_now() const { return clock_ns(thread_cpu_clock_id(tid_.load())); }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int orders_ = 0, done_ = 0;
  bool quit_ = false;
  int64_t spin_ns_ = 0, spin_wall_begin_ns_ = 0, spin_wall_end_ns_ = 0, spin_cpu_ns_ = 0;
  std::atomic<pid_t> tid_{0};
  std::thread thread_;
};

// A helper's wake-up and re-block cost a few us of CPU, ~50 us at worst on a
// VM: never a millisecond. Bounds that must allow for one use this, a
// CPU-time fact with 20x to spare, instead of a timing of this machine.
constexpr int64_t kWakeBoundNs = kMs;

TEST(Clock, ThreadCpuIgnoresSleepAndOtherThreads) {
  // A sleeping thread uses no CPU beyond its syscalls (~us); a wrong clock
  // (monotonic, process) would advance by the 20 ms slept or spun elsewhere.
  Helper h;
  const int64_t c0 = thread_cpu_ns(), p0 = process_cpu_ns();
  h.order_spin(20 * kMs);
  h.wait_done();  // blocked meanwhile
  sleep_for_ns(20 * kMs);
  EXPECT_LT(thread_cpu_ns() - c0, 2 * kMs);
  EXPECT_GE(process_cpu_ns() - p0, 20 * kMs);  // the helper's spin is the process's
  EXPECT_GE(h.spin_wall_end_ns() - h.spin_wall_begin_ns(), h.spin_cpu());  // CPU never outruns the wall
}

// Reads a blocked helper's clock around `read` until it did not move, so the
// totals and the helper's own clock describe the same instant.
ClassTotals read_still(ThreadClocks* clocks, const Helper& h, int64_t* helper_cpu) {
  for (;;) {
    const int64_t before = h.cpu_now();
    const ClassTotals t = clocks->read(true);
    *helper_cpu = h.cpu_now();
    if (*helper_cpu == before) return t;
    sleep_for_ns(kMs);
  }
}

TEST(ThreadClocks, SumByClassMatchesEachThreadsOwnClock) {
  mark_current_thread(ThreadClass::kMain);  // else this thread is an "other" too
  Helper loader(ThreadClass::kLoader), other;
  ThreadClocks clocks;
  clocks.relist();
  int64_t l0 = 0, l1 = 0, o0 = 0, o1 = 0;
  sleep_for_ns(2 * kMs);  // both helpers blocked
  read_still(&clocks, other, &o0);
  const ClassTotals a = read_still(&clocks, loader, &l0);
  loader.order_spin(15 * kMs);
  loader.wait_done();
  other.order_spin(5 * kMs);
  other.wait_done();
  sleep_for_ns(2 * kMs);
  read_still(&clocks, other, &o1);
  const ClassTotals b = read_still(&clocks, loader, &l1);
  const int64_t loader_ns = b.cpu_ns[index_of(ThreadClass::kLoader)] - a.cpu_ns[index_of(ThreadClass::kLoader)];
  const int64_t other_ns = b.cpu_ns[index_of(ThreadClass::kOther)] - a.cpu_ns[index_of(ThreadClass::kOther)];
  // Exact: the totals are the helpers' own clocks, each in its class ...
  EXPECT_EQ(loader_ns, l1 - l0);
  EXPECT_EQ(other_ns, o1 - o0);
  EXPECT_EQ(b.cpu_ns[index_of(ThreadClass::kOmp)] - a.cpu_ns[index_of(ThreadClass::kOmp)], 0);
  EXPECT_EQ(b.others_cpu_ns() - a.others_cpu_ns(), loader_ns + other_ns);  // main is no "other"
  // ... and those clocks are the right ones: each covers the spin its thread
  // timed itself, plus a wake-up.
  EXPECT_GE(loader_ns, loader.spin_cpu());
  EXPECT_LE(loader_ns, loader.spin_cpu() + kWakeBoundNs);
  EXPECT_GE(other_ns, other.spin_cpu());
  EXPECT_LE(other_ns, other.spin_cpu() + kWakeBoundNs);
  EXPECT_GE(b.threads, 3);
}

// Run-queue wait: the class totals are each thread's own schedstat run_delay.
// The helper shares one CPU with a spinner while it spins, so it must wait.
int64_t run_delay(pid_t tid) {
  std::string text;
  FILE* f = std::fopen(("/proc/self/task/" + std::to_string(tid) + "/schedstat").c_str(), "r");
  char buf[128] = {};
  if (f) { (void)!std::fread(buf, 1, sizeof buf - 1, f); std::fclose(f); }
  return parse_schedstat(buf).value().run_delay_ns;
}

TEST(ThreadClocks, WaitIsEachThreadsOwnRunDelay) {
  mark_current_thread(ThreadClass::kMain);
  Helper loader(ThreadClass::kLoader);
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(0, &one);
  ASSERT_EQ(sched_setaffinity(loader.tid(), sizeof one, &one), 0);
  std::atomic<bool> stop{false};
  std::thread hog([&] {
    sched_setaffinity(0, sizeof one, &one);
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  ThreadClocks clocks;
  clocks.relist();
  int64_t c = 0;
  const ClassTotals a = read_still(&clocks, loader, &c);
  const int64_t d0 = run_delay(loader.tid());
  loader.order_spin(10 * kMs);
  loader.wait_done();
  sleep_for_ns(2 * kMs);
  const ClassTotals b = read_still(&clocks, loader, &c);
  const int64_t d1 = run_delay(loader.tid());
  stop = true;
  hog.join();
  EXPECT_GT(d1 - d0, kMs) << "the helper never waited: the test means nothing";
  EXPECT_EQ(b.wait_ns[index_of(ThreadClass::kLoader)] - a.wait_ns[index_of(ThreadClass::kLoader)], d1 - d0);
}

// A kLoader thread that spins spin_ns of its own CPU, then exits; read
// before its spin (after a relist) and after its exit. {CPU the loader class
// gained between the two reads, the thread's own measure of its spin}.
std::pair<int64_t, int64_t> exited_spinner(ThreadClocks* clocks, int64_t spin_ns) {
  std::atomic<int64_t> own{-1};
  std::atomic<bool> go{false};
  std::thread t([&] {
    mark_current_thread(ThreadClass::kLoader);
    while (!go) std::this_thread::yield();
    const int64_t c0 = thread_cpu_ns();
    spin_cpu_ns(spin_ns);
    own = thread_cpu_ns() - c0;
  });
  sleep_for_ns(kMs);
  clocks->relist();
  const int64_t before = clocks->read().cpu_ns[index_of(ThreadClass::kLoader)];
  go = true;
  t.join();  // the thread exits: its clock read fails from now on
  const int64_t after = clocks->read().cpu_ns[index_of(ThreadClass::kLoader)];
  return {after - before, own.load()};
}

TEST(ThreadClocks, KeepsAnExitedThreadsCpu) {
  ThreadClocks clocks;
  const auto [gained, own] = exited_spinner(&clocks, 20 * kMs);
  // Recovered from the process clock. Only this thread runs at the read, and
  // the kernel settles its own and an exited thread's time exactly, so the
  // recovery is exact up to what the thread spent after its last self-read
  // (returning, exiting: tens of us).
  EXPECT_GE(gained, own);
  EXPECT_LE(gained, own + kMs);
  const int64_t after = clocks.read().cpu_ns[index_of(ThreadClass::kLoader)];
  EXPECT_EQ(clocks.read().cpu_ns[index_of(ThreadClass::kLoader)], after);  // ... and it stays
  const auto threads = clocks.threads();
  const auto gone = std::find_if(threads.begin(), threads.end(), [](const ThreadCpu& c) { return !c.alive; });
  ASSERT_NE(gone, threads.end());
  EXPECT_EQ(gone->cls, ThreadClass::kLoader);
  EXPECT_EQ(thread_class(gone->tid), ThreadClass::kOther);  // its tid is free for a new thread
}

// The same while another thread runs on the other core at every read: the
// process clock settles a thread running elsewhere only at ticks (4 ms at
// HZ=250), while each thread's own clock is current. A tail taken as the
// change of (process clock - the live threads' own clocks) handed the
// spinner's unsettled time, up to a tick, to the exited thread, or took it
// away (a CPython pin thread came out 2.3 ms short of its own 250 ms): the
// tail must come from the kernel's accounted runtimes on both sides.
TEST(ThreadClocks, KeepsAnExitedThreadsCpuWhileAnotherRuns) {
  std::atomic<bool> stop{false};
  std::thread spinner([&] {
    mark_current_thread(ThreadClass::kOmp);
    // No clock reads while spinning: reading its own clock would settle its
    // runtime each time and hide the lag.
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  ThreadClocks clocks;
  for (int round = 0; round < 8; ++round) {
    const auto [gained, own] = exited_spinner(&clocks, 10 * kMs);
    // Not seen before the relist: the thread's yields before go (its own clock
    // counts them at the first read, before 'before'); after it, what it spent
    // returning and exiting, tens of us.
    EXPECT_GE(gained, own) << "round " << round;
    EXPECT_LE(gained, own + kMs / 2) << "round " << round;
  }
  stop = true;
  spinner.join();
}

// One step that releases a helper which then spins spin_ms of CPU (0: it stays blocked).
struct StepRun {
  StepRecord r;
  int64_t helper_spin = 0, helper_end_ns = 0;
  int64_t helper_gap_cpu = 0;  // the helper's CPU in the gap, per the probe's reads
  std::vector<BurnSample> window;
};

int64_t cpu_of(const std::vector<ThreadCpu>& threads, pid_t tid) {
  for (const auto& t : threads) {
    if (t.tid == tid) return t.cpu_ns;
  }
  return -1;
}

StepRun step_with_helper(int64_t spin_ms, int64_t gap_ms) {
  BurnSampler sampler;
  Helper helper;
  ProbeOptions opts;
  opts.thread_breakdown = true;
  StepProbe probe(&sampler, opts);
  probe.begin();
  spin_cpu_ns(5 * kMs);  // the step's own work, on the main thread
  probe.end();
  if (spin_ms > 0) helper.order_spin(spin_ms * kMs);  // the helper burns from the step's end
  StepRun out;
  out.r = probe.gap(gap_ms * kMs);
  if (spin_ms > 0) helper.wait_done();
  out.helper_spin = helper.spin_cpu();
  out.helper_end_ns = helper.spin_wall_end_ns();
  if (gap_ms > 0) out.helper_gap_cpu = cpu_of(out.r.at_gap_end, helper.tid()) - cpu_of(out.r.at_end, helper.tid());
  out.window = sampler.window(out.r.step_end_ns, out.r.gap_end_ns + kMs);
  return out;
}

TEST(Residual, SpinOf30msShowsAs30msResidualAndItsTail) {
  // 200 ms: the helper's 30 ms of CPU ends inside the gap even if it must
  // share its core with another process.
  const StepRun run = step_with_helper(30, 200);
  const StepRecord& r = run.r;
  // CPU-time facts: the main thread spun 5 ms of CPU in the step, and nothing
  // else ran then (the sampler is not counted); the helper spun 30 ms of CPU
  // after it, plus one wake-up, and the residual is its CPU and nothing else.
  EXPECT_GE(r.step_cpu_ms(), 5.0);
  EXPECT_LE(r.step_cpu_ms(), 5.0 + ns_to_ms(kWakeBoundNs));
  ASSERT_GE(run.helper_spin, 30 * kMs) << "the helper did not finish its spin within the gap";
  EXPECT_NEAR(r.residual_cpu_ms(), ns_to_ms(run.helper_gap_cpu), 1e-9) << "a thread other than the helper counted";
  EXPECT_GE(run.helper_gap_cpu, run.helper_spin);
  EXPECT_LE(run.helper_gap_cpu, run.helper_spin + kWakeBoundNs);
  EXPECT_NEAR(r.residual_cpu_ms(), r.gap_class_ms(ThreadClass::kOther), 1e-9);
  EXPECT_GE(r.gap_ms, 200.0);  // a sleep never ends early
  EXPECT_GE(r.step_ms, 5.0);   // nor does CPU outrun the wall
  // The tail, from its documented rule (src/core/burn.h, docs/design.md "The
  // tail"): it ends at the end of a burning sampling interval, never after
  // the first sample that follows the end of the helper's spin (timed by the
  // helper itself): nothing burns after that.
  ASSERT_TRUE(r.has_tail);
  int64_t after = r.gap_end_ns;
  for (const BurnSample& s : run.window) {
    if (s.t_ns >= run.helper_end_ns) after = std::min(after, s.t_ns);
  }
  EXPECT_LE(r.tail_ms, ns_to_ms(after - r.step_end_ns) + 1e-6);
  // It may end before the helper's spin did: a helper preempted near its end
  // burns its last microseconds in intervals the rule calls quiet. But every
  // interval after the tail is quiet by the rule: its rate is at most
  // kTailThresholdCores, or the rate over its kTailSmoothMs neighbourhood is.
  // So the CPU burned after the tail is at most the threshold times, per
  // interval, the longer of the interval and its neighbourhood; a tail placed
  // too early leaves more than that behind it.
  const std::vector<BurnPoint> points = burn_rates(run.window, r.step_end_ns);
  double after_tail_ms = 0, allowed_ms = 0;
  for (size_t i = 1; i < points.size(); ++i) {
    if (points[i].t_ms <= r.tail_ms + 1e-9) continue;
    const double d = points[i].t_ms - points[i - 1].t_ms;
    double neighbourhood = 0;
    for (size_t j = 1; j < points.size(); ++j) {
      if (std::fabs(points[j].t_ms - points[i].t_ms) <= kTailSmoothMs / 2) neighbourhood += points[j].t_ms - points[j - 1].t_ms;
    }
    after_tail_ms += points[i].others_cores * d;
    allowed_ms += kTailThresholdCores * std::max(d, neighbourhood);
  }
  EXPECT_LE(after_tail_ms, allowed_ms + 1e-6) << "the tail (" << r.tail_ms << " ms) ends before a burning interval";
  // ... and the samples around it are at most the fast period apart, unless
  // the machine kept the sampler waiting (the window shows it).
  EXPECT_GT(r.sampler_cpu_ms, 0.0);
}

TEST(Residual, BlockedHelperShowsNothing) {
  // Nothing but the main thread and the sampler runs in this gap: the probe
  // must report no burn at all. (One wake-up would already cost >= 10 us.)
  const StepRun run = step_with_helper(0, 100);
  EXPECT_LT(run.r.residual_cpu_ms(), 0.01);
  EXPECT_EQ(run.r.tail_ms, 0.0);
  EXPECT_GE(run.r.gap_ms, 100.0);
}

TEST(Residual, BackToBackStepHasNoGap) {
  const StepRun run = step_with_helper(0, 0);
  EXPECT_EQ(run.r.gap_ms, 0.0);
  EXPECT_EQ(run.r.residual_cpu_ms(), 0.0);
  EXPECT_EQ(run.r.tail_ms, 0.0);
}

TEST(Residual, BreakdownHasTheBurningThreadFromItsOwnClock) {
  BurnSampler sampler;
  Helper helper;
  ProbeOptions opts;
  opts.thread_breakdown = true;
  StepProbe probe(&sampler, opts);
  probe.begin();
  probe.end();
  helper.order_spin(20 * kMs);
  const StepRecord r = probe.gap(150 * kMs);
  helper.wait_done();
  int64_t at_end = -1, at_gap_end = -1;
  for (const auto& t : r.at_end) at_end = t.tid == helper.tid() ? t.cpu_ns : at_end;
  for (const auto& t : r.at_gap_end) at_gap_end = t.tid == helper.tid() ? t.cpu_ns : at_gap_end;
  ASSERT_GE(at_end, 0);
  EXPECT_GE(at_gap_end - at_end, helper.spin_cpu());
  EXPECT_LE(at_gap_end - at_end, helper.spin_cpu() + kWakeBoundNs);
  EXPECT_GE(r.threads, 3);  // main, sampler, helper
}

TEST(Sampler, ExcludesItsOwnCpu) {
  // A sampler waking every 100 us burns CPU of its own; with no other thread
  // running, the "others" it records must stay at zero all the same.
  mark_current_thread(ThreadClass::kMain);  // else this thread's own wake-up is an "other"
  BurnSampler::Options o;
  o.period_ns = o.idle_period_ns = 100000;
  BurnSampler sampler(o);
  const int64_t own0 = sampler.own_cpu_ns(), t0 = wall_ns();
  sleep_for_ns(100 * kMs);
  const auto w = sampler.window(t0, wall_ns());
  ASSERT_GE(w.size(), 2u);
  const int64_t own = sampler.own_cpu_ns() - own0;
  EXPECT_GT(own, 200000) << "the sampler must have burned something for this test to mean anything";
  EXPECT_LT(w.back().others_cpu_ns() - w.front().others_cpu_ns(), 20000);
  EXPECT_GE(w.back().cpu_ns[index_of(ThreadClass::kSampler)] - w.front().cpu_ns[index_of(ThreadClass::kSampler)],
            own / 2);
}

// The process CPU clock accounts threads running on other cores only at
// scheduler ticks: a steady 1-core spin read every ms looked like 0, 0, 0, 4
// cores. Per-thread clocks must never show a single thread above one core.
TEST(Sampler, SteadySpinHasNoTickSpikes) {
  BurnSampler sampler;
  std::atomic<bool> stop{false};
  std::atomic<pid_t> tid{0};
  std::thread spinner([&] {
    tid = current_tid();
    while (!stop.load(std::memory_order_relaxed)) {
    }
  });
  while (tid.load() == 0) std::this_thread::yield();
  sampler.sample_now();  // lists the spinner
  sampler.kick();
  const int64_t t0 = wall_ns();
  sleep_for_ns(60 * kMs);
  const int64_t t1 = wall_ns();
  stop = true;
  spinner.join();
  auto points = burn_rates(sampler.window(t0, t1), t0);
  ASSERT_GE(points.size(), 10u);
  double max_cores = 0;
  for (const auto& p : points) max_cores = std::max(max_cores, p.others_cores);
  // One thread can use at most one core; 10 % for the few us between a
  // sample's clock reads and its time stamp.
  EXPECT_LT(max_cores, 1.1) << "a tick-sized spike: the sampler reads a lagging clock";
}

TEST(Sampler, FastAfterAKickWhileSomethingBurnsIdleOtherwise) {
  BurnSampler sampler;
  Helper helper;
  sampler.sample_now();
  sleep_for_ns(50 * kMs);  // idle: nothing burns, nobody kicked
  const int64_t idle_from = wall_ns();
  sleep_for_ns(60 * kMs);
  const auto idle = sampler.window(idle_from, wall_ns());
  sampler.kick();
  const int64_t kicked = wall_ns();
  helper.order_spin(40 * kMs);
  helper.wait_done();
  const auto busy = sampler.window(kicked, helper.spin_wall_end_ns());
  auto median_gap_ms = [](const std::vector<BurnSample>& w) {
    std::vector<double> d;
    for (size_t i = 1; i < w.size(); ++i) d.push_back(ns_to_ms(w[i].t_ns - w[i - 1].t_ns));
    std::sort(d.begin(), d.end());
    return d.empty() ? 0.0 : d[d.size() / 2];
  };
  ASSERT_GE(idle.size(), 2u);
  ASSERT_GE(busy.size(), 10u);
  // Medians: robust to a few samples a loaded machine delays.
  EXPECT_GE(median_gap_ms(idle), 0.5 * ns_to_ms(kDefaultSamplerIdlePeriodNs));
  EXPECT_LE(median_gap_ms(busy), 2 * ns_to_ms(kDefaultSamplerPeriodNs));
}

TEST(Procfs, ReadsOwnThreadsByName) {
  Helper h;
  pthread_setname_np(pthread_self(), "tb-test-main");
  TaskReader reader(0);
  const auto threads = reader.read();
  bool found_helper = false, found_self = false;
  for (const auto& s : threads) {
    found_helper = found_helper || s.tid == h.tid();
    if (s.tid == current_tid()) {
      found_self = true;
      EXPECT_EQ(s.name, "tb-test-main");
      EXPECT_GT(s.cpu_ns, 0);
    }
  }
  EXPECT_TRUE(found_helper);
  EXPECT_TRUE(found_self);
  EXPECT_EQ(count_threads(0), static_cast<int>(threads.size()));
  const Availability gone = process_readable(999999999);
  EXPECT_FALSE(gone.ok);
  EXPECT_EQ(gone.why, "no such process");
}

TEST(Barrier, CopiesLeaveTogetherAfterTheLastArrives) {
  char path[] = "/tmp/tb-barrier-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4), 0);
  close(fd);
  constexpr int kParties = 3;
  int pipes[kParties][2];
  std::vector<pid_t> kids;
  for (int i = 0; i < kParties; ++i) {
    ASSERT_EQ(pipe(pipes[i]), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      ProcessBarrier b(path, kParties);
      int64_t times[4];
      for (int round = 0; round < 2; ++round) {
        sleep_for_ns(i * 20 * kMs);  // arrive staggered: 0, 20, 40 ms
        times[2 * round] = wall_ns();
        const bool ok = b.wait(10000 * kMs);
        times[2 * round + 1] = ok ? wall_ns() : -1;
      }
      (void)!write(pipes[i][1], times, sizeof times);
      _exit(0);
    }
    kids.push_back(pid);
  }
  int64_t t[kParties][4];
  for (int i = 0; i < kParties; ++i) {
    ASSERT_EQ(read(pipes[i][0], t[i], sizeof t[i]), static_cast<ssize_t>(sizeof t[i]));
    waitpid(kids[static_cast<size_t>(i)], nullptr, 0);
  }
  unlink(path);
  for (int round = 0; round < 2; ++round) {
    int64_t last_arrival = 0;
    for (auto& k : t) last_arrival = std::max(last_arrival, k[2 * round]);
    for (auto& k : t) {
      ASSERT_GT(k[2 * round + 1], 0) << "timed out";
      EXPECT_GE(k[2 * round + 1], last_arrival) << "left before the last copy arrived (round " << round << ")";
    }
  }
}

TEST(Barrier, TimesOutWhenACopyNeverComes) {
  char path[] = "/tmp/tb-barrier-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4), 0);
  close(fd);
  ProcessBarrier b(path, 2);
  const int64_t t0 = wall_ns();
  EXPECT_FALSE(b.wait(50 * kMs));
  EXPECT_GE(wall_ns() - t0, 50 * kMs);
  unlink(path);
  EXPECT_THROW(ProcessBarrier("/nonexistent/tb-barrier", 2), Error);
  std::string p;
  int n = 0;
  EXPECT_THROW(parse_barrier_flag("nocolon", &p, &n), Error);
  EXPECT_THROW(parse_barrier_flag("/tmp/x:0", &p, &n), Error);
  parse_barrier_flag("/tmp/a:b:3", &p, &n);
  EXPECT_EQ(p, "/tmp/a:b");
  EXPECT_EQ(n, 3);
}

}  // namespace
}  // namespace threadburn
