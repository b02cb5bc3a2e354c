#include "core/clock.h"

#include <cerrno>
#include <ctime>
#include <stdexcept>
#include <string>

namespace threadburn {
namespace {

int64_t read_clock(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

}  // namespace

int64_t wall_ns() { return read_clock(CLOCK_MONOTONIC); }
int64_t process_cpu_ns() { return read_clock(CLOCK_PROCESS_CPUTIME_ID); }
int64_t thread_cpu_ns() { return read_clock(CLOCK_THREAD_CPUTIME_ID); }

ThreadCpuClock::ThreadCpuClock(pthread_t thread) {
  valid_ = pthread_getcpuclockid(thread, &clock_) == 0;
}

int64_t ThreadCpuClock::now_ns() const { return valid_ ? read_clock(clock_) : 0; }

void sleep_until_ns(int64_t deadline_ns) {
  timespec ts{};
  ts.tv_sec = deadline_ns / 1000000000LL;
  ts.tv_nsec = deadline_ns % 1000000000LL;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void spin_for_ns(int64_t ns) {
  const int64_t end = wall_ns() + ns;
  while (wall_ns() < end) {
  }
}

void spin_cpu_ns(int64_t ns) {
  const int64_t end = thread_cpu_ns() + ns;
  while (thread_cpu_ns() < end) {
  }
}

}  // namespace threadburn
