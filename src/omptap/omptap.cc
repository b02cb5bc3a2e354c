#include "omptap/omptap.h"

#include <dlfcn.h>

#include <pthread.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "core/clock.h"
#include "core/thread_class.h"

extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);

namespace threadburn::omptap {
namespace {

using Body = void (*)(void*);
using ParallelFn = void (*)(Body, void*, unsigned, unsigned);

std::atomic<Listener*> g_listener{nullptr};
std::atomic<int64_t> g_regions{0};
thread_local int t_depth = 0;
thread_local bool t_classified = false;  // this thread's class was settled
thread_local pid_t t_tid = 0;            // cached: a region's caller asks every time

pid_t cached_tid() {
  if (t_tid == 0) {
    t_tid = current_tid();
    // A forked child's thread would inherit the parent's cached value.
    static const bool once = [] { return pthread_atfork(nullptr, nullptr, [] { t_tid = 0; }) == 0; }();
    (void)once;
  }
  return t_tid;
}

struct Call {
  Body body;
  void* data;
  pid_t caller;
  std::atomic<int> team{0};
};

void trampoline(void* p) {
  Call* call = static_cast<Call*>(p);
  call->team.fetch_add(1, std::memory_order_relaxed);
  // The master runs the body too; it keeps whatever class it has. Each thread
  // is settled once: the check costs a thread_local read after that.
  if (!t_classified) {
    t_classified = true;
    if (cached_tid() != call->caller) mark_current_thread(ThreadClass::kOmp);
  }
  ++t_depth;
  call->body(call->data);
  --t_depth;
}

// The runtime's GOMP_parallel, or null in a process without one (the probe
// preloaded into a program that never loads OpenMP).
ParallelFn next_parallel() {
  static ParallelFn next = [] {
    void* f = dlvsym(RTLD_NEXT, "GOMP_parallel", "GOMP_4.0");
    if (!f) f = dlsym(RTLD_NEXT, "GOMP_parallel");
    return reinterpret_cast<ParallelFn>(f);
  }();
  return next;
}

}  // namespace

void set_listener(Listener* listener) { g_listener.store(listener, std::memory_order_release); }
int64_t regions_seen() { return g_regions.load(std::memory_order_relaxed); }

bool installed() {
  void* ours = reinterpret_cast<void*>(&::GOMP_parallel);
  // dlsym, not dlvsym: dlvsym refuses unversioned definitions, which the
  // dynamic linker accepts for the libraries' versioned references.
  return dlsym(RTLD_DEFAULT, "GOMP_parallel") == ours;
}

}  // namespace threadburn::omptap

// The runtime behind the interposer, for runtime detection (runtime/runtime.cc),
// which must name the library that really serves the regions.
extern "C" __attribute__((visibility("default"))) void* threadburn_omptap_next() {
  return reinterpret_cast<void*>(threadburn::omptap::next_parallel());
}

extern "C" __attribute__((visibility("default"))) void GOMP_parallel(void (*fn)(void*), void* data,
                                                                     unsigned num_threads, unsigned flags) {
  namespace ot = threadburn::omptap;
  ot::Listener* listener = ot::g_listener.load(std::memory_order_acquire);
  ot::Call call{fn, data, ot::cached_tid(), {0}};
  const int depth = ot::t_depth;
  const int64_t begin = threadburn::wall_ns();
  const ot::ParallelFn next = ot::next_parallel();
  if (!next) {  // only code compiled with -fopenmp calls this, and it links a runtime: never here
    std::fprintf(stderr, "threadburn omptap: no OpenMP runtime defines GOMP_parallel after us\n");
    std::abort();
  }
  if (listener) listener->on_begin(begin, call.caller, depth);
  next(ot::trampoline, &call, num_threads, flags);
  const int64_t end = threadburn::wall_ns();
  ot::g_regions.fetch_add(1, std::memory_order_relaxed);
  if (listener) {
    ot::Region r{begin, end, call.caller, static_cast<int>(num_threads),
                 call.team.load(std::memory_order_relaxed), depth};
    listener->on_end(r);
  }
}
