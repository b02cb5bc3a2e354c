// The CUDA host wait policy of an unmodified program (THREADBURN_CUDA_SYNC),
// set through the CUDA driver before the program's first CUDA call and read
// back while it runs and at its end (docs/probe.md, "CUDA"). Used by the
// preload probe and by libthreadburn_cuda_sync.so, which users preload
// without threadburn.
//
// Only the driver (libcuda.so.1) through dlopen and dlsym: no CUDA runtime, no
// toolkit header, no torch, no threadburn core, so that it builds everywhere
// and goes into any process. The few entry points and values it needs are
// declared in driver_policy.cc from the driver's API (cuda.h).
//
// Nothing happens unless a policy other than auto is asked: cuInit in a
// process that forks before its own first CUDA use leaves CUDA unusable in the
// forked children, so threadburn never initialises the driver on its own
// account, and never loads it at the end into a process that did not.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace threadburn::cuda {

// The environment variable (a row of python/threadburn/knobs.tsv).
constexpr const char* kSyncVariable = "THREADBURN_CUDA_SYNC";
// The host wait policy bits of a context's flags (CU_CTX_SCHED_MASK).
constexpr unsigned kSchedMask = 0x07;

// A policy's CU_CTX_SCHED_* bits: auto 0, spin 1, yield 2, blocking_sync 4
// (the same values as the runtime's cudaDeviceSchedule*); false for any other word.
bool policy_flags(const std::string& name, unsigned* flags);
// The policy of a context's flags (other bits ignored); "unknown" for bits no policy has.
const char* policy_name(unsigned flags);
// The words policy_flags takes, as an error line lists them.
constexpr const char* kPolicyWords = "auto, spin, yield or blocking_sync";

// Whether the CUDA driver (a file gpu::is_cuda_driver names,
// src/cuda/driver_file.h) is loaded in this process, without the loader lock
// (dl_iterate_phdr): a thread may ask while another one dlopens for seconds.
bool driver_loaded();

// One device as threadburn saw it.
struct DeviceState {
  int device = 0;
  std::optional<bool> active_before;  // its primary context was active at load (looked only when setting)
  std::optional<int> set_rc;          // CUresult of cuDevicePrimaryCtxSetFlags (not called: empty)
  std::string flags_at_exit = "n/a";  // the policy its primary context reported last while active
                                      // (before its first use: last read at all)
  bool seen_active = false;           // its primary context was active at load or at any read-back
  std::string pci_bus_id;             // cuDeviceGetPCIBusId, read once it was seen active ("" : not read)
};

// What the process ran under (probe-<pid>.json: the context keys and "cuda").
struct PolicyReport {
  std::string requested = "auto";  // THREADBURN_CUDA_SYNC as given, auto when unset
  std::string in_force = "n/a";    // auto | spin | yield | blocking_sync | mixed | unknown | n/a
  bool cuda_used = false;          // the program had the driver loaded (not only threadburn)
  std::string devices = "n/a";     // the driver's device count, n/a without a driver
  std::string note = "none";       // one line
  std::vector<DeviceState> per_device;
};

// The context keys of a report, in order (also what describe.json lists).
std::vector<std::pair<std::string, std::string>> context_of(const PolicyReport& report);

class DriverPolicy;
// apply() with the variable's value from the environment; with say, its line
// (when there is one) on stderr, prefixed "threadburn cuda_sync:".
void apply_from_environment(DriverPolicy* policy, bool say);

class DriverPolicy {
 public:
  // At load, before the program's first CUDA call: applies `value` (the
  // variable's text; nullptr or "" is auto, which does nothing at all).
  // Returns a line when the policy could not be applied on every device, else "".
  std::string apply(const char* value);
  // Reads the devices' state back, only when the process has the driver
  // loaded and initialised; cheap, thread-safe, never loads the driver.
  void observe();
  // A last observe() and the summary; later calls of observe() do nothing.
  PolicyReport finish();
  // Whether the program itself uses the driver, as far as the reads so far
  // tell (PolicyReport::cuda_used): under a policy threadburn loaded the
  // driver into the process, so "loaded" alone no longer says it. The one
  // rule: the probe's NVML sampler starts on it too.
  bool program_uses_cuda();

 private:
  // The driver's entry points (cuda.h; CUresult and CUdevice are ints).
  struct Api {
    int (*init)(unsigned) = nullptr;
    int (*device_count)(int*) = nullptr;
    int (*device_get)(int*, int) = nullptr;
    int (*get_state)(int, unsigned*, int*) = nullptr;
    int (*set_flags)(int, unsigned) = nullptr;
    int (*error_name)(int, const char**) = nullptr;  // optional
    int (*pci_bus_id)(char*, int, int) = nullptr;     // optional: cuDeviceGetPCIBusId
  };
  bool resolve(void* handle);  // mu_ held
  void read_devices();         // mu_ held
  std::string call_failed(const char* call, int rc) const;
  bool uses_cuda() const;      // mu_ held

  std::mutex mu_;
  std::string requested_ = "auto";
  unsigned want_ = 0;
  bool asked_ = false;          // a valid policy other than auto
  bool loaded_by_us_ = false;   // apply() brought the driver into the process
  bool finished_ = false;
  void* handle_ = nullptr;
  Api api_;
  int count_ = -1;              // -1: unknown (no driver, or not initialised)
  std::vector<DeviceState> devices_;
  struct Note {
    int device;  // -1: the process's
    std::string text;
  };
  std::vector<Note> notes_;
  std::string read_error_;      // the last read-back failure, when nothing could be read
};

}  // namespace threadburn::cuda
