// The preload probe's report as pure functions of made-up samples
// (src/probe/report.h): how a sampling interval's CPU splits between "inside
// regions" and "between regions", and the burn, wait, tail and boundary of
// one gap, each against a value worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/burn.h"
#include "probe/report.h"

namespace threadburn::probe {
namespace {

constexpr int64_t kMs = 1000000;
const int kOmp = index_of(ThreadClass::kOmp);
const int kMain = index_of(ThreadClass::kMain);

BurnSample sample(int64_t t_ms, int64_t omp_cpu_us, int64_t main_cpu_us, int64_t mark_us = 0, int64_t wait_us = 0) {
  BurnSample s;
  s.t_ns = t_ms * kMs;
  s.cpu_ns[kOmp] = omp_cpu_us * 1000;
  s.cpu_ns[kMain] = main_cpu_us * 1000;
  s.mark_ns = mark_us * 1000;
  s.others_wait_ns = wait_us * 1000;
  return s;
}

TEST(SplitByRegions, SplitsEachIntervalByItsShareInsideRegions) {
  // 0-10 ms: half of it inside a region, 4 ms of team CPU: 2 in, 2 between.
  // 10-20 ms: no region, 2 ms of team CPU: all between.
  // 20-30 ms: the mark ran ahead of the wall (12 ms in 10): clamped to all inside.
  const std::vector<BurnSample> s = {sample(0, 0, 0, 0), sample(10, 4000, 10000, 5000),
                                     sample(20, 6000, 20000, 5000), sample(30, 7000, 30000, 17000)};
  const RegionSplit split = split_by_regions(s);
  EXPECT_EQ(split.in_regions_ns[kOmp], 3 * kMs);
  EXPECT_EQ(split.between_ns[kOmp], 4 * kMs);
  EXPECT_EQ(split.in_regions_ns[kMain], 15 * kMs);
  EXPECT_EQ(split.between_ns[kMain], 15 * kMs);
}

TEST(SplitByRegions, IgnoresIntervalsWithoutDuration) {
  const std::vector<BurnSample> s = {sample(0, 0, 0), sample(0, 5000, 0, 0), sample(10, 5000, 0, 10000)};
  const RegionSplit split = split_by_regions(s);
  EXPECT_EQ(split.in_regions_ns[kOmp], 0);
  EXPECT_EQ(split.between_ns[kOmp], 0);
}

// Every 1 ms from 0 to 10 ms: the team burns one core until 4 ms, then
// sleeps; the main thread burns one core throughout (it is not "others");
// the others wait 0.5 ms per ms for a core.
std::vector<BurnSample> team_spins_until_4ms() {
  std::vector<BurnSample> s;
  for (int64_t t = 0; t <= 10; ++t) s.push_back(sample(t, std::min<int64_t>(t, 4) * 1000, t * 1000, 0, t * 500));
  return s;
}

TEST(GapBurn, ProratesTheEdgesAndPlacesTheTail) {
  // The gap starts at 2.5 ms: the team burns 0.5 ms of (2, 3] and all of
  // (3, 4]: 1.5 ms. Its rate from the gap's start is 1 core at 0.5 and 1.5 ms,
  // 0 after: the tail ends at 1.5 ms (the neighbourhood of 1.5 ms averages
  // 0.5 cores, far above the threshold).
  const GapBurn g = gap_burn(team_spins_until_4ms(), Gap{2500000, 10 * kMs, false});
  ASSERT_TRUE(g.measured);
  EXPECT_DOUBLE_EQ(g.length_ms, 7.5);
  EXPECT_NEAR(g.omp_cpu_ms, 1.5, 1e-9);
  EXPECT_NEAR(g.others_cpu_ms, 1.5, 1e-9);  // main's CPU is not the others'
  EXPECT_NEAR(g.others_wait_ms, 3.75, 1e-9);
  EXPECT_NEAR(g.omp_tail_ms, 1.5, 1e-9);
  EXPECT_NEAR(g.boundary_ms, 1.0, 1e-9);
  EXPECT_NEAR(g.tail_interval_ms, 1.0, 1e-9);
}

TEST(GapBurn, ATailInALongIntervalIsKnownToThatInterval) {
  // Sampled every 1 ms until 3 ms, then every 10 ms (the sampler's period
  // grown by its budget): the team burns one core until 5 ms. The gap starts
  // at 0: the interval (3, 13] holds 2 ms of burn (0.2 cores, above the
  // threshold), so the tail is placed at its end, 13 ms, 8 ms after the burn
  // ended, and the record says the interval was 10 ms long.
  const std::vector<BurnSample> s = {sample(0, 0, 0), sample(1, 1000, 0), sample(2, 2000, 0), sample(3, 3000, 0),
                                     sample(13, 5000, 0), sample(23, 5000, 0)};
  const GapBurn g = gap_burn(s, Gap{0, 23 * kMs, false});
  ASSERT_TRUE(g.measured);
  EXPECT_NEAR(g.omp_tail_ms, 13.0, 1e-9);
  EXPECT_NEAR(g.tail_interval_ms, 10.0, 1e-9);
  EXPECT_NEAR(g.omp_cpu_ms, 5.0, 1e-9);
}

TEST(GapBurn, AQuietGapHasNoTail) {
  const GapBurn g = gap_burn(team_spins_until_4ms(), Gap{5 * kMs, 10 * kMs, true});
  ASSERT_TRUE(g.measured);
  EXPECT_EQ(g.omp_cpu_ms, 0.0);
  EXPECT_EQ(g.omp_tail_ms, 0.0);
  EXPECT_EQ(g.tail_interval_ms, 0.0);
}

TEST(GapBurn, AGapTheSamplesNoLongerCoverIsNotMeasured) {
  std::vector<BurnSample> s = team_spins_until_4ms();
  s.erase(s.begin(), s.begin() + 3);  // the ring starts at 3 ms
  const GapBurn g = gap_burn(s, Gap{2 * kMs, 10 * kMs, false});
  EXPECT_FALSE(g.measured);
  EXPECT_DOUBLE_EQ(g.length_ms, 8.0);
  EXPECT_EQ(g.omp_cpu_ms, 0.0);
}

}  // namespace
}  // namespace threadburn::probe
