// Built when CMake finds no CUDA toolkit: every CUDA-only request says why.
#include "cuda/cuda_host.h"

namespace threadburn::cuda {

namespace {
constexpr const char* kNoToolkit = "this build has no CUDA toolkit";
}

bool toolkit_compiled() { return false; }
std::string runtime_version() { return "n/a"; }
int device_count() { return 0; }
Availability device_availability(int) { return Availability::no(kNoToolkit); }
void set_sync_policy(int, const std::string& policy) {
  sync_policy_flags(policy);
  throw Error(kNoToolkit);
}
std::string sync_policy_in_force(int) { return "n/a"; }

struct GpuTimer::Impl {};
GpuTimer::GpuTimer() = default;
GpuTimer::~GpuTimer() = default;
bool GpuTimer::ok() const { return false; }
void GpuTimer::start() {}
void GpuTimer::stop() {}
double GpuTimer::elapsed_ms() { throw Error(std::string("GPU timer: ") + kNoToolkit); }

}  // namespace threadburn::cuda
