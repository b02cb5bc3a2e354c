#include "omptap/omptap.h"

#include <dlfcn.h>

#include <pthread.h>

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "core/clock.h"
#include "core/thread_class.h"

namespace threadburn::omptap {
namespace {

using Body = void (*)(void*);
// LLVM/Intel's microtask: (global tid*, bound tid*, one pointer per shared variable).
using Micro = void (*)(int32_t*, int32_t*, ...);
struct Ident;  // ident_t: passed through untouched

std::atomic<Listener*> g_listener{nullptr};
std::atomic<TeamHook> g_team_hook{nullptr};
std::atomic<int64_t> g_regions{0};
thread_local int t_depth = 0;
thread_local bool t_classified = false;  // this thread's class was settled
thread_local pid_t t_tid = 0;            // cached: a region's caller asks every time
// Set while this thread is inside a runtime's entry point on omptap's behalf
// (not in a region's body): a call into omptap then comes from the runtime
// itself (LLVM's GOMP_teams_reg calls __kmpc_fork_teams) and is the same region.
thread_local bool t_in_runtime = false;
// The team __kmpc_push_num_threads named for this thread's next __kmpc_fork_call (0: none).
thread_local int32_t t_pushed = 0;

pid_t cached_tid() {
  if (t_tid == 0) {
    t_tid = current_tid();
    // A forked child's thread would inherit the parent's cached value.
    static const bool once = [] { return pthread_atfork(nullptr, nullptr, [] { t_tid = 0; }) == 0; }();
    (void)once;
  }
  return t_tid;
}

// One region in flight: what the trampoline needs, on the starting thread's stack
// (or, for the pre-4.0 start/end pairs, on the heap until GOMP_parallel_end).
struct Call {
  // First, as the runtime reads it: GOMP_parallel_reductions takes the
  // reduction data's address from the first word of the data it is given.
  void* head = nullptr;
  Body body = nullptr;
  void* data = nullptr;
  pid_t caller = 0;
  std::atomic<int> team{0};
  // __kmpc_*: the original microtask and its arguments.
  Micro micro = nullptr;
  int argc = 0;
  void* argv[kMaxMicrotaskArgs];  // not cleared: only argc are read
  // Bookkeeping of the region.
  Listener* listener = nullptr;
  int64_t begin_ns = 0;
  int depth = 0;
  int requested = 0;
  Entry entry = Entry::kParallel;
  bool silent = false;    // a runtime's own call for a region omptap already counts
  Call* outer = nullptr;  // start/end pairs: the enclosing pair of this thread
};

// The master runs the body too; it keeps whatever class it has. Each thread
// is settled once: the check costs a thread_local read after that.
inline void enter(Call* call) {
  call->team.fetch_add(1, std::memory_order_relaxed);
  if (!t_classified) {
    t_classified = true;
    if (cached_tid() != call->caller) mark_current_thread(ThreadClass::kOmp);
  }
}

void trampoline(void* p) {
  Call* call = static_cast<Call*>(p);
  enter(call);
  const bool in_runtime = t_in_runtime;
  t_in_runtime = false;
  ++t_depth;
  call->body(call->data);
  --t_depth;
  t_in_runtime = in_runtime;
}

// Calls a microtask with N pointer arguments from an array (what LLVM's
// __kmp_invoke_microtask does in assembly), one instance per N.
template <size_t... I>
void invoke_with(Micro f, int32_t* gtid, int32_t* btid, void** a, std::index_sequence<I...>) {
  f(gtid, btid, a[I]...);
}
template <size_t N>
void invoke_n(Micro f, int32_t* gtid, int32_t* btid, void** a) {
  invoke_with(f, gtid, btid, a, std::make_index_sequence<N>{});
}
using Invoker = void (*)(Micro, int32_t*, int32_t*, void**);
template <size_t... N>
constexpr std::array<Invoker, sizeof...(N)> invokers(std::index_sequence<N...>) {
  return {&invoke_n<N>...};
}
constexpr auto kInvokers = invokers(std::make_index_sequence<kMaxMicrotaskArgs + 1>{});

void kmpc_trampoline(int32_t* gtid, int32_t* btid, void* p) {
  Call* call = static_cast<Call*>(p);
  enter(call);
  const bool in_runtime = t_in_runtime;
  t_in_runtime = false;
  const int step = call->silent ? 0 : 1;
  t_depth += step;
  kInvokers[static_cast<size_t>(call->argc)](call->micro, gtid, btid, call->argv);
  t_depth -= step;
  t_in_runtime = in_runtime;
}

// The runtime's definition of an entry point, or null in a process without one
// (the probe preloaded into a program that never loads OpenMP).
void* next_symbol(const char* name, const char* version) {
  void* f = dlvsym(RTLD_NEXT, name, version);
  // dlvsym refuses unversioned definitions (a runtime built without symbol
  // versions); the dynamic linker accepts them for versioned references.
  if (!f) f = dlsym(RTLD_NEXT, name);
  return f;
}

[[noreturn]] void no_runtime(const char* name) {
  // Only code compiled with -fopenmp calls these, and it links a runtime: never here.
  std::fprintf(stderr, "threadburn omptap: no OpenMP runtime defines %s after us\n", name);
  std::abort();
}

template <typename Fn>
Fn next_or_die(std::atomic<void*>& slot, const char* name, const char* version) {
  void* f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = next_symbol(name, version);
    if (!f) no_runtime(name);
    slot.store(f, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(f);
}

// Returns the team to ask the runtime for: `requested`, or the team hook's
// for an outermost region.
unsigned begin(Call* call, Body body, void* data, Entry entry, unsigned requested) {
  call->body = body;
  call->data = data;
  call->caller = cached_tid();
  call->entry = entry;
  call->requested = static_cast<int>(requested);
  call->depth = t_depth;
  call->listener = g_listener.load(std::memory_order_acquire);
  call->begin_ns = wall_ns();
  if (call->listener) call->listener->on_begin(call->begin_ns, call->caller, call->depth);
  unsigned team = requested;
  if (call->depth == 0 && entry != Entry::kTeamsReg && entry != Entry::kKmpcForkTeams) {
    if (TeamHook hook = g_team_hook.load(std::memory_order_acquire)) team = hook(requested);
  }
  t_in_runtime = true;
  return team;
}

void finish(Call* call, int extra_team = 0) {
  t_in_runtime = false;
  const int64_t end = wall_ns();
  g_regions.fetch_add(1, std::memory_order_relaxed);
  if (call->listener) {
    Region r;
    r.begin_ns = call->begin_ns;
    r.end_ns = end;
    r.caller = call->caller;
    r.requested = call->requested;
    r.team = call->team.load(std::memory_order_relaxed) + extra_team;
    r.depth = call->depth;
    r.entry = call->entry;
    call->listener->on_end(r);
  }
}

// The pre-4.0 pairs: *_start starts the team (workers run fn), the master
// then runs fn itself and calls GOMP_parallel_end, which joins the team.
thread_local Call* t_open = nullptr;

Call* open_pair(Body fn, void* data, Entry entry, unsigned* n) {
  Call* call = new Call;
  *n = begin(call, fn, data, entry, *n);
  call->outer = t_open;
  t_open = call;
  ++t_depth;  // the master runs the body between start and end, outside any trampoline
  return call;
}

// __kmpc_fork_call's team (0: the runtime's): __kmpc_push_num_threads before the fork.
void push_team(Ident* loc, unsigned team) {
  if (team == 0) return;  // the runtime's default, or a team the program pushed itself
  using Gtid = int32_t (*)(Ident*);
  using Push = void (*)(Ident*, int32_t, int32_t);
  static Gtid gtid = reinterpret_cast<Gtid>(next_symbol("__kmpc_global_thread_num", "VERSION"));
  static Push push = reinterpret_cast<Push>(next_symbol("__kmpc_push_num_threads", "VERSION"));
  if (gtid && push) push(loc, gtid(loc), static_cast<int32_t>(team));
}

// The kmpc pair: copy the variadic arguments and hand the runtime the trampoline.
template <typename Fn>
void fork_kmpc(Fn next, Entry entry, Ident* loc, int32_t argc, Micro micro, va_list ap) {
  Call call;
  if (t_in_runtime) {
    // The runtime's own call for a region counted already: the trampoline
    // only passes the arguments on (no count, no depth, no listener).
    call.silent = true;
    call.caller = cached_tid();
    t_in_runtime = true;
  } else {
    // A team the program pushed (num_threads) is its own: the hook keeps it, and the
    // runtime has it already; only a team the hook chose is pushed.
    const unsigned pushed = static_cast<unsigned>(t_pushed > 0 ? t_pushed : 0);
    t_pushed = 0;
    const unsigned team = begin(&call, nullptr, nullptr, entry, pushed);
    if (team != pushed) push_team(loc, team);
  }
  call.micro = micro;
  if (argc < 0 || argc > kMaxMicrotaskArgs) {
    // Too many to invoke from a table: LLVM's own invoker takes any count.
    using Invoke = int (*)(Micro, int, int, int, void**, void**);
    static Invoke invoke = reinterpret_cast<Invoke>(dlsym(RTLD_DEFAULT, "__kmp_invoke_microtask"));
    if (!invoke || argc < 0) {
      std::fprintf(stderr, "threadburn omptap: a microtask of %d arguments (at most %d without the runtime's "
                   "__kmp_invoke_microtask)\n", argc, kMaxMicrotaskArgs);
      std::abort();
    }
    // Rare: a heap copy of the arguments and a trampoline through LLVM's invoker.
    struct Big {
      Call* call;
      Micro micro;
      int argc;
      void** argv;
      Invoke invoke;
    } big{&call, micro, argc, new void*[static_cast<size_t>(argc)], invoke};
    for (int i = 0; i < argc; ++i) big.argv[i] = va_arg(ap, void*);
    Micro big_trampoline = reinterpret_cast<Micro>(+[](int32_t* gtid, int32_t* btid, void* p) {
      Big* b = static_cast<Big*>(p);
      enter(b->call);
      const bool in_runtime = t_in_runtime;
      t_in_runtime = false;
      const int step = b->call->silent ? 0 : 1;
      t_depth += step;
      void* frame = nullptr;
      b->invoke(b->micro, *gtid, *btid, b->argc, b->argv, &frame);
      t_depth -= step;
      t_in_runtime = in_runtime;
    });
    next(loc, 1, big_trampoline, &big);
    delete[] big.argv;
    if (!call.silent) finish(&call);
    return;
  }
  call.argc = argc;
  for (int i = 0; i < argc; ++i) call.argv[i] = va_arg(ap, void*);
  next(loc, 1, reinterpret_cast<Micro>(kmpc_trampoline), &call);
  if (!call.silent) finish(&call);
}

}  // namespace

const char* entry_name(Entry entry) {
  static const char* const names[kEntries] = {
      "GOMP_parallel",
      "GOMP_parallel_reductions",
      "GOMP_parallel_sections",
      "GOMP_parallel_loop_static",
      "GOMP_parallel_loop_dynamic",
      "GOMP_parallel_loop_guided",
      "GOMP_parallel_loop_runtime",
      "GOMP_parallel_loop_nonmonotonic_dynamic",
      "GOMP_parallel_loop_nonmonotonic_guided",
      "GOMP_parallel_loop_nonmonotonic_runtime",
      "GOMP_parallel_loop_maybe_nonmonotonic_runtime",
      "GOMP_parallel_start",
      "GOMP_parallel_sections_start",
      "GOMP_parallel_loop_static_start",
      "GOMP_parallel_loop_dynamic_start",
      "GOMP_parallel_loop_guided_start",
      "GOMP_parallel_loop_runtime_start",
      "GOMP_teams_reg",
      "__kmpc_fork_call",
      "__kmpc_fork_teams",
  };
  const int i = static_cast<int>(entry);
  return i >= 0 && i < kEntries ? names[i] : "?";
}

void set_listener(Listener* listener) { g_listener.store(listener, std::memory_order_release); }
int depth() { return t_depth; }
int runtime_max_threads() {
  using Fn = int (*)();
  static std::atomic<void*> slot{nullptr};
  void* f = slot.load(std::memory_order_acquire);
  if (!f) {
    f = next_symbol("omp_get_max_threads", "OMP_1.0");
    if (!f) return 0;
    slot.store(f, std::memory_order_release);
  }
  return reinterpret_cast<Fn>(f)();
}
void set_team_hook(TeamHook hook) { g_team_hook.store(hook, std::memory_order_release); }
int64_t regions_seen() { return g_regions.load(std::memory_order_relaxed); }

}  // namespace threadburn::omptap

namespace ot = threadburn::omptap;
using ot::Body;
using ot::Entry;

extern "C" {

#define OMPTAP_EXPORT __attribute__((visibility("default")))

OMPTAP_EXPORT void GOMP_parallel(Body fn, void* data, unsigned num_threads, unsigned flags) {
  using Fn = void (*)(Body, void*, unsigned, unsigned);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel", "GOMP_4.0");
  if (ot::t_in_runtime) return next(fn, data, num_threads, flags);  /* the runtime's own call */
  ot::Call call;
  const unsigned team = ot::begin(&call, fn, data, Entry::kParallel, num_threads);
  next(ot::trampoline, &call, team, flags);
  ot::finish(&call);
}

OMPTAP_EXPORT unsigned GOMP_parallel_reductions(Body fn, void* data, unsigned num_threads, unsigned flags) {
  using Fn = unsigned (*)(Body, void*, unsigned, unsigned);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_reductions", "GOMP_5.0");
  if (ot::t_in_runtime) return next(fn, data, num_threads, flags);  /* the runtime's own call */
  ot::Call call;
  call.head = *static_cast<void**>(data);
  const unsigned team = ot::begin(&call, fn, data, Entry::kParallelReductions, num_threads);
  const unsigned r = next(ot::trampoline, &call, team, flags);
  ot::finish(&call);
  return r;
}

OMPTAP_EXPORT void GOMP_parallel_sections(Body fn, void* data, unsigned num_threads, unsigned count, unsigned flags) {
  using Fn = void (*)(Body, void*, unsigned, unsigned, unsigned);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_sections", "GOMP_4.0");
  if (ot::t_in_runtime) return next(fn, data, num_threads, count, flags);  /* the runtime's own call */
  ot::Call call;
  const unsigned team = ot::begin(&call, fn, data, Entry::kParallelSections, num_threads);
  next(ot::trampoline, &call, team, count, flags);
  ot::finish(&call);
}

// GOMP_parallel_loop_<kind>(fn, data, num_threads, start, end, incr, chunk, flags).
#define OMPTAP_LOOP(suffix, version, entry)                                                                  \
  OMPTAP_EXPORT void GOMP_parallel_loop_##suffix(Body fn, void* data, unsigned num_threads, long start,     \
                                                 long end, long incr, long chunk, unsigned flags) {         \
    using Fn = void (*)(Body, void*, unsigned, long, long, long, long, unsigned);                             \
    static std::atomic<void*> slot{nullptr};                                                                 \
    const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_loop_" #suffix, version);                      \
    if (ot::t_in_runtime) return next(fn, data, num_threads, start, end, incr, chunk, flags);  /* the runtime's own call */ \
    ot::Call call;                                                                                           \
    const unsigned team = ot::begin(&call, fn, data, entry, num_threads);                                    \
    next(ot::trampoline, &call, team, start, end, incr, chunk, flags);                                       \
    ot::finish(&call);                                                                                       \
  }
OMPTAP_LOOP(static, "GOMP_4.0", Entry::kLoopStatic)
OMPTAP_LOOP(dynamic, "GOMP_4.0", Entry::kLoopDynamic)
OMPTAP_LOOP(guided, "GOMP_4.0", Entry::kLoopGuided)
OMPTAP_LOOP(nonmonotonic_dynamic, "GOMP_4.5", Entry::kLoopNonmonotonicDynamic)
OMPTAP_LOOP(nonmonotonic_guided, "GOMP_4.5", Entry::kLoopNonmonotonicGuided)

// GOMP_parallel_loop_<runtime kind>(fn, data, num_threads, start, end, incr, flags): no chunk.
#define OMPTAP_LOOP_RUNTIME(suffix, version, entry)                                                          \
  OMPTAP_EXPORT void GOMP_parallel_loop_##suffix(Body fn, void* data, unsigned num_threads, long start,     \
                                                 long end, long incr, unsigned flags) {                     \
    using Fn = void (*)(Body, void*, unsigned, long, long, long, unsigned);                                   \
    static std::atomic<void*> slot{nullptr};                                                                 \
    const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_loop_" #suffix, version);                      \
    if (ot::t_in_runtime) return next(fn, data, num_threads, start, end, incr, flags);  /* the runtime's own call */ \
    ot::Call call;                                                                                           \
    const unsigned team = ot::begin(&call, fn, data, entry, num_threads);                                    \
    next(ot::trampoline, &call, team, start, end, incr, flags);                                              \
    ot::finish(&call);                                                                                       \
  }
OMPTAP_LOOP_RUNTIME(runtime, "GOMP_4.0", Entry::kLoopRuntime)
OMPTAP_LOOP_RUNTIME(nonmonotonic_runtime, "GOMP_5.0", Entry::kLoopNonmonotonicRuntime)
OMPTAP_LOOP_RUNTIME(maybe_nonmonotonic_runtime, "GOMP_5.0", Entry::kLoopMaybeNonmonotonicRuntime)

// The pre-4.0 pairs (GOMP_1.0): *_start, the master runs fn, GOMP_parallel_end.
OMPTAP_EXPORT void GOMP_parallel_start(Body fn, void* data, unsigned num_threads) {
  using Fn = void (*)(Body, void*, unsigned);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_start", "GOMP_1.0");
  ot::Call* call = ot::open_pair(fn, data, Entry::kParallelStart, &num_threads);
  next(ot::trampoline, call, num_threads);
  ot::t_in_runtime = false;  /* the master runs the body now */
}

OMPTAP_EXPORT void GOMP_parallel_sections_start(Body fn, void* data, unsigned num_threads, unsigned count) {
  using Fn = void (*)(Body, void*, unsigned, unsigned);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_sections_start", "GOMP_1.0");
  ot::Call* call = ot::open_pair(fn, data, Entry::kSectionsStart, &num_threads);
  next(ot::trampoline, call, num_threads, count);
  ot::t_in_runtime = false;  /* the master runs the body now */
}

#define OMPTAP_LOOP_START(suffix, entry)                                                                     \
  OMPTAP_EXPORT void GOMP_parallel_loop_##suffix##_start(Body fn, void* data, unsigned num_threads,         \
                                                         long start, long end, long incr, long chunk) {     \
    using Fn = void (*)(Body, void*, unsigned, long, long, long, long);                                       \
    static std::atomic<void*> slot{nullptr};                                                                 \
    const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_loop_" #suffix "_start", "GOMP_1.0");          \
    ot::Call* call = ot::open_pair(fn, data, entry, &num_threads);                                           \
    next(ot::trampoline, call, num_threads, start, end, incr, chunk);                                        \
    ot::t_in_runtime = false;  /* the master runs the body now */                                        \
  }
OMPTAP_LOOP_START(static, Entry::kLoopStaticStart)
OMPTAP_LOOP_START(dynamic, Entry::kLoopDynamicStart)
OMPTAP_LOOP_START(guided, Entry::kLoopGuidedStart)

OMPTAP_EXPORT void GOMP_parallel_loop_runtime_start(Body fn, void* data, unsigned num_threads, long start, long end,
                                                    long incr) {
  using Fn = void (*)(Body, void*, unsigned, long, long, long);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_loop_runtime_start", "GOMP_1.0");
  ot::Call* call = ot::open_pair(fn, data, Entry::kLoopRuntimeStart, &num_threads);
  next(ot::trampoline, call, num_threads, start, end, incr);
  ot::t_in_runtime = false;  /* the master runs the body now */
}

OMPTAP_EXPORT void GOMP_parallel_end(void) {
  using Fn = void (*)();
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_parallel_end", "GOMP_1.0");
  next();
  ot::Call* call = ot::t_open;
  if (!call) return;  // its start was not ours
  ot::t_open = call->outer;
  --ot::t_depth;
  ot::finish(call, 1);  // the master ran the body itself, outside the trampoline
  delete call;
}

OMPTAP_EXPORT void GOMP_teams_reg(Body fn, void* data, unsigned num_teams, unsigned thread_limit, unsigned flags) {
  using Fn = void (*)(Body, void*, unsigned, unsigned, unsigned);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "GOMP_teams_reg", "GOMP_5.0");
  if (ot::t_in_runtime) return next(fn, data, num_teams, thread_limit, flags);  /* the runtime's own call */
  ot::Call call;
  ot::begin(&call, fn, data, Entry::kTeamsReg, num_teams);
  next(ot::trampoline, &call, num_teams, thread_limit, flags);
  ot::finish(&call);
}

OMPTAP_EXPORT void __kmpc_fork_call(ot::Ident* loc, int32_t argc, ot::Micro microtask, ...) {
  using Fn = void (*)(ot::Ident*, int32_t, ot::Micro, ...);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "__kmpc_fork_call", "VERSION");
  va_list ap;
  va_start(ap, microtask);
  ot::fork_kmpc(next, Entry::kKmpcForkCall, loc, argc, microtask, ap);
  va_end(ap);
}

OMPTAP_EXPORT void __kmpc_fork_teams(ot::Ident* loc, int32_t argc, ot::Micro microtask, ...) {
  using Fn = void (*)(ot::Ident*, int32_t, ot::Micro, ...);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "__kmpc_fork_teams", "VERSION");
  va_list ap;
  va_start(ap, microtask);
  ot::fork_kmpc(next, Entry::kKmpcForkTeams, loc, argc, microtask, ap);
  va_end(ap);
}

// A team the program names for its next __kmpc_fork_call (clang's num_threads clause).
OMPTAP_EXPORT void __kmpc_push_num_threads(ot::Ident* loc, int32_t gtid, int32_t num_threads) {
  using Fn = void (*)(ot::Ident*, int32_t, int32_t);
  static std::atomic<void*> slot{nullptr};
  const Fn next = ot::next_or_die<Fn>(slot, "__kmpc_push_num_threads", "VERSION");
  if (!ot::t_in_runtime) ot::t_pushed = num_threads;
  next(loc, gtid, num_threads);
}

// The runtime behind the interposer, for runtime detection (runtime/runtime.cc),
// which must name the library that really serves the regions.
OMPTAP_EXPORT void* threadburn_omptap_next() {
  return threadburn::omptap::next_symbol("GOMP_parallel", "GOMP_4.0");
}

}  // extern "C"

namespace threadburn::omptap {

bool installed() {
  void* ours = reinterpret_cast<void*>(&::GOMP_parallel);
  // dlsym, not dlvsym: dlvsym refuses unversioned definitions, which the
  // dynamic linker accepts for the libraries' versioned references.
  return dlsym(RTLD_DEFAULT, "GOMP_parallel") == ours;
}

}  // namespace threadburn::omptap
