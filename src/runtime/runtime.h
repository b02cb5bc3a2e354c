// Which threading runtimes really serve this process, and what they will
// actually do. Nothing here links OpenMP: the live runtime is asked through
// dlsym on the very library that serves the GOMP ABI, so the answer is right
// whether libgomp or a preloaded LLVM libomp is in front (both are loaded
// then: libtorch still pulls in libgomp).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/json.h"

namespace threadburn {

using Context = std::vector<std::pair<std::string, std::string>>;
using EnvGetter = std::function<const char*(const char*)>;

// The environment variables the suite sets, sweeps and reports are the rows
// of kKnobTable (runtime/knob_table.h, generated from
// python/threadburn/knobs.tsv: only runtime.cc includes it, so a new knob
// recompiles one file), the table the Python package reads too: their names
// in its order, and --describe's "knobs" (every column).
const std::vector<std::string>& knob_variables();
void describe_knobs(JsonWriter* json);

// The OpenMP runtimes the suite runs under: the name a grid or `run
// --runtime` uses, the library name the programs report (omp_runtime), and
// the knobs only that runtime reads (the table's rows whose reader is the
// runtime's name: varied only under it; the other one ignores them).
// --describe prints them ("runtimes").
struct RuntimeSpec {
  const char* name;
  const char* library;
  std::vector<std::string> own_knobs;
};
const std::vector<RuntimeSpec>& runtime_specs();
void describe_runtimes(JsonWriter* json);

struct OmpInfo {
  std::string runtime = "none";  // "libgomp", "llvm-libomp", "none", or "unknown"
  std::string library;           // the file that serves GOMP_parallel@GOMP_4.0
  int max_threads = -1;          // omp_get_max_threads() of the serving runtime
  int available_cpus = -1;       // CPUs in this process's affinity mask
  std::string wait_policy;       // "default", "active" or "passive", as in force
  // libgomp: the spin count a waiting worker uses, the throttled one it uses
  // instead while the runtime manages more threads than available CPUs, and
  // which of the two a team of max_threads gets. "n/a" under other runtimes.
  std::string gomp_spincount, gomp_throttled_spincount, gomp_spincount_in_force;
  std::string kmp_blocktime_ms;  // LLVM's kmp_get_blocktime() ("infinite"), or "n/a"
  std::string kmp_library;       // LLVM's kmp_get_library(): serial, turnaround, throughput; or "n/a"
  // What the OpenMP API of the serving library answers, as context keys (the
  // knob table's in_force, omp_proc_bind and the others of runtime.cc's
  // kApiReadBacks); "n/a" without a runtime that answers.
  Context api_read_backs;
  std::map<std::string, std::string> display;  // the serving runtime's omp_display_env(verbose)
};

// Parses omp_display_env(verbose) text of either runtime:
//   libgomp: "  OMP_WAIT_POLICY = 'PASSIVE'"
//   LLVM:    "  [host] KMP_BLOCKTIME='200'", "  [host] OMP_NUM_THREADS: value is not defined" (-> "")
std::map<std::string, std::string> parse_display_env(const std::string& text);

// Runtime name from the path of the library that serves the GOMP ABI.
std::string runtime_from_library(const std::string& path);

// libgomp's rules (libgomp/env.c, GCC 12), given the variables as set:
// without GOMP_SPINCOUNT the spin count follows OMP_WAIT_POLICY (active
// 30000000000, unset 300000, passive 0); the throttled count is 1000 (active),
// 100 (unset) or 0 (passive), never above the spin count. "infinite" for ~0.
std::string gomp_throttled_spincount(const std::string& wait_policy_env, const std::string& spincount);

// What each knob set in the environment does in the live runtime. The
// OpenMP knobs are judged by the serving runtime's own display; the others
// (a library's own, such as oneDNN's) only by their read-back (in_force).
struct KnobStatus {
  std::string name, value;
  std::string status;  // "read", "ignored" or "overridden"
  std::string why;     // for ignored / overridden: one clause
};
std::vector<KnobStatus> knob_report(const OmpInfo& omp, const EnvGetter& env);

OmpInfo detect_openmp();

// A place list (omp_get_place_proc_ids of each place) in OpenMP's own
// notation: "none" for no place; a place's CPUs as a list, three or more
// consecutive ones as an interval ("{0:4}"); three or more places that each
// shift the one before by the same stride as one interval ("{0}:56",
// "{0,112}:56", "{0}:4:2" with stride 2); the rest as a list ("{0},{1}").
std::string places_text(const std::vector<std::vector<int>>& places);

// The settings in force as one line, from a context (openmp_context's keys):
// each knob's part as the knob table's shown column says, in its order
// ("libgomp with 4 threads, spin count 300000 (in force 300000), wait policy
// default, ..."), left out where its read-back is missing or n/a (and the
// OpenMP readers' parts without an OpenMP runtime: "no OpenMP runtime
// loaded"). lib/knobs.py's in_force_line writes the same line in Python.
std::string in_force_line(const Context& context);

// oneDNN's instruction set in force ("avx2", ...: dnnl_get_effective_cpu_isa,
// the CPU's best capped by ONEDNN_MAX_CPU_ISA), asked through dlsym of
// whichever loaded library exports it (no link to oneDNN), and remembered
// once answered; "n/a" while none does (a copy linked inside another
// library cannot be asked). Searching again only after a new library was
// loaded, it is cheap to ask often. oneDNN's own state is gone once the
// process exits: there, may_ask = false gives only the remembered answer.
// Like any oneDNN call, the first fixes oneDNN's ISA for the process.
std::string dnnl_cpu_isa(bool may_ask = true);

// OpenMP's effective settings, knob statuses (ignored_knobs,
// overridden_knobs, knob_notes), the knob variables as set ("unset" when
// not), oneDNN's ISA and the BLAS, as key/value pairs. Needs nothing but
// libdl: the preload probe reports it from inside any process (runtime.cc),
// at exit with ask_libraries = false (dnnl_cpu_isa).
Context openmp_context(bool ask_libraries = true);
// openmp_context() plus the oneDNN and TBB versions this build links (libs.cc).
Context runtime_context();

// Whether this build has TBB / oneDNN (THREADBURN_WITH_TBB / _DNNL).
bool have_tbb();
bool have_dnnl();
std::string dnnl_version_string();
std::string dnnl_cpu_runtime_string();
std::string tbb_version_string();
int tbb_default_concurrency();
// Marks TBB workers that enter the calling thread's default arena as
// ThreadClass::kTbb (a task_scheduler_observer); no-op without TBB.
void observe_tbb_workers();

}  // namespace threadburn
