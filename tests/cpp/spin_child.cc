// Known-answer load for the monitor's live tests: a thread named "spinner"
// burns exactly --spin_ms of CPU, then sleeps --sleep_ms, and the process exits
// with --exit. The spin is measured on the thread's own CPU clock, not the wall
// clock, so a loaded 2-core machine (ctest -j) cannot shrink the answer.
// A second thread, "idler", only sleeps: it must show no CPU. With
// --wait_usr1 the spinner starts on SIGUSR1, so a test can attach a monitor
// first, however slowly it starts on a loaded machine. --bursts=N: after
// that, N threads named "burst", one after the other, each spinning
// --burst_ms of its own CPU clock; each prints its tid, the CLOCK_MONOTONIC
// instants and its own CPU clock at its first and last instruction (a thread
// born and gone between two reads of /proc).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/clock.h"
#include "core/thread_class.h"

namespace tb = threadburn;

int main(int argc, char** argv) {
  long spin_ms = 200, sleep_ms = 100, delay_ms = 0, code = 0, bursts = 0, burst_ms = 3;
  bool wait_usr1 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--spin_ms=%ld", &spin_ms) == 1) continue;
    if (std::sscanf(argv[i], "--sleep_ms=%ld", &sleep_ms) == 1) continue;
    if (std::sscanf(argv[i], "--delay_ms=%ld", &delay_ms) == 1) continue;
    if (std::sscanf(argv[i], "--exit=%ld", &code) == 1) continue;
    if (std::sscanf(argv[i], "--bursts=%ld", &bursts) == 1) continue;
    if (std::sscanf(argv[i], "--burst_ms=%ld", &burst_ms) == 1) continue;
    if (std::strcmp(argv[i], "--wait_usr1") == 0) {
      wait_usr1 = true;
      continue;
    }
    std::fprintf(stderr, "spin_child: error: unknown argument '%s' "
                 "(--spin_ms=N --sleep_ms=N --delay_ms=N --exit=N --bursts=N --burst_ms=N --wait_usr1)\n", argv[i]);
    return 2;
  }
  // Blocked in every thread (inherited), taken by the spinner's sigwait.
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread idler([&] {
    pthread_setname_np(pthread_self(), "idler");
    std::unique_lock<std::mutex> lock(mu);  // blocked in the kernel: no CPU at all
    cv.wait(lock, [&] { return done; });
  });
  std::thread spinner([&] {
    pthread_setname_np(pthread_self(), "spinner");
    // Sleep before spinning so an attaching monitor can read a baseline first.
    tb::sleep_for_ns(delay_ms * 1000000LL);
    int sig = 0;
    if (wait_usr1) sigwait(&usr1, &sig);
    const int64_t end = tb::thread_cpu_ns() + spin_ms * 1000000LL;
    while (tb::thread_cpu_ns() < end) {
    }
    // Stay alive while the process sleeps: CPU a thread ran after the last
    // sample that saw it is lost to a monitor, and a starved one may be late.
    tb::sleep_for_ns(sleep_ms * 1000000LL);
  });
  spinner.join();
  for (long b = 0; b < bursts; ++b) {
    int64_t t0 = 0, t1 = 0, c0 = 0, c1 = 0;
    pid_t tid = 0;
    std::thread burst([&] {
      t0 = tb::wall_ns();
      c0 = tb::thread_cpu_ns();
      tid = tb::current_tid();
      pthread_setname_np(pthread_self(), "burst");
      const int64_t end = c0 + burst_ms * 1000000LL;
      while ((c1 = tb::thread_cpu_ns()) < end) {
      }
      t1 = tb::wall_ns();
    });
    burst.join();
    std::printf("burst tid %d t0 %lld t1 %lld c0 %lld c1 %lld\n", static_cast<int>(tid), static_cast<long long>(t0),
                static_cast<long long>(t1), static_cast<long long>(c0), static_cast<long long>(c1));
  }
  std::fflush(stdout);
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  idler.join();
  return static_cast<int>(code);
}
