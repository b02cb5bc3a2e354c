#include "cuda/nvml_sampler.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#include "core/clock.h"
#include "core/thread_class.h"

namespace threadburn::gpu {
namespace {

// NVML's C API, the few parts used here, declared from NVIDIA's NVML API
// Reference (nvml.h; there is no header on the machines that build this):
//  - every call returns nvmlReturn_t, an enum: NVML_SUCCESS 0,
//    NVML_ERROR_NOT_SUPPORTED 3 (the device cannot do it), NVML_ERROR_NOT_FOUND
//    6 (nvmlDeviceGetSamples: no sample newer than lastSeenTimeStamp);
//  - nvmlDevice_t is an opaque pointer;
//  - nvmlDeviceGetSamples(device, nvmlSamplingType_t type, unsigned long long
//    lastSeenTimeStamp, nvmlValueType_t* valueType, unsigned int* count,
//    nvmlSample_t* samples): with samples NULL it sets count to how many
//    samples can be asked for; then it fills up to count samples newer than
//    lastSeenTimeStamp (0: the whole buffer) and sets count to how many it
//    filled. Types NVML_GPU_UTILIZATION_SAMPLES 1 and
//    NVML_MEMORY_UTILIZATION_SAMPLES 2; values percentages, as unsigned int
//    (nvmlValueType_t: DOUBLE 0, UNSIGNED_INT 1, UNSIGNED_LONG 2,
//    UNSIGNED_LONG_LONG 3, SIGNED_LONG_LONG 4);
//  - nvmlSample_t {unsigned long long timeStamp (us); nvmlValue_t value},
//    nvmlValue_t a union of double, unsigned int, unsigned long, unsigned
//    long long and signed long long;
//  - nvmlDeviceGetUtilizationRates(device, nvmlUtilization_t*):
//    {unsigned int gpu, memory}, percentages over the last sample period;
//  - nvmlDeviceGetName(device, char*, unsigned int length): 96 bytes hold
//    any name (NVML_DEVICE_NAME_V2_BUFFER_SIZE);
//  - nvmlDeviceGetComputeRunningProcesses_v3 (and _v2, the same arguments)
//    (device, unsigned int* count, nvmlProcessInfo_t* infos): count in, the
//    room; out, the processes (NVML_ERROR_INSUFFICIENT_SIZE 7 when the room
//    is short, count then the number needed); nvmlProcessInfo_t {unsigned
//    int pid; unsigned long long usedGpuMemory (bytes, or
//    NVML_VALUE_NOT_AVAILABLE, all ones); unsigned int gpuInstanceId,
//    computeInstanceId}; pids as the host's PID namespace sees them;
//  - nvmlDeviceGetHandleByPciBusId_v2(const char* busId, device*): the
//    device of a PCI bus id "domain:bus:device.function" in hex (the form
//    cuDeviceGetPCIBusId writes).
using Return = int;
using Device = struct nvmlDevice_st*;
constexpr Return kSuccess = 0, kNotSupported = 3, kNotFound = 6, kInsufficientSize = 7;
struct ProcessInfo {
  unsigned int pid;
  unsigned long long used_bytes;
  unsigned int gpu_instance, compute_instance;
};
constexpr unsigned long long kNotAvailable = ~0ULL;
constexpr int kGpuUtilizationSamples = 1, kMemoryUtilizationSamples = 2;
union Value {
  double d;
  unsigned int ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
};
struct RawSample {
  unsigned long long t_us;
  Value value;
};
struct Utilization {
  unsigned int gpu, memory;
};
constexpr unsigned kNameBytes = 96;
// Samples kept per device and stream: 6 per s for 48 hours.
constexpr size_t kMaxSamples = 1 << 20;

struct Api {
  Return (*init)() = nullptr;
  Return (*count)(unsigned*) = nullptr;
  Return (*handle)(unsigned, Device*) = nullptr;
  Return (*name)(Device, char*, unsigned) = nullptr;
  Return (*samples)(Device, int, unsigned long long, int*, unsigned*, RawSample*) = nullptr;
  Return (*rates)(Device, Utilization*) = nullptr;
  const char* (*error)(Return) = nullptr;
  Return (*processes)(Device, unsigned*, ProcessInfo*) = nullptr;  // optional
  Return (*by_bus)(const char*, Device*) = nullptr;                // optional
};

double percent(int type, const Value& v) {
  switch (type) {
    case 0: return v.d / 100;
    case 2: return static_cast<double>(v.ul) / 100;
    case 3: return static_cast<double>(v.ull) / 100;
    case 4: return static_cast<double>(v.sll) / 100;
    default: return static_cast<double>(v.ui) / 100;
  }
}

ClockNow clocks_now() {
  const auto us = [](clockid_t id) {
    timespec ts{};
    clock_gettime(id, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
  };
  ClockNow n;
  n.monotonic_us = us(CLOCK_MONOTONIC);
  n.realtime_us = us(CLOCK_REALTIME);
  n.boottime_us = us(CLOCK_BOOTTIME);
  return n;
}

template <typename F>
void bind(void* lib, const char* name, F* fn) {
  *fn = reinterpret_cast<F>(dlsym(lib, name));
}

}  // namespace

struct NvmlSampler::State {
  struct Gpu {
    Device handle = nullptr;
    Series series;
    bool polled = false;   // utilisation rates polled (the device keeps no samples)
    bool broken = false;   // a call failed: no more reads of this device
    unsigned long long seen_busy = 0, seen_memory = 0;
  };

  NvmlOptions o;
  UsesCuda uses_cuda;
  std::mutex mu;
  std::condition_variable cv;
  bool stopped = false, started = false, clock_known = false;
  Clock clock = Clock::kRealtime;
  Api api;
  std::vector<Gpu> gpus;
  std::vector<std::string> notes;

  std::string error(Return rc) const {
    const char* text = api.error ? api.error(rc) : nullptr;
    return (text ? std::string(text) + " " : std::string()) + "(NVML return " + std::to_string(rc) + ")";
  }
  bool sampling() const {
    return std::any_of(gpus.begin(), gpus.end(), [](const Gpu& g) { return !g.broken; });
  }
  int64_t period_ns() const {
    if (!started) return o.start_check_ns;
    const bool polled = std::any_of(gpus.begin(), gpus.end(), [](const Gpu& g) { return g.polled; });
    return polled ? o.rates_poll_ns : o.samples_poll_ns;
  }
  void start();
  void add_gpu(int index, unsigned count);
  void poll();
  void read_processes(Gpu* g);
  Return read_samples(Gpu* g, int type, unsigned long long* seen, std::vector<Sample>* out);
};

// NVML set up, the devices picked, the driver's buffer read. Failures are notes.
void NvmlSampler::State::start() {
  started = true;
  void* lib = dlopen(o.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* why = dlerror();
    notes.push_back(o.library + " not found, no GPU sampled: " + (why ? why : "dlopen failed"));
    return;
  }
  bind(lib, "nvmlInit_v2", &api.init);
  bind(lib, "nvmlDeviceGetCount_v2", &api.count);
  bind(lib, "nvmlDeviceGetHandleByIndex_v2", &api.handle);
  bind(lib, "nvmlDeviceGetName", &api.name);
  bind(lib, "nvmlDeviceGetSamples", &api.samples);
  bind(lib, "nvmlDeviceGetUtilizationRates", &api.rates);
  bind(lib, "nvmlErrorString", &api.error);
  bind(lib, "nvmlDeviceGetComputeRunningProcesses_v3", &api.processes);
  if (!api.processes) bind(lib, "nvmlDeviceGetComputeRunningProcesses_v2", &api.processes);
  bind(lib, "nvmlDeviceGetHandleByPciBusId_v2", &api.by_bus);
  if (!api.init || !api.count || !api.handle || (!api.samples && !api.rates)) {
    notes.push_back(o.library + " lacks nvmlInit_v2, nvmlDeviceGetCount_v2, nvmlDeviceGetHandleByIndex_v2 or both "
                    "utilisation calls: no GPU sampled");
    return;
  }
  Return rc = api.init();
  unsigned count = 0;
  if (rc == kSuccess) rc = api.count(&count);
  if (rc != kSuccess) {
    notes.push_back("NVML could not start, no GPU sampled: " + error(rc));
    return;
  }
  const char* env = std::getenv("CUDA_VISIBLE_DEVICES");
  const auto visible = visible_devices(env);
  std::vector<int> indices;
  if (visible) {
    indices = *visible;
  } else {
    for (unsigned i = 0; i < count; ++i) indices.push_back(static_cast<int>(i));
    if (env) notes.push_back(std::string("CUDA_VISIBLE_DEVICES=") + env + " is not a list of device numbers: every device sampled");
  }
  for (int index : indices) add_gpu(index, count);
  if (gpus.empty() && notes.empty()) notes.push_back("no GPU to sample (NVML sees " + std::to_string(count) + ")");
  poll();
}

void NvmlSampler::State::add_gpu(int index, unsigned count) {
  if (index < 0 || static_cast<unsigned>(index) >= count) {
    notes.push_back("CUDA_VISIBLE_DEVICES names device " + std::to_string(index) + ", NVML has " +
                    std::to_string(count) + ": not sampled");
    return;
  }
  Gpu g;
  const Return rc = api.handle(static_cast<unsigned>(index), &g.handle);
  if (rc != kSuccess) {
    notes.push_back("device " + std::to_string(index) + ": no handle, " + error(rc));
    return;
  }
  char name[kNameBytes] = {};
  if (api.name && api.name(g.handle, name, kNameBytes) == kSuccess) g.series.name = name;
  g.series.index = index;
  g.polled = !api.samples;
  g.series.source = g.polled ? "utilization_rates" : "samples";
  gpus.push_back(std::move(g));
}

// The samples newer than *seen, in as many reads as the buffer needs (a read
// fills at most the count the first call gives).
Return NvmlSampler::State::read_samples(Gpu* g, int type, unsigned long long* seen, std::vector<Sample>* out) {
  for (int round = 0; round < 4; ++round) {
    unsigned n = 0;
    int value_type = 1;
    Return rc = api.samples(g->handle, type, *seen, &value_type, &n, nullptr);
    if (rc == kNotFound || (rc == kSuccess && n == 0)) return kSuccess;  // nothing newer
    if (rc != kSuccess) return rc;
    std::vector<RawSample> raw(n);
    rc = api.samples(g->handle, type, *seen, &value_type, &n, raw.data());
    if (rc == kNotFound) return kSuccess;
    if (rc != kSuccess) return rc;
    const size_t got = std::min<size_t>(n, raw.size());
    const ClockNow now = clocks_now();
    unsigned long long latest = 0;
    for (size_t i = 0; i < got; ++i) latest = std::max(latest, raw[i].t_us);
    if (!clock_known && got > 0) {
      clock = nearest_clock(latest, now);
      clock_known = true;
    }
    for (size_t i = 0; i < got && out->size() < kMaxSamples; ++i) {
      out->push_back({to_monotonic_ns(raw[i].t_us, clock, now), percent(value_type, raw[i].value)});
    }
    if (latest <= *seen) return kSuccess;  // a driver that ignores lastSeenTimeStamp: no loop
    *seen = latest;
    if (got < raw.size()) return kSuccess;  // all there was
  }
  return kSuccess;
}

// Whether NVML lists this process on the device, and its memory there (the
// largest seen: a training's memory grows, and is freed at its end).
void NvmlSampler::State::read_processes(Gpu* g) {
  if (!api.processes) return;
  std::vector<ProcessInfo> list(16);
  for (int round = 0; round < 3; ++round) {
    unsigned n = static_cast<unsigned>(list.size());
    const Return rc = api.processes(g->handle, &n, list.data());
    if (rc == kInsufficientSize && n > list.size()) {
      list.resize(n + 8);  // processes may start meanwhile
      continue;
    }
    if (rc != kSuccess) return;
    const auto pid = static_cast<unsigned>(getpid());
    for (unsigned i = 0; i < std::min<size_t>(n, list.size()); ++i) {
      if (list[i].pid != pid) continue;
      g->series.listed = true;
      if (list[i].used_bytes != kNotAvailable) {
        g->series.memory_mib = std::max(g->series.memory_mib, static_cast<double>(list[i].used_bytes) / 1048576.0);
      }
    }
    return;
  }
}

// One read of every device still sampled.
void NvmlSampler::State::poll() {
  for (Gpu& g : gpus) {
    read_processes(&g);
    if (g.broken) continue;
    const std::string who = "device " + std::to_string(g.series.index);
    if (!g.polled) {
      const Return rc = read_samples(&g, kGpuUtilizationSamples, &g.seen_busy, &g.series.busy);
      if (rc == kNotSupported && api.rates) {
        g.polled = true;
        g.series.source = "utilization_rates";
        notes.push_back(who + " keeps no utilisation samples: nvmlDeviceGetUtilizationRates polled every " +
                        std::to_string(o.rates_poll_ns / kNsPerMsInt) + " ms");
      } else if (rc != kSuccess) {
        g.broken = true;
        notes.push_back(who + ": nvmlDeviceGetSamples failed, its sampling stopped: " + error(rc));
        continue;
      } else {
        // The memory samples are extra: a failure leaves memory_busy_share empty, nothing else.
        read_samples(&g, kMemoryUtilizationSamples, &g.seen_memory, &g.series.memory);
      }
    }
    if (g.polled) {
      Utilization u{};
      const Return rc = api.rates(g.handle, &u);
      if (rc != kSuccess) {
        g.broken = true;
        notes.push_back(who + ": nvmlDeviceGetUtilizationRates failed, its sampling stopped: " + error(rc));
        continue;
      }
      const int64_t t = wall_ns();
      if (g.series.busy.size() < kMaxSamples) {
        g.series.busy.push_back({t, u.gpu / 100.0});
        g.series.memory.push_back({t, u.memory / 100.0});
      }
    }
  }
}

NvmlSampler::NvmlSampler(UsesCuda uses_cuda, NvmlOptions options) : state_(std::make_shared<State>()) {
  state_->o = std::move(options);
  state_->uses_cuda = std::move(uses_cuda);
  try {
    std::thread([s = state_] { run(s); }).detach();
  } catch (const std::system_error&) {
    state_->notes.push_back("the NVML thread could not start: no GPU sampled");
    state_->stopped = true;
  }
}

NvmlSampler::~NvmlSampler() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopped = true;
  }
  state_->cv.notify_all();
}

NvmlResult NvmlSampler::finish(const std::vector<ProcessContext>& contexts) {
  State& s = *state_;
  std::unique_lock<std::mutex> lock(s.mu);
  s.stopped = true;
  s.cv.notify_all();
  if (!s.started) {
    // Outside the lock: the question may wait for a reader of the driver
    // that waits for the loader's lock, which a thread in a long dlopen may
    // hold for seconds.
    lock.unlock();
    const bool uses = s.uses_cuda();
    lock.lock();
    if (!s.started && uses) s.start();
  } else {
    s.poll();
  }
  // The process's contexts, on NVML's devices by PCI bus id; one NVML
  // cannot place is named (a device hidden from NVML, or no
  // nvmlDeviceGetHandleByPciBusId_v2).
  for (const ProcessContext& c : contexts) {
    Device d = nullptr;
    const bool by_bus = s.api.by_bus && !c.pci_bus_id.empty();
    const Return rc = by_bus ? s.api.by_bus(c.pci_bus_id.c_str(), &d) : kNotSupported;
    // Without a bus id: the ordinal through CUDA_VISIBLE_DEVICES (NVML's order
    // is the PCI bus's, the driver's the same under CUDA_DEVICE_ORDER=PCI_BUS_ID).
    const auto visible = visible_devices(std::getenv("CUDA_VISIBLE_DEVICES"));
    int index = c.cuda_device;
    if (visible) index = c.cuda_device < static_cast<int>(visible->size()) ? (*visible)[static_cast<size_t>(c.cuda_device)] : -1;
    auto it = std::find_if(s.gpus.begin(), s.gpus.end(), [&](const State::Gpu& g) {
      return by_bus ? rc == kSuccess && g.handle == d : g.series.index == index;
    });
    if (it == s.gpus.end()) {
      if (s.started && !s.gpus.empty()) {
        s.notes.push_back("the process's context on CUDA device " + std::to_string(c.cuda_device) + " (" +
                          c.pci_bus_id + ") is on no sampled GPU");
      }
      continue;
    }
    it->series.context = true;
    it->series.cuda_device = c.cuda_device;
    it->series.wait_policy = c.wait_policy;
  }
  NvmlResult r;
  for (const State::Gpu& g : s.gpus) r.gpus.push_back(g.series);
  if (!s.notes.empty()) {
    r.note.clear();
    for (const std::string& n : s.notes) r.note += (r.note.empty() ? "" : "; ") + n;
  }
  return r;
}

// It takes no signal (a handler that reports, the probe's on_signal, must not
// run where the lock is held) and is of class sampler: the probe's own cost.
void NvmlSampler::run(const std::shared_ptr<State>& s) {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
  pthread_setname_np(pthread_self(), "tb-nvml");
  mark_current_thread(ThreadClass::kSampler);
  std::unique_lock<std::mutex> lock(s->mu);
  while (!s->stopped) {
    s->cv.wait_for(lock, std::chrono::nanoseconds(s->period_ns()), [&] { return s->stopped; });
    if (s->stopped) return;
    if (!s->started) {
      lock.unlock();
      const bool uses = s->uses_cuda();
      lock.lock();
      if (s->stopped || !uses) continue;
      s->start();
    } else {
      s->poll();
    }
    if (!s->sampling()) return;  // nothing (more) to read: finish() says why
  }
}

}  // namespace threadburn::gpu
