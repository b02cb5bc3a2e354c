#include "core/step_probe.h"

#include "core/clock.h"

namespace threadburn {

double StepRecord::step_cpu_ms() const {
  double s = 0;
  for (int c = 0; c < kThreadClasses; ++c) {
    if (c != index_of(ThreadClass::kSampler)) s += ns_to_ms(step_cpu_ns[c]);
  }
  return s;
}

double StepRecord::residual_cpu_ms() const {
  double s = 0;
  for (int c = 0; c < kThreadClasses; ++c) {
    if (c != index_of(ThreadClass::kSampler) && c != index_of(ThreadClass::kMain)) s += ns_to_ms(gap_cpu_ns[c]);
  }
  return s;
}

double StepRecord::step_class_ms(ThreadClass c) const { return ns_to_ms(step_cpu_ns[index_of(c)]); }
double StepRecord::gap_class_ms(ThreadClass c) const { return ns_to_ms(gap_cpu_ns[index_of(c)]); }

StepProbe::StepProbe(BurnSampler* sampler, ProbeOptions options) : sampler_(sampler), options_(options) {
  mark_current_thread(ThreadClass::kMain);
}

ClassTotals StepProbe::read(std::vector<ThreadCpu>* threads) {
  std::vector<ThreadCpu>* want = options_.thread_breakdown ? threads : nullptr;
  if (sampler_) return sampler_->sample_now(/*with_wait=*/true, want);
  own_clocks_.relist();
  ClassTotals t = own_clocks_.read(/*with_wait=*/true);
  if (want) *want = own_clocks_.threads();
  return t;
}

void StepProbe::begin() {
  rec_ = StepRecord{};
  if (sampler_) sampler_->relax();
  ctx0_ = process_ctxsw();
  sampler_cpu0_ = sampler_ ? sampler_->own_cpu_ns() : 0;
  at_begin_ = read(&rec_.at_begin);
  rec_.step_begin_ns = wall_ns();  // last: nothing of the probe's own reads lands in the step
}

void StepProbe::end() {
  rec_.step_end_ns = wall_ns();  // first: the step ends here
  at_end_ = read(&rec_.at_end);
  if (sampler_) sampler_->kick();  // after the read: the sampler would only wait for the lock
  rec_.threads = at_end_.threads;
}

StepRecord StepProbe::gap(int64_t gap_ns) {
  rec_.step_ms = ns_to_ms(rec_.step_end_ns - rec_.step_begin_ns);
  for (int c = 0; c < kThreadClasses; ++c) rec_.step_cpu_ns[c] = at_end_.cpu_ns[c] - at_begin_.cpu_ns[c];
  rec_.step_wait_ms = ns_to_ms(at_end_.all_but_sampler_wait_ns() - at_begin_.all_but_sampler_wait_ns());
  rec_.gap_end_ns = rec_.step_end_ns;
  if (gap_ns > 0) {
    sleep_until_ns(rec_.step_end_ns + gap_ns);
    rec_.gap_end_ns = wall_ns();
    const ClassTotals at_gap_end = read(&rec_.at_gap_end);
    rec_.gap_ms = ns_to_ms(rec_.gap_end_ns - rec_.step_end_ns);
    for (int c = 0; c < kThreadClasses; ++c) rec_.gap_cpu_ns[c] = at_gap_end.cpu_ns[c] - at_end_.cpu_ns[c];
    rec_.residual_wait_ms = ns_to_ms(at_gap_end.others_wait_ns() - at_end_.others_wait_ns());
    if (sampler_) {
      // The probe's own samples at the step's end and the gap's end bracket the window.
      rec_.tail_ms = tail_ms(burn_rates(sampler_->window(rec_.step_end_ns, rec_.gap_end_ns + 1000000), rec_.step_end_ns));
      rec_.has_tail = true;
    }
  }
  if (sampler_) rec_.sampler_cpu_ms = ns_to_ms(sampler_->own_cpu_ns() - sampler_cpu0_);
  const CtxSwitches ctx = process_ctxsw();
  rec_.ctxsw = {ctx.voluntary - ctx0_.voluntary, ctx.involuntary - ctx0_.involuntary};
  return rec_;
}

}  // namespace threadburn
