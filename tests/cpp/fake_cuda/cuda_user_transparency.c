/* Whether the probe's thread interposers (src/probe/thread_tap.cc) are
   transparent: every answer the same as glibc's own definition gives
   (cuda_user_transparency.h). */
#define _GNU_SOURCE
#include "cuda_user_transparency.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* dlvsym's object pointer as a function pointer: POSIX allows it, ISO C needs a copy. */
#define GLIBC_SYMBOL(fn, libc, name, version)      \
  do {                                             \
    void* sym_ = dlvsym(libc, name, version);      \
    memcpy(&(fn), &sym_, sizeof(fn));              \
  } while (0)

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
  setname_fn glibc_setname;
  prctl_fn glibc_prctl;
  GLIBC_SYMBOL(glibc_setname, libc, "pthread_setname_np", "GLIBC_2.34");
  GLIBC_SYMBOL(glibc_prctl, libc, "prctl", "GLIBC_2.2.5");
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

int cuda_user_transparency(create_fn driver_create) {
  sem_init(&g_ran, 0, 0);
  void* libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  create_fn glibc = NULL;
  if (libc) GLIBC_SYMBOL(glibc, libc, "pthread_create", "GLIBC_2.34");
  if (!glibc) {
    printf("transparency: no glibc pthread_create@GLIBC_2.34 to compare with\n");
    return 1;
  }
  check_create("program", pthread_create, glibc);
  if (driver_create) check_create("driver", driver_create, glibc);
  check_naming(libc);
  if (!g_failed) printf("transparency: ok\n");
  return g_failed;
}

