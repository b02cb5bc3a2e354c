#include "probe/inrun.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "core/clock.h"
#include "core/thread_class.h"
#include "cuda/driver_calls.h"
#include "runtime/runtime.h"

extern "C" void* threadburn_omptap_next();

namespace threadburn::probe::inrun {
namespace {

Control* g_ctl = nullptr;
bool g_owner = false;  // this process took the control block
pid_t g_pid = 0;       // ... and is this one (a forked child is not)

int64_t load(const int64_t& field) { return __atomic_load_n(&field, __ATOMIC_ACQUIRE); }
void store(int64_t& field, int64_t value) { __atomic_store_n(&field, value, __ATOMIC_RELEASE); }

bool active() { return g_owner && g_pid == getpid(); }

// The setting asked now (its index in *index), or null for the program's own.
const Setting* asked(int64_t* index) {
  const int64_t i = load(g_ctl->request);
  *index = i;
  const int64_t n = load(g_ctl->n_settings);
  return i >= 0 && i < n && i < kMaxSettings ? &g_ctl->settings[i] : nullptr;
}

// The first region or wait under a newly asked setting: when it took effect.
void note_applied(int64_t index) {
  int64_t was = load(g_ctl->applied);
  if (was == index) return;
  if (__atomic_compare_exchange_n(&g_ctl->applied, &was, index, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    store(g_ctl->applied_ns, wall_ns());
  }
}

// A knob of the forking or waiting thread: what threadburn last set on this
// thread (kUnset: nothing, the program's own in force), and that own value.
constexpr int64_t kUnset = INT64_MIN;
struct ThreadKnob {
  int64_t set = kUnset;
  int64_t own = 0;
};
thread_local ThreadKnob t_blocktime, t_cuda;

// Brings a thread's knob to `want` (-1: its own): get reads its own before the
// first change, put sets one (returns the driver's or runtime's result, 0: ok).
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
using CtxFlags = int (*)(unsigned*);
using CtxSetFlags = int (*)(unsigned);

// A definition in the process's scope (RTLD_DEFAULT, a null handle) or in a library's.
template <typename Fn>
Fn symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn>(dlsym(handle, name));
}

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
  return true;
}

void take(int64_t t_ns) {
  if (!g_ctl) return;
  int64_t none = 0;
  const int64_t pid = getpid();
  if (!__atomic_compare_exchange_n(&g_ctl->owner_pid, &none, pid, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) return;
  g_pid = static_cast<pid_t>(pid);
  Dl_info info{};
  void* next = threadburn_omptap_next();
  const std::string runtime = next && dladdr(next, &info) && info.dli_fname ? runtime_from_library(info.dli_fname) : "";
  store(g_ctl->runtime, runtime == runtime_specs()[0].library ? 1 : runtime == runtime_specs()[1].library ? 2 : 0);
  store(g_ctl->applied, -1);
  store(g_ctl->cuda_rc, -1);
  store(g_ctl->steady_ns, t_ns);
  g_owner = true;
}

void publish(const BurnSample& s, int64_t regions, int64_t region_end_ns) {
  if (!active()) return;
  int64_t cpu = s.extra_ns;
  for (int c = 0; c < kThreadClasses; ++c) {
    if (c != index_of(ThreadClass::kSampler)) cpu += s.cpu_ns[c];
  }
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
  store(g_ctl->free_regions, load(g_ctl->free_regions) + 1);  // the sampler's thread does not write it
  if (load(g_ctl->applied) < 0 && team > load(g_ctl->team_seen)) store(g_ctl->team_seen, team);
}

void end() {
  if (active()) store(g_ctl->ended, 1);
}

unsigned team_hook(unsigned requested) {
  if (!active()) return requested;
  int64_t index = -1;
  const Setting* s = asked(&index);
  note_applied(index);
  if (load(g_ctl->runtime) == 2) {  // LLVM: its blocktime, on the forking thread
    static const GetBlocktime get = symbol<GetBlocktime>(RTLD_DEFAULT, "kmp_get_blocktime");
    static const SetBlocktime set = symbol<SetBlocktime>(RTLD_DEFAULT, "kmp_set_blocktime");
    if (get && set) {
      steer(&t_blocktime, s ? s->blocktime_ms : -1, [] { return static_cast<int64_t>(get()); },
            [](int64_t ms) { set(static_cast<int>(ms)); return int64_t{0}; });
    }
  }
  if (requested != 0) return requested;  // the program's own team
  return s && s->team > 0 ? static_cast<unsigned>(s->team) : 0;
}

void before_wait() {
  if (!active()) return;
  int64_t index = -1;
  const Setting* s = asked(&index);
  note_applied(index);
  const int64_t want = s ? s->cuda_flags : -1;
  if (want < 0 && t_cuda.set == kUnset) return;
  static void* const driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  static const CtxFlags get = driver ? symbol<CtxFlags>(driver, "cuCtxGetFlags") : nullptr;
  static const CtxSetFlags set = driver ? symbol<CtxSetFlags>(driver, "cuCtxSetFlags") : nullptr;
  if (!get || !set) {
    store(g_ctl->cuda_rc, 500);  // CUDA_ERROR_NOT_FOUND: a driver without cuCtxSetFlags (before 12.1)
    return;
  }
  const int64_t rc = steer(&t_cuda, want, [] { unsigned f = 0; return get(&f) == 0 ? static_cast<int64_t>(f) : 0; },
                           [](int64_t flags) {
                             unsigned now = 0;
                             get(&now);
                             return static_cast<int64_t>(set((now & ~0x7u) | (static_cast<unsigned>(flags) & 0x7u)));
                           });
  if (rc >= 0) store(g_ctl->cuda_rc, rc);
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
#undef TB_FIELD
  j->end_object().end_object();
}

}  // namespace threadburn::probe::inrun
