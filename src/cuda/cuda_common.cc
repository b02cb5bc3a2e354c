// Parsing shared by the CUDA and the stub builds (values of cudaDeviceSchedule*).
#include "cuda/cuda_host.h"

namespace threadburn::cuda {

const CounterTable& gpu_counters() {
  static const CounterTable table = {{"gpu_ms", "ms", "CUDA: GPU time of the step, from CUDA events"}};
  return table;
}

int sync_policy_flags(const std::string& policy) {
  if (policy == "auto") return 0;           // cudaDeviceScheduleAuto
  if (policy == "spin") return 1;           // cudaDeviceScheduleSpin
  if (policy == "yield") return 2;          // cudaDeviceScheduleYield
  if (policy == "blocking_sync") return 4;  // cudaDeviceScheduleBlockingSync
  throw Error("--cuda_sync: unknown policy '" + policy + "' (auto, spin, yield, blocking_sync)");
}

const char* sync_policy_name(int flags) {
  switch (flags & 0x07) {
    case 0: return "auto";
    case 1: return "spin";
    case 2: return "yield";
    case 4: return "blocking_sync";
    default: return "unknown";
  }
}

}  // namespace threadburn::cuda
