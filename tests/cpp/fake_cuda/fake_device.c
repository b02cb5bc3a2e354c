/* The stand-in driver's simulated device (built into build/tests/fake_cuda/
   libcuda.so.1 with fake_libcuda.c): enough of the driver's API for a
   program that does what a CUDA runtime does (cuGetProcAddress_v2 for every
   entry point, a primary context made current, kernels launched, waits) to
   run on a device whose work takes chosen times, and whose waits honour the
   context's flags as the driver's documentation describes them (cuda.h,
   CU_CTX_SCHED_*):
     spin           the waiting thread reads the clock until the work is done:
                    its CPU is the wait
     yield          the same, with sched_yield between the reads
     blocking_sync  it sleeps until the work is done (clock_nanosleep)
     auto           spin while the process's active contexts are no more than
                    the CPUs, else yield
   cuEventSynchronize on an event made with CU_EVENT_BLOCKING_SYNC sleeps
   whatever the context's flags. cuCtxSetFlags changes the current context's
   flags while it is active (CUDA 12.1), and the next wait honours them.

   Work: a kernel is a CUfunction from cuModuleGetFunction(&f, module,
   "sleep_<us>"); each launch queues <us> microseconds of device work behind
   the device's queued work (one queue per device: streams are not kept
   apart), and costs the launching thread FAKE_CUDA_LAUNCH_US microseconds of
   its own CPU (default 5; read at cuInit), as a real launch costs a few.
   Copies (cuMemcpyHtoD_v2, cuMemcpyDtoH_v2) wait for the queued work, as a
   copy from or to pageable memory does, then copy host memory
   (cuMemAlloc_v2 is malloc); cuMemcpyDtoHAsync_v2 does the same into
   pageable memory, and is queued (returns at once) into page-locked memory
   from cuMemAllocHost_v2; cuMemFree_v2 waits for the queued work first.

   Beyond the driver's API:
     fake_cuda_busy_ns(dev, from_ns, to_ns)  how long the device's work ran in
                    [from_ns, to_ns] (CLOCK_MONOTONIC): what the stand-in
                    NVML's samples are made of with FAKE_NVML_SAMPLES=device
     fake_cuda_process_bytes(dev)  the memory the process allocated on dev, -1
                    without a context there (the stand-in NVML's process list)
     fake_cuda_nvml_index(dev), fake_cuda_ordinal_of(index)  the stand-in NVML's
                    index of an ordinal, and back (fake_libcuda.c)
     fake_cuda_blocked_copies()  how many copies into pageable memory found
                    at least FAKE_BLOCKED_NS of work queued ahead of them, so
                    that they had to wait at least that long: the known
                    answer a probe's count of hidden waits is held to (a
                    host slower than the device, descheduled on a busy
                    machine, finds the work done and does not wait) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_libcuda.h"

typedef uint64_t CUdeviceptr;
typedef struct { int64_t ns; } fake_function;
typedef struct { int device; int64_t done_ns; unsigned flags; int recorded; } fake_event;

enum { CUDA_ERROR_NOT_READY = 600, EVENT_BLOCKING_SYNC = 0x1, PER_THREAD_STREAM = 1 << 1,
       SCHED_SPIN = 1, SCHED_YIELD = 2, SCHED_BLOCKING = 4, BUSY_RING = 1 << 16 };

static __thread int t_current = -1;  /* the device of this thread's current context; -1: none */
static int64_t busy_until[MAX_DEVICES];
static long launch_us = -1;
static char module_handle;
static char stream_handle;
/* A copy that finds this much work queued waits at least this long: as long
   as the probe's threshold for a call that waited (src/cuda/driver_calls.h,
   kBlockingNs), twice over. */
enum { FAKE_BLOCKED_NS = 100000 };
static long blocked_copies;

/* Each device's busy intervals, contiguous ones merged (mu). */
typedef struct { int64_t from, to; } interval;
static interval* busy[MAX_DEVICES];
static int busy_n[MAX_DEVICES];

static int64_t clock_ns(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void burn_us(long us) {
  if (us <= 0) return;
  const int64_t end = clock_ns(CLOCK_THREAD_CPUTIME_ID) + us * 1000;
  while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < end) {
  }
}

/* Queues ns of work on dev; mu held. */
static void enqueue(int dev, int64_t ns) {
  const int64_t now = clock_ns(CLOCK_MONOTONIC);
  const int64_t from = busy_until[dev] > now ? busy_until[dev] : now;
  busy_until[dev] = from + ns;
  if (!busy[dev]) busy[dev] = calloc(BUSY_RING, sizeof(interval));
  if (!busy[dev]) return;
  interval* last = busy_n[dev] > 0 ? &busy[dev][(busy_n[dev] - 1) % BUSY_RING] : NULL;
  if (last && last->to == from) {
    last->to = from + ns;
  } else {
    busy[dev][busy_n[dev]++ % BUSY_RING] = (interval){from, from + ns};
  }
}

int64_t fake_cuda_busy_ns(int dev, int64_t from_ns, int64_t to_ns) {
  int64_t total = 0;
  pthread_mutex_lock(&mu);
  const int n = dev >= 0 && dev < MAX_DEVICES && busy[dev] ? busy_n[dev] : 0;
  for (int i = n > BUSY_RING ? n - BUSY_RING : 0; i < n; ++i) {
    const interval* b = &busy[dev][i % BUSY_RING];
    const int64_t lo = b->from > from_ns ? b->from : from_ns, hi = b->to < to_ns ? b->to : to_ns;
    if (hi > lo) total += hi - lo;
  }
  pthread_mutex_unlock(&mu);
  return total;
}

/* The policy a wait on dev follows now; mu held. */
static unsigned policy_of(int dev) {
  const unsigned sched = flags_of[dev] & SCHED_MASK;
  if (sched != 0) return sched;
  static long cpus = 0;
  if (cpus == 0) cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int active = 0;
  for (int d = 0; d < device_count; ++d) active += retained[d] > 0;
  return active <= cpus ? SCHED_SPIN : SCHED_YIELD;
}

static void wait_until(int64_t until, unsigned policy) {
  if (policy == SCHED_BLOCKING) {
    const struct timespec ts = {(time_t)(until / 1000000000), (long)(until % 1000000000)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) != 0) {
    }
    return;
  }
  while (clock_ns(CLOCK_MONOTONIC) < until) {
    if (policy == SCHED_YIELD) sched_yield();
  }
}

/* Waits for every queued work of the current context's device. */
static CUresult wait_device(const char* call, int dev) {
  pthread_mutex_lock(&mu);
  CUresult rc = dev < 0 ? CUDA_ERROR_INVALID_CONTEXT : check_device(dev);
  const int64_t until = rc == CUDA_SUCCESS ? busy_until[dev] : 0;
  const unsigned policy = rc == CUDA_SUCCESS ? policy_of(dev) : 0;
  pthread_mutex_unlock(&mu);
  if (rc == CUDA_SUCCESS) wait_until(until, policy);
  log_call(call, "-", rc);
  return rc;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  pthread_mutex_lock(&mu);
  const long d = ctx ? (char*)ctx - contexts : -1;
  CUresult rc = ctx && (d < 0 || d >= device_count || !retained[d]) ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS) t_current = (int)d;
  pthread_mutex_unlock(&mu);
  log_call("cuCtxSetCurrent", "-", rc);
  return rc;
}

CUresult cuCtxGetCurrent(CUcontext* ctx) {
  if (!ctx) return CUDA_ERROR_INVALID_VALUE;
  *ctx = t_current >= 0 ? &contexts[t_current] : NULL;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice* dev) {
  if (!dev) return CUDA_ERROR_INVALID_VALUE;
  if (t_current < 0) return CUDA_ERROR_INVALID_CONTEXT;
  *dev = t_current;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetFlags(unsigned int* flags) {
  if (!flags) return CUDA_ERROR_INVALID_VALUE;
  if (t_current < 0) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&mu);
  *flags = flags_of[t_current];
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

CUresult cuCtxSetFlags(unsigned int flags) {
  pthread_mutex_lock(&mu);
  const unsigned sched = flags & SCHED_MASK;
  CUresult rc = t_current < 0 ? CUDA_ERROR_INVALID_CONTEXT
              : (flags & ~KNOWN_FLAGS) || (sched != 0 && sched != 1 && sched != 2 && sched != 4) ? CUDA_ERROR_INVALID_VALUE
              : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS) flags_of[t_current] = flags;
  pthread_mutex_unlock(&mu);
  char args[24];
  snprintf(args, sizeof args, "flags=%u", flags);
  log_call("cuCtxSetFlags", args, rc);
  return rc;
}

CUresult cuCtxSynchronize(void) { return wait_device("cuCtxSynchronize", t_current); }

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  return wait_device("cuCtxSynchronize_v2", ctx ? (int)((char*)ctx - contexts) : t_current);
}

CUresult cuStreamCreate(void** stream, unsigned int flags) {
  (void)flags;
  if (!stream) return CUDA_ERROR_INVALID_VALUE;
  *stream = &stream_handle;
  return CUDA_SUCCESS;
}

CUresult cuStreamDestroy_v2(void* stream) { return stream == &stream_handle ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

CUresult cuStreamSynchronize(void* stream) {
  (void)stream;
  return wait_device("cuStreamSynchronize", t_current);
}

CUresult cuStreamSynchronize_ptsz(void* stream) {
  (void)stream;
  return wait_device("cuStreamSynchronize_ptsz", t_current);
}

CUresult cuModuleLoadData(void** module, const void* image) {
  (void)image;
  if (!module) return CUDA_ERROR_INVALID_VALUE;
  *module = &module_handle;
  return CUDA_SUCCESS;
}

CUresult cuModuleUnload(void* module) { return module == &module_handle ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; }

CUresult cuModuleGetFunction(fake_function** f, void* module, const char* name) {
  long us = 0;
  char rest = 0;
  if (!f || !name || module != &module_handle) return CUDA_ERROR_INVALID_VALUE;
  if (sscanf(name, "sleep_%ld%c", &us, &rest) != 1 || us < 0) return CUDA_ERROR_NOT_FOUND;
  *f = malloc(sizeof **f);
  if (!*f) return CUDA_ERROR_UNKNOWN;
  (*f)->ns = us * 1000;
  return CUDA_SUCCESS;
}

static CUresult launch(const char* call, fake_function* f) {
  if (launch_us < 0) launch_us = env_long("FAKE_CUDA_LAUNCH_US", 5);
  burn_us(launch_us);
  pthread_mutex_lock(&mu);
  CUresult rc = t_current < 0 ? CUDA_ERROR_INVALID_CONTEXT : !f ? CUDA_ERROR_INVALID_HANDLE : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS) enqueue(t_current, f->ns);
  pthread_mutex_unlock(&mu);
  log_call(call, "-", rc);
  return rc;
}

CUresult cuLaunchKernel(fake_function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void* stream, void** params, void** extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params, (void)extra;
  return launch("cuLaunchKernel", f);
}

CUresult cuLaunchKernel_ptsz(fake_function* f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                             unsigned bz, unsigned shared, void* stream, void** params, void** extra) {
  (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream, (void)params, (void)extra;
  return launch("cuLaunchKernel_ptsz", f);
}

CUresult cuEventCreate(fake_event** event, unsigned int flags) {
  if (!event) return CUDA_ERROR_INVALID_VALUE;
  *event = calloc(1, sizeof **event);
  if (!*event) return CUDA_ERROR_UNKNOWN;
  (*event)->flags = flags;
  return CUDA_SUCCESS;
}

CUresult cuEventDestroy_v2(fake_event* event) {
  free(event);
  return CUDA_SUCCESS;
}

static CUresult record(const char* call, fake_event* event) {
  pthread_mutex_lock(&mu);
  CUresult rc = !event ? CUDA_ERROR_INVALID_HANDLE : t_current < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS) {
    event->device = t_current;
    event->done_ns = busy_until[t_current];
    event->recorded = 1;
  }
  pthread_mutex_unlock(&mu);
  log_call(call, "-", rc);
  return rc;
}

CUresult cuEventRecord(fake_event* event, void* stream) {
  (void)stream;
  return record("cuEventRecord", event);
}

CUresult cuEventRecord_ptsz(fake_event* event, void* stream) {
  (void)stream;
  return record("cuEventRecord_ptsz", event);
}

CUresult cuEventQuery(fake_event* event) {
  if (!event) return CUDA_ERROR_INVALID_HANDLE;
  return !event->recorded || clock_ns(CLOCK_MONOTONIC) >= event->done_ns ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuStreamQuery(void* stream) {
  (void)stream;
  pthread_mutex_lock(&mu);
  const int64_t until = t_current >= 0 ? busy_until[t_current] : 0;
  pthread_mutex_unlock(&mu);
  return t_current < 0 ? CUDA_ERROR_INVALID_CONTEXT : clock_ns(CLOCK_MONOTONIC) >= until ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

CUresult cuEventSynchronize(fake_event* event) {
  if (!event) return CUDA_ERROR_INVALID_HANDLE;
  if (event->recorded) {
    pthread_mutex_lock(&mu);
    const unsigned policy = event->flags & EVENT_BLOCKING_SYNC ? SCHED_BLOCKING : policy_of(event->device);
    pthread_mutex_unlock(&mu);
    wait_until(event->done_ns, policy);
  }
  log_call("cuEventSynchronize", "-", CUDA_SUCCESS);
  return CUDA_SUCCESS;
}

static int64_t allocated[MAX_DEVICES];  /* bytes cuMemAlloc_v2 gave on each device (mu) */

CUresult cuMemAlloc_v2(CUdeviceptr* ptr, size_t bytes) {
  if (!ptr) return CUDA_ERROR_INVALID_VALUE;
  if (t_current < 0) return CUDA_ERROR_INVALID_CONTEXT;
  void* p = malloc(bytes ? bytes : 1);
  if (!p) return CUDA_ERROR_UNKNOWN;
  *ptr = (CUdeviceptr)(uintptr_t)p;
  pthread_mutex_lock(&mu);
  allocated[t_current] += (int64_t)bytes;
  pthread_mutex_unlock(&mu);
  return CUDA_SUCCESS;
}

/* For the stand-in NVML's list of a device's compute processes: the device
   memory this process holds on ordinal dev (its allocations; never freed in
   the count, as NVML's figure is read at its largest), -1 without a context
   of its own there. */
int64_t fake_cuda_process_bytes(int dev) {
  pthread_mutex_lock(&mu);
  const int64_t b = dev >= 0 && dev < device_count && retained[dev] > 0 ? allocated[dev] : -1;
  pthread_mutex_unlock(&mu);
  return b;
}

/* cuMemFree synchronises the device first (the driver's documented implicit
   synchronisation), then frees. */
CUresult cuMemFree_v2(CUdeviceptr ptr) {
  CUresult rc = wait_device("cuMemFree_v2", t_current);
  if (rc == CUDA_SUCCESS) free((void*)(uintptr_t)ptr);
  return rc;
}

/* Page-locked host memory (cuMemAllocHost_v2): what an asynchronous copy
   needs to stay asynchronous. The few blocks a program holds, by address. */
enum { MAX_PINNED = 64 };
static struct { char* p; size_t bytes; } pinned[MAX_PINNED];
static int npinned;

CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&mu);
  CUresult rc = npinned >= MAX_PINNED ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS && !(*p = malloc(bytes ? bytes : 1))) rc = CUDA_ERROR_UNKNOWN;
  if (rc == CUDA_SUCCESS) pinned[npinned].p = *p, pinned[npinned++].bytes = bytes;
  pthread_mutex_unlock(&mu);
  return rc;
}

static int is_pinned(const void* p) {
  int found = 0;
  pthread_mutex_lock(&mu);
  for (int i = 0; i < npinned && !found; ++i) found = (const char*)p >= pinned[i].p && (const char*)p < pinned[i].p + pinned[i].bytes;
  pthread_mutex_unlock(&mu);
  return found;
}

/* cuMemcpyDtoHAsync: into page-locked memory it is queued behind the
   device's work (the copy itself is instant here: the host bytes are written
   at once, as the test programs read them only after a wait); into pageable
   memory the driver copies synchronously: it waits for the device's work. */
static CUresult copy_async(const char* call, void* dst, CUdeviceptr src, size_t bytes) {
  CUresult rc = CUDA_SUCCESS;
  if (!is_pinned(dst)) {
    if (t_current >= 0 && t_current < MAX_DEVICES) {
      pthread_mutex_lock(&mu);
      if (busy_until[t_current] - clock_ns(CLOCK_MONOTONIC) >= FAKE_BLOCKED_NS) ++blocked_copies;
      pthread_mutex_unlock(&mu);
    }
    rc = wait_device(call, t_current);
  } else {
    log_call(call, "pinned", rc = t_current < 0 ? CUDA_ERROR_INVALID_CONTEXT : CUDA_SUCCESS);
  }
  if (rc == CUDA_SUCCESS) memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return rc;
}

long fake_cuda_blocked_copies(void) {
  pthread_mutex_lock(&mu);
  const long n = blocked_copies;
  pthread_mutex_unlock(&mu);
  return n;
}

CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t bytes, void* stream) {
  (void)stream;
  return copy_async("cuMemcpyDtoHAsync_v2", dst, src, bytes);
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dst, CUdeviceptr src, size_t bytes, void* stream) {
  (void)stream;
  return copy_async("cuMemcpyDtoHAsync_v2_ptsz", dst, src, bytes);
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t bytes) {
  CUresult rc = wait_device("cuMemcpyHtoD_v2", t_current);
  if (rc == CUDA_SUCCESS) memcpy((void*)(uintptr_t)dst, src, bytes);
  return rc;
}

CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t bytes) {
  CUresult rc = wait_device("cuMemcpyDtoH_v2", t_current);
  if (rc == CUDA_SUCCESS) memcpy(dst, (const void*)(uintptr_t)src, bytes);
  return rc;
}

/* --- cuGetProcAddress: the entry points by base name, as a runtime asks ---- */

CUresult cuInit(unsigned int);
CUresult cuDriverGetVersion(int*);
CUresult cuDeviceGetCount(int*);
CUresult cuDeviceGet(CUdevice*, int);
CUresult cuDeviceGetPCIBusId(char*, int, CUdevice);
CUresult cuDevicePrimaryCtxGetState(CUdevice, unsigned*, int*);
CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice, unsigned);
CUresult cuDevicePrimaryCtxRetain(CUcontext*, CUdevice);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice);
CUresult cuGetErrorName(CUresult, const char**);
CUresult cuGetProcAddress(const char*, void**, int, uint64_t);
CUresult cuGetProcAddress_v2(const char*, void**, int, uint64_t, int*);

typedef void (*any_fn)(void);  /* a function pointer of any type (converted back by its caller) */
typedef struct {
  const char* name;   /* the base name a runtime asks for */
  any_fn legacy;      /* its newest version */
  any_fn per_thread;  /* its per-thread default stream version (NULL: the same) */
} proc;

#define P(name, fn, pt) {name, (any_fn)(fn), (any_fn)(pt)}
static const proc procs[] = {
    P("cuInit", cuInit, 0), P("cuDriverGetVersion", cuDriverGetVersion, 0),
    P("cuDeviceGetCount", cuDeviceGetCount, 0), P("cuDeviceGet", cuDeviceGet, 0),
    P("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId, 0),
    P("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState, 0),
    P("cuDevicePrimaryCtxSetFlags", cuDevicePrimaryCtxSetFlags_v2, 0),
    P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 0),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 0), P("cuGetErrorName", cuGetErrorName, 0),
    P("cuGetProcAddress", cuGetProcAddress_v2, 0), P("cuCtxSetCurrent", cuCtxSetCurrent, 0),
    P("cuCtxGetCurrent", cuCtxGetCurrent, 0), P("cuCtxGetDevice", cuCtxGetDevice, 0),
    P("cuCtxGetFlags", cuCtxGetFlags, 0), P("cuCtxSetFlags", cuCtxSetFlags, 0),
    P("cuCtxSynchronize", cuCtxSynchronize, 0), P("cuStreamCreate", cuStreamCreate, 0),
    P("cuStreamDestroy", cuStreamDestroy_v2, 0), P("cuStreamSynchronize", cuStreamSynchronize, cuStreamSynchronize_ptsz),
    P("cuModuleLoadData", cuModuleLoadData, 0), P("cuModuleUnload", cuModuleUnload, 0),
    P("cuModuleGetFunction", cuModuleGetFunction, 0), P("cuLaunchKernel", cuLaunchKernel, cuLaunchKernel_ptsz),
    P("cuEventCreate", cuEventCreate, 0), P("cuEventDestroy", cuEventDestroy_v2, 0),
    P("cuEventRecord", cuEventRecord, cuEventRecord_ptsz), P("cuEventQuery", cuEventQuery, 0), P("cuStreamQuery", cuStreamQuery, 0),
    P("cuEventSynchronize", cuEventSynchronize, 0), P("cuMemAlloc", cuMemAlloc_v2, 0),
    P("cuMemFree", cuMemFree_v2, 0), P("cuMemAllocHost", cuMemAllocHost_v2, 0),
    P("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz), P("cuMemcpyHtoD", cuMemcpyHtoD_v2, 0), P("cuMemcpyDtoH", cuMemcpyDtoH_v2, 0),
};
#undef P

static CUresult lookup(const char* symbol, void** pfn, uint64_t flags, int* status) {
  if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
  any_fn found = NULL;
  for (size_t i = 0; i < sizeof procs / sizeof procs[0]; ++i) {
    if (strcmp(procs[i].name, symbol) != 0) continue;
    found = (flags & PER_THREAD_STREAM) && procs[i].per_thread ? procs[i].per_thread : procs[i].legacy;
  }
  memcpy(pfn, &found, sizeof found);  /* the API's void*, as the driver hands it */
  if (status) *status = found ? 0 : 1;  /* CU_GET_PROC_ADDRESS_SUCCESS, _SYMBOL_NOT_FOUND */
  char args[96];
  snprintf(args, sizeof args, "symbol=%s,flags=%llu", symbol, (unsigned long long)flags);
  log_call("cuGetProcAddress", args, CUDA_SUCCESS);
  return CUDA_SUCCESS;  /* not found: success with a null pointer, as the driver answers */
}

CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags) {
  (void)version;
  return lookup(symbol, pfn, flags, NULL);
}

CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version, uint64_t flags, int* status) {
  (void)version;
  return lookup(symbol, pfn, flags, status);
}
