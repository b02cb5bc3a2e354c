// The rules by which the suite's outputs are read, in one place, and printed
// by every program's --describe and the probe's describe.json ("rules"), so
// that the Python side reads them instead of keeping copies.
#pragma once

#include "core/burn.h"
#include "core/json.h"

namespace threadburn {

// A step-time sample whose coefficient of variation exceeds this is noisy
// (the console marks it '~'; compare flags it). nanobench marks relative
// errors of 5 % or more as unstable.
constexpr double kNoisyCv = 0.05;
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

}  // namespace threadburn
