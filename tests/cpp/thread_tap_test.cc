// The rules behind the cuda and pin classes of thread (src/probe/thread_tap.h)
// and the class names (src/core/thread_class.h).
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "core/thread_class.h"
#include "probe/thread_tap.h"

namespace threadburn {
namespace {

using probe::thread_tap::is_cuda_driver;
using probe::thread_tap::is_autograd_thread_name;
using probe::thread_tap::is_pin_thread_name;

TEST(ThreadTap, TheCudaDriverByItsFileName) {
  EXPECT_TRUE(is_cuda_driver("/usr/lib/x86_64-linux-gnu/libcuda.so.1"));
  EXPECT_TRUE(is_cuda_driver("/usr/lib/x86_64-linux-gnu/libcuda.so.550.54.15"));
  EXPECT_TRUE(is_cuda_driver("libcuda.so"));
  EXPECT_FALSE(is_cuda_driver("/usr/local/cuda/lib64/libcudart.so.13"));  // the runtime, not the driver
  EXPECT_FALSE(is_cuda_driver("/opt/libcuda.so.1/libtorch_cuda.so"));     // only the file's own name
  EXPECT_FALSE(is_cuda_driver("/usr/lib/libcuda_helper.so"));
  EXPECT_FALSE(is_cuda_driver(nullptr));
}

TEST(ThreadTap, ThePinThreadByTheNameTheKernelKeeps) {
  EXPECT_TRUE(is_pin_thread_name("pt_data_pin"));
  EXPECT_FALSE(is_pin_thread_name("pt_data_pin2"));
  EXPECT_FALSE(is_pin_thread_name("pt_data_worker"));
  EXPECT_FALSE(is_pin_thread_name("pt_data_pin_0123456"));  // kept as "pt_data_pin_012"
  EXPECT_FALSE(is_pin_thread_name(nullptr));
}

TEST(ThreadTap, TheAutogradThreadByTheNameItGivesItselfAsItEnters) {
  EXPECT_TRUE(is_autograd_thread_name("pt_autograd_0"));
  EXPECT_TRUE(is_autograd_thread_name("pt_autograd_12"));
  EXPECT_FALSE(is_autograd_thread_name("pt_autograd_"));
  EXPECT_FALSE(is_autograd_thread_name("pt_autograd_x"));
  EXPECT_FALSE(is_autograd_thread_name("pt_data_pin"));
  EXPECT_FALSE(is_autograd_thread_name(nullptr));
}

TEST(ThreadClass, EveryNameIsOneClass) {
  std::set<std::string> names;
  for (int i = 0; i < kThreadClasses; ++i) {
    const auto c = static_cast<ThreadClass>(i);
    ThreadClass back{};
    ASSERT_TRUE(parse_thread_class(thread_class_name(c), &back)) << i;
    EXPECT_EQ(back, c);
    names.insert(thread_class_name(c));
  }
  EXPECT_EQ(names.size(), static_cast<size_t>(kThreadClasses));
  EXPECT_STREQ(thread_class_name(ThreadClass::kCuda), "cuda");
  EXPECT_STREQ(thread_class_name(ThreadClass::kPin), "pin");
  EXPECT_STREQ(thread_class_name(ThreadClass::kAutograd), "autograd");
}

}  // namespace
}  // namespace threadburn
