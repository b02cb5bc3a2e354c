// omptap: sees every OpenMP parallel region (and host teams region) that a
// program starts, through either ABI, and marks the team members as OpenMP
// workers.
//
// It defines every entry point that starts a team:
//  - libgomp's ABI (GCC-built code: libtorch_cpu, libdnnl, OpenBLAS-openmp,
//    your own -fopenmp code): GOMP_parallel, GOMP_parallel_reductions,
//    GOMP_parallel_sections, GOMP_parallel_loop_{static,dynamic,guided,runtime,
//    nonmonotonic_*,maybe_nonmonotonic_runtime}, the pre-4.0 pairs
//    GOMP_parallel{,_sections,_loop_*}_start + GOMP_parallel_end, and
//    GOMP_teams_reg (host teams);
//  - LLVM/Intel's ABI (clang-built code, MKL): __kmpc_fork_call and
//    __kmpc_fork_teams;
// and forwards each call to the next definition in the process
// (dlvsym(RTLD_NEXT, name, version)): libgomp (or a renamed copy of it, e.g.
// a pip wheel's libgomp-<hash>.so.1), or LLVM's libomp when it is preloaded
// in front of libgomp or linked by clang. Linked into a program whose
// executable exports GOMP_parallel (threadburn_use_omptap() in CMake), or
// into the preload probe (with the symbol versions the runtimes export:
// src/probe/exports.map), it comes first in symbol lookup.
//
// Each region's body runs in a trampoline that counts the team and marks each
// member other than the calling thread as ThreadClass::kOmp
// (core/thread_class.h) the first time it runs one. __kmpc_fork_call is
// variadic: the trampoline is handed to the runtime as a one-argument
// microtask whose argument is a per-region record holding the original
// microtask and its arguments, and calls the original with them. A team the
// program names under LLVM's ABI reaches __kmpc_fork_call as a call to
// __kmpc_push_num_threads just before it (clang's num_threads clause): omptap
// defines that too, so such a region counts as named (Region::requested) and
// keeps its team.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace threadburn::omptap {

// The entry point that started a region.
enum class Entry : int {
  kParallel,
  kParallelReductions,
  kParallelSections,
  kLoopStatic,
  kLoopDynamic,
  kLoopGuided,
  kLoopRuntime,
  kLoopNonmonotonicDynamic,
  kLoopNonmonotonicGuided,
  kLoopNonmonotonicRuntime,
  kLoopMaybeNonmonotonicRuntime,
  kParallelStart,          // GOMP_parallel_start ... GOMP_parallel_end
  kSectionsStart,          // GOMP_parallel_sections_start ... GOMP_parallel_end
  kLoopStaticStart,        // GOMP_parallel_loop_*_start ... GOMP_parallel_end
  kLoopDynamicStart,
  kLoopGuidedStart,
  kLoopRuntimeStart,
  kTeamsReg,               // GOMP_teams_reg: host teams (team = the teams)
  kKmpcForkCall,           // __kmpc_fork_call
  kKmpcForkTeams,          // __kmpc_fork_teams (team = the teams)
};
constexpr int kEntries = static_cast<int>(Entry::kKmpcForkTeams) + 1;
// The symbol's name, e.g. "GOMP_parallel_loop_dynamic".
const char* entry_name(Entry entry);

// One finished region, as the listener sees it.
struct Region {
  int64_t begin_ns = 0;    // CLOCK_MONOTONIC, just before forwarding
  int64_t end_ns = 0;      // just after the runtime returned (the team joined)
  pid_t caller = 0;        // the thread that started it (the team's master)
  int requested = 0;       // num_threads (num_teams) argument, or __kmpc_push_num_threads before a fork (0: the runtime's default)
  int team = 0;            // threads that ran the body (master included)
  int depth = 0;           // 0 outermost; nested regions count from 1
  Entry entry = Entry::kParallel;
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
// Every outermost parallel region (not host teams): the hook is called on the
// forking thread just before the region starts, with the team the program
// asked for (0: the runtime's default), and returns the team to ask the
// runtime for (threadburn tune --in-run: src/probe/inrun.h; it keeps a team
// the program named, and may change the forking thread's runtime settings).
using TeamHook = unsigned (*)(unsigned requested);
void set_team_hook(TeamHook hook);
// The calling thread's region depth: 0 outside any region omptap saw, 1 in an
// outermost region's body (its master and its workers alike).
int depth();
// The runtime's own omp_get_max_threads() for the calling thread (what the
// program would be told without the probe); 0 in a process without OpenMP.
int runtime_max_threads();
// Regions that passed through since the process started (nested ones included).
int64_t regions_seen();
// Whether this process's GOMP_parallel is omptap's (false when the program
// was linked without exporting it, or no runtime was found to forward to).
bool installed();
// The most arguments a __kmpc_fork_call / __kmpc_fork_teams microtask may
// take through omptap (clang passes one per captured variable).
constexpr int kMaxMicrotaskArgs = 64;

}  // namespace threadburn::omptap
