// Known-answer load for the exact monitor's run-queue waits: one thread,
// pinned to --cpu, that spins --spin_ms of its own CPU clock at the start of
// every --period_ms, --periods times (or, --forever, never stops spinning).
// Two of them on one CPU: the one that spins forever waits, each period,
// while the other holds the CPU: the other's CPU time, which it prints at its
// end ("cpu_ns N", its own clock since the start signal: exact however
// loaded the machine; "wall_ns W", the wall time that took).
// --wait_usr1: start on SIGUSR1 (a monitor attaches first).
#include <sched.h>
#include <signal.h>

#include <cstdio>
#include <cstring>

#include "core/clock.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  long cpu = -1, periods = 10, period_ms = 50, spin_ms = 20;
  bool forever = false, wait_usr1 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--cpu=%ld", &cpu) == 1) continue;
    if (std::sscanf(argv[i], "--periods=%ld", &periods) == 1) continue;
    if (std::sscanf(argv[i], "--period_ms=%ld", &period_ms) == 1) continue;
    if (std::sscanf(argv[i], "--spin_ms=%ld", &spin_ms) == 1) continue;
    if (std::strcmp(argv[i], "--forever") == 0) {
      forever = true;
      continue;
    }
    if (std::strcmp(argv[i], "--wait_usr1") == 0) {
      wait_usr1 = true;
      continue;
    }
    std::fprintf(stderr, "period_child: error: unknown argument '%s' (--cpu --periods --period_ms --spin_ms "
                 "--forever --wait_usr1)\n", argv[i]);
    return 2;
  }
  if (cpu >= 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(static_cast<int>(cpu), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
      std::perror("period_child: sched_setaffinity");
      return 2;
    }
  }
  if (wait_usr1) {
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, nullptr);
    int sig = 0;
    sigwait(&usr1, &sig);
  }
  if (forever) {
    for (;;) {
    }
  }
  const int64_t cpu0 = tb::thread_cpu_ns();
  const int64_t start = tb::wall_ns();
  for (long p = 0; p < periods; ++p) {
    tb::spin_cpu_ns(spin_ms * 1000000);
    tb::sleep_until_ns(start + (p + 1) * period_ms * 1000000);
  }
  std::printf("cpu_ns %lld wall_ns %lld\n", static_cast<long long>(tb::thread_cpu_ns() - cpu0),
              static_cast<long long>(tb::wall_ns() - start));
  return 0;
}
