#include "monitor/recorder.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/clock.h"
#include "monitor/intervals_file.h"
#include "monitor/launch.h"

namespace threadburn::monitor {

std::string source_meta(bool exact, const std::string& why_not_exact) {
  if (exact) return "sched_events";
  if (why_not_exact.empty()) return "proc_schedstat";
  std::string why = why_not_exact;
  std::replace(why.begin(), why.end(), ';', ',');
  return "proc_schedstat; exact_unavailable=" + why;
}

Recorder::Recorder(const Options& o, OutFile* csv, int64_t origin_ns)
    : o_(o), csv_(csv),
      // 10 ms buckets for the summary's rates: longer than a scheduler tick (see monitor.h).
      summary_(o.threshold, std::max(10.0, static_cast<double>(o.period_ns) / 1e6)) {
  t0_ = origin_ns;
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  // One origin for both clocks: the CSV's time columns never disagree.
  unix0_ = to_ns(rt) - (wall_ns() - t0_);
}

void Recorder::add_row(const Row& r) {
  csv_->add(recording_row(r));
  summary_.add(r);
}

void Recorder::run() {
  start();
  const int64_t stop_at = o_.duration_s > 0 ? t0_ + std::llround(o_.duration_s * 1e9) : INT64_MAX;
  int64_t deadline = t0_ + o_.period_ns, last_flush = t0_;
  for (;;) {
    if (handle_signals()) {
      stop(wall_ns(), false);
      break;
    }
    sleep_until_ns(std::min(deadline, stop_at));
    const bool launched_exited = o_.launch() && launched_child_exited(o_.pid);
    const int64_t sampled = wall_ns();
    if (tick(sampled, launched_exited)) {
      exited_ = true;
      stop(sampled, true);
      break;
    }
    const int64_t now = wall_ns();
    if (now >= stop_at) {
      end_note_ = "stopped after --duration_s";
      stop(now, false);
      break;
    }
    deadline = next_deadline(deadline, now);
    if (now - last_flush >= 100 * kNsPerMsInt || csv_->pending() > (1u << 20)) {
      flush();
      last_flush = now;
    }
  }
  flush();
}

bool Recorder::handle_signals() {
  if (g_signals <= handled_) return false;
  handled_ = g_signals;
  if (!o_.launch()) {
    end_note_ = std::string("stopped by ") + strsignal(g_last_signal);
    return true;
  }
  // A launched CMD decides when it is done; the monitor records its exit.
  if (handled_ == 1 && !g_from_terminal) ::kill(o_.pid, g_last_signal);
  if (handled_ > 1) ::kill(o_.pid, SIGKILL);
  return false;
}

int64_t Recorder::next_deadline(int64_t deadline, int64_t now) {
  deadline += o_.period_ns;
  if (deadline <= now) {  // fell behind: skip the missed samples, keep the phase
    const int64_t missed = (now - deadline) / o_.period_ns + 1;
    late_ += missed;
    deadline += missed * o_.period_ns;
  }
  return deadline;
}

void Recorder::print_summary(const std::string& mode_line, const WaitTable& waits, bool exact,
                             const std::string& intervals) const {
  const char* prog = "threadburn_monitor";
  std::fprintf(stderr,
               "%s: pid %d (%s): %.3f s, %lld samples every %lld us (%lld missed), up to %d threads, %lld rows in "
               "%s\n%s: %s\n%s",
               prog, static_cast<int>(o_.pid), leader_.c_str(), summary_.span_ms() / 1000,
               static_cast<long long>(summary_.samples()), static_cast<long long>(o_.period_ns / 1000),
               // Exact bins miss nothing when the monitor itself is late.
               static_cast<long long>(exact ? 0 : late_), summary_.max_threads(), static_cast<long long>(csv_->rows()),
               o_.out.c_str(), prog, mode_line.c_str(), format_summary(summary_).c_str());
  std::fputs(waits.format(exact).c_str(), stderr);
  if (o_.marks.empty()) return;
  std::ifstream log(o_.marks);
  if (!log) {
    std::fprintf(stderr, "%s: warning: --marks=%s: cannot read it; no tails\n", prog, o_.marks.c_str());
    return;
  }
  // Rows are read back from the CSV: the marks were still being written
  // while recording, and this keeps memory flat for long recordings. Twice:
  // first where the thread that writes the marks (--main_tid, by default
  // the process's first thread) woke for each next mark, then the tails.
  TailBuilder tails(read_marks(log), o_.mark_event, o_.threshold, o_.main_tid > 0 ? o_.main_tid : o_.pid);
  for (int pass = 0; pass < 2; ++pass) {
    std::ifstream in(o_.out);
    std::string line;
    Row row;
    RecordingReader reader;
    while (std::getline(in, line)) {
      if (!reader.read(line, &row)) continue;
      if (pass == 0) {
        tails.scan(row);
      } else {
        tails.add(row);
      }
    }
  }
  // The run-queue waits from the scheduler's records, once the windows'
  // ends are known: a worker that waited for a core in its spin shows a
  // short tail and a long wait, not a short spin.
  if (!intervals.empty()) {
    std::ifstream in(intervals);
    std::string line;
    IntervalRow r;
    const double unix0_ms = static_cast<double>(unix0_) / 1e6;
    while (std::getline(in, line)) {
      if (!parse_interval_row(line, &r) || r.kind != "wait") continue;
      tails.add_wait(r.tid, unix0_ms + static_cast<double>(r.start_ns) / 1e6,
                     unix0_ms + static_cast<double>(r.end_ns) / 1e6);
    }
  }
  std::fputs(format_tails(tails, summary_, o_.mark_event).c_str(), stderr);
}

}  // namespace threadburn::monitor
