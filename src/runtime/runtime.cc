#include "runtime/runtime.h"

#include <dlfcn.h>
#include <unistd.h>

#include <limits.h>
#include <stdlib.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace threadburn {

const std::vector<std::string>& knob_variables() {
  static const std::vector<std::string> vars = {
      "OMP_NUM_THREADS", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_PROC_BIND",
      "OMP_PLACES",      "KMP_AFFINITY",  "LD_PRELOAD"};
  return vars;
}

std::map<std::string, std::string> parse_display_env(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::string s = line;
    const auto host = s.find("] ");
    if (s.find('[') != std::string::npos && host != std::string::npos) s = s.substr(host + 2);
    const auto eq = s.find('=');
    if (eq == std::string::npos) continue;
    auto trim = [](std::string v) {
      const auto b = v.find_first_not_of(" \t");
      if (b == std::string::npos) return std::string();
      v = v.substr(b, v.find_last_not_of(" \t\r") - b + 1);
      if (v.size() >= 2 && v.front() == '\'' && v.back() == '\'') v = v.substr(1, v.size() - 2);
      return v;
    };
    const std::string key = trim(s.substr(0, eq));
    if (key.empty() || key.find(' ') != std::string::npos) continue;
    out[key] = trim(s.substr(eq + 1));
  }
  return out;
}

std::string runtime_from_library(const std::string& path) {
  const std::string base = path.substr(path.find_last_of('/') + 1);
  if (base.rfind("libgomp", 0) == 0) return "libgomp";
  if (base.rfind("libomp", 0) == 0 || base.rfind("libiomp", 0) == 0) return "llvm-libomp";
  return path.empty() ? "none" : "unknown";
}

std::vector<std::string> ignored_knobs(const std::string& runtime, const EnvGetter& getenv_fn) {
  std::vector<std::string> out;
  for (const auto& var : knob_variables()) {
    const char* v = getenv_fn(var.c_str());
    if (!v || !*v) continue;
    const bool kmp = var.rfind("KMP_", 0) == 0;
    if (runtime == "libgomp" && kmp) out.push_back(var);
    if (runtime == "llvm-libomp" && var == "GOMP_SPINCOUNT") out.push_back(var);
    if (runtime == "none" && var != "LD_PRELOAD") out.push_back(var);
  }
  return out;
}

std::string effective_wait_policy(const std::string& runtime, const EnvGetter& getenv_fn,
                                  const std::map<std::string, std::string>& display) {
  const char* env = getenv_fn("OMP_WAIT_POLICY");
  if (runtime == "none") return "n/a";
  if (!env || !*env) return "default";
  auto it = display.find("OMP_WAIT_POLICY");
  std::string v = it != display.end() ? it->second : std::string(env);
  std::transform(v.begin(), v.end(), v.begin(), [](unsigned char c) { return std::tolower(c); });
  return v;
}

namespace {

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

}  // namespace

OmpInfo detect_openmp() {
  OmpInfo info;
  // What libtorch calls is the GOMP ABI; whoever resolves it serves the process.
  void* gomp_parallel = dlvsym(RTLD_DEFAULT, "GOMP_parallel", "GOMP_4.0");
  if (!gomp_parallel) gomp_parallel = dlsym(RTLD_DEFAULT, "GOMP_parallel");
  Dl_info where{};
  if (gomp_parallel && dladdr(gomp_parallel, &where) && where.dli_fname) {
    info.library = where.dli_fname;
  }
  info.runtime = runtime_from_library(info.library);
  if (info.runtime == "none") {
    info.wait_policy = info.gomp_spincount = info.kmp_blocktime_ms = "n/a";
    return info;
  }
  if (auto max_threads = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"))) {
    info.max_threads = max_threads();
  }
  // Unversioned lookup: the first library in search order, i.e. the live runtime.
  if (auto display = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "omp_display_env"))) {
    info.display = parse_display_env(capture_display_env(display));
  }
  EnvGetter env = [](const char* n) { return std::getenv(n); };
  info.wait_policy = effective_wait_policy(info.runtime, env, info.display);
  info.gomp_spincount = "n/a";
  info.kmp_blocktime_ms = "n/a";
  if (info.runtime == "libgomp") {
    auto it = info.display.find("GOMP_SPINCOUNT");
    info.gomp_spincount = it != info.display.end() ? it->second : "unknown";
  }
  if (auto blocktime = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "kmp_get_blocktime"))) {
    const int b = blocktime();
    info.kmp_blocktime_ms = b == 2147483647 ? "infinite" : std::to_string(b);
  }
  return info;
}

namespace {

// The BLAS that serves sgemm_ (libtorch's matmuls when oneDNN does not take
// them): Debian switches libblas.so.3 between netlib, OpenBLAS and others.
std::string blas_library() {
  void* sgemm = dlsym(RTLD_DEFAULT, "sgemm_");
  Dl_info where{};
  if (!sgemm || !dladdr(sgemm, &where) || !where.dli_fname) return "none";
  char real[4096];
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

}  // namespace

Context runtime_context() {
  const OmpInfo omp = detect_openmp();
  Context ctx = {
      {"threadburn_schema_version", "1"},
      {"omp_runtime", omp.runtime},
      {"omp_library", omp.library.empty() ? "none" : omp.library},
      {"omp_max_threads", std::to_string(omp.max_threads)},
      {"omp_wait_policy", omp.wait_policy},
      {"gomp_spincount", omp.gomp_spincount},
      {"kmp_blocktime_ms", omp.kmp_blocktime_ms},
      {"dnnl_version", dnnl_version_string()},
      {"dnnl_cpu_runtime", dnnl_cpu_runtime_string()},
      {"tbb_version", tbb_version_string()},
      {"tbb_default_concurrency", std::to_string(tbb_default_concurrency())},
      {"blas_library", blas_library()},
  };
  EnvGetter env = [](const char* n) { return std::getenv(n); };
  std::string ignored;
  for (const auto& k : ignored_knobs(omp.runtime, env)) ignored += (ignored.empty() ? "" : ",") + k;
  ctx.emplace_back("ignored_knobs", ignored.empty() ? "none" : ignored);
  for (const auto& var : knob_variables()) {
    const char* v = std::getenv(var.c_str());
    ctx.emplace_back("env_" + var, v && *v ? v : "unset");
  }
  return ctx;
}

}  // namespace threadburn
