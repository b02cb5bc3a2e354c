#include "bench_common.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>

#include "core/burn.h"
#include "core/clock.h"
#include "core/probe.h"
#include "core/procfs.h"
#include "core/stats.h"

namespace threadburn::bench {
namespace {

struct SummaryRow {
  std::string name;
  double step_ms, cores_busy, residual_cpu_ms, residual_cores, tail_ms, samples_per_s;
  int threads;
};
std::vector<SummaryRow> g_summary;
bool g_console = true;

std::string role_of(const ThreadDelta& t, pid_t main_tid, pid_t sampler_tid) {
  if (t.tid == main_tid) return "main";
  if (t.tid == sampler_tid) return "sampler";
  if (t.name.rfind("tb-omp", 0) == 0) return "omp-worker";
  if (t.name.rfind("tb-loader", 0) == 0) return "loader";
  if (t.name.rfind("cuda", 0) == 0) return "cuda-driver";
  return "other";
}

// Waits until no thread but main and the sampler has burned for quiet_ns:
// spin left over from the previous benchmark (or from naming the workers) must
// not land in this one's first gaps. Gives up after max_ns (a runtime that
// spins forever never settles; that is then the steady state measured).
void settle(const BurnSampler& sampler, int64_t quiet_ns, int64_t max_ns) {
  const int64_t give_up = wall_ns() + max_ns;
  while (wall_ns() < give_up) {
    const int64_t now = wall_ns();
    sampler.wait_for_sample_after(now);
    const auto rates = burn_rates(sampler.window(now - quiet_ns, now), now);
    bool quiet = !rates.empty() && rates.front().t_ms <= -static_cast<double>(quiet_ns) / kNsPerMs * 0.8;
    for (const auto& p : rates) quiet = quiet && p.others_cores <= kTailThresholdCores;
    if (quiet) return;
    sleep_for_ns(quiet_ns / 4);
  }
}

void write_timeline(const std::string& path, const std::vector<BurnSample>& samples,
                    const std::vector<ThreadSnapshot>& snaps, int64_t step_begin, int64_t step_end) {
  std::ofstream out(path);
  out << "t_ms,series,cores\n";
  out << static_cast<double>(step_begin - step_end) / kNsPerMs << ",step_start,0\n";
  out << "0,step_end,0\n";
  for (const BurnPoint& p : burn_rates(samples, step_end)) {
    out << p.t_ms << ",others," << p.others_cores << "\n" << p.t_ms << ",main," << p.main_cores << "\n";
  }
  for (size_t i = 1; i < snaps.size(); ++i) {
    const double dt = static_cast<double>(snaps[i].t_ns - snaps[i - 1].t_ns);
    if (dt <= 0) continue;
    const double t_ms = static_cast<double>(snaps[i].t_ns - step_end) / kNsPerMs;
    for (const ThreadDelta& d : thread_deltas(snaps[i - 1].threads, snaps[i].threads)) {
      out << t_ms << ",thread:" << d.tid << ":" << d.name << "," << static_cast<double>(d.cpu_ns) / dt << "\n";
    }
  }
}

void append_threads_csv(const std::string& path, const std::string& name,
                        const std::vector<StepRecord>& records, pid_t sampler_tid) {
  struct Acc {
    std::string name;
    double step_ms = 0, gap_ms = 0;
  };
  std::map<pid_t, Acc> by_tid;
  for (const auto& r : records) {
    for (const auto& d : r.step_threads) {
      by_tid[d.tid].name = d.name;
      by_tid[d.tid].step_ms += static_cast<double>(d.cpu_ns) / kNsPerMs;
    }
    for (const auto& d : r.gap_threads) {
      by_tid[d.tid].name = d.name;
      by_tid[d.tid].gap_ms += static_cast<double>(d.cpu_ns) / kNsPerMs;
    }
  }
  struct stat st {};
  const bool fresh = ::stat(path.c_str(), &st) != 0 || st.st_size == 0;
  std::ofstream out(path, std::ios::app);
  if (fresh) out << "benchmark,tid,name,role,step_cpu_ms,gap_cpu_ms\n";
  const double n = static_cast<double>(std::max<size_t>(records.size(), 1));
  const pid_t main_tid = current_tid();
  for (const auto& [tid, acc] : by_tid) {
    const std::string role = role_of({tid, acc.name, 0}, main_tid, sampler_tid);
    out << name << "," << tid << "," << acc.name << "," << role << "," << acc.step_ms / n << ","
        << acc.gap_ms / n << "\n";
  }
}

}  // namespace

std::string sanitize(const std::string& name) {
  std::string s = name;
  for (char& c : s) {
    if (c == '/' || c == ':' || c == ' ') c = '_';
  }
  return s;
}

void add_common_flags(FlagParser* flags, const std::string& default_gaps) {
  flags->add("gap_ms", default_gaps, "idle ms after each step (the seed's sleep), comma list");
  flags->add("steps", "10", "timed steps per benchmark (one per iteration)");
  flags->add("warmup", "2", "untimed steps first (allocations, thread creation)");
  flags->add("device", "cpu", "cpu, cuda or cuda:N (cuda without a GPU: skipped)");
  flags->add("timeline-dir", "", "write each benchmark's last-step burn timeline CSV here");
  flags->add("timeline-threads", "0", "1: add per-thread series to the timeline (costlier sampling)");
  flags->add("threads-csv", "", "append the per-thread CPU breakdown (step / gap) to this CSV");
  flags->add("sampler_us", "500", "burn sampler period in microseconds (50..1000)");
}

LoopOptions common_loop_options(const FlagParser& flags) {
  LoopOptions o;
  o.warmup = parse_int("warmup", flags.get("warmup"), 0, 1000);
  o.timeline_dir = flags.get("timeline-dir");
  o.timeline_threads = parse_int("timeline-threads", flags.get("timeline-threads"), 0, 1) == 1;
  o.threads_csv = flags.get("threads-csv");
  o.sampler_period_us = parse_int("sampler_us", flags.get("sampler_us"), 50, 1000);
  if (!o.timeline_dir.empty()) {
    struct stat st {};
    if (::stat(o.timeline_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      throw FlagError("--timeline-dir: " + o.timeline_dir + ": no such directory");
    }
  }
  return o;
}

void run_steps(benchmark::State& state, const std::string& name, const LoopOptions& o,
               const std::function<Phases()>& step) {
  BurnSampler::Options so;
  so.period_ns = o.sampler_period_us * 1000;
  so.per_thread = o.timeline_threads;
  BurnSampler sampler(so);
  ProbeOptions po;
  po.thread_breakdown = !o.threads_csv.empty();
  StepProbe probe(&sampler, po);
  const int64_t gap_ns = o.gap_ms * 1000000;

  settle(sampler, 20 * 1000000LL, 3000 * 1000000LL);
  for (int64_t i = 0; i < o.warmup; ++i) {
    step();
    if (gap_ns > 0) sleep_for_ns(gap_ns);
  }
  std::vector<StepRecord> records;
  records.reserve(static_cast<size_t>(state.max_iterations));
  Phases sum;
  for (auto _ : state) {
    probe.begin();
    const Phases ph = step();
    probe.end();
    StepRecord r = probe.gap(gap_ns);
    state.SetIterationTime(r.step_ms / 1e3);
    sum.data_ms += ph.data_ms;
    sum.forward_ms += ph.forward_ms;
    sum.backward_ms += ph.backward_ms;
    sum.optim_ms += ph.optim_ms;
    sum.sync_ms += ph.sync_ms;
    sum.sync_cpu_ms += ph.sync_cpu_ms;
    sum.gpu_ms += ph.gpu_ms;
    records.push_back(std::move(r));
  }
  if (records.empty()) return;

  const double n = static_cast<double>(records.size());
  auto avg = [&](double StepRecord::*field) {
    double s = 0;
    for (const auto& r : records) s += r.*field;
    return s / n;
  };
  int threads = 0;
  double vol = 0, invol = 0;
  for (const auto& r : records) {
    threads = std::max(threads, r.threads);
    vol += static_cast<double>(r.vol_ctxsw);
    invol += static_cast<double>(r.invol_ctxsw);
  }
  const double step_ms = avg(&StepRecord::step_ms);
  const double step_cpu_ms = avg(&StepRecord::step_cpu_ms);
  std::vector<double> step_times;
  for (const auto& r : records) step_times.push_back(r.step_ms);
  const Summary spread = summarize(step_times);
  auto& c = state.counters;
  c["step_ms"] = step_ms;
  // Spread across the steps of this run: a high cv says the machine was noisy.
  c["step_ms_median"] = spread.median;
  c["step_ms_cv"] = spread.cv;
  if (o.report_phases) {
    c["data_ms"] = sum.data_ms / n;
    c["forward_ms"] = sum.forward_ms / n;
    c["backward_ms"] = sum.backward_ms / n;
    c["optim_ms"] = sum.optim_ms / n;
    c["sync_ms"] = sum.sync_ms / n;
    c["sync_cpu_ms"] = sum.sync_cpu_ms / n;
    if (o.report_gpu) c["gpu_ms"] = sum.gpu_ms / n;
  }
  c["step_cpu_ms"] = step_cpu_ms;
  c["cores_busy"] = step_ms > 0 ? step_cpu_ms / step_ms : 0;
  c["gap_ms"] = avg(&StepRecord::gap_ms);
  c["residual_cpu_ms"] = avg(&StepRecord::residual_cpu_ms);
  // Medians resist a step whose burning thread another process preempted.
  std::vector<double> residuals, tails;
  for (const auto& r : records) {
    residuals.push_back(r.residual_cpu_ms);
    tails.push_back(r.tail_ms);
  }
  c["residual_cpu_ms_median"] = median(residuals);
  c["tail_ms_median"] = median(tails);
  c["residual_cores"] = avg(&StepRecord::residual_cores);
  c["tail_ms"] = avg(&StepRecord::tail_ms);
  c["threads"] = threads;
  c["vol_ctxsw"] = vol / n;
  c["invol_ctxsw"] = invol / n;
  c["sampler_cpu_ms"] = avg(&StepRecord::sampler_cpu_ms);
  c["sampler_period_us"] = static_cast<double>(o.sampler_period_us);
  if (o.samples_per_step > 0 && step_ms > 0) c["samples_per_s"] = o.samples_per_step / (step_ms / 1e3);

  const StepRecord& last = records.back();
  if (!o.timeline_dir.empty()) {
    const int64_t pre_ns = std::clamp<int64_t>(gap_ns, 5000000, 100000000);
    const int64_t from = last.step_begin_ns - pre_ns, to = last.step_end_ns + gap_ns;
    write_timeline(o.timeline_dir + "/" + sanitize(name) + ".timeline.csv", sampler.window(from, to),
                   sampler.thread_window(from, to), last.step_begin_ns, last.step_end_ns);
  }
  if (!o.threads_csv.empty()) append_threads_csv(o.threads_csv, name, records, sampler.sampler_tid());
  g_summary.push_back({name, step_ms, c["cores_busy"], c["residual_cpu_ms"], c["residual_cores"],
                       c["tail_ms"], o.samples_per_step > 0 ? static_cast<double>(c["samples_per_s"]) : 0,
                       threads});
}

bool init(FlagParser* flags, int* argc, char** argv, int* exit_code) {
  const std::string prog = argv[0];
  const std::string base = prog.substr(prog.find_last_of('/') + 1);
  std::vector<char*> rest;
  try {
    rest = flags->parse(*argc, argv);
  } catch (const FlagError& e) {
    std::fprintf(stderr, "%s: error: %s\n", base.c_str(), e.what());
    *exit_code = 2;
    return false;
  }
  if (flags->help_requested()) {
    std::fputs(flags->help_text().c_str(), stdout);
    *exit_code = 0;
    return false;
  }
  for (char* a : rest) {
    if (std::strncmp(a, "--benchmark_format=", 19) == 0 && std::strcmp(a + 19, "console") != 0) g_console = false;
  }
  int n = static_cast<int>(rest.size());
  for (int i = 0; i < n; ++i) argv[i] = rest[static_cast<size_t>(i)];
  argv[n] = nullptr;
  *argc = n;
  benchmark::Initialize(argc, argv);
  if (benchmark::ReportUnrecognizedArguments(*argc, argv)) {
    *exit_code = 2;
    return false;
  }
  return true;
}

int run(const Context& extra_context) {
  Context ctx = runtime_context();
  ctx.insert(ctx.end(), extra_context.begin(), extra_context.end());
  for (const auto& [k, v] : ctx) {
    benchmark::AddCustomContext(k, v);
    if (k == "ignored_knobs" && v != "none") {
      std::fprintf(stderr, "note: %s set in the environment but ignored by the live OpenMP runtime\n", v.c_str());
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  if (g_console && !g_summary.empty()) {
    std::printf("\n%-58s %9s %6s %12s %9s %8s %8s %10s\n", "threadburn summary (means per step)", "step_ms",
                "cores", "residual_ms", "res_cores", "tail_ms", "threads", "samples/s");
    for (const auto& r : g_summary) {
      std::printf("%-58s %9.3f %6.2f %12.3f %9.3f %8.1f %8d %10.0f\n", r.name.c_str(), r.step_ms, r.cores_busy,
                  r.residual_cpu_ms, r.residual_cores, r.tail_ms, r.threads, r.samples_per_s);
    }
  }
  return 0;
}

}  // namespace threadburn::bench
