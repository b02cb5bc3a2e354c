#include "probe/report.h"

#include <algorithm>
#include <cmath>

#include "core/clock.h"
#include "core/stats.h"

namespace threadburn::probe {

void DurationSample::add(int64_t duration_ns) {
  ++seen;
  if (kept.size() < capacity) {
    kept.push_back(duration_ns);
    return;
  }
  // Algorithm R: the n-th value replaces a random kept one with probability capacity / n.
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  const uint64_t slot = rng % static_cast<uint64_t>(seen);
  if (slot < capacity) kept[static_cast<size_t>(slot)] = duration_ns;
}

double DurationSample::quantile_us(double q) const {
  if (kept.empty()) return 0;
  std::vector<double> us(kept.size());
  for (size_t i = 0; i < kept.size(); ++i) us[i] = static_cast<double>(kept[i]) / 1000.0;
  return percentile(std::move(us), q);
}

void RegionStats::add(int64_t duration_ns, int team) {
  ++count;
  total_ns += duration_ns;
  max_team = std::max(max_team, team);
  int k = 0;
  for (int64_t d = std::max<int64_t>(duration_ns, 1); d > 1 && k < kDurationBuckets - 1; d >>= 1) ++k;
  ++buckets[static_cast<size_t>(k)];
  durations.add(duration_ns);
}

void RegionStats::add_region(int entry, int depth, int64_t duration_ns, int team) {
  EntryStats& e = entries[entry];
  if (depth > 0) {
    ++nested;
    ++e.nested;
    max_depth = std::max(max_depth, depth);
    return;
  }
  add(duration_ns, team);
  ++e.count;
  e.total_ns += duration_ns;
  e.max_team = std::max(e.max_team, team);
  ++e.teams[team];
  if (e.durations.capacity > 4096) e.durations.capacity = 4096;  // per entry point: a smaller sample
  e.durations.add(duration_ns);
}

double RegionStats::quantile_us(double q) const { return durations.quantile_us(q); }

RegionSplit split_by_regions(const std::vector<BurnSample>& samples) {
  RegionSplit out;
  for (size_t i = 1; i < samples.size(); ++i) {
    const BurnSample& a = samples[i - 1];
    const BurnSample& b = samples[i];
    const double dt = static_cast<double>(b.t_ns - a.t_ns);
    if (dt <= 0) continue;
    const double inside = std::clamp(static_cast<double>(b.mark_ns - a.mark_ns) / dt, 0.0, 1.0);
    for (int c = 0; c < kThreadClasses; ++c) {
      const double cpu = static_cast<double>(b.cpu_ns[c] - a.cpu_ns[c]);
      const auto in = static_cast<int64_t>(std::llround(cpu * inside));
      out.in_regions_ns[c] += in;
      out.between_ns[c] += static_cast<int64_t>(cpu) - in;
    }
  }
  return out;
}

namespace {

// CPU of one class over [from, to], the boundary intervals prorated by time.
// A running total of the samples over [from, to], the boundary intervals
// prorated by time.
template <typename Get>
double between(const std::vector<BurnSample>& s, int64_t from, int64_t to, Get get) {
  double total = 0;
  for (size_t i = 1; i < s.size(); ++i) {
    const int64_t lo = std::max(s[i - 1].t_ns, from), hi = std::min(s[i].t_ns, to);
    if (hi <= lo) continue;
    const double dt = static_cast<double>(s[i].t_ns - s[i - 1].t_ns);
    total += static_cast<double>(get(s[i]) - get(s[i - 1])) * static_cast<double>(hi - lo) / dt;
  }
  return total;
}

}  // namespace

GapBurn gap_burn(const std::vector<BurnSample>& samples, const Gap& gap) {
  GapBurn g;
  g.length_ms = ns_to_ms(gap.end_ns - gap.start_ns);
  if (samples.empty() || samples.front().t_ns > gap.start_ns) return g;  // the ring no longer covers it
  const int omp = index_of(ThreadClass::kOmp);
  g.omp_cpu_ms = between(samples, gap.start_ns, gap.end_ns, [&](const BurnSample& x) { return x.cpu_ns[omp]; }) / kNsPerMs;
  g.others_cpu_ms = between(samples, gap.start_ns, gap.end_ns, [](const BurnSample& x) { return x.others_cpu_ns(); }) / kNsPerMs;
  g.others_wait_ms = between(samples, gap.start_ns, gap.end_ns, [](const BurnSample& x) { return x.others_wait_ns; }) / kNsPerMs;
  // The team's own tail: the rates of the OpenMP class only.
  std::vector<BurnSample> window;
  for (size_t i = 0; i < samples.size(); ++i) {
    const bool last_before = i + 1 < samples.size() && samples[i + 1].t_ns > gap.start_ns && samples[i].t_ns <= gap.start_ns;
    if (last_before || (samples[i].t_ns > gap.start_ns && samples[i].t_ns <= gap.end_ns)) window.push_back(samples[i]);
  }
  std::vector<BurnPoint> points = burn_rates(window, gap.start_ns);
  for (auto& p : points) p.others_cores = p.cores[static_cast<size_t>(omp)];
  g.omp_tail_ms = tail_ms(points);
  for (size_t i = 0; i < points.size() && g.omp_tail_ms > 0; ++i) {
    if (points[i].t_ms != g.omp_tail_ms) continue;
    // The first point's interval began before the gap: from the gap's start.
    g.tail_interval_ms = i == 0 ? points[i].t_ms : points[i].t_ms - points[i - 1].t_ms;
  }
  for (size_t i = 1; i < samples.size(); ++i) {
    if (samples[i - 1].t_ns <= gap.start_ns && samples[i].t_ns > gap.start_ns) {
      g.boundary_ms = ns_to_ms(samples[i].t_ns - samples[i - 1].t_ns);
    }
  }
  g.measured = true;
  return g;
}

// Never destroyed: the exit report reads it (probe.cc, "What the exit path reads").
const CounterTable& counters() {
  static const CounterTable& table = *new const CounterTable{
      {"wall_ms", "ms", "the program's run time under the probe (load to exit)"},
      {"cpu_ms", "ms", "CPU of every thread of the program (the sampler excluded) and of its child processes (cpu_children_ms)"},
      {"cpu_main_ms", "ms", "the main thread's CPU"},
      {"cpu_omp_ms", "ms", "the OpenMP team members' CPU"},
      {"cpu_other_ms", "ms", "CPU of every other thread (Python's, loaders', the runtime's helpers; not cpu_cuda_ms, cpu_pin_ms)"},
      {"omp_in_regions_ms", "ms", "the team's CPU while a parallel region ran"},
      {"omp_between_regions_ms", "ms", "the team's CPU while no region ran: the burn between regions"},
      {"others_between_regions_ms", "ms", "CPU of every thread but main while no region ran"},
      {"regions", "1", "outermost parallel (and host teams) regions, through every entry point of both ABIs (GOMP_*, __kmpc_fork_*)"},
      {"regions_per_s", "1/s", "regions / wall time"},
      {"region_share", "1", "share of the wall time with a region running"},
      {"region_us_mean", "us", "mean duration of a region"},
      {"region_us_p50", "us", "median duration (exact up to 16384 regions, then of a uniform sample of 16384)"},
      {"region_us_p90", "us", "90th percentile duration (exact up to 16384 regions, then of a uniform sample)"},
      {"region_us_p99", "us", "99th percentile duration (exact up to 16384 regions, then of a uniform sample)"},
      {"max_team", "1", "largest team that ran a region"},
      {"gaps", "1", "stretches of at least gap_min_ms without a region (a loop's sleep, a GPU wait)"},
      {"gap_ms_median", "ms", "median length of a gap"},
      {"gap_omp_cpu_ms_median", "ms", "median CPU the team burned in a gap"},
      {"gap_omp_cpu_ms_total", "ms", "CPU the team burned in all gaps"},
      {"gap_tail_ms_median", "ms", "median time from a gap's start to the end of the team's burn in it"},
      {"gap_tail_ms_p90", "ms", "90th percentile of the same"},
      {"gap_others_wait_ms_median", "ms", "median run-queue wait in a gap of the threads but main: spinners that had no CPU"},
      {"threads_max", "1", "threads alive at once (most seen)"},
      {"threads_omp", "1", "threads that ran a region as team members"},
      {"sampler_cpu_ms", "ms", "the probe's own threads' CPU (class sampler: the burn sampler and the NVML thread)"},
      {"sampler_share", "1", "sampler_cpu_ms / wall_ms: the sampling overhead in cores"},
      {"samples", "1", "samples taken"},
      {"regions_nested", "1", "regions started inside another region (not in regions; in the summary per entry point)"},
      {"region_depth_max", "1", "deepest nesting of a region seen (0: none nested)"},
      {"cpu_children_ms", "ms", "CPU of the command's other processes: forked children that did not exec a probed program (DataLoader workers, multiprocessing pools; part of cpu_ms), and in run/tune rows also the command's other probed processes"},
      {"child_processes", "1", "forked child processes measured from this one (sampled every 50 ms, and at their end)"},
      {"wait_ms", "ms", "run-queue wait of every thread of the program but the sampler: time runnable but not running (each thread's schedstat run delay, read at every sample)"},
      {"wait_main_ms", "ms", "the main thread's run-queue wait"},
      {"wait_omp_ms", "ms", "the OpenMP team members' run-queue wait (a spinning worker without a CPU, or one waiting to start a region)"},
      {"wait_other_ms", "ms", "run-queue wait of every other thread (Python's, loaders', the runtime's helpers, the CUDA driver's, pin-memory)"},
      {"cpu_cuda_ms", "ms", "CPU of the threads the CUDA driver created (class cuda: pthread_create called from libcuda.so)"},
      {"cpu_pin_ms", "ms", "CPU of the threads that named themselves pt_data_pin: PyTorch DataLoader's pin-memory thread (class pin)"},
      {"main_core_share", "1", "cpu_main_ms / wall_ms: the share of a core the main thread used"},
      {"gpu_busy_share", "1", "share of the time a kernel ran on the GPU (NVML's utilisation: the whole device, every process; one sample per 1/6-1 s), over the probe's lifetime, mean of the process's GPUs (those it has a context on or NVML lists it on; every sampled GPU when none is known); empty when none was sampled"},
      {"gpus_sampled", "1", "GPUs gpu_busy_share is over: the process's own GPUs with NVML utilisation samples in the probe's lifetime (every sampled GPU when none is known to be the process's; 0 when the process never loaded the CUDA driver)"},
      {"gpu_samples", "1", "NVML utilisation samples of the sampled GPUs in the probe's lifetime"},
      // The phases (docs/probe.md, "Phases"): empty without a steady phase (no device work, no region).
      {"startup_ms", "ms", "the startup: from the probe's load to the program's first training step it recognises (the first of a run of repeated waits through the CUDA driver, src/cuda/driver_calls.h's StepRun: as that step's wait returns), else to its first device work (its first wait or launch), or, in a program that did none, to its first OpenMP region (context startup_ends, steady_from; the startup's device work in the summary's startup_device)"},
      {"startup_cpu_ms", "ms", "CPU of every thread (the sampler excluded) and of the forked children during the startup"},
      {"steady_ms", "ms", "the steady phase: from the startup's end to the program's end"},
      {"steady_cpu_ms", "ms", "CPU of every thread (the sampler excluded) and of the forked children during the steady phase"},
      {"steady_cpu_main_ms", "ms", "the main thread's CPU during the steady phase"},
      {"steady_main_core_share", "1", "steady_cpu_main_ms / steady_ms: the share of a core the main thread used in the steady phase"},
      {"steady_wait_main_ms", "ms", "the main thread's run-queue wait during the steady phase: ready to run, no CPU for it (other threads or processes held the cores)"},
      {"steady_children_cpu_ms", "ms", "the forked children's CPU (DataLoader workers) during the steady phase"},
      {"steady_gpu_busy_share", "1", "gpu_busy_share over the steady phase alone; empty when no GPU was sampled then"},
      // The CPU quota's throttling (src/core/slot.h): the cpu.stat of the cgroup whose quota is the
      // tightest, read at the probe's start, the steady phase's start and the end; every process of
      // that cgroup counts. Empty without a quota.
      {"quota_periods", "1", "the quota's periods (cgroup cpu.stat nr_periods) that passed while the probe ran: periods in which the cgroup ran"},
      {"throttled_periods", "1", "of those, the periods in which the cgroup used up its quota and its threads were held back until the next (nr_throttled)"},
      {"throttled_ms", "ms", "the time the cgroup's threads were held back for the quota (v2 throttled_usec, v1 throttled_time): a thread waiting for its quota is not idle"},
      {"steady_quota_periods", "1", "quota_periods during the steady phase"},
      {"steady_throttled_periods", "1", "throttled_periods during the steady phase"},
      {"steady_throttled_ms", "ms", "throttled_ms during the steady phase"},
      // The CUDA driver's calls (src/cuda/driver_calls.h) in the steady phase: every thread, then the main thread's own.
      {"sync_wait_ms", "ms", "time every thread spent inside the CUDA driver's waits for the device (stream, event and context synchronisation, synchronous copies) in the steady phase (the startup's: the summary's startup_device)"},
      {"sync_cpu_ms", "ms", "the CPU those threads used inside the waits (a spinning wait: about its time; a blocking one: about none)"},
      {"syncs", "1", "the driver's waits called in the steady phase, every thread"},
      {"launches", "1", "kernel and graph launches through the driver in the steady phase, every thread"},
      {"launch_ms", "ms", "time inside the launches, every thread"},
      {"launch_cpu_ms", "ms", "CPU inside the launches, every thread (the thread's CPU clock read on one launch in 16, the rest at their share)"},
      {"main_sync_wait_ms", "ms", "sync_wait_ms of the main thread alone"},
      {"main_sync_cpu_ms", "ms", "sync_cpu_ms of the main thread alone"},
      {"main_syncs", "1", "syncs of the main thread alone"},
      {"main_launches", "1", "launches of the main thread alone"},
      {"main_launch_ms", "ms", "launch_ms of the main thread alone"},
      {"main_launch_cpu_ms", "ms", "launch_cpu_ms of the main thread alone"},
  };
  return table;
}

}  // namespace threadburn::probe
