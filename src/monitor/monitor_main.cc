// threadburn_monitor: per-thread CPU of any process, sampled from
// /proc/PID/task/*/schedstat every --period_us, written as a long CSV.
// Attaches to --pid=N, or launches `-- CMD ARGS...` itself and returns its
// exit code. Everything that can be pure lives in monitor.{h,cc}.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
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

const char* kHelp = R"(usage: threadburn_monitor --out=FILE [flags] --pid=N
       threadburn_monitor --out=FILE [flags] -- CMD ARGS...

Records the CPU time of every thread of a process (from /proc/PID/task/*/schedstat,
ns resolution) every period, with thread names, as a CSV with one row per thread
per interval in which it ran (plus one "[process]" row per interval). Stops when the
process exits, after --duration_s, or on Ctrl-C / SIGTERM, then prints a per-thread
summary on stderr. With -- CMD ARGS it starts CMD itself, records from its first
instruction, and exits with CMD's exit code (128+N if a signal N killed it).

flags:
  --pid=N               process to attach to (it is only read, never touched)
  --out=FILE            CSV to write; an existing file is refused unless --force
  --force               overwrite --out
  --period_us=1000      sample period, 100..100000 us
  --duration_s=SECONDS  stop recording after this long (default: until the end)
  --threshold=0.05      cores above which an interval counts as busy (summary)
  --marks=LOG           log with lines "YYYY-MM-DD HH:MM:SS,mmm - name - event"
                        (local time; e.g. seed 000's ckpt.log): the summary adds
                        each thread's CPU tail after every --mark_event
  --mark_event=update_end
  --help                this text

CSV columns: unix_ms,t_ms,dt_ms,tid,name,cpu_ms,cores,threads,change (see docs/monitor.md).
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
  std::vector<char*> command;
};

double parse_double(const std::string& flag, const std::string& text, double min, double max) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < min || v > max) {
    char range[96];
    std::snprintf(range, sizeof range, "a number in [%g, %g]", min, max);
    throw tb::FlagError("--" + flag + ": expected " + range + ", got '" + text + "'");
  }
  return v;
}

// Returns false when main should exit with *code (help or a bad flag).
bool parse_options(int argc, char** argv, Options* o, int* code) {
  std::vector<char*> mine{argv[0]};
  std::vector<std::string> storage;  // "--force" rewritten as "--force=1"
  storage.reserve(static_cast<size_t>(argc));
  int i = 1;
  for (; i < argc && std::strcmp(argv[i], "--") != 0; ++i) {
    if (std::strcmp(argv[i], "--force") == 0) {
      storage.push_back("--force=1");
      mine.push_back(storage.back().data());
    } else {
      mine.push_back(argv[i]);
    }
  }
  for (int j = i + 1; j < argc; ++j) o->command.push_back(argv[j]);
  o->command.push_back(nullptr);

  tb::FlagParser flags(kProg, "");
  for (const char* name : {"pid", "out", "duration_s", "marks"}) flags.add(name, "", "");
  flags.add("force", "0", "");
  flags.add("period_us", "1000", "");
  flags.add("threshold", "0.05", "");
  flags.add("mark_event", "update_end", "");
  try {
    const auto rest = flags.parse(static_cast<int>(mine.size()), mine.data());
    if (flags.help_requested()) {
      std::fputs(kHelp, stdout);
      *code = 0;
      return false;
    }
    if (rest.size() > 1) throw tb::FlagError(std::string("unexpected argument '") + rest[1] + "'");
    const bool launch = o->command.size() > 1;
    if (i < argc && !launch) throw tb::FlagError("--: expected a command after it");
    if (flags.was_set("pid") == launch) {
      throw tb::FlagError(launch ? "--pid: give either --pid=N or -- CMD ARGS, not both"
                                 : "--pid: required (or launch a command: -- CMD ARGS)");
    }
    if (flags.was_set("pid")) o->pid = static_cast<pid_t>(tb::parse_int("pid", flags.get("pid"), 1, INT32_MAX));
    o->out = flags.get("out");
    if (o->out.empty()) throw tb::FlagError("--out: required (the CSV file to write)");
    o->force = tb::parse_int("force", flags.get("force"), 0, 1) == 1;
    o->period_ns = tb::parse_int("period_us", flags.get("period_us"), 100, 100000) * 1000;
    if (flags.was_set("duration_s")) o->duration_s = parse_double("duration_s", flags.get("duration_s"), 0.001, 1e7);
    o->threshold = parse_double("threshold", flags.get("threshold"), 0, 1024);
    o->marks = flags.get("marks");
    o->mark_event = flags.get("mark_event");
    if (o->pid != 0) {
      std::string why;
      if (!tb::process_readable(o->pid, &why)) throw tb::FlagError("--pid=" + flags.get("pid") + ": " + why);
    }
    struct stat st {};
    if (!o->force && ::stat(o->out.c_str(), &st) == 0) {
      throw tb::FlagError("--out=" + o->out + ": file exists (use --force to overwrite)");
    }
  } catch (const tb::FlagError& e) {
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
  bool open(const std::string& path, bool force, std::string* why) {
    fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (force ? O_TRUNC : O_EXCL), 0644);
    if (fd_ < 0) *why = std::strerror(errno);
    return fd_ >= 0;
  }
  void add(const std::string& line, bool counts = true) {
    buf_ += line;
    rows_ += counts ? 1 : 0;
  }
  bool flush() {
    size_t done = 0;
    while (done < buf_.size()) {
      const ssize_t n = ::write(fd_, buf_.data() + done, buf_.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    buf_.clear();
    return true;
  }
  size_t pending() const { return buf_.size(); }
  int64_t rows() const { return rows_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
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

// Forks CMD stopped at a gate, so the monitor can read its baseline before
// CMD runs anything; exec errors come back through a close-on-exec pipe.
pid_t fork_gated(char** argv, int* gate_fd, int* err_fd) {
  int gate[2], err[2];
  if (::pipe2(gate, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
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
  *gate_fd = gate[1];
  *err_fd = err[0];
  return pid;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int code = 0;
  if (!parse_options(argc, argv, &o, &code)) return code;
  CsvWriter csv;
  std::string why;
  if (!csv.open(o.out, o.force, &why)) {
    std::fprintf(stderr, "%s: error: --out=%s: %s\n", kProg, o.out.c_str(), why.c_str());
    return 2;
  }
  install_handlers();
  const bool launched = o.pid == 0;
  int gate_fd = -1, err_fd = -1;
  if (launched && (o.pid = fork_gated(o.command.data(), &gate_fd, &err_fd)) < 0) {
    std::fprintf(stderr, "%s: error: cannot start '%s': %s\n", kProg, o.command[0], std::strerror(errno));
    ::unlink(o.out.c_str());
    return 2;
  }

  // One origin for both clocks: unix_ms = unix0 + monotonic offset, so the
  // CSV's two time columns never disagree even if NTP steps the wall clock.
  const int64_t t0 = tb::wall_ns();
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  const int64_t unix0 = static_cast<int64_t>(rt.tv_sec) * 1000000000LL + rt.tv_nsec;
  auto snapshot = [&] {
    mon::Snapshot s;
    const int64_t a = tb::wall_ns();
    s.threads = tb::read_threads(o.pid);
    s.t_ns = (a + tb::wall_ns()) / 2 - t0;
    return s;
  };
  mon::Snapshot prev = snapshot();
  std::string leader = "?";  // the process's name, as of the last sample that saw it
  auto note_leader = [&](const mon::Snapshot& s) {
    for (const auto& t : s.threads) {
      if (t.tid == o.pid) leader = t.name;
    }
  };
  if (launched) {
    ::close(gate_fd);  // EOF on the gate: the child execs now
    int err = 0;
    ssize_t n;
    while ((n = ::read(err_fd, &err, sizeof err)) < 0 && errno == EINTR) {
    }
    ::close(err_fd);
    if (n == static_cast<ssize_t>(sizeof err)) {
      ::waitpid(o.pid, nullptr, 0);
      csv.close();
      ::unlink(o.out.c_str());
      std::fprintf(stderr, "%s: error: cannot run '%s': %s\n", kProg, o.command[0], std::strerror(err));
      return err == ENOENT ? 127 : 126;  // what a shell returns
    }
  }
  csv.add(mon::csv_header(), false);

  // 10 ms buckets for the summary's rates: longer than a scheduler tick (see monitor.h).
  mon::SummaryBuilder summary(o.threshold, std::max(10.0, static_cast<double>(o.period_ns) / 1e6));
  const int64_t stop_at = o.duration_s > 0 ? t0 + std::llround(o.duration_s * 1e9) : INT64_MAX;
  int64_t deadline = t0 + o.period_ns, late = 0, last_flush = t0;
  int handled = 0;
  bool exited = false, io_error = false;
  std::string end_note;
  for (;;) {
    if (g_signals > handled) {
      handled = g_signals;
      if (!launched) {
        end_note = std::string("stopped by ") + strsignal(g_last_signal);
        break;
      }
      // A launched CMD decides when it is done; the monitor records its exit.
      if (handled == 1 && !g_from_terminal) ::kill(o.pid, g_last_signal);
      if (handled > 1) ::kill(o.pid, SIGKILL);
    }
    tb::sleep_until_ns(std::min(deadline, stop_at));
    if (launched) {
      siginfo_t si{};  // WNOWAIT: the zombie stays readable for the last sample
      exited = ::waitid(P_PID, static_cast<id_t>(o.pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
               si.si_pid == o.pid;
    }
    mon::Snapshot cur = snapshot();
    note_leader(cur);
    const auto rows = mon::interval_rows(prev, cur, unix0);
    for (const auto& r : rows) {
      csv.add(mon::format_row(r));
      summary.add(r);
    }
    prev = std::move(cur);
    if (!launched && rows[0].cpu_ms == 0 && (prev.threads.empty() || is_zombie(o.pid))) exited = true;
    if (exited) break;
    const int64_t now = tb::wall_ns();
    if (now >= stop_at) {
      end_note = "stopped after --duration_s";
      break;
    }
    deadline += o.period_ns;
    if (deadline <= now) {  // fell behind: skip the missed samples, keep the phase
      const int64_t missed = (now - deadline) / o.period_ns + 1;
      late += missed;
      deadline += missed * o.period_ns;
    }
    if (now - last_flush >= 100 * 1000000LL || csv.pending() > (1u << 20)) {
      io_error = !csv.flush();
      last_flush = now;
      if (io_error) break;
    }
  }
  io_error = io_error || !csv.flush();
  csv.close();
  const double own_cpu_ms = static_cast<double>(tb::thread_cpu_ns()) / 1e6;

  std::fprintf(stderr,
               "%s: pid %d (%s): %.3f s, %lld samples every %lld us (%lld missed), up to %d "
               "threads, %lld rows in %s\n%s",
               kProg, static_cast<int>(o.pid), leader.c_str(), summary.span_ms() / 1000,
               static_cast<long long>(summary.samples()), static_cast<long long>(o.period_ns / 1000),
               static_cast<long long>(late), summary.max_threads(),
               static_cast<long long>(csv.rows()), o.out.c_str(),
               mon::format_summary(summary).c_str());
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
      std::getline(in, line);
      while (std::getline(in, line)) {
        if (mon::parse_row(line, &row)) tails.add(row);
      }
      std::fputs(mon::format_tails(tails, summary, o.mark_event).c_str(), stderr);
    }
  }
  std::fprintf(stderr, "%s: own CPU %.1f ms (%.1f %% of a core)\n", kProg, own_cpu_ms,
               summary.span_ms() > 0 ? 100 * own_cpu_ms / summary.span_ms() : 0.0);
  if (io_error) std::fprintf(stderr, "%s: error: writing %s: %s\n", kProg, o.out.c_str(), std::strerror(errno));

  int status = 0;
  if (launched) {
    if (!exited) std::fprintf(stderr, "%s: note: %s; waiting for pid %d\n", kProg, end_note.c_str(), o.pid);
    while (::waitpid(o.pid, &status, 0) < 0) {
      if (errno != EINTR) break;
      if (g_signals > handled) {
        handled = g_signals;
        ::kill(o.pid, handled > 1 ? SIGKILL : (g_from_terminal ? 0 : static_cast<int>(g_last_signal)));
      }
    }
    std::fprintf(stderr, "%s: note: '%s' ended (%s)%s; the CSV is complete\n", kProg, o.command[0],
                 status_text(status).c_str(), exited ? " while recording" : "");
    return io_error ? 1 : exit_code_of(status);
  }
  if (exited) {
    std::fprintf(stderr, "%s: note: process %d exited while recording; the CSV is complete\n", kProg, o.pid);
  } else {
    std::fprintf(stderr, "%s: note: %s; the CSV is complete\n", kProg, end_note.c_str());
  }
  return io_error ? 1 : 0;
}
