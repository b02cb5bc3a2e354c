// The burn sampler: a background thread that reads, now and then, the CPU clock
// of every thread of the process by class (thread_clocks.h), so that the rate of
// burn after a step can be followed and the end of a spin located.
//
// It samples at two speeds, because on a VM each wake-up of a sleeping thread
// costs ~20 us of CPU (2 % of a core at 1 kHz) while nothing needs that speed
// most of the time: at the fast period (1 ms: the tail is located to 1 ms)
// after a kick (a step just ended) and for as long as something burns after it,
// and at the idle period (10 ms) otherwise, during steps included. A kick wakes
// the sampler at once (a futex), so the fast samples start at the step's end.
// The step probe adds its own samples at the step's boundaries (sample_now), so
// the burn window after a step is complete without waiting for the sampler.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/burn.h"
#include "core/thread_clocks.h"

namespace threadburn {

constexpr int64_t kDefaultSamplerPeriodNs = 1000000;       // while locating a burn's end
constexpr int64_t kDefaultSamplerIdlePeriodNs = 10000000;  // otherwise
// After a kick, or after an interval that burned, the fast period holds at
// least this long: longer than the tail's smoothing window (burn.h), so the
// interval after a spin's end is also sampled fast.
constexpr int64_t kSamplerLingerNs = 3000000;

// Per-thread CPU at one instant, for per-thread timelines.
struct ThreadSnapshot {
  int64_t t_ns = 0;
  std::vector<ThreadCpu> threads;
};

class BurnSampler {
 public:
  struct Options {
    int64_t period_ns = kDefaultSamplerPeriodNs;
    int64_t idle_period_ns = kDefaultSamplerIdlePeriodNs;  // = period_ns: one speed only
    int64_t relist_ns = 10000000;  // re-list /proc/self/task at most this often
    size_t capacity = 1 << 17;     // ring of samples
    bool per_thread = false;       // also keep per-thread snapshots (timelines)
    int64_t per_thread_every_ns = 0;  // ... at most this often (0: every sample)
    // Read at every sample into BurnSample::mark_ns (may be empty).
    std::function<int64_t()> mark;
    // Read at every sample into BurnSample::extra_ns (may be empty; it may
    // return a cached value and refresh it only now and then).
    std::function<int64_t()> extra;
    // The most CPU the sampler thread may use, as a share of a core (0: no
    // limit). When its own CPU per sample (wake-up included, a running
    // average) would exceed it at the chosen period, the period is stretched
    // to cost / max_share, and a kick does not sample before that.
    double max_share = 0;
    // Also read each thread's run-queue wait at every sample (~0.3 us per
    // thread): BurnSample::others_wait_ns.
    bool with_wait = false;
    // Called with every sample as it is kept (the sampler's lock held: keep it
    // short; may be empty).
    std::function<void(const BurnSample&)> on_sample;
    // Called on the sampler thread at every wake-up, before it samples, with
    // no lock of the sampler held: it may call sample_now, window and
    // thread_window, and need not return (the probe ends a signalled process
    // from here). May be empty.
    std::function<void()> on_wake;
  };

  explicit BurnSampler(Options options);
  BurnSampler() : BurnSampler(Options{}) {}
  ~BurnSampler();
  BurnSampler(const BurnSampler&) = delete;
  BurnSampler& operator=(const BurnSampler&) = delete;

  // A sample taken now by the calling thread (threads re-listed first), kept in
  // the ring like the sampler's own. with_wait adds run-queue waits to the
  // returned totals; threads, when given, receives the per-thread values.
  ClassTotals sample_now(bool with_wait = false, std::vector<ThreadCpu>* threads = nullptr);
  // A burn may start now (a step ended): sample fast until nothing has burned
  // for kSamplerLingerNs. Cheap enough for every parallel region's end: a
  // futex wake (a syscall) only when the sampler sleeps at the idle period.
  void kick();
  // Nothing to locate until the next kick (a step is running): idle period.
  void relax();
  // Wake the sampler thread now (it runs on_wake, then samples). Async-signal-
  // safe: an atomic add and a futex wake, so a signal handler may call it.
  void wake();
  // New threads exist (e.g. a team grew): re-list /proc/self/task at the next
  // sample rather than up to relist_ns later, so their CPU so far lands near
  // the moment they were born.
  void request_relist() { relist_requested_.store(true, std::memory_order_relaxed); }

  // Samples with from_ns <= t <= to_ns.
  std::vector<BurnSample> window(int64_t from_ns, int64_t to_ns) const;
  std::vector<ThreadSnapshot> thread_window(int64_t from_ns, int64_t to_ns) const;
  // CPU the sampler thread used so far.
  int64_t own_cpu_ns() const;
  int64_t samples_taken() const { return taken_.load(std::memory_order_relaxed); }
  // The shortest period max_share allows now (0: no limit, or not yet known).
  int64_t min_period_ns() const { return min_period_ns_.load(std::memory_order_relaxed); }
  const Options& options() const { return options_; }

 private:
  void run();
  void record(const ClassTotals& totals, int64_t t_ns, bool with_threads);  // mu_ held
  int64_t next_deadline(int64_t now, bool* idle);
  void wait_until(int64_t deadline_ns, uint32_t seen);

  Options options_;
  mutable std::mutex mu_;  // clocks_, rings, last_relist_
  ThreadClocks clocks_;
  size_t ring_cap_ = 0, thread_cap_ = 0;  // the rings' sizes once full (thread_cap_ 0: none)
  std::vector<BurnSample> ring_;
  std::vector<ThreadSnapshot> thread_ring_;
  int64_t head_ = 0, thread_head_ = 0, last_relist_ = 0, last_thread_snapshot_ = 0;
  std::atomic<int64_t> taken_{0};
  std::atomic<int64_t> fast_until_{0};
  std::atomic<bool> relaxed_{false};
  std::atomic<uint32_t> wake_{0};  // futex word: bumped by kick() and wake()
  std::atomic<bool> idle_sleep_{false};  // the sampler waits out an idle period now
  std::atomic<bool> relist_requested_{false};
  std::atomic<int64_t> min_period_ns_{0};  // max_share's bound on the period (0: none)
  std::atomic<bool> stop_{false};
  std::atomic<bool> ready_{false};
  clockid_t own_clock_{};
  std::thread thread_;
};

}  // namespace threadburn
