#include "cuda/gpu_busy.h"

#include <algorithm>

namespace threadburn::cuda {

uint64_t busy_ns(std::vector<Interval> intervals, uint64_t from_ns, uint64_t to_ns) {
  if (to_ns <= from_ns) return 0;
  std::vector<Interval> in;
  in.reserve(intervals.size());
  for (const Interval& i : intervals) {
    const uint64_t s = std::max(i.start_ns, from_ns), e = std::min(i.end_ns, to_ns);
    if (e > s) in.push_back({s, e});
  }
  std::sort(in.begin(), in.end(), [](const Interval& a, const Interval& b) { return a.start_ns < b.start_ns; });
  // Sweep in start order: a run of overlapping intervals counts from its
  // first start to its last end.
  uint64_t total = 0, run_start = 0, run_end = 0;
  bool open = false;
  for (const Interval& i : in) {
    if (open && i.start_ns <= run_end) {
      run_end = std::max(run_end, i.end_ns);
      continue;
    }
    if (open) total += run_end - run_start;
    run_start = i.start_ns;
    run_end = i.end_ns;
    open = true;
  }
  if (open) total += run_end - run_start;
  return total;
}

BusyFigures busy_figures(const std::vector<Interval>& intervals, uint64_t from_ns, uint64_t to_ns) {
  const uint64_t busy = busy_ns(intervals, from_ns, to_ns);
  const double window = to_ns > from_ns ? static_cast<double>(to_ns - from_ns) : 0.0;
  return {static_cast<double>(busy) / 1e6, window > 0 ? 1.0 - static_cast<double>(busy) / window : 0.0};
}

}  // namespace threadburn::cuda
