/* A stand-in for the NVIDIA driver, built as build/tests/fake_cuda/libcuda.so.1
   (SONAME libcuda.so.1, picked up through LD_LIBRARY_PATH), so that what
   threadburn does with the CUDA driver is tested on machines without a GPU:
   the CUDA host wait policy (tests/cpp/fake_cuda/check_cuda_sync.py), the
   probe's class of the driver's threads (tests/bench/check_gpu.py), and,
   with its simulated device (fake_device.c), the waits and launches the
   probe times and the advice and verdicts made of them
   (tests/bench/check_device_waits.py).
   It keeps per device what the driver keeps for a primary context: its flags
   and how often it was retained (active while retained), with the driver's
   return codes (cuda.h) for the calls threadburn and a CUDA runtime make at
   first use. It starts threads the way the driver does, from its own code.
   The last release of a primary context destroys it and its flags read back
   0 (auto) from then on, as the real driver did on the first device check
   (H200, driver 580.159.04: a Python program run with spin read back auto
   at exit, after its CUDA runtime released the context, where the program
   itself had read spin while it ran).

   Driven by the environment, read at cuInit:
     FAKE_CUDA_DEVICES=N          devices (default 1; 0: cuInit says CUDA_ERROR_NO_DEVICE,
                                  as the real driver does on a machine without a GPU); ordinal d
                                  is the stand-in NVML's device CUDA_VISIBLE_DEVICES names d-th
                                  (its PCI bus id 0x10 + that index), or device d without a list
     FAKE_CUDA_ACTIVE=0,2         devices whose primary context is already active at cuInit
                                  (someone retained it first), with the flags
     FAKE_CUDA_ACTIVE_FLAGS=N     of those contexts (default 0: auto)
     FAKE_CUDA_INIT_FAIL=N        cuInit returns CUresult N (not a number: 999, CUDA_ERROR_UNKNOWN)
     FAKE_CUDA_DRIVER_THREAD_MS=N the first successful cuInit starts a driver thread that
                                  burns N ms of its own CPU, then sleeps until the process
                                  ends, as the driver's threads live on (unset or 0: none)
   read when the library is loaded:
     FAKE_CUDA_CTOR_THREAD_MS=N   the library's constructor starts a driver thread burning
                                  N ms: a thread started before the probe's constructor
                                  runs, when this library is initialised first
   read at every thread it starts:
     FAKE_CUDA_GLIBC=2.34         its pthread_create is glibc's GLIBC_2.34 version, as in a
                                  library built against glibc 2.34 or later; by default the
                                  GLIBC_2.2.5 one, as in the real driver, built against an
                                  older glibc: the probe must catch both references
   and, read at every call:
     FAKE_CUDA_LOG=FILE           one line per call appended, in call order, tab-separated:
                                  pid, tid, call, arguments (k=v,k=v or -), CUresult;
                                  a driver thread adds "driver_thread ms=N" when it has
                                  burned its time

   Beyond the driver's API, for the known-answer program (cuda_user.c):
     fake_cuda_driver_thread_cpu_ms()  waits until cuInit's driver thread has burned and
                                  answers its own CPU clock then (what the probe must
                                  report); -1 when there is none
     fake_cuda_ctor_thread_cpu_ms()    the same of the constructor's thread; -1 without one
     fake_cuda_ctor_before_probe()     1 when the constructor ran before the probe's (no
                                  probe-<pid>.started in THREADBURN_PROBE_DIR yet), 0 when
                                  after, -1 without a constructor thread
     fake_cuda_create_thread(...)      pthread_create, as above, called from the driver's
                                  code with the caller's arguments: a test's own threads
                                  through the probe's wrapping of the driver's threads
     fake_cuda_setname_old(name)       pthread_setname_np(pthread_self(), name) through its
                                  GLIBC_2.12 version, as c10's setThreadName in a PyTorch
                                  wheel (built against an old glibc) names the pin-memory
                                  thread */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fake_libcuda.h"

pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
int initialised, device_count;
unsigned flags_of[MAX_DEVICES];
int retained[MAX_DEVICES];
char contexts[MAX_DEVICES];  /* a CUcontext is the address of one of these */

void log_call(const char* call, const char* args, CUresult rc) {
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

long env_long(const char* name, long fallback) {
  const char* v = getenv(name);
  if (!v || !*v) return fallback;
  char* end = NULL;
  long x = strtol(v, &end, 0);
  return *end ? fallback : x;  /* not a number: the default */
}

/* glibc's two versions of pthread_create (GLIBC_2.34 since libpthread moved
   into libc, GLIBC_2.2.5 before) and the old one of pthread_setname_np,
   referenced by version whatever glibc this is built against. */
typedef void* (*start_fn)(void*);
extern int create_old(pthread_t*, const pthread_attr_t*, start_fn, void*);
extern int create_new(pthread_t*, const pthread_attr_t*, start_fn, void*);
extern int setname_old(pthread_t, const char*);
__asm__(".symver create_old,pthread_create@GLIBC_2.2.5");
__asm__(".symver create_new,pthread_create@GLIBC_2.34");
__asm__(".symver setname_old,pthread_setname_np@GLIBC_2.12");

/* pthread_create called from this library (the probe looks at the caller);
   volatile: not a tail call, so that pthread_create returns into it. */
static int create_thread(pthread_t* thread, const pthread_attr_t* attr, start_fn start, void* arg) {
  const char* v = getenv("FAKE_CUDA_GLIBC");
  volatile int rc = v && !strcmp(v, "2.34") ? create_new(thread, attr, start, arg)
                                            : create_old(thread, attr, start, arg);
  return rc;
}

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A driver thread: burns its time, says so, then lives as long as the process. */
typedef struct {
  int started;
  long burn_ms;
  double cpu_ms;  /* its own CPU clock once it burned and logged */
  sem_t burned;
} driver_thread;

static driver_thread init_thread, ctor_thread;
static int ctor_before_probe = -1;

static void* driver_main(void* p) {
  driver_thread* t = p;
  volatile uint64_t x = 0;
  while (thread_cpu_ms() < (double)t->burn_ms) x = x + 1;
  char args[32];
  snprintf(args, sizeof args, "ms=%ld", t->burn_ms);
  log_call("driver_thread", args, CUDA_SUCCESS);
  t->cpu_ms = thread_cpu_ms();
  sem_post(&t->burned);
  for (;;) pause();
  return NULL;
}

static void start_thread(driver_thread* t, long burn_ms) {
  t->burn_ms = burn_ms;
  sem_init(&t->burned, 0, 0);
  pthread_attr_t attr;
  pthread_t id;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  t->started = create_thread(&id, &attr, driver_main, t) == 0;
  pthread_attr_destroy(&attr);
}

static double burned_cpu_ms(driver_thread* t) {
  if (!t->started) return -1;
  while (sem_wait(&t->burned) != 0) {
  }
  sem_post(&t->burned);
  return t->cpu_ms;
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
      if (ms > 0) start_thread(&init_thread, ms);
    }
  }
  pthread_mutex_unlock(&mu);
  log_call("cuInit", flags ? "flags=1" : "flags=0", rc);
  return rc;
}

/* CUDA_SUCCESS when initialised and `dev` exists; the caller holds mu. */
CUresult check_device(CUdevice dev) {
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

/* The NVML index of an ordinal: its place in CUDA_VISIBLE_DEVICES when that is
   a list of numbers, else the ordinal itself (the stand-in NVML's devices are
   the node's: its index i is PCI bus 0x10 + i). -1: not visible. */
int fake_cuda_nvml_index(int ordinal) {
  const char* v = getenv("CUDA_VISIBLE_DEVICES");
  if (!v || !*v) return ordinal;
  int place = 0;
  for (const char* p = v; *p;) {
    char* end = NULL;
    const long n = strtol(p, &end, 10);
    if (end == p) return ordinal;  /* not a list of numbers (GPU-<uuid>): every device, in order */
    if (place++ == ordinal) return (int)n;
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end) return ordinal;
  }
  return -1;
}

/* The inverse: the ordinal of NVML device `index`, -1 when none (not visible,
   or not initialised). No call is logged. */
int fake_cuda_ordinal_of(int index) {
  pthread_mutex_lock(&mu);
  const int n = initialised ? device_count : 0;
  pthread_mutex_unlock(&mu);
  for (int d = 0; d < n; ++d) {
    if (fake_cuda_nvml_index(d) == index) return d;
  }
  return -1;
}

/* "0000:<bus>:00.0", as the driver writes a device's PCI bus id. */
CUresult cuDeviceGetPCIBusId(char* id, int len, CUdevice dev) {
  pthread_mutex_lock(&mu);
  CUresult rc = !id || len < 13 ? CUDA_ERROR_INVALID_VALUE : check_device(dev);
  pthread_mutex_unlock(&mu);
  if (rc == CUDA_SUCCESS) snprintf(id, (size_t)len, "0000:%02x:00.0", 0x10 + fake_cuda_nvml_index(dev));
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
  if (rc == CUDA_SUCCESS && --retained[dev] == 0) flags_of[dev] = 0;  /* destroyed: its flags gone */
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
    case CUDA_ERROR_INVALID_HANDLE: *name = "CUDA_ERROR_INVALID_HANDLE"; break;
    case CUDA_ERROR_NOT_FOUND: *name = "CUDA_ERROR_NOT_FOUND"; break;
    case CUDA_ERROR_UNKNOWN: *name = "CUDA_ERROR_UNKNOWN"; break;
    default: *name = NULL; return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

/* --- beyond the driver's API: the known answers of its threads ---------- */

double fake_cuda_driver_thread_cpu_ms(void) {
  pthread_mutex_lock(&mu);
  driver_thread* t = init_thread.started ? &init_thread : NULL;
  pthread_mutex_unlock(&mu);
  return t ? burned_cpu_ms(t) : -1;
}

double fake_cuda_ctor_thread_cpu_ms(void) { return burned_cpu_ms(&ctor_thread); }

int fake_cuda_ctor_before_probe(void) { return ctor_before_probe; }

int fake_cuda_create_thread(pthread_t* thread, const pthread_attr_t* attr, start_fn start, void* arg) {
  return create_thread(thread, attr, start, arg);
}

int fake_cuda_setname_old(const char* name) {
  volatile int rc = setname_old(pthread_self(), name);
  return rc;
}

__attribute__((constructor)) static void start_ctor_thread(void) {
  long ms = env_long("FAKE_CUDA_CTOR_THREAD_MS", 0);
  if (ms <= 0) return;
  const char* dir = getenv("THREADBURN_PROBE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/probe-%d.started", dir ? dir : ".", (int)getpid());
  ctor_before_probe = access(path, F_OK) != 0;
  start_thread(&ctor_thread, ms);
}
