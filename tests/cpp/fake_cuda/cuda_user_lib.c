/* What a CUDA runtime (cudart, and so PyTorch) does with the driver at a
   program's first CUDA use, for the known-answer program cuda_user.c:
   dlopen("libcuda.so.1"), cuInit(0), and every device's primary context
   retained (the context is created then, with the flags its device has at
   that moment); at exit, the runtime's own teardown releases them.

   A library of its own so that it can also do it from its constructor
   (CUDA_USER_EARLY=1): a library the program links is initialised before any
   preloaded one (its constructor runs first), so this models a program or a
   library that creates its CUDA context before threadburn's constructor can
   set the policy. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_user_lib.h"

typedef int (*init_fn)(unsigned);
typedef int (*count_fn)(int*);
typedef int (*get_fn)(int*, int);
typedef int (*set_fn)(int, unsigned);
typedef int (*retain_fn)(void**, int);
typedef int (*release_fn)(int);

/* dlsym's object pointer as a function pointer (POSIX allows it; ISO C needs a copy). */
#define LOAD(handle, fn, name)           \
  do {                                   \
    void* sym_ = dlsym(handle, name);    \
    memcpy(&(fn), &sym_, sizeof(fn));    \
  } while (0)

static int devices_retained = -1;  /* -1: not yet used */
static int device_ids[64];
static release_fn release;

int cuda_user_first_use(unsigned own_flags) {
  if (devices_retained >= 0) return devices_retained;
  devices_retained = 0;
  void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  if (!h) {
    printf("cuda_user: no CUDA driver\n");
    return -1;
  }
  init_fn init;
  count_fn count;
  get_fn get;
  set_fn set;
  retain_fn retain;
  LOAD(h, init, "cuInit");
  LOAD(h, count, "cuDeviceGetCount");
  LOAD(h, get, "cuDeviceGet");
  LOAD(h, set, "cuDevicePrimaryCtxSetFlags_v2");
  LOAD(h, retain, "cuDevicePrimaryCtxRetain");
  LOAD(h, release, "cuDevicePrimaryCtxRelease_v2");
  int n = 0;
  if (!init || !count || !get || !set || !retain || !release || init(0) != 0 || count(&n) != 0) {
    printf("cuda_user: no CUDA device\n");
    return 0;
  }
  for (int i = 0; i < n && i < 64; ++i) {
    int dev = 0;
    void* ctx = NULL;
    if (get(&dev, i) != 0) continue;
    if (own_flags) set(dev, own_flags);  /* cudaSetDeviceFlags of the program's own */
    if (retain(&ctx, dev) == 0) device_ids[devices_retained++] = dev;
  }
  printf("cuda_user: %d device(s) retained\n", devices_retained);
  fflush(stdout);
  return devices_retained;
}

void cuda_user_release_all(void) {
  for (int i = 0; i < devices_retained; ++i) release(device_ids[i]);
}

__attribute__((constructor)) static void early(void) {
  const char* v = getenv("CUDA_USER_EARLY");
  if (v && *v && *v != '0') cuda_user_first_use(0);
}
