/* Known-answer program for the preload probe's view of OpenMP: a known number
   of regions through every entry point that starts a team, each with a known
   team, built twice (tests/cpp/CMakeLists.txt): by GCC against libgomp's ABI
   (GOMP_*) and by clang against LLVM's (__kmpc_fork_*). Not linked with omptap:
   the probe must find the regions from outside, through LD_PRELOAD.

     omp_entry_points [--repeat=R]      runs every kind R times (default 20) and
                                        prints, per entry point, what the probe
                                        must see: "expect ENTRY regions=N nested=K teams=T:N[,T:N]"
     omp_entry_points --bench=KIND --regions=N
                                        N empty 2-thread regions of one kind, then
                                        "KIND: N regions, X ns per region"

   Each region checks its own team (omp_get_num_threads) and the program exits 1
   when a runtime gave another one: the expected teams are facts of the run.
   Entry points that GCC 12 no longer emits (GOMP_parallel_loop_static, the
   pre-4.0 *_start / GOMP_parallel_end pairs) are called through the ABI
   directly, as code built by older GCC does. */
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int g_bad = 0;
static void team_is(int want) {
  if (omp_get_num_threads() != want) {
#pragma omp atomic write
    g_bad = omp_get_num_threads() * 1000 + want;
  }
}

static long g_sum = 0;
static void add(long v) {
#pragma omp atomic
  g_sum += v;
}

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

#define N_ITER 64

#ifndef __clang__
/* The libgomp ABI, called directly where GCC 12 emits something else. */
#include <stdbool.h>
typedef void (*body_fn)(void*);
void GOMP_parallel_loop_static(body_fn, void*, unsigned, long, long, long, long, unsigned);
void GOMP_parallel_start(body_fn, void*, unsigned);
void GOMP_parallel_end(void);
void GOMP_parallel_sections_start(body_fn, void*, unsigned, unsigned);
void GOMP_parallel_loop_static_start(body_fn, void*, unsigned, long, long, long, long);
void GOMP_parallel_loop_dynamic_start(body_fn, void*, unsigned, long, long, long, long);
void GOMP_parallel_loop_guided_start(body_fn, void*, unsigned, long, long, long, long);
void GOMP_parallel_loop_runtime_start(body_fn, void*, unsigned, long, long, long);
bool GOMP_loop_static_next(long*, long*);
bool GOMP_loop_dynamic_next(long*, long*);
bool GOMP_loop_guided_next(long*, long*);
bool GOMP_loop_runtime_next(long*, long*);
void GOMP_loop_end_nowait(void);
unsigned GOMP_sections_next(void);
void GOMP_sections_end_nowait(void);

#define LOOP_BODY(name, next)                    \
  static void name(void* team) {                 \
    team_is(*(int*)team);                        \
    long s, e;                                   \
    while (next(&s, &e))                         \
      for (long i = s; i < e; ++i) add(i);       \
    GOMP_loop_end_nowait();                      \
  }
LOOP_BODY(static_body, GOMP_loop_static_next)
LOOP_BODY(dynamic_body, GOMP_loop_dynamic_next)
LOOP_BODY(guided_body, GOMP_loop_guided_next)
LOOP_BODY(runtime_body, GOMP_loop_runtime_next)
static void plain_body(void* team) { team_is(*(int*)team); add(1); }
static void sections_body(void* team) {
  team_is(*(int*)team);
  for (unsigned s = GOMP_sections_next(); s != 0; s = GOMP_sections_next()) add(s);
  GOMP_sections_end_nowait();
}
#endif

/* One region of a kind; returns 0 when the kind is unknown to this build. */
static int one(const char* kind, int team) {
  if (!strcmp(kind, "parallel")) {
#pragma omp parallel num_threads(team)
    team_is(team);
    return 1;
  }
  if (!strcmp(kind, "loop_static")) {  /* GCC: inlined into GOMP_parallel; clang: __kmpc_fork_call */
#pragma omp parallel for schedule(static) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "sections")) {
#pragma omp parallel sections num_threads(team)
    {
#pragma omp section
      { team_is(team); add(1); }
#pragma omp section
      { team_is(team); add(2); }
    }
    return 1;
  }
  if (!strcmp(kind, "dynamic")) {  /* GCC 12: GOMP_parallel_loop_nonmonotonic_dynamic */
#pragma omp parallel for schedule(dynamic) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "nested")) {
    omp_set_max_active_levels(2);
#pragma omp parallel num_threads(team)
    {
      team_is(team);
#pragma omp parallel num_threads(team)
      team_is(team);
    }
    return 1;
  }
#ifndef __clang__
  if (!strcmp(kind, "reductions")) {
    long s = 0;
#pragma omp parallel reduction(task, + : s) num_threads(team)
    { team_is(team); s += 1; }
    add(s);
    return 1;
  }
  if (!strcmp(kind, "monotonic_dynamic")) {
#pragma omp parallel for schedule(monotonic : dynamic) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "monotonic_guided")) {
#pragma omp parallel for schedule(monotonic : guided) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "monotonic_runtime")) {
#pragma omp parallel for schedule(monotonic : runtime) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "guided")) {
#pragma omp parallel for schedule(guided) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "nonmonotonic_runtime")) {
#pragma omp parallel for schedule(nonmonotonic : runtime) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "runtime")) {
#pragma omp parallel for schedule(runtime) num_threads(team)
    for (int i = 0; i < N_ITER; ++i) { team_is(team); add(i); }
    return 1;
  }
  if (!strcmp(kind, "teams")) {
#pragma omp teams num_teams(team)
    team_is(1);
    return 1;
  }
  if (!strcmp(kind, "abi_loop_static")) {
    GOMP_parallel_loop_static(static_body, &team, (unsigned)team, 0, N_ITER, 1, 4, 0);
    return 1;
  }
  if (!strcmp(kind, "abi_start")) {
    GOMP_parallel_start(plain_body, &team, (unsigned)team);
    plain_body(&team);
    GOMP_parallel_end();
    return 1;
  }
  if (!strcmp(kind, "abi_sections_start")) {
    GOMP_parallel_sections_start(sections_body, &team, (unsigned)team, 3);
    sections_body(&team);
    GOMP_parallel_end();
    return 1;
  }
#define ABI_LOOP_START(k, body, ...)                                      \
  if (!strcmp(kind, "abi_loop_" #k "_start")) {                           \
    GOMP_parallel_loop_##k##_start(body, &team, (unsigned)team, __VA_ARGS__); \
    body(&team);                                                          \
    GOMP_parallel_end();                                                  \
    return 1;                                                             \
  }
  ABI_LOOP_START(static, static_body, 0, N_ITER, 1, 4)
  ABI_LOOP_START(dynamic, dynamic_body, 0, N_ITER, 1, 4)
  ABI_LOOP_START(guided, guided_body, 0, N_ITER, 1, 4)
  ABI_LOOP_START(runtime, runtime_body, 0, N_ITER, 1)
#else
  if (!strcmp(kind, "teams")) {
#pragma omp teams num_teams(team) thread_limit(1)
    team_is(1);
    return 1;
  }
  if (!strcmp(kind, "many_args")) {
    /* 70 shared variables: a microtask of 70+ arguments (past omptap's table
       of invokers: through the runtime's own). Their sum checks each one. */
#define X(n) long n = __LINE__;
#define X10(p) X(p##0) X(p##1) X(p##2) X(p##3) X(p##4) X(p##5) X(p##6) X(p##7) X(p##8) X(p##9)
    X10(a) X10(b) X10(c) X10(d) X10(e) X10(f) X10(g)
#undef X
#define X(n) +n
    const long want = 0 X10(a) X10(b) X10(c) X10(d) X10(e) X10(f) X10(g);
#pragma omp parallel num_threads(team)
    {
      team_is(team);
      if ((0 X10(a) X10(b) X10(c) X10(d) X10(e) X10(f) X10(g)) != want) {
#pragma omp atomic write
        g_bad = -1;
      }
    }
#undef X
#undef X10
    return 1;
  }
#endif
  return 0;
}

struct Plan {
  const char* kind;
  const char* entry;  /* what the probe must see */
  int team;
};

#ifndef __clang__
static const struct Plan kPlan[] = {
    {"parallel", "GOMP_parallel", 2},
    {"loop_static", "GOMP_parallel", 3},
    {"reductions", "GOMP_parallel_reductions", 2},
    {"sections", "GOMP_parallel_sections", 2},
    {"abi_loop_static", "GOMP_parallel_loop_static", 2},
    {"monotonic_dynamic", "GOMP_parallel_loop_dynamic", 2},
    {"monotonic_guided", "GOMP_parallel_loop_guided", 3},
    {"monotonic_runtime", "GOMP_parallel_loop_runtime", 2},
    {"dynamic", "GOMP_parallel_loop_nonmonotonic_dynamic", 2},
    {"guided", "GOMP_parallel_loop_nonmonotonic_guided", 2},
    {"nonmonotonic_runtime", "GOMP_parallel_loop_nonmonotonic_runtime", 2},
    {"runtime", "GOMP_parallel_loop_maybe_nonmonotonic_runtime", 3},
    {"abi_start", "GOMP_parallel_start", 2},
    {"abi_sections_start", "GOMP_parallel_sections_start", 2},
    {"abi_loop_static_start", "GOMP_parallel_loop_static_start", 2},
    {"abi_loop_dynamic_start", "GOMP_parallel_loop_dynamic_start", 2},
    {"abi_loop_guided_start", "GOMP_parallel_loop_guided_start", 3},
    {"abi_loop_runtime_start", "GOMP_parallel_loop_runtime_start", 2},
    {"teams", "GOMP_teams_reg", 2},
    {"nested", "GOMP_parallel", 2},  /* + team nested regions inside each */
};
#else
static const struct Plan kPlan[] = {
    {"parallel", "__kmpc_fork_call", 2},
    {"loop_static", "__kmpc_fork_call", 3},
    {"sections", "__kmpc_fork_call", 2},
    {"dynamic", "__kmpc_fork_call", 2},
    {"many_args", "__kmpc_fork_call", 2},
    {"teams", "__kmpc_fork_teams", 2},
    {"nested", "__kmpc_fork_call", 2},
};
#endif
#define PLAN_N ((int)(sizeof kPlan / sizeof kPlan[0]))

int main(int argc, char** argv) {
  long repeat = 20, regions = 0;
  const char* bench = NULL;
  for (int i = 1; i < argc; ++i) {
    if (sscanf(argv[i], "--repeat=%ld", &repeat) == 1) continue;
    if (sscanf(argv[i], "--regions=%ld", &regions) == 1) continue;
    if (!strncmp(argv[i], "--bench=", 8)) { bench = argv[i] + 8; continue; }
    fprintf(stderr, "omp_entry_points: error: unknown argument '%s' (--repeat=R, --bench=KIND --regions=N)\n", argv[i]);
    return 2;
  }
  if (bench) {
    if (!one(bench, 2)) {
      fprintf(stderr, "omp_entry_points: error: unknown kind '%s' in this build\n", bench);
      return 2;
    }
    const int64_t t0 = now_ns();
    for (long r = 0; r < regions; ++r) one(bench, 2);
    const int64_t t1 = now_ns();
    printf("%s: %ld regions, %.1f ns per region\n", bench, regions, regions ? (double)(t1 - t0) / regions : 0.0);
    return g_bad ? 1 : 0;
  }
  for (int p = 0; p < PLAN_N; ++p)
    for (long r = 0; r < repeat; ++r) one(kPlan[p].kind, kPlan[p].team);
  if (g_bad) {
    fprintf(stderr, "omp_entry_points: a region ran with another team than asked (%d)\n", g_bad);
    return 1;
  }
  /* What the probe must see, per entry point: outermost regions by team, and nested ones. */
  for (int p = 0; p < PLAN_N; ++p) {
    int first = 1;
    for (int q = 0; q < p; ++q) first &= strcmp(kPlan[q].entry, kPlan[p].entry) != 0;
    if (!first) continue;
    long n = 0, nested = 0, by_team[8] = {0};
    for (int q = p; q < PLAN_N; ++q) {
      if (strcmp(kPlan[q].entry, kPlan[p].entry)) continue;
      n += repeat;
      by_team[kPlan[q].team] += repeat;
      if (!strcmp(kPlan[q].kind, "nested")) nested += repeat * kPlan[q].team;
    }
    printf("expect %s regions=%ld nested=%ld teams=", kPlan[p].entry, n, nested);
    const char* sep = "";
    for (int t = 0; t < 8; ++t)
      if (by_team[t]) { printf("%s%d:%ld", sep, t, by_team[t]); sep = ","; }
    printf("\n");
  }
  printf("omp_entry_points: sum %ld\n", g_sum);
  return 0;
}
