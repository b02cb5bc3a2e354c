/* Known-answer program for OpenMP's promise under an in-run tune (src/probe/inrun.h,
 * answer() and team_hook()): a region the program leaves to the runtime gets exactly the
 * omp_get_max_threads() its forking thread was told, and programs rely on it. It keeps
 * per-thread slots sized by that answer, followed by guard slots holding a canary, and
 * writes its slot from every team member, as PyTorch's parallel_reduce and much numerical
 * code do:
 *   --sizing=start  the slots are sized once, before the first region (a program that asks
 *                   at start: every later region must get that team, whatever the block)
 *   --sizing=each   sized again before every region (asks before each fork, as PyTorch's
 *                   at::parallel_for does: runs as if started with the block's team)
 * Every --named'th region names its team, num_threads(--team_named): it must get exactly
 * that team (a named team is the program's own; under clang this is __kmpc_push_num_threads).
 * Each region's team shares --work_us of sleep (each member sleeps its part); --forkers=N
 * starts N-1 more threads that fork empty regions the runtime sizes, at once (their count
 * joins free=). Runs
 * --seconds, printing "step_ms=X" every 20 regions, then one line
 *   promise: regions=R free=F named=N max_team=M first_size=S violations=V
 * (S: what omp_get_max_threads() said before the first region)
 * and exits 3 at the first region where a member's thread number was beyond its slots,
 * a guard was overwritten, a region it left to the runtime got another team than it was
 * told (more overruns slots; fewer hangs a library whose members wait for each other, as
 * OpenBLAS's level-3 threads do), or a named region got another team; 0 otherwise. Built by GCC (libgomp's
 * GOMP_* ABI) and by clang (LLVM's __kmpc_* ABI) and not linked with omptap: the probe is
 * preloaded, as into any program. */
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GUARDS 8
#define CANARY 0x5eedf00dcafe1234ULL

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void nap_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

static unsigned long long* slots_for(int n, unsigned long long* old) {
  free(old);
  unsigned long long* s = calloc((size_t)(n + GUARDS), sizeof *s);
  if (!s) exit(4);
  for (int g = 0; g < GUARDS; ++g) s[n + g] = CANARY;
  return s;
}

/* --forkers: more threads forking regions the runtime sizes, at once (their count). */
static double g_end;
static long g_forked, g_touched;

static void* forker(void* unused) {
  (void)unused;
  long n = 0;
  while (now_s() < g_end) {
#pragma omp parallel
    __atomic_fetch_add(&g_touched, 1, __ATOMIC_RELAXED);
    ++n;
  }
  __atomic_fetch_add(&g_forked, n, __ATOMIC_RELAXED);
  return NULL;
}

int main(int argc, char** argv) {
  double seconds = 3;
  long forkers = 1;
  long work_us = 2000, named = 0, team_named = 2;
  int each = 0;
  for (int i = 1; i < argc; ++i) {
    if (sscanf(argv[i], "--seconds=%lf", &seconds) == 1) continue;
    if (sscanf(argv[i], "--work_us=%ld", &work_us) == 1) continue;
    if (sscanf(argv[i], "--named=%ld", &named) == 1) continue;
    if (sscanf(argv[i], "--team_named=%ld", &team_named) == 1) continue;
    if (sscanf(argv[i], "--forkers=%ld", &forkers) == 1 && forkers >= 1 && forkers <= 16) continue;
    if (!strcmp(argv[i], "--sizing=start") || !strcmp(argv[i], "--sizing=each")) {
      each = !strcmp(argv[i], "--sizing=each");
      continue;
    }
    fprintf(stderr, "promise_child: unknown argument '%s' (--seconds --work_us --named --team_named "
            "--sizing=start|each --forkers=1..16)\n", argv[i]);
    return 2;
  }
  int size = omp_get_max_threads();
  const int first_size = size;
  unsigned long long* slots = slots_for(size, NULL);
  long regions = 0, free_regions = 0, named_regions = 0, violations = 0;
  int max_team = 0;
  const double end = now_s() + seconds;
  double step0 = now_s();
  pthread_t extra[16];
  g_end = end;
  for (long k = 1; k < forkers; ++k) pthread_create(&extra[k], NULL, forker, NULL);
  while (now_s() < end) {
    if (each) {
      size = omp_get_max_threads();
      slots = slots_for(size, slots);
    }
    const int is_named = named > 0 && regions % named == named - 1;
    int team = 0, bad = 0;
    if (is_named) {
#pragma omp parallel num_threads(team_named)
      {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
#pragma omp single
        team = n;
        nap_us(work_us / n);
        (void)t;
      }
      if (team != team_named) ++violations;
      if (violations) break;
      ++named_regions;
    } else {
#pragma omp parallel
      {
        const int t = omp_get_thread_num(), n = omp_get_num_threads();
#pragma omp single
        team = n;
        if (t < size) {
          slots[t] += 1;
        } else {
#pragma omp atomic
          ++bad;
        }
        nap_us(work_us / n);
      }
      for (int g = 0; g < GUARDS; ++g) bad += slots[size + g] != CANARY;
      bad += team != size;  /* exactly what it was told: fewer hangs a library whose members wait for each other */
      violations += bad;
      ++free_regions;
      if (violations) break;
    }
    if (team > max_team) max_team = team;
    if (++regions % 20 == 0) {
      const double t = now_s();
      printf("step_ms=%.3f\n", (t - step0) * 1000);
      fflush(stdout);
      step0 = t;
    }
  }
  for (long k = 1; k < forkers; ++k) pthread_join(extra[k], NULL);
  free_regions += g_forked;
  regions += g_forked;
  free(slots);
  printf("promise: regions=%ld free=%ld named=%ld max_team=%d first_size=%d violations=%ld\n", regions,
         free_regions, named_regions, max_team, first_size, violations);
  return violations ? 3 : 0;
}
