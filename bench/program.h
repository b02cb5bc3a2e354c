// What every benchmark program does around its own benchmarks (no torch): the
// common flags, --help / --describe / bad flags (one line, exit 2, before
// anything runs), registering the points of its AxisSpace, the context (the
// settings really in force), and the console output.
#pragma once

#include <benchmark/benchmark.h>

#include <functional>
#include <memory>
#include <string>

#include "core/barrier.h"
#include "core/cli.h"
#include "core/error.h"
#include "runner.h"
#include "runtime/runtime.h"
#include "space.h"

namespace threadburn::bench {

using BenchmarkFn = std::function<void(benchmark::State&, const Point&)>;

// Reports the benchmark as not run, with why (a "skipped: ..." message is a
// skip, anything else an error), and lets Google Benchmark's loop end.
void skip(benchmark::State& state, const std::string& why);

class Program {
 public:
  // name: the executable ("train_step_bench"); family: the first component of
  // its benchmark names and the sweep's name for it ("train_step").
  Program(std::string name, std::string family, std::string summary, const std::string& default_gaps);

  FlagParser& flags() { return flags_; }
  const FlagParser& flags() const { return flags_; }
  const std::string& family() const { return family_; }

  // How a sweep starts P processes of this program (--describe's "launch"):
  // "copies" (the default): P independent copies meeting at --barrier;
  // "ranks": the P ranks of one data-parallel world, told their place by
  // RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and MASTER_PORT (they meet
  // through their own process group). The grid calls P world_size then.
  void launch_as_ranks() { launch_ = "ranks"; }
  // Its throughput (--describe's "throughput"): a counter and its unit, when
  // its steps move samples (train_step: samples_per_s, "samples/s"); by
  // default none: steps/s = 1000 / step_ms.
  void set_throughput(std::string counter, std::string unit) {
    throughput_counter_ = std::move(counter);
    throughput_unit_ = std::move(unit);
  }

  // Parses the flags. Returns false when main should return *exit_code
  // (--help printed: 0; a bad flag: one line on stderr, 2).
  bool parse(int* argc, char** argv, int* exit_code);
  // Prints "<name>: error: <what>" and returns 2.
  int fail(const std::exception& e) const;

  // The common flags as loop options (steps, warmup, gap list apart).
  LoopOptions loop_options() const;
  int64_t steps() const { return flags_.integer("steps"); }
  std::vector<int64_t> gaps() const { return flags_.integers("gap_ms"); }

  // With --describe: prints the self-description and returns 0 without
  // running anything. Otherwise registers one benchmark per point (fn runs
  // it), adds the context and runs them all; returns main's exit code.
  int run(const AxisSpace& space, const BenchmarkFn& fn, const Context& extra_context,
          benchmark::TimeUnit unit = benchmark::kMillisecond);

 private:
  void describe(const AxisSpace& space, const Context& context) const;

  std::string name_, family_;
  std::string launch_ = "copies";
  std::string throughput_counter_, throughput_unit_ = "steps/s";
  FlagParser flags_;
  bool console_ = true;
  std::unique_ptr<ProcessBarrier> barrier_;
};

}  // namespace threadburn::bench
