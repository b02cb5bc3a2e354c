// The GPUs' utilisation through NVML, inside the preload probe: no torch, no
// CUDA runtime, no NVML header (nvml_sampler.cc declares the few entry
// points it needs); libnvidia-ml.so.1 is opened with dlopen, and only in a
// process that has loaded the CUDA driver itself (libcuda.so.1), so wrappers
// (sh -c) and CPU programs never touch NVML.
//
// A low-rate thread (class sampler: its CPU is the probe's own cost) looks
// every 100 ms whether the CUDA driver (libcuda.so.1) is among the objects
// the process has loaded (dl_iterate_phdr: it never loads it). Once it is, it initialises NVML, picks the devices
// (CUDA_VISIBLE_DEVICES when it is a list of device numbers, else all) and
// reads each one's utilisation samples (gpu_samples.h says what they mean):
// the driver's own, nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES and
// NVML_MEMORY_UTILIZATION_SAMPLES), every second, the first read taking the
// driver's whole buffer (about 100 samples, so also the time before the
// driver was loaded when it was short); where the device does not keep
// samples, nvmlDeviceGetUtilizationRates every 200 ms.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cuda/gpu_samples.h"

namespace threadburn::gpu {

struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";
  int64_t driver_check_ns = 100000000;   // how often to look for the CUDA driver (driver_file.h)
  int64_t samples_poll_ns = 1000000000;  // the driver keeps ~100 samples: >= 16 s at 6 per s
  int64_t rates_poll_ns = 200000000;     // the shortest sample period is 1/6 s
};

struct NvmlResult {
  std::vector<Series> gpus;    // the devices sampled (empty without NVML)
  std::string note = "none";   // what kept a GPU from being sampled, or "none"
};

class NvmlSampler {
 public:
  explicit NvmlSampler(NvmlOptions options = {});
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;
  // Stops the thread (no NVML call from it after this returns), reads what
  // the driver has now (starting NVML if the driver was loaded since the
  // last look) and returns every sample. Called once, at the probe's report.
  NvmlResult finish();

 private:
  struct State;
  // The thread: looks for the driver, then reads NVML, until finish().
  static void run(const std::shared_ptr<State>& s);
  std::shared_ptr<State> state_;  // shared with the thread, which may outlive this object at exit
};

}  // namespace threadburn::gpu
