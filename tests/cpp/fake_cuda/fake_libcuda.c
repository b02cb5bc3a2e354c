/* A stand-in for the NVIDIA driver, built as build/tests/fake_cuda/libcuda.so.1
   (SONAME libcuda.so.1, picked up through LD_LIBRARY_PATH), so that what
   threadburn does with the CUDA driver is tested on machines without a GPU.
   It keeps per device what the driver keeps for a primary context: its flags
   and how often it was retained (active while retained), with the driver's
   return codes (cuda.h) for the calls threadburn and a CUDA runtime make at
   first use.

   Driven by the environment, read at cuInit:
     FAKE_CUDA_DEVICES=N          devices (default 1; 0: cuInit says CUDA_ERROR_NO_DEVICE,
                                  as the real driver does on a machine without a GPU)
     FAKE_CUDA_ACTIVE=0,2         devices whose primary context is already active at cuInit
                                  (someone retained it first), with the flags
     FAKE_CUDA_ACTIVE_FLAGS=N     of those contexts (default 0: auto)
     FAKE_CUDA_INIT_FAIL=N        cuInit returns CUresult N (not a number: 999, CUDA_ERROR_UNKNOWN)
     FAKE_CUDA_DRIVER_THREAD_MS=N cuInit starts a thread (pthread_create called from this
                                  library, as the driver's own threads are) that burns N ms
                                  of its own CPU, then sleeps until the process ends
   and, read at every call:
     FAKE_CUDA_LOG=FILE           one line per call appended, in call order, tab-separated:
                                  pid, tid, call, arguments (k=v,k=v or -), CUresult;
                                  the driver thread adds "driver_thread ms=N" when it has
                                  burned its time */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void* CUcontext;

enum {
  CUDA_SUCCESS = 0,
  CUDA_ERROR_INVALID_VALUE = 1,
  CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100,
  CUDA_ERROR_INVALID_DEVICE = 101,
  CUDA_ERROR_INVALID_CONTEXT = 201,
  CUDA_ERROR_UNKNOWN = 999,
};
enum { MAX_DEVICES = 16, SCHED_MASK = 0x07, KNOWN_FLAGS = 0x1f };

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int initialised, device_count;
static unsigned flags_of[MAX_DEVICES];
static int retained[MAX_DEVICES];
static char contexts[MAX_DEVICES];  /* a CUcontext is the address of one of these */

static void log_call(const char* call, const char* args, CUresult rc) {
  const char* path = getenv("FAKE_CUDA_LOG");
  if (!path || !*path) return;
  char line[256];
  int n = snprintf(line, sizeof line, "%d\t%ld\t%s\t%s\t%d\n", (int)getpid(), (long)syscall(SYS_gettid), call,
                   args && *args ? args : "-", rc);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return;
  if (write(fd, line, (size_t)n) < 0) { /* a test reads what arrived */ }
  close(fd);
}

static long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = NULL;
  long x = strtol(v, &end, 0);
  return *end ? fallback : x;  /* not a number: the default */
}

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void* driver_thread(void* arg) {
  long ms = (long)(intptr_t)arg;
  int64_t until = thread_cpu_ns() + ms * 1000000LL;
  volatile uint64_t x = 0;
  while (thread_cpu_ns() < until) x = x + 1;
  char args[32];
  snprintf(args, sizeof args, "ms=%ld", ms);
  log_call("driver_thread", args, CUDA_SUCCESS);
  for (;;) pause();  /* a driver's helper lives as long as the process */
  return NULL;
}

/* The devices of FAKE_CUDA_ACTIVE start retained once, with FAKE_CUDA_ACTIVE_FLAGS. */
static void start_active(void) {
  const char* list = getenv("FAKE_CUDA_ACTIVE");
  unsigned flags = (unsigned)env_long("FAKE_CUDA_ACTIVE_FLAGS", 0);
  for (const char* p = list; p && *p;) {
    char* end = NULL;
    long d = strtol(p, &end, 10);
    if (end == p) break;
    if (d >= 0 && d < device_count) {
      retained[d] = 1;
      flags_of[d] = flags;
    }
    p = *end == ',' ? end + 1 : end;
  }
}

CUresult cuInit(unsigned int flags) {
  pthread_mutex_lock(&mu);
  CUresult rc = CUDA_SUCCESS;
  if (flags != 0) {
    rc = CUDA_ERROR_INVALID_VALUE;
  } else if (getenv("FAKE_CUDA_INIT_FAIL") && *getenv("FAKE_CUDA_INIT_FAIL")) {
    rc = (CUresult)env_long("FAKE_CUDA_INIT_FAIL", CUDA_ERROR_UNKNOWN);
  } else if (!initialised) {
    long n = env_long("FAKE_CUDA_DEVICES", 1);
    device_count = n < 0 ? 0 : n > MAX_DEVICES ? MAX_DEVICES : (int)n;
    if (device_count == 0) {
      rc = CUDA_ERROR_NO_DEVICE;
    } else {
      initialised = 1;
      start_active();
      long ms = env_long("FAKE_CUDA_DRIVER_THREAD_MS", 0);
      pthread_t t;
      if (ms > 0 && pthread_create(&t, NULL, driver_thread, (void*)(intptr_t)ms) == 0) pthread_detach(t);
    }
  }
  pthread_mutex_unlock(&mu);
  log_call("cuInit", flags ? "flags=1" : "flags=0", rc);
  return rc;
}

/* CUDA_SUCCESS when initialised and `dev` exists; the caller holds mu. */
static CUresult check_device(CUdevice dev) {
  if (!initialised) return CUDA_ERROR_NOT_INITIALIZED;
  return dev >= 0 && dev < device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

CUresult cuDriverGetVersion(int* version) {
  if (!version) return CUDA_ERROR_INVALID_VALUE;
  *version = 13000;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  pthread_mutex_lock(&mu);
  CUresult rc = !count ? CUDA_ERROR_INVALID_VALUE : !initialised ? CUDA_ERROR_NOT_INITIALIZED : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS) *count = device_count;
  pthread_mutex_unlock(&mu);
  char args[32];
  snprintf(args, sizeof args, "count=%d", rc == CUDA_SUCCESS ? *count : -1);
  log_call("cuDeviceGetCount", args, rc);
  return rc;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  pthread_mutex_lock(&mu);
  CUresult rc = !device ? CUDA_ERROR_INVALID_VALUE : check_device(ordinal);
  if (rc == CUDA_SUCCESS) *device = ordinal;
  pthread_mutex_unlock(&mu);
  char args[32];
  snprintf(args, sizeof args, "ordinal=%d", ordinal);
  log_call("cuDeviceGet", args, rc);
  return rc;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  pthread_mutex_lock(&mu);
  CUresult rc = !flags || !active ? CUDA_ERROR_INVALID_VALUE : check_device(dev);
  if (rc == CUDA_SUCCESS) {
    *flags = flags_of[dev];
    *active = retained[dev] > 0;
  }
  pthread_mutex_unlock(&mu);
  char args[64];
  snprintf(args, sizeof args, "dev=%d,flags=%u,active=%d", dev, rc == CUDA_SUCCESS ? *flags : 0,
           rc == CUDA_SUCCESS ? *active : 0);
  log_call("cuDevicePrimaryCtxGetState", args, rc);
  return rc;
}

/* As CUDA 11 and later: the flags may be set while the context is active too. */
static CUresult set_flags(const char* call, CUdevice dev, unsigned int flags) {
  pthread_mutex_lock(&mu);
  unsigned sched = flags & SCHED_MASK;
  CUresult rc = check_device(dev);
  if (rc == CUDA_SUCCESS && ((flags & ~KNOWN_FLAGS) || (sched != 0 && sched != 1 && sched != 2 && sched != 4))) {
    rc = CUDA_ERROR_INVALID_VALUE;
  }
  if (rc == CUDA_SUCCESS) flags_of[dev] = flags;
  pthread_mutex_unlock(&mu);
  char args[48];
  snprintf(args, sizeof args, "dev=%d,flags=%u", dev, flags);
  log_call(call, args, rc);
  return rc;
}

CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
  return set_flags("cuDevicePrimaryCtxSetFlags", dev, flags);
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  return set_flags("cuDevicePrimaryCtxSetFlags_v2", dev, flags);
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice dev) {
  pthread_mutex_lock(&mu);
  CUresult rc = !ctx ? CUDA_ERROR_INVALID_VALUE : check_device(dev);
  if (rc == CUDA_SUCCESS) {
    ++retained[dev];
    *ctx = &contexts[dev];
  }
  unsigned flags = rc == CUDA_SUCCESS ? flags_of[dev] : 0;
  pthread_mutex_unlock(&mu);
  char args[48];
  snprintf(args, sizeof args, "dev=%d,flags=%u", dev, flags);
  log_call("cuDevicePrimaryCtxRetain", args, rc);
  return rc;
}

static CUresult release(const char* call, CUdevice dev) {
  pthread_mutex_lock(&mu);
  CUresult rc = check_device(dev);
  if (rc == CUDA_SUCCESS && retained[dev] == 0) rc = CUDA_ERROR_INVALID_CONTEXT;
  if (rc == CUDA_SUCCESS) --retained[dev];
  pthread_mutex_unlock(&mu);
  char args[24];
  snprintf(args, sizeof args, "dev=%d", dev);
  log_call(call, args, rc);
  return rc;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return release("cuDevicePrimaryCtxRelease", dev); }
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) { return release("cuDevicePrimaryCtxRelease_v2", dev); }

CUresult cuGetErrorName(CUresult error, const char** name) {
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  switch (error) {
    case CUDA_SUCCESS: *name = "CUDA_SUCCESS"; break;
    case CUDA_ERROR_INVALID_VALUE: *name = "CUDA_ERROR_INVALID_VALUE"; break;
    case CUDA_ERROR_NOT_INITIALIZED: *name = "CUDA_ERROR_NOT_INITIALIZED"; break;
    case CUDA_ERROR_NO_DEVICE: *name = "CUDA_ERROR_NO_DEVICE"; break;
    case CUDA_ERROR_INVALID_DEVICE: *name = "CUDA_ERROR_INVALID_DEVICE"; break;
    case CUDA_ERROR_INVALID_CONTEXT: *name = "CUDA_ERROR_INVALID_CONTEXT"; break;
    case CUDA_ERROR_UNKNOWN: *name = "CUDA_ERROR_UNKNOWN"; break;
    default: *name = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}
