// Parsing shared by the CUDA and the stub builds (values of cudaDeviceSchedule*).
#include "cuda/cuda_host.h"

namespace threadburn::cuda {

int parse_sync_policy(const std::string& text) {
  if (text == "auto") return 0;           // cudaDeviceScheduleAuto
  if (text == "spin") return 1;           // cudaDeviceScheduleSpin
  if (text == "yield") return 2;          // cudaDeviceScheduleYield
  if (text == "blocking_sync") return 4;  // cudaDeviceScheduleBlockingSync
  return -1;
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
