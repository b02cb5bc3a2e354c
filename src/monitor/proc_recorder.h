// The /proc mode: every thread's schedstat every period (monitor.h's rows
// between two snapshots), each thread's run delay for the waits. Used where
// the scheduler's events are not allowed (not root), or asked for
// (--mode=proc); its limits are those of schedstat (docs/monitor.md).
#pragma once

#include <string>

#include "core/procfs.h"
#include "monitor/recorder.h"

namespace threadburn::monitor {

class ProcRecorder : public Recorder {
 public:
  // why_not_exact: why the exact mode is not used ("" when --mode=proc asked for it).
  ProcRecorder(const Options& o, OutFile* csv, std::string why_not_exact);
  void report() override;

 protected:
  void start() override;
  bool tick(int64_t now, bool launched_exited) override;
  void stop(int64_t now, bool ended) override;

 private:
  Snapshot snapshot();

  TaskReader reader_;
  Snapshot prev_;
  WaitTable waits_;
  std::map<pid_t, int64_t> delay_;  // run delay at the last read
  std::string why_not_exact_;
};

}  // namespace threadburn::monitor
