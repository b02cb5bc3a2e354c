// omptap: sees every OpenMP parallel region that GCC-built code starts through
// the GOMP ABI, and marks the team members as OpenMP workers.
//
// It defines GOMP_parallel, the entry point that libtorch_cpu, libdnnl and
// OpenBLAS (openmp flavour) import (checked with `nm -D --undefined-only`),
// and forwards each call to the next definition in the process, found with
// dlvsym(RTLD_NEXT, "GOMP_parallel", "GOMP_4.0"): libgomp, or LLVM's libomp
// when it is preloaded in front of libgomp. Linked into a program whose
// executable exports the symbol (threadburn_omptap_export() in CMake), or
// into the preload probe, it comes first in symbol lookup, so every region of
// those libraries passes through it. The region body runs in a trampoline
// that marks each team member other than the calling thread as
// ThreadClass::kOmp (core/thread_class.h) the first time it runs one.
//
// Not seen: regions started through other GOMP entry points
// (GOMP_parallel_loop_*, GOMP_parallel_sections, GOMP_teams, the pre-4.0
// GOMP_parallel_start/end pair) and code built by clang against LLVM's native
// ABI (__kmpc_fork_call). None of the libraries above imports them.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace threadburn::omptap {

// One finished region, as the listener sees it.
struct Region {
  int64_t begin_ns = 0;    // CLOCK_MONOTONIC, just before forwarding
  int64_t end_ns = 0;      // just after the runtime returned (the team joined)
  pid_t caller = 0;        // the thread that started it (the team's master)
  int requested = 0;       // num_threads argument (0: the runtime's default)
  int team = 0;            // threads that ran the body (master included)
  int depth = 0;           // 0 outermost; nested regions count from 1
};

class Listener {
 public:
  virtual ~Listener() = default;
  virtual void on_begin(int64_t begin_ns, pid_t caller, int depth) = 0;
  virtual void on_end(const Region& region) = 0;
};

// One listener at a time (null: none). Calls come from the threads that start
// regions, possibly several at once.
void set_listener(Listener* listener);
// Regions that passed through since the process started.
int64_t regions_seen();
// Whether this process's GOMP_parallel is omptap's (false when the program
// was linked without exporting it, or no runtime was found to forward to).
bool installed();

}  // namespace threadburn::omptap
