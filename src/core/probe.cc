#include "core/probe.h"

#include "core/clock.h"

namespace threadburn {

StepProbe::StepProbe(const BurnSampler* sampler, ProbeOptions options)
    : sampler_(sampler), options_(options) {
  exclude_.push_back(current_tid());
  if (sampler_) exclude_.push_back(sampler_->sampler_tid());
}

int64_t StepProbe::others_now() {
  clocks_.refresh();
  return clocks_.sum_ns(exclude_);
}

void StepProbe::begin() {
  rec_ = StepRecord{};
  if (options_.thread_breakdown) threads0_ = read_threads(0);
  ctx0_ = process_ctxsw();
  sampler0_ = sampler_ ? sampler_->sampler_cpu_ns() : 0;
  others0_ = others_now();
  main0_ = thread_cpu_ns();
  t0_ = wall_ns();  // last: nothing of the probe's own reads lands in the step
}

void StepProbe::end() {
  t1_ = wall_ns();  // first: the step ends here
  main1_ = thread_cpu_ns();
  others1_ = others_now();
  sampler1_ = sampler_ ? sampler_->sampler_cpu_ns() : 0;
  rec_.threads = count_threads(0);
  if (options_.thread_breakdown) threads1_ = read_threads(0);
}

StepRecord StepProbe::gap(int64_t gap_ns) {
  rec_.step_begin_ns = t0_;
  rec_.step_end_ns = t1_;
  rec_.step_ms = static_cast<double>(t1_ - t0_) / kNsPerMs;
  rec_.step_cpu_ms = static_cast<double>((main1_ - main0_) + (others1_ - others0_)) / kNsPerMs;
  int64_t sampler2 = sampler1_;
  if (gap_ns > 0) {
    sleep_until_ns(t1_ + gap_ns);
    const int64_t t2 = wall_ns();
    const int64_t others2 = others_now();
    sampler2 = sampler_ ? sampler_->sampler_cpu_ns() : 0;
    rec_.gap_ms = static_cast<double>(t2 - t1_) / kNsPerMs;
    rec_.residual_cpu_ms = static_cast<double>(others2 - others1_) / kNsPerMs;
    rec_.residual_cores = rec_.gap_ms > 0 ? rec_.residual_cpu_ms / rec_.gap_ms : 0;
    if (sampler_) {
      sampler_->wait_for_sample_after(t1_ + gap_ns);
      auto window = sampler_->window(t1_, t1_ + gap_ns);
      rec_.tail_ms = tail_ms(burn_rates(window, t1_));
    }
    if (options_.thread_breakdown) {
      rec_.gap_threads = thread_deltas(threads1_, read_threads(0));
    }
  }
  if (options_.thread_breakdown) rec_.step_threads = thread_deltas(threads0_, threads1_);
  rec_.sampler_cpu_ms = static_cast<double>(sampler2 - sampler0_) / kNsPerMs;
  const CtxSwitches ctx = process_ctxsw();
  rec_.vol_ctxsw = ctx.voluntary - ctx0_.voluntary;
  rec_.invol_ctxsw = ctx.involuntary - ctx0_.involuntary;
  return rec_;
}

}  // namespace threadburn
