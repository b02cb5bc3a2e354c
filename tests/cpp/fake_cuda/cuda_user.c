/* The known-answer CUDA program of threadburn's CUDA and GPU tests
   (tests/cpp/fake_cuda/check_cuda_sync.py, tests/bench/check_gpu.py), run
   against the stand-in driver (fake_libcuda.c) and NVML (fake_nvml.c)
   through LD_LIBRARY_PATH=build/tests/fake_cuda:

   cuda_user [--no-cuda] [--flags=spin|yield|blocking_sync] [--release-at-exit]
             [--pin-ms=N] [--pin-via=setname|prctl|old] [--transparency]
             [--sleep-ms=N] [--exit=N]

   By default it does what a CUDA runtime does at a program's first CUDA use
   (cuda_user_lib.c: dlopen libcuda.so.1, cuInit, every device's primary
   context retained) at the start of main; then, when the stand-in driver
   started threads (FAKE_CUDA_DRIVER_THREAD_MS, FAKE_CUDA_CTOR_THREAD_MS), it
   waits until they burned and prints their own CPU clocks:
   driver_thread_cpu_ms=..., ctor_thread_cpu_ms=... and ctor_before_probe=1
   when the constructor's thread started before the probe's constructor.
     --no-cuda          never uses the driver (a CPU program)
     --flags=POLICY     sets that policy on every device itself first (a
                        program that calls cudaSetDeviceFlags)
     --release-at-exit  releases its contexts in an atexit handler registered
                        after first use (a runtime's teardown: it runs before
                        the handlers of anything loaded earlier, the probe's)
     --pin-ms=N         starts a thread that names itself pt_data_pin (as
                        PyTorch's pin-memory thread does), burns N ms of its
                        own CPU, prints pin_thread_cpu_ms=... and sleeps until
                        the process ends; main waits for the burn to end
     --pin-via=WAY      how that thread names itself: setname (default,
                        pthread_setname_np on itself as c10::setThreadName
                        does), prctl (PR_SET_NAME), old (through the stand-in
                        driver's GLIBC_2.12 reference, as a PyTorch wheel built
                        against an old glibc; this loads the driver)
     --transparency     checks that pthread_create, pthread_setname_np and
                        prctl (under the probe: its interposers) answer what
                        glibc's own definitions answer (return values, errno,
                        attributes, detached threads, pthread_exit, cancel), for
                        threads the program creates and, unless --no-cuda,
                        threads the driver creates; prints "transparency: ok"
                        or the first difference and exits 1
     --sleep-ms=N       sleeps N ms before returning (the GPU samples' time)
     --exit=N           its exit status (default 0)
   CUDA_USER_EARLY=1 makes its library create the contexts in its constructor,
   before any preloaded library's constructor. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "cuda_user_lib.h"
#include "cuda_user_transparency.h"

static sem_t pin_burned;
static long pin_ms;
static const char* pin_via = "setname";

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* fn = one of the stand-in driver's own functions (fake_libcuda.c), from the
   driver the process has loaded; NULL with another driver or none. dlsym's
   object pointer as a function pointer: POSIX allows it, ISO C needs a copy. */
#define FAKE_DRIVER_SYMBOL(fn, name)          \
  do {                                        \
    void* sym_ = dlsym(RTLD_DEFAULT, name);   \
    memcpy(&(fn), &sym_, sizeof(fn));         \
  } while (0)

static void* pin_main(void* unused) {
  (void)unused;
  int rc;
  if (!strcmp(pin_via, "prctl")) {
    rc = prctl(PR_SET_NAME, "pt_data_pin", 0, 0, 0);
  } else if (!strcmp(pin_via, "old")) {
    int (*setname_old)(const char*);
    FAKE_DRIVER_SYMBOL(setname_old, "fake_cuda_setname_old");
    rc = setname_old ? setname_old("pt_data_pin") : -1;
  } else {
    rc = pthread_setname_np(pthread_self(), "pt_data_pin");
  }
  if (rc != 0) {
    fprintf(stderr, "cuda_user: naming the pin thread (%s) failed (%d)\n", pin_via, rc);
    exit(2);
  }
  while (thread_cpu_ms() < (double)pin_ms) {
  }
  printf("pin_thread_cpu_ms=%.3f\n", thread_cpu_ms());
  fflush(stdout);
  sem_post(&pin_burned);
  for (;;) pause();
  return NULL;
}

/* The stand-in driver's threads, once they burned their time. */
static void print_driver_threads(void) {
  double (*driver)(void), (*ctor)(void);
  int (*before)(void);
  FAKE_DRIVER_SYMBOL(driver, "fake_cuda_driver_thread_cpu_ms");
  FAKE_DRIVER_SYMBOL(ctor, "fake_cuda_ctor_thread_cpu_ms");
  FAKE_DRIVER_SYMBOL(before, "fake_cuda_ctor_before_probe");
  const double ms = driver ? driver() : -1, ctor_ms = ctor ? ctor() : -1;
  if (ms >= 0) printf("driver_thread_cpu_ms=%.3f\n", ms);
  if (ctor_ms >= 0 && before) printf("ctor_thread_cpu_ms=%.3f\nctor_before_probe=%d\n", ctor_ms, before());
  fflush(stdout);
}

static unsigned policy_bits(const char* name) {
  if (!strcmp(name, "spin")) return 1;
  if (!strcmp(name, "yield")) return 2;
  if (!strcmp(name, "blocking_sync")) return 4;
  fprintf(stderr, "cuda_user: --flags: expected spin, yield or blocking_sync, got %s\n", name);
  exit(2);
}

int main(int argc, char** argv) {
  int use_cuda = 1, release_at_exit = 0, check = 0, status = 0;
  long sleep_ms = 0;
  unsigned own_flags = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "--no-cuda")) use_cuda = 0;
    else if (!strcmp(a, "--release-at-exit")) release_at_exit = 1;
    else if (!strcmp(a, "--transparency")) check = 1;
    else if (!strncmp(a, "--flags=", 8)) own_flags = policy_bits(a + 8);
    else if (!strncmp(a, "--pin-ms=", 9)) pin_ms = atol(a + 9);
    else if (!strncmp(a, "--pin-via=", 10)) pin_via = a + 10;
    else if (!strncmp(a, "--sleep-ms=", 11)) sleep_ms = atol(a + 11);
    else if (!strncmp(a, "--exit=", 7)) status = atoi(a + 7);
    else {
      fprintf(stderr, "cuda_user: unknown argument %s\n", a);
      return 2;
    }
  }
  if (use_cuda) {
    if (cuda_user_first_use(own_flags) > 0 && release_at_exit) atexit(cuda_user_release_all);
    print_driver_threads();
  } else if (!strcmp(pin_via, "old") && !dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL)) {
    fprintf(stderr, "cuda_user: --pin-via=old needs the stand-in driver: %s\n", dlerror());
    return 2;
  }
  if (pin_ms > 0) {
    pthread_t t;
    sem_init(&pin_burned, 0, 0);
    if (pthread_create(&t, NULL, pin_main, NULL) != 0) return 2;
    while (sem_wait(&pin_burned) != 0) {
    }
  }
  if (check) {
    create_fn driver_create = NULL;
    if (use_cuda) FAKE_DRIVER_SYMBOL(driver_create, "fake_cuda_create_thread");
    if (cuda_user_transparency(driver_create) != 0) return 1;
  }
  if (sleep_ms > 0) {
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
  }
  return status;
}
