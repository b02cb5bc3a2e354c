// Run-queue wait, for the monitor's summary: per thread of the recorded tree
// and per class (the main thread, the root's other threads, child processes,
// the whole tree) the time spent runnable but not running, split by who held
// the CPU meanwhile (exact mode), and the waits the tree caused in threads
// outside it, per thread of the tree and per waiting process. In /proc mode
// only each thread's total is known (schedstat's run delay).
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "monitor/sched_model.h"

namespace threadburn::monitor {

struct ThreadWaits {
  pid_t tid = 0, pid = 0;
  std::string name;
  std::array<int64_t, kHolders> by_holder{};  // exact mode
  int64_t total_ns = 0;                       // both modes
  int64_t caused_ns = 0;                      // exact mode: others' waits while it held their CPU
};

// The monitor's classes of thread, seen from outside (no marks): the root
// process's first thread, its other threads, the threads of its descendants.
enum class TreeClass : uint8_t { kMain, kThreads, kChildren };
TreeClass tree_class(pid_t root, pid_t tid, pid_t pid);
const char* tree_class_label(TreeClass c);  // [main thread], [other threads], [child processes]

class WaitTable {
 public:
  explicit WaitTable(pid_t root) : root_(root) {}
  void add(const WaitPiece& w);  // exact mode
  // /proc mode: a thread's run delay grew by wait_ns.
  void add_total(pid_t tid, pid_t pid, const std::string& name, int64_t wait_ns);
  const std::map<pid_t, ThreadWaits>& threads() const { return threads_; }
  // The tree's waits by holder, and the waits it caused.
  ThreadWaits tree_total() const;
  // Caused waits by waiting process: pid -> (name, ns).
  const std::map<pid_t, std::pair<std::string, int64_t>>& caused_by_process() const { return caused_; }
  // The table of the summary: the top threads by wait + caused, the classes,
  // the tree, then (exact) the processes that waited for the tree's threads.
  std::string format(bool exact, size_t top = 15) const;

 private:
  pid_t root_;
  std::map<pid_t, ThreadWaits> threads_;
  std::map<pid_t, std::pair<std::string, int64_t>> caused_;
};

}  // namespace threadburn::monitor
