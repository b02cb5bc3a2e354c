/* A stand-in for NVML (libnvidia-ml.so.1, SONAME libnvidia-ml.so.1) for the
 * probe's GPU tests (tests/bench/check_gpu.py): the entry points the probe
 * uses (src/cuda/nvml_sampler.cc), with the real library's signatures and
 * return codes, serving utilisation samples from a file. Picked up with
 * LD_LIBRARY_PATH=build/tests/fake_cuda. Driven by the environment, read at
 * nvmlInit_v2:
 *   FAKE_NVML_DEVICES    devices (default 1, at most 16); names "Fake GPU <i>"
 *   FAKE_NVML_SAMPLES    a file of samples, one per line "device,t_ms,gpu%[,memory%]"
 *                        (# starts a comment; each device's in time order): t_ms is the end of the sample's
 *                        period in ms from the process's start (its start time in
 *                        /proc/self/stat, to 10 ms); a sample exists only once its
 *                        time has come, and the driver keeps the last
 *                        FAKE_NVML_RING (default 100) of them, as a real one does
 *                        or "device": each device's samples are made from the stand-in
 *                        driver's simulated device (fake_device.c, loaded in the same
 *                        process): one per FAKE_NVML_PERIOD_MS (default 167, the
 *                        driver's 1/6 s) since the process's start, the share of its
 *                        period in which the device's queued work ran
 *   FAKE_NVML_CLOCK      the clock of the timestamps: realtime (default, the Unix
 *                        epoch in us) or boottime
 *   FAKE_NVML_NO_SAMPLES =1: nvmlDeviceGetSamples answers NVML_ERROR_NOT_SUPPORTED
 *                        (the probe then polls nvmlDeviceGetUtilizationRates,
 *                        which answers the latest sample whose time has come)
 *   FAKE_NVML_LOG        a file: one line per call, "<pid> <tid> <call> <args> rc=<rc>"
 * Device i is the one on PCI bus 0x10 + i (nvmlDeviceGetHandleByPciBusId_v2);
 * nvmlDeviceGetComputeRunningProcesses_v3 lists this process on the devices the
 * stand-in driver, loaded in it, has a context of its own on
 * (fake_cuda_process_bytes: its allocations as usedGpuMemory), and
 *   FAKE_NVML_OTHER_PIDS  pids listed on every device besides (other processes of the node)
 * With FAKE_NVML_SAMPLES=device, device i's samples are made of the driver's
 * ordinal that CUDA_VISIBLE_DEVICES maps to it (fake_cuda_ordinal_of).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { SUCCESS = 0, ERROR_UNINITIALIZED = 1, ERROR_INVALID_ARGUMENT = 2, ERROR_NOT_SUPPORTED = 3,
       ERROR_NOT_FOUND = 6, MAX_DEVICES = 16, MAX_SAMPLES = 100000 };

typedef struct {
  unsigned long long t_us;
  union { double d; unsigned int ui; unsigned long ul; unsigned long long ull; long long sll; } value;
} nvml_sample;
typedef struct { unsigned int gpu, memory; } nvml_utilization;
typedef struct { int index; } fake_device;
typedef struct { int device; long long t_us; unsigned gpu, memory; } fake_sample;

static fake_device g_devices[MAX_DEVICES];
static fake_sample* g_samples;
static int g_nsamples, g_ndevices = -1, g_ring = 100, g_no_samples, g_boottime;
/* FAKE_NVML_SAMPLES=device: the simulated device's busy time (fake_device.c) */
static int64_t (*g_busy_ns)(int, int64_t, int64_t);
static int g_from_device;

/* The stand-in driver's busy time, found in the loaded driver (a program
 * opens it RTLD_LOCAL: not in the global scope); NULL before it is loaded. */
static int64_t (*busy_ns_of_driver(void))(int, int64_t, int64_t) {
  if (!g_busy_ns) {
    void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void* f = driver ? dlsym(driver, "fake_cuda_busy_ns") : NULL;
    memcpy(&g_busy_ns, &f, sizeof f);
  }
  return g_busy_ns;
}
static long long g_period_us = 166667;

/* The stand-in driver's function `name` (NULL before the driver is loaded). */
static void* driver_fn(const char* name) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  return driver ? dlsym(driver, name) : NULL;
}

/* The driver's ordinal of NVML device `index`; -1: none (not visible, or no driver). */
static int ordinal_of(int index) {
  int (*ordinal)(int) = NULL;
  void* f = driver_fn("fake_cuda_ordinal_of");
  memcpy(&ordinal, &f, sizeof f);
  return ordinal ? ordinal(index) : -1;
}

static void log_call(const char* call, const char* args, int rc) {
  const char* path = getenv("FAKE_NVML_LOG");
  if (!path || !*path) return;
  FILE* f = fopen(path, "a");
  if (!f) return;
  fprintf(f, "%d %ld %s %s rc=%d\n", (int)getpid(), (long)syscall(SYS_gettid), call, args, rc);
  fclose(f);
}

static long long clock_us(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long long now_us(void) { return clock_us(g_boottime ? CLOCK_BOOTTIME : CLOCK_REALTIME); }

/* The process's start on the samples' clock: /proc/self/stat's start time is
 * in clock ticks since boot (CLOCK_BOOTTIME). */
static long long process_start_us(void) {
  static long long cached = -1;
  if (cached >= 0) return cached;
  char buf[4096];
  FILE* f = fopen("/proc/self/stat", "r");
  size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = '\0';
  const char* p = strrchr(buf, ')');
  unsigned long long start_ticks = 0;
  for (int field = 2; p && field < 22; ++field) p = strchr(p + 1, ' ');
  if (p) start_ticks = strtoull(p + 1, NULL, 10);
  const long long boot_us = (long long)(start_ticks * 1000000ULL / (unsigned long long)sysconf(_SC_CLK_TCK));
  cached = g_boottime ? boot_us : clock_us(CLOCK_REALTIME) - (clock_us(CLOCK_BOOTTIME) - boot_us);
  return cached;
}

static void load_samples(const char* path) {
  FILE* f = fopen(path, "r");
  if (!f) return;
  const long long start = process_start_us();
  char line[256];
  g_samples = calloc(MAX_SAMPLES, sizeof *g_samples);
  while (g_samples && g_nsamples < MAX_SAMPLES && fgets(line, sizeof line, f)) {
    int device;
    double t_ms;
    unsigned gpu, memory = 0;
    if (line[0] == '#' || sscanf(line, "%d,%lf,%u,%u", &device, &t_ms, &gpu, &memory) < 3) continue;
    g_samples[g_nsamples++] = (fake_sample){device, start + (long long)(t_ms * 1000), gpu, memory};
  }
  fclose(f);
}

int nvmlInit_v2(void) {
  const char* n = getenv("FAKE_NVML_DEVICES");
  g_ndevices = n && *n ? atoi(n) : 1;
  if (g_ndevices > MAX_DEVICES) g_ndevices = MAX_DEVICES;
  for (int i = 0; i < g_ndevices; ++i) g_devices[i].index = i;
  const char* ring = getenv("FAKE_NVML_RING");
  if (ring && *ring) g_ring = atoi(ring);
  const char* no = getenv("FAKE_NVML_NO_SAMPLES");
  g_no_samples = no && strcmp(no, "1") == 0;
  const char* clock = getenv("FAKE_NVML_CLOCK");
  g_boottime = clock && strcmp(clock, "boottime") == 0;
  const char* file = getenv("FAKE_NVML_SAMPLES");
  if (file && strcmp(file, "device") == 0) {
    g_from_device = 1;
    const char* period = getenv("FAKE_NVML_PERIOD_MS");
    if (period && *period && atof(period) > 0) g_period_us = (long long)(atof(period) * 1000);
  } else if (file && *file && !g_samples) {
    load_samples(file);
  }
  log_call("nvmlInit_v2", "-", SUCCESS);
  return SUCCESS;
}

int nvmlShutdown(void) {
  log_call("nvmlShutdown", "-", SUCCESS);
  return SUCCESS;
}

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case SUCCESS: return "Success";
    case ERROR_UNINITIALIZED: return "Uninitialized";
    case ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case ERROR_NOT_SUPPORTED: return "Not Supported";
    case ERROR_NOT_FOUND: return "Not Found";
    default: return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned* count) {
  const int rc = g_ndevices < 0 ? ERROR_UNINITIALIZED : SUCCESS;
  if (rc == SUCCESS) *count = (unsigned)g_ndevices;
  log_call("nvmlDeviceGetCount_v2", "-", rc);
  return rc;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, fake_device** device) {
  char args[32];
  snprintf(args, sizeof args, "index=%u", index);
  const int rc = g_ndevices < 0 ? ERROR_UNINITIALIZED : (int)index >= g_ndevices ? ERROR_INVALID_ARGUMENT : SUCCESS;
  if (rc == SUCCESS) *device = &g_devices[index];
  log_call("nvmlDeviceGetHandleByIndex_v2", args, rc);
  return rc;
}

int nvmlDeviceGetName(fake_device* device, char* name, unsigned length) {
  char args[32];
  snprintf(args, sizeof args, "device=%d", device->index);
  snprintf(name, length, "Fake GPU %d", device->index);
  log_call("nvmlDeviceGetName", args, SUCCESS);
  return SUCCESS;
}

/* FAKE_NVML_SAMPLES=device: the sample whose period ends k periods after the
 * process's start, from the simulated device's busy time in it. */
static long long device_sample_us(int k) { return process_start_us() + (long long)k * g_period_us; }

static unsigned device_share(int device, long long end_us) {
  /* The period's end on CLOCK_MONOTONIC: the sample's clock minus its distance from now. */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t mono_now = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
  const int64_t to = mono_now - (int64_t)(now_us() - end_us) * 1000, from = to - (int64_t)g_period_us * 1000;
  int64_t (*busy_ns)(int, int64_t, int64_t) = busy_ns_of_driver();
  const int ordinal = ordinal_of(device);
  const int64_t ns = busy_ns && ordinal >= 0 ? busy_ns(ordinal, from, to) : 0;
  return (unsigned)(100.0 * (double)ns / ((double)g_period_us * 1000.0) + 0.5);
}

/* The device's samples whose time has come after last_seen (the last g_ring of them). */
static unsigned device_samples(const fake_device* device, unsigned long long last_seen, unsigned room,
                               nvml_sample* samples) {
  const long long now = now_us();
  int last = (int)((now - process_start_us()) / g_period_us);
  int first = last - g_ring + 1 > 1 ? last - g_ring + 1 : 1;
  unsigned filled = 0;
  for (int k = first; k <= last && filled < room; ++k) {
    const long long t = device_sample_us(k);
    if ((unsigned long long)t <= last_seen) continue;
    samples[filled].t_us = (unsigned long long)t;
    samples[filled].value.ull = 0;
    samples[filled].value.ui = device_share(device->index, t);
    ++filled;
  }
  return filled;
}

/* How many of the device's oldest samples whose time has come the driver no
 * longer holds: it keeps the last g_ring (the file lists each device's
 * samples in time order). */
static int overwritten(const fake_device* device, long long now) {
  int n = 0;
  for (int i = 0; i < g_nsamples; ++i) n += g_samples[i].device == device->index && g_samples[i].t_us <= now;
  return n > g_ring ? n - g_ring : 0;
}

int nvmlDeviceGetSamples(fake_device* device, int type, unsigned long long last_seen, int* value_type,
                         unsigned* count, nvml_sample* samples) {
  char args[96];
  snprintf(args, sizeof args, "device=%d type=%d last_seen=%llu", device->index, type, last_seen);
  int rc = SUCCESS;
  if (g_no_samples || (type != 1 && type != 2)) {
    rc = ERROR_NOT_SUPPORTED;
  } else if (!samples) {
    *count = (unsigned)g_ring;  /* what can be asked for: the buffer's size, as the real driver answers */
  } else if (*count == 0) {
    rc = ERROR_INVALID_ARGUMENT;
  } else if (g_from_device) {
    *count = type == 1 ? device_samples(device, last_seen, *count, samples) : 0;
    *value_type = 1;  /* NVML_VALUE_TYPE_UNSIGNED_INT */
    if (*count == 0) rc = ERROR_NOT_FOUND;
  } else {
    const long long now = now_us();
    const int skip = overwritten(device, now);
    int k = 0;
    unsigned filled = 0;
    for (int i = 0; i < g_nsamples && filled < *count; ++i) {
      const fake_sample* s = &g_samples[i];
      if (s->device != device->index || s->t_us > now || k++ < skip || (unsigned long long)s->t_us <= last_seen) continue;
      samples[filled].t_us = (unsigned long long)s->t_us;
      samples[filled].value.ull = 0;
      samples[filled].value.ui = type == 1 ? s->gpu : s->memory;
      ++filled;
    }
    *value_type = 1;  /* NVML_VALUE_TYPE_UNSIGNED_INT */
    *count = filled;
    if (filled == 0) rc = ERROR_NOT_FOUND;
  }
  log_call("nvmlDeviceGetSamples", args, rc);
  return rc;
}

int nvmlDeviceGetUtilizationRates(fake_device* device, nvml_utilization* u) {
  char args[32];
  snprintf(args, sizeof args, "device=%d", device->index);
  const long long now = now_us();
  const fake_sample* latest = NULL;
  for (int i = 0; i < g_nsamples; ++i) {
    const fake_sample* s = &g_samples[i];
    if (s->device == device->index && s->t_us <= now && (!latest || s->t_us >= latest->t_us)) latest = s;
  }
  u->gpu = latest ? latest->gpu : 0;
  u->memory = latest ? latest->memory : 0;
  if (g_from_device) {
    const int last = (int)((now - process_start_us()) / g_period_us);
    u->gpu = last >= 1 ? device_share(device->index, device_sample_us(last)) : 0;
    u->memory = 0;
  }
  log_call("nvmlDeviceGetUtilizationRates", args, SUCCESS);
  return SUCCESS;
}

typedef struct { unsigned pid; unsigned long long used; unsigned gpu_instance, compute_instance; } nvml_process;

int nvmlDeviceGetHandleByPciBusId_v2(const char* bus_id, fake_device** device) {
  unsigned domain = 0, bus = 0, dev = 0, fn = 0;
  int rc = g_ndevices < 0 ? ERROR_UNINITIALIZED : !bus_id || !device ? ERROR_INVALID_ARGUMENT : SUCCESS;
  if (rc == SUCCESS && (sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4 || bus < 0x10 ||
                        (int)(bus - 0x10) >= g_ndevices || dev != 0 || fn != 0)) {
    rc = ERROR_NOT_FOUND;
  }
  if (rc == SUCCESS) *device = &g_devices[bus - 0x10];
  log_call("nvmlDeviceGetHandleByPciBusId_v2", bus_id ? bus_id : "-", rc);
  return rc;
}

/* This process where the driver has its context, then FAKE_NVML_OTHER_PIDS. */
int nvmlDeviceGetComputeRunningProcesses_v3(fake_device* device, unsigned* count, nvml_process* infos) {
  nvml_process found[32];
  unsigned n = 0;
  int64_t (*bytes_of)(int) = NULL;
  void* f = driver_fn("fake_cuda_process_bytes");
  memcpy(&bytes_of, &f, sizeof f);
  const int ordinal = ordinal_of(device->index);
  const int64_t mine = bytes_of && ordinal >= 0 ? bytes_of(ordinal) : -1;
  if (mine >= 0) found[n++] = (nvml_process){(unsigned)getpid(), (unsigned long long)mine, ~0u, ~0u};
  const char* others = getenv("FAKE_NVML_OTHER_PIDS");
  for (const char* p = others; p && *p && n < 32;) {
    char* end = NULL;
    const long pid = strtol(p, &end, 10);
    if (end == p) break;
    found[n++] = (nvml_process){(unsigned)pid, 1ULL << 30, ~0u, ~0u};
    p = *end == ',' ? end + 1 : end;
  }
  int rc = SUCCESS;
  if (!count) {
    rc = ERROR_INVALID_ARGUMENT;
  } else if (*count < n) {
    rc = 7;  /* NVML_ERROR_INSUFFICIENT_SIZE */
    *count = n;
  } else {
    for (unsigned i = 0; i < n; ++i) infos[i] = found[i];
    *count = n;
  }
  char args[32];
  snprintf(args, sizeof args, "device=%d", device->index);
  log_call("nvmlDeviceGetComputeRunningProcesses_v3", args, rc);
  return rc;
}
