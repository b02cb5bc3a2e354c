// Pure functions of the core, fed made-up samples: answers checked to the digit.
#include <gtest/gtest.h>

#include "core/burn.h"
#include "core/cli.h"
#include "core/procfs.h"
#include "core/stats.h"

namespace threadburn {
namespace {

BurnSample sample(int64_t t_us, int64_t others_us, int64_t main_us = 0, int64_t sampler_us = 0) {
  BurnSample s;
  s.t_ns = t_us * 1000;
  s.main_cpu_ns = main_us * 1000;
  s.sampler_cpu_ns = sampler_us * 1000;
  s.others_cpu_ns = others_us * 1000;
  return s;
}

TEST(BurnRates, RateIsCpuOverWallPerInterval) {
  // 1 ms intervals; others burn 1 core, then half a core, then nothing.
  std::vector<BurnSample> s = {sample(0, 0, 0, 0), sample(1000, 1000, 0, 20),
                               sample(2000, 1500, 100, 40), sample(3000, 1500, 100, 60)};
  auto p = burn_rates(s, 1000 * 1000);  // origin at t = 1 ms
  ASSERT_EQ(p.size(), 3u);
  EXPECT_DOUBLE_EQ(p[0].t_ms, 0.0);
  EXPECT_DOUBLE_EQ(p[0].others_cores, 1.0);
  EXPECT_DOUBLE_EQ(p[1].t_ms, 1.0);
  EXPECT_DOUBLE_EQ(p[1].others_cores, 0.5);
  EXPECT_DOUBLE_EQ(p[1].main_cores, 0.1);
  EXPECT_DOUBLE_EQ(p[2].others_cores, 0.0);
}

TEST(BurnRates, SamplerCpuIsNotCountedAsOthers) {
  std::vector<BurnSample> s = {sample(0, 0, 0, 0), sample(500, 0, 0, 400)};
  auto p = burn_rates(s, 0);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_DOUBLE_EQ(p[0].others_cores, 0.0);
}

TEST(TailMs, LastIntervalAboveThreshold) {
  std::vector<BurnPoint> p = {{-1.0, 2.0, 1.0}, {0.5, 1.0, 0}, {1.0, 0.9, 0},
                              {1.5, 0.06, 0},   {2.0, 0.04, 0}, {2.5, 0.0, 0}};
  EXPECT_DOUBLE_EQ(tail_ms(p, 0.05, 0), 1.5);  // each interval alone: 0.06 > 0.05, 0.04 is not
  EXPECT_DOUBLE_EQ(tail_ms(p, 0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(tail_ms(p, 5.0, 0), 0.0);   // nothing above: no tail
  EXPECT_DOUBLE_EQ(tail_ms(p), 1.5);           // smoothed: 1.5's neighbourhood still burns
}

// One 50 us wake-up of a sleeping thread in a 0.5 ms interval is 10 % of a
// core there, but not a burn: smoothed over 2 ms it is 2.5 %.
TEST(TailMs, IsolatedWakeupIsNoTailButASpinEndIs) {
  std::vector<BurnPoint> quiet;
  for (int i = 0; i <= 40; ++i) quiet.push_back({i * 0.5, i == 30 ? 0.1 : 0.0, 0});
  EXPECT_DOUBLE_EQ(tail_ms(quiet, 0.05, 0), 15.0);  // raw: the blip is a "tail"
  EXPECT_DOUBLE_EQ(tail_ms(quiet), 0.0);            // smoothed: it is not
  std::vector<BurnPoint> spin;  // 1 core until 10.2 ms, then nothing
  for (int i = 0; i <= 40; ++i) {
    const double t = i * 0.5;
    spin.push_back({t, t <= 10.0 ? 1.0 : (t == 10.5 ? 0.4 : 0.0), 0});
  }
  EXPECT_DOUBLE_EQ(tail_ms(spin), 10.5);
}

TEST(TailMs, BurnBeforeTheStepEndIsNoTail) {
  std::vector<BurnPoint> p = {{-2.0, 3.0, 0}, {0.0, 3.0, 0}, {0.5, 0.0, 0}};
  EXPECT_DOUBLE_EQ(tail_ms(p), 0.0);
}

TEST(Stats, PercentileInterpolatesLinearly) {
  std::vector<double> v = {4, 1, 3, 2};  // sorted 1 2 3 4
  EXPECT_DOUBLE_EQ(percentile(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(percentile(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(percentile(v, 0.1), 1.3);
  EXPECT_DOUBLE_EQ(median({5}), 5.0);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
}

TEST(Stats, SummaryOfKnownSet) {
  // mean 5, sample variance 32/7
  Summary s = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_EQ(s.n, 8u);
  EXPECT_DOUBLE_EQ(s.mean, 5.0);
  EXPECT_DOUBLE_EQ(s.median, 4.5);
  EXPECT_NEAR(s.stddev, 2.138089935299395, 1e-12);
  EXPECT_NEAR(s.cv, 2.138089935299395 / 5.0, 1e-12);
  EXPECT_DOUBLE_EQ(s.min, 2.0);
  EXPECT_DOUBLE_EQ(s.max, 9.0);
  EXPECT_DOUBLE_EQ(stddev({3}), 0.0);
}

TEST(Procfs, ParsesSchedstatAndStatus) {
  EXPECT_EQ(parse_schedstat("123456789 987 12\n").value(), 123456789);
  EXPECT_FALSE(parse_schedstat("").has_value());
  EXPECT_FALSE(parse_schedstat("abc 1 2").has_value());
  int64_t vol = -1, invol = -1;
  parse_status_ctxsw("Name:\tx\nvoluntary_ctxt_switches:\t42\nnonvoluntary_ctxt_switches:\t7\n",
                     &vol, &invol);
  EXPECT_EQ(vol, 42);
  EXPECT_EQ(invol, 7);
}

TEST(Procfs, ThreadDeltasHandleBirthAndDeath) {
  std::vector<ThreadStat> before = {{10, "main", 1000, -1, -1}, {11, "dead", 500, -1, -1}};
  std::vector<ThreadStat> after = {{10, "main", 1600, -1, -1}, {12, "born", 300, -1, -1}};
  auto d = thread_deltas(before, after);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].tid, 10);
  EXPECT_EQ(d[0].cpu_ns, 600);
  EXPECT_EQ(d[1].name, "born");
  EXPECT_EQ(d[1].cpu_ns, 300);
}

TEST(Cli, IntListsAndErrorsNameTheFlag) {
  EXPECT_EQ(parse_int_list("batch", "64, 256", 1, 100000), (std::vector<int64_t>{64, 256}));
  try {
    parse_int_list("batch", "64,0", 1, 100000);
    FAIL() << "no throw";
  } catch (const FlagError& e) {
    EXPECT_STREQ(e.what(), "--batch: expected an integer in [1, 100000], got 0");
  }
  EXPECT_THROW(parse_int_list("batch", "", 1, 10), FlagError);
  EXPECT_THROW(parse_int_list("batch", "1,,2", 1, 10), FlagError);
  EXPECT_THROW(parse_int_list("batch", "1x", 1, 10), FlagError);
  EXPECT_THROW(parse_int("gap_ms", "-3", 0, INT64_MAX), FlagError);
  try {
    parse_choice_list("model", "mnist_adadelta,resnet", {"mnist_adadelta", "cifar_sgd"});
    FAIL() << "no throw";
  } catch (const FlagError& e) {
    EXPECT_STREQ(e.what(),
                 "--model: unknown value 'resnet' (expected one of: mnist_adadelta, cifar_sgd)");
  }
}

TEST(Cli, ParserKeepsBenchmarkFlagsAndRejectsUnknown) {
  FlagParser p("prog", "summary");
  p.add("batch", "64", "batch size");
  p.add("data-dir", "", "dataset folder");
  std::vector<std::string> args = {"prog", "--batch=8", "--benchmark_filter=x", "--data-dir", "/d"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  auto rest = p.parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_STREQ(rest[1], "--benchmark_filter=x");
  EXPECT_EQ(p.get("batch"), "8");
  EXPECT_EQ(p.get("data-dir"), "/d");
  EXPECT_TRUE(p.was_set("batch"));

  FlagParser q("prog", "summary");
  q.add("batch", "64", "batch size");
  std::vector<std::string> bad = {"prog", "--batchsize=3"};
  std::vector<char*> bargv;
  for (auto& a : bad) bargv.push_back(a.data());
  EXPECT_THROW(q.parse(2, bargv.data()), FlagError);
  std::vector<std::string> missing = {"prog", "--batch"};
  std::vector<char*> margv;
  for (auto& a : missing) margv.push_back(a.data());
  EXPECT_THROW(q.parse(2, margv.data()), FlagError);
}

}  // namespace
}  // namespace threadburn
