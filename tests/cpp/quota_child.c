/* quota_child: a training step's fixed parallel work, shared dynamically by
 * its OpenMP team, the known answer of `threadburn tune --cpus 1,2`
 * (tests/bench/check_slot.py --case sizes, docs/slot.md):
 *
 *   quota_child [--steps S] [--chunks C] [--chunk-us U]
 *
 * Each of S steps is one parallel loop over C chunks, schedule(dynamic, 1):
 * each chunk spins U us of its thread's own CPU (CLOCK_THREAD_CPUTIME_ID),
 * so a run's work is S x C x U us of CPU however the threads are scheduled,
 * and a thread that a busy core or a spent quota holds back leaves its
 * chunks to the others. Its time is therefore the CPU the process is given:
 * in a slot of one CPU's quota a run takes at least S x C x U us; in a slot
 * of two, a team of two takes about half that on two free CPUs, and about
 * two thirds of it with a third process spinning beside it (the team gets
 * two of the three runnable threads' shares). Prints "steps/s: X" last.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long arg(int argc, char **argv, const char *name, long fallback) {
  for (int i = 1; i + 1 < argc; i++)
    if (strcmp(argv[i], name) == 0) return strtol(argv[i + 1], NULL, 10);
  return fallback;
}

static void spin_cpu_us(long us) {
  double end = now_s(CLOCK_THREAD_CPUTIME_ID) + us * 1e-6;
  volatile unsigned long x = 0;
  while (now_s(CLOCK_THREAD_CPUTIME_ID) < end)
    for (int i = 0; i < 1000; i++) x += (unsigned long)i;
}

int main(int argc, char **argv) {
  for (int i = 1; i < argc; i += 2)
    if ((strcmp(argv[i], "--steps") && strcmp(argv[i], "--chunks") && strcmp(argv[i], "--chunk-us")) ||
        i + 1 >= argc) {
      fprintf(stderr, "quota_child: error: unknown or incomplete argument '%s' (--steps S --chunks C --chunk-us U)\n",
              argv[i]);
      return 2;
    }
  long steps = arg(argc, argv, "--steps", 4), chunks = arg(argc, argv, "--chunks", 100);
  long chunk_us = arg(argc, argv, "--chunk-us", 1000);
  double t0 = now_s(CLOCK_MONOTONIC);
  for (long s = 0; s < steps; s++) {
#pragma omp parallel for schedule(dynamic, 1)
    for (long c = 0; c < chunks; c++) spin_cpu_us(chunk_us);
  }
  double wall = now_s(CLOCK_MONOTONIC) - t0;
  printf("team: %d\nsteps/s: %.4f\n", omp_get_max_threads(), steps / wall);
  return 0;
}
