// threadburn_monitor's flags: declared once (core/cli.h), checked before
// anything is opened, so a bad flag or a process that cannot be watched is
// one line and exit 2 with --out untouched.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace threadburn::monitor {

// auto: exact when the kernel allows it, else /proc (said in the output and
// the files); exact: the scheduler's events or an error; proc: /proc bins.
enum class Mode { kAuto, kExact, kProc };

struct Options {
  pid_t pid = 0;
  std::string out, marks, mark_event;
  bool force = false;
  int64_t period_ns = 0;
  double duration_s = 0;  // 0: none
  double threshold = 0;
  Mode mode = Mode::kAuto;
  pid_t main_tid = 0;  // the thread that writes the marks, whose sleeps are the gaps (0: the pid)
  int64_t gap_min_ns = 0;
  std::string summary_file;  // the summary there instead of stderr
  std::vector<char*> command;  // null-terminated; empty: attach
  bool launch() const { return command.size() > 1; }
};

// Returns false when main should exit with *code: --help, --print_marks, or
// an error (one line on stderr, code 2).
bool parse_options(int argc, char** argv, Options* o, int* code);

// <out> without its .csv, the stem of the other files (.intervals.csv, .gaps.csv).
std::string out_stem(const std::string& out);

}  // namespace threadburn::monitor
