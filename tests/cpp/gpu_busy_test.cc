// The rule that turns a step's GPU activity records into gpu_busy_ms and
// gpu_idle_share (src/cuda/gpu_busy.h), on made-up intervals whose union is
// known by hand: overlaps, records straddling the window, none at all.
#include <gtest/gtest.h>

#include "cuda/gpu_busy.h"

namespace threadburn::cuda {
namespace {

// CUPTI's timestamps are ns on a clock far from 0: the rule must not care.
constexpr uint64_t T = 1'764'000'000'000'000'000ULL;

TEST(GpuBusy, OverlappingRecordsCountOnce) {
  // [100, 400) as the union of a kernel, a copy beside it and a kernel inside the copy.
  EXPECT_EQ(busy_ns({{T + 100, T + 300}, {T + 200, T + 400}, {T + 350, T + 380}}, T, T + 1000), 300u);
  // Unsorted, disjoint, touching: 100 + 150 + (100 + 100).
  EXPECT_EQ(busy_ns({{T + 700, T + 800}, {T + 100, T + 200}, {T + 300, T + 450}, {T + 800, T + 900}}, T, T + 1000),
            450u);
  // The same interval twice is one.
  EXPECT_EQ(busy_ns({{T + 10, T + 20}, {T + 10, T + 20}}, T, T + 1000), 10u);
}

TEST(GpuBusy, RecordsStraddlingTheWindowAreClipped) {
  const uint64_t from = T + 1000, to = T + 2000;
  EXPECT_EQ(busy_ns({{T + 500, T + 1200}}, from, to), 200u);   // began before the step
  EXPECT_EQ(busy_ns({{T + 1900, T + 2500}}, from, to), 100u);  // ended after it
  EXPECT_EQ(busy_ns({{T, T + 3000}}, from, to), 1000u);        // covers it all
  EXPECT_EQ(busy_ns({{T, T + 500}, {T + 2000, T + 3000}}, from, to), 0u);  // wholly outside (the end is open)
  EXPECT_EQ(busy_ns({{T + 500, T + 1200}, {T + 1100, T + 1300}, {T + 1900, T + 2500}}, from, to), 400u);
}

TEST(GpuBusy, NothingOrNoTimeIsIdle) {
  EXPECT_EQ(busy_ns({}, T, T + 1000), 0u);
  // Records without both timestamps ran no known time.
  EXPECT_EQ(busy_ns({{T + 700, T + 700}, {T + 900, 0}}, T, T + 1000), 0u);
  const BusyFigures none = busy_figures({}, T, T + 10'000'000);
  EXPECT_DOUBLE_EQ(none.busy_ms, 0.0);
  EXPECT_DOUBLE_EQ(none.idle_share, 1.0);
  // An empty window has no share.
  const BusyFigures empty = busy_figures({{T, T + 5}}, T + 10, T + 10);
  EXPECT_DOUBLE_EQ(empty.busy_ms, 0.0);
  EXPECT_DOUBLE_EQ(empty.idle_share, 0.0);
}

TEST(GpuBusy, AStepThatWaitsForItsHost) {
  // A 20 ms step: the batch's copy (0.2-0.5 ms), forward and backward kernels
  // (0.5-3.0 ms, two streams overlapping at 1.0-1.5), a host sleep of 15 ms
  // with nothing queued, the optimizer's kernels (18.0-19.25 ms). Busy: 0.3 +
  // 2.5 + 1.25 = 4.05 ms; idle: 1 - 4.05 / 20 = 0.7975.
  const uint64_t ms = 1'000'000;
  const std::vector<Interval> step = {{T + 200'000, T + 500'000}, {T + ms / 2, T + ms + ms / 2},
                                      {T + ms, T + 3 * ms},       {T + 18 * ms, T + 18 * ms + ms / 2},
                                      {T + 18 * ms + ms / 2, T + 19 * ms + ms / 4}};
  const BusyFigures f = busy_figures(step, T, T + 20 * ms);
  EXPECT_DOUBLE_EQ(f.busy_ms, 4.05);
  EXPECT_DOUBLE_EQ(f.idle_share, 0.7975);
}

}  // namespace
}  // namespace threadburn::cuda
