// Known-answer load for the monitor's live tests: a thread named "spinner"
// burns exactly --spin_ms of CPU, then sleeps --sleep_ms, and the process exits
// with --exit. The spin is measured on the thread's own CPU clock, not the wall
// clock, so a loaded 2-core machine (ctest -j) cannot shrink the answer.
// A second thread, "idler", only sleeps: it must show no CPU. With
// --wait_usr1 the spinner starts on SIGUSR1, so a test can attach a monitor
// first, however slowly it starts on a loaded machine.
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

namespace tb = threadburn;

int main(int argc, char** argv) {
  long spin_ms = 200, sleep_ms = 100, delay_ms = 0, code = 0;
  bool wait_usr1 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--spin_ms=%ld", &spin_ms) == 1) continue;
    if (std::sscanf(argv[i], "--sleep_ms=%ld", &sleep_ms) == 1) continue;
    if (std::sscanf(argv[i], "--delay_ms=%ld", &delay_ms) == 1) continue;
    if (std::sscanf(argv[i], "--exit=%ld", &code) == 1) continue;
    if (std::strcmp(argv[i], "--wait_usr1") == 0) {
      wait_usr1 = true;
      continue;
    }
    std::fprintf(stderr, "spin_child: error: unknown argument '%s' "
                 "(--spin_ms=N --sleep_ms=N --delay_ms=N --exit=N --wait_usr1)\n", argv[i]);
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
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  idler.join();
  return static_cast<int>(code);
}
