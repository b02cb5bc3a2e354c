/* host_known: a program whose work per run is fixed (a number of
 * multiply-adds, not a time) and whose OpenMP regions are separated by short
 * sleeps, the known answers of `threadburn tune --copies`
 * (tests/bench/check_host.py, docs/design.md, Host plans):
 *
 *   one copy alone: a team of 2 that spins between regions (libgomp's
 *   default spin, LLVM's 200 ms blocktime) finishes the work in about half
 *   the time one thread needs: the multi-thread plan wins time;
 *   as many copies as cores: every thread of a spinning team holds a core
 *   while it waits (in a sleep between regions, at a region's end for a
 *   sibling another copy pre-empted), so the copies steal from each other;
 *   one thread per copy wastes nothing: the 1-thread plan wins the host's
 *   throughput.
 *
 *   host_known [--iters N] [--regions R] [--work M] [--gap-us G]
 *              [--burn-ms B] [--log-dir D] [--hold-ms H]
 *
 * Each of the N iterations runs R parallel regions that share M million
 * multiply-adds (a static schedule over 64 chunks), then sleeps G us.
 * The copy's index is THREADBURN_COPY (0 without it). --log-dir appends one
 * line to D/copies.log when it ends: its index, pid, start and end on
 * CLOCK_MONOTONIC (the clock tune's launcher notes the release on), the
 * CPUs it may run on, its team size and THREADBURN_PROBE_DIR (which run it
 * was), and writes D/pid.<pid> when it starts (the test kills none of
 * them: it checks that none outlives an interrupted tune); --burn-ms spins
 * B x (index + 1) ms of the main thread's CPU first (each copy its own,
 * known amount); HK_FAIL_COPY=I in the environment makes copy I exit 3
 * with a line on stderr; --hold-ms sleeps H ms before the end. Prints
 * "iterations/s: X" (its own throughput) last.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNKS 64

static double now_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static long arg(int argc, char **argv, const char *name, long fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
  return fallback;
}

static const char *sarg(int argc, char **argv, const char *name) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return argv[i + 1];
  return NULL;
}

int main(int argc, char **argv) {
  double start = now_s(CLOCK_MONOTONIC);
  const long iters = arg(argc, argv, "--iters", 30), regions = arg(argc, argv, "--regions", 2);
  const long work = arg(argc, argv, "--work", 40), gap_us = arg(argc, argv, "--gap-us", 2000);
  const long burn_ms = arg(argc, argv, "--burn-ms", 0);
  const char *fail_env = getenv("HK_FAIL_COPY");
  const long fail_copy = fail_env ? strtol(fail_env, NULL, 10) : -1;
  const long hold_ms = arg(argc, argv, "--hold-ms", 0);
  const char *copy_env = getenv("THREADBURN_COPY");
  const long copy = copy_env ? strtol(copy_env, NULL, 10) : 0;
  if (iters < 1 || regions < 1 || work < 1 || gap_us < 0) {
    fprintf(stderr, "host_known: error: need --iters, --regions, --work >= 1 and --gap-us >= 0\n");
    return 2;
  }
  const char *log_dir = sarg(argc, argv, "--log-dir");
  if (log_dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/pid.%d", log_dir, (int)getpid());
    FILE *f = fopen(path, "w");
    if (f) fclose(f);
  }
  if (copy == fail_copy) {
    fprintf(stderr, "host_known: starting\n");
    fprintf(stderr, "host_known: copy %ld fails on purpose\n", copy);
    return 3;
  }
  if (burn_ms > 0) {  // the main thread's own CPU, (index + 1) x burn_ms of it
    double t0 = now_s(CLOCK_THREAD_CPUTIME_ID), until = t0 + burn_ms * (copy + 1) / 1000.0;
    volatile unsigned long x = 0;
    while (now_s(CLOCK_THREAD_CPUTIME_ID) < until) x++;
  }
  // M million multiply-adds per iteration, split over the regions and 64 chunks.
  const long per_chunk = work * 1000000L / regions / CHUNKS;
  double acc[CHUNKS];
  for (int c = 0; c < CHUNKS; c++) acc[c] = 1.0 + c * 1e-9;
  double t0 = now_s(CLOCK_MONOTONIC);
  for (long it = 0; it < iters; it++) {
    for (long r = 0; r < regions; r++) {
#pragma omp parallel for schedule(static)
      for (int c = 0; c < CHUNKS; c++) {
        double a = acc[c];
        for (long k = 0; k < per_chunk; k++) a = a * 0.999999999 + 1e-9;
        acc[c] = a;
      }
    }
    if (gap_us) sleep_us(gap_us);
  }
  double elapsed = now_s(CLOCK_MONOTONIC) - t0;
  double sum = 0;
  for (int c = 0; c < CHUNKS; c++) sum += acc[c];
  if (hold_ms > 0) sleep_us(hold_ms * 1000);
  if (log_dir) {  // one line, one write (O_APPEND): the copies of a run append side by side
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    char line[8192], cpus[2048] = "";
    for (int c = 0, n = 0; c < CPU_SETSIZE && n < (int)sizeof cpus - 8; c++)
      if (CPU_ISSET(c, &set)) n += snprintf(cpus + n, sizeof cpus - n, "%s%d", n ? "," : "", c);
    const char *probe_dir = getenv("THREADBURN_PROBE_DIR");
    int len = snprintf(line, sizeof line, "copy=%ld pid=%d start=%.6f end=%.6f cpus=%s threads=%d dir=%s\n", copy,
                       (int)getpid(), start, now_s(CLOCK_MONOTONIC), cpus, omp_get_max_threads(),
                       probe_dir ? probe_dir : "-");
    char path[4096];
    snprintf(path, sizeof path, "%s/copies.log", log_dir);
    FILE *f = fopen(path, "a");
    if (f) {
      fwrite(line, 1, (size_t)len, f);
      fclose(f);
    }
  }
  printf("checksum %.3f\niterations/s: %.4f\n", sum, iters / elapsed);
  return 0;
}
