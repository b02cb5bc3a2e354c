#include "core/sampler.h"

#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>

#include "core/clock.h"

namespace threadburn {

BurnSampler::BurnSampler(Options options)
    : options_(options),
      ring_cap_(std::max<size_t>(options.capacity, 16)),
      thread_cap_(options.per_thread ? std::max<size_t>(options.capacity / 8, 1024) : 0) {
  // Room kept, not touched: the pages are the kernel's until a sample lands
  // in them (the probe's ring is 56 MB; zeroing it cost every probed process
  // ~45 ms of system time at its start).
  ring_.reserve(ring_cap_);
  thread_ring_.reserve(thread_cap_);
  thread_ = std::thread([this] { run(); });
  while (!ready_.load()) std::this_thread::yield();
}

BurnSampler::~BurnSampler() {
  stop_.store(true);
  wake_.fetch_add(1);
  syscall(SYS_futex, &wake_, FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
  if (thread_.joinable()) thread_.join();
}

void BurnSampler::record(const ClassTotals& totals, int64_t t_ns, bool with_threads) {
  BurnSample s;
  s.t_ns = t_ns;
  s.cpu_ns = totals.cpu_ns;
  if (options_.mark) s.mark_ns = options_.mark();
  if (options_.extra) s.extra_ns = options_.extra();
  s.others_wait_ns = totals.others_wait_ns();
  // The rings grow until full (head_ equals their size until then), then wrap.
  if (ring_.size() < ring_cap_) {
    ring_.push_back(s);
  } else {
    ring_[static_cast<size_t>(head_ % static_cast<int64_t>(ring_cap_))] = s;
  }
  ++head_;
  if (options_.on_sample) options_.on_sample(s);
  if (with_threads && thread_cap_ > 0 && t_ns - last_thread_snapshot_ >= options_.per_thread_every_ns) {
    last_thread_snapshot_ = t_ns;
    if (thread_ring_.size() < thread_cap_) thread_ring_.emplace_back();
    ThreadSnapshot& snap = thread_ring_[static_cast<size_t>(thread_head_ % static_cast<int64_t>(thread_cap_))];
    snap.t_ns = t_ns;
    snap.threads = clocks_.threads();
    ++thread_head_;
  }
  taken_.fetch_add(1, std::memory_order_relaxed);
}

ClassTotals BurnSampler::sample_now(bool with_wait, std::vector<ThreadCpu>* threads) {
  std::lock_guard<std::mutex> lock(mu_);
  clocks_.relist();
  last_relist_ = wall_ns();
  const ClassTotals totals = clocks_.read(with_wait || options_.with_wait);
  record(totals, wall_ns(), options_.per_thread);
  if (threads) *threads = clocks_.threads();
  return totals;
}

void BurnSampler::kick() {
  relaxed_.store(false, std::memory_order_relaxed);
  // seq_cst on both sides (here: fast_until_ then idle_sleep_; the sampler:
  // idle_sleep_ then fast_until_): one of the two always sees the other.
  fast_until_.store(wall_ns() + kSamplerLingerNs, std::memory_order_seq_cst);
  if (!idle_sleep_.exchange(false, std::memory_order_seq_cst)) return;  // awake, or fast: it will see fast_until_
  wake_.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &wake_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

void BurnSampler::relax() { relaxed_.store(true, std::memory_order_relaxed); }

void BurnSampler::wake() {
  static_assert(std::atomic<uint32_t>::is_always_lock_free, "wake() must stay async-signal-safe");
  wake_.fetch_add(1, std::memory_order_release);
  syscall(SYS_futex, &wake_, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
}

int64_t BurnSampler::next_deadline(int64_t now, bool* idle) {
  // Keep sampling fast while the last interval burned: the end is still ahead.
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (head_ >= 2) {
      const int64_t cap = static_cast<int64_t>(ring_cap_);
      const BurnSample& b = ring_[static_cast<size_t>((head_ - 1) % cap)];
      const BurnSample& a = ring_[static_cast<size_t>((head_ - 2) % cap)];
      const double dt = static_cast<double>(b.t_ns - a.t_ns);
      if (dt > 0 && static_cast<double>(b.others_cpu_ns() - a.others_cpu_ns()) / dt > kTailThresholdCores &&
          !relaxed_.load(std::memory_order_relaxed)) {
        fast_until_.store(std::max(fast_until_.load(), now + kSamplerLingerNs), std::memory_order_relaxed);
      }
    }
  }
  const bool fast = !relaxed_.load(std::memory_order_relaxed) && now < fast_until_.load(std::memory_order_relaxed);
  *idle = !fast && options_.idle_period_ns > options_.period_ns;
  return now + (fast ? options_.period_ns : options_.idle_period_ns);
}

void BurnSampler::wait_until(int64_t deadline_ns, uint32_t seen) {
  timespec ts{};
  ts.tv_sec = deadline_ns / 1000000000LL;
  ts.tv_nsec = deadline_ns % 1000000000LL;
  // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC deadline; a kick
  // changes the word and wakes it early.
  syscall(SYS_futex, &wake_, FUTEX_WAIT_BITSET_PRIVATE, seen, &ts, nullptr, FUTEX_BITSET_MATCH_ANY);
}

void BurnSampler::run() {
  pthread_setname_np(pthread_self(), "tb-sampler");
  mark_current_thread(ThreadClass::kSampler);
  // 1 ns timer slack: the default 50 us would smear a 1 ms period.
  prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
  pthread_getcpuclockid(pthread_self(), &own_clock_);
  ready_.store(true);
  int64_t last_cpu = clock_ns(own_clock_), last_sample = 0, cycles = 0;
  double cost_ns = 0;  // the sampler's CPU per wake-up and sample, a running average (max_share)
  while (!stop_.load(std::memory_order_relaxed)) {
    const uint32_t seen = wake_.load(std::memory_order_acquire);
    if (options_.on_wake) options_.on_wake();
    const int64_t min_period = min_period_ns_.load(std::memory_order_relaxed);
    if (min_period > 0 && wall_ns() < last_sample + min_period) {
      // Woken early (a kick) while the budget says not yet: sleep on, and let
      // kicks meanwhile cost the program nothing but two atomic operations.
      wait_until(last_sample + min_period, seen);
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      const int64_t now = wall_ns();
      if (now - last_relist_ >= options_.relist_ns || relist_requested_.exchange(false, std::memory_order_relaxed)) {
        clocks_.relist();
        last_relist_ = now;
      }
      const ClassTotals totals = clocks_.read(options_.with_wait);
      last_sample = wall_ns();
      record(totals, last_sample, options_.per_thread);
    }
    if (options_.max_share > 0) {
      const int64_t cpu = clock_ns(own_clock_);
      const double cost = static_cast<double>(cpu - last_cpu);
      last_cpu = cpu;
      // The first samples pay for the thread's start and the first listing
      // of threads: not what the next ones will cost.
      if (++cycles > 2) {
        cost_ns = cost_ns == 0 ? cost : 0.9 * cost_ns + 0.1 * cost;
        // Never slower than the idle period: the timeline keeps its resolution.
        const double bound = std::min(cost_ns / options_.max_share, static_cast<double>(options_.idle_period_ns));
        min_period_ns_.store(static_cast<int64_t>(bound), std::memory_order_relaxed);
      }
    }
    bool idle = false;
    int64_t deadline = next_deadline(wall_ns(), &idle);
    deadline = std::max(deadline, last_sample + min_period_ns_.load(std::memory_order_relaxed));
    if (idle) {
      // Announce the long sleep before checking for a kick that came meanwhile.
      idle_sleep_.store(true, std::memory_order_seq_cst);
      if (!relaxed_.load() && wall_ns() < fast_until_.load()) {
        idle_sleep_.store(false);
        continue;
      }
    }
    wait_until(deadline, seen);
    idle_sleep_.store(false, std::memory_order_relaxed);
  }
}

std::vector<BurnSample> BurnSampler::window(int64_t from_ns, int64_t to_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  const int64_t cap = static_cast<int64_t>(ring_cap_);
  int64_t first = head_;
  for (int64_t i = head_ - 1; i >= std::max<int64_t>(0, head_ - cap); --i) {
    if (ring_[static_cast<size_t>(i % cap)].t_ns < from_ns) break;
    first = i;
  }
  std::vector<BurnSample> out;
  for (int64_t i = first; i < head_; ++i) {
    const BurnSample& s = ring_[static_cast<size_t>(i % cap)];
    if (s.t_ns > to_ns) break;
    out.push_back(s);
  }
  return out;
}

std::vector<ThreadSnapshot> BurnSampler::thread_window(int64_t from_ns, int64_t to_ns) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<ThreadSnapshot> out;
  if (thread_ring_.empty()) return out;
  const int64_t cap = static_cast<int64_t>(thread_cap_);
  for (int64_t i = std::max<int64_t>(0, thread_head_ - cap); i < thread_head_; ++i) {
    const ThreadSnapshot& s = thread_ring_[static_cast<size_t>(i % cap)];
    if (s.t_ns >= from_ns && s.t_ns <= to_ns) out.push_back(s);
  }
  return out;
}

int64_t BurnSampler::own_cpu_ns() const { return clock_ns(own_clock_); }

}  // namespace threadburn
