// The exact mode's recording: the intervals of the tree's threads summed into
// bins of --period_us, as the same timeline rows the /proc mode writes
// (monitor.h's Row), so the plot, the summary and the tails read both. Unlike
// schedstat's, these sums are exact in every bin: a thread that runs without a
// break shows 1.0000 in each bin, not tick lumps.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "monitor/monitor.h"
#include "monitor/sched_model.h"

namespace threadburn::monitor {

class Binner {
 public:
  // Bin k covers [origin + k * period, origin + (k + 1) * period);
  // unix0_ns: CLOCK_REALTIME at origin_ns.
  Binner(int64_t origin_ns, int64_t period_ns, int64_t unix0_ns);

  // CPU of tid over [start, end]; a part already counted (an open interval
  // flushed earlier) is not counted twice. A rename inside it splits it: each
  // part counts under the name the thread had then (an exec while on a CPU).
  void run(pid_t tid, int64_t start_ns, int64_t end_ns);
  void thread(pid_t tid, const std::string& name, int64_t t_ns, ThreadChange change);

  // The rows of every bin that ends at or before until_ns, in time order; those
  // bins are closed. CPU that arrives for a closed bin goes to the first open
  // one (counted in late_ns()).
  std::vector<Row> take(int64_t until_ns);
  // Every remaining bin up to end_ns (the last one ends there).
  std::vector<Row> finish(int64_t end_ns);
  int64_t late_ns() const { return late_ns_; }

 private:
  struct Bin {
    std::map<std::pair<pid_t, std::string>, int64_t> cpu_ns;  // (tid, name) -> CPU
    std::map<pid_t, ThreadChange> changes;  // the last change in the bin
  };
  int64_t index(int64_t t_ns) const;
  void add(pid_t tid, const std::string& name, int64_t start_ns, int64_t end_ns);
  void close(int64_t k, int64_t end_ns, std::vector<Row>* out);

  int64_t origin_, period_, unix0_;
  int64_t first_open_ = 0;  // bins before it are closed
  std::map<int64_t, Bin> bins_;
  std::map<pid_t, int64_t> counted_until_;
  std::map<pid_t, std::vector<std::pair<int64_t, std::string>>> names_;  // (since, name), in time order
  std::set<pid_t> alive_;  // at the end of the last closed bin
  int64_t late_ns_ = 0;
};

}  // namespace threadburn::monitor
