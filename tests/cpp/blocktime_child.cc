// Known-answer load for the exact monitor: a team that behaves like an OpenMP
// runtime with a blocktime, and says itself when each spin began and ended.
// --steps times: --regions "regions" (the main thread releases the
// --threads - 1 workers, each does --work_us of CPU, the main thread waits
// for them), then the main thread sleeps --gap_ms. After each region a
// worker spins for --blocktime_ms of wall time (CLOCK_MONOTONIC), then blocks
// until the next region. At the end it prints, per step, the instant the
// main thread began its sleep and each worker's last spin (its start when its
// region's work was done, its end when it stopped spinning), in ns of
// CLOCK_MONOTONIC: the answer the monitor must find in its intervals.
// --wait_usr1: start on SIGUSR1 (a monitor attaches first).
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/thread_class.h"

namespace tb = threadburn;

namespace {

struct Spin {
  pid_t tid = 0;
  int64_t start_ns = 0, end_ns = 0;
  bool full = false;  // ran its whole blocktime (not cut short by the next region)
};

std::mutex mu;
std::condition_variable cv;
std::atomic<long> generation{0};
std::atomic<int> done{0};
std::atomic<bool> quit{false};

void worker(int64_t blocktime_ns, int64_t work_ns, long steps, long regions, std::vector<Spin>* spins) {
  pthread_setname_np(pthread_self(), "tb-worker");
  long seen = 0;
  spins->resize(static_cast<size_t>(steps));
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return generation.load() != seen || quit.load(); });
    }
    if (quit.load()) return;
    // A region and, while the next one comes within the blocktime, the next.
    for (;;) {
      seen = generation.load();
      tb::spin_cpu_ns(work_ns);
      const int64_t start = tb::wall_ns();
      done.fetch_add(1);
      const int64_t deadline = start + blocktime_ns;
      int64_t now = start;
      while ((now = tb::wall_ns()) < deadline && generation.load() == seen) {
      }
      // A whole spin: its deadline reached (the next region may have come
      // since, when this thread waited long for a CPU: it spun all the same).
      const long step = (seen - 1) / regions;
      if (now >= deadline && (seen - 1) % regions == regions - 1 && step < steps) {
        (*spins)[static_cast<size_t>(step)] = {tb::current_tid(), start, now, true};
      }
      if (generation.load() != seen) continue;  // the next region came: take it
      break;
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  long threads = 2, steps = 5, regions = 3, gap_ms = 200, blocktime_ms = 37, work_us = 300;
  bool wait_usr1 = false;
  for (int i = 1; i < argc; ++i) {
    if (std::sscanf(argv[i], "--threads=%ld", &threads) == 1) continue;
    if (std::sscanf(argv[i], "--steps=%ld", &steps) == 1) continue;
    if (std::sscanf(argv[i], "--regions=%ld", &regions) == 1) continue;
    if (std::sscanf(argv[i], "--gap_ms=%ld", &gap_ms) == 1) continue;
    if (std::sscanf(argv[i], "--blocktime_ms=%ld", &blocktime_ms) == 1) continue;
    if (std::sscanf(argv[i], "--work_us=%ld", &work_us) == 1) continue;
    if (std::strcmp(argv[i], "--wait_usr1") == 0) {
      wait_usr1 = true;
      continue;
    }
    std::fprintf(stderr, "blocktime_child: error: unknown argument '%s' (--threads --steps --regions --gap_ms "
                 "--blocktime_ms --work_us --wait_usr1)\n", argv[i]);
    return 2;
  }
  if (threads < 2 || steps < 1 || regions < 1 || gap_ms <= blocktime_ms) {
    std::fprintf(stderr, "blocktime_child: error: needs --threads >= 2, --steps, --regions >= 1, --gap_ms > --blocktime_ms\n");
    return 2;
  }
  sigset_t usr1;
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &usr1, nullptr);
  std::vector<std::vector<Spin>> spins(static_cast<size_t>(threads - 1));
  std::vector<std::thread> team;
  for (long t = 0; t + 1 < threads; ++t) {
    team.emplace_back(worker, blocktime_ms * 1000000, work_us * 1000, steps, regions, &spins[static_cast<size_t>(t)]);
  }
  if (wait_usr1) {
    int sig = 0;
    sigwait(&usr1, &sig);
  }
  std::vector<int64_t> sleeps;
  for (long s = 0; s < steps; ++s) {
    for (long r = 0; r < regions; ++r) {
      done.store(0);
      {
        std::lock_guard<std::mutex> lock(mu);
        generation.fetch_add(1);
      }
      cv.notify_all();
      tb::spin_cpu_ns(work_us * 1000);
      while (done.load() < threads - 1) {
      }
    }
    sleeps.push_back(tb::wall_ns());
    tb::sleep_for_ns(gap_ms * 1000000);
  }
  quit.store(true);
  {
    std::lock_guard<std::mutex> lock(mu);
  }
  cv.notify_all();
  for (auto& t : team) t.join();
  for (long s = 0; s < steps; ++s) {
    std::printf("step %ld main_sleep_ns %lld\n", s, static_cast<long long>(sleeps[static_cast<size_t>(s)]));
    for (const auto& w : spins) {
      const Spin& sp = w[static_cast<size_t>(s)];
      if (sp.full) {
        std::printf("spin %ld tid %d start_ns %lld end_ns %lld\n", s, static_cast<int>(sp.tid),
                    static_cast<long long>(sp.start_ns), static_cast<long long>(sp.end_ns));
      }
    }
  }
  return 0;
}
