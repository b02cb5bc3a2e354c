/* What the two halves of the stand-in driver share (build/tests/fake_cuda/
   libcuda.so.1): fake_libcuda.c (initialisation, devices, primary contexts,
   the driver's threads, the call log) and fake_device.c (the simulated
   device: current contexts, launches, waits, events, memory, and
   cuGetProcAddress). Hidden symbols: nothing here is the driver's API. */
#pragma once

#include <pthread.h>

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
  CUDA_ERROR_INVALID_HANDLE = 400,
  CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_UNKNOWN = 999,
};
enum { MAX_DEVICES = 16, SCHED_MASK = 0x07, KNOWN_FLAGS = 0x1f };

#define FAKE_HIDDEN __attribute__((visibility("hidden")))

FAKE_HIDDEN extern pthread_mutex_t mu;      /* guards the state below */
FAKE_HIDDEN extern int initialised, device_count;
FAKE_HIDDEN extern unsigned flags_of[MAX_DEVICES];  /* each primary context's flags */
FAKE_HIDDEN extern int retained[MAX_DEVICES];       /* active while retained */
FAKE_HIDDEN extern char contexts[MAX_DEVICES];      /* a CUcontext is the address of one of these */

/* One line per call into FAKE_CUDA_LOG (when set). */
FAKE_HIDDEN void log_call(const char* call, const char* args, CUresult rc);
/* The variable as a number; fallback when unset or not a number. */
FAKE_HIDDEN long env_long(const char* name, long fallback);
/* CUDA_SUCCESS when initialised and dev exists; the caller holds mu. */
FAKE_HIDDEN CUresult check_device(CUdevice dev);
