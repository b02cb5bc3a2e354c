#include <cuda_runtime_api.h>

#include "cuda/cuda_host.h"

namespace threadburn::cuda {

bool toolkit_compiled() { return true; }

std::string runtime_version() {
  int v = 0;
  if (cudaRuntimeGetVersion(&v) != cudaSuccess) return "unknown";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

namespace {

// cudaGetDeviceCount's answer and, when it is 0, why.
int count_devices(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    *why = cudaGetErrorString(e);
    cudaGetLastError();  // clear the error so later calls start clean
    return 0;
  }
  if (n == 0) *why = "no CUDA device";
  return n;
}

}  // namespace

int device_count() {
  std::string why;
  return count_devices(&why);
}

Availability device_availability(int device) {
  std::string why;
  const int n = count_devices(&why);
  if (n == 0) return Availability::no(why);
  if (device >= n) {
    return Availability::no("CUDA device " + std::to_string(device) + " does not exist (" + std::to_string(n) +
                            " present)");
  }
  return Availability::yes();
}

void set_sync_policy(int device, const std::string& policy) {
  const int flags = sync_policy_flags(policy);
  const Availability a = device_availability(device);
  if (!a.ok) throw Error(a.why);
  if (cudaSetDevice(device) != cudaSuccess) throw Error("cudaSetDevice failed");
  const cudaError_t e = cudaSetDeviceFlags(static_cast<unsigned>(flags));
  if (e != cudaSuccess) throw Error(std::string("cudaSetDeviceFlags: ") + cudaGetErrorString(e));
}

std::string sync_policy_in_force(int device) {
  if (!device_availability(device).ok) return "n/a";
  unsigned flags = 0;
  if (cudaSetDevice(device) != cudaSuccess || cudaGetDeviceFlags(&flags) != cudaSuccess) return "unknown";
  return sync_policy_name(static_cast<int>(flags));
}

struct GpuTimer::Impl {
  cudaEvent_t start = nullptr, stop = nullptr;
  bool ok = false;
};

GpuTimer::GpuTimer() : impl_(std::make_unique<Impl>()) {
  impl_->ok = device_count() > 0 && cudaEventCreate(&impl_->start) == cudaSuccess &&
              cudaEventCreate(&impl_->stop) == cudaSuccess;
  if (!impl_->ok) cudaGetLastError();
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
  if (!impl_->ok) throw Error("GPU timer: no CUDA device");
  float ms = 0;
  cudaEventSynchronize(impl_->stop);
  cudaEventElapsedTime(&ms, impl_->start, impl_->stop);
  return ms;
}

}  // namespace threadburn::cuda
