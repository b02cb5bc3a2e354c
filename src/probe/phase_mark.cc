// libthreadburn_phase.so: a run's startup and steady phase without the
// probe, for tune's fresh runs of a GPU training (docs/design.md, "The steady
// phase"): the same boundary the probe reports (the program's first wait or
// launch through the CUDA driver, src/cuda/driver_calls.h, found through the
// same dlsym: src/probe/dlsym_tap.cc), and nothing else: no sampler, no
// OpenMP interposer, no thread classes. What it adds to a program: its
// lookups through dlsym compare a name or two, and each wait or launch reads
// the clocks as in the probe (bench/overheads.py).
//
// Loaded with THREADBURN_PHASE_DIR set, it writes phase-<pid>.json there when
// the process exits (not in a forked child that does not exec; an exec'd one
// loads it anew and writes its own):
//   {"pid", "startup_ends": "device" | "none", "startup_ms", "startup_cpu_ms",
//    "steady_ms", "steady_cpu_ms", "sync_wait_ms", "sync_cpu_ms", "syncs",
//    "launches", "launch_ms", "launch_cpu_ms"}
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

#include "cuda/driver_calls.h"
#include "probe/dlsym_tap.h"

namespace threadburn::probe {
namespace {

struct Mark {
  std::string dir;
  pid_t pid = 0;
  int64_t start_ns = 0;
  std::atomic<int64_t> cpu_at_first_ns{0};  // the process's and its children's CPU at the first device work
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

std::string ms(int64_t ns) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f", static_cast<double>(ns) / 1e6);
  return text;
}

void write() {
  Mark* m = g_mark;
  if (!m || m->pid != getpid()) return;
  const int64_t end_ns = clock_ns(CLOCK_MONOTONIC), cpu_end = cpu_ns();
  const int64_t first = cuda::first_work_ns(), cpu_first = m->cpu_at_first_ns.load(std::memory_order_acquire);
  const bool phased = first > 0 && cpu_first > 0;
  const std::vector<cuda::ThreadCalls> calls = cuda::thread_calls();
  const cuda::CallTally waits = cuda::total(calls, cuda::CallKind::kWait);
  const cuda::CallTally launches = cuda::total(calls, cuda::CallKind::kLaunch);
  const auto phase = [phased](int64_t ns) { return phased ? ms(ns) : std::string("null"); };
  std::string json = "{\"pid\": " + std::to_string(m->pid) + ", \"startup_ends\": \"" +
                     (phased ? "device" : "none") + "\", \"startup_ms\": " + phase(first - m->start_ns) +
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
  dlsym_tap::set_wrapping(true);
  std::atexit(write);
}

}  // namespace
}  // namespace threadburn::probe
