// What a step's GPU work adds up to, from the intervals it ran in (CUPTI's
// activity records of kernels, copies and memsets, src/cuda/gpu_activity.cc):
// pure functions on timestamps, so the rule is tested without a GPU
// (tests/cpp/gpu_busy_test.cc). No CUDA here.
#pragma once

#include <cstdint>
#include <vector>

namespace threadburn::cuda {

// One piece of GPU work: [start_ns, end_ns) on CUPTI's clock. A record
// without both timestamps (end_ns <= start_ns) ran no known time.
struct Interval {
  uint64_t start_ns;
  uint64_t end_ns;
};

// The time within [from_ns, to_ns) that at least one interval covers: each
// interval clipped to the window, overlapping ones counted once (a copy
// beside a kernel is one busy GPU, not two). 0 for an empty window.
uint64_t busy_ns(std::vector<Interval> intervals, uint64_t from_ns, uint64_t to_ns);

// A step's figures: gpu_busy_ms (busy_ns in ms) and gpu_idle_share, the share
// of the step's window in which no work ran, 1 - busy / window (the GPU waited
// for the host). An empty window has no share: 0.
struct BusyFigures {
  double busy_ms;
  double idle_share;
};
BusyFigures busy_figures(const std::vector<Interval>& intervals, uint64_t from_ns, uint64_t to_ns);

}  // namespace threadburn::cuda
