// oneDNN and TBB identify themselves; kept apart from runtime.cc so the OpenMP
// detection has no link dependency on either. Each is optional at build time.
#if THREADBURN_HAVE_DNNL
#include <dnnl.h>
#endif
#if THREADBURN_HAVE_TBB
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/task_scheduler_observer.h>
#include <oneapi/tbb/version.h>
#endif

#include "core/thread_class.h"

#include <string>

#include "runtime/runtime.h"

namespace threadburn {

Context runtime_context() {
  Context ctx = openmp_context();
  ctx.insert(ctx.end(), {{"dnnl_version", dnnl_version_string()},
                         {"dnnl_cpu_runtime", dnnl_cpu_runtime_string()},
                         {"tbb_version", tbb_version_string()},
                         {"tbb_default_concurrency", std::to_string(tbb_default_concurrency())}});
  return ctx;
}

// By #if, not by the macros' values in code: a build that leaves one
// undefined (a part that is off) must still compile (tests/variants).
#if THREADBURN_HAVE_TBB
bool have_tbb() { return true; }
#else
bool have_tbb() { return false; }
#endif
#if THREADBURN_HAVE_DNNL
bool have_dnnl() { return true; }
#else
bool have_dnnl() { return false; }
#endif

#if THREADBURN_HAVE_DNNL
std::string dnnl_version_string() {
  const dnnl_version_t* v = dnnl_version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

std::string dnnl_cpu_runtime_string() {
  switch (dnnl_version()->cpu_runtime) {
    case DNNL_RUNTIME_OMP: return "omp";
    case DNNL_RUNTIME_TBB: return "tbb";
    case DNNL_RUNTIME_SEQ: return "sequential";
    case DNNL_RUNTIME_THREADPOOL: return "threadpool";
    default: return "other";
  }
}
#else
std::string dnnl_version_string() { return "not built"; }
std::string dnnl_cpu_runtime_string() { return "not built"; }
#endif

#if THREADBURN_HAVE_TBB
std::string tbb_version_string() { return TBB_runtime_version(); }
int tbb_default_concurrency() { return oneapi::tbb::info::default_concurrency(); }

namespace {
// Marks each worker that enters the observed arena (core/thread_class.h).
class TbbWorkerMarker : public oneapi::tbb::task_scheduler_observer {
 public:
  TbbWorkerMarker() { observe(true); }
  void on_scheduler_entry(bool is_worker) override {
    if (is_worker) mark_current_thread(ThreadClass::kTbb);
  }
};
}  // namespace

void observe_tbb_workers() {
  // The default arena of the calling thread; kept for the process's lifetime.
  static TbbWorkerMarker* marker = new TbbWorkerMarker;
  (void)marker;
}
#else
std::string tbb_version_string() { return "not built"; }
int tbb_default_concurrency() { return -1; }
void observe_tbb_workers() {}
#endif

}  // namespace threadburn
