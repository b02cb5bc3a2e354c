// The probe's region statistics (src/probe/report.h): real percentiles, per
// entry point, nested regions apart.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "probe/report.h"

namespace threadburn::probe {
namespace {

TEST(RegionStats, PercentilesAreExactWhileAllDurationsAreKept) {
  RegionStats s;
  std::vector<int64_t> d(1001);
  std::iota(d.begin(), d.end(), 0);
  std::shuffle(d.begin(), d.end(), std::mt19937(7));
  for (int64_t v : d) s.add_region(0, 0, (v + 1) * 1000, 2);  // 1 .. 1001 us
  ASSERT_TRUE(s.durations.exact());
  EXPECT_DOUBLE_EQ(s.quantile_us(0.5), 501.0);
  EXPECT_DOUBLE_EQ(s.quantile_us(0.9), 901.0);
  EXPECT_DOUBLE_EQ(s.quantile_us(0.99), 991.0);
  EXPECT_DOUBLE_EQ(s.entries.at(0).durations.quantile_us(0.5), 501.0);
}

TEST(RegionStats, PercentilesFromAUniformSampleBeyondCapacity) {
  RegionStats s;
  // Durations that grow through the run (10 ns .. 2 ms): a sample that kept
  // only the first ones, or favoured the last, would miss the median.
  for (int i = 1; i <= 200000; ++i) s.add_region(0, 0, int64_t{10} * i, 2);
  EXPECT_FALSE(s.durations.exact());
  EXPECT_EQ(s.durations.kept.size(), kDurationsKept);
  // A uniform sample of 16384: its quantiles lie within ~8 us (one standard
  // error) of the true 1000 us and 1800 us; 40 us is five of them.
  EXPECT_NEAR(s.quantile_us(0.5), 1000.0, 40.0);
  EXPECT_NEAR(s.quantile_us(0.9), 1800.0, 40.0);
}

TEST(RegionStats, NestedRegionsAreCountedApartPerEntryPoint) {
  RegionStats s;
  s.add_region(2, 0, 5000, 2);
  s.add_region(2, 0, 7000, 3);
  s.add_region(2, 1, 1000, 2);
  s.add_region(18, 0, 9000, 2);
  s.add_region(18, 2, 1000, 2);
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.nested, 2);
  EXPECT_EQ(s.max_depth, 2);
  EXPECT_EQ(s.entries.at(2).count, 2);
  EXPECT_EQ(s.entries.at(2).nested, 1);
  EXPECT_EQ(s.entries.at(2).total_ns, 12000);
  EXPECT_EQ(s.entries.at(2).teams.at(2), 1);
  EXPECT_EQ(s.entries.at(2).teams.at(3), 1);
  EXPECT_EQ(s.entries.at(18).count, 1);
  EXPECT_EQ(s.entries.at(18).nested, 1);
}

}  // namespace
}  // namespace threadburn::probe
