#include "probe/children.h"

#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "core/clock.h"
#include "core/procfs.h"

namespace threadburn::probe {

int64_t Children::total_ns() {
  const int64_t now = wall_ns();
  if (now - last_scan_ns_.load(std::memory_order_relaxed) >= kPeriodNs) scan(now);
  return total_ns_.load(std::memory_order_relaxed);
}

int64_t Children::final_ns() {
  scan(wall_ns());
  std::lock_guard<std::mutex> lock(mu_);
  if (!ever_probed_) {  // else RUSAGE_CHILDREN would also hold processes measured by themselves
    rusage ru{};
    if (getrusage(RUSAGE_CHILDREN, &ru) == 0) {
      const int64_t reaped = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                             (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
      int64_t gone = 0, alive = 0;
      for (const auto& [pid, c] : children_) (c.alive ? alive : gone) += c.cpu_ns;
      if (reaped > gone) total_ns_.store(alive + reaped, std::memory_order_relaxed);
    }
  }
  return total_ns_.load(std::memory_order_relaxed);
}

int Children::count() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int>(children_.size());
}

void Children::scan(int64_t now) {
  std::lock_guard<std::mutex> lock(mu_);
  last_scan_ns_.store(now, std::memory_order_relaxed);
  for (auto& [pid, c] : children_) c.alive = false;
  std::vector<pid_t> todo = child_processes(getpid());
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (probed(pid)) {
      children_.erase(pid);  // it measures itself (and its descendants) from now on
      continue;
    }
    clockid_t id;
    int64_t ns = 0;
    if (clock_getcpuclockid(pid, &id) != 0 || !read_clock_ns(id, &ns)) continue;  // gone meanwhile
    Child& c = children_[pid];
    c.cpu_ns = std::max(c.cpu_ns, ns);
    c.alive = true;
    for (pid_t grandchild : child_processes(pid)) todo.push_back(grandchild);
  }
  int64_t total = 0;
  for (const auto& [pid, c] : children_) total += c.cpu_ns;
  total_ns_.store(total, std::memory_order_relaxed);
}

bool Children::probed(pid_t pid) {
  if (probed_.count(pid)) return true;
  if (access((dir_ + "/probe-" + std::to_string(pid) + ".started").c_str(), F_OK) != 0) return false;
  probed_.insert(pid);
  ever_probed_ = true;
  return true;
}

}  // namespace threadburn::probe
