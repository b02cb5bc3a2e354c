// The step loop every benchmark program shares (no torch): for one benchmark,
// settle, line up with the other copies, warm up, time the steps with the
// probe (a gap after each), then turn the step records into counters and
// write the optional timeline and per-thread files. One named step each, as in
// google/benchmark's benchmark_runner.cc.
#pragma once

#include <benchmark/benchmark.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/barrier.h"
#include "core/counters.h"
#include "core/step_probe.h"
#include "core/sampler.h"

namespace threadburn::bench {

struct LoopOptions {
  int64_t gap_ms = 0;
  int64_t warmup = 2;
  double samples_per_step = 0;   // batch size; 0: no samples_per_s counter
  bool sampler = true;           // off: step times, CPU and residual only (no tail)
  int64_t sampler_period_us = kDefaultSamplerPeriodNs / 1000;
  std::string timeline_dir;      // write <name>.timeline.csv here when set
  bool timeline_threads = false; // add per-thread series to the timeline
  std::string threads_csv;       // append the per-thread breakdown here when set
  ProcessBarrier* barrier = nullptr;  // copies of this program started together
  // Called after settling, before the warmup: a data-parallel program's ranks
  // meet here, so that their timed steps overlap. Throws to fail the program.
  std::function<void()> meet;
};

// One step; returns the figures the workload names for it (training phases,
// GPU time, the all-reduce: each from a table the workload registered), which
// the loop reports as their means over the timed steps.
using StepFn = std::function<StepFigures()>;

class StepLoop {
 public:
  StepLoop(benchmark::State& state, std::string name, LoopOptions options);
  // Runs the whole benchmark: settle(), line_up(), warm_up(), time_steps(), report().
  void run(const StepFn& step);

 private:
  void settle();
  void line_up();
  void warm_up(const StepFn& step);
  void time_steps(const StepFn& step);
  void report();
  void write_files();

  benchmark::State& state_;
  std::string name_;
  LoopOptions o_;
  std::unique_ptr<BurnSampler> sampler_;
  std::unique_ptr<StepProbe> probe_;
  std::vector<StepRecord> records_;
  std::vector<StepFigures> figures_;
  bool barrier_ok_ = true;
};

// "a/b:1" -> "a_b_1": the file name of a benchmark's timeline.
std::string file_stem(const std::string& benchmark_name);
// The label of a benchmark's JSON entry that names its timeline file:
// "timeline=<file name in --timeline_dir>". Readers take the name from
// there, never from the benchmark's name.
inline constexpr const char* kTimelineLabelPrefix = "timeline=";

}  // namespace threadburn::bench
