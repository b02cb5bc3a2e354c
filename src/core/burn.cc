#include "core/burn.h"

#include <cmath>

#include "core/clock.h"

namespace threadburn {

int64_t BurnSample::others_cpu_ns() const {
  int64_t s = 0;
  for (int c = 0; c < kThreadClasses; ++c) {
    if (c != index_of(ThreadClass::kMain) && c != index_of(ThreadClass::kSampler)) s += cpu_ns[c];
  }
  return s;
}

std::vector<BurnPoint> burn_rates(const std::vector<BurnSample>& samples, int64_t origin_ns) {
  std::vector<BurnPoint> out;
  if (samples.size() < 2) return out;
  out.reserve(samples.size() - 1);
  for (size_t i = 1; i < samples.size(); ++i) {
    const BurnSample& a = samples[i - 1];
    const BurnSample& b = samples[i];
    const double dt = static_cast<double>(b.t_ns - a.t_ns);
    if (dt <= 0) continue;
    BurnPoint p;
    p.t_ms = ns_to_ms(b.t_ns - origin_ns);
    for (int c = 0; c < kThreadClasses; ++c) p.cores[c] = static_cast<double>(b.cpu_ns[c] - a.cpu_ns[c]) / dt;
    p.others_cores = static_cast<double>(b.others_cpu_ns() - a.others_cpu_ns()) / dt;
    p.main_cores = p.cores[index_of(ThreadClass::kMain)];
    out.push_back(p);
  }
  return out;
}

double tail_ms(const std::vector<BurnPoint>& points, double threshold_cores, double smooth_ms) {
  double tail = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const BurnPoint& p = points[i];
    if (p.t_ms <= 0 || p.others_cores <= threshold_cores) continue;
    if (smooth_ms > 0) {
      // Duration-weighted mean rate of the intervals ending within +-smooth/2.
      double cpu = 0, span = 0;
      for (size_t j = 1; j < points.size(); ++j) {
        if (std::fabs(points[j].t_ms - p.t_ms) > smooth_ms / 2) continue;
        const double dt = points[j].t_ms - points[j - 1].t_ms;
        cpu += points[j].others_cores * dt;
        span += dt;
      }
      if (span > 0 && cpu / span <= threshold_cores) continue;
    }
    tail = p.t_ms;
  }
  return tail;
}

}  // namespace threadburn
