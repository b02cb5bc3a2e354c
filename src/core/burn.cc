#include "core/burn.h"

#include <sys/prctl.h>

#include <algorithm>
#include <cmath>
#include <ctime>

#include "core/clock.h"
#include "core/thread_clocks.h"

namespace threadburn {

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
    p.t_ms = static_cast<double>(b.t_ns - origin_ns) / kNsPerMs;
    p.others_cores = static_cast<double>(b.others_cpu_ns - a.others_cpu_ns) / dt;
    p.main_cores = static_cast<double>(b.main_cpu_ns - a.main_cpu_ns) / dt;
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
      for (size_t j = 0; j < points.size(); ++j) {
        if (j == 0 || std::fabs(points[j].t_ms - p.t_ms) > smooth_ms / 2) continue;
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

BurnSampler::BurnSampler(Options options)
    : options_(options), measured_(pthread_self()), measured_tid_(current_tid()), ring_(options.capacity) {
  if (options_.per_thread) thread_ring_.resize(std::max<size_t>(options.capacity / 16, 1024));
  thread_ = std::thread([this] { run(); });
  while (!clock_ready_.load()) std::this_thread::yield();
  wait_for_sample_after(wall_ns());
}

BurnSampler::~BurnSampler() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
}

void BurnSampler::run() {
  pthread_setname_np(pthread_self(), "tb-sampler");
  // 1 ns timer slack: the default 50 us would smear a 0.5 ms period.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  pthread_getcpuclockid(pthread_self(), &sampler_clock_);
  sampler_tid_.store(current_tid());
  clock_ready_.store(true);
  const ThreadCpuClock main_clock(measured_);
  const std::vector<pid_t> exclude = {measured_tid_, sampler_tid_.load()};
  ThreadClocks clocks;
  int64_t next = wall_ns();
  int64_t n = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    if (n % options_.refresh_every == 0) clocks.refresh();
    BurnSample s;
    s.sampler_cpu_ns = thread_cpu_ns();
    s.main_cpu_ns = main_clock.now_ns();
    s.others_cpu_ns = clocks.sum_ns(exclude);
    s.t_ns = wall_ns();
    ring_[static_cast<size_t>(n % static_cast<int64_t>(ring_.size()))] = s;
    head_.store(++n, std::memory_order_release);
    if (options_.per_thread && n % options_.per_thread_every == 0) {
      const int64_t k = thread_head_.load(std::memory_order_relaxed);
      ThreadSnapshot& snap = thread_ring_[static_cast<size_t>(k % static_cast<int64_t>(thread_ring_.size()))];
      snap.t_ns = wall_ns();
      snap.threads = read_threads(0);
      thread_head_.store(k + 1, std::memory_order_release);
    }
    next += options_.period_ns;
    const int64_t now = wall_ns();
    if (next < now) next = now;  // fell behind (descheduled): don't burst to catch up
    sleep_until_ns(next);
  }
}

std::vector<BurnSample> BurnSampler::window(int64_t from_ns, int64_t to_ns) const {
  const int64_t head = head_.load(std::memory_order_acquire);
  const int64_t cap = static_cast<int64_t>(ring_.size());
  const int64_t oldest = std::max<int64_t>(0, head - cap + 1);
  int64_t first = head;
  for (int64_t i = head - 1; i >= oldest; --i) {
    const BurnSample& s = ring_[static_cast<size_t>(i % cap)];
    first = i;
    if (s.t_ns < from_ns) break;
  }
  std::vector<BurnSample> out;
  for (int64_t i = first; i < head; ++i) {
    const BurnSample& s = ring_[static_cast<size_t>(i % cap)];
    if (s.t_ns > to_ns) break;
    out.push_back(s);
  }
  return out;
}

std::vector<ThreadSnapshot> BurnSampler::thread_window(int64_t from_ns, int64_t to_ns) const {
  std::vector<ThreadSnapshot> out;
  if (thread_ring_.empty()) return out;
  const int64_t head = thread_head_.load(std::memory_order_acquire);
  const int64_t cap = static_cast<int64_t>(thread_ring_.size());
  for (int64_t i = std::max<int64_t>(0, head - cap + 1); i < head; ++i) {
    const ThreadSnapshot& s = thread_ring_[static_cast<size_t>(i % cap)];
    if (s.t_ns >= from_ns && s.t_ns <= to_ns) out.push_back(s);
  }
  return out;
}

void BurnSampler::wait_for_sample_after(int64_t t_ns) const {
  const int64_t give_up = wall_ns() + 4 * options_.period_ns + 20000000;
  for (;;) {
    const int64_t head = head_.load(std::memory_order_acquire);
    if (head > 0 && ring_[static_cast<size_t>((head - 1) % static_cast<int64_t>(ring_.size()))].t_ns >= t_ns) return;
    if (wall_ns() > give_up) return;
    sleep_for_ns(options_.period_ns / 4);
  }
}

int64_t BurnSampler::sampler_cpu_ns() const {
  timespec ts{};
  clock_gettime(sampler_clock_, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace threadburn
