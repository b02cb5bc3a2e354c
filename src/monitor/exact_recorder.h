// The exact mode (docs/monitor.md, "Exact mode"): the scheduler's events
// (core/sched_trace.h) through the model of the tree (sched_model.h) into
// three files: the recording (exact bins, binner.h), the intervals file
// (intervals_file.h) and, at the end, the gaps after the main thread's sleeps
// (gaps.h). Each period the rings are read; events are handed to the model
// once every CPU's ring has had time to receive them (kReadLagNs), bins are
// closed once a late-named thread can no longer add to them (kBinLagNs).
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/sched_trace.h"
#include "monitor/binner.h"
#include "monitor/recorder.h"
#include "monitor/sched_model.h"

namespace threadburn::monitor {

class ExactRecorder : public Recorder, private Sink {
 public:
  // Reads the tree's processes and threads (the baseline) now.
  ExactRecorder(const Options& o, OutFile* csv, OutFile* intervals, OutFile* gaps,
                std::unique_ptr<SchedTracer> tracer);
  void report() override;
  void discard() override;

 protected:
  void start() override;
  bool tick(int64_t now, bool launched_exited) override;
  void stop(int64_t now, bool ended) override;
  void flush() override;

 private:
  void run(const RunInterval& r) override;
  void wait(const WaitPiece& w) override;
  void sleep(const SleepInterval& s) override;
  void thread(pid_t tid, pid_t pid, const std::string& name, int64_t t_ns, ThreadChange change) override;
  void seed();
  // Events older than before_ns into the model; bins closed up to before_ns - kBinLagNs.
  void feed(int64_t before_ns, bool last);
  // Threads of the baseline no event has named: on a CPU since the start?
  void check_unseen(int64_t now, int64_t horizon);

  std::unique_ptr<SchedTracer> tracer_;
  OutFile *intervals_, *gaps_;
  SchedModel model_;
  Binner binner_;
  WaitTable waits_;
  std::vector<SchedEvent> events_;
  std::map<pid_t, std::pair<pid_t, std::string>> names_;  // the tree's threads: tid -> (pid, name)
  std::set<pid_t> alive_;
  std::map<pid_t, std::pair<pid_t, int64_t>> unseen_;  // baseline tid -> (pid, schedstat CPU at the start)
  int64_t end_ns_ = 0, events_in_ = 0, unseen_checked_ = 0;
};

}  // namespace threadburn::monitor
