/* A GPU "training" of known truth on the stand-in driver's simulated device
   (fake_device.c, through LD_LIBRARY_PATH=build/tests/fake_cuda): what the
   probe's waits, launches, phases and advice are tested on
   (tests/bench/check_device_waits.py), and what tune decides the wait
   policy of.

   device_training [--kind=sync|launch|loader] [--startup-ms=1000] [--steps=N]
                   [--step-ms=20] [--kernels=4] [--wait=stream|copy|event|ctx|pageable|pinned|free|poll]
                   [--lookup=proc|dlsym] [--workers=2] [--batch-ms=40]
                   [--device=0] [--alloc-mb=0] [--launcher=main|autograd|split|both]
                   [--prep-ms=0] [--host-ms=0] [--second=D:SHARE]

   It reaches the driver as a CUDA runtime does: dlopen("libcuda.so.1"), then
   cuGetProcAddress_v2 for every entry point (--lookup=dlsym: dlsym of each by
   its name, as a runtime does when the driver lacks cuGetProcAddress_v2, and
   as Python's ctypes does). Before any of that the main thread burns
   --startup-ms of its own CPU (a program's import and initialisation); its
   first launch is its first device work. Then --steps steps:
     sync    (default) --kernels launches that queue --step-ms of device work
             together, then one wait for it (--wait: cuStreamSynchronize, a
             synchronous copy of the result as .item() ends in, an event, or
             cuCtxSynchronize; the waits that hide: pageable, the result
             copied with cuMemcpyDtoHAsync into ordinary memory, which blocks,
             then cuStreamSynchronize, which returns at once; pinned, the same
             into page-locked memory (cuMemAllocHost): the copy is queued, the
             synchronisation waits; free, 64 bytes allocated and freed
             (cuMemFree blocks), then cuStreamSynchronize; poll, cuStreamQuery
             in a loop until the work is done): the host waits
             about --step-ms a step
     launch  --kernels launches of 2 us of device work each, then a wait that
             finds the work done: the host, launching (FAKE_CUDA_LAUNCH_US
             each), keeps the device idle most of the time
     loader  --workers forked processes each make batches of --batch-ms of
             their own CPU and send them through a pipe; the main thread waits
             for the next batch, then launches 1 ms of device work and waits
     calls   --steps launches of no device work, then --steps waits with
             nothing queued, each loop timed: "launch_ns=L wait_ns=W" per call
             (with FAKE_CUDA_LAUNCH_US=0: what an interposer adds to a call,
             run with and without it; bench/overheads.py)
   --launcher (sync and launch): which thread launches a step's kernels and
   waits: main (default), autograd (a thread the program starts, which names
   itself pt_autograd_0 as it enters, as PyTorch's autograd engine's device
   thread does, makes the context current, and runs each step while the main
   thread sleeps on a semaphore until it is done, as a backward() call
   sleeps on the engine), split (the main thread launches the first half of
   a step's kernels, the forward pass, the autograd thread the rest and the
   wait: the backward), both (as split, and the main thread also waits after
   its half, as a loss's .item() does before backward(): two threads waiting
   in one context).
   --device: the driver's ordinal it makes its context on and works on (the
   others stay visible, unused); --alloc-mb: device memory it allocates
   beside its result, held to the end.
   --prep-ms: a startup of device work between the context and the first
   step, as a training's model.cuda(), dataset preparation and compile: 50
   synchronous copies in a burst (cuMemcpyHtoD, each a wait), then five
   pieces of device work of uneven length (0.10, 0.30, 0.05, 0.20, 0.05 of
   --prep-ms), each waited for and followed by host CPU (0.05, 0.05, 0.05,
   0.05, 0.10 of it: a compile's, the longest last, so that the interval
   from the last piece's wait to the first step's is no step's): none of it
   a step. --host-ms (sync):
   each step the launching thread works that long by the wall clock (its
   CPU busy, as Python between the launches and the wait, whatever share of
   a core it gets) after its launches, before its wait. --second=D:SHARE:
   the main thread also keeps device D busy, a kernel of SHARE times the
   step's device work on D's context each step, never waited for (a second
   GPU of a pipeline or DataParallel that has less to do).
   It prints "device_training: steps=N steps_ms=T startup_ms=S prep_ms=P
   prep_waits=W steps_mono_ms=M blocked_copies=B" (its own figures: the
   steps' wall time on its clock; the startup up to the first step, the
   device work's part of it, and the waits in that part; when the first step
   began, CLOCK_MONOTONIC in ms; the stand-in driver's count of copies into
   pageable memory that found work queued and waited, -1 on another
   driver). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int (*proc_address)(const char*, void**, int, uint64_t, int*);

static struct {
  int (*init)(unsigned);
  int (*device_get)(int*, int);
  int (*retain)(void**, int);
  int (*set_current)(void*);
  int (*module_load)(void**, const void*);
  int (*get_function)(void**, void*, const char*);
  int (*launch)(void*, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, void*, void**, void**);
  int (*stream_sync)(void*);
  int (*ctx_sync)(void);
  int (*event_create)(void**, unsigned);
  int (*event_record)(void*, void*);
  int (*event_sync)(void*);
  int (*mem_alloc)(uint64_t*, size_t);
  int (*copy_dtoh)(void*, uint64_t, size_t);
  int (*copy_htod)(uint64_t, const void*, size_t);
  int (*copy_dtoh_async)(void*, uint64_t, size_t, void*);
  int (*alloc_host)(void**, size_t);
  int (*mem_free)(uint64_t);
  int (*stream_query)(void*);
} cu;

static double now_ms(clockid_t id) {
  struct timespec ts;
  clock_gettime(id, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void burn_ms(double ms) {
  const double end = now_ms(CLOCK_THREAD_CPUTIME_ID) + ms;
  while (now_ms(CLOCK_THREAD_CPUTIME_ID) < end) {
  }
}

static void check(int rc, const char* what) {
  if (rc != 0) {
    fprintf(stderr, "device_training: %s failed: %d\n", what, rc);
    exit(1);
  }
}

static void* entry(void* driver, proc_address lookup, const char* name, const char* exported) {
  void* f = NULL;
  if (lookup) {
    check(lookup(name, &f, 13000, 0, NULL), name);
  } else {
    f = dlsym(driver, exported);
  }
  if (!f) {
    fprintf(stderr, "device_training: no %s\n", name);
    exit(1);
  }
  return f;
}

/* The stand-in driver's count of pageable copies that had to wait (fake_device.c), NULL on another driver. */
static long (*blocked_copies)(void);

static void load_driver(const char* how) {
  void* driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    fprintf(stderr, "device_training: %s\n", dlerror());
    exit(1);
  }
  *(void**)&blocked_copies = dlsym(driver, "fake_cuda_blocked_copies");
  proc_address lookup = NULL;
  if (strcmp(how, "dlsym") != 0) {
    *(void**)&lookup = dlsym(driver, "cuGetProcAddress_v2");  /* POSIX's way to a function pointer */
    if (!lookup) check(1, "dlsym cuGetProcAddress_v2");
  }
#define E(field, name, exported) *(void**)&cu.field = entry(driver, lookup, name, exported)
  E(init, "cuInit", "cuInit");
  E(device_get, "cuDeviceGet", "cuDeviceGet");
  E(retain, "cuDevicePrimaryCtxRetain", "cuDevicePrimaryCtxRetain");
  E(set_current, "cuCtxSetCurrent", "cuCtxSetCurrent");
  E(module_load, "cuModuleLoadData", "cuModuleLoadData");
  E(get_function, "cuModuleGetFunction", "cuModuleGetFunction");
  E(launch, "cuLaunchKernel", "cuLaunchKernel");
  E(stream_sync, "cuStreamSynchronize", "cuStreamSynchronize");
  E(ctx_sync, "cuCtxSynchronize", "cuCtxSynchronize");
  E(event_create, "cuEventCreate", "cuEventCreate");
  E(event_record, "cuEventRecord", "cuEventRecord");
  E(event_sync, "cuEventSynchronize", "cuEventSynchronize");
  E(mem_alloc, "cuMemAlloc", "cuMemAlloc_v2");
  E(copy_dtoh, "cuMemcpyDtoH", "cuMemcpyDtoH_v2");
  E(copy_htod, "cuMemcpyHtoD", "cuMemcpyHtoD_v2");
  E(copy_dtoh_async, "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2");
  E(alloc_host, "cuMemAllocHost", "cuMemAllocHost_v2");
  E(mem_free, "cuMemFree", "cuMemFree_v2");
  E(stream_query, "cuStreamQuery", "cuStreamQuery");
#undef E
}

static void* kernel(void* module, double us) {
  char name[48];
  void* f = NULL;
  snprintf(name, sizeof name, "sleep_%ld", (long)(us + 0.5));
  check(cu.get_function(&f, module, name), "cuModuleGetFunction");
  return f;
}

static float* pinned_loss;  /* --wait=pinned: page-locked host memory */

static void wait_for(const char* how, void* event, uint64_t result) {
  float loss = 0;
  if (strcmp(how, "pageable") == 0 || strcmp(how, "pinned") == 0) {
    /* .cpu() / .to('cpu', non_blocking=True): an asynchronous copy, then the stream's synchronisation */
    float* to = strcmp(how, "pinned") == 0 ? pinned_loss : &loss;
    check(cu.copy_dtoh_async(to, result, sizeof loss, NULL), "cuMemcpyDtoHAsync");
    check(cu.stream_sync(NULL), "cuStreamSynchronize");
  } else if (strcmp(how, "poll") == 0) {
    /* a framework's wait that spins: cuStreamQuery until the work is done */
    int rc;
    while ((rc = cu.stream_query(NULL)) == 600) {
    }
    check(rc, "cuStreamQuery");
  } else if (strcmp(how, "free") == 0) {
    /* a tensor freed (the caching allocator's empty_cache): cuMemFree synchronises first */
    uint64_t scratch = 0;
    check(cu.mem_alloc(&scratch, 64), "cuMemAlloc");
    check(cu.mem_free(scratch), "cuMemFree");
    check(cu.stream_sync(NULL), "cuStreamSynchronize");
  } else if (strcmp(how, "copy") == 0) {
    check(cu.copy_dtoh(&loss, result, sizeof loss), "cuMemcpyDtoH");
  } else if (strcmp(how, "event") == 0) {
    check(cu.event_record(event, NULL), "cuEventRecord");
    check(cu.event_sync(event), "cuEventSynchronize");
  } else if (strcmp(how, "ctx") == 0) {
    check(cu.ctx_sync(), "cuCtxSynchronize");
  } else {
    check(cu.stream_sync(NULL), "cuStreamSynchronize");
  }
}

/* Works ms by the wall clock, the CPU busy (whatever share of a core it gets). */
static void work_ms(double ms) {
  const double end = now_ms(CLOCK_MONOTONIC) + ms;
  while (now_ms(CLOCK_MONOTONIC) < end) {
  }
}

/* --prep-ms: the device work of a startup (see the top); returns its waits. */
static int prepare(void* module, uint64_t result, double prep_ms) {
  static const double device[] = {0.10, 0.30, 0.05, 0.20, 0.05}, host[] = {0.05, 0.05, 0.05, 0.05, 0.10};
  int waits = 0;
  float parameter = 1;
  for (int i = 0; i < 50; ++i, ++waits) check(cu.copy_htod(result, &parameter, sizeof parameter), "cuMemcpyHtoD");
  for (int i = 0; i < 5; ++i, ++waits) {
    check(cu.launch(kernel(module, device[i] * prep_ms * 1000.0), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    check(cu.stream_sync(NULL), "cuStreamSynchronize");
    burn_ms(host[i] * prep_ms);
  }
  return waits;
}

/* The autograd thread's share of each step (--launcher=autograd|split). */
static struct {
  sem_t go, done;
  void* ctx;
  void* f;
  int kernels, steps;
  const char* how;
  void* event;
  uint64_t result;
} backward;

static void* autograd_thread(void* unused) {
  (void)unused;
  pthread_setname_np(pthread_self(), "pt_autograd_0");  /* as it enters, before any step */
  check(cu.set_current(backward.ctx), "cuCtxSetCurrent");
  for (int s = 0; s < backward.steps; ++s) {
    while (sem_wait(&backward.go) != 0) {
    }
    for (int k = 0; k < backward.kernels; ++k) {
      check(cu.launch(backward.f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    }
    wait_for(backward.how, backward.event, backward.result);
    sem_post(&backward.done);
  }
  return NULL;
}

/* A loader worker: a batch (one byte) every batch_ms of its own CPU, until
   the main thread closes its end (the worker holds none of it). */
static pid_t fork_worker(const int fds[2], double batch_ms) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  close(fds[0]);
  const int fd = fds[1];
  for (;;) {
    burn_ms(batch_ms);
    if (write(fd, "b", 1) != 1) _exit(0);
  }
}

int main(int argc, char** argv) {
  const char *kind = "sync", *how = "stream", *lookup = "proc", *launcher = "main";
  double startup_ms = 1000, step_ms = 20, batch_ms = 40;
  int steps = 50, kernels = 4, workers = 2, device = 0;
  double alloc_mb = 0, prep_ms = 0, host_ms = 0, second_share = 0;
  int second = -1;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strncmp(a, "--kind=", 7)) kind = a + 7;
    else if (!strncmp(a, "--startup-ms=", 13)) startup_ms = atof(a + 13);
    else if (!strncmp(a, "--steps=", 8)) steps = atoi(a + 8);
    else if (!strncmp(a, "--step-ms=", 10)) step_ms = atof(a + 10);
    else if (!strncmp(a, "--kernels=", 10)) kernels = atoi(a + 10);
    else if (!strncmp(a, "--wait=", 7)) how = a + 7;
    else if (!strncmp(a, "--lookup=", 9)) lookup = a + 9;
    else if (!strncmp(a, "--workers=", 10)) workers = atoi(a + 10);
    else if (!strncmp(a, "--batch-ms=", 11)) batch_ms = atof(a + 11);
    else if (!strncmp(a, "--device=", 9)) device = atoi(a + 9);
    else if (!strncmp(a, "--launcher=", 11)) launcher = a + 11;
    else if (!strncmp(a, "--alloc-mb=", 11)) alloc_mb = atof(a + 11);
    else if (!strncmp(a, "--prep-ms=", 10)) prep_ms = atof(a + 10);
    else if (!strncmp(a, "--host-ms=", 10)) host_ms = atof(a + 10);
    else if (!strncmp(a, "--second=", 9) && sscanf(a + 9, "%d:%lf", &second, &second_share) == 2) {
    }
    else {
      fprintf(stderr, "device_training: unknown argument %s\n", a);
      return 2;
    }
  }
  if (kernels < 1 || steps < 1 || workers < 1) return 2;
  const double t0 = now_ms(CLOCK_MONOTONIC);
  burn_ms(startup_ms);
  load_driver(lookup);
  int dev = 0;
  void *ctx = NULL, *module = NULL, *event = NULL;
  uint64_t result = 0;
  check(cu.init(0), "cuInit");
  check(cu.device_get(&dev, device), "cuDeviceGet");
  check(cu.retain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  check(cu.set_current(ctx), "cuCtxSetCurrent");
  check(cu.module_load(&module, "image"), "cuModuleLoadData");
  check(cu.event_create(&event, 0), "cuEventCreate");
  check(cu.mem_alloc(&result, sizeof(float)), "cuMemAlloc");
  check(cu.alloc_host((void**)&pinned_loss, sizeof(float)), "cuMemAllocHost");
  uint64_t held = 0;
  if (alloc_mb > 0) check(cu.mem_alloc(&held, (size_t)(alloc_mb * 1048576)), "cuMemAlloc");
  if (strcmp(kind, "calls") == 0) {
    void* nothing = kernel(module, 0);
    const double l0 = now_ms(CLOCK_MONOTONIC);
    for (int s = 0; s < steps; ++s) check(cu.launch(nothing, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    const double l1 = now_ms(CLOCK_MONOTONIC);
    for (int s = 0; s < steps; ++s) check(cu.stream_sync(NULL), "cuStreamSynchronize");
    const double l2 = now_ms(CLOCK_MONOTONIC);
    printf("device_training: launch_ns=%.1f wait_ns=%.1f\n", (l1 - l0) * 1e6 / steps, (l2 - l1) * 1e6 / steps);
    return 0;
  }
  const double p0 = now_ms(CLOCK_MONOTONIC);
  const int prep_waits = prep_ms > 0 ? prepare(module, result, prep_ms) : 0;
  const double p1 = now_ms(CLOCK_MONOTONIC);
  void *ctx2 = NULL, *f2 = NULL;
  if (second >= 0) {
    int dev2 = 0;
    void* module2 = NULL;
    check(cu.device_get(&dev2, second), "cuDeviceGet");
    check(cu.retain(&ctx2, dev2), "cuDevicePrimaryCtxRetain");
    check(cu.set_current(ctx2), "cuCtxSetCurrent");
    check(cu.module_load(&module2, "image"), "cuModuleLoadData");
    f2 = kernel(module2, second_share * (strcmp(kind, "launch") == 0 ? 2.0 * kernels : step_ms * 1000.0));
    check(cu.set_current(ctx), "cuCtxSetCurrent");
  }
  const int loader = strcmp(kind, "loader") == 0;
  void* f = kernel(module, strcmp(kind, "launch") == 0 ? 2.0 : loader ? 1000.0 : step_ms * 1000.0 / kernels);
  int pipefd[2] = {-1, -1};
  pid_t pids[64];
  if (loader) {
    if (pipe(pipefd) != 0 || workers > 64) return 1;
    for (int w = 0; w < workers; ++w) pids[w] = fork_worker(pipefd, batch_ms);
    close(pipefd[1]);
  }
  const int both = strcmp(launcher, "both") == 0;
  const int split = both || strcmp(launcher, "split") == 0, on_main = strcmp(launcher, "main") == 0;
  if (!on_main && (loader || (!split && strcmp(launcher, "autograd") != 0))) return 2;
  const int forward = on_main ? kernels : split ? kernels / 2 : 0;
  pthread_t engine;
  if (!on_main) {
    sem_init(&backward.go, 0, 0);
    sem_init(&backward.done, 0, 0);
    backward.ctx = ctx;
    backward.f = f;
    backward.kernels = kernels - forward;
    backward.steps = steps;
    backward.how = how;
    backward.event = event;
    backward.result = result;
    if (pthread_create(&engine, NULL, autograd_thread, NULL) != 0) return 1;
  }
  const double s0 = now_ms(CLOCK_MONOTONIC);
  for (int s = 0; s < steps; ++s) {
    char batch;
    if (loader && read(pipefd[0], &batch, 1) != 1) return 1;
    for (int k = 0; k < (loader ? 1 : forward); ++k) {
      check(cu.launch(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
    }
    if (f2) {
      check(cu.set_current(ctx2), "cuCtxSetCurrent");
      check(cu.launch(f2, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL), "cuLaunchKernel");
      check(cu.set_current(ctx), "cuCtxSetCurrent");
    }
    if (host_ms > 0) work_ms(host_ms);
    if (on_main) {
      wait_for(how, event, result);
    } else {
      if (both) wait_for(how, event, result);
      sem_post(&backward.go);
      while (sem_wait(&backward.done) != 0) {
      }
    }
  }
  const double s1 = now_ms(CLOCK_MONOTONIC);
  if (!on_main) pthread_join(engine, NULL);
  if (loader) {
    close(pipefd[0]);
    for (int w = 0; w < workers; ++w) waitpid(pids[w], NULL, 0);
  }
  printf("device_training: steps=%d steps_ms=%.3f startup_ms=%.3f prep_ms=%.3f prep_waits=%d steps_mono_ms=%.3f "
         "blocked_copies=%ld\n",
         steps, s1 - s0, s0 - t0, p1 - p0, prep_waits, s0, blocked_copies ? blocked_copies() : -1L);
  return 0;
}
