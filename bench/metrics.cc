#include "metrics.h"

#include "core/error.h"

namespace threadburn::bench {

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> table = {
      {"step_ms", "ms", "wall time of one step (mean over the timed steps); CUDA: synchronised at its end"},
      {"step_ms_median", "ms", "median step time: robust to one preempted step"},
      {"step_ms_cv", "1", "coefficient of variation of the step times: the noise gauge (> 0.05 is flagged)"},
      {"data_ms", "ms", "train steps: waiting for the loader + copy to the device"},
      {"forward_ms", "ms", "train steps: zero_grad + forward + loss"},
      {"backward_ms", "ms", "train steps: loss.backward()"},
      {"optim_ms", "ms", "train steps: optimizer.step()"},
      {"sync_ms", "ms", "CUDA or --item_sync: waiting for the device at the step's end"},
      {"sync_cpu_ms", "ms", "the main thread's CPU while it waited for the device (spin vs blocking wait)"},
      {"gpu_ms", "ms", "CUDA: GPU time of the step, from CUDA events"},
      {"allreduce_ms", "ms",
       "data-parallel steps: gradients into the buckets, every bucket's all-reduce and its wait, the mean back"},
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
      {"serial_ms", "ms", "runtime_bench: the kernel run serially (median of back-to-back runs)"},
      {"backtoback_ms", "ms", "runtime_bench: the region run back to back (median)"},
      {"wakeup_ms", "ms", "runtime_bench: region time after the gap minus back to back: what sleeping workers cost"},
      {"kernel_threads", "1", "runtime_bench: threads the kernel's runtime uses"},
      {"overhead_ms", "ms", "runtime_bench: region time - serial time / threads (EPCC)"},
      {"speedup", "1", "runtime_bench: serial time / region time"},
      {"world_size", "1", "data-parallel steps: ranks in the process group"},
      {"rank", "1", "data-parallel steps: this process's rank"},
      {"buckets", "1", "data-parallel steps: gradient buckets, one all-reduce each per step"},
      {"param_checksum", "1",
       "data-parallel steps: 48-bit hash of the parameters after the last step, equal on every rank when in step"},
  };
  return table;
}

void describe_metrics(JsonWriter* json) {
  json->key("counters").begin_array();
  for (const Metric& m : metrics()) {
    json->begin_object().field("name", m.name).field("unit", m.unit).field("help", m.help).end_object();
  }
  json->end_array();
}

void Counters::set(const std::string& name, double value) {
  for (const Metric& m : metrics()) {
    if (name == m.name) {
      state_.counters[name] = value;
      return;
    }
  }
  throw Error("counter '" + name + "' is not in bench/metrics.cc: describe it there first");
}

double Counters::get(const std::string& name) const {
  auto it = state_.counters.find(name);
  return it == state_.counters.end() ? 0.0 : static_cast<double>(it->second);
}

}  // namespace threadburn::bench
