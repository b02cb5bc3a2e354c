// The rules by which the suite's outputs are read, in one place, and printed
// by every program's --describe and the probe's describe.json ("rules"), so
// that the Python side reads them instead of keeping copies.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "core/burn.h"
#include "core/json.h"

namespace threadburn {

// A step-time sample whose coefficient of variation exceeds this is noisy
// (the console marks it '~'; compare flags it). nanobench marks relative
// errors of 5 % or more as unstable.
constexpr double kNoisyCv = 0.05;
// A stretch at least this long without a parallel region (the probe) or with
// the main thread asleep (the monitor's exact mode) is a gap: the time after a
// step in which the burn is measured.
constexpr int64_t kDefaultGapMinNs = 1000000;
// A benchmark not run for a reason that is no failure (no CUDA device, ...)
// reports an error message starting with this.
constexpr const char* kSkippedPrefix = "skipped:";

// "rules": {noise_cv, burn_threshold_cores, tail_smooth_ms, skipped_prefix}
inline void describe_rules(JsonWriter* json) {
  json->key("rules").begin_object()
      .field("noise_cv", kNoisyCv)
      .field("burn_threshold_cores", kTailThresholdCores)
      .field("tail_smooth_ms", kTailSmoothMs)
      .field("skipped_prefix", kSkippedPrefix)
      .end_object();
}

// The same rules as context keys, so that every row a program or the probe
// writes carries the thresholds it is to be read by (compare flags noise by
// the row's noise_cv, not by a copy of its own).
inline std::string rule_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}
inline std::vector<std::pair<std::string, std::string>> rules_context() {
  return {{"noise_cv", rule_text(kNoisyCv)}, {"burn_threshold_cores", rule_text(kTailThresholdCores)}};
}

}  // namespace threadburn
