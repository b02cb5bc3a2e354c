#include "metrics.h"

#include "core/error.h"

namespace threadburn::bench {

const CounterTable& step_counters() {
  static const CounterTable table = {
      {"step_ms", "ms", "wall time of one step (mean over the timed steps); CUDA: synchronised at its end"},
      {"step_ms_median", "ms", "median step time: robust to one preempted step"},
      {"step_ms_cv", "1", "coefficient of variation of the step times: the noise gauge (> 0.05 is flagged)"},
      {"step_cpu_ms", "ms", "CPU of every thread but the sampler during the step"},
      {"cores_busy", "cores", "step_cpu_ms / step_ms"},
      {"step_cpu_main_ms", "ms", "the measuring (main) thread's CPU during the step"},
      {"step_cpu_omp_ms", "ms", "OpenMP team members' CPU during the step"},
      {"step_cpu_tbb_ms", "ms", "TBB workers' CPU during the step"},
      {"step_cpu_loader_ms", "ms", "loader threads' CPU during the step"},
      {"step_cpu_gloo_ms", "ms", "gloo (c10d) threads' CPU during the step"},
      {"step_cpu_other_ms", "ms", "CPU of unclassified threads during the step (CUDA driver threads on CUDA)"},
      {"step_wait_ms", "ms", "run-queue wait of every thread but the sampler during the step: CPU wanted, not given"},
      {"gap_slept_ms", "ms", "idle time actually slept after each step (the gap_ms asked for, or a little more)"},
      {"residual_cpu_ms", "ms", "CPU of every thread but main and the sampler during the gap: the post-step burn"},
      {"residual_cpu_ms_median", "ms", "median over the steps of residual_cpu_ms"},
      {"residual_cores", "cores", "residual_cpu_ms / gap_slept_ms: the share of a core burned while idle"},
      {"residual_omp_ms", "ms", "the OpenMP team members' part of residual_cpu_ms"},
      {"residual_tbb_ms", "ms", "the TBB workers' part of residual_cpu_ms"},
      {"residual_loader_ms", "ms", "the loader threads' part of residual_cpu_ms"},
      {"residual_gloo_ms", "ms", "the gloo threads' part of residual_cpu_ms"},
      {"residual_other_ms", "ms", "the unclassified threads' part of residual_cpu_ms"},
      {"residual_wait_ms", "ms", "run-queue wait of the threads but main in the gap (spinners that had no core)"},
      {"tail_ms", "ms", "step end -> end of the last burning interval of the gap (mean); absent with the sampler off"},
      {"tail_ms_median", "ms", "median over the steps of tail_ms"},
      {"threads", "1", "threads alive in the process at the step's end (max over the steps)"},
      {"vol_ctxsw", "1", "voluntary context switches of the process per step (step + gap)"},
      {"invol_ctxsw", "1", "involuntary context switches (preemptions) of the process per step (step + gap)"},
      {"samples_per_s", "1/s", "train steps: batch / step_ms (data-parallel steps: this rank's batch and step)"},
      {"sampler_cpu_ms", "ms", "the burn sampler's own CPU per step (step + gap), excluded from the above"},
      {"sampler_period_us", "us", "the sampler's fast period (0: sampler off)"},
      {"timed_start_s", "s", "CLOCK_MONOTONIC at the first timed step's start (same clock in every process)"},
      {"timed_end_s", "s", "CLOCK_MONOTONIC at the last timed step's gap end"},
      {"barrier_ok", "1", "with --barrier: 1 if every copy arrived before the warmup, 0 after a timeout"},
  };
  return table;
}

namespace {

std::vector<const CounterTable*>& tables() {
  static std::vector<const CounterTable*> t = {&step_counters()};
  return t;
}

}  // namespace

void register_counters(const CounterTable& table) {
  for (const CounterTable* t : tables()) {
    if (t == &table) return;
  }
  tables().push_back(&table);
}

const std::vector<const CounterTable*>& registered_counters() { return tables(); }

void describe_metrics(JsonWriter* json) { describe_counters(json, registered_counters()); }

void Counters::set(const std::string& name, double value) {
  if (!find_counter(registered_counters(), name)) {
    throw Error("counter '" + name + "' is in no counter table this program registered (register_counters)");
  }
  state_.counters[name] = value;
}

double Counters::get(const std::string& name) const {
  auto it = state_.counters.find(name);
  return it == state_.counters.end() ? 0.0 : static_cast<double>(it->second);
}

}  // namespace threadburn::bench
