/* A known-answer program for the probe's GPU and thread-class tests
 * (tests/bench/check_gpu.py), run under the probe with the stand-in driver
 * (build/tests/fake_cuda_min/libcuda.so.1) and NVML:
 *
 *   gpu_user [--cuda] [--pin_ms=Y] [--pin_via=setname|prctl|old] [--run_ms=R] [--transparency]
 *
 *   --cuda          what cudart does first: dlopen("libcuda.so.1"), cuInit(0); then
 *                   prints the driver thread's own CPU once it burned
 *                   (driver_thread_cpu_ms=..., FAKE_CUDA_DRIVER_THREAD_MS), and
 *                   the constructor's thread's (ctor_thread_cpu_ms=..., and
 *                   ctor_before_probe=1 when it started before the probe's constructor)
 *   --pin_ms=Y      a thread that names itself pt_data_pin (pthread_setname_np on
 *                   itself, as c10::setThreadName does; prctl(PR_SET_NAME); or
 *                   old: through the driver stand-in's GLIBC_2.12 reference),
 *                   burns Y ms of its own CPU, prints pin_thread_cpu_ms=... and
 *                   lives on until the program ends
 *   --run_ms=R      then sleeps R ms (the GPU samples' time)
 *   --transparency  pthread_create, pthread_setname_np and prctl under the probe
 *                   answer what glibc's own definitions answer (return values,
 *                   errno, attributes, detached threads, pthread_exit, cancel),
 *                   for threads the program creates and, with --cuda, threads
 *                   the driver creates; prints "transparency: ok" or the first
 *                   difference and exits 1
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

typedef int (*create_fn)(pthread_t*, const pthread_attr_t*, void* (*)(void*), void*);

static void* g_cuda;
static sem_t g_pin_burned;
static long g_pin_ms;
static const char* g_pin_via = "setname";

static double thread_cpu_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void* cuda_symbol(const char* name) {
  void* f = g_cuda ? dlsym(g_cuda, name) : NULL;
  if (!f) {
    fprintf(stderr, "gpu_user: libcuda.so.1 has no %s\n", name);
    exit(2);
  }
  return f;
}

static void* pin_main(void* unused) {
  (void)unused;
  int rc;
  if (strcmp(g_pin_via, "prctl") == 0) {
    rc = prctl(PR_SET_NAME, "pt_data_pin", 0, 0, 0);
  } else if (strcmp(g_pin_via, "old") == 0) {
    rc = ((int (*)(const char*))cuda_symbol("fake_cuda_setname_old"))("pt_data_pin");
  } else {
    rc = pthread_setname_np(pthread_self(), "pt_data_pin");
  }
  if (rc != 0) {
    fprintf(stderr, "gpu_user: naming the pin thread failed (%d)\n", rc);
    exit(2);
  }
  while (thread_cpu_ms() < (double)g_pin_ms) {
  }
  printf("pin_thread_cpu_ms=%.3f\n", thread_cpu_ms());
  fflush(stdout);
  sem_post(&g_pin_burned);
  for (;;) pause();
  return NULL;
}

/* --- transparency -------------------------------------------------------- */

static int g_failed;
static sem_t g_ran;

static void expect(int ok, const char* what, long got, long want) {
  if (!ok && !g_failed) printf("transparency: %s: got %ld, glibc gives %ld\n", what, got, want);
  if (!ok) g_failed = 1;
}

static void* returns_value(void* arg) { return arg; }
static void* exits_value(void* arg) { pthread_exit(arg); }
static void* posts(void* arg) { (void)arg; sem_post(&g_ran); return NULL; }
static void* reports_stack(void* arg) {
  pthread_attr_t a;
  size_t size = 0;
  pthread_getattr_np(pthread_self(), &a);
  pthread_attr_getstacksize(&a, &size);
  pthread_attr_destroy(&a);
  *(size_t*)arg = size;
  return NULL;
}
static void* waits_forever(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

/* One way of creating threads against glibc's own pthread_create. */
static void check_create(const char* who, create_fn create, create_fn glibc) {
  char what[128];
  pthread_t t;
  void* out = NULL;
  /* a return value and pthread_exit's value reach pthread_join */
  snprintf(what, sizeof what, "%s: joined value", who);
  expect(create(&t, NULL, returns_value, (void*)0x1234) == 0 && pthread_join(t, &out) == 0 && out == (void*)0x1234,
         what, (long)(intptr_t)out, 0x1234);
  snprintf(what, sizeof what, "%s: pthread_exit value", who);
  expect(create(&t, NULL, exits_value, (void*)0x5678) == 0 && pthread_join(t, &out) == 0 && out == (void*)0x5678,
         what, (long)(intptr_t)out, 0x5678);
  /* a detached thread runs and cannot be joined */
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  snprintf(what, sizeof what, "%s: detached thread", who);
  int rc = create(&t, &attr, posts, NULL);
  expect(rc == 0 && sem_wait(&g_ran) == 0, what, rc, 0);
  pthread_attr_destroy(&attr);
  /* the stack size asked for */
  size_t size = 0;
  const size_t want = 3u << 20;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, want);
  snprintf(what, sizeof what, "%s: stack size", who);
  expect(create(&t, &attr, reports_stack, &size) == 0 && pthread_join(t, NULL) == 0 && size >= want, what, (long)size,
         (long)want);
  pthread_attr_destroy(&attr);
  /* cancellation */
  snprintf(what, sizeof what, "%s: cancelled", who);
  expect(create(&t, NULL, waits_forever, NULL) == 0 && pthread_cancel(t) == 0 && pthread_join(t, &out) == 0 &&
             out == PTHREAD_CANCELED,
         what, (long)(intptr_t)out, (long)(intptr_t)PTHREAD_CANCELED);
  /* a failure: a stack no machine can map; the same error, errno as glibc leaves it */
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)1 << 46);
  errno = 4242;
  const int got = create(&t, &attr, returns_value, NULL), got_errno = errno;
  errno = 4242;
  const int want_rc = glibc(&t, &attr, returns_value, NULL), want_errno = errno;
  pthread_attr_destroy(&attr);
  snprintf(what, sizeof what, "%s: failure's return value", who);
  expect(got == want_rc && got != 0, what, got, want_rc);
  snprintf(what, sizeof what, "%s: failure's errno", who);
  expect(got_errno == want_errno, what, got_errno, want_errno);
  /* errno across a successful call */
  errno = 4242;
  rc = create(&t, NULL, returns_value, NULL);
  const int after = errno;
  pthread_join(t, NULL);
  snprintf(what, sizeof what, "%s: errno after success", who);
  expect(rc == 0 && after == 4242, what, after, 4242);
}

static void check_naming(void* libc) {
  typedef int (*setname_fn)(pthread_t, const char*);
  typedef int (*prctl_fn)(int, ...);
  setname_fn glibc_setname = (setname_fn)dlvsym(libc, "pthread_setname_np", "GLIBC_2.34");
  prctl_fn glibc_prctl = (prctl_fn)dlvsym(libc, "prctl", "GLIBC_2.2.5");
  const char* too_long = "a-name-longer-than-15";
  expect(pthread_setname_np(pthread_self(), too_long) == glibc_setname(pthread_self(), too_long),
         "pthread_setname_np: a too long name", pthread_setname_np(pthread_self(), too_long),
         glibc_setname(pthread_self(), too_long));
  errno = 0;
  const int got = prctl(-12345, 0, 0, 0, 0), got_errno = errno;
  errno = 0;
  const int want = glibc_prctl(-12345, 0, 0, 0, 0), want_errno = errno;
  expect(got == want && got_errno == want_errno, "prctl: an unknown option", got_errno, want_errno);
  char name[32] = "";
  expect(prctl(PR_SET_NAME, "tb-user", 0, 0, 0) == 0 && prctl(PR_GET_NAME, name, 0, 0, 0) == 0 &&
             strcmp(name, "tb-user") == 0,
         "prctl: PR_SET_NAME then PR_GET_NAME", (long)strlen(name), 7);
}

static int transparency(void) {
  sem_init(&g_ran, 0, 0);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  create_fn glibc = libc ? (create_fn)dlvsym(libc, "pthread_create", "GLIBC_2.34") : NULL;
  if (!glibc) {
    printf("transparency: no glibc pthread_create@GLIBC_2.34 to compare with\n");
    return 1;
  }
  check_create("program", pthread_create, glibc);
  if (g_cuda) check_create("driver", (create_fn)cuda_symbol("fake_cuda_create_thread"), glibc);
  check_naming(libc);
  if (!g_failed) printf("transparency: ok\n");
  return g_failed;
}

int main(int argc, char** argv) {
  long run_ms = 0;
  int cuda = 0, check = 0;
  for (int i = 1; i < argc; ++i) {
    if (strcmp(argv[i], "--cuda") == 0) cuda = 1;
    else if (strcmp(argv[i], "--transparency") == 0) check = 1;
    else if (strncmp(argv[i], "--pin_ms=", 9) == 0) g_pin_ms = atol(argv[i] + 9);
    else if (strncmp(argv[i], "--pin_via=", 10) == 0) g_pin_via = argv[i] + 10;
    else if (strncmp(argv[i], "--run_ms=", 9) == 0) run_ms = atol(argv[i] + 9);
    else {
      fprintf(stderr, "gpu_user: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (cuda || strcmp(g_pin_via, "old") == 0) {
    g_cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!g_cuda) {
      fprintf(stderr, "gpu_user: %s\n", dlerror());
      return 2;
    }
  }
  if (cuda) {
    if (((int (*)(unsigned))cuda_symbol("cuInit"))(0) != 0) return 2;
    printf("driver_thread_cpu_ms=%.3f\n", ((double (*)(void))cuda_symbol("fake_cuda_driver_thread_cpu_ms"))());
    const double ctor = ((double (*)(void))cuda_symbol("fake_cuda_ctor_thread_cpu_ms"))();
    if (ctor >= 0) {
      printf("ctor_thread_cpu_ms=%.3f\n", ctor);
      printf("ctor_before_probe=%d\n", ((int (*)(void))cuda_symbol("fake_cuda_ctor_before_probe"))());
    }
  }
  if (g_pin_ms > 0) {
    pthread_t t;
    sem_init(&g_pin_burned, 0, 0);
    if (pthread_create(&t, NULL, pin_main, NULL) != 0) return 2;
    while (sem_wait(&g_pin_burned) != 0) {
    }
  }
  if (check && transparency() != 0) return 1;
  fflush(stdout);
  struct timespec ts = {run_ms / 1000, (run_ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
  return 0;
}
