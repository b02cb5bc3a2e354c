#include "runtime/runtime.h"

#include <dlfcn.h>
#include <link.h>
#include <limits.h>
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "core/rules.h"
#include "core/schema.h"
#include "core/slot.h"
#include "runtime/knob_table.h"  // generated from python/threadburn/knobs.tsv (src/CMakeLists.txt)

namespace threadburn {

// The tables below and dnnl_cpu_isa's answer are read by the preload
// probe's exit report (src/probe/probe.cc, report()), which runs among the
// exit handlers: each is a heap object never destroyed, alive whatever ran
// first (a function's static destroyed at exit would be, when it was first
// made after the report was registered).
const std::vector<std::string>& knob_variables() {
  static const std::vector<std::string>& vars = *new const std::vector<std::string>([] {
    std::vector<std::string> names;
    for (const KnobSpec& k : kKnobTable) names.emplace_back(k.name);
    return names;
  }());
  return vars;
}

void describe_knobs(JsonWriter* json) {
  json->key("knobs").begin_array();
  for (const KnobSpec& k : kKnobTable) {
    json->begin_object();
    for (std::size_t c = 0; c < kKnobColumnCount; ++c) json->field(kKnobColumns[c], k.*kKnobFields[c]);
    json->end_object();
  }
  json->end_array();
}

const std::vector<RuntimeSpec>& runtime_specs() {
  static const std::vector<RuntimeSpec>& specs = *new const std::vector<RuntimeSpec>([] {
    std::vector<RuntimeSpec> out = {{"gomp", "libgomp", {}}, {"llvm", "llvm-libomp", {}}};
    for (RuntimeSpec& r : out) {
      for (const KnobSpec& k : kKnobTable) {
        if (std::string(k.reader) == r.name) r.own_knobs.emplace_back(k.name);
      }
    }
    return out;
  }());  // never destroyed (see knob_variables)
  return specs;
}

void describe_runtimes(JsonWriter* json) {
  json->key("runtimes").begin_array();
  for (const RuntimeSpec& r : runtime_specs()) {
    json->begin_object().field("name", r.name).field("library", r.library);
    json->key("own_knobs").strings(r.own_knobs);
    json->end_object();
  }
  json->end_array();
}

namespace {

std::string trim_value(std::string v) {
  const auto b = v.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  v = v.substr(b, v.find_last_not_of(" \t\r") - b + 1);
  if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
  return v;
}

std::string lower(std::string v) {
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v;
}

// omp_display_env writes to stderr; catch it in a temporary file.
std::string capture_display_env(void (*display)(int)) {
  std::fflush(stderr);
  FILE* tmp = std::tmpfile();
  if (!tmp) return "";
  const int saved = dup(STDERR_FILENO);
  dup2(fileno(tmp), STDERR_FILENO);
  display(1);
  std::fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string text;
  std::rewind(tmp);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, tmp)) > 0) text.append(buf, n);
  std::fclose(tmp);
  return text;
}

std::string env_or(const EnvGetter& env, const char* name, const std::string& fallback) {
  const char* v = env(name);
  return v && *v ? v : fallback;
}

constexpr const char* kInfinite = "infinite";

// The spin count / blocktime a wait policy alone implies in each runtime.
std::string implied_by_wait_policy(const std::string& runtime, const std::string& policy) {
  const std::string p = lower(policy);
  if (runtime == "libgomp") return p == "active" ? "30000000000" : p == "passive" ? "0" : "300000";
  if (runtime == "llvm-libomp") return p == "active" ? kInfinite : p == "passive" ? "0" : "200";
  return "";
}

// Whether an OpenMP runtime reads the knob (the others have readers of their own).
bool read_by_openmp(const std::string& reader) {
  if (reader == "openmp") return true;
  for (const RuntimeSpec& r : runtime_specs()) {
    if (reader == r.name) return true;
  }
  return false;
}

// LLVM's execution mode by its number (kmp_get_library returns LLVM's enum
// library_type: 1 serial, 2 turnaround, 3 throughput).
std::string kmp_library_name(int mode) {
  switch (mode) {
    case 1: return "serial";
    case 2: return "turnaround";
    case 3: return "throughput";
    default: return "unknown(" + std::to_string(mode) + ")";
  }
}

std::string spin_text(const std::string& display_value) {
  // libgomp prints ~0ULL for "infinite".
  return display_value == "18446744073709551615" ? kInfinite : display_value;
}

// The OpenMP API's answers, by the numbers of omp.h's enums (nothing here
// includes omp.h: the serving library is asked through dlsym).
constexpr const char* kNotAsked = "n/a";

// omp_get_proc_bind: omp_proc_bind_t (2 is primary, formerly master).
std::string ask_proc_bind(void* lib) {
  auto bind = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_proc_bind"));
  if (!bind) return kNotAsked;
  static const char* const kNames[] = {"false", "true", "primary", "close", "spread"};
  const int b = bind();
  return b >= 0 && b < 5 ? kNames[b] : "unknown(" + std::to_string(b) + ")";
}

// omp_get_schedule: the kind (omp_sched_t: 1 static, 2 dynamic, 3 guided,
// 4 auto; the monotonic modifier in its high bit) and the chunk (0: the
// kind's default). Written as OMP_SCHEDULE is: static is monotonic by
// definition (libgomp sets the bit, LLVM does not), so its modifier is left
// out; auto has no chunk.
std::string ask_schedule(void* lib) {
  auto schedule = reinterpret_cast<void (*)(int*, int*)>(dlsym(lib, "omp_get_schedule"));
  if (!schedule) return kNotAsked;
  int kind = 0, chunk = 0;
  schedule(&kind, &chunk);
  constexpr unsigned kMonotonic = 0x80000000u;
  const unsigned base = static_cast<unsigned>(kind) & ~kMonotonic;
  static const char* const kKinds[] = {"static", "dynamic", "guided", "auto"};
  std::string out = base >= 1 && base <= 4 ? kKinds[base - 1] : "kind" + std::to_string(base);
  if ((static_cast<unsigned>(kind) & kMonotonic) && base != 1) out = "monotonic:" + out;
  if (chunk > 0 && base != 4) out += "," + std::to_string(chunk);
  return out;
}

// The place list the runtime binds threads to (omp_get_num_places,
// omp_get_place_num_procs, omp_get_place_proc_ids).
std::string ask_places(void* lib) {
  auto count = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_num_places"));
  auto procs = reinterpret_cast<int (*)(int)>(dlsym(lib, "omp_get_place_num_procs"));
  auto ids = reinterpret_cast<void (*)(int, int*)>(dlsym(lib, "omp_get_place_proc_ids"));
  if (!count || !procs || !ids) return kNotAsked;
  std::vector<std::vector<int>> places(static_cast<std::size_t>(std::max(count(), 0)));
  for (std::size_t i = 0; i < places.size(); ++i) {
    places[i].resize(static_cast<std::size_t>(std::max(procs(static_cast<int>(i)), 0)));
    if (!places[i].empty()) ids(static_cast<int>(i), places[i].data());
  }
  return places_text(places);
}

// The knobs' read-backs the OpenMP API of the serving library answers: the
// context key (the knob table's in_force) and how it is asked. A knob whose
// runtime answers through the API needs one line here and its row in the table.
struct ApiReadBack {
  const char* key;
  std::string (*ask)(void* lib);
};
constexpr ApiReadBack kApiReadBacks[] = {
    {"omp_proc_bind", ask_proc_bind},
    {"omp_places", ask_places},
    {"omp_schedule", ask_schedule},
};

// A place's CPUs: a list, three or more consecutive ones as "first:count".
std::string cpus_text(const std::vector<int>& cpus) {
  std::string out;
  for (std::size_t i = 0; i < cpus.size();) {
    std::size_t j = i + 1;
    while (j < cpus.size() && cpus[j] == cpus[j - 1] + 1) ++j;
    out += out.empty() ? "" : ",";
    out += std::to_string(cpus[i]);
    if (j - i >= 3) {
      out += ":" + std::to_string(j - i);
      i = j;
    } else {
      ++i;
    }
  }
  return "{" + out + "}";
}

// Whether place b is place a with every CPU shifted by stride.
bool shifted(const std::vector<int>& a, const std::vector<int>& b, int stride) {
  if (a.empty() || a.size() != b.size()) return false;
  for (std::size_t k = 0; k < a.size(); ++k) {
    if (b[k] != a[k] + stride) return false;
  }
  return true;
}

}  // namespace

std::string places_text(const std::vector<std::vector<int>>& places) {
  if (places.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < places.size();) {
    const int stride = i + 1 < places.size() && !places[i].empty() && !places[i + 1].empty()
                           ? places[i + 1][0] - places[i][0]
                           : 0;
    std::size_t j = i + 1;
    while (j < places.size() && shifted(places[j - 1], places[j], stride)) ++j;
    out += (out.empty() ? "" : ",") + cpus_text(places[i]);
    if (j - i >= 3) {
      out += ":" + std::to_string(j - i) + (stride != 1 ? ":" + std::to_string(stride) : "");
      i = j;
    } else {
      ++i;
    }
  }
  return out;
}

std::map<std::string, std::string> parse_display_env(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string s = line;
    const auto host = s.find("] ");
    if (s.find('[') != std::string::npos && host != std::string::npos) s = s.substr(host + 2);
    const auto undefined = s.find(": value is not defined");
    if (undefined != std::string::npos) {
      out[trim_value(s.substr(0, undefined))] = "";
      continue;
    }
    const auto eq = s.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = trim_value(s.substr(0, eq));
    if (key.empty() || key.find(' ') != std::string::npos) continue;
    out[key] = trim_value(s.substr(eq + 1));
  }
  return out;
}

std::string runtime_from_library(const std::string& path) {
  const std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.rfind("libgomp", 0) == 0) return runtime_specs()[0].library;
  if (base.rfind("libomp", 0) == 0 || base.rfind("libiomp", 0) == 0) return runtime_specs()[1].library;
  return path.empty() ? "none" : "unknown";
}

std::string gomp_throttled_spincount(const std::string& wait_policy_env, const std::string& spincount) {
  const std::string p = lower(wait_policy_env);
  const unsigned long long base = p == "active" ? 1000ULL : p == "passive" ? 0ULL : 100ULL;
  if (spincount == kInfinite) return std::to_string(base);
  const unsigned long long spin = std::strtoull(spincount.c_str(), nullptr, 10);
  return std::to_string(std::min(base, spin));
}

std::vector<KnobStatus> knob_report(const OmpInfo& omp, const EnvGetter& env) {
  std::vector<KnobStatus> out;
  for (const KnobSpec& spec : kKnobTable) {
    const std::string var = spec.name, reader = spec.reader;
    const char* v = env(spec.name);
    if (!v || !*v || reader == "loader") continue;
    KnobStatus k{var, v, "read", ""};
    if (!read_by_openmp(reader)) {
      // Its own read-back (the table's in_force column) says what is in force.
    } else if (omp.runtime == "none") {
      k.status = "ignored";
      k.why = "no OpenMP runtime in this process";
    } else if (!omp.display.empty() && omp.display.count(var) == 0) {
      // The serving runtime's own verbose display does not list it: it never read it.
      k.status = "ignored";
      k.why = omp.runtime + " does not read it";
    } else if (var == "OMP_WAIT_POLICY" && omp.runtime == "libgomp" && env("GOMP_SPINCOUNT") &&
               implied_by_wait_policy(omp.runtime, v) != omp.gomp_spincount) {
      k.status = "overridden";
      k.why = "GOMP_SPINCOUNT=" + std::string(env("GOMP_SPINCOUNT")) + " sets the spin count: libgomp spins " +
              omp.gomp_spincount;
    } else if (var == "OMP_WAIT_POLICY" && omp.runtime == "llvm-libomp" && env("KMP_LIBRARY") && *env("KMP_LIBRARY")) {
      // LLVM takes its wait mode from KMP_LIBRARY alone when both are set (and warns so).
      k.status = "ignored";
      k.why = "KMP_LIBRARY=" + std::string(env("KMP_LIBRARY")) + " is set, which LLVM reads instead: " +
              omp.kmp_library + " mode, blocktime " + omp.kmp_blocktime_ms + " ms";
    } else if (var == "OMP_WAIT_POLICY" && omp.runtime == "llvm-libomp" && env("KMP_BLOCKTIME") &&
               implied_by_wait_policy(omp.runtime, v) != omp.kmp_blocktime_ms) {
      k.status = "overridden";
      k.why = "KMP_BLOCKTIME=" + std::string(env("KMP_BLOCKTIME")) + " sets the blocktime: " + omp.kmp_blocktime_ms +
              " ms";
    } else if (var == "OMP_NUM_THREADS" && omp.max_threads > 0 && std::atoi(v) > 0 &&
               std::atoi(v) != omp.max_threads) {
      k.status = "overridden";
      k.why = "the program set " + std::to_string(omp.max_threads) + " threads (omp_set_num_threads)";
    }
    out.push_back(k);
  }
  return out;
}

OmpInfo detect_openmp() {
  OmpInfo info;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) info.available_cpus = CPU_COUNT(&set);
  // What libtorch calls is the GOMP ABI; whoever resolves it serves the process.
  // When omptap (src/omptap) interposes, the runtime is the definition it forwards to.
  void* gomp_parallel = dlvsym(RTLD_DEFAULT, "GOMP_parallel", "GOMP_4.0");
  if (auto omptap_next = reinterpret_cast<void* (*)()>(dlsym(RTLD_DEFAULT, "threadburn_omptap_next"))) {
    gomp_parallel = omptap_next();
  }
  Dl_info where{};
  if (gomp_parallel && dladdr(gomp_parallel, &where) && where.dli_fname) info.library = where.dli_fname;
  info.runtime = runtime_from_library(info.library);
  info.wait_policy = info.gomp_spincount = info.gomp_throttled_spincount = info.gomp_spincount_in_force = "n/a";
  info.kmp_blocktime_ms = info.kmp_library = "n/a";
  for (const ApiReadBack& r : kApiReadBacks) info.api_read_backs.emplace_back(r.key, kNotAsked);
  if (info.runtime == "none") return info;
  // Everything below from the serving library itself, not the first in search order.
  void* lib = dlopen(info.library.c_str(), RTLD_NOLOAD | RTLD_LAZY);
  if (!lib) return info;
  if (auto max_threads = reinterpret_cast<int (*)()>(dlsym(lib, "omp_get_max_threads"))) {
    info.max_threads = max_threads();
  }
  if (auto display = reinterpret_cast<void (*)(int)>(dlsym(lib, "omp_display_env"))) {
    info.display = parse_display_env(capture_display_env(display));
  }
  EnvGetter env = [](const char* n) { return std::getenv(n); };
  const std::string policy_env = env_or(env, "OMP_WAIT_POLICY", "");
  // libgomp shows PASSIVE when the variable is unset although it then spins,
  // so "default" is reported for an unset variable.
  info.wait_policy = policy_env.empty() ? "default" : lower(policy_env);
  if (info.runtime == "libgomp") {
    auto it = info.display.find("GOMP_SPINCOUNT");
    info.gomp_spincount = it != info.display.end() ? spin_text(it->second) : "unknown";
    if (info.gomp_spincount != "unknown") {
      info.gomp_throttled_spincount = gomp_throttled_spincount(policy_env, info.gomp_spincount);
      // libgomp throttles while it manages more threads than available CPUs.
      const bool throttled = info.max_threads > info.available_cpus && info.available_cpus > 0;
      info.gomp_spincount_in_force = throttled ? info.gomp_throttled_spincount : info.gomp_spincount;
    }
  }
  if (auto blocktime = reinterpret_cast<int (*)()>(dlsym(lib, "kmp_get_blocktime"))) {
    const int b = blocktime();
    info.kmp_blocktime_ms = b == INT_MAX ? kInfinite : std::to_string(b);
  }
  if (auto library = reinterpret_cast<int (*)()>(dlsym(lib, "kmp_get_library"))) {
    info.kmp_library = kmp_library_name(library());
  }
  for (std::size_t i = 0; i < std::size(kApiReadBacks); ++i) info.api_read_backs[i].second = kApiReadBacks[i].ask(lib);
  dlclose(lib);
  return info;
}

namespace {

// The BLAS that serves sgemm_ (libtorch's matmuls when oneDNN does not take
// them): Debian switches libblas.so.3 between netlib, OpenBLAS and others.
std::string blas_library() {
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (!sgemm || !dladdr(sgemm, &where) || !where.dli_fname) return "none";
  char real[PATH_MAX];
  const std::string path = realpath(where.dli_fname, real) ? real : where.dli_fname;
  std::string kind = "other";
  if (auto parallel = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"))) {
    const int p = parallel();  // 0 sequential, 1 pthreads, 2 OpenMP
    kind = p == 2 ? "openblas-openmp" : p == 1 ? "openblas-pthreads" : "openblas-serial";
  } else if (path.find("/blas/") != std::string::npos) {
    kind = "netlib-reference";
  }
  return kind + ":" + path;
}

struct LoadedObjects {
  std::vector<std::string> paths;  // the main program ("") left out
  unsigned long long adds = 0;     // objects ever loaded: a new one changes it
  bool all = true;                 // false: only the count
};

int add_object(dl_phdr_info* info, size_t, void* data) {
  auto* out = static_cast<LoadedObjects*>(data);
  out->adds = info->dlpi_adds;
  if (!out->all) return 1;
  if (info->dlpi_name && *info->dlpi_name) out->paths.push_back(info->dlpi_name);
  return 0;
}

// A symbol of whichever loaded library defines it, searched one by one: a
// library Python loaded with RTLD_LOCAL (torch's, and with it oneDNN) is
// not in the global scope dlsym(RTLD_DEFAULT) searches.
void* loaded_symbol(const char* symbol, const LoadedObjects& objects) {
  if (void* s = dlsym(RTLD_DEFAULT, symbol)) return s;
  for (const std::string& path : objects.paths) {
    void* lib = dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY);
    if (!lib) continue;
    void* s = dlsym(lib, symbol);
    dlclose(lib);  // RTLD_NOLOAD only took a reference: the library stays loaded
    if (s) return s;
  }
  return nullptr;
}

}  // namespace

std::string dnnl_cpu_isa(bool may_ask) {
  // Never destroyed (see knob_variables): the probe asks while the program
  // runs and reads the answer at exit, after the static destructors of
  // everything made since its start. oneDNN's names outgrow a std::string's
  // inline buffer (avx512_core_bf16, avx512_core_amx_fp16): a destroyed one
  // read freed heap bytes.
  static std::mutex& mu = *new std::mutex;
  static std::string& found = *new std::string;  // oneDNN's answer, once one was had
  static unsigned long long searched = ~0ULL;    // the load count of the last search that found none
  std::lock_guard<std::mutex> lock(mu);
  if (!found.empty() || !may_ask) return found.empty() ? "n/a" : found;
  LoadedObjects objects;
  objects.all = false;
  dl_iterate_phdr(add_object, &objects);
  if (objects.adds == searched) return "n/a";  // nothing loaded since: no need to look again
  objects.all = true;
  dl_iterate_phdr(add_object, &objects);
  auto effective = reinterpret_cast<int (*)()>(loaded_symbol("dnnl_get_effective_cpu_isa", objects));
  auto name = reinterpret_cast<const char* (*)(int)>(loaded_symbol("dnnl_cpu_isa2str", objects));
  if (!effective || !name) {
    searched = objects.adds;
    return "n/a";
  }
  const std::string isa = name(effective());
  const std::string prefix = "cpu_isa_";
  found = isa.rfind(prefix, 0) == 0 ? isa.substr(prefix.size()) : isa;
  return found;
}

namespace {

// The CPU's model name, for rows of a fleet: which machine measured them.
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "unknown";
}

std::string join(const std::vector<std::string>& items, const char* sep) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace

Context openmp_context(bool ask_libraries) {
  const OmpInfo omp = detect_openmp();
  Context ctx = {
      {"threadburn_schema_version", kSchemaVersion},
      {"omp_runtime", omp.runtime},
      {"omp_library", omp.library.empty() ? "none" : omp.library},
      {"omp_max_threads", std::to_string(omp.max_threads)},
      {"available_cpus", std::to_string(omp.available_cpus)},
      {"omp_wait_policy", omp.wait_policy},
      {"gomp_spincount", omp.gomp_spincount},
      {"gomp_throttled_spincount", omp.gomp_throttled_spincount},
      {"gomp_spincount_in_force", omp.gomp_spincount_in_force},
      {"kmp_blocktime_ms", omp.kmp_blocktime_ms},
      {"kmp_library", omp.kmp_library},
  };
  ctx.insert(ctx.end(), omp.api_read_backs.begin(), omp.api_read_backs.end());
  ctx.emplace_back("dnnl_cpu_isa", dnnl_cpu_isa(ask_libraries));
  ctx.emplace_back("blas_library", blas_library());
  ctx.emplace_back("cpu_model", cpu_model());
  // The slot: the CPUs the process may really use (a cgroup's quota, its cpuset, Slurm's allocation).
  for (auto& kv : read_slot().context()) ctx.push_back(std::move(kv));
  EnvGetter env = [](const char* n) { return std::getenv(n); };
  std::vector<std::string> ignored, overridden, notes;
  for (const auto& k : knob_report(omp, env)) {
    if (k.status == "ignored") ignored.push_back(k.name);
    if (k.status == "overridden") overridden.push_back(k.name);
    if (k.status != "read") notes.push_back(k.name + " " + k.status + ": " + k.why);
  }
  ctx.emplace_back("ignored_knobs", ignored.empty() ? "none" : join(ignored, ","));
  ctx.emplace_back("overridden_knobs", overridden.empty() ? "none" : join(overridden, ","));
  ctx.emplace_back("knob_notes", notes.empty() ? "none" : join(notes, "; "));
  for (auto& rule : rules_context()) ctx.push_back(std::move(rule));
  for (const auto& var : knob_variables()) {
    const char* v = std::getenv(var.c_str());
    ctx.emplace_back("env_" + var, v && *v ? v : "unset");
  }
  return ctx;
}

namespace {

// A context key's value, or fallback where the context lacks it.
std::string lookup(const Context& context, const std::string& key, const std::string& fallback) {
  for (const auto& [k, v] : context) {
    if (k == key) return v;
  }
  return fallback;
}

// A knob's shown text with "{}" its value and "{key}" another key's.
std::string fill_shown(const std::string& shown, const std::string& value, const Context& context) {
  std::string out;
  for (std::size_t i = 0; i < shown.size();) {
    const auto close = shown[i] == '{' ? shown.find('}', i) : std::string::npos;
    if (close == std::string::npos) {
      out += shown[i++];
      continue;
    }
    const std::string key = shown.substr(i + 1, close - i - 1);
    out += key.empty() ? value : lookup(context, key, "?");
    i = close + 1;
  }
  return out;
}

}  // namespace

std::string in_force_line(const Context& context) {
  const std::string runtime = lookup(context, "omp_runtime", "none");
  const bool openmp = !runtime.empty() && runtime != "none";
  std::vector<std::string> omp_parts, other_parts;
  for (const KnobSpec& k : kKnobTable) {
    const bool of_openmp = read_by_openmp(k.reader);
    const std::string value = lookup(context, k.in_force, "");
    if (std::string(k.shown) == "-" || value.empty() || value == kNotAsked || (of_openmp && !openmp)) continue;
    (of_openmp ? omp_parts : other_parts).push_back(fill_shown(k.shown, value, context));
  }
  std::string line = openmp ? runtime + (omp_parts.empty() ? "" : " with " + join(omp_parts, ", "))
                            : "no OpenMP runtime loaded";
  for (const auto& part : other_parts) line += ", " + part;
  return line;
}

}  // namespace threadburn
