// The host side of CUDA that libtorch does not expose: the context's host wait
// policy (cudaSetDeviceFlags: spin / yield / blocking_sync / auto), GPU
// timing with CUDA events and the GPU's work from CUPTI's activity records.
// Compiled against the CUDA runtime when CMake finds the toolkit
// (cuda_host.cc), else a stub that says so (cuda_host_stub.cc); CUPTI is
// loaded at run time where its headers were found (gpu_activity.cc).
// No torch here. Errors throw threadburn::Error (core/error.h).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/counters.h"
#include "core/error.h"
#include "cuda/gpu_busy.h"

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

// The counters a CUDA step reports (owned here: programs that time CUDA steps
// register this table): gpu_span_ms, gpu_busy_ms, gpu_idle_share.
const CounterTable& gpu_counters();

// GPU time between start() and stop() on the legacy default stream, which is
// where libtorch queues its work unless told otherwise: a span on the stream
// (the work between the two events and every wait of the stream for the host
// between them), not the GPU's work.
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

// The GPU's work as CUPTI records it (its activity API: every kernel, memory
// copy and memset, with the start and end the device stamped on it), for
// gpu_busy_ms (src/cuda/gpu_busy.h). CUPTI is loaded at run time (dlopen), so
// a build or a host without it runs on without the figure. CUPTI is one per
// process: so is this.
class GpuActivity {
 public:
  // Starts recording (before the work to record is launched); nullptr, with
  // why in one line, where CUPTI cannot be loaded or enabled.
  static GpuActivity* start(std::string* why);
  // Now on CUPTI's clock, the clock of the records' timestamps.
  uint64_t now_ns() const;
  // Every record completed since the last take() (flushed from CUPTI: call it
  // after the device finished the work). Records CUPTI dropped or left
  // without timestamps are counted in lost(), not returned.
  std::vector<Interval> take();
  uint64_t lost() const;
  std::string version() const;  // the loaded CUPTI's API version and file

 private:
  GpuActivity() = default;
};

}  // namespace threadburn::cuda
