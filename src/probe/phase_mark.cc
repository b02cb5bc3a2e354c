// libthreadburn_phase.so: a run's startup and steady phase without the
// probe, for tune's fresh runs of a GPU training (docs/design.md, "The steady
// phase"): the same boundary the probe reports (the program's first training
// step, the first of a run of repeated waits through the CUDA driver, else
// its first wait or launch: src/cuda/driver_calls.h's StepRun, found through
// the same dlsym: src/probe/dlsym_tap.cc), and nothing else: no sampler, no
// OpenMP interposer, no thread classes. What it adds to a program: its
// lookups through dlsym compare a name or two, and each wait or launch reads
// the clocks as in the probe (bench/overheads.py).
//
// Loaded with THREADBURN_PHASE_DIR set, it writes phase-<pid>.json there when
// the process exits (not in a forked child that does not exec; an exec'd one
// loads it anew and writes its own):
//   {"pid", "startup_ends": "device" | "none", "steady_from": "steps" |
//    "first_device_work" | "none", "startup_ms", "startup_cpu_ms",
//    "steady_ms", "steady_cpu_ms", "sync_wait_ms", "sync_cpu_ms", "syncs",
//    "launches", "launch_ms", "launch_cpu_ms"} (the waits and launches of
//    the steady phase)
// Times from the library's load (CLOCK_MONOTONIC), CPU the process's
// (CLOCK_PROCESS_CPUTIME_ID) and its reaped children's; without device work
// the phases are null. Without the variable it only forwards dlsym.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda/driver_calls.h"
#include "probe/dlsym_tap.h"

namespace threadburn::probe {
namespace {

// The CPU and the waits and launches at a boundary.
struct At {
  std::atomic<int64_t> index{-1};  // the burst of waits it was taken at (-1: the first device work, or being written)
  int64_t cpu_ns = 0;
  cuda::CallTally waits, launches;
};
constexpr int kAts = 2 * cuda::kStepRun;  // as the probe's: the run's first burst is still held when it is confirmed

struct Mark {
  std::string dir;
  pid_t pid = 0;
  int64_t start_ns = 0;
  std::atomic<int64_t> cpu_at_first_ns{0};  // the process's and its children's CPU at the first device work
  At steps[kAts];
};
Mark* g_mark = nullptr;

int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// This process's CPU and its reaped children's (DataLoader workers it joined).
int64_t cpu_ns() {
  rusage ru{};
  getrusage(RUSAGE_CHILDREN, &ru);
  const int64_t children = (static_cast<int64_t>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000 +
                            ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000;
  return clock_ns(CLOCK_PROCESS_CPUTIME_ID) + children;
}

void on_first_device_work(int64_t) {
  if (g_mark) g_mark->cpu_at_first_ns.store(cpu_ns(), std::memory_order_release);
}

// A burst of waits that may start the run of steps (cuda::StepRun): the CPU
// and the calls so far.
void on_step(int64_t index, int64_t, bool confirmed) {
  if (!g_mark || confirmed) return;
  At& a = g_mark->steps[index % kAts];
  a.index.store(-1, std::memory_order_release);
  a.cpu_ns = cpu_ns();
  const std::vector<cuda::ThreadCalls> calls = cuda::thread_calls();
  a.waits = cuda::total(calls, cuda::CallKind::kWait);
  a.launches = cuda::total(calls, cuda::CallKind::kLaunch);
  a.index.store(index, std::memory_order_release);
}

cuda::CallTally minus(cuda::CallTally a, const cuda::CallTally& b) {
  a.calls -= b.calls;
  a.wall_ns -= b.wall_ns;
  a.cpu_ns -= b.cpu_ns;
  return a;
}

std::string ms(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

void write() {
  Mark* m = g_mark;
  if (!m || m->pid != getpid()) return;
  const int64_t end_ns = clock_ns(CLOCK_MONOTONIC), cpu_end = cpu_ns();
  int64_t first = cuda::first_work_ns(), cpu_first = m->cpu_at_first_ns.load(std::memory_order_acquire);
  const std::vector<cuda::ThreadCalls> calls = cuda::thread_calls();
  cuda::CallTally waits = cuda::total(calls, cuda::CallKind::kWait);
  cuda::CallTally launches = cuda::total(calls, cuda::CallKind::kLaunch);
  const char* from = "first_device_work";
  const cuda::StepStart run = cuda::steady_start();
  const At& at = m->steps[run.index < 0 ? 0 : run.index % kAts];
  if (run.index >= 0 && at.index.load(std::memory_order_acquire) == run.index) {  // the first run of repeated waits
    first = run.t_ns;
    cpu_first = at.cpu_ns;
    waits = minus(waits, at.waits);
    launches = minus(launches, at.launches);
    from = "steps";
  }
  const bool phased = first > 0 && cpu_first > 0;
  const auto phase = [phased](int64_t ns) { return phased ? ms(ns) : std::string("null"); };
  std::string json = "{\"pid\": " + std::to_string(m->pid) + ", \"startup_ends\": \"" +
                     (phased ? "device" : "none") + "\", \"steady_from\": \"" + (phased ? from : "none") +
                     "\", \"startup_ms\": " + phase(first - m->start_ns) +
                     ", \"startup_cpu_ms\": " + phase(cpu_first) + ", \"steady_ms\": " + phase(end_ns - first) +
                     ", \"steady_cpu_ms\": " + phase(cpu_end - cpu_first) + ", \"sync_wait_ms\": " +
                     ms(waits.wall_ns) + ", \"sync_cpu_ms\": " + ms(waits.cpu_ns) +
                     ", \"syncs\": " + std::to_string(waits.calls) + ", \"launches\": " +
                     std::to_string(launches.calls) + ", \"launch_ms\": " + ms(launches.wall_ns) +
                     ", \"launch_cpu_ms\": " + ms(launches.cpu_ns) + "}\n";
  const std::string path = m->dir + "/phase-" + std::to_string(m->pid) + ".json";
  if (FILE* f = std::fopen(path.c_str(), "w")) {
    std::fputs(json.c_str(), f);
    std::fclose(f);
  }
}

__attribute__((constructor)) void start() {
  const char* dir = std::getenv("THREADBURN_PHASE_DIR");
  if (!dir || !*dir) return;
  g_mark = new Mark;
  g_mark->dir = dir;
  g_mark->pid = getpid();
  g_mark->start_ns = clock_ns(CLOCK_MONOTONIC);
  cuda::set_first_work_hook(on_first_device_work);
  cuda::set_step_hook(on_step);
  dlsym_tap::set_wrapping(true);
  std::atexit(write);
}

}  // namespace
}  // namespace threadburn::probe
