// Known-answer program for the preload probe: --startup_ms of its main
// thread's CPU first (a program's initialisation, before any region), then
// --steps times, --regions parallel regions of --work_us of CPU each, then
// --gap_ms of sleep. Built with
// -fopenmp against libgomp and NOT linked with omptap: the probe must find its
// regions from outside, through LD_PRELOAD, as in any user program.
#include <omp.h>

#include <cstdio>
#include <cstdlib>

#include "core/clock.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  long steps = 5, regions = 20, gap_ms = 100, work_us = 200, startup_ms = 0;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--steps=%ld", &steps) == 1) continue;
    if (std::sscanf(argv[i], "--regions=%ld", &regions) == 1) continue;
    if (std::sscanf(argv[i], "--gap_ms=%ld", &gap_ms) == 1) continue;
    if (std::sscanf(argv[i], "--work_us=%ld", &work_us) == 1) continue;
    if (std::sscanf(argv[i], "--startup_ms=%ld", &startup_ms) == 1) continue;
    std::fprintf(stderr, "regions_child: error: unknown argument '%s' (--steps --regions --gap_ms --work_us --startup_ms)\n",
                 argv[i]);
    return 2;
  }
  const int64_t start = tb::wall_ns();
  tb::spin_cpu_ns(startup_ms * 1000000);
  const int64_t first_region = tb::wall_ns();
  int64_t in_regions_ns = 0;
  for (long s = 0; s < steps; ++s) {
    const int64_t t0 = tb::wall_ns();
    for (long r = 0; r < regions; ++r) {
#pragma omp parallel
      if (work_us > 0) tb::spin_cpu_ns(work_us * 1000);
    }
    in_regions_ns += tb::wall_ns() - t0;
    tb::sleep_for_ns(gap_ms * 1000000);
  }
  // The mean wall time of a region, start to join: what an interposer adds to.
  std::printf("regions_child: %ld steps of %ld regions, %d threads, %.1f ns per region\n", steps, regions,
              omp_get_max_threads(), static_cast<double>(in_regions_ns) / static_cast<double>(steps * regions));
  std::printf("regions_child: startup_ms=%.3f steady_ms=%.3f\n", static_cast<double>(first_region - start) / 1e6,
              static_cast<double>(tb::wall_ns() - first_region) / 1e6);
  return 0;
}
