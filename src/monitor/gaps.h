// The burn after each step, from the exact mode's intervals file: the main
// thread's sleeps of at least the gap threshold (a training loop's sleep
// between steps, a wait for data or for a GPU) are the gaps; in each, for
// every other thread of the tree, burn = its CPU in the gap, wait = its
// run-queue wait in it, tail = from the gap's start to the end of its last
// interval on a CPU in it. Exact to the ns: the intervals are the
// scheduler's own. Two passes over the file keep memory flat: the gaps
// first, then every row against them.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "monitor/intervals_file.h"

namespace threadburn::monitor {

struct GapThread {
  std::string name;
  int64_t burn_ns = 0, wait_ns = 0, tail_ns = 0;
};

struct Gap {
  int64_t start_ns = 0, end_ns = 0;  // since the origin
  bool open = false;                 // the recording ended in it
  std::map<pid_t, GapThread> threads;
  GapThread others() const;  // every thread but main: burns and waits summed, the longest tail
};

// Pass 1: the main thread's sleeps. end_ns: the recording's end (a sleep
// ending there is open).
class GapFinder {
 public:
  GapFinder(pid_t main_tid, int64_t gap_min_ns, int64_t end_ns)
      : main_(main_tid), min_(gap_min_ns), end_(end_ns) {}
  void add(const IntervalRow& r);
  std::vector<Gap> take() { return std::move(gaps_); }

 private:
  pid_t main_;
  int64_t min_, end_;
  std::vector<Gap> gaps_;
};

// Pass 2: every run and wait row against the gaps.
class GapBurns {
 public:
  GapBurns(std::vector<Gap> gaps, pid_t main_tid);
  void add(const IntervalRow& r);
  const std::vector<Gap>& gaps() const { return gaps_; }

 private:
  std::vector<Gap> gaps_;
  pid_t main_;
};

// <stem>.gaps.csv: a first line with the rule, then one row per gap and thread
// that burned or waited in it, and one [others] row (tid 0) per gap.
std::string gaps_csv(const std::vector<Gap>& gaps, pid_t main_tid, int64_t gap_min_ns);
// The summary: per thread the mean and median burn, the mean and longest tail
// and the mean wait over the closed gaps (a thread absent from a gap counts 0).
std::string format_gaps(const std::vector<Gap>& gaps, pid_t main_tid, const std::string& main_name,
                        int64_t gap_min_ns, size_t top = 15);

}  // namespace threadburn::monitor
