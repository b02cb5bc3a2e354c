// The probe's measure of its forked child processes (DataLoader workers,
// multiprocessing pools): the class "worker processes", cpu_children_ms
// (src/probe/probe.cc reads it every sample and at the end).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

namespace threadburn::probe {

// The forked child processes of this one (and theirs), measured from here
// through /proc: every descendant that does not hold probe-<pid>.started in
// dir (a child that exec'd a program under the probe measures itself, and
// its own descendants). A child's CPU is its process CPU clock
// (clock_getcpuclockid: every thread, the exited ones included), kept at its
// last reading once it is gone; at the end, what the kernel added to this
// process's RUSAGE_CHILDREN for the reaped ones replaces those last readings
// when it is larger (it is exact; the last reading can be up to one period old).
class Children {
 public:
  // Child processes are looked for and read at most this often.
  static constexpr int64_t kPeriodNs = 50 * 1000000LL;

  explicit Children(std::string dir) : dir_(std::move(dir)) {}
  // The children's CPU so far; refreshed when the last scan is a period old.
  int64_t total_ns();
  // A last scan, and the reaped children's exact CPU from the kernel.
  int64_t final_ns();
  // The child processes seen so far.
  int count();

 private:
  struct Child {
    int64_t cpu_ns = 0;
    bool alive = true;
  };

  void scan(int64_t now);
  bool probed(pid_t pid);  // mu_ held

  std::string dir_;
  std::mutex mu_;
  std::map<pid_t, Child> children_;
  std::set<pid_t> probed_;
  bool ever_probed_ = false;
  std::atomic<int64_t> last_scan_ns_{0}, total_ns_{0};
};

}  // namespace threadburn::probe
