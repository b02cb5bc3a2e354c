// omp_get_max_threads and omp_set_num_threads, interposed in the preload
// probe (src/probe/inrun.h, answer() and echo()): under threadburn tune
// --in-run the program is told the team the block gives, so that a program
// that asks before forking (PyTorch's at::parallel_for and
// at::get_num_threads, oneDNN's parallel(), OpenBLAS's every call) runs
// exactly as if started with that team, and its regions get exactly what
// their thread was told; a program that writes an answer back
// (omp_set_num_threads of what it was just told, as OpenBLAS does) does not
// change its own team by it. Without an in-run tune both forward unchanged.
//
// Symbol versions: libgomp defines omp_get_max_threads@@OMP_1.0 and LLVM's
// libomp omp_get_max_threads@@VERSION (with OMP_1.0 as a second name), so the
// probe defines it under both (exports.map), each forwarding to the next
// definition of its own version (objdump -T on libgomp.so.1 and libomp.so.5);
// omp_set_num_threads likewise. The Fortran bindings (omp_get_max_threads_,
// omp_set_num_threads_) are not interposed.
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

using SetThreads = void (*)(int);

void set(std::atomic<void*>& slot, const char* version, int n) {
  void* f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = dlvsym(RTLD_NEXT, "omp_set_num_threads", version);
    if (!f) f = dlsym(RTLD_NEXT, "omp_set_num_threads");
    if (!f) return;
    slot.store(f, std::memory_order_release);
  }
  if (threadburn::omptap::depth() == 0 && threadburn::probe::inrun::echo(n)) return;
  reinterpret_cast<SetThreads>(f)(n);
}

}  // namespace

extern "C" {
__attribute__((visibility("default"))) void threadburn_omp_set_num_threads_omp_1_0(int n) {
  static std::atomic<void*> slot{nullptr};
  set(slot, "OMP_1.0", n);
}
__attribute__((visibility("default"))) void threadburn_omp_set_num_threads_version(int n) {
  static std::atomic<void*> slot{nullptr};
  set(slot, "VERSION", n);
}
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
__asm__(".symver threadburn_omp_set_num_threads_omp_1_0, omp_set_num_threads@@OMP_1.0");
__asm__(".symver threadburn_omp_set_num_threads_version, omp_set_num_threads@VERSION");
