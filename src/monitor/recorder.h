// The recording loop both modes share: one tick per period until the process
// ends, --duration_s passes or a stop request comes (a launched CMD gets the
// signal forwarded and decides itself), rows flushed whole every 100 ms.
// What a tick reads is the mode's: /proc schedstat (proc_recorder.h) or the
// scheduler's events (exact_recorder.h).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "monitor/monitor.h"
#include "monitor/options.h"
#include "monitor/out_file.h"
#include "monitor/waits.h"

namespace threadburn::monitor {

class Recorder {
 public:
  Recorder(const Options& o, OutFile* csv, int64_t origin_ns);
  virtual ~Recorder() = default;
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  // Records until the end; throws Error on a failed write.
  void run();
  // The summary on stderr, after run().
  virtual void report() = 0;
  // Removes the mode's other files (the recording is the caller's).
  virtual void discard() {}

  bool exited() const { return exited_; }
  int handled_signals() const { return handled_; }
  const std::string& end_note() const { return end_note_; }
  double span_ms() const { return summary_.span_ms(); }

 protected:
  // The file headers; the baseline.
  virtual void start() = 0;
  // One period ended at now: read it, write its rows. Returns true when the
  // watched process has ended (launched_exited: a launched CMD has).
  virtual bool tick(int64_t now, bool launched_exited) = 0;
  // The recording ends at now (ended: the process did): the last rows.
  virtual void stop(int64_t now, bool ended) = 0;
  virtual void flush() { csv_->flush(); }

  // A row of the recording: to the file and the summary.
  void add_row(const Row& r);
  // The header and the sampling line of the summary; the per-thread table,
  // the waits, the tails after --marks (with each thread's run-queue wait
  // in the window from `intervals`, the exact mode's file, when given), the
  // monitor's own CPU.
  void print_summary(const std::string& mode_line, const WaitTable& waits, bool exact,
                     const std::string& intervals = "") const;

  const Options& o_;
  OutFile* csv_;
  SummaryBuilder summary_;
  int64_t t0_ = 0, unix0_ = 0, late_ = 0;
  std::string leader_ = "?";

 private:
  bool handle_signals();
  int64_t next_deadline(int64_t deadline, int64_t now);

  int handled_ = 0;
  bool exited_ = false;
  std::string end_note_;
};

// The first line's key=value for the mode: "source=sched_events" or
// "source=proc_schedstat[; exact_unavailable=<why>]" (';' in why becomes ',').
std::string source_meta(bool exact, const std::string& why_not_exact);

}  // namespace threadburn::monitor
