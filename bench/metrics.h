// The counters of a benchmark program: the step loop's own (step_counters(),
// generic figures of any step: time, CPU by class of thread, the burn after
// it, the tail) plus the tables the program's workloads own and register
// (training: src/workload/train.h, CUDA: src/cuda/cuda_host.h, data-parallel:
// src/workload/ddp.h, runtime_bench's kernel). Counters are set only through
// Counters::set, which refuses a name no registered table has, and --describe
// prints the registered tables, so the CSV schema (results/README.md) and the
// Python side read the counters from the programs.
#pragma once

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "core/counters.h"
#include "core/json.h"

namespace threadburn::bench {

// The step loop's counters (bench/runner.cc reports them).
// One iteration of the loop the step counters measure: the step and the gap
// slept after it, the counters whose sum is the time a training loop
// experiences (every row carries it: loop_counters).
constexpr const char* kLoopCounters = "step_ms gap_slept_ms";

const CounterTable& step_counters();

// This program's tables, step_counters() first. One program per process:
// Program registers step_counters(), each program the tables of its workloads.
void register_counters(const CounterTable& table);
const std::vector<const CounterTable*>& registered_counters();
void describe_metrics(JsonWriter* json);

// state.counters, restricted to the names of the registered tables.
class Counters {
 public:
  explicit Counters(benchmark::State& state) : state_(state) {}
  void set(const std::string& name, double value);
  double get(const std::string& name) const;

 private:
  benchmark::State& state_;
};

}  // namespace threadburn::bench
