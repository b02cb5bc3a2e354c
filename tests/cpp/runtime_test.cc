// Runtime detection and omptap. The parsing and the knob rules are checked on
// verbatim omp_display_env output and made-up environments; the live
// detection against expectations ctest passes in the environment (TB_EXPECT_*),
// once per runtime and setting (tests/cpp/CMakeLists.txt).
#include <gtest/gtest.h>
#include <omp.h>

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <cstdio>
#include <string>
#include <vector>
#if THREADBURN_HAVE_TBB
#include <oneapi/tbb/parallel_for.h>
#endif

#include "core/clock.h"
#include "core/stats.h"
#include "core/step_probe.h"
#include "core/thread_class.h"
#include "omptap/omptap.h"
#include "runtime/runtime.h"

namespace threadburn {
namespace {

const char* kGompDisplay =
    "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n  _OPENMP = '201511'\n  OMP_NUM_THREADS = '2'\n"
    "  OMP_WAIT_POLICY = 'PASSIVE'\n  GOMP_SPINCOUNT = '300000'\nOPENMP DISPLAY ENVIRONMENT END\n";
const char* kLlvmDisplay =
    "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n   _OPENMP='201611'\n  [host] KMP_BLOCKTIME='50'\n"
    "  [host] OMP_NUM_THREADS: value is not defined\n  [host] OMP_WAIT_POLICY='PASSIVE'\n";

EnvGetter env_of(const std::map<std::string, std::string>& env) {
  return [env](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
}

std::map<std::string, KnobStatus> by_name(const std::vector<KnobStatus>& v) {
  std::map<std::string, KnobStatus> out;
  for (const auto& k : v) out[k.name] = k;
  return out;
}

TEST(DisplayEnv, ParsesBothFormats) {
  auto g = parse_display_env(kGompDisplay);
  EXPECT_EQ(g["GOMP_SPINCOUNT"], "300000");
  EXPECT_EQ(g["OMP_WAIT_POLICY"], "PASSIVE");
  EXPECT_EQ(g["OMP_NUM_THREADS"], "2");
  auto l = parse_display_env(kLlvmDisplay);
  EXPECT_EQ(l["KMP_BLOCKTIME"], "50");
  EXPECT_EQ(l["OMP_WAIT_POLICY"], "PASSIVE");
  ASSERT_EQ(l.count("OMP_NUM_THREADS"), 1u);  // listed, so read, but unset
  EXPECT_EQ(l["OMP_NUM_THREADS"], "");
}

TEST(Runtime, NameFromLibraryPath) {
  EXPECT_EQ(runtime_from_library("/lib/x86_64-linux-gnu/libgomp.so.1"), "libgomp");
  EXPECT_EQ(runtime_from_library("/usr/lib/x86_64-linux-gnu/libomp.so.5"), "llvm-libomp");
  EXPECT_EQ(runtime_from_library("/opt/intel/libiomp5.so"), "llvm-libomp");
  EXPECT_EQ(runtime_from_library(""), "none");
}

TEST(Runtime, GompThrottledSpinCountFollowsLibgompsRules) {
  EXPECT_EQ(gomp_throttled_spincount("", "300000"), "100");
  EXPECT_EQ(gomp_throttled_spincount("ACTIVE", "30000000000"), "1000");
  EXPECT_EQ(gomp_throttled_spincount("passive", "0"), "0");
  EXPECT_EQ(gomp_throttled_spincount("passive", "3000000"), "0");
  EXPECT_EQ(gomp_throttled_spincount("", "50"), "50");  // never above the spin count
  EXPECT_EQ(gomp_throttled_spincount("active", "infinite"), "1000");
}

TEST(Runtime, KnobReportSaysIgnoredAndOverriddenFromTheLiveRuntime) {
  OmpInfo gomp;
  gomp.runtime = "libgomp";
  gomp.max_threads = 2;
  gomp.display = parse_display_env(kGompDisplay);
  gomp.gomp_spincount = "3000000";
  auto k = by_name(knob_report(gomp, env_of({{"KMP_BLOCKTIME", "50"}, {"GOMP_SPINCOUNT", "3000000"},
                                             {"OMP_WAIT_POLICY", "passive"}, {"OMP_NUM_THREADS", "4"}})));
  EXPECT_EQ(k["KMP_BLOCKTIME"].status, "ignored");  // libgomp's display has no KMP_BLOCKTIME
  EXPECT_EQ(k["GOMP_SPINCOUNT"].status, "read");
  EXPECT_EQ(k["OMP_WAIT_POLICY"].status, "overridden");  // passive means 0 spins; 3000000 are in force
  EXPECT_NE(k["OMP_WAIT_POLICY"].why.find("GOMP_SPINCOUNT=3000000"), std::string::npos);
  EXPECT_EQ(k["OMP_NUM_THREADS"].status, "overridden");  // 4 asked, 2 in force
  // passive with the spin count it implies: read, not overridden.
  gomp.gomp_spincount = "0";
  EXPECT_EQ(by_name(knob_report(gomp, env_of({{"OMP_WAIT_POLICY", "passive"}, {"GOMP_SPINCOUNT", "0"}})))
                ["OMP_WAIT_POLICY"].status,
            "read");

  OmpInfo llvm;
  llvm.runtime = "llvm-libomp";
  llvm.display = parse_display_env(kLlvmDisplay);
  llvm.kmp_blocktime_ms = "50";
  k = by_name(knob_report(llvm, env_of({{"GOMP_SPINCOUNT", "7"}, {"KMP_BLOCKTIME", "50"},
                                        {"OMP_WAIT_POLICY", "PASSIVE"}, {"LD_PRELOAD", "libomp.so.5"}})));
  EXPECT_EQ(k["GOMP_SPINCOUNT"].status, "ignored");
  EXPECT_EQ(k["KMP_BLOCKTIME"].status, "read");
  EXPECT_EQ(k["OMP_WAIT_POLICY"].status, "overridden");
  EXPECT_EQ(k.count("LD_PRELOAD"), 0u);
  // With KMP_LIBRARY set LLVM ignores OMP_WAIT_POLICY (and warns so), blocktime or not.
  llvm.kmp_library = "turnaround";
  for (const char* blocktime : {"", "50"}) {
    auto env = std::map<std::string, std::string>{{"KMP_LIBRARY", "turnaround"}, {"OMP_WAIT_POLICY", "passive"}};
    if (*blocktime) env["KMP_BLOCKTIME"] = blocktime;
    k = by_name(knob_report(llvm, env_of(env)));
    EXPECT_EQ(k["OMP_WAIT_POLICY"].status, "ignored") << blocktime;
    EXPECT_NE(k["OMP_WAIT_POLICY"].why.find("KMP_LIBRARY=turnaround"), std::string::npos);
  }
  // libgomp's display has no KMP_LIBRARY: it never read it.
  EXPECT_EQ(by_name(knob_report(gomp, env_of({{"KMP_LIBRARY", "serial"}})))["KMP_LIBRARY"].status, "ignored");

  OmpInfo none;
  k = by_name(knob_report(none, env_of({{"OMP_NUM_THREADS", "2"}, {"ONEDNN_MAX_CPU_ISA", "AVX2"}})));
  EXPECT_EQ(k["OMP_NUM_THREADS"].status, "ignored");
  // oneDNN reads its own knob, OpenMP runtime or not: its read-back (dnnl_cpu_isa) says what is in force.
  EXPECT_EQ(k["ONEDNN_MAX_CPU_ISA"].status, "read");
  EXPECT_EQ(by_name(knob_report(gomp, env_of({{"ONEDNN_MAX_CPU_ISA", "AVX2"}})))["ONEDNN_MAX_CPU_ISA"].status, "read");
}

// OpenMP's place notation, known answers: a 2-core machine's cores, a
// 56-core one with SMT siblings 112 apart, a socket of 4, a stride, places
// that do not shift evenly, and none.
TEST(Runtime, PlacesInOpenMPNotation) {
  EXPECT_EQ(places_text({}), "none");
  EXPECT_EQ(places_text({{0}, {1}}), "{0},{1}");
  EXPECT_EQ(places_text({{0, 1}}), "{0,1}");
  EXPECT_EQ(places_text({{0, 1, 2, 3}}), "{0:4}");
  std::vector<std::vector<int>> smt;
  for (int c = 0; c < 56; ++c) smt.push_back({c, c + 112});
  EXPECT_EQ(places_text(smt), "{0,112}:56");
  EXPECT_EQ(places_text({{0}, {2}, {4}, {6}}), "{0}:4:2");
  EXPECT_EQ(places_text({{0}, {0}, {0}}), "{0}:3:0");
  EXPECT_EQ(places_text({{0}, {1}, {2}, {5}, {6}}), "{0}:3,{5},{6}");
  EXPECT_EQ(places_text({{0, 1}, {2}, {3}}), "{0,1},{2},{3}");
}

// The settings in force line from the knob table's shown column (the same
// contexts as tests/python/test_knobs.py: lib/knobs.py writes the same lines).
TEST(Runtime, InForceLineFromTheKnobTable) {
  const Context gomp = {{"omp_runtime", "libgomp"},      {"omp_max_threads", "4"},
                        {"omp_wait_policy", "default"},  {"gomp_spincount", "300000"},
                        {"gomp_spincount_in_force", "100"}, {"kmp_blocktime_ms", "n/a"},
                        {"kmp_library", "n/a"},          {"omp_proc_bind", "close"},
                        {"omp_places", "{0},{1}"},       {"omp_schedule", "dynamic,4"},
                        {"dnnl_cpu_isa", "avx2"},        {"cuda_sync_in_force", "spin"}};
  EXPECT_EQ(in_force_line(gomp),
            "libgomp with 4 threads, spin count 300000 (in force 100), wait policy default, bind close, "
            "places {0},{1}, schedule dynamic,4, oneDNN ISA avx2");
  const Context llvm = {{"omp_runtime", "llvm-libomp"}, {"omp_max_threads", "2"}, {"kmp_blocktime_ms", "0"},
                        {"gomp_spincount_in_force", "n/a"}, {"omp_wait_policy", "passive"},
                        {"kmp_library", "throughput"},   {"dnnl_cpu_isa", "n/a"}};
  EXPECT_EQ(in_force_line(llvm), "llvm-libomp with 2 threads, blocktime 0 ms, wait policy passive, mode throughput");
  const Context none = {{"omp_runtime", "none"}, {"omp_max_threads", "-1"}, {"omp_wait_policy", "n/a"},
                        {"dnnl_cpu_isa", "sse41"}};
  EXPECT_EQ(in_force_line(none), "no OpenMP runtime loaded, oneDNN ISA sse41");
}

std::string expect(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

std::string context_value(const Context& ctx, const std::string& key) {
  for (const auto& [k, v] : ctx) {
    if (k == key) return v;
  }
  return "<missing>";
}

TEST(LiveRuntime, ReportsWhatTheServingRuntimeDoes) {
#pragma omp parallel
  { (void)omp_get_thread_num(); }
  const OmpInfo info = detect_openmp();
  EXPECT_EQ(info.runtime, expect("TB_EXPECT_RUNTIME", "libgomp")) << info.library;
  EXPECT_EQ(std::to_string(info.max_threads), expect("TB_EXPECT_MAX_THREADS", "?"));
  const Context ctx = runtime_context();
  EXPECT_EQ(context_value(ctx, "ignored_knobs"), expect("TB_EXPECT_IGNORED", "none"));
  EXPECT_EQ(context_value(ctx, "overridden_knobs"), expect("TB_EXPECT_OVERRIDDEN", "none"));
  EXPECT_EQ(context_value(ctx, "kmp_library"), info.kmp_library);
  // oneDNN's ISA in force: what ONEDNN_MAX_CPU_ISA caps it to, else the CPU's best (some ISA).
  const std::string isa = context_value(ctx, "dnnl_cpu_isa");
  if (have_dnnl()) {
    EXPECT_EQ(isa, expect("TB_EXPECT_DNNL_ISA", isa.c_str()));
    EXPECT_NE(isa, "n/a");
    EXPECT_EQ(isa.find("cpu_isa_"), std::string::npos);
  } else {
    EXPECT_EQ(isa, "n/a");
  }
  // No point sets OMP_PROC_BIND, OMP_PLACES or OMP_SCHEDULE: each runtime's
  // defaults (libgomp: no places, dynamic,1; LLVM: one place of every CPU the
  // process may use, static). Set values: tests/bench/check_probe.py placement.
  EXPECT_EQ(context_value(ctx, "omp_proc_bind"), "false");
  if (info.runtime == "libgomp") {
    EXPECT_EQ(context_value(ctx, "omp_places"), "none");
    EXPECT_EQ(context_value(ctx, "omp_schedule"), "dynamic,1");
  } else {
    cpu_set_t set;
    ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
    std::vector<int> cpus;
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &set)) cpus.push_back(c);
    }
    EXPECT_EQ(context_value(ctx, "omp_places"), places_text({cpus}));
    EXPECT_EQ(context_value(ctx, "omp_schedule"), "static");
  }
  if (info.runtime == "libgomp") {
    EXPECT_EQ(info.kmp_blocktime_ms, "n/a");
    EXPECT_EQ(info.kmp_library, "n/a");
    EXPECT_EQ(info.gomp_spincount, expect("TB_EXPECT_SPINCOUNT", "300000"));
    // libgomp throttles a team larger than the CPUs it may use.
    const bool throttled = info.max_threads > info.available_cpus;
    EXPECT_EQ(info.gomp_spincount_in_force, throttled ? info.gomp_throttled_spincount : info.gomp_spincount);
  } else {
    EXPECT_EQ(info.kmp_blocktime_ms, expect("TB_EXPECT_BLOCKTIME", "200"));
    EXPECT_EQ(info.kmp_library, expect("TB_EXPECT_LIBRARY", "throughput"));  // LLVM's default mode
    EXPECT_EQ(info.gomp_spincount, "n/a");
  }
}

// omptap in this test binary: team members are marked as OpenMP workers, the
// caller is not, and the listener sees each region with its team.
class CountingListener : public omptap::Listener {
 public:
  void on_begin(int64_t, pid_t, int) override {}
  void on_end(const omptap::Region& r) override {
    std::lock_guard<std::mutex> lock(mu);
    regions.push_back(r);
  }
  std::mutex mu;
  std::vector<omptap::Region> regions;
};

TEST(Omptap, MarksTeamMembersAndSeesEveryRegion) {
  ASSERT_TRUE(omptap::installed()) << "this binary must export GOMP_parallel (threadburn_use_omptap)";
  CountingListener listener;
  omptap::set_listener(&listener);
  const int64_t seen0 = omptap::regions_seen();
  std::mutex mu;
  std::set<pid_t> members;
  for (int i = 0; i < 3; ++i) {
#pragma omp parallel
    {
      std::lock_guard<std::mutex> lock(mu);
      members.insert(current_tid());
    }
  }
  omptap::set_listener(nullptr);
  EXPECT_EQ(omptap::regions_seen() - seen0, 3);
  ASSERT_EQ(listener.regions.size(), 3u);
  const int team = omp_get_max_threads();
  for (const auto& r : listener.regions) {
    EXPECT_EQ(r.team, team);
    EXPECT_EQ(r.caller, current_tid());
    EXPECT_LE(r.begin_ns, r.end_ns);
  }
  EXPECT_EQ(static_cast<int>(members.size()), team);
  for (pid_t tid : members) {
    // The caller runs the body too, but keeps its own class (main, or none).
    if (tid == current_tid()) {
      EXPECT_NE(thread_class(tid), ThreadClass::kOmp);
    } else {
      EXPECT_EQ(thread_class(tid), ThreadClass::kOmp) << tid;
    }
  }
}

#if THREADBURN_HAVE_TBB
TEST(Tbb, ObserverMarksWorkersThatEnterTheArena) {
  observe_tbb_workers();
  std::mutex mu;
  std::set<pid_t> ran;
  oneapi::tbb::parallel_for(0, 64, [&](int) {
    spin_cpu_ns(200000);
    std::lock_guard<std::mutex> lock(mu);
    ran.insert(current_tid());
  });
  int workers = 0;
  for (pid_t tid : ran) {
    if (tid == current_tid()) continue;
    ++workers;
    EXPECT_EQ(thread_class(tid), ThreadClass::kTbb) << tid;
  }
  if (tbb_default_concurrency() > 1) {
    EXPECT_GE(workers, 1);
  }
}
#endif

// What the kernel counted as taken from every CPU's tasks so far (irq,
// softirq, steal), in ms: /proc/stat's first line.
double taken_ms() {
  std::FILE* f = std::fopen("/proc/stat", "r");
  if (!f) return 0;
  unsigned long long v[8] = {};
  const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                            &v[5], &v[6], &v[7]);
  std::fclose(f);
  return n == 8 ? static_cast<double>(v[5] + v[6] + v[7]) * 1000.0 / static_cast<double>(sysconf(_SC_CLK_TCK)) : 0;
}

// The runtime's own known answer, the core of the whole suite: with T threads
// and blocktime b, each of the T-1 workers spins b ms (wall time) after it
// leaves a region, then sleeps. A spinning thread is always either on a CPU
// or waiting for one, so its CPU plus its run-queue wait is b ms each,
// however busy the machine; on a quiet machine the wait is 0 and the CPU is
// (T-1)*b. Two things move that figure on a busy one, both measured here:
//  - the spin starts when each worker leaves the region, and the step ends
//    (the probe reads the clocks) when the master has joined and got back to
//    it: a master that waited for a CPU meanwhile (preempted after the join,
//    with a tune beside it on 2 cores: seen as 17.6 ms of residual for a
//    blocktime of 20, no wait in the gap) leaves that part of the spin in the
//    step (the workers' step CPU, and the wait of any thread in the step);
//  - a worker waiting for a CPU when its blocktime ends checks the time only
//    when it runs again: it spins its b ms of wall time, and the wait around
//    the deadline adds to CPU + wait (seen up to 3.7 ms over b).
// So: the spin in the gap and in the step together reach b (less 3 % + 1 ms)
// in every gap, but for what the kernel took from the CPUs meanwhile:
// interrupts, and a hypervisor's steal, which stops the thread's clock and
// queues it nowhere (a soak here saw a gap of 26.25 ms of CPU, no wait, for a
// 30 ms spin whose tail was 29.76 ms). /proc/stat counts that in whole ticks
// (10 ms), too coarse for one gap: the allowance is what it counted over the
// whole test, as in the probe's live check. From above, the runtime's own
// clock is the limit: now and then LLVM spins well past its blocktime (one
// gap in about 180 spun 40 ms for b = 30 with a core busy; in one fresh
// clone's test command a gap of KMP_LIBRARY=turnaround spun 76 ms with no
// wait at all, its tail as long: the probe saw the spin that happened). So
// the workers' CPU in the gap, and the tail, stay within b (plus the same)
// in the median of five gaps, as in the probe's live check
// (tests/bench/check_probe.py).
TEST(LiveRuntime, WorkersSpinTheBlocktimeAfterARegion) {
  const std::string b = expect("TB_EXPECT_BLOCKTIME", "");
  if (b.empty() || b == "infinite") GTEST_SKIP() << "no LLVM blocktime expectation set";
  const double blocktime_ms = std::stod(b);
  const int threads = omp_get_max_threads();
  const double expected = (threads - 1) * blocktime_ms, tolerance = 0.03 * expected + 1.0;
  BurnSampler sampler;
  StepProbe probe(&sampler, {});
  volatile double sink = 0;
  constexpr int kGaps = 5;
  std::vector<double> cpu_over, tail_over;  // per gap: how far above its upper bound (<= 0: within)
  std::vector<double> spin_short;           // per gap: how far below its lower bound (<= 0: within)
  const double taken0 = taken_ms();
  for (int rep = 0; rep <= kGaps; ++rep) {  // the first region also creates the team: not judged
    probe.begin();
#pragma omp parallel reduction(+ : sink)
    { sink += omp_get_thread_num(); }
    probe.end();
    const int64_t gap_ns = static_cast<int64_t>(blocktime_ms * 3 + 50) * 1000000;
    const StepRecord r = probe.gap(gap_ns);
    if (rep == 0) continue;
    const double in_gap = r.residual_cpu_ms() + r.residual_wait_ms;
    const double in_step = r.step_class_ms(ThreadClass::kOmp) + r.step_wait_ms;
    spin_short.push_back(expected - tolerance - (in_gap + in_step));
    EXPECT_NEAR(r.gap_class_ms(ThreadClass::kOmp), r.residual_cpu_ms(), 0.05) << "the burn is the workers'";
    // The tail ends within a sample of b, earlier by the time the workers
    // spent waiting for a CPU and the spin left in the step, later by a wait
    // around the deadline.
    const auto window = sampler.window(r.step_end_ns, r.gap_end_ns);
    double longest_interval_ms = 0;
    for (size_t i = 1; i < window.size(); ++i) {
      if (window[i].t_ns - r.step_end_ns > (blocktime_ms + 5) * 1e6) break;
      longest_interval_ms = std::max(longest_interval_ms, ns_to_ms(window[i].t_ns - window[i - 1].t_ns));
    }
    EXPECT_GE(r.tail_ms, blocktime_ms - r.residual_wait_ms - in_step - longest_interval_ms - 1.0);
    cpu_over.push_back(r.residual_cpu_ms() - (expected + tolerance));
    tail_over.push_back(r.tail_ms - (blocktime_ms + r.residual_wait_ms + longest_interval_ms + 1.0));
    std::printf("gap %d: cpu %.2f ms + wait %.2f ms, tail %.2f ms (known to %.2f ms); step: workers' cpu %.2f, "
                "every thread's wait %.2f\n", rep, r.residual_cpu_ms(), r.residual_wait_ms, r.tail_ms,
                longest_interval_ms, r.step_class_ms(ThreadClass::kOmp), r.step_wait_ms);
  }
  const double taken = taken_ms() - taken0;
  for (size_t i = 0; i < spin_short.size(); ++i) {
    EXPECT_LE(spin_short[i], taken) << "gap " << i + 1 << ": the spin in the gap and the step is "
                                    << spin_short[i] << " ms short of b, more than the " << taken
                                    << " ms taken by interrupts and steal during the test";
  }
  EXPECT_LE(median(cpu_over), 0.0) << "the median gap's workers' CPU is above b = " << expected << " ms + "
                                   << tolerance;
  EXPECT_LE(median(tail_over), 0.0) << "the median gap's tail ends after b, its wait and a sample";
}

}  // namespace
}  // namespace threadburn
