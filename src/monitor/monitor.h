// The pure part of threadburn_monitor: per-thread rates between two /proc
// snapshots, the timeline rows they become, the end-of-run summary, and the marks
// read from a seed-000-style log ("2022-11-23 14:47:19,534 - ckpt - update_end")
// with the CPU tail after each. No I/O on /proc here, so all of it is unit-tested.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <istream>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/procfs.h"

namespace threadburn::monitor {

// The per-sample whole-process row: tid 0 (no thread has it) and a name in
// brackets (comm names cannot be told apart from it otherwise, but 0 can).
constexpr pid_t kProcessTid = 0;
inline const char* const kProcessName = "[process]";

// One read of every thread of the target. t_ns: monotonic ns since the
// monitor started (the midpoint of the read, which takes ~10 us per thread).
struct Snapshot {
  int64_t t_ns = 0;
  std::vector<ThreadStat> threads;  // sorted by tid, as read_threads returns them
};

// One interval of one thread. unix_ms is the END of the interval on CLOCK_REALTIME (integer
// ms, like the log's timestamps); t_ms the same instant on the monotonic clock
// since the monitor started; dt_ms the interval length.
struct Row {
  int64_t unix_ms = 0;
  double t_ms = 0, dt_ms = 0;
  pid_t tid = 0;
  std::string name;
  double cpu_ms = 0, cores = 0;
  int threads = 0;     // threads alive at the end of the interval
  std::string change;  // "", "new", "gone", "renamed"
};

// Rows for the interval prev -> cur: first the process row (always, so the
// sample clock is in the file even when nothing ran), then one row per thread
// that used CPU or was born, renamed or gone. A thread born in between counts
// from 0; a tid whose CPU went backwards was reused and counts as new; a thread
// gone since prev gets a row with cpu_ms 0 (what it ran after prev is lost:
// at most one period). unix0_ns: CLOCK_REALTIME at monotonic t_ns == 0.
std::vector<Row> interval_rows(const Snapshot& prev, const Snapshot& cur, int64_t unix0_ns);

// The process ended while still listed (attached: a zombie leader, a thread
// still in its exit): every thread of the last snapshot is gone. A zero "gone"
// row for each at the last sample's time (after its row there, if it had
// one), so that every thread's last row in the recording is its end.
std::vector<Row> exit_rows(const Snapshot& last, int64_t unix0_ns);

// The recording is a timeline in the one format (core/timeline.h): origin
// monitor_start; the header names the pid, the period, the --threshold
// (burn_threshold_cores) and t0_unix_ms, the wall-clock time of t_ms == 0 in
// ms (to the us). Each interval is a `process` row (always: it is the sample
// clock) followed by one `thread:<tid>:<name>` row per thread that used CPU
// or was born, renamed or gone; cores = CPU / interval.
// extra: more key=value pairs after those (the mode's source, t0_mono_ms).
std::string recording_header(int64_t unix0_ns, pid_t pid, int64_t period_us, double threshold_cores,
                             const std::vector<std::pair<std::string, std::string>>& extra = {});
std::string recording_row(const Row& row);

// Reads a recording back into Rows, one line at a time in file order (the
// tails stream it: memory stays flat). dt_ms comes from the process series'
// clock, unix_ms = floor(t0_unix_ms + t_ms), cpu_ms = cores x dt_ms, tid and
// name from the series; threads and change are not in the file (0, "").
class RecordingReader {
 public:
  // True when the line was a row (*row set); the header lines set the clock.
  bool read(const std::string& line, Row* row);

 private:
  double unix0_ms_ = 0, interval_start_ms_ = 0, clock_ms_ = 0;
};

// Per-thread totals over a recording. Rates (max_cores, busy) are taken over
// buckets of bucket_ms, not single intervals: schedstat advances only at
// context switches and scheduler ticks (4 ms at Debian's HZ=250), so a thread
// that runs without a break shows up in 4 ms lumps, and one 1 ms interval
// can claim 4 cores. busy_ms: time in buckets above the threshold;
// first/last_busy_ms: end (t_ms) of the first/last such bucket (-1: never).
struct ThreadTotals {
  pid_t tid = 0;
  std::string name;  // the latest name seen
  double cpu_ms = 0, max_cores = 0, busy_ms = 0;
  double first_busy_ms = -1, last_busy_ms = -1;
  int64_t bucket = -1;      // the bucket being filled
  double bucket_cpu_ms = 0;  // its CPU so far
};

class SummaryBuilder {
 public:
  SummaryBuilder(double threshold_cores, double bucket_ms)
      : threshold_(threshold_cores), bucket_ms_(bucket_ms) {}
  void add(const Row& row);
  // Threads by CPU, most first, their last buckets closed; the process apart.
  std::vector<ThreadTotals> threads() const;
  ThreadTotals process() const;
  int64_t samples() const { return samples_; }
  double span_ms() const { return span_ms_; }
  int max_threads() const { return max_threads_; }
  double threshold() const { return threshold_; }
  double bucket_ms() const { return bucket_ms_; }

 private:
  void close_bucket(ThreadTotals* t) const;
  void add_to(ThreadTotals* t, const Row& row) const;
  double threshold_, bucket_ms_;
  std::map<pid_t, ThreadTotals> threads_;
  ThreadTotals process_{kProcessTid, kProcessName};
  int64_t samples_ = 0;
  double span_ms_ = 0;
  int max_threads_ = 0;
};

// The summary table (top `top` threads, the rest as one line, then the process).
std::string format_summary(const SummaryBuilder& summary, size_t top = 15);

// One line of a seed-000-style log.
struct Mark {
  int64_t unix_ms = 0;
  std::string name, event;
};

// "YYYY-MM-DD HH:MM:SS,mmm - name - event". The time is LOCAL time (Python's
// logging asctime uses time.localtime), converted with mktime under the TZ of
// the environment, so the monitor and the logger must run with the same TZ.
// In a DST fall-back hour the repeated times are ambiguous; mktime picks one.
// nullopt for lines of any other shape (comments, tracebacks).
std::optional<Mark> parse_log_line(const std::string& line);
std::vector<Mark> read_marks(std::istream& in);

// CPU after one mark. The window runs from the mark (unix ms, exclusive: a
// row ending in a mark's own ms ran mostly before it) to whichever comes
// first: the next mark (of any event) later than it, its horizon (exclusive
// too), or the moment the thread that writes the marks woke from its sleep
// before that mark: what that thread does from there on (and what the
// OpenMP workers it wakes do) is the program's next action, not the burn
// after this mark. Its sleep: its longest stretch without CPU in the
// window's rows, of at least `sleep_min_ms` (kMarkSleepMinMs: longer than
// two scheduler ticks at HZ=100, so that a running thread whose schedstat
// advances only at ticks never reads as asleep in the /proc mode). The
// longest, not the last: on a loaded machine the thread, woken, can wait
// tens of ms for a core between its first instructions and the mark, which
// the rows cannot tell from a sleep. Where the marking thread did not sleep
// in the window (or its longest stretch ran into the next mark), the window
// runs to the next mark. The rows are the recording's
// bins (exact mode) or samples (/proc mode): the wake is known to a row,
// and the window ends with the last row that ended before it.
// tail_ms: from the mark to the end of the last row above the threshold
// (0 when none); burn_ms: CPU used in the window.
constexpr double kMarkSleepMinMs = 20;
constexpr pid_t kNoMarkingThread = -1;

struct Tail {
  double tail_ms = 0, burn_ms = 0;
  // Run-queue wait in the window (exact mode: the scheduler's records): a
  // spinner that wants a core but waits for one burns nothing meanwhile, so a
  // starved worker reads a short tail; this says how long it waited.
  double wait_ms = 0;
};
struct MarkWindow {
  Mark mark;
  int64_t horizon_unix_ms = INT64_MAX;
  // Where the marking thread woke for the next mark: the window's rows end at
  // or before end_t_ms (the recording's clock; +inf: it runs to the horizon),
  // end_unix_ms that end in unix ms (INT64_MAX: the horizon).
  double end_t_ms = std::numeric_limits<double>::infinity();
  int64_t end_unix_ms = INT64_MAX;
  int64_t last_row_unix_ms = 0;  // the end of the last row counted in it
  std::map<pid_t, Tail> by_tid;  // kProcessTid: the whole process
  bool cut() const { return end_unix_ms != INT64_MAX; }
  // ms from the mark to the window's end (to the last row counted, for the last window)
  double length_ms() const;
};

// Streams rows (in time order) into the windows after every mark whose event
// is `event`. Only the windows' per-thread maps are kept, not the rows. With
// a marking thread, the rows go by twice: scan() every row first (where the
// marking thread woke in each window), then add() every row.
class TailBuilder {
 public:
  TailBuilder(const std::vector<Mark>& marks, const std::string& event, double threshold_cores,
              pid_t marking_tid = kNoMarkingThread, double sleep_min_ms = kMarkSleepMinMs);
  void scan(const Row& row);
  void add(const Row& row);
  // After add(): a run-queue wait of `tid` from start to end (unix ms), the
  // part inside each window that saw rows counted to the thread and to the
  // process. Any order. The first call makes format_tails print the waits.
  void add_wait(pid_t tid, double start_unix_ms, double end_unix_ms);
  bool waits_known() const { return waits_known_; }
  const std::vector<MarkWindow>& windows() const { return windows_; }
  pid_t marking_tid() const { return marking_; }
  double sleep_min_ms() const { return sleep_min_; }

 private:
  void close_scan();
  std::vector<MarkWindow> windows_;
  size_t next_ = 0;  // first window whose horizon the rows have not passed
  double threshold_;
  pid_t marking_;
  double sleep_min_;
  // scan(): the window being scanned, the ends of the current and the
  // previous row time (t_ms, unix ms), and the end of the marking thread's
  // last row with CPU in the window (unix ms; the mark at first).
  size_t scan_ = 0;
  double row_t_ = -1, row_u_ = 0, prev_t_ = -1, prev_u_ = 0;
  double quiet_since_ = 0;
  double longest_ = 0;  // the longest stretch without CPU in the window so far (ms)
  bool waits_known_ = false;
};

// Per-thread mean/min/max tail and mean burn over the windows the rows
// reached (marks from before the recording are skipped); names from
// `summary`. The first line says what the window is and how many windows
// ended at the marking thread's wake.
std::string format_tails(const TailBuilder& tails, const SummaryBuilder& summary,
                         const std::string& event, size_t top = 15);

}  // namespace threadburn::monitor
