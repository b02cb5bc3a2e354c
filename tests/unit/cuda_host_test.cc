// The CUDA host module on any machine: parsing is pure; without a GPU every
// call must fail cleanly with a reason, never crash.
#include <gtest/gtest.h>

#include "cuda/cuda_host.h"

namespace threadburn::cuda {
namespace {

TEST(CudaHost, ParsesPolicies) {
  EXPECT_EQ(parse_sync_policy("auto"), 0);
  EXPECT_EQ(parse_sync_policy("spin"), 1);
  EXPECT_EQ(parse_sync_policy("yield"), 2);
  EXPECT_EQ(parse_sync_policy("blocking_sync"), 4);
  EXPECT_EQ(parse_sync_policy("busy"), -1);
  EXPECT_STREQ(sync_policy_name(4), "blocking_sync");
  EXPECT_STREQ(sync_policy_name(4 | 8), "blocking_sync");  // other flag bits ignored
}

TEST(CudaHost, NoDeviceMeansAReasonNotACrash) {
  std::string why;
  const int n = device_count(&why);
  if (n > 0) GTEST_SKIP() << n << " CUDA device(s): the no-GPU path is not testable here";
  EXPECT_FALSE(why.empty());
  EXPECT_FALSE(set_sync_policy(0, "spin").empty());
  EXPECT_EQ(set_sync_policy(0, "busy").empty(), false);
  EXPECT_EQ(sync_policy_in_force(0), "n/a");
  GpuTimer timer;
  timer.start();
  timer.stop();
  EXPECT_GE(timer.elapsed_ms(), 0.0);
}

TEST(CudaHost, ToolkitFlagMatchesTheBuild) {
#if THREADBURN_HAVE_CUDA_TOOLKIT
  EXPECT_TRUE(toolkit_compiled());
  EXPECT_NE(runtime_version(), "n/a");
#else
  EXPECT_FALSE(toolkit_compiled());
  EXPECT_EQ(runtime_version(), "n/a");
#endif
}

}  // namespace
}  // namespace threadburn::cuda
