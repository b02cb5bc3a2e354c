#include "core/thread_clocks.h"

#include <dirent.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>

#include "core/clock.h"

namespace threadburn {

clockid_t thread_cpu_clock_id(pid_t tid) {
  // CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2), tid inverted in the high bits.
  return static_cast<clockid_t>((~static_cast<unsigned>(tid)) << 3) | 6;
}

void ThreadClocks::refresh() {
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return;
  std::vector<pid_t> live;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') live.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  ::closedir(dir);
  for (pid_t tid : live) {
    auto it = std::find_if(threads_.begin(), threads_.end(),
                           [&](const Entry& x) { return x.alive && x.tid == tid; });
    if (it == threads_.end()) threads_.push_back({tid, thread_cpu_clock_id(tid), 0, true});
  }
  read_all();
}

void ThreadClocks::read_all() {
  const int64_t process = process_cpu_ns();
  int64_t live = 0, dead_last = 0;
  Entry* died = nullptr;
  for (Entry& e : threads_) {
    if (!e.alive) continue;
    timespec ts{};
    if (clock_gettime(e.clock, &ts) == 0) {
      e.last_ns = static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
      live += e.last_ns;
    } else {
      e.alive = false;
      dead_last += e.last_ns;
      if (!died) died = &e;
    }
  }
  const int64_t residue = process - live;
  if (died && have_residue_) {
    const int64_t unread = residue - residue_ - dead_last;
    if (unread > 0) died->last_ns += unread;
  }
  residue_ = residue;
  have_residue_ = true;
}

int64_t ThreadClocks::sum_ns(const std::vector<pid_t>& exclude) {
  read_all();
  int64_t sum = 0;
  for (const Entry& e : threads_) {
    if (std::find(exclude.begin(), exclude.end(), e.tid) == exclude.end()) sum += e.last_ns;
  }
  return sum;
}

}  // namespace threadburn
