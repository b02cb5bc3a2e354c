#include "monitor/proc_recorder.h"

#include <cstdio>

#include "core/clock.h"
#include "monitor/launch.h"

namespace threadburn::monitor {

ProcRecorder::ProcRecorder(const Options& o, OutFile* csv, std::string why_not_exact)
    : Recorder(o, csv, wall_ns()), reader_(o.pid), waits_(o.pid), why_not_exact_(std::move(why_not_exact)) {
  prev_ = snapshot();  // the baseline, before a launched CMD runs
}

Snapshot ProcRecorder::snapshot() {
  Snapshot s;
  const int64_t a = wall_ns();
  s.threads = reader_.read();
  s.t_ns = (a + wall_ns()) / 2 - t0_;
  for (const auto& t : s.threads) {
    if (t.tid == o_.pid) leader_ = t.name;
    auto [it, fresh] = delay_.try_emplace(t.tid, t.run_delay_ns);
    // A reused tid (its delay went back) counts from 0, like its CPU.
    const int64_t grew = fresh ? 0 : t.run_delay_ns >= it->second ? t.run_delay_ns - it->second : t.run_delay_ns;
    it->second = t.run_delay_ns;
    if (grew > 0) waits_.add_total(t.tid, o_.pid, t.name, grew);
  }
  return s;
}

void ProcRecorder::start() {
  char mono[32];
  std::snprintf(mono, sizeof mono, "%.3f", static_cast<double>(t0_ / 1000) / 1000.0);
  csv_->add(recording_header(unix0_, o_.pid, o_.period_ns / 1000, o_.threshold,
                             {{"t0_mono_ms", mono}, {"source", source_meta(false, why_not_exact_)}}),
            false);
}

bool ProcRecorder::tick(int64_t, bool launched_exited) {
  Snapshot cur = snapshot();
  const auto rows = interval_rows(prev_, cur, unix0_);
  for (const auto& r : rows) add_row(r);
  prev_ = std::move(cur);
  if (o_.launch()) return launched_exited;
  return rows[0].cpu_ms == 0 && (prev_.threads.empty() || attached_process_ended(o_.pid));
}

void ProcRecorder::stop(int64_t, bool ended) {
  // A zombie still lists its leader, and a thread whose exit has woken its
  // joiner may still be listed: they are gone all the same.
  if (ended) {
    for (const auto& r : exit_rows(prev_, unix0_)) csv_->add(recording_row(r));
  }
}

void ProcRecorder::report() {
  const std::string line =
      why_not_exact_.empty()
          ? "/proc mode (--mode=proc): CPU from schedstat, rates over bins; no intervals, no holders"
          : "/proc mode: CPU from schedstat, rates over bins (the exact mode is not available: " + why_not_exact_ + ")";
  print_summary(line, waits_, false);
}

}  // namespace threadburn::monitor
