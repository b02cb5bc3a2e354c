// The benchmark programs' shared rules, without torch: the axis space (flat
// cross product, skip rules, names) and the counter table.
#include <gtest/gtest.h>

#include <set>

#include "core/error.h"
#include "metrics.h"
#include "space.h"

namespace threadburn::bench {
namespace {

AxisSpace train_like() {
  AxisSpace s("train_step");
  s.add_axis("model", std::vector<std::string>{"m"});
  s.add_axis("preload", std::vector<int64_t>{0, 1});
  s.add_axis("workers", std::vector<int64_t>{0, 2});
  s.add_axis("loader", std::vector<std::string>{"torch", "tbb"});
  s.add_skip({{{"preload", {"1"}}, {"workers", {"0"}, true}}, "preloaded data has no loader workers"});
  s.add_skip({{{"loader", {"tbb"}}, {"preload", {"1"}}}, "tbb needs no preload"});
  s.add_skip({{{"loader", {"tbb"}}, {"workers", {"0"}}}, "tbb needs workers"});
  return s;
}

TEST(AxisSpace, CrossProductInLoopOrderMinusSkips) {
  std::vector<std::string> names;
  for (const Point& p : train_like().points()) names.push_back(p.name());
  EXPECT_EQ(names, (std::vector<std::string>{
                       "train_step/m/preload:0/workers:0/loader:torch",
                       "train_step/m/preload:0/workers:2/loader:torch",
                       "train_step/m/preload:0/workers:2/loader:tbb",
                       "train_step/m/preload:1/workers:0/loader:torch",
                   }));
  const Point p = train_like().points()[2];
  EXPECT_EQ(p.text("loader"), "tbb");
  EXPECT_EQ(p.integer("workers"), 2);
  EXPECT_TRUE(p.flag("workers"));
  EXPECT_THROW(p.text("batch"), Error);
}

TEST(AxisSpace, NothingLeftToRunIsAnErrorThatSaysWhy) {
  AxisSpace s("train_step");
  s.add_axis("preload", std::vector<int64_t>{1});
  s.add_axis("workers", std::vector<int64_t>{2});
  s.add_skip({{{"preload", {"1"}}, {"workers", {"0"}, true}}, "preloaded data has no loader workers"});
  try {
    s.points();
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "no benchmark to run: every combination of these flags is skipped (preloaded data has no loader workers)");
  }
}

TEST(AxisSpace, DescribeHasAxesRulesAndBenchmarks) {
  AxisSpace s("f");
  s.add_axis("a", std::vector<int64_t>{1, 2});
  s.add_skip({{{"a", {"2"}}}, "no two"});
  JsonWriter j;
  j.begin_object();
  s.describe(&j);
  j.end_object();
  EXPECT_EQ(j.str(),
            "{\"axes\":[{\"name\":\"a\",\"values\":[\"1\",\"2\"]}],\"skip_rules\":[{\"all\":[{\"axis\":\"a\","
            "\"in\":[\"2\"]}],\"why\":\"no two\"}],\"benchmarks\":[{\"name\":\"f/1\",\"args\":{\"a\":\"1\"}}]}");
}

TEST(Metrics, EveryCounterIsDescribedOnce) {
  std::set<std::string> seen;
  for (const CounterSpec& m : step_counters()) {
    EXPECT_TRUE(seen.insert(m.name).second) << m.name << " twice";
    EXPECT_GT(std::string(m.help).size(), 10u) << m.name;
  }
  for (const char* cls : {"omp", "tbb", "loader", "gloo", "other"}) {
    EXPECT_TRUE(seen.count(std::string("residual_") + cls + "_ms")) << cls;
    EXPECT_TRUE(seen.count(std::string("step_cpu_") + cls + "_ms")) << cls;
  }
}

// The step loop's table is generic: no workload's vocabulary.
TEST(Metrics, TheStepLoopNamesNoWorkloadsCounters) {
  for (const char* owned : {"data_ms", "forward_ms", "backward_ms", "optim_ms", "gpu_ms", "allreduce_ms", "rank"}) {
    EXPECT_EQ(find_counter({&step_counters()}, owned), nullptr) << owned;
  }
}

TEST(Metrics, RegisteredTablesAreDescribedInOrderOnce) {
  static const CounterTable mine = {{"mine_ms", "ms", "a counter of a test's own table"}};
  register_counters(mine);
  register_counters(mine);
  ASSERT_EQ(registered_counters().size(), 2u);
  EXPECT_EQ(registered_counters()[0], &step_counters());
  JsonWriter j;
  j.begin_object();
  describe_metrics(&j);
  j.end_object();
  const std::string text = j.str();
  EXPECT_NE(text.find("{\"name\":\"mine_ms\",\"unit\":\"ms\",\"help\":\"a counter of a test's own table\"}"),
            std::string::npos);
  EXPECT_LT(text.find("\"step_ms\""), text.find("\"mine_ms\""));
}

}  // namespace
}  // namespace threadburn::bench
