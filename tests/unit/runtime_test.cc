// Runtime detection. The parsing is checked on verbatim omp_display_env output
// of both runtimes; the live detection is checked against expectations that
// ctest passes in the environment (TB_EXPECT_*), once per runtime.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdlib>
#include <map>
#include <string>

#include "core/clock.h"
#include "core/probe.h"
#include "runtime/runtime.h"

namespace threadburn {
namespace {

const char* kGompDisplay =
    "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n  _OPENMP = '201511'\n  OMP_NUM_THREADS = '2'\n"
    "  OMP_WAIT_POLICY = 'PASSIVE'\n  GOMP_SPINCOUNT = '300000'\nOPENMP DISPLAY ENVIRONMENT END\n";
const char* kLlvmDisplay =
    "\nOPENMP DISPLAY ENVIRONMENT BEGIN\n   _OPENMP='201611'\n  [host] KMP_BLOCKTIME='50'\n"
    "  [host] OMP_NUM_THREADS: value is not defined\n  [host] OMP_WAIT_POLICY='PASSIVE'\n";

TEST(DisplayEnv, ParsesBothFormats) {
  auto g = parse_display_env(kGompDisplay);
  EXPECT_EQ(g["GOMP_SPINCOUNT"], "300000");
  EXPECT_EQ(g["OMP_WAIT_POLICY"], "PASSIVE");
  EXPECT_EQ(g["OMP_NUM_THREADS"], "2");
  auto l = parse_display_env(kLlvmDisplay);
  EXPECT_EQ(l["KMP_BLOCKTIME"], "50");
  EXPECT_EQ(l["OMP_WAIT_POLICY"], "PASSIVE");
  EXPECT_EQ(l.count("OMP_NUM_THREADS: value is not defined"), 0u);
}

TEST(Runtime, NameFromLibraryPath) {
  EXPECT_EQ(runtime_from_library("/lib/x86_64-linux-gnu/libgomp.so.1"), "libgomp");
  EXPECT_EQ(runtime_from_library("/usr/lib/x86_64-linux-gnu/libomp.so.5"), "llvm-libomp");
  EXPECT_EQ(runtime_from_library("/opt/intel/libiomp5.so"), "llvm-libomp");
  EXPECT_EQ(runtime_from_library(""), "none");
}

TEST(Runtime, IgnoredKnobsPerRuntime) {
  std::map<std::string, std::string> env = {{"KMP_BLOCKTIME", "50"}, {"GOMP_SPINCOUNT", "0"},
                                            {"OMP_NUM_THREADS", "2"}, {"KMP_AFFINITY", "compact"}};
  EnvGetter get = [&](const char* n) -> const char* {
    auto it = env.find(n);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  EXPECT_EQ(ignored_knobs("libgomp", get), (std::vector<std::string>{"KMP_BLOCKTIME", "KMP_AFFINITY"}));
  EXPECT_EQ(ignored_knobs("llvm-libomp", get), (std::vector<std::string>{"GOMP_SPINCOUNT"}));
}

TEST(Runtime, WaitPolicyUnsetIsDefaultNotPassive) {
  EnvGetter unset = [](const char*) -> const char* { return nullptr; };
  EnvGetter active = [](const char* n) -> const char* {
    return std::string(n) == "OMP_WAIT_POLICY" ? "ACTIVE" : nullptr;
  };
  auto display = parse_display_env(kGompDisplay);
  EXPECT_EQ(effective_wait_policy("libgomp", unset, display), "default");
  std::map<std::string, std::string> shown = {{"OMP_WAIT_POLICY", "ACTIVE"}};
  EXPECT_EQ(effective_wait_policy("libgomp", active, shown), "active");
}

std::string expect(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v ? v : fallback;
}

TEST(LiveRuntime, DetectsTheRuntimeInFront) {
#pragma omp parallel
  { (void)omp_get_thread_num(); }
  OmpInfo info = detect_openmp();
  EXPECT_EQ(info.runtime, expect("TB_EXPECT_RUNTIME", "libgomp")) << info.library;
  EXPECT_EQ(info.max_threads, omp_get_max_threads());
  const std::string blocktime = expect("TB_EXPECT_BLOCKTIME", "");
  if (!blocktime.empty()) {
    EXPECT_EQ(info.kmp_blocktime_ms, blocktime);
  }
  if (info.runtime == "libgomp") {
    EXPECT_EQ(info.kmp_blocktime_ms, "n/a");
    EXPECT_EQ(info.gomp_spincount, expect("TB_EXPECT_SPINCOUNT", "300000"));
  }
  const std::string ignored = expect("TB_EXPECT_IGNORED", "none");
  for (const auto& kv : runtime_context()) {
    if (kv.first == "ignored_knobs") {
      EXPECT_EQ(kv.second, ignored);
    }
  }
}

// The runtime's own known answer: with T threads and blocktime b, each of the
// T-1 workers spins b ms after a region, so residual = (T-1)*b.
TEST(LiveRuntime, ResidualMatchesBlocktime) {
  const std::string b = expect("TB_EXPECT_BLOCKTIME", "");
  if (b.empty() || b == "infinite") GTEST_SKIP() << "no LLVM blocktime expectation set";
  const double blocktime_ms = std::stod(b);
  const int threads = omp_get_max_threads();
  BurnSampler sampler;
  StepProbe probe(&sampler, {});
  volatile double sink = 0;
  for (int rep = 0; rep < 2; ++rep) {  // the first region also creates the team
    probe.begin();
#pragma omp parallel reduction(+ : sink)
    { sink += omp_get_thread_num(); }
    probe.end();
    StepRecord r = probe.gap(static_cast<int64_t>(blocktime_ms * 3 + 50) * 1000000);
    if (rep == 0) continue;
    const double expected = (threads - 1) * blocktime_ms;
    EXPECT_NEAR(r.residual_cpu_ms, expected, 0.05 * expected + 1.0);
    EXPECT_NEAR(r.tail_ms, blocktime_ms, 3.0);
  }
}

}  // namespace
}  // namespace threadburn
