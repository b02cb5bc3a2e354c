// Shared by the CUDA and the stub builds: the counter table, parsing (the policies of the
// driver, driver_policy.h; cudaDeviceSchedule* has the same values as CU_CTX_SCHED_*).
#include "cuda/cuda_host.h"
#include "cuda/driver_policy.h"

namespace threadburn::cuda {

const CounterTable& gpu_counters() {
  static const CounterTable table = {
      {"gpu_span_ms", "ms",
       "CUDA: CUDA events around the step's device work (batch on the device to the step's end): work and "
       "the stream's waits for the host"},
      {"gpu_busy_ms", "ms",
       "CUDA: time the GPU ran the step's kernels, copies or memsets (union of CUPTI's records in the step)"},
      {"gpu_idle_share", "1", "CUDA: 1 - gpu_busy_ms / the step's time: the share the GPU waited for the host"},
  };
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
