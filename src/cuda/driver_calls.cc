#include "cuda/driver_calls.h"

#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include <atomic>
#include <cstring>
#include <utility>

namespace threadburn::cuda {
namespace {

// Not a kind of call the tallies count: the driver's own lookup.
constexpr auto kLookup = static_cast<CallKind>(-1);
// A call that waits only sometimes (driver_calls.h, kBlockingNs): an
// asynchronous copy to or from pageable host memory, which the driver does
// synchronously, and cuMemFree, which synchronises the device; counted as a
// wait when it blocked, else not counted at all.
constexpr auto kMaybeWait = static_cast<CallKind>(-2);
// A query of whether the device is done (cuEventQuery, cuStreamQuery): one
// returns at once; many close together on one thread are a wait that spins
// (driver_calls.h, kPollMin), counted as one wait when the loop ends.
constexpr auto kQuery = static_cast<CallKind>(-3);
constexpr int kNotReady = 600;  // CUDA_ERROR_NOT_READY: the work is not done

// The entry points, by base name (cuda.h), with the most integer or pointer
// arguments any version of them takes: a wrapper forwards that many, so one
// wrapper serves every version of a name (cuCtxSynchronize takes none before
// CUDA 13 and a context after; cuMemcpyDtoH's first version took 32-bit
// sizes: on x86-64 each argument travels in a register or a stack slot of its
// own, and a callee reads what it declares).
struct Entry {
  const char* base;
  CallKind kind;
  int arity;
};
constexpr Entry kTable[] = {
    // cuGetProcAddress (CUDA 11.3: four arguments) and its _v2 (12.0: a fifth,
    // the symbol's status): the entry points it returns come back wrapped.
    {"cuGetProcAddress", kLookup, 5},
    {"cuCtxSynchronize", CallKind::kWait, 1},
    {"cuStreamSynchronize", CallKind::kWait, 1},
    {"cuEventSynchronize", CallKind::kWait, 1},
    {"cuMemcpyDtoH", CallKind::kWait, 3},   // synchronous copies: they wait for the work before them
    {"cuMemcpyHtoD", CallKind::kWait, 3},
    {"cuMemcpy", CallKind::kWait, 3},
    {"cuMemcpy2D", CallKind::kWait, 1},
    {"cuMemcpy3D", CallKind::kWait, 1},
    {"cuMemcpyDtoHAsync", kMaybeWait, 4},  // .cpu() / .to('cpu') into ordinary memory blocks inside it
    {"cuMemcpyHtoDAsync", kMaybeWait, 4},
    {"cuMemcpyAsync", kMaybeWait, 4},
    {"cuMemFree", kMaybeWait, 1},          // synchronises the device before it frees
    {"cuEventQuery", kQuery, 1},
    {"cuStreamQuery", kQuery, 1},
    {"cuLaunchKernel", CallKind::kLaunch, 11},
    {"cuLaunchKernelEx", CallKind::kLaunch, 4},
    {"cuLaunchCooperativeKernel", CallKind::kLaunch, 10},
    {"cuGraphLaunch", CallKind::kLaunch, 2},
};
constexpr int kEntries = sizeof(kTable) / sizeof(kTable[0]);
// Distinct addresses one name may have (legacy and per-thread default stream,
// versions): each gets a wrapper of its own.
constexpr int kVariants = 4;
constexpr int kSlots = kEntries * kVariants;
// The suffixes a driver's symbol adds to a base name.
constexpr const char* kSuffixes[] = {"", "_v2", "_ptsz", "_ptds", "_v2_ptds", "_v2_ptsz"};

std::atomic<void*> g_real[kSlots];
std::atomic<int> g_wrapped{0}, g_unwrapped{0};
std::atomic<int64_t> g_first_ns{0};
std::atomic<FirstWorkHook> g_hook{nullptr};
std::atomic<BeforeWaitHook> g_before_wait{nullptr};

// The waits' run (StepRun): a short spin lock around the rule, none once a
// run is confirmed; the hook called outside it.
std::atomic_flag g_steps_lock = ATOMIC_FLAG_INIT;
StepRun g_steps;
std::atomic<bool> g_steps_done{false};
std::atomic<StepHook> g_step_hook{nullptr};
std::atomic<int64_t> g_steady_index{-1}, g_steady_ns{0};

// A wait (a call counted as one, or a polling loop) ended at end_ns.
void step_event(int64_t end_ns) {
  if (g_steps_done.load(std::memory_order_acquire)) return;
  while (g_steps_lock.test_and_set(std::memory_order_acquire)) {
  }
  const StepRun::Seen seen = g_steps.add(end_ns);
  g_steps_lock.clear(std::memory_order_release);
  const StepHook hook = g_step_hook.load(std::memory_order_acquire);
  if (seen.confirmed) {
    g_steady_ns.store(seen.first_ns, std::memory_order_relaxed);
    g_steady_index.store(seen.first, std::memory_order_release);
    g_steps_done.store(true, std::memory_order_release);
    if (hook) hook(seen.first, seen.first_ns, true);
  } else if (seen.burst && hook) {
    hook(seen.index, end_ns, false);
  }
}

// The progress of a kind (calls so far, when the last ended) as one snapshot: an in-run
// block's unit time divides a time difference by a count difference, so both must come
// from the same instant, and the time must never go backwards when several threads end
// calls at once. Writers take a spin lock (a few ns against a call of microseconds); readers
// a seqlock, never blocking a writer.
struct ProgressCell {
  std::atomic_flag writing = ATOMIC_FLAG_INIT;
  std::atomic<int64_t> seq{0}, calls{0}, last_end_ns{0};
};
ProgressCell g_progress[kCallKinds];

void count_end(int k, int64_t end) {
  ProgressCell& c = g_progress[k];
  while (c.writing.test_and_set(std::memory_order_acquire)) {
  }
  c.seq.fetch_add(1, std::memory_order_relaxed);  // odd: being written
  std::atomic_thread_fence(std::memory_order_release);
  c.calls.store(c.calls.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  if (end > c.last_end_ns.load(std::memory_order_relaxed)) c.last_end_ns.store(end, std::memory_order_relaxed);
  c.seq.fetch_add(1, std::memory_order_release);
  c.writing.clear(std::memory_order_release);
}

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// One thread's tallies: written by that thread alone (relaxed stores of
// single-writer counters), read by anyone; never freed (a thread that ended
// keeps its figures).
struct Tallies {
  pid_t tid = 0;
  std::atomic<int64_t> calls[kCallKinds]{}, wall_ns[kCallKinds]{}, cpu_ns[kCallKinds]{};
  // Launches whose CPU clock was read: their wall time (cpu_ns holds their CPU).
  std::atomic<int64_t> sampled_wall_ns{0};
  // Of the waits, the calls that wait only sometimes and blocked (kMaybeWait).
  std::atomic<int64_t> hidden_calls{0}, hidden_wall_ns{0};
  // The queries of the polling loop in progress: how many, the first's start,
  // the last's end, the thread's CPU clock at both.
  std::atomic<int64_t> poll_count{0}, poll_start_ns{0}, poll_end_ns{0}, poll_cpu0_ns{0}, poll_cpu1_ns{0};
  std::atomic<int64_t> poll_loops{0}, poll_wall_ns{0};  // loops closed (counted in the waits too)
  Tallies* next = nullptr;
};
std::atomic<Tallies*> g_threads{nullptr};
thread_local Tallies* t_tallies = nullptr;
thread_local int t_depth = 0;  // a wrapped call inside a wrapped call counts once (another interposer's)

Tallies* tallies() {
  if (!t_tallies) {
    auto* t = new Tallies;
    t->tid = static_cast<pid_t>(syscall(SYS_gettid));
    t->next = g_threads.load(std::memory_order_relaxed);
    while (!g_threads.compare_exchange_weak(t->next, t, std::memory_order_release, std::memory_order_relaxed)) {
    }
    t_tallies = t;
  }
  return t_tallies;
}

void add(std::atomic<int64_t>& v, int64_t d) { v.store(v.load(std::memory_order_relaxed) + d, std::memory_order_relaxed); }

// The time (and CPU) of one call, recorded at its end.
class Span {
 public:
  explicit Span(CallKind kind) : kind_(kind), outer_(t_depth++ == 0) {
    if (!outer_) return;
    t_ = tallies();
    maybe_ = kind == kMaybeWait;
    if (maybe_) kind_ = kind = CallKind::kWait;  // timed as a wait; counted as one only if it blocked
    const int k = static_cast<int>(kind);
    cpu_ = kind == CallKind::kWait || t_->calls[k].load(std::memory_order_relaxed) % kLaunchCpuEvery == 0;
    if (kind == CallKind::kWait && !maybe_) {
      if (BeforeWaitHook hook = g_before_wait.load(std::memory_order_relaxed)) hook();
    }
    wall0_ = clock_ns(CLOCK_MONOTONIC);
    if (g_first_ns.load(std::memory_order_relaxed) == 0) first_work(wall0_);
    if (cpu_) cpu0_ = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  }
  ~Span() {
    --t_depth;
    if (!outer_) return;
    const int64_t cpu = cpu_ ? clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0_ : 0;
    const int64_t end = clock_ns(CLOCK_MONOTONIC), wall = end - wall0_;
    const int k = static_cast<int>(kind_);
    if (maybe_) {
      if (wall < kBlockingNs) return;  // enqueued, no wait
      add(t_->hidden_calls, 1);
      add(t_->hidden_wall_ns, wall);
    }
    count_end(k, end);
    add(t_->calls[k], 1);
    add(t_->wall_ns[k], wall);
    if (cpu_) add(t_->cpu_ns[k], cpu);
    if (cpu_ && kind_ == CallKind::kLaunch) add(t_->sampled_wall_ns, wall);
    if (kind_ == CallKind::kWait) step_event(end);  // counted: the hook sees it in the tallies
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  static void first_work(int64_t t_ns) {
    int64_t zero = 0;
    if (!g_first_ns.compare_exchange_strong(zero, t_ns, std::memory_order_acq_rel)) return;
    if (FirstWorkHook hook = g_hook.load(std::memory_order_acquire)) hook(t_ns);
  }

  CallKind kind_;
  bool outer_;
  bool maybe_ = false;
  bool cpu_ = false;
  Tallies* t_ = nullptr;
  int64_t wall0_ = 0, cpu0_ = 0;
};

// A polling loop's end (a query that found the work done, or a gap after the
// last query): kPollMin queries or more are one wait, from the first's start
// to the last's end, with the CPU between. On the thread itself.
void close_poll(Tallies* t) {
  const int64_t n = t->poll_count.load(std::memory_order_relaxed);
  if (n == 0) return;
  t->poll_count.store(0, std::memory_order_relaxed);
  if (n < kPollMin) return;
  const int64_t end = t->poll_end_ns.load(std::memory_order_relaxed);
  const int64_t wall = end - t->poll_start_ns.load(std::memory_order_relaxed);
  const int64_t cpu = t->poll_cpu1_ns.load(std::memory_order_relaxed) - t->poll_cpu0_ns.load(std::memory_order_relaxed);
  if (wall < kBlockingNs) return;  // a burst of queries (an allocator asking its events), not a wait
  const int k = static_cast<int>(CallKind::kWait);
  count_end(k, end);
  add(t->calls[k], 1);
  add(t->wall_ns[k], wall);
  add(t->cpu_ns[k], cpu);
  add(t->poll_loops, 1);
  add(t->poll_wall_ns, wall);
  step_event(end);
}

// Every argument as a register-sized integer (see kTable).
using Arg = uintptr_t;
template <size_t>
using ArgAt = Arg;

void* wrap_any(const char* name, void* found);

template <int S, typename... A>
int wrapper(A... a) {
  Span span(kTable[S / kVariants].kind);
  return reinterpret_cast<int (*)(A...)>(g_real[S].load(std::memory_order_relaxed))(a...);
}

// A query: timed into the thread's polling loop (close_poll).
template <int S>
int query_wrapper(Arg x) {
  using Real = int (*)(Arg);
  const auto real = reinterpret_cast<Real>(g_real[S].load(std::memory_order_relaxed));
  if (t_depth > 0) return real(x);
  Tallies* t = tallies();
  const int64_t start = clock_ns(CLOCK_MONOTONIC), cpu = clock_ns(CLOCK_THREAD_CPUTIME_ID);
  if (t->poll_count.load(std::memory_order_relaxed) > 0 &&
      (start - t->poll_end_ns.load(std::memory_order_relaxed) > kPollGapNs ||
       cpu - t->poll_cpu1_ns.load(std::memory_order_relaxed) > kPollGapCpuNs)) {
    close_poll(t);  // the loop before ended: long ago, or the thread worked since
  }
  if (t->poll_count.load(std::memory_order_relaxed) == 0) {
    t->poll_start_ns.store(start, std::memory_order_relaxed);
    t->poll_cpu0_ns.store(cpu, std::memory_order_relaxed);
  }
  ++t_depth;
  const int rc = real(x);
  --t_depth;
  t->poll_end_ns.store(clock_ns(CLOCK_MONOTONIC), std::memory_order_relaxed);
  t->poll_cpu1_ns.store(clock_ns(CLOCK_THREAD_CPUTIME_ID), std::memory_order_relaxed);
  add(t->poll_count, 1);
  if (rc != kNotReady) close_poll(t);  // done (or an error): the loop ends here
  return rc;
}

// cuGetProcAddress(symbol, pfn, version, flags[, status]): the entry point it
// returns, wrapped. One wrapper serves both versions (the first ignores the
// fifth argument).
template <int S>
int lookup_wrapper(const char* symbol, void** pfn, Arg version, Arg flags, Arg status) {
  using Real = int (*)(const char*, void**, Arg, Arg, Arg);
  const int rc = reinterpret_cast<Real>(g_real[S].load(std::memory_order_relaxed))(symbol, pfn, version, flags, status);
  if (rc == 0 && symbol && pfn && *pfn) *pfn = wrap_any(symbol, *pfn);
  return rc;
}

template <int S, size_t... I>
void* wrapper_with(std::index_sequence<I...>) {
  if constexpr (kTable[S / kVariants].kind == kLookup) {
    return reinterpret_cast<void*>(&lookup_wrapper<S>);
  } else if constexpr (kTable[S / kVariants].kind == kQuery) {
    return reinterpret_cast<void*>(&query_wrapper<S>);
  } else {
    return reinterpret_cast<void*>(&wrapper<S, ArgAt<I>...>);
  }
}

template <int S>
void* wrapper_of() {
  return wrapper_with<S>(std::make_index_sequence<static_cast<size_t>(kTable[S / kVariants].arity)>{});
}

template <size_t... S>
const void* const* make_wrappers(std::index_sequence<S...>) {
  static void* const table[] = {wrapper_of<static_cast<int>(S)>()...};
  return table;
}

const void* wrapper_at(int slot) {
  static const void* const* table = make_wrappers(std::make_index_sequence<kSlots>{});
  return table[slot];
}

// The table's entry of a driver symbol name, or -1.
int entry_of(const char* name) {
  for (int e = 0; e < kEntries; ++e) {
    const size_t n = std::strlen(kTable[e].base);
    // The rest of the name must be one of the driver's suffixes (cuMemcpy is a prefix of cuMemcpyDtoH).
    if (std::strncmp(name, kTable[e].base, n) != 0) continue;
    for (const char* suffix : kSuffixes) {
      if (std::strcmp(name + n, suffix) == 0) return e;
    }
  }
  return -1;
}

// The wrapper of `real` as entry e: its slot if it has one, else a free one.
void* wrap_entry(int e, void* real) {
  for (int v = 0; v < kVariants; ++v) {
    const int slot = e * kVariants + v;
    void* held = g_real[slot].load(std::memory_order_acquire);
    if (held == real) return const_cast<void*>(wrapper_at(slot));
    if (held == nullptr && g_real[slot].compare_exchange_strong(held, real, std::memory_order_acq_rel)) {
      g_wrapped.fetch_add(1, std::memory_order_relaxed);
      return const_cast<void*>(wrapper_at(slot));
    }
    if (held == real) return const_cast<void*>(wrapper_at(slot));  // another thread took it for the same
  }
  g_unwrapped.fetch_add(1, std::memory_order_relaxed);
  return real;
}

void* wrap_any(const char* name, void* found) {
  const int e = entry_of(name);
  return e < 0 ? found : wrap_entry(e, found);
}

}  // namespace

void* on_lookup(const char* name, void* found) {
  if (!name || !found || name[0] != 'c' || name[1] != 'u') return found;
  return wrap_any(name, found);
}

std::vector<ThreadCalls> thread_calls() {
  std::vector<ThreadCalls> out;
  for (Tallies* t = g_threads.load(std::memory_order_acquire); t; t = t->next) {
    ThreadCalls c;
    c.tid = t->tid;
    for (int k = 0; k < kCallKinds; ++k) {
      c.of[k].calls = t->calls[k].load(std::memory_order_relaxed);
      c.of[k].wall_ns = t->wall_ns[k].load(std::memory_order_relaxed);
      c.of[k].cpu_ns = t->cpu_ns[k].load(std::memory_order_relaxed);
    }
    c.hidden_waits = t->hidden_calls.load(std::memory_order_relaxed);
    c.hidden_wait_ns = t->hidden_wall_ns.load(std::memory_order_relaxed);
    c.poll_loops = t->poll_loops.load(std::memory_order_relaxed);
    c.poll_wall_ns = t->poll_wall_ns.load(std::memory_order_relaxed);
    // A loop still open (the thread polls now, or stopped polling without
    // a query that found the work done): counted as it stands.
    const int64_t open = t->poll_count.load(std::memory_order_relaxed);
    const int64_t open_wall = t->poll_end_ns.load(std::memory_order_relaxed) - t->poll_start_ns.load(std::memory_order_relaxed);
    if (open >= kPollMin && open_wall >= kBlockingNs) {
      const int64_t wall = t->poll_end_ns.load(std::memory_order_relaxed) - t->poll_start_ns.load(std::memory_order_relaxed);
      CallTally& w = c.of[static_cast<int>(CallKind::kWait)];
      ++w.calls;
      w.wall_ns += wall;
      w.cpu_ns += t->poll_cpu1_ns.load(std::memory_order_relaxed) - t->poll_cpu0_ns.load(std::memory_order_relaxed);
      ++c.poll_loops;
      c.poll_wall_ns += wall;
    }
    // Launches: the wall time of all of them at the CPU share of those measured.
    CallTally& l = c.of[static_cast<int>(CallKind::kLaunch)];
    const int64_t sampled = t->sampled_wall_ns.load(std::memory_order_relaxed);
    l.cpu_ns = sampled > 0 ? static_cast<int64_t>(static_cast<double>(l.wall_ns) * static_cast<double>(l.cpu_ns) /
                                                  static_cast<double>(sampled))
                           : 0;
    out.push_back(c);
  }
  return out;
}

CallTally total(const std::vector<ThreadCalls>& threads, CallKind kind) {
  CallTally sum;
  for (const ThreadCalls& t : threads) {
    const CallTally& x = t.of[static_cast<int>(kind)];
    sum.calls += x.calls;
    sum.wall_ns += x.wall_ns;
    sum.cpu_ns += x.cpu_ns;
  }
  return sum;
}

void set_first_work_hook(FirstWorkHook hook) { g_hook.store(hook, std::memory_order_release); }
void set_step_hook(StepHook hook) { g_step_hook.store(hook, std::memory_order_release); }
StepStart steady_start() {
  const int64_t index = g_steady_index.load(std::memory_order_acquire);
  return index < 0 ? StepStart{} : StepStart{index, g_steady_ns.load(std::memory_order_relaxed)};
}
void set_before_wait_hook(BeforeWaitHook hook) { g_before_wait.store(hook, std::memory_order_release); }

Progress progress(CallKind kind) {
  const ProgressCell& c = g_progress[static_cast<int>(kind)];
  for (;;) {
    const int64_t seq = c.seq.load(std::memory_order_acquire);
    if (seq % 2 != 0) continue;
    const Progress p{c.calls.load(std::memory_order_relaxed), c.last_end_ns.load(std::memory_order_relaxed)};
    std::atomic_thread_fence(std::memory_order_acquire);
    if (c.seq.load(std::memory_order_relaxed) == seq) return p;
  }
}
int64_t first_work_ns() { return g_first_ns.load(std::memory_order_acquire); }
int wrapped_entry_points() { return g_wrapped.load(std::memory_order_relaxed); }
int unwrapped_entry_points() { return g_unwrapped.load(std::memory_order_relaxed); }

}  // namespace threadburn::cuda
