#include <cuda_runtime_api.h>

#include "cuda/cuda_host.h"

namespace threadburn::cuda {

bool toolkit_compiled() { return true; }

std::string runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0 && why) *why = "no CUDA device";
  return n;
}

std::string set_sync_policy(int device, const std::string& policy) {
  const int flags = parse_sync_policy(policy);
  if (flags < 0) return "unknown policy '" + policy + "' (auto, spin, yield, blocking_sync)";
  std::string why;
  const int n = device_count(&why);
  if (n == 0) return why;
  if (device >= n) return "CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) + " present)";
  if (cudaSetDevice(device) != cudaSuccess) return "cudaSetDevice failed";
  const cudaError_t e = cudaSetDeviceFlags(static_cast<unsigned>(flags));
  if (e != cudaSuccess) return std::string("cudaSetDeviceFlags: ") + cudaGetErrorString(e);
  return "";
}

std::string sync_policy_in_force(int device) {
  std::string why;
  if (device_count(&why) <= device) return "n/a";
  unsigned flags = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaGetDeviceFlags(&flags) != cudaSuccess) return "unknown";
  return sync_policy_name(static_cast<int>(flags));
}

struct GpuTimer::Impl {
  cudaEvent_t start = nullptr, stop = nullptr;
  bool ok = false;
};

GpuTimer::GpuTimer() : impl_(std::make_unique<Impl>()) {
  impl_->ok = cudaEventCreate(&impl_->start) == cudaSuccess && cudaEventCreate(&impl_->stop) == cudaSuccess;
}

GpuTimer::~GpuTimer() {
  if (impl_->start) cudaEventDestroy(impl_->start);
  if (impl_->stop) cudaEventDestroy(impl_->stop);
}

bool GpuTimer::ok() const { return impl_->ok; }
void GpuTimer::start() {
  if (impl_->ok) cudaEventRecord(impl_->start, nullptr);
}
void GpuTimer::stop() {
  if (impl_->ok) cudaEventRecord(impl_->stop, nullptr);
}

double GpuTimer::elapsed_ms() {
  if (!impl_->ok) return 0;
  float ms = 0;
  cudaEventSynchronize(impl_->stop);
  cudaEventElapsedTime(&ms, impl_->start, impl_->stop);
  return ms;
}

}  // namespace threadburn::cuda
