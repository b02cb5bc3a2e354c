// Parsing shared by the CUDA and the stub builds: the policies of the driver
// (driver_policy.h; cudaDeviceSchedule* has the same values as CU_CTX_SCHED_*).
#include "cuda/cuda_host.h"
#include "cuda/driver_policy.h"

namespace threadburn::cuda {

const CounterTable& gpu_counters() {
  static const CounterTable table = {{"gpu_ms", "ms", "CUDA: GPU time of the step, from CUDA events"}};
  return table;
}

int sync_policy_flags(const std::string& policy) {
  unsigned flags = 0;
  if (!policy_flags(policy, &flags)) {
    throw Error("--cuda_sync: unknown policy '" + policy + "' (auto, spin, yield, blocking_sync)");
  }
  return static_cast<int>(flags);
}

const char* sync_policy_name(int flags) { return policy_name(static_cast<unsigned>(flags)); }

}  // namespace threadburn::cuda
