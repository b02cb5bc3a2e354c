// The CUDA host module on any machine: parsing is pure; without a GPU every
// call must fail cleanly with a reason, never crash.
#include <gtest/gtest.h>

#include "cuda/cuda_host.h"

namespace threadburn::cuda {
namespace {

TEST(CudaHost, ParsesPolicies) {
  EXPECT_EQ(sync_policy_flags("auto"), 0);
  EXPECT_EQ(sync_policy_flags("spin"), 1);
  EXPECT_EQ(sync_policy_flags("yield"), 2);
  EXPECT_EQ(sync_policy_flags("blocking_sync"), 4);
  try {
    sync_policy_flags("busy");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--cuda_sync: unknown policy 'busy' (auto, spin, yield, blocking_sync)");
  }
  EXPECT_STREQ(sync_policy_name(4), "blocking_sync");
  EXPECT_STREQ(sync_policy_name(4 | 8), "blocking_sync");  // other flag bits ignored
}

TEST(CudaHost, NoDeviceMeansAReasonNotACrash) {
  if (device_count() > 0) GTEST_SKIP() << device_count() << " CUDA device(s): the no-GPU path is not testable here";
  const Availability a = device_availability(0);
  EXPECT_FALSE(a.ok);
  EXPECT_FALSE(a.why.empty());
  EXPECT_THROW(set_sync_policy(0, "spin"), Error);
  EXPECT_THROW(set_sync_policy(0, "busy"), Error);
  EXPECT_EQ(sync_policy_in_force(0), "n/a");
  GpuTimer timer;
  EXPECT_FALSE(timer.ok());
  timer.start();  // harmless without a device
  timer.stop();
  EXPECT_THROW(timer.elapsed_ms(), Error);
  // CUPTI without a device: absent with a reason, or present with nothing recorded.
  std::string why;
  GpuActivity* activity = GpuActivity::start(&why);
  if (activity == nullptr) {
    EXPECT_FALSE(why.empty());
  } else {
    EXPECT_TRUE(activity->take().empty()) << activity->version();
  }
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
