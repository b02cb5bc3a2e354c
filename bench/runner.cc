#include "runner.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <map>

#include "core/clock.h"
#include "core/procfs.h"
#include "core/stats.h"
#include "core/timeline.h"
#include "metrics.h"

namespace threadburn::bench {
namespace {

// Spin left over from the previous benchmark (or from naming the workers)
// must not land in this one's first gaps: wait until the threads but main and
// the sampler burned less than the tail threshold over kQuietNs, at most kMaxNs
// (a runtime that spins forever never settles; that is the steady state then).
constexpr int64_t kQuietNs = 20 * kNsPerMsInt;
constexpr int64_t kSettleMaxNs = 3000 * kNsPerMsInt;
// How long a copy waits for the others at the barrier before it goes on alone.
constexpr int64_t kBarrierTimeoutNs = 120LL * 1000 * kNsPerMsInt;

std::vector<double> column(const std::vector<StepRecord>& records, double (*get)(const StepRecord&)) {
  std::vector<double> out;
  out.reserve(records.size());
  for (const auto& r : records) out.push_back(get(r));
  return out;
}

}  // namespace

std::string file_stem(const std::string& benchmark_name) {
  std::string s = benchmark_name;
  for (char& c : s) {
    if (c == '/' || c == ':' || c == ' ') c = '_';
  }
  return s;
}

StepLoop::StepLoop(benchmark::State& state, std::string name, LoopOptions options)
    : state_(state), name_(std::move(name)), o_(std::move(options)) {
  if (o_.sampler) {
    BurnSampler::Options so;
    so.period_ns = o_.sampler_period_us * 1000;
    so.per_thread = o_.timeline_threads;
    sampler_ = std::make_unique<BurnSampler>(so);
  }
  ProbeOptions po;
  po.thread_breakdown = !o_.threads_csv.empty() || o_.timeline_threads;
  probe_ = std::make_unique<StepProbe>(sampler_.get(), po);
}

void StepLoop::run(const StepFn& step) {
  settle();
  line_up();
  warm_up(step);
  time_steps(step);
  report();
  write_files();
}

void StepLoop::settle() {
  ThreadClocks clocks;
  clocks.relist();
  int64_t before = clocks.read().others_cpu_ns();
  for (const int64_t give_up = wall_ns() + kSettleMaxNs; wall_ns() < give_up;) {
    sleep_for_ns(kQuietNs);
    clocks.relist();
    const int64_t now = clocks.read().others_cpu_ns();
    if (static_cast<double>(now - before) <= kTailThresholdCores * static_cast<double>(kQuietNs)) return;
    before = now;
  }
}

void StepLoop::line_up() {
  if (o_.barrier) barrier_ok_ = o_.barrier->wait(kBarrierTimeoutNs);
  if (o_.meet) o_.meet();
}

void StepLoop::warm_up(const StepFn& step) {
  for (int64_t i = 0; i < o_.warmup; ++i) {
    step();
    if (o_.gap_ms > 0) sleep_for_ns(o_.gap_ms * kNsPerMsInt);
  }
}

void StepLoop::time_steps(const StepFn& step) {
  const int64_t gap_ns = o_.gap_ms * kNsPerMsInt;
  records_.reserve(static_cast<size_t>(state_.max_iterations));
  for (auto _ : state_) {
    probe_->begin();
    figures_.push_back(step());
    probe_->end();
    records_.push_back(probe_->gap(gap_ns));
    state_.SetIterationTime(records_.back().step_ms / 1e3);
  }
}

void StepLoop::report() {
  if (records_.empty()) return;
  Counters c(state_);
  const double n = static_cast<double>(records_.size());
  auto mean_of = [&](double (*get)(const StepRecord&)) { return mean(column(records_, get)); };
  const std::vector<double> steps = column(records_, [](const StepRecord& r) { return r.step_ms; });
  const double step_ms = mean(steps);
  c.set("step_ms", step_ms);
  c.set("step_ms_median", median(steps));
  c.set("step_ms_cv", cv(steps));
  // The workload's own figures, by the names it gave them: their means.
  std::vector<std::pair<const char*, double>> sums;
  for (const StepFigures& f : figures_) {
    for (const auto& [name, value] : f.items()) {
      auto it = std::find_if(sums.begin(), sums.end(), [&](const auto& s) { return std::strcmp(s.first, name) == 0; });
      if (it == sums.end()) {
        sums.emplace_back(name, value);
      } else {
        it->second += value;
      }
    }
  }
  for (const auto& [name, sum] : sums) c.set(name, sum / n);
  const double step_cpu = mean_of([](const StepRecord& r) { return r.step_cpu_ms(); });
  c.set("step_cpu_ms", step_cpu);
  c.set("cores_busy", step_ms > 0 ? step_cpu / step_ms : 0);
  // Not cuda and pin: only the preload probe's interposers mark them (src/probe/thread_tap.cc);
  // in these programs the CUDA driver's threads stay "other".
  for (ThreadClass cls : {ThreadClass::kMain, ThreadClass::kOmp, ThreadClass::kTbb, ThreadClass::kLoader,
                          ThreadClass::kGloo, ThreadClass::kOther}) {
    double step_sum = 0, gap_sum = 0;
    for (const auto& r : records_) {
      step_sum += r.step_class_ms(cls);
      gap_sum += r.gap_class_ms(cls);
    }
    c.set(std::string("step_cpu_") + thread_class_name(cls) + "_ms", step_sum / n);
    if (cls != ThreadClass::kMain) c.set(std::string("residual_") + thread_class_name(cls) + "_ms", gap_sum / n);
  }
  c.set("step_wait_ms", mean_of([](const StepRecord& r) { return r.step_wait_ms; }));
  c.set("gap_slept_ms", mean_of([](const StepRecord& r) { return r.gap_ms; }));
  const std::vector<double> residual = column(records_, [](const StepRecord& r) { return r.residual_cpu_ms(); });
  c.set("residual_cpu_ms", mean(residual));
  // Medians resist a step whose burning thread another process preempted.
  c.set("residual_cpu_ms_median", median(residual));
  c.set("residual_cores",
        mean_of([](const StepRecord& r) { return r.gap_ms > 0 ? r.residual_cpu_ms() / r.gap_ms : 0.0; }));
  c.set("residual_wait_ms", mean_of([](const StepRecord& r) { return r.residual_wait_ms; }));
  if (sampler_) {
    const std::vector<double> tails = column(records_, [](const StepRecord& r) { return r.tail_ms; });
    c.set("tail_ms", mean(tails));
    c.set("tail_ms_median", median(tails));
    c.set("sampler_cpu_ms", mean_of([](const StepRecord& r) { return r.sampler_cpu_ms; }));
  }
  c.set("sampler_period_us", sampler_ ? static_cast<double>(o_.sampler_period_us) : 0.0);
  int threads = 0;
  for (const auto& r : records_) threads = std::max(threads, r.threads);
  c.set("threads", threads);
  c.set("vol_ctxsw", mean_of([](const StepRecord& r) { return static_cast<double>(r.ctxsw.voluntary); }));
  c.set("invol_ctxsw", mean_of([](const StepRecord& r) { return static_cast<double>(r.ctxsw.involuntary); }));
  if (o_.samples_per_step > 0 && step_ms > 0) c.set("samples_per_s", o_.samples_per_step / (step_ms / 1e3));
  c.set("timed_start_s", static_cast<double>(records_.front().step_begin_ns) / 1e9);
  c.set("timed_end_s", static_cast<double>(records_.back().gap_end_ns) / 1e9);
  if (o_.barrier) c.set("barrier_ok", barrier_ok_ ? 1 : 0);
}

void StepLoop::write_files() {
  if (records_.empty()) return;
  const StepRecord& last = records_.back();
  if (!o_.timeline_dir.empty() && sampler_) {
    // The last step's burn timeline: from a little before the step to the gap's end.
    const int64_t pre_ns = std::clamp<int64_t>(last.gap_end_ns - last.step_end_ns, 5 * kNsPerMsInt, 100 * kNsPerMsInt);
    const int64_t from = last.step_begin_ns - pre_ns, to = last.gap_end_ns + kNsPerMsInt;
    const std::string file = file_stem(name_) + ".timeline.csv";
    state_.SetLabel(kTimelineLabelPrefix + file);
    TimelineWriter tl("step_end");
    tl.mark(ns_to_ms(last.step_begin_ns - last.step_end_ns), kSeriesStepStart);
    tl.mark(0, kSeriesStepEnd);
    for (const BurnPoint& p : burn_rates(sampler_->window(from, to), last.step_end_ns)) {
      tl.add(p.t_ms, kSeriesOthers, p.others_cores);
      tl.add(p.t_ms, kSeriesMain, p.main_cores);
      for (int k = 0; k < kThreadClasses; ++k) {
        const auto cls = static_cast<ThreadClass>(k);
        if (cls == ThreadClass::kMain || cls == ThreadClass::kSampler || p.cores[k] == 0) continue;
        tl.add(p.t_ms, class_series(thread_class_name(cls)), p.cores[k]);
      }
    }
    add_thread_series(sampler_->thread_window(from, to), last.step_end_ns, &tl);
    tl.save(o_.timeline_dir + "/" + file);  // the sweep notes a missing file
  }
  if (!o_.threads_csv.empty()) {
    // Per thread: mean CPU per step in the step and in the gap, from the
    // probe's own boundary reads (thread CPU clocks, like the headline numbers).
    struct Acc {
      ThreadClass cls = ThreadClass::kOther;
      double step_ms = 0, gap_ms = 0;
    };
    std::map<pid_t, Acc> by_tid;
    auto add = [&](const std::vector<ThreadCpu>& a, const std::vector<ThreadCpu>& b, double Acc::*field) {
      std::map<pid_t, int64_t> start;
      for (const auto& t : a) start[t.tid] = t.cpu_ns;
      for (const auto& t : b) {
        Acc& acc = by_tid[t.tid];
        acc.cls = t.cls;
        acc.*field += ns_to_ms(t.cpu_ns - (start.count(t.tid) ? start[t.tid] : 0));
      }
    };
    for (const auto& r : records_) {
      add(r.at_begin, r.at_end, &Acc::step_ms);
      if (!r.at_gap_end.empty()) add(r.at_end, r.at_gap_end, &Acc::gap_ms);
    }
    struct stat st {};
    const bool fresh = ::stat(o_.threads_csv.c_str(), &st) != 0 || st.st_size == 0;
    std::ofstream out(o_.threads_csv, std::ios::app);
    if (fresh) out << "benchmark,tid,name,class,step_cpu_ms,gap_cpu_ms\n";
    const double n = static_cast<double>(records_.size());
    for (const auto& [tid, acc] : by_tid) {
      out << name_ << "," << tid << "," << thread_name(0, tid) << "," << thread_class_name(acc.cls) << ","
          << acc.step_ms / n << "," << acc.gap_ms / n << "\n";
    }
  }
}

}  // namespace threadburn::bench
