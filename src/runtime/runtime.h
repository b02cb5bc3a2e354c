// Which threading runtimes really serve this process, and the settings they
// read. Nothing here links OpenMP: the live runtime is asked through dlsym, so
// the answer is right whether libgomp or a preloaded LLVM libomp is in front.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace threadburn {

using Context = std::vector<std::pair<std::string, std::string>>;
using EnvGetter = std::function<const char*(const char*)>;

struct OmpInfo {
  std::string runtime = "none";   // "libgomp", "llvm-libomp", "none", or "unknown"
  std::string library;            // the file that serves GOMP_parallel@GOMP_4.0
  int max_threads = -1;           // omp_get_max_threads()
  std::string wait_policy;        // "default", "active" or "passive", as in force
  std::string gomp_spincount;     // libgomp's spin count, or "n/a"
  std::string kmp_blocktime_ms;   // LLVM's kmp_get_blocktime(), or "n/a"
  std::map<std::string, std::string> display;  // omp_display_env(verbose), parsed
};

// The knob environment variables the suite sweeps and reports.
const std::vector<std::string>& knob_variables();

// Parses omp_display_env() text of either runtime:
//   libgomp: "  OMP_WAIT_POLICY = 'PASSIVE'"
//   LLVM:    "  [host] KMP_BLOCKTIME='200'"
std::map<std::string, std::string> parse_display_env(const std::string& text);

// Runtime name from the path of the library that serves the GOMP ABI.
std::string runtime_from_library(const std::string& path);

// Knobs set in the environment that the given runtime does not read.
// libgomp reads no KMP_* variable; LLVM libomp reads no GOMP_SPINCOUNT (it does
// read GOMP_CPU_AFFINITY and GOMP_STACKSIZE).
std::vector<std::string> ignored_knobs(const std::string& runtime, const EnvGetter& getenv_fn);

// Effective wait policy as in force: libgomp shows PASSIVE when the variable is
// unset although it then spins GOMP_SPINCOUNT times, so "default" is reported.
std::string effective_wait_policy(const std::string& runtime, const EnvGetter& getenv_fn,
                                  const std::map<std::string, std::string>& display);

OmpInfo detect_openmp();

// Everything as key/value pairs for a benchmark context: OpenMP, oneDNN, TBB,
// the knob variables as set ("unset" when not), and the ignored knobs.
Context runtime_context();

// Whether this build has TBB / oneDNN (THREADBURN_WITH_TBB / _DNNL).
bool have_tbb();
bool have_dnnl();
std::string dnnl_version_string();
std::string dnnl_cpu_runtime_string();
std::string tbb_version_string();
int tbb_default_concurrency();

}  // namespace threadburn
