/* A minimal stand-in for the CUDA driver (libcuda.so.1, SONAME libcuda.so.1,
 * built into build/tests/fake_cuda_min/) for the probe's thread-class and
 * GPU tests (tests/bench/check_gpu.py). The full stand-in of the CUDA driver
 * is build/tests/fake_cuda/libcuda.so.1; this one only starts threads the
 * way the driver does, from its own code:
 *   cuInit(0)   starts, once, a driver thread that burns
 *               FAKE_CUDA_DRIVER_THREAD_MS ms (default 0) of its own CPU, then
 *               sleeps until the process ends, as the driver's threads live on.
 *   fake_cuda_driver_thread_cpu_ms()  waits until that thread has burned and
 *               answers its own CPU clock then (what the probe must report).
 *   fake_cuda_create_thread(...)  pthread_create called from the driver's code
 *               with the caller's arguments: how a test puts its own threads
 *               through the probe's wrapping of the driver's threads.
 *   fake_cuda_setname_old(name)  pthread_setname_np(pthread_self(), name) through
 *               its GLIBC_2.12 version, as c10's setThreadName in a PyTorch wheel
 *               (built against an old glibc) names the pin-memory thread.
 *   FAKE_CUDA_CTOR_THREAD_MS=N  the library's constructor starts a driver thread
 *               burning N ms (a thread started before the probe's constructor,
 *               when this library is initialised first), answered by
 *               fake_cuda_ctor_thread_cpu_ms(); fake_cuda_ctor_before_probe() says
 *               whether the probe had not started yet (no probe-<pid>.started in
 *               THREADBURN_PROBE_DIR when the constructor ran).
 * Every pthread_create here is the GLIBC_2.2.5 version, as in a driver built
 * against a glibc older than 2.34 (the real libcuda.so.1 is): the probe must
 * catch that reference as well as a new program's pthread_create@GLIBC_2.34.
 * Built with -DFAKE_CUDA_NEW_GLIBC (build/tests/fake_cuda_min234/) it
 * references the default versions instead, as a library built here does.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#ifndef FAKE_CUDA_NEW_GLIBC
__asm__(".symver pthread_create,pthread_create@GLIBC_2.2.5");
__asm__(".symver pthread_setname_np,pthread_setname_np@GLIBC_2.12");
#endif

typedef struct {
  long burn_ms;
  double cpu_ms;  /* its own CPU clock once it burned */
  sem_t burned;
} driver_thread;

static driver_thread g_init_thread, g_ctor_thread;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ctor_before_probe = -1;

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void* driver_main(void* p) {
  driver_thread* t = p;
  while (thread_cpu_ms() < (double)t->burn_ms) {
  }
  t->cpu_ms = thread_cpu_ms();
  sem_post(&t->burned);
  for (;;) pause();  /* the driver's threads live as long as the process */
  return NULL;
}

static void start(driver_thread* t, long burn_ms) {
  pthread_t id;
  t->burn_ms = burn_ms;
  sem_init(&t->burned, 0, 0);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&id, &attr, driver_main, t) != 0) abort();
  pthread_attr_destroy(&attr);
}

static long env_ms(const char* name) {
  const char* v = getenv(name);
  return v && *v ? atol(v) : -1;
}

static void init_once(void) {
  const long ms = env_ms("FAKE_CUDA_DRIVER_THREAD_MS");
  start(&g_init_thread, ms > 0 ? ms : 0);
}

int cuInit(unsigned flags) {
  (void)flags;
  pthread_once(&g_once, init_once);
  return 0;
}

int cuDriverGetVersion(int* version) {
  *version = 13000;
  return 0;
}

double fake_cuda_driver_thread_cpu_ms(void) {
  pthread_once(&g_once, init_once);
  while (sem_wait(&g_init_thread.burned) != 0) {
  }
  sem_post(&g_init_thread.burned);
  return g_init_thread.cpu_ms;
}

double fake_cuda_ctor_thread_cpu_ms(void) {
  if (env_ms("FAKE_CUDA_CTOR_THREAD_MS") < 0) return -1;
  while (sem_wait(&g_ctor_thread.burned) != 0) {
  }
  sem_post(&g_ctor_thread.burned);
  return g_ctor_thread.cpu_ms;
}

int fake_cuda_create_thread(pthread_t* thread, const pthread_attr_t* attr, void* (*routine)(void*), void* arg) {
  /* volatile: not a tail call, so pthread_create returns into this library */
  volatile int rc = pthread_create(thread, attr, routine, arg);
  return rc;
}

int fake_cuda_setname_old(const char* name) {
  volatile int rc = pthread_setname_np(pthread_self(), name);
  return rc;
}

int fake_cuda_ctor_before_probe(void) { return g_ctor_before_probe; }

__attribute__((constructor)) static void fake_cuda_ctor(void) {
  const long ms = env_ms("FAKE_CUDA_CTOR_THREAD_MS");
  if (ms < 0) return;
  const char* dir = getenv("THREADBURN_PROBE_DIR");
  char path[4096];
  snprintf(path, sizeof path, "%s/probe-%d.started", dir ? dir : ".", (int)getpid());
  g_ctor_before_probe = access(path, F_OK) != 0;
  start(&g_ctor_thread, ms);
}
