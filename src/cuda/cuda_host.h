// The host side of CUDA that libtorch does not expose: the context's host wait
// policy (cudaSetDeviceFlags: spin / yield / blocking_sync / auto) and GPU
// timing with CUDA events. Compiled against the CUDA runtime when CMake finds
// the toolkit (cuda_host.cc), else a stub that says so (cuda_host_stub.cc).
// No torch here. Errors throw threadburn::Error (core/error.h).
#pragma once

#include <memory>
#include <string>

#include "core/counters.h"
#include "core/error.h"

namespace threadburn::cuda {

// "auto", "spin", "yield", "blocking_sync" -> cudaDeviceSchedule* value;
// throws Error naming --cuda_sync for anything else.
int sync_policy_flags(const std::string& policy);
const char* sync_policy_name(int flags);

// Whether this build was compiled against the CUDA runtime.
bool toolkit_compiled();
std::string runtime_version();  // "13.0", or "n/a" without the toolkit
// Devices visible (0 without a driver, a GPU or the toolkit).
int device_count();
// Whether `device` can be used here; if not, why (one line).
Availability device_availability(int device);

// Must run before anything creates the device's context (before torch touches
// CUDA). Throws Error with the reason when the policy cannot be set.
void set_sync_policy(int device, const std::string& policy);
// The policy the device's context reports (cudaGetDeviceFlags), or "n/a".
std::string sync_policy_in_force(int device);

// The counter a CUDA step reports (owned here: programs that time CUDA steps
// register this table): gpu_ms.
const CounterTable& gpu_counters();

// GPU time between start() and stop() on the legacy default stream, which is
// where libtorch 1.13 queues its work unless told otherwise.
class GpuTimer {
 public:
  GpuTimer();
  ~GpuTimer();
  GpuTimer(const GpuTimer&) = delete;
  GpuTimer& operator=(const GpuTimer&) = delete;
  bool ok() const;  // events were created: a device is there
  void start();
  void stop();
  double elapsed_ms();  // waits for the stop event; throws Error when !ok()

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace threadburn::cuda
