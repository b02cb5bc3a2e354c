// StepProbe brackets one step and the gap after it:
//   begin() ... step ... end(); gap(gap_ns);
// and turns the thread clocks into the per-step record: step time, CPU by class
// of thread during the step and during the gap after it (the residual burn),
// run-queue waits, and the tail. The calling thread is the measured ("main")
// thread; it sleeps through the gap, so whatever the other threads use
// meanwhile is the residual burn.
#pragma once

#include <cstdint>
#include <vector>

#include "core/procfs.h"
#include "core/sampler.h"
#include "core/thread_clocks.h"

namespace threadburn {

struct StepRecord {
  double step_ms = 0;
  double gap_ms = 0;          // the gap actually slept (0: back to back)
  ClassArray step_cpu_ns{};   // CPU by class during the step
  ClassArray gap_cpu_ns{};    // CPU by class during the gap
  double step_wait_ms = 0;    // run-queue wait of every thread but the sampler during the step
  double residual_wait_ms = 0;  // run-queue wait of the others during the gap
  bool has_tail = false;      // false without a sampler
  double tail_ms = 0;         // step end -> end of the last burning interval of the gap
  double sampler_cpu_ms = 0;  // the sampler's own CPU over step + gap
  int threads = 0;            // threads alive at the step's end
  CtxSwitches ctxsw;          // whole process, over step + gap
  int64_t step_begin_ns = 0, step_end_ns = 0, gap_end_ns = 0;
  // Per-thread CPU at begin, end and gap end (ProbeOptions::thread_breakdown).
  std::vector<ThreadCpu> at_begin, at_end, at_gap_end;

  // CPU of every thread but the sampler during the step.
  double step_cpu_ms() const;
  // CPU of every thread but main and the sampler during the gap: the residual burn.
  double residual_cpu_ms() const;
  double step_class_ms(ThreadClass c) const;
  double gap_class_ms(ThreadClass c) const;
};

struct ProbeOptions {
  bool thread_breakdown = false;  // keep per-thread values at the boundaries
};

class StepProbe {
 public:
  // sampler may be null: then the probe reads the clocks itself, and the
  // record has no tail and no sampler CPU.
  StepProbe(BurnSampler* sampler, ProbeOptions options);

  void begin();
  void end();
  // Sleeps until step end + gap_ns and completes the record; gap_ns == 0
  // skips the gap (back-to-back steps) and leaves the gap fields at 0.
  StepRecord gap(int64_t gap_ns);

 private:
  ClassTotals read(std::vector<ThreadCpu>* threads);

  BurnSampler* sampler_;
  ProbeOptions options_;
  ThreadClocks own_clocks_;  // without a sampler
  StepRecord rec_;
  ClassTotals at_begin_, at_end_;
  int64_t sampler_cpu0_ = 0;
  CtxSwitches ctx0_;
};

}  // namespace threadburn
