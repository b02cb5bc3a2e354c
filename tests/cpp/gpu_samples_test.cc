// The GPU's busy share from utilisation samples (src/cuda/gpu_samples.h),
// each case against a value worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "core/clock.h"
#include "cuda/gpu_samples.h"

namespace threadburn::gpu {
namespace {

constexpr int64_t kMs = 1000000;

// Samples every 100 ms at 100 .. 500 ms: 10 %, 50 %, 90 %, 30 %, 70 %.
std::vector<Sample> five() {
  return {{100 * kMs, 0.1}, {200 * kMs, 0.5}, {300 * kMs, 0.9}, {400 * kMs, 0.3}, {500 * kMs, 0.7}};
}

TEST(WindowShare, AWindowCoveringEverySampleIsTheirMean) {
  // The first sample stands for (0, 100] (the median spacing): all inside.
  const Share s = window_share(five(), 0, 500 * kMs, 0);
  EXPECT_NEAR(s.share, 0.5, 1e-12);
  EXPECT_EQ(s.samples, 5);
  EXPECT_DOUBLE_EQ(s.period_ms, 100);
  EXPECT_DOUBLE_EQ(s.first_ms, 100);
  EXPECT_DOUBLE_EQ(s.last_ms, 500);
}

TEST(WindowShare, TheSamplesAtTheEdgesCountByTheirPartInside) {
  // [150, 420] ms: 50 ms of 50 %, 100 of 90 %, 100 of 30 %, 20 of 70 %:
  // (25 + 90 + 30 + 14) / 270.
  const Share s = window_share(five(), 150 * kMs, 420 * kMs, 100 * kMs);
  EXPECT_NEAR(s.share, 159.0 / 270.0, 1e-12);
  EXPECT_EQ(s.samples, 4);
  EXPECT_DOUBLE_EQ(s.first_ms, 100);  // the sample at 200 ms, from the origin at 100 ms
  EXPECT_DOUBLE_EQ(s.last_ms, 400);
}

TEST(WindowShare, LostSamplesLeaveTheirTimeUncovered) {
  // 100 % at 100, 200, 300 ms, then none until 0 % at 900 and 1000 ms: the
  // sample at 900 stands for two periods (700, 900], not (300, 900]:
  // 300 ms at 100 % of 600 covered, 0.5 (0.3 if the gap were credited to it).
  const std::vector<Sample> s = {{100 * kMs, 1}, {200 * kMs, 1}, {300 * kMs, 1}, {900 * kMs, 0}, {1000 * kMs, 0}};
  EXPECT_NEAR(window_share(s, 0, 1000 * kMs, 0).share, 0.5, 1e-12);
}

TEST(WindowShare, OrderAndRepeatedReadingsDoNotMatter) {
  std::vector<Sample> s = five();
  s.push_back({300 * kMs, 0.9});  // the same sample read twice (two polls)
  std::shuffle(s.begin(), s.end(), std::mt19937(7));
  const Share got = window_share(s, 0, 500 * kMs, 0);
  EXPECT_NEAR(got.share, 0.5, 1e-12);
  EXPECT_EQ(got.samples, 5);
}

TEST(WindowShare, NoSampleIsNoValue) {
  const Share none = window_share({}, 0, 500 * kMs, 0);
  EXPECT_TRUE(std::isnan(none.share));
  EXPECT_EQ(none.samples, 0);
  EXPECT_TRUE(std::isnan(none.period_ms));
  EXPECT_TRUE(std::isnan(none.first_ms));
  // Samples entirely before the window cover none of it.
  EXPECT_TRUE(std::isnan(window_share(five(), 600 * kMs, 900 * kMs, 0).share));
}

TEST(WindowShare, ALoneSampleCountsWhereItLies) {
  const Share in = window_share({{200 * kMs, 0.25}}, 0, 500 * kMs, 0);
  EXPECT_DOUBLE_EQ(in.share, 0.25);
  EXPECT_EQ(in.samples, 1);
  EXPECT_TRUE(std::isnan(in.period_ms));
  EXPECT_TRUE(std::isnan(window_share({{600 * kMs, 0.25}}, 0, 500 * kMs, 0).share));
}

TEST(Totals, MeanOfTheSampledGpus) {
  Summary a, b, c;
  a.busy.share = 0.5;
  a.busy.samples = 5;
  b.busy.share = 0.25;
  b.busy.samples = 3;
  c.busy.share = std::nan("");  // listed, never sampled: not in the mean
  const Totals t = totals({a, b, c});
  EXPECT_DOUBLE_EQ(t.busy_share, 0.375);
  EXPECT_EQ(t.gpus_sampled, 2);
  EXPECT_EQ(t.samples, 8);
  const Totals none = totals({});
  EXPECT_TRUE(std::isnan(none.busy_share));
  EXPECT_EQ(none.gpus_sampled, 0);
}

TEST(Summary, TheGpusListWritesNullWithoutSamples) {
  Series s;
  s.index = 1;
  s.name = "Fake GPU 1";
  s.source = "samples";
  s.busy = five();
  const Summary sampled = summarize(s, 0, 500 * kMs, 0);
  s.busy.clear();
  const Summary empty = summarize(s, 0, 500 * kMs, 0);
  JsonWriter j;
  write_gpus(&j, {sampled, empty});
  EXPECT_EQ(j.str(),
            "[{\"index\":1,\"name\":\"Fake GPU 1\",\"source\":\"samples\",\"busy_share\":0.5,\"memory_busy_share\":null,"
            "\"samples\":5,\"period_ms\":100,\"first_ms\":100,\"last_ms\":500,\"used\":false,\"used_by\":\"none\","
            "\"cuda_device\":null,\"wait_policy\":\"n/a\",\"memory_mib\":null},"
            "{\"index\":1,\"name\":\"Fake GPU 1\",\"source\":\"samples\",\"busy_share\":null,\"memory_busy_share\":null,"
            "\"samples\":0,\"period_ms\":null,\"first_ms\":null,\"last_ms\":null,\"used\":false,\"used_by\":\"none\","
            "\"cuda_device\":null,\"wait_policy\":\"n/a\",\"memory_mib\":null}]");
}

// The process's own GPUs, where any is known, are the busy share's: a training
// on one GPU of a node of four is judged on that one, not on a quarter of it.
TEST(Totals, TheProcesssOwnGpusWhenKnown) {
  Summary idle, mine, listed;
  idle.busy.share = 0.0;
  idle.busy.samples = 6;
  mine.busy.share = 0.9;
  mine.busy.samples = 6;
  mine.context = true;
  const Totals one = totals({idle, mine, idle, idle});
  EXPECT_DOUBLE_EQ(one.busy_share, 0.9);
  EXPECT_EQ(one.gpus_sampled, 1);
  listed.busy.share = 0.5;
  listed.busy.samples = 6;
  listed.listed = true;  // NVML's process list names it, no context seen
  EXPECT_DOUBLE_EQ(totals({idle, mine, listed}).busy_share, 0.7);
  EXPECT_DOUBLE_EQ(totals({idle, idle}).busy_share, 0.0);  // none known: every sampled GPU
}

TEST(Timeline, OneRowPerSampleInTheWindow) {
  Series s;
  s.index = 3;
  s.busy = five();
  TimelineWriter tl("program_start");
  add_busy_series(s, 150 * kMs, 420 * kMs, 100 * kMs, &tl);
  const std::string text = tl.text();
  EXPECT_EQ(text.substr(text.find("t_ms,series,cores\n")),
            "t_ms,series,cores\n100.000,gpu3_busy,0.5000\n200.000,gpu3_busy,0.9000\n300.000,gpu3_busy,0.3000\n");
}

TEST(VisibleDevices, AListOfNumbersOrEveryDevice) {
  EXPECT_FALSE(visible_devices(nullptr).has_value());
  EXPECT_EQ(visible_devices("1"), std::vector<int>({1}));
  EXPECT_EQ(visible_devices("0, 2"), std::vector<int>({0, 2}));
  EXPECT_EQ(visible_devices(""), std::vector<int>());  // CUDA sees none
  EXPECT_EQ(visible_devices("-1"), std::vector<int>({-1}));
  EXPECT_FALSE(visible_devices("GPU-8d2b6a9e-0000").has_value());
  EXPECT_FALSE(visible_devices("0,MIG-1").has_value());
  EXPECT_FALSE(visible_devices("0,").has_value());
}

TEST(Clock, TheDriversClockIsTheOneNearestItsLatestSample) {
  ClockNow now;
  now.realtime_us = 1767225600000000;  // 2026-01-01
  now.boottime_us = 3600000000;        // an hour after boot
  now.monotonic_us = 3500000000;       // 100 s of it suspended
  EXPECT_EQ(nearest_clock(now.realtime_us - 300000, now), Clock::kRealtime);
  EXPECT_EQ(nearest_clock(now.boottime_us - 300000, now), Clock::kBoottime);
  EXPECT_EQ(nearest_clock(now.monotonic_us - 300000, now), Clock::kMonotonic);
  // 250 ms ago on each clock is 250 ms ago on the probe's.
  const int64_t want = (now.monotonic_us - 250000) * 1000;
  EXPECT_EQ(to_monotonic_ns(now.realtime_us - 250000, Clock::kRealtime, now), want);
  EXPECT_EQ(to_monotonic_ns(now.boottime_us - 250000, Clock::kBoottime, now), want);
  EXPECT_EQ(to_monotonic_ns(now.monotonic_us - 250000, Clock::kMonotonic, now), want);
}

}  // namespace
}  // namespace threadburn::gpu
