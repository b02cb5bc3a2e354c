// In-run trials (threadburn tune --in-run, docs/probe.md "In-run trials"):
// settings a running program can change, switched by the probe where each
// acts, while threadburn alternates them in blocks and reads each block's
// progress and CPU. One mechanism every in-run setting plugs into:
//   team size      the team of an outermost region the program leaves to the
//                  runtime (omptap's team hook: GOMP_* num_threads,
//                  __kmpc_push_num_threads), both runtimes
//   blocktime      LLVM's kmp_set_blocktime on the forking thread, before its
//                  next region (restored to its own when the request ends)
//   CUDA policy    cuCtxSetFlags on the waiting thread's current context, just
//                  before its next wait (CUDA 12.1+; restored likewise); the
//                  result of the call is published: whether the next wait
//                  honours it is the device check's to show
// The control block is a file threadburn creates and names in
// THREADBURN_INRUN; the probe of every process that reaches its steady
// phase (its first device work or OpenMP region, or its first
// omp_get_max_threads() asked outside a region: where a program at one
// thread decides not to fork) takes a slot of it (the
// first also owns the top-level snapshot), so a wrapper such as `sh -c` never
// does, and the ranks of a job change together; a forked child that did not
// exec runs no probe of its own and is not steered. Its layout is described in describe.json
// ("inrun": sizes and offsets), the one place python/threadburn reads it from.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "core/burn.h"
#include "core/json.h"

namespace threadburn::probe::inrun {

constexpr int64_t kMagic = 0x4e5552494e425454;  // "TTBNIRUN" little end first
constexpr int64_t kVersion = 2;
constexpr int kMaxSettings = 32;
constexpr int kMaxProcs = 16;  // processes of one job steered together
constexpr const char* kVariable = "THREADBURN_INRUN";

// One in-run setting; each part -1 where it leaves that knob alone.
struct Setting {
  int64_t team;          // the team of an outermost region that leaves it to the runtime
  int64_t blocktime_ms;  // LLVM's blocktime of the forking thread
  int64_t cuda_flags;    // the context's host wait policy (CU_CTX_SCHED_* bits)
};

// One steered process's own figures, written by that process's probe alone
// (its sampler's thread; a seqlock of its own: odd while written).
struct Proc {
  int64_t pid;         // 0: a free slot
  int64_t seq;
  int64_t sample_ns;   // CLOCK_MONOTONIC of the figures below
  int64_t cpu_ns;      // every thread's CPU (the sampler's not) and the forked children's, so far
  int64_t regions;     // outermost OpenMP regions ended so far
  int64_t applied;     // the setting in force in this process (-1: the program's own; -2: none yet),
  int64_t applied_ns;  // ... first in effect then (the knob's own point: inrun.cc, note_applied)
  int64_t why;         // what began its steady phase: a Why
};

// The file, as both sides map it (every field 8 bytes, little-endian).
struct Control {
  int64_t magic;
  int64_t version;
  int64_t owner_pid;     // the process that took it; 0: none yet
  int64_t n_settings;
  Setting settings[kMaxSettings];
  int64_t request;       // threadburn: the setting asked from now on (-1: the program's own)
  // The owner's snapshot, at every sample of its sampler (a seqlock: odd while written).
  int64_t seq;
  int64_t sample_ns;     // CLOCK_MONOTONIC of the snapshot
  int64_t cpu_ns;        // every thread's CPU (the sampler's not) and the forked children's, so far
  int64_t regions;       // outermost OpenMP regions ended so far, and when the last one ended
  int64_t region_end_ns;
  int64_t waits;         // the CUDA driver's waits ended so far (every thread), and when the last did
  int64_t wait_end_ns;
  int64_t launches;      // launches so far, and when the last one ended
  int64_t launch_end_ns;
  int64_t applied;       // the setting in force, first applied at applied_ns (a region's start, a wait)
  int64_t applied_ns;
  int64_t steady_ns;     // when the steady phase began (the take)
  int64_t runtime;       // the OpenMP runtime serving regions: 0 none or unknown, 1 libgomp, 2 LLVM
  int64_t team_seen;     // the largest team of the program's own regions that leave it to the runtime
  int64_t free_regions;  // regions that leave their team to the runtime (the team hook may change it)
  int64_t cuda_rc;       // the last cuCtxSetFlags result (-1: none called)
  int64_t ended;         // 1 once the probe has reported (the program is ending)
  // Version 2: OpenMP's promise (a region the program leaves to the runtime gets at most the
  // team omp_get_max_threads() told its forking thread) and every process of a job.
  int64_t ceiling;       // threadburn: the largest team a setting may give (0: none)
  int64_t asks;          // omp_get_max_threads() asked outside regions by the steered processes
  int64_t own_team;      // the runtime's own answer (the program's team) at the last ask or region
  int64_t held_back;     // regions of a team block given another team: their thread was told another
  int64_t n_procs;       // slots of procs taken (the owner first)
  int64_t refused;       // processes that reached their steady phase with every slot taken: not steered
  Proc procs[kMaxProcs];
};

// What began a process's steady phase (Proc::why).
enum Why : int64_t { kRegion = 1, kDeviceWork = 2, kAsk = 3 };

// Maps THREADBURN_INRUN when set (at the probe's start); false without it.
bool open_from_environment();
// The process reached its steady phase at t_ns: takes the control block
// when no process has (its hooks act from now on).
void take(int64_t t_ns, Why why);
// Publishes the sampler's sample (the sampler's thread).
void publish(const BurnSample& sample, int64_t regions, int64_t region_end_ns);
// An outermost region ended: its team, and whether the program asked for
// one (num_threads); team_seen and free_regions count those that did not.
void saw_region(int team, int requested);
// The program is ending.
void end();

// OpenMP's promise, kept while steering: with dyn-var false a region the
// program leaves to the runtime gets exactly the omp_get_max_threads() its
// forking thread was told. answer() is what the program is told when it asks
// outside regions, given the runtime's own (`own`): in a steered process the
// block's team under a team setting (at most the ceiling threadburn wrote),
// else own; `own` unchanged elsewhere. team_hook() gives each region the
// program leaves to the runtime exactly its thread's last answer (a thread
// never told: the process's last answer; none at all: the block's team), so a
// block's team reaches a program that asks through its next answer, and one
// that never asks directly. echo() says whether the program's
// omp_set_num_threads(n) only sets what its thread was just told (a library
// that writes every answer back, as OpenBLAS does): kept from the runtime,
// so that the program's own team stays its own.
int answer(int own);
bool echo(int n);
// omptap's team hook (a region's team: `requested` when the program named
// one, kept; else as answer() says) and driver_calls' before-wait hook.
unsigned team_hook(unsigned requested);
void before_wait();

// describe.json's "inrun": magic, version, sizes and each field's offset.
void describe(JsonWriter* json);

}  // namespace threadburn::probe::inrun
