// Pure functions of the core fed made-up values: answers checked to the digit.
#include <gtest/gtest.h>

#include <cmath>

#include "core/burn.h"
#include "core/cli.h"
#include "core/json.h"
#include "core/procfs.h"
#include "core/stats.h"
#include "core/thread_clocks.h"
#include "core/timeline.h"

namespace threadburn {
namespace {

// The one timeline format (src/core/timeline.h), as python/threadburn/lib/timeline.py reads it.
TEST(Timeline, HeaderRowsAndMarks) {
  TimelineWriter tl("step_end", {{"pid", "42"}});
  tl.mark(-12.5, kSeriesStepStart);
  tl.add(0.25, kSeriesOthers, 1.98766);
  tl.add(1, thread_series(7, "omp"), 0.5);
  tl.add(1, class_series("loader"), 0.125);
  EXPECT_EQ(tl.text(),
            "# threadburn timeline 1; origin=step_end; burn_threshold_cores=0.05; pid=42\n"
            "t_ms,series,cores\n"
            "-12.500,step_start,0.0000\n"
            "0.250,others,1.9877\n"
            "1.000,thread:7:omp,0.5000\n"
            "1.000,class:loader,0.1250\n");
}

// Snapshots 1 ms apart (origin 10 ms): main uses 0.5 ms then 0; an OpenMP
// worker 1 ms, then nothing; the sampler 0.2 ms (never a series); a worker
// born in the first interval 0.3 ms, dead by the second.
TEST(Timeline, ThreadSeriesFromSnapshots) {
  auto cpu = [](pid_t tid, ThreadClass cls, int64_t us, bool alive = true) {
    return ThreadCpu{tid, cls, us * 1000, alive};
  };
  const std::vector<ThreadSnapshot> snaps = {
      {10000000, {cpu(1, ThreadClass::kMain, 0), cpu(2, ThreadClass::kOmp, 0), cpu(3, ThreadClass::kSampler, 0)}},
      {11000000, {cpu(1, ThreadClass::kMain, 500), cpu(2, ThreadClass::kOmp, 1000), cpu(3, ThreadClass::kSampler, 200),
                  cpu(4, ThreadClass::kOmp, 300)}},
      {12000000, {cpu(1, ThreadClass::kMain, 500), cpu(2, ThreadClass::kOmp, 1000), cpu(3, ThreadClass::kSampler, 400),
                  cpu(4, ThreadClass::kOmp, 300, false)}},
  };
  TimelineWriter tl("step_end");
  add_thread_series(snaps, 10000000, &tl);
  const std::string text = tl.text();
  EXPECT_EQ(text.substr(text.find("t_ms,series,cores\n")),
            "t_ms,series,cores\n"
            "1.000,thread:1:main,0.5000\n"
            "1.000,thread:2:omp,1.0000\n"
            "1.000,thread:4:omp,0.3000\n");
}

TEST(Timeline, QuotedSeriesRoundTrip) {
  const std::string row = timeline_row(3, thread_series(9, "say \"a,b\""), 0.75);
  EXPECT_EQ(row, "3.000,\"thread:9:say \"\"a,b\"\"\",0.7500\n");
  double t = 0, cores = 0;
  std::string series;
  ASSERT_TRUE(parse_timeline_row(row, &t, &series, &cores));
  EXPECT_EQ(t, 3);
  EXPECT_EQ(series, "thread:9:say \"a,b\"");
  EXPECT_EQ(cores, 0.75);
  EXPECT_FALSE(parse_timeline_row("# threadburn timeline 1; origin=x", &t, &series, &cores));
  EXPECT_FALSE(parse_timeline_row("t_ms,series,cores", &t, &series, &cores));
  EXPECT_FALSE(parse_timeline_row("1,others", &t, &series, &cores));
  EXPECT_FALSE(parse_timeline_row("1,\"open,2", &t, &series, &cores));
  EXPECT_TRUE(parse_timeline_row("1,others,2\r\n", &t, &series, &cores));
}

// A sample at t_us with CPU so far (us) of others (class omp), main and sampler.
BurnSample sample(int64_t t_us, int64_t omp_us, int64_t main_us = 0, int64_t sampler_us = 0, int64_t loader_us = 0) {
  BurnSample s;
  s.t_ns = t_us * 1000;
  s.cpu_ns[index_of(ThreadClass::kOmp)] = omp_us * 1000;
  s.cpu_ns[index_of(ThreadClass::kMain)] = main_us * 1000;
  s.cpu_ns[index_of(ThreadClass::kSampler)] = sampler_us * 1000;
  s.cpu_ns[index_of(ThreadClass::kLoader)] = loader_us * 1000;
  return s;
}

TEST(BurnRates, RateIsCpuOverWallPerInterval) {
  // 1 ms intervals; others burn 1 core, then half a core, then nothing.
  std::vector<BurnSample> s = {sample(0, 0), sample(1000, 1000, 0, 20), sample(2000, 1500, 100, 40),
                               sample(3000, 1500, 100, 60)};
  auto p = burn_rates(s, 1000 * 1000);  // origin at t = 1 ms
  ASSERT_EQ(p.size(), 3u);
  EXPECT_DOUBLE_EQ(p[0].t_ms, 0.0);
  EXPECT_DOUBLE_EQ(p[0].others_cores, 1.0);
  EXPECT_DOUBLE_EQ(p[1].t_ms, 1.0);
  EXPECT_DOUBLE_EQ(p[1].others_cores, 0.5);
  EXPECT_DOUBLE_EQ(p[1].main_cores, 0.1);
  EXPECT_DOUBLE_EQ(p[2].others_cores, 0.0);
}

// "Others" are every class but main and the sampler: a loader's burn counts,
// the sampler's own does not, and each class keeps its own rate.
TEST(BurnRates, OthersSumTheClassesButMainAndSampler) {
  std::vector<BurnSample> s = {sample(0, 0), sample(1000, 300, 900, 400, 200)};
  auto p = burn_rates(s, 0);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_DOUBLE_EQ(p[0].others_cores, 0.5);  // omp 0.3 + loader 0.2; not main 0.9, not sampler 0.4
  EXPECT_DOUBLE_EQ(p[0].cores[index_of(ThreadClass::kLoader)], 0.2);
  EXPECT_DOUBLE_EQ(p[0].cores[index_of(ThreadClass::kSampler)], 0.4);
  EXPECT_EQ(s[1].others_cpu_ns(), 500 * 1000);
  ClassTotals t;  // the live totals (residual wait, settle) must draw the same line
  t.cpu_ns = t.wait_ns = s[1].cpu_ns;
  EXPECT_EQ(t.others_cpu_ns(), 500 * 1000);
  EXPECT_EQ(t.others_wait_ns(), 500 * 1000);
  EXPECT_EQ(t.all_but_sampler_wait_ns(), 1400 * 1000);
}

TEST(TailMs, LastIntervalAboveThreshold) {
  auto pt = [](double t, double others) {
    BurnPoint p;
    p.t_ms = t;
    p.others_cores = others;
    return p;
  };
  std::vector<BurnPoint> p = {pt(-1.0, 2.0), pt(0.5, 1.0), pt(1.0, 0.9), pt(1.5, 0.06), pt(2.0, 0.04), pt(2.5, 0.0)};
  EXPECT_DOUBLE_EQ(tail_ms(p, 0.05, 0), 1.5);  // each interval alone: 0.06 > 0.05, 0.04 is not
  EXPECT_DOUBLE_EQ(tail_ms(p, 0.5, 0), 1.0);
  EXPECT_DOUBLE_EQ(tail_ms(p, 5.0, 0), 0.0);   // nothing above: no tail
  EXPECT_DOUBLE_EQ(tail_ms(p), 1.5);           // smoothed: 1.5's neighbourhood still burns
}

// One 50 us wake-up of a sleeping thread in a 0.5 ms interval is 10 % of a
// core there, but not a burn: smoothed over 2 ms it is 2.5 %.
TEST(TailMs, IsolatedWakeupIsNoTailButASpinEndIs) {
  std::vector<BurnPoint> quiet, spin;
  for (int i = 0; i <= 40; ++i) {
    BurnPoint q;
    q.t_ms = i * 0.5;
    q.others_cores = i == 30 ? 0.1 : 0.0;
    quiet.push_back(q);
    BurnPoint s;  // 1 core until 10.0 ms, 0.4 in the interval ending at 10.5, then nothing
    s.t_ms = i * 0.5;
    s.others_cores = s.t_ms <= 10.0 ? 1.0 : (s.t_ms == 10.5 ? 0.4 : 0.0);
    spin.push_back(s);
  }
  EXPECT_DOUBLE_EQ(tail_ms(quiet, 0.05, 0), 15.0);  // raw: the blip is a "tail"
  EXPECT_DOUBLE_EQ(tail_ms(quiet), 0.0);            // smoothed: it is not
  EXPECT_DOUBLE_EQ(tail_ms(spin), 10.5);
}

TEST(TailMs, BurnBeforeTheStepEndIsNoTail) {
  std::vector<BurnPoint> p(3);
  p[0].t_ms = -2.0, p[0].others_cores = 3.0;
  p[1].t_ms = 0.0, p[1].others_cores = 3.0;
  p[2].t_ms = 0.5, p[2].others_cores = 0.0;
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

TEST(Stats, MeanStddevCvOfKnownSet) {
  const std::vector<double> v = {2, 4, 4, 4, 5, 5, 7, 9};  // mean 5, sample variance 32/7
  EXPECT_DOUBLE_EQ(mean(v), 5.0);
  EXPECT_NEAR(stddev(v), 2.138089935299395, 1e-12);
  EXPECT_NEAR(cv(v), 2.138089935299395 / 5.0, 1e-12);
  EXPECT_DOUBLE_EQ(stddev({3}), 0.0);
  EXPECT_DOUBLE_EQ(cv({0, 0}), 0.0);
}

TEST(Procfs, ParsesAllThreeSchedstatFields) {
  const auto s = parse_schedstat("123456789 987 12\n");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->cpu_ns, 123456789);
  EXPECT_EQ(s->run_delay_ns, 987);
  EXPECT_EQ(s->timeslices, 12);
  EXPECT_FALSE(parse_schedstat("").has_value());
  EXPECT_FALSE(parse_schedstat("abc 1 2").has_value());
  EXPECT_FALSE(parse_schedstat("1 2").has_value());
}

std::vector<char*> argv_of(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args) out.push_back(a.data());
  return out;
}

TEST(Cli, IntListsAndErrorsNameTheFlag) {
  EXPECT_EQ(parse_int_list("batch", "64, 256", 1, 100000), (std::vector<int64_t>{64, 256}));
  try {
    parse_int_list("batch", "64,0", 1, 100000);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--batch: expected an integer in [1, 100000], got 0");
  }
  EXPECT_THROW(parse_int_list("batch", "", 1, 10), Error);
  EXPECT_THROW(parse_int_list("batch", "1,,2", 1, 10), Error);
  EXPECT_THROW(parse_int_list("batch", "1x", 1, 10), Error);
  EXPECT_THROW(parse_int("gap_ms", "-3", 0, INT64_MAX), Error);
  EXPECT_THROW(parse_double("threshold", "nan", 0, 1), Error);
  EXPECT_DOUBLE_EQ(parse_double("threshold", "0.25", 0, 1), 0.25);
  try {
    parse_choice_list("model", "mnist_adadelta,resnet", {"mnist_adadelta", "cifar_sgd"});
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--model: unknown value 'resnet' (expected one of: mnist_adadelta, cifar_sgd)");
  }
}

TEST(Cli, ParserChecksEveryDeclaredFlagBeforeAnythingRuns) {
  FlagParser p("prog", "summary");
  p.add_int_list("batch", "64", 1, 1000, "batch sizes");
  p.add_string("data_dir", "", "dataset folder");
  p.add_switch("force", "overwrite");
  // "--data-dir": the spelling before 0.2, accepted for "--data_dir".
  std::vector<std::string> args = {"prog", "--batch=8,16", "--benchmark_filter=x", "--data-dir", "/d", "--force"};
  auto argv = argv_of(args);
  auto rest = p.parse(static_cast<int>(argv.size()), argv.data());
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_STREQ(rest[1], "--benchmark_filter=x");
  EXPECT_EQ(p.integers("batch"), (std::vector<int64_t>{8, 16}));
  EXPECT_EQ(p.text("data_dir"), "/d");
  EXPECT_TRUE(p.on("force"));
  EXPECT_TRUE(p.was_set("batch"));

  for (std::vector<std::string> bad : {std::vector<std::string>{"prog", "--batchsize=3"},
                                       std::vector<std::string>{"prog", "--batch"},
                                       std::vector<std::string>{"prog", "--batch=0"}, std::vector<std::string>{"prog", "x"}}) {
    FlagParser q("prog", "summary");
    q.add_int_list("batch", "64", 1, 1000, "batch sizes");
    auto bargv = argv_of(bad);
    EXPECT_THROW(q.parse(static_cast<int>(bargv.size()), bargv.data()), Error) << bad[1];
  }
  // A bad default is a bad flag too: nothing runs on values nobody checked.
  FlagParser d("prog", "summary");
  d.add_int("steps", 0, 1, 10, "steps");
  std::vector<std::string> none = {"prog"};
  auto nargv = argv_of(none);
  EXPECT_THROW(d.parse(1, nargv.data()), Error);
}

TEST(Cli, DescribeListsKindsBoundsAndChoices) {
  FlagParser p("prog", "summary");
  p.add_int_list("batch", "64", 1, 1000, "batch sizes");
  p.add_choice_list("model", "a", {"a", "b"}, "models", /*axis=*/true);
  p.add_int("steps", 10, 1, 100, "steps");
  JsonWriter json;
  json.begin_object();
  p.describe(&json);
  json.end_object();
  const std::string text = json.str();
  EXPECT_EQ(text.substr(0, text.find(",\"flag_syntax\"")),
            "{\"flags\":[{\"name\":\"batch\",\"kind\":\"int_list\",\"default\":\"64\",\"value\":\"64\","
            "\"help\":\"batch sizes\",\"axis\":true,\"min\":1,\"max\":1000,\"expected\":\"an integer in [1, 1000]\"},"
            "{\"name\":\"model\",\"kind\":\"choice_list\",\"default\":\"a\",\"value\":\"a\",\"help\":\"models\","
            "\"axis\":true,\"choices\":[\"a\",\"b\"]},{\"name\":\"steps\",\"kind\":\"int\",\"default\":\"10\","
            "\"value\":\"10\",\"help\":\"steps\",\"axis\":false,\"min\":1,\"max\":100,\"expected\":\"an integer in "
            "[1, 100]\"}]");
  // The published syntax holds the templates the parser throws with: what a test double refuses with.
  EXPECT_NE(text.find("\"flag_syntax\":{\"integer\":\"[+-]?[0-9]+\",\"messages\":{"), std::string::npos);
  EXPECT_NE(text.find("\"out_of_range\":\"--{flag}: expected {expected}, got {text}\""), std::string::npos);
  EXPECT_NE(text.find("\"unknown_flag\":\"--{flag}: unknown flag (see --help)\""), std::string::npos);
  try {
    parse_int("steps", " 0 ", 1, 100);
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--steps: expected an integer in [1, 100], got 0");  // out_of_range, filled in
  }
  std::vector<std::string> args = {"prog", "--nope=1"};
  auto argv = argv_of(args);
  FlagParser q("prog", "summary");
  try {
    q.parse(static_cast<int>(argv.size()), argv.data());
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--nope: unknown flag (see --help)");  // unknown_flag, filled in
  }
}

TEST(Json, QuotesAndNumbers) {
  JsonWriter j;
  j.begin_object().field("s", std::string("a\"b\n")).field("x", 0.5).field("n", static_cast<int64_t>(-3));
  j.key("nan").value(std::nan("")).key("list").strings({"p", "q"}).end_object();
  EXPECT_EQ(j.str(), "{\"s\":\"a\\\"b\\n\",\"x\":0.5,\"n\":-3,\"nan\":null,\"list\":[\"p\",\"q\"]}");
}

}  // namespace
}  // namespace threadburn
