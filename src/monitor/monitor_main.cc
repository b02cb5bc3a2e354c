// threadburn_monitor: per-thread CPU of any process and of the processes it
// starts. Exact mode: the scheduler's events (every interval on a CPU, every
// run-queue wait and who held the CPU); /proc mode where those are not
// allowed: schedstat every --period_us. Attaches to --pid=N, or launches
// `-- CMD ARGS...` itself and returns its exit code. main is parse -> choose
// the mode -> open -> start -> record -> report -> finish; each step lives in
// its own file (options, launch, out_file, *_recorder).
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "core/clock.h"
#include "core/error.h"
#include "core/sched_trace.h"
#include "monitor/exact_recorder.h"
#include "monitor/launch.h"
#include "monitor/options.h"
#include "monitor/out_file.h"
#include "monitor/proc_recorder.h"

namespace tb = threadburn;
namespace mon = threadburn::monitor;

namespace {

constexpr const char* kProg = "threadburn_monitor";

// Waits for a launched CMD (forwarding further signals) and returns its exit code.
int finish_launch(const mon::Options& o, const mon::Recorder& rec) {
  if (!rec.exited()) std::fprintf(stderr, "%s: note: %s; waiting for pid %d\n", kProg, rec.end_note().c_str(), o.pid);
  int status = 0, handled = rec.handled_signals();
  while (::waitpid(o.pid, &status, 0) < 0) {
    if (errno != EINTR) break;
    if (mon::g_signals > handled) {
      handled = mon::g_signals;
      ::kill(o.pid, handled > 1 ? SIGKILL : (mon::g_from_terminal ? 0 : static_cast<int>(mon::g_last_signal)));
    }
  }
  std::fprintf(stderr, "%s: note: '%s' ended (%s)%s; the files are complete\n", kProg, o.command[0],
               mon::status_text(status).c_str(), rec.exited() ? " while recording" : "");
  return mon::exit_code_of(status);
}

// Points fd 2 at path (the summary goes there); returns the saved fd 2, or
// -1 (a note on stderr) when the file cannot be written.
int to_summary_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    std::fprintf(stderr, "%s: warning: --summary_file=%s: %s; the summary follows here\n", kProg, path.c_str(),
                 std::strerror(errno));
    return -1;
  }
  std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  ::close(fd);
  return saved;
}

// The exact mode's tracer, or why not (the /proc mode then; an error with --mode=exact).
std::unique_ptr<tb::SchedTracer> open_tracer(const mon::Options& o, std::string* why_not) {
  std::unique_ptr<tb::SchedTracer> tracer;
  if (o.mode == mon::Mode::kProc) return tracer;
  const tb::Availability a = tb::SchedTracer::open(&tracer);
  if (a.ok) return tracer;
  if (o.mode == mon::Mode::kExact) throw tb::Error("--mode=exact: " + a.why);
  *why_not = a.why;
  std::fprintf(stderr, "%s: note: /proc mode (bins of %lld us): the exact mode is not available here: %s\n", kProg,
               static_cast<long long>(o.period_ns / 1000), a.why.c_str());
  return tracer;
}

}  // namespace

int main(int argc, char** argv) {
  mon::Options o;
  int code = 0;
  if (!mon::parse_options(argc, argv, &o, &code)) return code;
  try {
    // Every refusal before any file exists: --out stays untouched.
    std::string why_not;
    std::unique_ptr<tb::SchedTracer> tracer = open_tracer(o, &why_not);
    const std::string stem = mon::out_stem(o.out);
    mon::OutFile csv(o.out, o.force);
    std::unique_ptr<mon::OutFile> intervals, gaps;
    std::unique_ptr<mon::Launch> launch;
    std::unique_ptr<mon::Recorder> rec;
    try {
      if (tracer) {
        intervals = std::make_unique<mon::OutFile>(stem + ".intervals.csv", o.force);
        gaps = std::make_unique<mon::OutFile>(stem + ".gaps.csv", o.force);
      }
      mon::install_handlers();
      if (o.launch()) {
        launch = std::make_unique<mon::Launch>(o.command.data());
        o.pid = launch->pid();
      }
      // The baseline, before a launched CMD runs.
      if (tracer) {
        rec = std::make_unique<mon::ExactRecorder>(o, &csv, intervals.get(), gaps.get(), std::move(tracer));
      } else {
        rec = std::make_unique<mon::ProcRecorder>(o, &csv, why_not);
      }
      if (!launch && mon::attached_process_ended(o.pid)) {
        throw tb::Error("--pid=" + std::to_string(o.pid) + ": the process has already exited");
      }
    } catch (const tb::Error&) {
      csv.discard();
      if (intervals) intervals->discard();
      if (gaps) gaps->discard();
      throw;
    }
    if (launch) {
      if (const int err = launch->release()) {
        csv.discard();
        rec->discard();
        std::fprintf(stderr, "%s: error: cannot run '%s': %s\n", kProg, o.command[0], std::strerror(err));
        return err == ENOENT ? 127 : 126;  // what a shell returns
      }
    }
    std::string io_error;
    try {
      rec->run();
    } catch (const tb::Error& e) {
      io_error = e.what();
    }
    csv.close();
    // The summary, on stderr or (--summary_file) in a file: fd 2 points there meanwhile.
    const int saved_stderr = o.summary_file.empty() ? -1 : to_summary_file(o.summary_file);
    rec->report();
    const double own_cpu_ms = tb::ns_to_ms(tb::thread_cpu_ns());
    std::fprintf(stderr, "%s: own CPU %.1f ms (%.2f %% of a core)\n", kProg, own_cpu_ms,
                 rec->span_ms() > 0 ? 100 * own_cpu_ms / rec->span_ms() : 0.0);
    int code = 0;
    if (launch) {
      code = finish_launch(o, *rec);
    } else {
      const std::string how =
          rec->exited() ? "process " + std::to_string(o.pid) + " exited while recording" : rec->end_note();
      std::fprintf(stderr, "%s: note: %s; the files are complete\n", kProg, how.c_str());
    }
    if (saved_stderr >= 0) {
      std::fflush(stderr);
      ::dup2(saved_stderr, 2);
      ::close(saved_stderr);
    }
    if (!io_error.empty()) {
      std::fprintf(stderr, "%s: error: %s\n", kProg, io_error.c_str());
      return 1;
    }
    return code;
  } catch (const tb::Error& e) {
    std::fprintf(stderr, "%s: error: %s\n", kProg, e.what());
    return 2;
  }
}
