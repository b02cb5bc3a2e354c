// omp_get_max_threads, interposed in the preload probe (src/probe/inrun.h,
// answer()): under threadburn tune --in-run the program is told the team the
// block gives, so that a program that asks before forking (PyTorch's
// at::parallel_for and at::get_num_threads, oneDNN's parallel()) runs exactly
// as if started with that team, and one that sized per-thread buffers earlier
// never gets a larger team than it was told. Without an in-run tune it
// forwards the runtime's answer unchanged.
//
// Symbol versions: libgomp defines omp_get_max_threads@@OMP_1.0 and LLVM's
// libomp omp_get_max_threads@@VERSION (with OMP_1.0 as a second name), so the
// probe defines it under both (exports.map), each forwarding to the next
// definition of its own version (objdump -T on libgomp.so.1 and libomp.so.5).
// The Fortran binding (omp_get_max_threads_) is not interposed.
#include <dlfcn.h>

#include <atomic>

#include "omptap/omptap.h"
#include "probe/inrun.h"

namespace {

using MaxThreads = int (*)();

int ask(std::atomic<void*>& slot, const char* version) {
  void* f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = dlvsym(RTLD_NEXT, "omp_get_max_threads", version);
    if (!f) f = dlsym(RTLD_NEXT, "omp_get_max_threads");
    if (!f) return 1;  // only code linked with an OpenMP runtime calls it: never here
    slot.store(f, std::memory_order_release);
  }
  const int own = reinterpret_cast<MaxThreads>(f)();
  // Inside a region the answer is the nested one: never steered.
  return threadburn::omptap::depth() == 0 ? threadburn::probe::inrun::answer(own) : own;
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) int threadburn_omp_get_max_threads_omp_1_0() {
  static std::atomic<void*> slot{nullptr};
  return ask(slot, "OMP_1.0");
}
__attribute__((visibility("default"))) int threadburn_omp_get_max_threads_version() {
  static std::atomic<void*> slot{nullptr};
  return ask(slot, "VERSION");
}
}

__asm__(".symver threadburn_omp_get_max_threads_omp_1_0, omp_get_max_threads@@OMP_1.0");
__asm__(".symver threadburn_omp_get_max_threads_version, omp_get_max_threads@VERSION");
