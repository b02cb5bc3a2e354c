// libthreadburn_probe.so: LD_PRELOAD it into any dynamically linked program
// (Python with PyTorch included) to see every OpenMP parallel region and the
// CPU its threads burn between them, with no privileges and no change to the
// program. Loaded with THREADBURN_PROBE_DIR set, it
//  - interposes every OpenMP entry point that starts a team, GOMP_* and
//    __kmpc_fork_* (omptap): every region's start, end, team, caller, entry
//    point and nesting depth; team members are marked as OpenMP workers;
//  - measures the CPU of its forked child processes (DataLoader workers,
//    multiprocessing pools) from /proc every 50 ms and at their end, as the
//    class "worker processes" (cpu_children_ms, part of cpu_ms; children.h);
//  - runs the core's burn sampler inside the program (per-thread CPU clocks,
//    1 ms while a burn after a region is being located, 10 ms otherwise);
//  - classes the CUDA driver's threads and PyTorch's pin-memory thread as
//    they are created or name themselves (thread_tap.h), and, in a process
//    whose program uses CUDA, samples the GPUs' busy share through NVML
//    (src/cuda/nvml_sampler.h);
//  - writes, when the program ends (exit, return from main, SIGTERM, and
//    SIGINT unless the program handles it itself, as Python does by raising
//    KeyboardInterrupt and exiting normally), into THREADBURN_PROBE_DIR:
//      probe-<pid>.json           the summary (report.h's counters, regions,
//                                 per-thread CPU, the settings in force)
//      probe-<pid>.timeline.csv   cores by class of thread and per thread over
//                                 time, regions running (src/core/timeline.h)
//      probe-<pid>.gaps.csv       each gap between regions: length, burn, tail
// It also writes probe-<pid>.started at once: a parent probe leaves a child
// that has it (a child that exec'd a program, which loads the probe anew and
// writes its own files) to itself. A forked child that does not exec runs no
// probe of its own (its threads did not survive the fork): its parent
// measures it. Without THREADBURN_PROBE_DIR the probe only forwards.
// THREADBURN_PROBE_DESCRIBE=1 writes describe.json (counters, schema, knobs) and
// nothing else: how `threadburn tune` learns the columns before any run.
// THREADBURN_CUDA_SYNC (spin, yield, blocking_sync) sets the CUDA host wait
// policy in the constructor, with or without THREADBURN_PROBE_DIR, and the
// summary says what was in force (src/cuda/driver_policy.h; docs/probe.md).
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/clock.h"
#include "core/json.h"
#include "core/procfs.h"
#include "core/sampler.h"
#include "core/rules.h"
#include "core/schema.h"
#include "core/stats.h"
#include "core/timeline.h"
#include "cuda/driver_calls.h"
#include "cuda/driver_policy.h"
#include "cuda/nvml_sampler.h"
#include "omptap/omptap.h"
#include "probe/children.h"
#include "probe/dlsym_tap.h"
#include "probe/inrun.h"
#include "probe/report.h"
#include "probe/thread_tap.h"
#include "runtime/runtime.h"
#include "core/slot.h"

namespace threadburn::probe {
namespace {

// The sampler's budget: at most this share of a core (the goal is 2 %; the
// rest is the report's own sample and the noise of the running average).
constexpr double kSamplerMaxShare = 0.015;

// One end of the startup (docs/probe.md, "Phases"): when it came and the
// CPU so far, by class and of the forked children.
struct Boundary {
  std::atomic<int64_t> t_ns{0};  // CLOCK_MONOTONIC; 0: not yet
  bool ready = false;            // cpu and children_ns taken (State::mu)
  ClassTotals cpu;
  int64_t children_ns = 0;
  CpuStat quota;  // the quota's cgroup's cpu.stat then (core/slot.h)
  std::vector<cuda::ThreadCalls> calls;  // each thread's waits and launches so far
  std::map<pid_t, int64_t> thread_cpu;   // each thread's CPU then
};

// The bursts of waits that may start the steady phase (cuda::StepRun): a
// snapshot at each, by index modulo kStepMarks (more than kStepRun: the
// run's first burst is still held when the run is confirmed; after that no
// more are taken).
constexpr int kStepMarks = 2 * cuda::kStepRun;
struct StepMark {
  int64_t index = -1;  // the burst it was taken at (State::mu)
  Boundary at;
};

struct State {
  std::string dir;
  pid_t pid = 0;
  int64_t start_ns = 0, gap_min_ns = kDefaultGapMinNs;
  std::unique_ptr<Children> children;
  std::unique_ptr<BurnSampler> sampler;
  std::unique_ptr<gpu::NvmlSampler> gpus;
  // Time inside outermost regions so far: closed regions plus the open one.
  std::atomic<int> active{0};
  std::atomic<int64_t> active_since{0}, inside_ns{0}, last_end{0};
  std::atomic<int> largest_team{1};  // the sampler re-lists threads when a team grows
  std::atomic<int64_t> regions_done{0};  // outermost regions ended (in-run progress)
  std::mutex mu;  // stats, gaps
  RegionStats stats;
  std::vector<Gap> gaps;
  std::atomic<bool> reported{false};
  std::mutex report_mu;  // held while report() runs
  std::atomic<bool> dnnl_isa_known{false};  // oneDNN answered (dnnl_cpu_isa): no more asking
  std::atomic<int64_t> dnnl_asked_ns{0};
  // The ends a startup may have: the first run of repeated waits (its first
  // burst's snapshot, once cuda::steady_start() names it), else the first
  // device work, else the first region.
  Boundary device, region;
  StepMark steps[kStepMarks];
  // The cgroup whose CPU quota is the tightest ("" without one) and its
  // cpu.stat at the probe's start: the throttling over the run.
  std::string quota_dir;
  CpuStat quota_start;
};

State* g_state = nullptr;

// The CPU so far (by class, per thread, the children's, the quota's) and
// each thread's waits and launches, read at once by the thread that got to
// a boundary (a pass over every thread's clock); `index` set with it, under
// State::mu (-2: none to set).
void snapshot(Boundary* b, StepMark* m = nullptr, int64_t index = -2) {
  State& s = *g_state;
  std::vector<ThreadCpu> threads;
  const ClassTotals cpu = s.sampler->sample_now(false, &threads);  // with the waits: the probe's sampler reads them (with_wait)
  const int64_t children = s.children->total_ns();
  const CpuStat quota = read_cpu_stat(s.quota_dir);
  std::vector<cuda::ThreadCalls> calls = cuda::thread_calls();
  std::lock_guard<std::mutex> lock(s.mu);
  b->cpu = cpu;
  b->children_ns = children;
  b->quota = quota;
  b->calls = std::move(calls);
  b->thread_cpu.clear();
  for (const ThreadCpu& t : threads) b->thread_cpu[t.tid] = t.cpu_ns;
  b->ready = true;
  if (m) m->index = index;
}

// The first device work or the first region: once.
void mark(Boundary* b, int64_t t_ns) {
  int64_t none = 0;
  if (!b->t_ns.compare_exchange_strong(none, t_ns, std::memory_order_acq_rel)) return;
  snapshot(b);
  // The steady phase of a CPU program begins: an in-run tune may steer it
  // from now on (a GPU program's, at its first run of repeated waits: on_step).
  if (b == &g_state->region) inrun::take(t_ns, inrun::kRegion);
}

void on_first_device_work(int64_t t_ns) {
  if (g_state) mark(&g_state->device, t_ns);
}

// A burst of waits that may start the run of steps: its snapshot; the run
// confirmed: the steady phase began at its first burst, and an in-run tune
// may steer this process from now on.
void on_step(int64_t index, int64_t t_ns, bool confirmed) {
  State* s = g_state;
  if (!s) return;
  if (confirmed) {
    inrun::take(t_ns, inrun::kDeviceWork);
    return;
  }
  StepMark& m = s->steps[index % kStepMarks];
  {
    std::lock_guard<std::mutex> lock(s->mu);
    m.index = -1;  // being replaced
    m.at.ready = false;
  }
  m.at.t_ns.store(t_ns, std::memory_order_relaxed);
  snapshot(&m.at, &m, index);
}

int64_t inside_regions_ns() {
  State& s = *g_state;
  int64_t v = s.inside_ns.load(std::memory_order_relaxed);
  if (s.active.load(std::memory_order_relaxed) > 0) v += wall_ns() - s.active_since.load(std::memory_order_relaxed);
  return v;
}

class Regions : public omptap::Listener {
 public:
  void on_begin(int64_t begin_ns, pid_t, int depth) override {
    if (depth != 0) return;
    State& s = *g_state;
    if (s.active.fetch_add(1, std::memory_order_acq_rel) != 0) return;
    s.active_since.store(begin_ns, std::memory_order_relaxed);
    if (s.region.t_ns.load(std::memory_order_relaxed) == 0) mark(&s.region, begin_ns);
    // oneDNN's ISA is asked while the program runs (at exit its state is
    // gone): at a region's start, at most every 50 ms, until it answers.
    if (!s.dnnl_isa_known.load(std::memory_order_relaxed) &&
        begin_ns - s.dnnl_asked_ns.load(std::memory_order_relaxed) >= 50 * kNsPerMsInt) {
      s.dnnl_asked_ns.store(begin_ns, std::memory_order_relaxed);
      s.dnnl_isa_known.store(dnnl_cpu_isa() != "n/a", std::memory_order_relaxed);
    }
    const int64_t last = s.last_end.load(std::memory_order_relaxed);
    if (last > 0 && begin_ns - last >= s.gap_min_ns) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.gaps.push_back({last, begin_ns, false});
    }
  }
  void on_end(const omptap::Region& r) override {
    State& s = *g_state;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      s.stats.add_region(static_cast<int>(r.entry), r.depth, r.end_ns - r.begin_ns, r.team);
    }
    if (r.depth != 0) return;
    s.regions_done.fetch_add(1, std::memory_order_relaxed);
    inrun::saw_region(r.team, r.requested);
    const int64_t since = s.active_since.load(std::memory_order_relaxed);
    if (r.team > s.largest_team.load(std::memory_order_relaxed)) {
      s.largest_team.store(r.team, std::memory_order_relaxed);
      s.sampler->request_relist();  // new workers: their CPU so far should not land in a gap
    }
    if (s.active.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      s.inside_ns.fetch_add(r.end_ns - since, std::memory_order_relaxed);
      s.last_end.store(r.end_ns, std::memory_order_relaxed);
      s.sampler->kick();  // the team may burn now: sample fast until it stops
    }
  }
};

// The listener, never destroyed ("What the exit path reads", above report()):
// a team may end a region on another thread while the process exits.
Regions& regions() {
  static Regions& r = *new Regions;
  return r;
}


// The CUDA host wait policy: set at load, read back while the program runs
// (a CUDA runtime may release its contexts in an exit handler, which runs
// before the report) and at the end, once (cuda_report()).
cuda::DriverPolicy* g_cuda = nullptr;
constexpr int64_t kCudaObservePeriodNs = 200 * 1000000LL;
std::atomic<int64_t> g_cuda_observed_ns{0};

void observe_cuda() {
  const int64_t now = wall_ns();
  if (now - g_cuda_observed_ns.load(std::memory_order_relaxed) < kCudaObservePeriodNs) return;
  g_cuda_observed_ns.store(now, std::memory_order_relaxed);
  g_cuda->observe();
}

const cuda::PolicyReport& cuda_report() {
  static const cuda::PolicyReport* report = new cuda::PolicyReport(g_cuda->finish());
  return *report;
}

// "cuda": the policy asked, the one in force, and each device as seen.
void write_cuda(JsonWriter* j, const cuda::PolicyReport& r) {
  j->key("cuda").begin_object().field("requested", r.requested).field("in_force", r.in_force);
  j->key("devices").begin_array();
  for (const cuda::DeviceState& d : r.per_device) {
    j->begin_object().field("device", d.device).key("active_before");
    d.active_before ? j->value(*d.active_before) : j->null();
    j->key("set_rc");
    d.set_rc ? j->value(*d.set_rc) : j->null();
    j->field("flags_at_exit", d.flags_at_exit).field("seen_active", d.seen_active).end_object();
  }
  j->end_array().field("note", r.note).end_object();
}

int64_t env_int(const char* name, int64_t fallback, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  return (*end == '\0' && x >= lo && x <= hi) ? x : fallback;
}

std::string command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), {}), out;
  for (char c : raw) out += c == '\0' ? ' ' : c;
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

std::string stem() { return g_state->dir + "/probe-" + std::to_string(g_state->pid); }

// The startup's end the summary reports: the first device work when the
// program did any (the same point in every setting a tune compares, where an
// OpenMP region before it may run under one thread count and not another),
// else its first OpenMP region; none without either.
struct Phase {
  const char* ends = "none";  // device | openmp | none
  const char* from = "none";  // steps (a run of repeated waits) | first_device_work | first_region | none
  int64_t t_ns = 0;
  ClassTotals cpu;
  int64_t children_ns = 0;
  CpuStat quota;
  std::vector<cuda::ThreadCalls> calls;  // the waits and launches of the startup, per thread
  std::map<pid_t, int64_t> thread_cpu;
};

Phase chosen_phase() {
  State& s = *g_state;
  const cuda::StepStart run = cuda::steady_start();
  std::lock_guard<std::mutex> lock(s.mu);
  const StepMark& m = s.steps[run.index < 0 ? 0 : run.index % kStepMarks];
  const bool stepped = run.index >= 0 && m.index == run.index && m.at.ready;
  Phase p;
  for (const auto& [b, ends, from] : {std::tuple<const Boundary*, const char*, const char*>{
                                          stepped ? &m.at : nullptr, "device", "steps"},
                                      {&s.device, "device", "first_device_work"}, {&s.region, "openmp", "first_region"}}) {
    if (!b || !b->ready) continue;
    p.ends = ends;
    p.from = from;
    p.t_ns = b->t_ns.load(std::memory_order_relaxed);
    p.cpu = b->cpu;
    p.children_ns = b->children_ns;
    p.quota = b->quota;
    p.calls = b->calls;
    p.thread_cpu = b->thread_cpu;
    break;
  }
  return p;
}

// A thread's waits and launches since a snapshot (its tallies then; a
// thread not in it: all of them).
cuda::ThreadCalls since(const cuda::ThreadCalls& now, const std::vector<cuda::ThreadCalls>& then) {
  cuda::ThreadCalls d = now;
  for (const cuda::ThreadCalls& t : then) {
    if (t.tid != now.tid) continue;
    for (int k = 0; k < cuda::kCallKinds; ++k) {
      d.of[k].calls -= t.of[k].calls;
      d.of[k].wall_ns -= t.of[k].wall_ns;
      d.of[k].cpu_ns -= t.of[k].cpu_ns;
    }
    d.hidden_waits -= t.hidden_waits;
    d.hidden_wait_ns -= t.hidden_wait_ns;
    d.poll_loops -= t.poll_loops;
    d.poll_wall_ns -= t.poll_wall_ns;
  }
  return d;
}

// What the summary's counters are computed from.
struct Figures {
  std::vector<BurnSample> samples;
  std::vector<ThreadCpu> threads;
  ClassTotals totals;  // by class at the end (the same reads as the phase's boundary)
  ClassArray wait{};
  std::vector<GapBurn> gaps;
  RegionStats stats;
  int64_t end_ns = 0, children_ns = 0;
  int threads_max = 0, child_processes = 0;
  std::vector<gpu::Summary> gpus;
  std::string gpu_note;
  Phase phase;
  std::vector<gpu::Summary> steady_gpus;   // the GPUs over the steady phase
  std::vector<cuda::ThreadCalls> calls;    // the driver's waits and launches, per thread
  std::map<pid_t, int64_t> cpu_at_phase;   // each thread's CPU when the steady phase began (its snapshot)
  CpuStat quota_end;                       // the quota's cgroup's cpu.stat at the end
};

// The throttling of the quota's cgroup between two reads of its cpu.stat
// (prefix "" the run's, "steady_" the steady phase's); NaN without a quota.
void quota_values(const std::string& prefix, const CpuStat& later, const CpuStat& earlier,
                  std::map<std::string, double>* out) {
  const CpuStat d = cpu_stat_delta(later, earlier);
  const double none = std::numeric_limits<double>::quiet_NaN();
  (*out)[prefix + "quota_periods"] = d.ok ? static_cast<double>(d.nr_periods) : none;
  (*out)[prefix + "throttled_periods"] = d.ok ? static_cast<double>(d.nr_throttled) : none;
  (*out)[prefix + "throttled_ms"] = d.ok ? static_cast<double>(d.throttled_ns) / 1e6 : none;
}

// The counters of the phases and of the driver's waits and launches
// (report.cc's table); NaN where a figure does not exist (no steady phase).
void phase_values(const Figures& f, std::map<std::string, double>* out) {
  State& s = *g_state;
  const double none = std::numeric_limits<double>::quiet_NaN();
  const Phase& p = f.phase;
  const bool phased = p.t_ns > 0;
  const int main = index_of(ThreadClass::kMain);
  const double steady_ms = phased ? ns_to_ms(f.end_ns - p.t_ns) : none;
  const double steady_main = phased ? ns_to_ms(f.totals.cpu_ns[main] - p.cpu.cpu_ns[main]) : none;
  const int64_t children = f.children_ns - p.children_ns;
  (*out)["startup_ms"] = phased ? ns_to_ms(p.t_ns - s.start_ns) : none;
  (*out)["startup_cpu_ms"] = phased ? ns_to_ms(p.cpu.all_but_sampler_cpu_ns() + p.children_ns) : none;
  (*out)["steady_ms"] = steady_ms;
  (*out)["steady_cpu_ms"] =
      phased ? ns_to_ms(f.totals.all_but_sampler_cpu_ns() - p.cpu.all_but_sampler_cpu_ns() + children) : none;
  (*out)["steady_cpu_main_ms"] = steady_main;
  (*out)["steady_main_core_share"] = phased && steady_ms > 0 ? steady_main / steady_ms : none;
  (*out)["steady_wait_main_ms"] = phased ? ns_to_ms(f.wait[main] - p.cpu.wait_ns[main]) : none;
  (*out)["steady_children_cpu_ms"] = phased ? ns_to_ms(children) : none;
  (*out)["steady_gpu_busy_share"] = phased ? gpu::totals(f.steady_gpus).busy_share : none;
  quota_values("steady_", f.quota_end, phased ? p.quota : CpuStat{}, out);
  std::vector<cuda::ThreadCalls> main_calls;
  for (const cuda::ThreadCalls& t : f.calls) {
    if (t.tid == s.pid) main_calls.push_back(t);
  }
  for (const auto& [prefix, threads] : {std::pair<std::string, const std::vector<cuda::ThreadCalls>*>{"", &f.calls},
                                        {"main_", &main_calls}}) {
    const cuda::CallTally waits = cuda::total(*threads, cuda::CallKind::kWait);
    const cuda::CallTally launches = cuda::total(*threads, cuda::CallKind::kLaunch);
    (*out)[prefix + "sync_wait_ms"] = ns_to_ms(waits.wall_ns);
    (*out)[prefix + "sync_cpu_ms"] = ns_to_ms(waits.cpu_ns);
    (*out)[prefix + "syncs"] = static_cast<double>(waits.calls);
    (*out)[prefix + "launches"] = static_cast<double>(launches.calls);
    (*out)[prefix + "launch_ms"] = ns_to_ms(launches.wall_ns);
    (*out)[prefix + "launch_cpu_ms"] = ns_to_ms(launches.cpu_ns);
  }
}

// Every counter of report.h's table.
std::map<std::string, double> counter_values(const Figures& f) {
  State& s = *g_state;
  const double wall_ms = ns_to_ms(f.end_ns - s.start_ns);
  const RegionSplit split = split_by_regions(f.samples);
  ClassArray cpu{};
  for (const auto& t : f.threads) cpu[index_of(t.cls)] += t.cpu_ns;
  const int omp = index_of(ThreadClass::kOmp), main = index_of(ThreadClass::kMain);
  const int sampler = index_of(ThreadClass::kSampler);
  const int cuda = index_of(ThreadClass::kCuda), pin = index_of(ThreadClass::kPin);
  int64_t all = 0, other = 0, others_between = 0, wait_all = 0, wait_other = 0;
  for (int c = 0; c < kThreadClasses; ++c) {
    if (c != sampler) all += cpu[c];
    if (c != sampler && c != main && c != omp && c != cuda && c != pin) other += cpu[c];
    if (c != sampler && c != main) others_between += split.between_ns[c];
    if (c != sampler) wait_all += f.wait[c];
    if (c != sampler && c != main && c != omp) wait_other += f.wait[c];
  }
  std::vector<double> gap_len, gap_cpu, gap_tail, gap_wait;
  double gap_total = 0;
  for (const GapBurn& gb : f.gaps) {
    if (!gb.measured) continue;
    gap_len.push_back(gb.length_ms);
    gap_cpu.push_back(gb.omp_cpu_ms);
    gap_tail.push_back(gb.omp_tail_ms);
    gap_wait.push_back(gb.others_wait_ms);
    gap_total += gb.omp_cpu_ms;
  }
  int team_threads = 0;
  for (const auto& t : f.threads) team_threads += t.cls == ThreadClass::kOmp;
  const double sampler_ms = ns_to_ms(cpu[sampler]);
  const RegionStats& stats = f.stats;
  const gpu::Totals gpus = gpu::totals(f.gpus);
  std::map<std::string, double> values = {
      {"wall_ms", wall_ms},
      {"cpu_ms", ns_to_ms(all + f.children_ns)},
      {"cpu_main_ms", ns_to_ms(cpu[main])},
      {"cpu_omp_ms", ns_to_ms(cpu[omp])},
      {"cpu_other_ms", ns_to_ms(other)},
      {"omp_in_regions_ms", ns_to_ms(split.in_regions_ns[omp])},
      {"omp_between_regions_ms", ns_to_ms(split.between_ns[omp])},
      {"others_between_regions_ms", ns_to_ms(others_between)},
      {"regions", static_cast<double>(stats.count)},
      {"regions_per_s", wall_ms > 0 ? static_cast<double>(stats.count) / (wall_ms / 1e3) : 0},
      {"region_share", wall_ms > 0 ? ns_to_ms(s.inside_ns.load()) / wall_ms : 0},
      {"region_us_mean", stats.count > 0 ? static_cast<double>(stats.total_ns) / 1e3 / static_cast<double>(stats.count) : 0},
      {"region_us_p50", stats.quantile_us(0.5)},
      {"region_us_p90", stats.quantile_us(0.9)},
      {"region_us_p99", stats.quantile_us(0.99)},
      {"max_team", static_cast<double>(stats.max_team)},
      {"gaps", static_cast<double>(gap_len.size())},
      {"gap_ms_median", median(gap_len)},
      {"gap_omp_cpu_ms_median", median(gap_cpu)},
      {"gap_omp_cpu_ms_total", gap_total},
      {"gap_tail_ms_median", median(gap_tail)},
      {"gap_tail_ms_p90", percentile(gap_tail, 0.9)},
      {"gap_others_wait_ms_median", median(gap_wait)},
      {"threads_max", static_cast<double>(f.threads_max)},
      {"threads_omp", static_cast<double>(team_threads)},
      {"sampler_cpu_ms", sampler_ms},
      {"sampler_share", wall_ms > 0 ? sampler_ms / wall_ms : 0},
      {"samples", static_cast<double>(f.samples.size())},
      {"regions_nested", static_cast<double>(stats.nested)},
      {"region_depth_max", static_cast<double>(stats.max_depth)},
      {"cpu_children_ms", ns_to_ms(f.children_ns)},
      {"child_processes", static_cast<double>(f.child_processes)},
      {"wait_ms", ns_to_ms(wait_all)},
      {"wait_main_ms", ns_to_ms(f.wait[main])},
      {"wait_omp_ms", ns_to_ms(f.wait[omp])},
      {"wait_other_ms", ns_to_ms(wait_other)},
      {"cpu_cuda_ms", ns_to_ms(cpu[cuda])},
      {"cpu_pin_ms", ns_to_ms(cpu[pin])},
      {"main_core_share", wall_ms > 0 ? ns_to_ms(cpu[main]) / wall_ms : 0},
      {"gpu_busy_share", gpus.busy_share},
      {"gpus_sampled", static_cast<double>(gpus.gpus_sampled)},
      {"gpu_samples", static_cast<double>(gpus.samples)},
  };
  quota_values("", f.quota_end, s.quota_start, &values);
  phase_values(f, &values);
  return values;
}

// "device_calls": per thread that called the driver, its class, its waits
// and launches in the steady phase (and their counts in the startup), its
// CPU (the run's, and the steady phase's: from its clock read at the phase's
// start, else the per-thread snapshot at or before it, 10 ms apart; null
// without a steady phase): the threads that carry the device work, whichever
// they are (docs/cuda.md, "Every thread that launches or waits").
void write_calls(JsonWriter* j, const Figures& f) {
  const std::vector<cuda::ThreadCalls>& calls = f.calls;
  j->key("device_calls").begin_array();
  for (const cuda::ThreadCalls& t : calls) {
    const char* cls = "other";
    const ThreadCpu* cpu = nullptr;
    for (const ThreadCpu& c : f.threads) {
      if (c.tid == t.tid) {
        cls = thread_class_name(c.cls);
        cpu = &c;
      }
    }
    const cuda::CallTally& w = t.of[static_cast<int>(cuda::CallKind::kWait)];
    const cuda::CallTally& l = t.of[static_cast<int>(cuda::CallKind::kLaunch)];
    j->begin_object().field("tid", static_cast<int64_t>(t.tid)).field("class", cls).field("syncs", w.calls)
        .field("sync_wait_ms", ns_to_ms(w.wall_ns)).field("sync_cpu_ms", ns_to_ms(w.cpu_ns)).field("launches", l.calls)
        .field("launch_ms", ns_to_ms(l.wall_ns)).field("launch_cpu_ms", ns_to_ms(l.cpu_ns))
        .field("name", cpu && cpu->alive ? thread_name(0, t.tid) : "")
        .field("hidden_waits", t.hidden_waits).field("hidden_wait_ms", ns_to_ms(t.hidden_wait_ns))
        .field("poll_loops", t.poll_loops).field("poll_wait_ms", ns_to_ms(t.poll_wall_ns));
    // The same thread's in the startup (dataset preparation, model.cuda(), the first step).
    cuda::ThreadCalls before;
    for (const cuda::ThreadCalls& b : f.phase.calls) {
      if (b.tid == t.tid) before = b;
    }
    j->field("startup_syncs", before.of[static_cast<int>(cuda::CallKind::kWait)].calls)
        .field("startup_launches", before.of[static_cast<int>(cuda::CallKind::kLaunch)].calls)
        .field("startup_hidden_waits", before.hidden_waits).field("startup_poll_loops", before.poll_loops);
    j->key("cpu_ms");
    cpu ? j->value(ns_to_ms(cpu->cpu_ns)) : j->null();
    j->key("steady_cpu_ms");
    const auto at = f.cpu_at_phase.find(t.tid);
    if (cpu && f.phase.t_ns > 0) {
      j->value(ns_to_ms(cpu->cpu_ns - (at == f.cpu_at_phase.end() ? 0 : at->second)));
    } else {
      j->null();
    }
    j->end_object();
  }
  j->end_array();
  // "steady_classes": per class of thread, its CPU and run-queue wait over the
  // steady phase (a launching thread alone in its class: its own); empty
  // without a steady phase.
  j->key("steady_classes").begin_object();
  for (int c = 0; f.phase.t_ns > 0 && c < kThreadClasses; ++c) {
    j->key(thread_class_name(static_cast<ThreadClass>(c))).begin_object()
        .field("cpu_ms", ns_to_ms(f.totals.cpu_ns[c] - f.phase.cpu.cpu_ns[c]))
        .field("wait_ms", ns_to_ms(f.wait[c] - f.phase.cpu.wait_ns[c])).end_object();
  }
  j->end_object();
}

// "startup_device": the device work before the steady phase (dataset
// preparation, model.cuda(), a compile, the first step): when it began
// (ms from the probe's start; null: none) and its waits and launches, every
// thread; the counters and device_calls hold the steady phase's alone.
void write_startup_device(JsonWriter* j, const Figures& f) {
  const int64_t first = cuda::first_work_ns();
  const cuda::CallTally w = cuda::total(f.phase.calls, cuda::CallKind::kWait);
  const cuda::CallTally l = cuda::total(f.phase.calls, cuda::CallKind::kLaunch);
  j->key("startup_device").begin_object().key("first_work_ms");
  first > 0 ? j->value(ns_to_ms(first - g_state->start_ns)) : j->null();
  j->field("syncs", w.calls).field("sync_wait_ms", ns_to_ms(w.wall_ns)).field("sync_cpu_ms", ns_to_ms(w.cpu_ns))
      .field("launches", l.calls).field("launch_ms", ns_to_ms(l.wall_ns)).field("launch_cpu_ms", ns_to_ms(l.cpu_ns))
      .end_object();
}

// What the probe could see of the driver's calls, in one line.
std::string calls_note() {
  if (!dlsym_tap::installed()) return "the driver's waits and launches are not measured on this architecture";
  const int left = cuda::unwrapped_entry_points();
  if (left > 0) return std::to_string(left) + " of the driver's entry points were left unwrapped (every slot of their name taken)";
  return "none";
}

// The summary: every counter of report.h, the region histogram, threads, the
// GPUs, context.
void write_summary(const Figures& f) {
  State& s = *g_state;
  const double wall_ms = ns_to_ms(f.end_ns - s.start_ns);
  const std::map<std::string, double> values = counter_values(f);
  const RegionStats& stats = f.stats;
  JsonWriter j;
  j.begin_object().field("schema_version", kSchemaVersion).field("pid", static_cast<int64_t>(s.pid))
      .field("command", command_line()).field("gap_min_ms", ns_to_ms(s.gap_min_ns))
      // CLOCK_MONOTONIC of the probe's start and of this last sample: other
      // recordings of the same run (the exact monitor's) align with them.
      .field("start_mono_ms", ns_to_ms(s.start_ns)).field("end_mono_ms", ns_to_ms(f.end_ns))
      .field("omptap_installed", omptap::installed());
  j.key("counters").begin_object();
  for (const CounterSpec& c : counters()) j.field(c.name, values.at(c.name));
  j.end_object();
  j.key("region_duration_buckets_ns").begin_array();
  for (int k = 0; k < kDurationBuckets; ++k) {
    if (stats.buckets[static_cast<size_t>(k)] > 0) {
      j.begin_object().field("from", static_cast<int64_t>(1) << k).field("count", stats.buckets[static_cast<size_t>(k)]).end_object();
    }
  }
  j.end_array();
  j.field("region_durations_exact", stats.durations.exact());
  // Per entry point: outermost regions, their time share and exact duration
  // percentiles, the team of each (size -> regions), and the nested ones.
  j.key("entry_points").begin_array();
  for (const auto& [entry, e] : stats.entries) {
    j.begin_object().field("name", omptap::entry_name(static_cast<omptap::Entry>(entry))).field("regions", e.count)
        .field("nested", e.nested).field("share", wall_ms > 0 ? ns_to_ms(e.total_ns) / wall_ms : 0)
        .field("us_mean", e.count > 0 ? static_cast<double>(e.total_ns) / 1e3 / static_cast<double>(e.count) : 0)
        .field("us_p50", e.durations.quantile_us(0.5)).field("us_p90", e.durations.quantile_us(0.9))
        .field("us_p99", e.durations.quantile_us(0.99)).field("durations_exact", e.durations.exact())
        .field("max_team", static_cast<int64_t>(e.max_team));
    j.key("teams").begin_object();
    for (const auto& [team, n] : e.teams) j.field(std::to_string(team), n);
    j.end_object().end_object();
  }
  j.end_array();
  j.key("gpus");
  gpu::write_gpus(&j, f.gpus);
  j.key("steady_gpus");
  gpu::write_gpus(&j, f.steady_gpus);
  write_calls(&j, f);
  j.key("threads").begin_array();
  for (const auto& t : f.threads) {
    j.begin_object().field("tid", static_cast<int64_t>(t.tid)).field("name", t.alive ? thread_name(0, t.tid) : "")
        .field("class", thread_class_name(t.cls)).field("cpu_ms", ns_to_ms(t.cpu_ns)).field("alive", t.alive).end_object();
  }
  j.end_array();
  write_cuda(&j, cuda_report());
  j.key("context").begin_object();
  for (const auto& [k, v] : openmp_context(false)) j.field(k, v);  // at exit: oneDNN is not asked
  j.field("gpu_note", f.gpu_note);
  for (const auto& [k, v] : cuda::context_of(cuda_report())) j.field(k, v);
  j.field("startup_ends", f.phase.ends).field("steady_from", f.phase.from).field("driver_calls_note", calls_note());
  j.end_object();
  write_startup_device(&j, f);
  j.end_object();
  write_file(stem() + ".json", j.str() + "\n");
}

// The one timeline (src/core/timeline.h) of the process: by class over time
// (cuda and pin when they used CPU), the share of each interval a region ran,
// the worker processes, each thread (only its intervals with CPU) and each
// GPU's busy share.
void write_timeline(const std::vector<BurnSample>& samples, const std::vector<ThreadSnapshot>& snaps,
                    const std::vector<gpu::Series>& gpus, int64_t end_ns) {
  TimelineWriter tl("program_start");
  const int omp = index_of(ThreadClass::kOmp);
  std::vector<ThreadClass> extra;
  if (!samples.empty()) {
    for (ThreadClass c : {ThreadClass::kCuda, ThreadClass::kPin}) {
      if (samples.back().cpu_ns[index_of(c)] > samples.front().cpu_ns[index_of(c)]) extra.push_back(c);
    }
  }
  for (size_t i = 1; i < samples.size(); ++i) {
    const BurnSample& a = samples[i - 1];
    const BurnSample& b = samples[i];
    const double dt = static_cast<double>(b.t_ns - a.t_ns);
    if (dt <= 0) continue;
    const auto rate = [&](int c) { return static_cast<double>(b.cpu_ns[c] - a.cpu_ns[c]) / dt; };
    const double t = ns_to_ms(b.t_ns - g_state->start_ns);
    tl.add(t, kSeriesInRegion, static_cast<double>(b.mark_ns - a.mark_ns) / dt);
    tl.add(t, kSeriesOthers, static_cast<double>(b.others_cpu_ns() - a.others_cpu_ns()) / dt);
    tl.add(t, kSeriesMain, rate(index_of(ThreadClass::kMain)));
    tl.add(t, class_series(thread_class_name(ThreadClass::kOmp)), rate(omp));
    for (ThreadClass c : extra) tl.add(t, class_series(thread_class_name(c)), rate(index_of(c)));
    // children: the worker processes (forked children), read every 50 ms,
    // so their CPU lands in the interval of the read that saw it.
    tl.add(t, kSeriesChildren, static_cast<double>(b.extra_ns - a.extra_ns) / dt);
  }
  add_thread_series(snaps, g_state->start_ns, &tl);
  for (const gpu::Series& g : gpus) gpu::add_busy_series(g, g_state->start_ns, end_ns, g_state->start_ns, &tl);
  write_file(stem() + ".timeline.csv", tl.text());
}

void write_gaps(const std::vector<Gap>& gaps, const std::vector<GapBurn>& burns) {
  std::string out = "start_ms,length_ms,omp_cpu_ms,others_cpu_ms,others_wait_ms,omp_tail_ms,boundary_ms,tail_interval_ms,open,measured\n";
  for (size_t i = 0; i < gaps.size(); ++i) {
    char line[200];
    std::snprintf(line, sizeof line, "%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%d,%d\n", ns_to_ms(gaps[i].start_ns - g_state->start_ns),
                  burns[i].length_ms, burns[i].omp_cpu_ms, burns[i].others_cpu_ms, burns[i].others_wait_ms, burns[i].omp_tail_ms,
                  burns[i].boundary_ms, burns[i].tail_interval_ms,
                  gaps[i].open ? 1 : 0, burns[i].measured ? 1 : 0);
    out += line;
  }
  write_file(stem() + ".gaps.csv", out);
}

// What the exit path reads. report() runs among the process's exit handlers
// (atexit, registered in start()) or on the sampler thread after a signal,
// while the program's own threads may still run. Every object it, or any
// other exit or destructor path of the probe, touches must outlive it:
//  - a heap object never destroyed: State, g_cuda, the Regions listener,
//    cuda_report()'s, the function-local tables of src/runtime/runtime.cc,
//    report.cc's counters(), thread_class.cc's registry (`static T& x =
//    *new T`), made in start() or on first use; or
//  - a constant-initialised object with no destructor (atomics, pointers,
//    integers, arrays of const char*); or a local of report() itself.
// Never a static with a destructor, function-local or at namespace scope:
// made after atexit(report) (first used mid-run), it is destroyed before the
// report reads it, and a std::string longer than its inline buffer then
// reads as freed heap bytes (oneDNN's avx512_core_bf16 did). Never a
// namespace-scope object with a dynamic initialiser either: it may run after
// start() used it. No thread_local with a destructor: exit() destroys the
// exiting thread's before any exit handler. tests/bench/check_probe.py fails
// on a probe that registers any destructor at all (exit_statics) and on the
// bug itself (long_isa). A second caller of report() (the exit during a
// signal's report, or the reverse) waits for the first to finish: the files
// are whole when the process ends.
void report() {
  State* s = g_state;
  if (!s || s->pid != getpid()) return;
  std::lock_guard<std::mutex> once(s->report_mu);
  if (s->reported.exchange(true)) return;
  omptap::set_listener(nullptr);
  Figures f;
  f.children_ns = s->children->final_ns();
  // Run-queue waits by class: each thread's schedstat run delay, read at
  // every sample since its birth (a thread's last moments before its exit
  // are lost, at most one period).
  f.totals = s->sampler->sample_now(true, &f.threads);
  f.wait = f.totals.wait_ns;
  f.end_ns = wall_ns();
  f.quota_end = read_cpu_stat(s->quota_dir);
  f.phase = chosen_phase();
  // The waits and launches of the steady phase alone (those before: the startup's).
  for (const cuda::ThreadCalls& t : cuda::thread_calls()) f.calls.push_back(since(t, f.phase.calls));
  f.samples = s->sampler->window(0, f.end_ns);
  const auto snaps = s->sampler->thread_window(0, f.end_ns);
  f.cpu_at_phase = f.phase.thread_cpu;  // each thread's CPU read at the boundary (a thread born later: 0)
  for (const auto& snap : snaps) {  // else the last snapshot at or before the steady phase
    if (!f.phase.thread_cpu.empty() || f.phase.t_ns == 0 || snap.t_ns > f.phase.t_ns) break;
    f.cpu_at_phase.clear();
    for (const auto& t : snap.threads) f.cpu_at_phase[t.tid] = t.cpu_ns;
  }
  for (const auto& snap : snaps) {
    int alive = 0;
    for (const auto& t : snap.threads) alive += t.alive;
    f.threads_max = std::max(f.threads_max, alive);
  }
  f.child_processes = s->children->count();
  std::vector<Gap> gaps;
  {
    std::lock_guard<std::mutex> lock(s->mu);
    gaps = s->gaps;
    f.stats = s->stats;
  }
  const int64_t last = s->last_end.load();
  if (last > 0 && s->active.load() == 0 && f.end_ns - last >= s->gap_min_ns) gaps.push_back({last, f.end_ns, true});
  for (const Gap& gap : gaps) f.gaps.push_back(gap_burn(f.samples, gap));
  // After the last CPU sample: the driver's last read-back, then NVML's last
  // read (and its start, when that read-back is the first to see the program
  // use CUDA) are not in the CPU figures. The GPUs over the probe's lifetime.
  // The GPUs the process has a context on (its own, the busy share's), with
  // the wait policy each ran under (docs/cuda.md, "The process's GPUs").
  std::vector<gpu::ProcessContext> contexts;
  for (const cuda::DeviceState& d : cuda_report().per_device) {
    if (d.seen_active) contexts.push_back({d.device, d.pci_bus_id, d.flags_at_exit});
  }
  const gpu::NvmlResult nvml = s->gpus->finish(contexts);
  for (const gpu::Series& g : nvml.gpus) {
    f.gpus.push_back(gpu::summarize(g, s->start_ns, f.end_ns, s->start_ns));
    if (f.phase.t_ns > 0) f.steady_gpus.push_back(gpu::summarize(g, f.phase.t_ns, f.end_ns, s->start_ns));
  }
  f.gpu_note = nvml.note;
  write_summary(f);
  write_timeline(f.samples, snaps, nvml.gpus, f.end_ns);
  write_gaps(gaps, f.gaps);
  inrun::end();
}

// SIGTERM (and SIGINT where the program left it to the default): the handler
// does only what a handler may (an atomic store, a futex wake: nothing that
// locks or allocates), so that a signal landing while the interrupted thread
// holds the probe's mutex or the allocator's cannot deadlock the process.
// The sampler thread, woken, writes the report in a normal context
// (end_by_signal), then ends the process by the same signal with its default
// action: the program's exit status stays what it would have been unprobed,
// killed by the signal. Meanwhile the program runs on; more signals change
// nothing. A forked child that did not exec (no sampler thread, no report of
// its own) ends at once, as it would unprobed.
std::atomic<int> g_signalled{0};  // the first signal's number; 0: none
static_assert(std::atomic<int>::is_always_lock_free, "the signal handler needs a lock-free flag");

void default_action(int sig) {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  sigset_t one;
  sigemptyset(&one);
  sigaddset(&one, sig);
  pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
  raise(sig);  // from a handler: pending until it returns, then the default action
}

void on_signal(int sig) {
  const int saved_errno = errno;
  State* s = g_state;
  if (!s || s->pid != getpid()) {
    default_action(sig);
  } else {
    int none = 0;
    if (g_signalled.compare_exchange_strong(none, sig)) s->sampler->wake();
  }
  errno = saved_errno;
}

// On the sampler thread (BurnSampler::Options::on_wake), after a signal.
void end_by_signal() {
  const int sig = g_signalled.load(std::memory_order_acquire);
  if (sig == 0) return;
  report();  // waits for a report the exit path began
  default_action(sig);
  _exit(128 + sig);  // not reached: the default action of SIGTERM and SIGINT ends the process
}

void write_describe(const std::string& dir) {
  JsonWriter j;
  j.begin_object().field("schema_version", kSchemaVersion);
  describe_counters(&j, {&counters()});
  describe_rules(&j);
  describe_runtimes(&j);
  describe_knobs(&j);
  inrun::describe(&j);
  j.key("context").begin_object();
  for (const auto& [k, v] : openmp_context()) j.field(k, v);
  j.field("gpu_note", "none");
  for (const auto& [k, v] : cuda::context_of({})) j.field(k, v);
  j.field("startup_ends", "none").field("steady_from", "none").field("driver_calls_note", "none");
  j.end_object().end_object();
  write_file(dir + "/describe.json", j.str() + "\n");
}

__attribute__((constructor)) void start() {
  const char* dir = std::getenv("THREADBURN_PROBE_DIR");
  const bool describe = std::getenv("THREADBURN_PROBE_DESCRIBE") != nullptr;
  thread_tap::set_active(dir && *dir && !describe);
  g_cuda = new cuda::DriverPolicy;
  if (!dir || !*dir) {  // loaded but not asked: only forward GOMP_parallel, and set THREADBURN_CUDA_SYNC
    cuda::apply_from_environment(g_cuda, true);
    return;
  }
  if (describe) {
    write_describe(dir);
    return;
  }
  g_state = new State;
  State& s = *g_state;
  s.dir = dir;
  s.pid = getpid();
  s.start_ns = wall_ns();
  s.gap_min_ns = env_int("THREADBURN_PROBE_GAP_MIN_US", kDefaultGapMinNs / 1000, 10, 60000000) * 1000;
  s.quota_dir = read_slot().limit_dir;
  s.quota_start = read_cpu_stat(s.quota_dir);
  mark_current_thread(ThreadClass::kMain);  // the constructor runs on the program's first thread
  write_file(stem() + ".started", "");     // a parent probe leaves this process to us
  s.children = std::make_unique<Children>(s.dir);
  BurnSampler::Options o;
  o.period_ns = env_int("THREADBURN_PROBE_PERIOD_US", kDefaultSamplerPeriodNs / 1000, 100, 1000) * 1000;
  o.capacity = 1 << 19;  // 56 MB at most; at ~200 samples/s, 40 minutes of program
  o.with_wait = true;
  o.per_thread = true;
  o.per_thread_every_ns = 10 * kNsPerMsInt;
  o.on_wake = end_by_signal;  // the signal path's report (on_signal)
  o.mark = inside_regions_ns;
  o.extra = [] {
    observe_cuda();
    return g_state->children->total_ns();
  };
  o.max_share = kSamplerMaxShare;
  if (inrun::open_from_environment()) {  // threadburn tune --in-run steers this process through the probe
    o.on_sample = [](const BurnSample& sample) {
      inrun::publish(sample, g_state->regions_done.load(std::memory_order_relaxed),
                     g_state->last_end.load(std::memory_order_relaxed));
    };
    omptap::set_team_hook(inrun::team_hook);
    cuda::set_before_wait_hook(inrun::before_wait);
  }
  s.sampler = std::make_unique<BurnSampler>(o);
  // NVML only once the program uses CUDA: under a policy the probe has loaded
  // the driver into every process, wrappers included (driver_policy.h).
  s.gpus = std::make_unique<gpu::NvmlSampler>([] { return g_cuda->program_uses_cuda(); });
  omptap::set_listener(&regions());
  // The driver's entry points the program looks up from now on come back
  // wrapped; its first wait or launch ends the startup.
  cuda::set_first_work_hook(on_first_device_work);
  cuda::set_step_hook(on_step);
  dlsym_tap::set_wrapping(true);
  // After the sampler (a thread the driver starts is seen from its birth),
  // before atexit(report) (an exit handler the driver registers runs after it).
  cuda::apply_from_environment(g_cuda, false);
  // Whatever the report reads lives until the process ends, whenever it was
  // first made ("What the exit path reads", above report()).
  std::atexit(report);
  // SIGINT only where the program left it to the default (Python installs
  // its own later, raising KeyboardInterrupt: it exits through atexit).
  for (int sig : {SIGINT, SIGTERM}) {
    struct sigaction old {};
    if (sigaction(sig, nullptr, &old) != 0 || (old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) continue;
    struct sigaction act {};
    act.sa_handler = on_signal;
    sigemptyset(&act.sa_mask);
    act.sa_flags = SA_RESTART;  // the program's interrupted calls go on, as with signal()'s BSD semantics
    sigaction(sig, &act, nullptr);
  }
  // A forked child has no sampler thread: it stays out (no listener, no report).
  pthread_atfork(nullptr, nullptr, [] { omptap::set_listener(nullptr); });
}

}  // namespace
}  // namespace threadburn::probe
