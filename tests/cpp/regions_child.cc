// Known-answer program for the preload probe: --startup_ms of its main
// thread's CPU first (a program's initialisation, before any region), then
// --steps times (or steps until --seconds have passed), --regions parallel
// regions, then --gap_ms of sleep. Each region's body (--body):
//   each   every thread of the team spins --work_us of its CPU (default)
//   split  the team shares --work_us of CPU: each thread spins its part, so
//          a team of two does a region's work in about half the time (the
//          fixed parallel work of a training step's kernels)
//   sleep  the first thread sleeps --work_us, the others return: the team's
//          size changes nothing but its own cost
//   nap    the team shares --work_us of sleep: each thread sleeps its part, so
//          a team of two is about twice as fast however busy the CPUs are
// --say prints each step's time ("step_ms=X", for tune --metric); --team=N
// names the team in every region (num_threads(N)), as a program that sets
// its own does; --until_file=PATH ends the steps early once PATH exists (a
// test that has seen what it waited for ends the run there).
// Built with -fopenmp against libgomp and NOT linked with omptap: the probe
// must find its regions from outside, through LD_PRELOAD, as in any user
// program; the team is the runtime's (no num_threads clause), so an in-run
// tune may change it (src/probe/inrun.h).
#include <omp.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <unistd.h>

#include "core/clock.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  long steps = 5, regions = 20, gap_ms = 100, work_us = 200, startup_ms = 0, say = 0, team = 0;
  double seconds = 0;
  char body[16] = "each";
  std::string until_file;
  for (int i = 1; i < argc; ++i) {
    if (!std::strncmp(argv[i], "--until_file=", 13) && argv[i][13]) {
      until_file = argv[i] + 13;
      continue;
    }
    if (std::sscanf(argv[i], "--steps=%ld", &steps) == 1) continue;
    if (std::sscanf(argv[i], "--regions=%ld", &regions) == 1) continue;
    if (std::sscanf(argv[i], "--gap_ms=%ld", &gap_ms) == 1) continue;
    if (std::sscanf(argv[i], "--work_us=%ld", &work_us) == 1) continue;
    if (std::sscanf(argv[i], "--startup_ms=%ld", &startup_ms) == 1) continue;
    if (std::sscanf(argv[i], "--seconds=%lf", &seconds) == 1) continue;
    if (std::sscanf(argv[i], "--team=%ld", &team) == 1) continue;
    if (std::sscanf(argv[i], "--body=%15s", body) == 1 &&
        (!std::strcmp(body, "each") || !std::strcmp(body, "split") || !std::strcmp(body, "sleep") ||
         !std::strcmp(body, "nap"))) continue;
    if (!std::strcmp(argv[i], "--say")) {
      say = 1;
      continue;
    }
    std::fprintf(stderr, "regions_child: error: unknown argument '%s' (--steps --regions --gap_ms --work_us "
                 "--startup_ms --seconds --team --body=each|split|sleep|nap --say --until_file)\n", argv[i]);
    return 2;
  }
  const int split = !std::strcmp(body, "split"), sleeps = !std::strcmp(body, "sleep"), naps = !std::strcmp(body, "nap");
  const int64_t start = tb::wall_ns();
  tb::spin_cpu_ns(startup_ms * 1000000);
  const int64_t first_region = tb::wall_ns();
  int64_t in_regions_ns = 0;
  long s = 0;
  for (; seconds > 0 ? tb::wall_ns() - first_region < static_cast<int64_t>(seconds * 1e9) : s < steps; ++s) {
    const int64_t t0 = tb::wall_ns();
    const auto body_of = [&] {
      if (sleeps) {
        if (omp_get_thread_num() == 0) tb::sleep_for_ns(work_us * 1000);
      } else if (naps) {
        tb::sleep_for_ns(work_us * 1000 / omp_get_num_threads());
      } else if (work_us > 0) {
        tb::spin_cpu_ns(split ? work_us * 1000 / omp_get_num_threads() : work_us * 1000);
      }
    };
    for (long r = 0; r < regions; ++r) {
      if (team > 0) {
#pragma omp parallel num_threads(team)
        body_of();
      } else {
#pragma omp parallel
        body_of();
      }
    }
    const int64_t t1 = tb::wall_ns();
    in_regions_ns += t1 - t0;
    tb::sleep_for_ns(gap_ms * 1000000);
    if (say) {
      std::printf("step_ms=%.4f\n", static_cast<double>(tb::wall_ns() - t0) / 1e6);
      std::fflush(stdout);
    }
    if (!until_file.empty() && access(until_file.c_str(), F_OK) == 0) {
      ++s;
      break;
    }
  }
  // The mean wall time of a region, start to join: what an interposer adds to.
  std::printf("regions_child: %ld steps of %ld regions, %d threads, %.1f ns per region\n", s, regions,
              omp_get_max_threads(), static_cast<double>(in_regions_ns) / static_cast<double>(s * regions));
  std::printf("regions_child: startup_ms=%.3f steady_ms=%.3f\n", static_cast<double>(first_region - start) / 1e6,
              static_cast<double>(tb::wall_ns() - first_region) / 1e6);
  return 0;
}
