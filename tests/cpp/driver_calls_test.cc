// The wrappers of the CUDA driver's waits and launches (src/cuda/driver_calls.h)
// on stand-in entry points of known cost: a wait that spins 30 ms of its
// thread's CPU is 30 ms inside, 30 ms of CPU; one that sleeps 30 ms is 30 ms
// inside and almost no CPU; names the driver exports are wrapped, others
// not; the arguments and the result pass through. Each test runs in a
// process of its own (gtest_discover_tests): the first-work time is the
// process's.
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include <algorithm>

#include "cuda/driver_calls.h"

namespace threadburn::cuda {
namespace {

using U = uintptr_t;

double clock_ms(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

int spin_30ms(U) {
  const double end = clock_ms(CLOCK_THREAD_CPUTIME_ID) + 30;
  while (clock_ms(CLOCK_THREAD_CPUTIME_ID) < end) {
  }
  return 0;
}

int sleep_30ms(U) {
  timespec ts{0, 30 * 1000000};
  nanosleep(&ts, nullptr);
  return 0;
}

int returns_at_once(U) { return 0; }

// cuEventQuery of work that is done at the n-th query (each takes 5 us or more, as a loop
// with a short sleep in it; 50 of them: a loop of 250 us or more, beyond kBlockingNs).
int g_not_ready = 0;
int query(U) {
  timespec ts{0, 5000};
  nanosleep(&ts, nullptr);
  return g_not_ready-- > 0 ? 600 : 0;
}

// A launch's eleven arguments come back as a checksum.
int launch_sum(U a, U b, U c, U d, U e, U f, U g, U h, U i, U j, U k) {
  return static_cast<int>(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i + 10 * j + 11 * k);
}

int spin_200us_launch(U, U, U, U, U, U, U, U, U, U, U) {
  const double end = clock_ms(CLOCK_THREAD_CPUTIME_ID) + 0.2;
  while (clock_ms(CLOCK_THREAD_CPUTIME_ID) < end) {
  }
  return 0;
}

pid_t tid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

ThreadCalls mine() {
  for (const ThreadCalls& t : thread_calls()) {
    if (t.tid == tid()) return t;
  }
  return {};
}

template <typename F>
F wrapped(const char* name, F real) {
  return reinterpret_cast<F>(on_lookup(name, reinterpret_cast<void*>(real)));
}

TEST(DriverCalls, ASpinningWaitIsItsTimeInCpu) {
  auto sync = wrapped("cuStreamSynchronize", &spin_30ms);
  ASSERT_NE(reinterpret_cast<void*>(sync), reinterpret_cast<void*>(&spin_30ms));
  EXPECT_EQ(sync(0), 0);
  const CallTally w = mine().of[static_cast<int>(CallKind::kWait)];
  EXPECT_EQ(w.calls, 1);
  EXPECT_NEAR(static_cast<double>(w.cpu_ns) / 1e6, 30, 3);
  EXPECT_GE(static_cast<double>(w.wall_ns) / 1e6, 30);
}

TEST(DriverCalls, ASleepingWaitIsItsTimeWithoutCpu) {
  auto sync = wrapped("cuEventSynchronize", &sleep_30ms);
  sync(0);
  const CallTally w = mine().of[static_cast<int>(CallKind::kWait)];
  EXPECT_EQ(w.calls, 1);
  EXPECT_GE(static_cast<double>(w.wall_ns) / 1e6, 30);
  EXPECT_LT(static_cast<double>(w.cpu_ns) / 1e6, 3);  // a wake-up, not the wait
}

// A call that waits only sometimes (kBlockingNs): counted as a wait, a hidden one, when it blocked,
// not at all when it returned at once.
TEST(DriverCalls, AHiddenWaitCountsWhenItBlocked) {
  auto blocking = wrapped("cuMemFree_v2", &sleep_30ms);
  const CallTally before = mine().of[static_cast<int>(CallKind::kWait)];
  const int64_t hidden = mine().hidden_waits;
  blocking(0);
  const CallTally w = mine().of[static_cast<int>(CallKind::kWait)];
  EXPECT_EQ(w.calls - before.calls, 1);
  EXPECT_GE(static_cast<double>(w.wall_ns - before.wall_ns) / 1e6, 30);
  EXPECT_EQ(mine().hidden_waits - hidden, 1);
  EXPECT_GE(static_cast<double>(mine().hidden_wait_ns) / 1e6, 30);
  auto queued = wrapped("cuMemcpyDtoHAsync_v2", &returns_at_once);
  queued(0);
  EXPECT_EQ(mine().of[static_cast<int>(CallKind::kWait)].calls - before.calls, 1);  // an enqueue: not a wait
  EXPECT_EQ(mine().hidden_waits - hidden, 1);
}

// Queries close together until the work is done are one wait (kPollMin or more of them); fewer are none.
TEST(DriverCalls, APollingLoopIsOneWait) {
  auto q = wrapped("cuEventQuery", &query);
  const CallTally before = mine().of[static_cast<int>(CallKind::kWait)];
  g_not_ready = 4;  // 5 queries: not a loop
  while (q(0) == 600) {
  }
  EXPECT_EQ(mine().of[static_cast<int>(CallKind::kWait)].calls, before.calls);
  g_not_ready = 49;  // 50 queries
  while (q(0) == 600) {
  }
  const CallTally w = mine().of[static_cast<int>(CallKind::kWait)];
  EXPECT_EQ(w.calls - before.calls, 1);
  EXPECT_EQ(mine().poll_loops, 1);
  EXPECT_GT(w.wall_ns - before.wall_ns, 0);
}

TEST(DriverCalls, TheDriversNamesAreWrappedAndNoOthers) {
  void* real = reinterpret_cast<void*>(&sleep_30ms);
  for (const char* name : {"cuStreamSynchronize", "cuStreamSynchronize_ptsz", "cuCtxSynchronize", "cuCtxSynchronize_v2",
                           "cuMemcpyDtoH_v2", "cuMemcpyDtoH_v2_ptds", "cuMemcpy", "cuMemcpyHtoD_v2", "cuLaunchKernel_ptsz",
                           "cuLaunchKernelEx", "cuGraphLaunch", "cuGetProcAddress_v2", "cuMemcpyDtoHAsync_v2",
                           "cuMemcpyAsync", "cuMemFree_v2", "cuEventQuery", "cuStreamQuery_ptsz"}) {
    EXPECT_NE(on_lookup(name, real), real) << name;
  }
  for (const char* name : {"cuInit", "cuMemFreeAsync", "cuMemFreeHost", "cuStreamQueryX", "cuEventQueryAll",
                           "cuStreamSynchronizeX", "cudaStreamSynchronize", "cuLaunchHostFunc", "PyInit_math"}) {
    EXPECT_EQ(on_lookup(name, real), real) << name;
  }
  EXPECT_EQ(on_lookup("cuStreamSynchronize", nullptr), nullptr);
}

TEST(DriverCalls, OneAddressOneWrapperAndAtMostFourAName) {
  int (*reals[])(U) = {+[](U) { return 1; }, +[](U) { return 2; }, +[](U) { return 3; }, +[](U) { return 4; },
                       +[](U) { return 5; }};
  auto first = wrapped("cuEventSynchronize", reals[0]);
  EXPECT_EQ(wrapped("cuEventSynchronize", reals[0]), first);  // asked again: the same wrapper
  for (int i = 1; i < 4; ++i) {
    auto w = wrapped("cuEventSynchronize", reals[i]);
    EXPECT_NE(w, reals[i]);
    EXPECT_EQ(w(0), i + 1);  // each wrapper calls its own
  }
  EXPECT_EQ(wrapped("cuEventSynchronize", reals[4]), reals[4]);  // no slot left: as it was, and said
  EXPECT_EQ(unwrapped_entry_points(), 1);
  EXPECT_EQ(wrapped_entry_points(), 4);
}

TEST(DriverCalls, ArgumentsAndResultPassThroughALaunch) {
  auto launch = wrapped("cuLaunchKernel", &launch_sum);
  EXPECT_EQ(launch(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11), launch_sum(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11));
  EXPECT_EQ(mine().of[static_cast<int>(CallKind::kLaunch)].calls, 1);
  EXPECT_EQ(mine().of[static_cast<int>(CallKind::kWait)].calls, 0);
}

TEST(DriverCalls, LaunchCpuIsEstimatedFromOneInSixteen) {
  auto launch = wrapped("cuLaunchKernel", &spin_200us_launch);
  const double cpu0 = clock_ms(CLOCK_THREAD_CPUTIME_ID), wall0 = clock_ms(CLOCK_MONOTONIC);
  for (int i = 0; i < 64; ++i) launch(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  const double cpu = clock_ms(CLOCK_THREAD_CPUTIME_ID) - cpu0, wall = clock_ms(CLOCK_MONOTONIC) - wall0;
  const CallTally l = mine().of[static_cast<int>(CallKind::kLaunch)];
  EXPECT_EQ(l.calls, 64);
  // Every launch spins 0.2 ms of CPU: 12.8 ms of CPU whichever launches were
  // read. The estimate scales the wall time by the read ones' CPU share, so a
  // launch preempted on a busy machine moves it by at most the time the
  // thread was off the CPU (wall - cpu, measured here).
  EXPECT_GE(cpu, 12.8);
  EXPECT_NEAR(static_cast<double>(l.cpu_ns) / 1e6, cpu, 0.1 * cpu + (wall - cpu));
}

// cuGetProcAddress(_v2) hands back wrapped entry points, whichever version.
int lookup_v2(const char* symbol, void** pfn, int, uint64_t, int* status) {
  *pfn = std::strcmp(symbol, "cuStreamSynchronize") == 0 ? reinterpret_cast<void*>(&spin_30ms) : nullptr;
  if (status) *status = *pfn ? 0 : 1;
  return 0;
}

TEST(DriverCalls, ProcAddressHandsOutWrappers) {
  auto lookup = wrapped("cuGetProcAddress_v2", &lookup_v2);
  ASSERT_NE(lookup, &lookup_v2);
  void* f = nullptr;
  int status = -1;
  ASSERT_EQ(lookup("cuStreamSynchronize", &f, 13000, 0, &status), 0);
  EXPECT_EQ(status, 0);
  ASSERT_NE(f, nullptr);
  EXPECT_NE(f, reinterpret_cast<void*>(&spin_30ms));
  reinterpret_cast<int (*)(U)>(f)(0);
  EXPECT_EQ(mine().of[static_cast<int>(CallKind::kWait)].calls, 1);
  ASSERT_EQ(lookup("cuNothing", &f, 13000, 0, &status), 0);
  EXPECT_EQ(f, nullptr);
  EXPECT_EQ(status, 1);
}

// A wrapper that another interposer's wrapper calls (both wrapped): one wait, not two.
std::atomic<int (*)(U)> g_inner{nullptr};
int outer_wait(U x) { return g_inner.load()(x); }

TEST(DriverCalls, AWaitInsideAWaitCountsOnce) {
  g_inner = wrapped("cuStreamSynchronize", &sleep_30ms);
  auto outer = wrapped("cuStreamSynchronize_ptsz", &outer_wait);
  outer(0);
  const CallTally w = mine().of[static_cast<int>(CallKind::kWait)];
  EXPECT_EQ(w.calls, 1);
  EXPECT_LT(static_cast<double>(w.wall_ns) / 1e6, 45);
}

int quick_launch(U, U, U, U, U, U, U, U, U, U, U) { return 0; }

// The progress an in-run block divides (a time difference by a count difference) is one
// snapshot: read while four threads end launches at once, neither the count nor the last
// end ever goes back, and at the end the count is every call and the last end a real one's.
TEST(DriverCalls, ProgressIsOneSnapshotThatNeverGoesBack) {
  auto launch = wrapped("cuLaunchKernel", &quick_launch);
  constexpr int kThreads = 4, kCalls = 20000;
  std::atomic<int> running{kThreads};
  std::atomic<int64_t> ended_before[kThreads] = {};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kCalls; ++i) {
        launch(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
        // After the call returned: its end is at most now.
        ended_before[t].store(static_cast<int64_t>(clock_ms(CLOCK_MONOTONIC) * 1e6), std::memory_order_release);
      }
      --running;
    });
  }
  Progress last{};
  int backwards = 0, reads = 0;
  while (running.load() > 0) {
    const Progress p = progress(CallKind::kLaunch);
    backwards += p.calls < last.calls || p.last_end_ns < last.last_end_ns;
    last = p;
    ++reads;
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(backwards, 0) << "of " << reads << " reads";
  const Progress end = progress(CallKind::kLaunch);
  EXPECT_EQ(end.calls, static_cast<int64_t>(kThreads) * kCalls);
  int64_t latest = 0;
  for (auto& e : ended_before) latest = std::max<int64_t>(latest, e.load());
  EXPECT_LE(end.last_end_ns, latest + 1000);  // the last end is a real call's end (clock_ms rounds to 1 us)
}

std::atomic<int64_t> g_hook_ns{0};
std::atomic<int> g_hook_calls{0};

TEST(DriverCalls, TheFirstCallStartsTheDeviceWorkOnce) {
  set_first_work_hook([](int64_t t) {
    g_hook_ns = t;
    ++g_hook_calls;
  });
  EXPECT_EQ(first_work_ns(), 0);
  auto sync = wrapped("cuCtxSynchronize", &sleep_30ms);
  const double before = clock_ms(CLOCK_MONOTONIC);
  std::thread([&] { sync(0); }).join();
  const double between = clock_ms(CLOCK_MONOTONIC);  // the first call has ended; the second starts after
  sync(0);
  EXPECT_EQ(g_hook_calls.load(), 1);
  EXPECT_EQ(first_work_ns(), g_hook_ns.load());
  // The first call's start: after `before`, and at least its 30 ms sleep before `between` (the
  // second call's would be after it), however late a loaded machine started the thread.
  const double first = static_cast<double>(first_work_ns()) / 1e6;
  EXPECT_GE(first, before);
  EXPECT_LE(first, between - 30);
  // Per thread: the other thread's wait is its own.
  EXPECT_EQ(mine().of[static_cast<int>(CallKind::kWait)].calls, 1);
  EXPECT_EQ(total(thread_calls(), CallKind::kWait).calls, 2);
}


// The steady phase's rule (StepRun) on made-up wait ends: answers exact by construction.
constexpr int64_t kMs = 1000000;

// Feeds ends (ms); returns the confirmed run's first burst and its time (-1: none), and the bursts seen.
struct RunOf {
  int64_t first = -1, first_ns = 0, bursts = 0, confirmations = 0;
};
RunOf run_of(const std::vector<double>& ends_ms) {
  StepRun rule;
  RunOf r;
  for (double t : ends_ms) {
    const StepRun::Seen seen = rule.add(static_cast<int64_t>(t * kMs));
    r.bursts += seen.burst;
    if (seen.confirmed) {
      ++r.confirmations;
      r.first = seen.first;
      r.first_ns = seen.first_ns;
    }
  }
  return r;
}

std::vector<double> steps_from(double t0, double step_ms, int n, std::vector<double> before = {}) {
  for (int i = 0; i < n; ++i) before.push_back(t0 + step_ms * i);
  return before;
}

TEST(StepRun, TheFirstStepAfterIrregularPreparation) {
  // model.cuda()'s copies (100 waits 10 us apart: one burst), a dataset prepared in three
  // uneven pieces, then steps of 20 ms: the run begins at the first step's wait (burst 4).
  std::vector<double> ends;
  for (int i = 0; i < 100; ++i) ends.push_back(100 + 0.01 * i);
  for (double t : {400.0, 450.0, 700.0}) ends.push_back(t);
  const RunOf r = run_of(steps_from(1000, 20, 30, ends));
  EXPECT_EQ(r.first, 4);
  EXPECT_EQ(r.first_ns, 1000 * kMs);
  EXPECT_EQ(r.confirmations, 1);
  EXPECT_EQ(r.bursts, 4 + kStepRun - 1);  // a burst each until the run is whole; none after
}

TEST(StepRun, AStepsTwoWaitsAreOneBurst) {
  // .cpu() then .item() 50 us apart each step of 20 ms: the steps are found, from the first.
  std::vector<double> ends;
  for (int i = 0; i < 20; ++i) {
    ends.push_back(500 + 20 * i);
    ends.push_back(500 + 20 * i + 0.05);
  }
  const RunOf r = run_of(ends);
  EXPECT_EQ(r.first, 0);
  EXPECT_EQ(r.first_ns, 500 * kMs);
}

TEST(StepRun, AWarmUpStepIsTheStartups) {
  // The first step takes 200 ms (an allocator's or autotuner's warm-up), the rest 20.
  const RunOf r = run_of(steps_from(1220, 20, 20, {1000, 1200}));
  EXPECT_EQ(r.first, 1);
  EXPECT_EQ(r.first_ns, 1200 * kMs);
}

TEST(StepRun, UnevenWaitsAreNoRun) {
  // Waits 10 and 25 ms apart in turn (the longest over the shortest 2.5 > kStepSpread):
  // no run; nor fewer than kStepRun bursts, nor waits under kBurstGapNs apart (100 us: one burst).
  std::vector<double> ends;
  double t = 0;
  for (int i = 0; i < 40; ++i) ends.push_back(t += i % 2 ? 10 : 25);
  EXPECT_EQ(run_of(ends).first, -1);
  EXPECT_EQ(run_of(steps_from(0, 20, kStepRun - 1)).first, -1);
  EXPECT_EQ(run_of(steps_from(0, 20, kStepRun)).first, 0);
  const RunOf dense = run_of(steps_from(0, 0.1, 1000));
  EXPECT_EQ(dense.first, -1);
  EXPECT_EQ(dense.bursts, 1);
}

std::atomic<int> g_candidates{0}, g_confirmed{0};
std::atomic<int64_t> g_confirmed_index{-1}, g_confirmed_ns{0};

int sleep_20ms(U) {
  timespec ts{0, 20 * 1000000};
  nanosleep(&ts, nullptr);
  return 0;
}

// Through the wrappers: waits at uneven times, then waits every 20 ms (each a 20 ms
// sleep inside the wait): the hook sees a burst at each wait until the run is
// confirmed, once, at the first of the even waits at the earliest (burst 2).
TEST(DriverCalls, TheStepsStartTheSteadyPhase) {
  set_step_hook([](int64_t index, int64_t t, bool confirmed) {
    if (!confirmed) {
      ++g_candidates;
      return;
    }
    ++g_confirmed;
    g_confirmed_index = index;
    g_confirmed_ns = t;
  });
  auto sync = wrapped("cuStreamSynchronize", &sleep_20ms);
  EXPECT_EQ(steady_start().index, -1);
  sync(0);  // preparation: a wait, 150 ms of host work, a wait, 60 ms
  timespec host{0, 150 * 1000000};
  nanosleep(&host, nullptr);
  const double before_last = clock_ms(CLOCK_MONOTONIC);
  sync(0);
  host.tv_nsec = 60 * 1000000;
  nanosleep(&host, nullptr);
  for (int i = 0; i < 3 * kStepRun; ++i) sync(0);
  EXPECT_EQ(g_confirmed.load(), 1);
  EXPECT_GE(g_confirmed_index.load(), 2);  // the first of the even waits at the earliest
  EXPECT_EQ(steady_start().index, g_confirmed_index.load());
  EXPECT_EQ(steady_start().t_ns, g_confirmed_ns.load());
  EXPECT_GE(static_cast<double>(g_confirmed_ns.load()) / 1e6, before_last + 60);
  EXPECT_EQ(g_candidates.load(), g_confirmed_index.load() + kStepRun - 1);
}

}  // namespace
}  // namespace threadburn::cuda
