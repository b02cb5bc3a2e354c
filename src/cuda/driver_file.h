// Which loaded file is the CUDA driver, one rule for the probe's thread
// classes (src/probe/thread_tap.cc: who created a thread) and the wait
// policy's cuda::driver_loaded() (src/cuda/driver_policy.cc: has the process
// loaded the driver, the one place that looks).
#pragma once

#include <cstring>
#include <string_view>

namespace threadburn::gpu {

// A file is the CUDA driver when its base name starts with "libcuda.so":
// libcuda.so.1 (its SONAME, what cudart and PyTorch open), libcuda.so, or
// the real file libcuda.so.<driver version> behind them. Not libcudart.
inline bool is_cuda_driver(const char* path) {
  if (!path) return false;
  const char* slash = std::strrchr(path, '/');
  return std::string_view(slash ? slash + 1 : path).substr(0, 10) == "libcuda.so";
}

}  // namespace threadburn::gpu
