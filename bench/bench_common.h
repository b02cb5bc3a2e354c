// What both benchmark programs share (no torch): the step loop that brackets
// each step with the probe and sleeps the gap, the counters of DESIGN.md, the
// flags common to both, timeline and per-thread files, and a summary table.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/cli.h"
#include "runtime/runtime.h"

namespace threadburn::bench {

struct Phases {
  double data_ms = 0, forward_ms = 0, backward_ms = 0, optim_ms = 0;
  double sync_ms = 0, sync_cpu_ms = 0, gpu_ms = 0;
};

struct LoopOptions {
  int64_t gap_ms = 0;
  int64_t warmup = 2;
  double samples_per_step = 0;      // batch size; 0: no samples_per_s counter
  bool report_phases = false;       // train steps have phases; optimizer steps don't
  bool report_gpu = false;          // CUDA steps: GPU time from events
  std::string timeline_dir;         // write <name>.timeline.csv here when set
  bool timeline_threads = false;    // add per-thread series to the timeline
  std::string threads_csv;          // append the per-thread breakdown here when set
  int64_t sampler_period_us = 500;
};

// Common flags: --gap_ms, --steps, --warmup, --timeline-dir, --timeline-threads,
// --threads-csv, --sampler_us, --device.
void add_common_flags(FlagParser* flags, const std::string& default_gaps);
LoopOptions common_loop_options(const FlagParser& flags);

// Runs options.warmup untimed steps then the state loop, one step per
// iteration (manual time = step time), the gap after each; sets counters.
void run_steps(benchmark::State& state, const std::string& name, const LoopOptions& options,
               const std::function<Phases()>& step);

// "a/b:1" -> "a_b_1": file names from benchmark names.
std::string sanitize(const std::string& name);

// Parses flags, handles --help and bad flags (one line, exit 2), initialises
// Google Benchmark; returns false when main should exit with *exit_code.
bool init(FlagParser* flags, int* argc, char** argv, int* exit_code);
// Adds the context (runtime, knobs, torch facts), prints ignored knobs, runs
// prints the summary table when the console format is in use.
int run(const Context& extra_context);

}  // namespace threadburn::bench
