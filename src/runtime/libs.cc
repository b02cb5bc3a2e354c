// oneDNN and TBB identify themselves; kept apart from runtime.cc so the OpenMP
// detection has no link dependency on either.
#include <dnnl.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/version.h>

#include <string>

#include "runtime/runtime.h"

namespace threadburn {

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

std::string tbb_version_string() { return TBB_runtime_version(); }

int tbb_default_concurrency() { return oneapi::tbb::info::default_concurrency(); }

}  // namespace threadburn
