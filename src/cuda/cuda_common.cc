// Shared by the CUDA and the stub builds: the counter table, parsing (values of cudaDeviceSchedule*).
#include "cuda/cuda_host.h"

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
