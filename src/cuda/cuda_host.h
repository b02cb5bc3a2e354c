// The host side of CUDA that libtorch does not expose: the context's host wait
// policy (cudaSetDeviceFlags: spin / yield / blocking_sync / auto) and GPU
// timing with CUDA events. Compiled against the CUDA runtime when CMake finds
// the toolkit (cuda_host.cc), else a stub that says so (cuda_host_stub.cc).
// No torch here.
#pragma once

#include <memory>
#include <string>

namespace threadburn::cuda {

// "auto", "spin", "yield", "blocking_sync" -> cudaDeviceSchedule* value; -1 if unknown.
int parse_sync_policy(const std::string& text);
const char* sync_policy_name(int flags);

// Whether this build was compiled against the CUDA runtime.
bool toolkit_compiled();
std::string runtime_version();  // "13.0", or "n/a" without the toolkit
// Devices visible; 0 with *why set when none (no driver, no GPU, or no toolkit).
int device_count(std::string* why);

// Must run before anything creates the device's context (before torch touches
// CUDA). Returns "" on success, else the reason.
std::string set_sync_policy(int device, const std::string& policy);
// The policy the device's context reports (cudaGetDeviceFlags), or "n/a".
std::string sync_policy_in_force(int device);

// GPU time between start() and stop() on the legacy default stream, which is
// where libtorch 1.13 queues its work unless told otherwise.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  bool ok() const;
  void start();
  void stop();
  double elapsed_ms();  // waits for the stop event

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace threadburn::cuda
