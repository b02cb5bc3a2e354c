// The GPUs' utilisation through NVML, inside the preload probe: no torch, no
// CUDA runtime, no NVML header (nvml_sampler.cc declares the few entry
// points it needs); libnvidia-ml.so.1 is opened with dlopen, and only in a
// process whose program uses CUDA, so wrappers (sh -c) and CPU programs never
// touch NVML, also under THREADBURN_CUDA_SYNC, where the probe itself loads
// the driver into every process.
//
// A low-rate thread (class sampler: its CPU is the probe's own cost) asks
// every 100 ms whether the program uses CUDA (the caller's rule: the probe's
// is cuda::DriverPolicy::program_uses_cuda(), src/cuda/driver_policy.h).
// Once it does, it initialises NVML, picks the devices
// (CUDA_VISIBLE_DEVICES when it is a list of device numbers, else all) and
// reads each one's utilisation samples (gpu_samples.h says what they mean):
// the driver's own, nvmlDeviceGetSamples(NVML_GPU_UTILIZATION_SAMPLES and
// NVML_MEMORY_UTILIZATION_SAMPLES), every second, the first read taking the
// driver's whole buffer (about 100 samples, so also the time before the
// driver was loaded when it was short); where the device does not keep
// samples, nvmlDeviceGetUtilizationRates every 200 ms. At each read it also
// asks NVML's list of each device's compute processes
// (nvmlDeviceGetComputeRunningProcesses_v3) whether this process is on it,
// and with how much device memory; finish() matches the contexts the driver
// says the process has to NVML's devices by PCI bus id: the process's own
// GPUs (Series::used()), the others only visible.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cuda/gpu_samples.h"

namespace threadburn::gpu {

struct NvmlOptions {
  std::string library = "libnvidia-ml.so.1";
  int64_t start_check_ns = 100000000;    // how often to ask whether the program uses CUDA
  int64_t samples_poll_ns = 1000000000;  // the driver keeps ~100 samples: >= 16 s at 6 per s
  int64_t rates_poll_ns = 200000000;     // the shortest sample period is 1/6 s
};

// A primary context the process had (the driver's ordinal, its PCI bus id as
// cuDeviceGetPCIBusId writes it, the wait policy it ran under).
struct ProcessContext {
  int cuda_device = 0;
  std::string pci_bus_id;
  std::string wait_policy = "n/a";
};

struct NvmlResult {
  std::vector<Series> gpus;    // the devices sampled (empty without NVML)
  std::string note = "none";   // what kept a GPU from being sampled, or "none"
};

class NvmlSampler {
 public:
  // Whether the program uses CUDA so far: NVML starts once it says so. Asked
  // from the sampler's thread and from finish(), never with a lock held.
  using UsesCuda = std::function<bool()>;
  explicit NvmlSampler(UsesCuda uses_cuda, NvmlOptions options = {});
  ~NvmlSampler();
  NvmlSampler(const NvmlSampler&) = delete;
  NvmlSampler& operator=(const NvmlSampler&) = delete;
  // Stops the thread (no NVML call from it after this returns), reads what
  // the driver has now (starting NVML if the program came to use CUDA since
  // the last look) and returns every sample, each GPU marked with the
  // process's contexts on it (matched by PCI bus id) and whether NVML listed
  // the process on it. Called once, at the probe's report.
  NvmlResult finish(const std::vector<ProcessContext>& contexts = {});

 private:
  struct State;
  // The thread: asks whether the program uses CUDA, then reads NVML, until finish().
  static void run(const std::shared_ptr<State>& s);
  std::shared_ptr<State> state_;  // shared with the thread, which may outlive this object at exit
};

}  // namespace threadburn::gpu
