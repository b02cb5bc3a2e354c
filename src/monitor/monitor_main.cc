// threadburn_monitor: per-thread CPU of any process, sampled from
// /proc/PID/task/*/schedstat every --period_us, written as a long CSV.
// Attaches to --pid=N, or launches `-- CMD ARGS...` itself and returns its
// exit code. Everything that can be pure lives in monitor.{h,cc}; main is
// parse -> open -> start -> record -> report -> finish.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "core/cli.h"
#include "core/clock.h"
#include "core/procfs.h"
#include "monitor/monitor.h"

namespace tb = threadburn;
namespace mon = threadburn::monitor;

namespace {

constexpr const char* kProg = "threadburn_monitor";
// schedstat of a running thread advances only at context switches and
// scheduler ticks (4 ms at HZ=250): sampling faster adds cost, not detail.
// At 5 ms a sample costs ~20 us of wake-up on a VM plus ~0.3 us per thread:
// well under 1 % of a core.
constexpr int64_t kDefaultPeriodUs = 5000;

const char* kUsage = R"(usage: threadburn_monitor --out=FILE [flags] --pid=N
       threadburn_monitor --out=FILE [flags] -- CMD ARGS...

Records the CPU time of every thread of a process (from /proc/PID/task/*/schedstat)
every period, with thread names, as a timeline CSV (threadburn's one format) with
one row per thread per interval in which it ran (plus one "process" row per interval). Stops when the process exits,
after --duration_s, or on Ctrl-C / SIGTERM, then prints a per-thread summary on
stderr. With -- CMD ARGS it starts CMD itself, records from its first instruction,
and exits with CMD's exit code (128+N if a signal N killed it).
)";

const char* kEpilogue = R"(
The file: "# threadburn timeline 1; origin=monitor_start; ...; t0_unix_ms=..." then
t_ms,series,cores with series process and thread:<tid>:<name> (docs/monitor.md).
Ctrl-C while recording a launched CMD: CMD gets the terminal's signal and the
monitor records until it exits; a second Ctrl-C kills CMD (SIGKILL).
)";

volatile sig_atomic_t g_signals = 0;       // stop requests received
volatile sig_atomic_t g_last_signal = 0;
volatile sig_atomic_t g_from_terminal = 0;  // the last one came from the tty

void on_signal(int sig, siginfo_t* info, void*) {
  g_last_signal = sig;
  // SI_KERNEL: the terminal sent it to the whole foreground group, so a
  // launched child got it too and must not get it a second time from us.
  g_from_terminal = info != nullptr && info->si_code == SI_KERNEL;
  g_signals = g_signals + 1;
}

void install_handlers() {
  struct sigaction sa {};
  sa.sa_sigaction = on_signal;
  // No SA_RESTART: waitpid sees EINTR. The sampling sleep restarts (core's
  // sleep_until_ns), so a stop request waits at most one period.
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

struct Options {
  pid_t pid = 0;
  std::string out, marks, mark_event;
  bool force = false;
  int64_t period_ns = 0;
  double duration_s = 0;  // 0: none
  double threshold = 0;
  std::vector<char*> command;  // null-terminated; empty: attach
  bool launch() const { return command.size() > 1; }
};

void declare(tb::FlagParser* f) {
  f->add_string("pid", "", "process to attach to (it is only read, never touched)");
  f->add_string("out", "", "CSV to write; an existing file is refused unless --force");
  f->add_switch("force", "overwrite --out");
  f->add_int("period_us", kDefaultPeriodUs, 100, 100000, "sample period in microseconds");
  f->add_string("duration_s", "", "stop recording after this many seconds (default: until the end)");
  f->add_double("threshold", 0.05, 0, 1024, "cores above which an interval counts as busy (summary)");
  f->add_string("marks", "",
                "log with lines 'YYYY-MM-DD HH:MM:SS,mmm - name - event' (local time): the summary adds "
                "each thread's CPU tail after every --mark_event");
  f->add_string("mark_event", "update_end", "the event of --marks after which tails are measured");
  f->add_switch("print_marks", "only print the marks of --marks as CSV (unix_ms,name,event) and exit");
}

// Returns false when main should exit with *code (help or a bad flag).
bool parse_options(int argc, char** argv, Options* o, int* code) {
  int dashdash = 1;
  while (dashdash < argc && std::strcmp(argv[dashdash], "--") != 0) ++dashdash;
  for (int j = dashdash + 1; j < argc; ++j) o->command.push_back(argv[j]);
  o->command.push_back(nullptr);
  tb::FlagParser flags(kProg, "");
  declare(&flags);
  try {
    const auto rest = flags.parse(dashdash, argv);
    if (flags.help_requested()) {
      std::fputs(kUsage, stdout);
      std::fputs(flags.help_text(kEpilogue).substr(flags.help_text().find("flags:")).c_str(), stdout);
      *code = 0;
      return false;
    }
    if (rest.size() > 1) throw tb::Error(std::string("unexpected argument '") + rest[1] + "'");
    if (flags.on("print_marks")) {
      // The one parser of such logs; the plot asks it (threadburn monitor-plot).
      std::ifstream log(flags.text("marks"));
      if (!log) throw tb::Error("--marks=" + flags.text("marks") + ": cannot read it");
      std::fputs("unix_ms,name,event\n", stdout);
      for (const auto& m : mon::read_marks(log)) {
        std::printf("%lld,%s,%s\n", static_cast<long long>(m.unix_ms), m.name.c_str(), m.event.c_str());
      }
      *code = 0;
      return false;
    }
    if (dashdash < argc && !o->launch()) throw tb::Error("--: expected a command after it");
    if (flags.was_set("pid") == o->launch()) {
      throw tb::Error(o->launch() ? "--pid: give either --pid=N or -- CMD ARGS, not both"
                                  : "--pid: required (or launch a command: -- CMD ARGS)");
    }
    if (flags.was_set("pid")) o->pid = static_cast<pid_t>(tb::parse_int("pid", flags.text("pid"), 1, INT32_MAX));
    o->out = flags.text("out");
    if (o->out.empty()) throw tb::Error("--out: required (the CSV file to write)");
    o->force = flags.on("force");
    o->period_ns = flags.integer("period_us") * 1000;
    if (flags.was_set("duration_s")) o->duration_s = tb::parse_double("duration_s", flags.text("duration_s"), 0.001, 1e7);
    o->threshold = flags.number("threshold");
    o->marks = flags.text("marks");
    o->mark_event = flags.text("mark_event");
    if (o->pid != 0) {
      const tb::Availability a = tb::process_readable(o->pid);
      if (!a.ok) throw tb::Error("--pid=" + flags.text("pid") + ": " + a.why);
    }
    struct stat st {};
    if (!o->force && ::stat(o->out.c_str(), &st) == 0) {
      throw tb::Error("--out=" + o->out + ": file exists (use --force to overwrite)");
    }
  } catch (const tb::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    *code = 2;
    return false;
  }
  return true;
}

// Complete lines only reach the file, each write(2) a whole number of rows,
// so a kill of the monitor itself loses at most the last flush period.
class CsvWriter {
 public:
  // Throws Error naming --out.
  CsvWriter(const std::string& path, bool force) : path_(path) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0644);
    if (fd_ < 0) throw tb::Error("--out=" + path + ": " + std::strerror(errno));
  }
  ~CsvWriter() { close(); }
  void add(const std::string& line, bool counts = true) {
    buf_ += line;
    rows_ += counts ? 1 : 0;
  }
  // Throws Error on a failed write.
  void flush() {
    size_t done = 0;
    while (done < buf_.size()) {
      const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw tb::Error("writing " + path_ + ": " + std::strerror(errno));
      done += static_cast<size_t>(n);
    }
    buf_.clear();
  }
  size_t pending() const { return buf_.size(); }
  int64_t rows() const { return rows_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  void discard() {
    close();
    ::unlink(path_.c_str());
  }

 private:
  std::string path_;
  int fd_ = -1;
  std::string buf_;
  int64_t rows_ = 0;
};

// A zombie keeps /proc/PID/task readable (its leader stays until reaped), so
// an attached monitor also has to look at the state letter after "(comm)".
bool is_zombie(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(in, text)) return true;
  const auto paren = text.rfind(')');
  return paren == std::string::npos || paren + 2 >= text.size() || text[paren + 2] == 'Z' ||
         text[paren + 2] == 'X';
}

int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

std::string status_text(int status) {
  if (WIFSIGNALED(status)) return std::string("killed by signal ") + strsignal(WTERMSIG(status));
  return "exit code " + std::to_string(exit_code_of(status));
}

// CMD forked and held at a gate, so the monitor reads its baseline before CMD
// runs anything; exec errors come back through a close-on-exec pipe.
class Launch {
 public:
  explicit Launch(char** argv) : argv_(argv) {
    int gate[2], err[2];
    if (::pipe2(gate, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || (pid_ = ::fork()) < 0) {
      throw tb::Error(std::string("cannot start '") + argv[0] + "': " + std::strerror(errno));
    }
    if (pid_ == 0) {
      ::close(gate[1]);
      ::close(err[0]);
      char c;
      while (::read(gate[0], &c, 1) < 0 && errno == EINTR) {
      }
      ::execvp(argv[0], argv);
      const int e = errno;
      (void)!::write(err[1], &e, sizeof e);
      ::_exit(127);
    }
    ::close(gate[0]);
    ::close(err[1]);
    gate_fd_ = gate[1];
    err_fd_ = err[0];
  }
  pid_t pid() const { return pid_; }
  // Opens the gate; returns 0, or the errno of a failed exec (CMD reaped).
  int release() {
    ::close(gate_fd_);  // EOF on the gate: the child execs now
    int err = 0;
    ssize_t n;
    while ((n = ::read(err_fd_, &err, sizeof err)) < 0 && errno == EINTR) {
    }
    ::close(err_fd_);
    if (n != static_cast<ssize_t>(sizeof err)) return 0;
    ::waitpid(pid_, nullptr, 0);
    return err;
  }

 private:
  char** argv_;
  pid_t pid_ = -1;
  int gate_fd_ = -1, err_fd_ = -1;
};

// The sampling loop and what it learns.
class Recorder {
 public:
  Recorder(const Options& o, CsvWriter* csv)
      : o_(o), csv_(csv), reader_(o.pid),
        // 10 ms buckets for the summary's rates: longer than a scheduler tick (see monitor.h).
        summary_(o.threshold, std::max(10.0, static_cast<double>(o.period_ns) / 1e6)) {
    t0_ = tb::wall_ns();
    timespec rt{};
    clock_gettime(CLOCK_REALTIME, &rt);
    unix0_ = tb::to_ns(rt);  // one origin for both clocks: the CSV's time columns never disagree
    prev_ = snapshot();
  }

  // Samples until the process exits, --duration_s passes or a stop request
  // (attached) comes; forwards signals to a launched CMD. Throws Error on a
  // failed write.
  void run() {
    csv_->add(mon::recording_header(unix0_, o_.pid, o_.period_ns / 1000, o_.threshold), false);
    const int64_t stop_at = o_.duration_s > 0 ? t0_ + std::llround(o_.duration_s * 1e9) : INT64_MAX;
    int64_t deadline = t0_ + o_.period_ns, last_flush = t0_;
    for (;;) {
      if (handle_signals()) break;
      tb::sleep_until_ns(std::min(deadline, stop_at));
      if (o_.launch()) exited_ = launched_child_exited();
      const auto rows = sample();
      if (!o_.launch() && rows[0].cpu_ms == 0 && (prev_.threads.empty() || is_zombie(o_.pid))) exited_ = true;
      if (exited_) {
        // A zombie still lists its leader, and a thread whose exit has woken
        // its joiner may still be listed: they are gone all the same.
        for (const auto& r : mon::exit_rows(prev_, unix0_)) csv_->add(mon::recording_row(r));
        break;
      }
      const int64_t now = tb::wall_ns();
      if (now >= stop_at) {
        end_note_ = "stopped after --duration_s";
        break;
      }
      deadline = next_deadline(deadline, now);
      if (now - last_flush >= 100 * tb::kNsPerMsInt || csv_->pending() > (1u << 20)) {
        csv_->flush();
        last_flush = now;
      }
    }
    csv_->flush();
  }

  const mon::SummaryBuilder& summary() const { return summary_; }
  bool exited() const { return exited_; }
  int handled_signals() const { return handled_; }
  const std::string& end_note() const { return end_note_; }
  const std::string& leader() const { return leader_; }
  int64_t late() const { return late_; }

 private:
  mon::Snapshot snapshot() {
    mon::Snapshot s;
    const int64_t a = tb::wall_ns();
    s.threads = reader_.read();
    s.t_ns = (a + tb::wall_ns()) / 2 - t0_;
    for (const auto& t : s.threads) {
      if (t.tid == o_.pid) leader_ = t.name;
    }
    return s;
  }

  std::vector<mon::Row> sample() {
    mon::Snapshot cur = snapshot();
    auto rows = mon::interval_rows(prev_, cur, unix0_);
    for (const auto& r : rows) {
      csv_->add(mon::recording_row(r));
      summary_.add(r);
    }
    prev_ = std::move(cur);
    return rows;
  }

  // true: stop recording now.
  bool handle_signals() {
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

  bool launched_child_exited() const {
    siginfo_t si{};  // WNOWAIT: the zombie stays readable for the last sample
    return ::waitid(P_PID, static_cast<id_t>(o_.pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == o_.pid;
  }

  int64_t next_deadline(int64_t deadline, int64_t now) {
    deadline += o_.period_ns;
    if (deadline <= now) {  // fell behind: skip the missed samples, keep the phase
      const int64_t missed = (now - deadline) / o_.period_ns + 1;
      late_ += missed;
      deadline += missed * o_.period_ns;
    }
    return deadline;
  }

  const Options& o_;
  CsvWriter* csv_;
  tb::TaskReader reader_;
  mon::SummaryBuilder summary_;
  mon::Snapshot prev_;
  int64_t t0_ = 0, unix0_ = 0, late_ = 0;
  int handled_ = 0;
  bool exited_ = false;
  std::string end_note_, leader_ = "?";
};

void report(const Options& o, const Recorder& rec, const CsvWriter& csv) {
  const auto& summary = rec.summary();
  std::fprintf(stderr,
               "%s: pid %d (%s): %.3f s, %lld samples every %lld us (%lld missed), up to %d "
               "threads, %lld rows in %s\n%s",
               kProg, static_cast<int>(o.pid), rec.leader().c_str(), summary.span_ms() / 1000,
               static_cast<long long>(summary.samples()), static_cast<long long>(o.period_ns / 1000),
               static_cast<long long>(rec.late()), summary.max_threads(), static_cast<long long>(csv.rows()),
               o.out.c_str(), mon::format_summary(summary).c_str());
  if (!o.marks.empty()) {
    std::ifstream log(o.marks);
    if (!log) {
      std::fprintf(stderr, "%s: warning: --marks=%s: cannot read it; no tails\n", kProg, o.marks.c_str());
    } else {
      // Rows are read back from the CSV: the marks were still being written
      // while recording, and this keeps memory flat for long recordings.
      mon::TailBuilder tails(mon::read_marks(log), o.mark_event, o.threshold);
      std::ifstream in(o.out);
      std::string line;
      mon::Row row;
      mon::RecordingReader reader;
      while (std::getline(in, line)) {
        if (reader.read(line, &row)) tails.add(row);
      }
      std::fputs(mon::format_tails(tails, summary, o.mark_event).c_str(), stderr);
    }
  }
  const double own_cpu_ms = tb::ns_to_ms(tb::thread_cpu_ns());
  std::fprintf(stderr, "%s: own CPU %.1f ms (%.2f %% of a core)\n", kProg, own_cpu_ms,
               summary.span_ms() > 0 ? 100 * own_cpu_ms / summary.span_ms() : 0.0);
}

// Waits for a launched CMD (forwarding further signals) and returns its exit code.
int finish_launch(const Options& o, const Recorder& rec) {
  if (!rec.exited()) std::fprintf(stderr, "%s: note: %s; waiting for pid %d\n", kProg, rec.end_note().c_str(), o.pid);
  int status = 0, handled = rec.handled_signals();
  while (::waitpid(o.pid, &status, 0) < 0) {
    if (errno != EINTR) break;
    if (g_signals > handled) {
      handled = g_signals;
      ::kill(o.pid, handled > 1 ? SIGKILL : (g_from_terminal ? 0 : static_cast<int>(g_last_signal)));
    }
  }
  std::fprintf(stderr, "%s: note: '%s' ended (%s)%s; the CSV is complete\n", kProg, o.command[0],
               status_text(status).c_str(), rec.exited() ? " while recording" : "");
  return exit_code_of(status);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int code = 0;
  if (!parse_options(argc, argv, &o, &code)) return code;
  try {
    CsvWriter csv(o.out, o.force);
    install_handlers();
    std::unique_ptr<Launch> launch;
    if (o.launch()) {
      try {
        launch = std::make_unique<Launch>(o.command.data());
      } catch (const tb::Error&) {
        csv.discard();
        throw;
      }
      o.pid = launch->pid();
    }
    Recorder rec(o, &csv);  // the baseline, before a launched CMD runs
    if (launch) {
      if (const int err = launch->release()) {
        csv.discard();
        std::fprintf(stderr, "%s: error: cannot run '%s': %s\n", kProg, o.command[0], std::strerror(err));
        return err == ENOENT ? 127 : 126;  // what a shell returns
      }
    }
    std::string io_error;
    try {
      rec.run();
    } catch (const tb::Error& e) {
      io_error = e.what();
    }
    csv.close();
    report(o, rec, csv);
    if (!io_error.empty()) std::fprintf(stderr, "%s: error: %s\n", kProg, io_error.c_str());
    if (launch) {
      const int child = finish_launch(o, rec);
      return io_error.empty() ? child : 1;
    }
    const std::string how =
        rec.exited() ? "process " + std::to_string(o.pid) + " exited while recording" : rec.end_note();
    std::fprintf(stderr, "%s: note: %s; the CSV is complete\n", kProg, how.c_str());
    return io_error.empty() ? 0 : 1;
  } catch (const tb::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    return 2;
  }
}
