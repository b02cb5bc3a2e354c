/* A known-answer CUDA program for the tests of threadburn's CUDA parts, run
   against the stand-in driver (fake_libcuda.c, through LD_LIBRARY_PATH):

   cuda_user [--no-cuda] [--flags=spin|yield|blocking_sync] [--release-at-exit]
             [--pin-ms=N] [--sleep-ms=N] [--exit=N]

   By default it does what a CUDA runtime does at a program's first CUDA use
   (cuda_user_lib.c: dlopen libcuda.so.1, cuInit, every device's primary
   context retained) at the start of main.
     --no-cuda          never touches the driver (a CPU program)
     --flags=POLICY     sets that policy on every device itself first (a
                        program that calls cudaSetDeviceFlags)
     --release-at-exit  releases its contexts in an atexit handler registered
                        after first use (a runtime's teardown: it runs before
                        the handlers of anything loaded earlier, the probe's)
     --pin-ms=N         starts a thread that names itself pt_data_pin (as
                        PyTorch's pin-memory thread does) and burns N ms of its
                        own CPU, then sleeps until the process ends; main waits
                        for the burn to end
     --sleep-ms=N       sleeps N ms before returning
     --exit=N           its exit status (default 0)
   CUDA_USER_EARLY=1 makes its library create the contexts in its constructor,
   before any preloaded library's constructor. It prints what it did on stdout. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_user_lib.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t burned = PTHREAD_COND_INITIALIZER;
static int pin_done;

static int64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void* pin_thread(void* arg) {
  long ms = (long)(intptr_t)arg;
  pthread_setname_np(pthread_self(), "pt_data_pin");
  int64_t until = thread_cpu_ns() + ms * 1000000LL;
  volatile uint64_t x = 0;
  while (thread_cpu_ns() < until) x = x + 1;
  printf("cuda_user: pt_data_pin burned %ld ms\n", ms);
  fflush(stdout);
  pthread_mutex_lock(&mu);
  pin_done = 1;
  pthread_cond_signal(&burned);
  pthread_mutex_unlock(&mu);
  for (;;) pause();
  return NULL;
}

static unsigned policy_bits(const char* name) {
  if (!strcmp(name, "spin")) return 1;
  if (!strcmp(name, "yield")) return 2;
  if (!strcmp(name, "blocking_sync")) return 4;
  fprintf(stderr, "cuda_user: --flags: expected spin, yield or blocking_sync, got %s\n", name);
  exit(2);
}

int main(int argc, char** argv) {
  int use_cuda = 1, release_at_exit = 0, status = 0;
  long pin_ms = 0, sleep_ms = 0;
  unsigned own_flags = 0;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "--no-cuda")) use_cuda = 0;
    else if (!strcmp(a, "--release-at-exit")) release_at_exit = 1;
    else if (!strncmp(a, "--flags=", 8)) own_flags = policy_bits(a + 8);
    else if (!strncmp(a, "--pin-ms=", 9)) pin_ms = atol(a + 9);
    else if (!strncmp(a, "--sleep-ms=", 11)) sleep_ms = atol(a + 11);
    else if (!strncmp(a, "--exit=", 7)) status = atoi(a + 7);
    else {
      fprintf(stderr, "cuda_user: unknown argument %s\n", a);
      return 2;
    }
  }
  if (use_cuda && cuda_user_first_use(own_flags) > 0 && release_at_exit) atexit(cuda_user_release_all);
  pthread_t t;
  if (pin_ms > 0 && pthread_create(&t, NULL, pin_thread, (void*)(intptr_t)pin_ms) == 0) {
    pthread_mutex_lock(&mu);
    while (!pin_done) pthread_cond_wait(&burned, &mu);
    pthread_mutex_unlock(&mu);
  }
  if (sleep_ms > 0) {
    struct timespec ts = {sleep_ms / 1000, (sleep_ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
  }
  return status;
}
