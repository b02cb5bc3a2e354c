// Burn rates and the tail, as pure functions of CPU samples (tested to the
// digit with made-up samples in tests/cpp/core_math_test.cc). A sample holds
// the CPU used so far by each class of thread; the rate between two samples is
// the burn in cores. "Others" are all threads but the measuring (main) thread
// and the sampler: what burns while the main thread sleeps.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/thread_class.h"

namespace threadburn {

// A thread counts as burning while its rate is above this share of one core:
// above a sleeping thread's occasional wake-up, far below any spin.
constexpr double kTailThresholdCores = 0.05;
// An interval counts as burning only if the rate averaged over this window,
// centred on it, is also above the threshold: one wake-up of a sleeping thread
// costs 20-60 us of CPU on a VM, over 5 % of a 1 ms interval but under 3 % of
// 2 ms, while the end of a real spin averages far above 5 %.
constexpr double kTailSmoothMs = 2.0;

struct BurnSample {
  int64_t t_ns = 0;  // CLOCK_MONOTONIC
  ClassArray cpu_ns{};  // CPU used so far, by class of thread
  int64_t mark_ns = 0;  // the sampler owner's running counter (the probe: time inside parallel regions)
  int64_t others_wait_ns = 0;  // run-queue wait so far of the others (samplers with_wait only)
  int64_t extra_ns = 0;  // the sampler owner's second running counter (the probe: CPU of forked child processes)
  int64_t others_cpu_ns() const;
};

// Burn rate over one sampling interval, placed at the interval's end.
struct BurnPoint {
  double t_ms = 0;          // end of the interval, relative to the origin
  double others_cores = 0;  // all threads but main and sampler
  double main_cores = 0;
  std::array<double, kThreadClasses> cores{};  // by class
};

// Rates between consecutive samples, times relative to origin_ns.
std::vector<BurnPoint> burn_rates(const std::vector<BurnSample>& samples, int64_t origin_ns);

// Time from the origin (step end) to the end of the last interval after it
// whose "others" rate exceeds threshold_cores, and whose neighbourhood (the
// points ending within smooth_ms / 2 of it, duration-weighted) does too; 0
// when none does. smooth_ms = 0 judges each interval alone.
double tail_ms(const std::vector<BurnPoint>& points, double threshold_cores = kTailThresholdCores,
               double smooth_ms = kTailSmoothMs);

}  // namespace threadburn
