// The one timeline format of threadburn (docs/design.md, "Timelines";
// results/README.md, "Timelines and per-thread files"): a long CSV that the
// benchmark programs (the last timed step) and the preload probe (a whole
// command) write, and that
// python/threadburn/lib/timeline.py reads.
//
//   # threadburn timeline 1; origin=step_end[; key=value ...]
//   t_ms,series,cores
//   -12.000,step_start,0
//   0.500,others,1.9876
//
// t_ms: ms from the origin the first line names (step_end, program_start,
// monitor_start); a rate is over the interval that ends at t_ms. cores: CPU
// per wall time (1 = one core busy). Series: see kSeries* below; a mark
// (step_start, step_end) is one row whose t_ms is the instant, cores 0.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/burn.h"
#include "core/sampler.h"

namespace threadburn {

inline constexpr int kTimelineVersion = 1;
inline constexpr const char* kTimelineColumns = "t_ms,series,cores";

// Series names.
inline constexpr const char* kSeriesOthers = "others";      // every thread but main and the sampler
inline constexpr const char* kSeriesMain = "main";          // the thread that runs the steps / main()
inline constexpr const char* kSeriesProcess = "process";    // the whole process (monitor)
inline constexpr const char* kSeriesChildren = "children";  // forked worker processes (probe)
inline constexpr const char* kSeriesInRegion = "in_region"; // share of the interval an OpenMP region ran (probe)
inline constexpr const char* kSeriesStepStart = "step_start";  // mark
inline constexpr const char* kSeriesStepEnd = "step_end";      // mark
// "class:<class>": the threads of one class (thread_class_name).
std::string class_series(std::string_view cls);
// "thread:<tid>:<label>": one thread; label is its class (programs, probe) or its name (monitor).
std::string thread_series(pid_t tid, std::string_view label);

using TimelineMeta = std::vector<std::pair<std::string, std::string>>;

// The first two lines: the comment (version, origin, the burn threshold its
// tails are read by, metadata) and the columns.
std::string timeline_header(std::string_view origin, const TimelineMeta& meta = {},
                            double burn_threshold_cores = kTailThresholdCores);
// One row; t_ms to the us, cores to 1e-4; a series with a comma or quote is quoted.
std::string timeline_row(double t_ms, std::string_view series, double cores);

// A whole timeline built in memory (the programs and the probe write it at exit).
class TimelineWriter {
 public:
  explicit TimelineWriter(std::string_view origin, const TimelineMeta& meta = {})
      : text_(timeline_header(origin, meta)) {}
  void add(double t_ms, std::string_view series, double cores) { text_ += timeline_row(t_ms, series, cores); }
  void mark(double t_ms, std::string_view series) { add(t_ms, series, 0); }
  const std::string& text() const { return text_; }
  // Writes text() to path; false when it cannot.
  bool save(const std::string& path) const;

 private:
  std::string text_;
};

// The per-thread series (thread:<tid>:<class>) of a run of sampler snapshots:
// each live thread's CPU rate over each interval, t_ms from origin_ns. The
// sampler's own thread is left out (it measures, it is not measured), and so
// are intervals in which a thread used no CPU. One rule for the programs
// (--timeline_threads) and the probe.
void add_thread_series(const std::vector<ThreadSnapshot>& snaps, int64_t origin_ns, TimelineWriter* tl);

// One row back (the monitor reads its recording again for the tails):
// false on the comment, the column line or a malformed line.
bool parse_timeline_row(std::string_view line, double* t_ms, std::string* series, double* cores);

}  // namespace threadburn
