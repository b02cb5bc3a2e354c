#include "probe/inrun.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>

#include "core/clock.h"
#include "core/thread_class.h"
#include "cuda/driver_calls.h"
#include "cuda/driver_policy.h"
#include "omptap/omptap.h"
#include "runtime/runtime.h"

extern "C" void* threadburn_omptap_next();

namespace threadburn::probe::inrun {
namespace {

// Shared with threadburn (and with the other steered processes of the job): every access atomic.
int64_t load(const int64_t& field) { return __atomic_load_n(&field, __ATOMIC_ACQUIRE); }
void store(int64_t& field, int64_t value) { __atomic_store_n(&field, value, __ATOMIC_RELEASE); }
void add(int64_t& field, int64_t d) { __atomic_fetch_add(&field, d, __ATOMIC_ACQ_REL); }

Control* g_ctl = nullptr;        // set once in the constructor, before any other thread
std::atomic<pid_t> g_opened{0};  // the process that mapped it (a forked child is another)
std::atomic<pid_t> g_pid{0};     // this process took a slot: it is steered
std::atomic<int> g_slot{-1};     // ... that one (0: the owner of the top-level snapshot)
std::atomic<bool> g_blocks{false};  // threadburn asked a setting once: the ceiling is no longer told

bool active() { return g_pid.load(std::memory_order_acquire) == getpid() && g_slot.load(std::memory_order_acquire) >= 0; }
Proc& slot() { return g_ctl->procs[g_slot.load(std::memory_order_relaxed)]; }
bool owner() { return g_slot.load(std::memory_order_relaxed) == 0; }

// The setting asked now (its index in *index), or null for the program's own.
const Setting* asked(int64_t* index) {
  const int64_t i = load(g_ctl->request);
  *index = i;
  if (i >= 0 && !g_blocks.load(std::memory_order_relaxed)) g_blocks.store(true, std::memory_order_relaxed);
  const int64_t n = load(g_ctl->n_settings);
  return i >= 0 && i < n && i < kMaxSettings ? &g_ctl->settings[i] : nullptr;
}

// The setting `index` took effect in this process now: at its knob's own point (a team at an
// ask answered or a region given it, a blocktime at the region after it was set, the CUDA
// policy at the wait after the flags were set and read back; the program's own at any of
// them). Once per setting and process.
void note_applied(int64_t index) {
  Proc& p = slot();
  int64_t was = load(p.applied);
  if (was == index) return;
  if (!__atomic_compare_exchange_n(&p.applied, &was, index, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  const int64_t now = wall_ns();
  store(p.applied_ns, now);
  if (owner()) {
    store(g_ctl->applied, index);
    store(g_ctl->applied_ns, now);
  }
}

// What the program's threads were told and set, each thread its own (a thread_local is
// that thread's alone: no sharing).
constexpr int64_t kUnset = INT64_MIN;
struct ThreadKnob {
  int64_t set = kUnset;  // what threadburn last set on this thread (kUnset: nothing, the program's own)
  int64_t own = 0;       // the program's own value, read before the first change
};
thread_local ThreadKnob t_blocktime;
// The last omp_get_max_threads() this thread was told outside regions (0: never): no region
// it leaves to the runtime gets more (OpenMP's promise; programs size per-thread buffers by it).
thread_local int t_told = 0;
// The last answer to any thread: the bound of a thread never told (another may have sized for it).
std::atomic<int> g_told{0};

// Brings a thread's knob to `want` (-1: its own): get reads its own before the
// first change, put sets one (returns the runtime's result, 0: ok; -1: nothing to do).
template <typename Get, typename Put>
int64_t steer(ThreadKnob* k, int64_t want, Get get, Put put) {
  if (want < 0) {
    if (k->set == kUnset) return -1;
    const int64_t rc = put(k->own);
    k->set = kUnset;
    return rc;
  }
  if (k->set == want) return -1;
  if (k->set == kUnset) k->own = get();
  k->set = want;
  return put(want);
}

using GetBlocktime = int (*)();
using SetBlocktime = void (*)(int);
using CtxCurrent = int (*)(void**);
using CtxFlags = int (*)(unsigned*);
using CtxSetFlags = int (*)(unsigned);

// A definition in the process's scope (RTLD_DEFAULT, a null handle) or in a library's.
template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

// The CUDA host wait policy belongs to a context, not to a thread: each context the program
// waits in is read once (its own flags, every bit), set to the block's policy keeping its
// other bits, and restored once when the program's own is asked again. A failed set is
// retried at the next wait and published (cuda_rc); a failed read leaves the context alone.
struct CudaContext {
  void* ctx = nullptr;
  unsigned own = 0;      // its flags before threadburn's first change
  int64_t set = kUnset;  // the policy bits threadburn set last (kUnset: its own in force)
};
constexpr int kMaxContexts = 16;
std::mutex g_cuda_mu;  // before_wait runs on any thread that waits
CudaContext g_contexts[kMaxContexts];
int g_n_contexts = 0;

}  // namespace

bool open_from_environment() {
  const char* path = std::getenv(kVariable);
  if (!path || !*path) return false;
  const int fd = open(path, O_RDWR | O_CLOEXEC);
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_size < static_cast<off_t>(sizeof(Control))) {
    if (fd >= 0) close(fd);
    std::fprintf(stderr, "threadburn probe: %s=%s: not a control block of this size\n", kVariable, path);
    return false;
  }
  void* p = mmap(nullptr, sizeof(Control), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return false;
  auto* ctl = static_cast<Control*>(p);
  if (load(ctl->magic) != kMagic || load(ctl->version) != kVersion) {
    munmap(p, sizeof(Control));
    std::fprintf(stderr, "threadburn probe: %s=%s: another version of the control block\n", kVariable, path);
    return false;
  }
  g_ctl = ctl;
  g_opened.store(getpid(), std::memory_order_release);
  return true;
}

void take(int64_t t_ns, Why why) {
  if (!g_ctl || g_opened.load(std::memory_order_acquire) != getpid() || g_slot.load(std::memory_order_acquire) >= 0) return;
  const int64_t pid = getpid();
  const int64_t index = __atomic_fetch_add(&g_ctl->n_procs, 1, __ATOMIC_ACQ_REL);
  if (index >= kMaxProcs) {
    add(g_ctl->refused, 1);  // every slot taken: this process runs on unsteered, and threadburn says so
    return;
  }
  Proc& p = g_ctl->procs[index];
  store(p.applied, -2);
  store(p.applied_ns, 0);
  store(p.why, why);
  store(p.pid, pid);
  if (index == 0) {
    Dl_info info{};
    void* next = threadburn_omptap_next();
    const std::string runtime = next && dladdr(next, &info) && info.dli_fname ? runtime_from_library(info.dli_fname) : "";
    store(g_ctl->runtime, runtime == runtime_specs()[0].library ? 1 : runtime == runtime_specs()[1].library ? 2 : 0);
    store(g_ctl->applied, -2);
    store(g_ctl->cuda_rc, -1);
    store(g_ctl->steady_ns, t_ns);
    store(g_ctl->owner_pid, pid);
  }
  g_slot.store(static_cast<int>(index), std::memory_order_release);
  g_pid.store(static_cast<pid_t>(pid), std::memory_order_release);
}

void publish(const BurnSample& s, int64_t regions, int64_t region_end_ns) {
  if (!active()) return;
  int64_t cpu = s.extra_ns;
  for (int c = 0; c < kThreadClasses; ++c) {
    if (c != index_of(ThreadClass::kSampler)) cpu += s.cpu_ns[c];
  }
  Proc& p = slot();
  store(p.seq, load(p.seq) + 1);  // odd: being written (this process's sampler alone writes its slot)
  store(p.sample_ns, s.t_ns);
  store(p.cpu_ns, cpu);
  store(p.regions, regions);
  store(p.seq, load(p.seq) + 1);
  if (!owner()) return;
  const cuda::Progress waits = cuda::progress(cuda::CallKind::kWait);
  const cuda::Progress launches = cuda::progress(cuda::CallKind::kLaunch);
  Control& c = *g_ctl;
  store(c.seq, load(c.seq) + 1);  // odd: being written
  store(c.sample_ns, s.t_ns);
  store(c.cpu_ns, cpu);
  store(c.regions, regions);
  store(c.region_end_ns, region_end_ns);
  store(c.waits, waits.calls);
  store(c.wait_end_ns, waits.last_end_ns);
  store(c.launches, launches.calls);
  store(c.launch_end_ns, launches.last_end_ns);
  store(c.seq, load(c.seq) + 1);
}

void saw_region(int team, int requested) {
  if (!active() || requested != 0) return;
  add(g_ctl->free_regions, 1);  // every forking thread of every steered process
  if (load(g_ctl->applied) < 0 && owner()) {
    int64_t seen = load(g_ctl->team_seen);
    while (team > seen && !__atomic_compare_exchange_n(&g_ctl->team_seen, &seen, team, false, __ATOMIC_ACQ_REL,
                                                       __ATOMIC_ACQUIRE)) {
    }
  }
}

void end() {
  if (active() && owner()) store(g_ctl->ended, 1);
}

int answer(int own) {
  if (!g_ctl || own <= 0) return own;
  // An ask outside a region is where a program decides whether to fork (PyTorch at one thread
  // asks before every parallel_for and never forks): its steady phase, as a first region is.
  if (!active()) take(wall_ns(), kAsk);
  if (!active()) {  // not steered (a forked child, every slot taken): the runtime's own, remembered
    t_told = own;
    g_told.store(own, std::memory_order_relaxed);
    return own;
  }
  int64_t index = -1;
  const Setting* s = asked(&index);
  store(g_ctl->own_team, own);
  add(g_ctl->asks, 1);
  const int ceiling = static_cast<int>(load(g_ctl->ceiling));
  int told = own;
  if (s && s->team > 0) {
    told = ceiling > 0 ? std::min<int>(static_cast<int>(s->team), ceiling) : static_cast<int>(s->team);
    if (told == s->team) note_applied(index);
  } else if (!s) {
    note_applied(index);
  }
  t_told = told;
  g_told.store(told, std::memory_order_relaxed);
  return told;
}

bool echo(int n) {
  // The program setting what it was just told (Debian's OpenBLAS sets every answer it gets,
  // goto_set_num_threads): an echo of a block's team, not the program's own choice. Kept
  // from the runtime, so the program's own team is still its own in the next plain block;
  // the thread's regions get it all the same (told), and its next ask the block's answer.
  return active() && n > 0 && n == t_told && n != omptap::runtime_max_threads();
}

unsigned team_hook(unsigned requested) {
  if (!active()) return requested;
  int64_t index = -1;
  const Setting* s = asked(&index);
  bool applied = !s || (s->team <= 0 && s->blocktime_ms < 0 && s->cuda_flags < 0);
  if (load(g_ctl->runtime) == 2) {  // LLVM: its blocktime, on the forking thread
    static const GetBlocktime get = symbol<GetBlocktime>(RTLD_DEFAULT, "kmp_get_blocktime");
    static const SetBlocktime set = symbol<SetBlocktime>(RTLD_DEFAULT, "kmp_set_blocktime");
    if (get && set) {
      steer(&t_blocktime, s ? s->blocktime_ms : -1, [] { return static_cast<int64_t>(get()); },
            [](int64_t ms) { set(static_cast<int>(ms)); return int64_t{0}; });
      if (s && s->blocktime_ms >= 0) applied = t_blocktime.set == s->blocktime_ms;
    }
  }
  unsigned team = requested;
  if (requested == 0) {  // the program left the team to the runtime
    const int own = omptap::runtime_max_threads();
    if (own > 0) store(g_ctl->own_team, own);
    const int ceiling = static_cast<int>(load(g_ctl->ceiling));
    const int want = s && s->team > 0 ? (ceiling > 0 ? std::min<int>(static_cast<int>(s->team), ceiling)
                                                      : static_cast<int>(s->team)) : own;
    // Exactly what this thread was last told (a thread never told: what the process was last
    // told; never any: the block's team): with dyn-var false OpenMP gives an unnamed region
    // exactly nthreads-var, and programs rely on it both ways: more overruns buffers sized
    // by the answer, fewer hangs a library whose members wait for each other (OpenBLAS's
    // level-3 threads). A block's team reaches a thread through its next answer.
    const int told = t_told > 0 ? t_told : g_told.load(std::memory_order_relaxed);
    const int give = told > 0 ? told : want;
    if (s && s->team > 0) {
      applied = give == want;
      if (give != want) add(g_ctl->held_back, 1);
    }
    team = give == own || give <= 0 ? 0 : static_cast<unsigned>(give);  // the runtime's own: leave it to it
  }
  if (applied) note_applied(index);
  return team;
}

void before_wait() {
  if (!active()) return;
  int64_t index = -1;
  const Setting* s = asked(&index);
  const int64_t want = s ? s->cuda_flags : -1;
  // The program's own asked: applied once every context threadburn changed has its own back.
  const bool plain = !s;
  static void* const driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  static const CtxCurrent current = driver ? symbol<CtxCurrent>(driver, "cuCtxGetCurrent") : nullptr;
  static const CtxFlags get = driver ? symbol<CtxFlags>(driver, "cuCtxGetFlags") : nullptr;
  static const CtxSetFlags set = driver ? symbol<CtxSetFlags>(driver, "cuCtxSetFlags") : nullptr;
  std::lock_guard<std::mutex> lock(g_cuda_mu);
  const auto changed = [] {
    for (int i = 0; i < g_n_contexts; ++i) {
      if (g_contexts[i].set != kUnset) return true;
    }
    return false;
  };
  if (want < 0 && !changed()) {
    if (plain) note_applied(index);
    return;
  }
  if (!get || !set) {
    if (want >= 0) store(g_ctl->cuda_rc, 500);  // CUDA_ERROR_NOT_FOUND: a driver without cuCtxSetFlags (before 12.1)
    return;
  }
  void* ctx = nullptr;
  if (current && current(&ctx) != 0) return;
  CudaContext* c = nullptr;
  for (int i = 0; i < g_n_contexts && !c; ++i) {
    if (g_contexts[i].ctx == ctx) c = &g_contexts[i];
  }
  if (!c) {
    if (want < 0) return;  // a context threadburn never changed: its own in force
    unsigned own = 0;
    const int rc = get(&own);
    if (rc != 0 || g_n_contexts == kMaxContexts) {
      store(g_ctl->cuda_rc, rc != 0 ? rc : 500);  // left alone: nothing of the program's is lost
      return;
    }
    c = &g_contexts[g_n_contexts++];
    c->ctx = ctx;
    c->own = own;
  }
  const int64_t bits = want < 0 ? kUnset : want & cuda::kSchedMask;
  if (c->set != bits) {
    const unsigned flags = bits == kUnset ? c->own : (c->own & ~cuda::kSchedMask) | static_cast<unsigned>(bits);
    const int rc = set(flags);
    unsigned now = 0;
    store(g_ctl->cuda_rc, rc);
    if (rc != 0 || get(&now) != 0 || now != flags) return;  // retried at the next wait
    c->set = bits;
  }
  if (want >= 0 || (plain && !changed())) note_applied(index);
}

void describe(JsonWriter* j) {
  j->key("inrun").begin_object().field("variable", kVariable).field("magic", kMagic).field("version", kVersion)
      .field("size", static_cast<int64_t>(sizeof(Control))).field("max_settings", static_cast<int64_t>(kMaxSettings))
      .field("setting_size", static_cast<int64_t>(sizeof(Setting)));
  j->key("setting_fields").begin_object().field("team", static_cast<int64_t>(offsetof(Setting, team)))
      .field("blocktime_ms", static_cast<int64_t>(offsetof(Setting, blocktime_ms)))
      .field("cuda_flags", static_cast<int64_t>(offsetof(Setting, cuda_flags))).end_object();
  j->key("fields").begin_object();
#define TB_FIELD(name) j->field(#name, static_cast<int64_t>(offsetof(Control, name)))
  TB_FIELD(magic);
  TB_FIELD(version);
  TB_FIELD(owner_pid);
  TB_FIELD(n_settings);
  TB_FIELD(settings);
  TB_FIELD(request);
  TB_FIELD(seq);
  TB_FIELD(sample_ns);
  TB_FIELD(cpu_ns);
  TB_FIELD(regions);
  TB_FIELD(region_end_ns);
  TB_FIELD(waits);
  TB_FIELD(wait_end_ns);
  TB_FIELD(launches);
  TB_FIELD(launch_end_ns);
  TB_FIELD(applied);
  TB_FIELD(applied_ns);
  TB_FIELD(steady_ns);
  TB_FIELD(runtime);
  TB_FIELD(team_seen);
  TB_FIELD(free_regions);
  TB_FIELD(cuda_rc);
  TB_FIELD(ended);
  TB_FIELD(ceiling);
  TB_FIELD(asks);
  TB_FIELD(own_team);
  TB_FIELD(held_back);
  TB_FIELD(n_procs);
  TB_FIELD(refused);
  TB_FIELD(procs);
#undef TB_FIELD
  j->end_object();
  j->field("max_procs", static_cast<int64_t>(kMaxProcs)).field("proc_size", static_cast<int64_t>(sizeof(Proc)));
  j->key("proc_fields").begin_object();
#define TB_PROC(name) j->field(#name, static_cast<int64_t>(offsetof(Proc, name)))
  TB_PROC(pid);
  TB_PROC(seq);
  TB_PROC(sample_ns);
  TB_PROC(cpu_ns);
  TB_PROC(regions);
  TB_PROC(applied);
  TB_PROC(applied_ns);
  TB_PROC(why);
#undef TB_PROC
  j->end_object().end_object();
}

}  // namespace threadburn::probe::inrun
