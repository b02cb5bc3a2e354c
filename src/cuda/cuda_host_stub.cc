// Built when CMake finds no CUDA toolkit: every CUDA-only request says why.
#include "cuda/cuda_host.h"

namespace threadburn::cuda {

bool toolkit_compiled() { return false; }
std::string runtime_version() { return "n/a"; }

int device_count(std::string* why) {
  if (why) *why = "this build has no CUDA toolkit";
  return 0;
}

std::string set_sync_policy(int, const std::string&) { return "this build has no CUDA toolkit"; }
std::string sync_policy_in_force(int) { return "n/a"; }

struct GpuTimer::Impl {};
GpuTimer::GpuTimer() = default;
GpuTimer::~GpuTimer() = default;
bool GpuTimer::ok() const { return false; }
void GpuTimer::start() {}
void GpuTimer::stop() {}
double GpuTimer::elapsed_ms() { return 0; }

}  // namespace threadburn::cuda
