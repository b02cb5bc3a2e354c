// GpuActivity: CUPTI's activity records of kernels, copies and memsets
// (cuda_host.h). Where CMake found CUPTI's headers (THREADBURN_HAVE_CUPTI),
// CUPTI itself is loaded at run time with dlopen: the programs do not link
// it, so a host without it (or with another copy of it) still runs them,
// without gpu_busy_ms. Elsewhere every start() says why there is none.
#include "cuda/cuda_host.h"

#if THREADBURN_HAVE_CUPTI
#include <cupti.h>
#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>
#endif

namespace threadburn::cuda {

#if THREADBURN_HAVE_CUPTI
namespace {

// The CUPTI entry points used, from the library loaded at run time.
struct Api {
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) dropped = nullptr;
  decltype(&cuptiGetTimestamp) timestamp = nullptr;
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiGetVersion) version = nullptr;
  std::string file;
};
Api api;

// The records' start and end: the oldest layouts, whose start and end sit
// where every later version of the record keeps them (checked below against
// the newest this toolkit has), so a newer CUPTI at run time reads the same.
#if CUPTI_API_VERSION >= 130000
static_assert(offsetof(CUpti_ActivityKernel4, start) == offsetof(CUpti_ActivityKernel10, start) &&
              offsetof(CUpti_ActivityKernel4, end) == offsetof(CUpti_ActivityKernel10, end));
static_assert(offsetof(CUpti_ActivityMemcpy, start) == offsetof(CUpti_ActivityMemcpy6, start) &&
              offsetof(CUpti_ActivityMemcpy, end) == offsetof(CUpti_ActivityMemcpy6, end));
static_assert(offsetof(CUpti_ActivityMemset, start) == offsetof(CUpti_ActivityMemset4, start) &&
              offsetof(CUpti_ActivityMemset, end) == offsetof(CUpti_ActivityMemset4, end));
#endif
template <class Record>
Interval span_of(const CUpti_Activity* r) {
  const auto* rec = reinterpret_cast<const Record*>(r);
  return {rec->start, rec->end};
}

// Filled by CUPTI's buffer callbacks (its worker thread or a flushing one).
// Never destroyed: CUPTI may still deliver a buffer while the process exits.
struct Records {
  std::mutex mu;
  std::vector<Interval> done;
  uint64_t lost = 0;
};
Records& records() {
  static Records* r = new Records;
  return *r;
}
constexpr size_t kBufferBytes = 4 << 20;  // ~20000 kernel records: many steps' worth

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));  // CUPTI wants 8-byte alignment
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t* buffer, size_t, size_t valid) {
  if (buffer == nullptr) return;
  std::vector<Interval> got;
  uint64_t lost = 0;
  CUpti_Activity* r = nullptr;
  while (api.next_record(buffer, valid, &r) == CUPTI_SUCCESS) {
    Interval i{0, 0};
    switch (r->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: i = span_of<CUpti_ActivityKernel4>(r); break;
      case CUPTI_ACTIVITY_KIND_MEMCPY: i = span_of<CUpti_ActivityMemcpy>(r); break;
      case CUPTI_ACTIVITY_KIND_MEMSET: i = span_of<CUpti_ActivityMemset>(r); break;
      default: continue;
    }
    if (i.end_ns > i.start_ns) {
      got.push_back(i);
    } else {
      ++lost;  // no timestamps: ran no known time
    }
  }
  size_t dropped = 0;
  if (api.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS) lost += dropped;
  std::free(buffer);
  Records& all = records();
  std::lock_guard<std::mutex> lock(all.mu);
  all.done.insert(all.done.end(), got.begin(), got.end());
  all.lost += lost;
}

std::string cupti_error(const char* what, CUptiResult e) {
  const char* text = nullptr;
  if (api.result_string == nullptr || api.result_string(e, &text) != CUPTI_SUCCESS || text == nullptr) {
    text = "unknown error";
  }
  return std::string(what) + ": " + text;
}

// The CUPTI this process already has (a PyTorch wheel's, loaded by
// libtorch), else THREADBURN_CUPTI, else the one the dynamic loader finds,
// else the toolkit's that CMake found: one copy per process.
void* open_cupti(std::string* file) {
  const char* override_path = std::getenv("THREADBURN_CUPTI");
  if (void* h = dlopen(THREADBURN_CUPTI_SONAME, RTLD_NOW | RTLD_NOLOAD)) {
    *file = THREADBURN_CUPTI_SONAME " (already loaded)";
    return h;
  }
  for (const char* f : {override_path, THREADBURN_CUPTI_SONAME, THREADBURN_CUPTI_PATH}) {
    if (f == nullptr || *f == '\0') continue;
    if (void* h = dlopen(f, RTLD_NOW | RTLD_LOCAL)) {
      *file = f;
      return h;
    }
  }
  return nullptr;
}

template <class F>
bool bind(void* h, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  return *out != nullptr;
}

// Loads CUPTI, registers the buffers and enables the record kinds; "" or why not.
std::string load_and_enable() {
  void* h = open_cupti(&api.file);
  if (h == nullptr) {
    return "CUPTI not found (" THREADBURN_CUPTI_SONAME ", " THREADBURN_CUPTI_PATH "; THREADBURN_CUPTI=FILE names one)";
  }
  if (!bind(h, "cuptiActivityRegisterCallbacks", &api.register_callbacks) ||
      !bind(h, "cuptiActivityEnable", &api.enable) || !bind(h, "cuptiActivityFlushAll", &api.flush_all) ||
      !bind(h, "cuptiActivityGetNextRecord", &api.next_record) ||
      !bind(h, "cuptiActivityGetNumDroppedRecords", &api.dropped) || !bind(h, "cuptiGetTimestamp", &api.timestamp) ||
      !bind(h, "cuptiGetResultString", &api.result_string) || !bind(h, "cuptiGetVersion", &api.version)) {
    return api.file + " lacks a CUPTI activity function";
  }
  CUptiResult e = api.register_callbacks(buffer_requested, buffer_completed);
  if (e != CUPTI_SUCCESS) return cupti_error("cuptiActivityRegisterCallbacks", e);
  // CONCURRENT_KERNEL, not KERNEL: the latter serialises the kernels it records.
  for (CUpti_ActivityKind k : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                               CUPTI_ACTIVITY_KIND_MEMSET}) {
    e = api.enable(k);
    if (e != CUPTI_SUCCESS) return cupti_error("cuptiActivityEnable", e);
  }
  return "";
}

}  // namespace

GpuActivity* GpuActivity::start(std::string* why) {
  static GpuActivity one;
  static const std::string failed = load_and_enable();  // once per process, as CUPTI is
  if (!failed.empty()) {
    *why = failed;
    return nullptr;
  }
  return &one;
}

uint64_t GpuActivity::now_ns() const {
  uint64_t t = 0;
  api.timestamp(&t);
  return t;
}

std::vector<Interval> GpuActivity::take() {
  // Forced: every buffer, the one being filled too (the step's work is done).
  api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  Records& all = records();
  std::lock_guard<std::mutex> lock(all.mu);
  std::vector<Interval> out;
  out.swap(all.done);
  return out;
}

uint64_t GpuActivity::lost() const {
  Records& all = records();
  std::lock_guard<std::mutex> lock(all.mu);
  return all.lost;
}

std::string GpuActivity::version() const {
  uint32_t v = 0;
  return (api.version(&v) == CUPTI_SUCCESS ? "API " + std::to_string(v) : std::string("API unknown")) + ", " +
         api.file;
}

#else

GpuActivity* GpuActivity::start(std::string* why) {
  *why = toolkit_compiled() ? "this build found no CUPTI headers" : "this build has no CUDA toolkit";
  return nullptr;
}
uint64_t GpuActivity::now_ns() const { return 0; }
std::vector<Interval> GpuActivity::take() { return {}; }
uint64_t GpuActivity::lost() const { return 0; }
std::string GpuActivity::version() const { return "n/a"; }

#endif

}  // namespace threadburn::cuda
