#include "monitor/options.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/cli.h"
#include "core/procfs.h"
#include "core/rules.h"
#include "monitor/monitor.h"

namespace threadburn::monitor {
namespace {

constexpr const char* kProg = "threadburn_monitor";
// /proc mode: schedstat of a running thread advances only at context switches
// and scheduler ticks (4 ms at HZ=250): sampling faster adds cost, not detail.
// At 5 ms a sample costs ~20 us of wake-up on a VM plus ~0.3 us per thread:
// well under 1 % of a core. Exact mode: the bins of the recording, and how
// often the rings are read.
constexpr int64_t kDefaultPeriodUs = 5000;

const char* kUsage = R"(usage: threadburn_monitor --out=FILE [flags] --pid=N
       threadburn_monitor --out=FILE [flags] -- CMD ARGS...

Records the CPU of every thread of a process and of the processes it starts.
Exact mode (the default where the kernel allows it: root, or CAP_PERFMON): the
scheduler's own events (sched_switch, sched_wakeup, ...), so every interval a
thread ran, every run-queue wait and who held the CPU meanwhile, to the
microsecond, into FILE's stem + .intervals.csv, and the burn after each sleep
of the main thread into + .gaps.csv. Otherwise (or --mode=proc) the threads'
/proc schedstat every period. Both write FILE, a timeline CSV (threadburn's one
format) with one row per thread per period in which it ran (plus one "process"
row per period), and print a per-thread summary on stderr. Stops when the
process exits, after --duration_s, or on Ctrl-C / SIGTERM. With -- CMD ARGS it
starts CMD itself, records from its first instruction, and exits with CMD's
exit code (128+N if a signal N killed it).
)";

const char* kEpilogue = R"(
The file: "# threadburn timeline 1; origin=monitor_start; ...; source=sched_events|proc_schedstat"
then t_ms,series,cores with series process and thread:<tid>:<name> (docs/monitor.md).
Ctrl-C while recording a launched CMD: CMD gets the terminal's signal and the
monitor records until it exits; a second Ctrl-C kills CMD (SIGKILL).
)";

void declare(FlagParser* f) {
  f->add_string("pid", "", "process to attach to (it is only read, never touched)");
  f->add_string("out", "", "CSV to write; an existing file is refused unless --force");
  f->add_switch("force", "overwrite --out (and its .intervals.csv, .gaps.csv)");
  f->add_choice("mode", "auto", {"auto", "exact", "proc"},
                "exact: the scheduler's events (or an error); proc: /proc schedstat bins; auto: exact where "
                "allowed, else proc (said in the output and the files)");
  f->add_int("period_us", kDefaultPeriodUs, 100, 100000, "sample period (proc) or bin (exact) in microseconds");
  f->add_string("duration_s", "", "stop recording after this many seconds (default: until the end)");
  f->add_double("threshold", 0.05, 0, 1024, "cores above which an interval counts as busy (summary)");
  f->add_string("main_tid", "", "the thread that writes the --marks and whose sleeps (exact mode) are the gaps after "
                "steps (default: the pid)");
  f->add_double("gap_min_ms", static_cast<double>(kDefaultGapMinNs) / 1e6, 0.001, 1e6,
                "exact mode: a sleep of the main thread at least this long is a gap");
  f->add_string("marks", "",
                "log with lines 'YYYY-MM-DD HH:MM:SS,mmm - name - event' (local time): the summary adds "
                "each thread's CPU tail after every --mark_event");
  f->add_string("mark_event", "update_end", "the event of --marks after which tails are measured");
  f->add_string("summary_file", "", "write the summary into this file instead of stderr (errors stay on stderr)");
  f->add_switch("print_marks", "only print the marks of --marks as CSV (unix_ms,name,event) and exit");
}

// The process must exist, be alive and be ours to watch.
void check_target(pid_t pid, const std::string& flag) {
  const Availability a = process_readable(pid);
  if (!a.ok) throw Error("--pid=" + flag + ": " + a.why);
  const char state = process_state(pid);
  if (state == 'Z' || state == 'X' || state == '\0') {
    throw Error("--pid=" + flag + ": the process has already exited (a zombie its parent has not reaped)");
  }
  const int owner = process_uid(pid);
  if (geteuid() != 0 && owner >= 0 && static_cast<uid_t>(owner) != getuid()) {
    throw Error("--pid=" + flag + ": a process of another user (uid " + std::to_string(owner) +
                "; the monitor runs as uid " + std::to_string(getuid()) + "): run it as that user or as root");
  }
}

}  // namespace

std::string out_stem(const std::string& out) {
  const auto slash = out.rfind('/');
  const auto dot = out.rfind('.');
  if (dot != std::string::npos && (slash == std::string::npos || dot > slash) && out.substr(dot) == ".csv") {
    return out.substr(0, dot);
  }
  return out;
}

bool parse_options(int argc, char** argv, Options* o, int* code) {
  int dashdash = 1;
  while (dashdash < argc && std::strcmp(argv[dashdash], "--") != 0) ++dashdash;
  for (int j = dashdash + 1; j < argc; ++j) o->command.push_back(argv[j]);
  o->command.push_back(nullptr);
  FlagParser flags(kProg, "");
  declare(&flags);
  try {
    const auto rest = flags.parse(dashdash, argv);
    if (flags.help_requested()) {
      std::fputs(kUsage, stdout);
      std::fputs(flags.help_text(kEpilogue).substr(flags.help_text().find("flags:")).c_str(), stdout);
      *code = 0;
      return false;
    }
    if (rest.size() > 1) throw Error(std::string("unexpected argument '") + rest[1] + "'");
    if (flags.on("print_marks")) {
      // The one parser of such logs; the plot asks it (threadburn monitor-plot).
      std::ifstream log(flags.text("marks"));
      if (!log) throw Error("--marks=" + flags.text("marks") + ": cannot read it");
      std::fputs("unix_ms,name,event\n", stdout);
      for (const auto& m : read_marks(log)) {
        std::printf("%lld,%s,%s\n", static_cast<long long>(m.unix_ms), m.name.c_str(), m.event.c_str());
      }
      *code = 0;
      return false;
    }
    if (dashdash < argc && !o->launch()) throw Error("--: expected a command after it");
    if (flags.was_set("pid") == o->launch()) {
      throw Error(o->launch() ? "--pid: give either --pid=N or -- CMD ARGS, not both"
                              : "--pid: required (or launch a command: -- CMD ARGS)");
    }
    if (flags.was_set("pid")) o->pid = static_cast<pid_t>(parse_int("pid", flags.text("pid"), 1, INT32_MAX));
    o->out = flags.text("out");
    if (o->out.empty()) throw Error("--out: required (the CSV file to write)");
    o->force = flags.on("force");
    o->period_ns = flags.integer("period_us") * 1000;
    if (flags.was_set("duration_s")) o->duration_s = parse_double("duration_s", flags.text("duration_s"), 0.001, 1e7);
    o->threshold = flags.number("threshold");
    const std::string mode = flags.text("mode");
    o->mode = mode == "exact" ? Mode::kExact : mode == "proc" ? Mode::kProc : Mode::kAuto;
    if (flags.was_set("main_tid")) {
      o->main_tid = static_cast<pid_t>(parse_int("main_tid", flags.text("main_tid"), 1, INT32_MAX));
    }
    o->gap_min_ns = static_cast<int64_t>(flags.number("gap_min_ms") * 1e6);
    o->summary_file = flags.text("summary_file");
    o->marks = flags.text("marks");
    o->mark_event = flags.text("mark_event");
    if (o->pid != 0) check_target(o->pid, flags.text("pid"));
    struct stat st {};
    if (!o->force) {
      const std::string stem = out_stem(o->out);
      for (const std::string& path : {o->out, stem + ".intervals.csv", stem + ".gaps.csv"}) {
        if (::stat(path.c_str(), &st) == 0) {
          throw Error("--out=" + o->out + ": " + (path == o->out ? "file" : path) + " exists (use --force to overwrite)");
        }
      }
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    *code = 2;
    return false;
  }
  return true;
}

}  // namespace threadburn::monitor
