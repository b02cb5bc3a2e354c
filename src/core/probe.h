// StepProbe brackets one step and the gap after it:
//   begin() ... step ... end(); gap(gap_ns);
// and turns the clocks into the per-step metrics of DESIGN.md. The main (calling)
// thread sleeps through the gap; whatever CPU the process uses meanwhile, minus
// the main thread and the sampler, is the residual burn.
#pragma once

#include <cstdint>
#include <vector>

#include "core/burn.h"
#include "core/procfs.h"
#include "core/thread_clocks.h"

namespace threadburn {

struct StepRecord {
  double step_ms = 0;
  double step_cpu_ms = 0;       // CPU of every thread during the step, sampler excluded
  double gap_ms = 0;            // the gap actually slept
  double residual_cpu_ms = 0;   // CPU of every thread but main and sampler in the gap
  double residual_cores = 0;    // residual_cpu_ms / gap_ms
  double tail_ms = 0;           // step end -> last sample above kTailThresholdCores
  double sampler_cpu_ms = 0;    // the sampler's own CPU over step + gap
  int threads = 0;              // threads alive at the step's end
  int64_t vol_ctxsw = 0;        // whole process, over step + gap
  int64_t invol_ctxsw = 0;
  // Filled only when ProbeOptions::thread_breakdown is set:
  std::vector<ThreadDelta> step_threads;  // per-thread CPU in the step
  std::vector<ThreadDelta> gap_threads;   // per-thread CPU in the gap
  int64_t step_begin_ns = 0;
  int64_t step_end_ns = 0;
};

struct ProbeOptions {
  bool thread_breakdown = false;  // read /proc/self/task/* at step start, end, gap end
};

class StepProbe {
 public:
  // sampler may be null: then tail_ms stays 0 and no sampler CPU is subtracted.
  StepProbe(const BurnSampler* sampler, ProbeOptions options);

  void begin();
  void end();
  // Sleeps until step end + gap_ns and fills the record; gap_ns == 0 skips the
  // gap (back-to-back steps) and leaves residual/tail at 0.
  StepRecord gap(int64_t gap_ns);

 private:
  int64_t others_now();  // refreshes the thread list, then sums their clocks

  const BurnSampler* sampler_;
  ProbeOptions options_;
  StepRecord rec_;
  ThreadClocks clocks_;
  std::vector<pid_t> exclude_;  // the calling (measuring) thread and the sampler
  int64_t t0_ = 0, t1_ = 0;
  int64_t others0_ = 0, others1_ = 0;
  int64_t main0_ = 0, main1_ = 0;
  int64_t sampler0_ = 0, sampler1_ = 0;
  CtxSwitches ctx0_;
  std::vector<ThreadStat> threads0_, threads1_;
};

}  // namespace threadburn
