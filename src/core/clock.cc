#include "core/clock.h"

#include <cerrno>

namespace threadburn {

bool read_clock_ns(clockid_t id, int64_t* ns) {
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return false;
  *ns = to_ns(ts);
  return true;
}

int64_t clock_ns(clockid_t id) {
  int64_t ns = 0;
  return read_clock_ns(id, &ns) ? ns : 0;
}

int64_t wall_ns() { return clock_ns(CLOCK_MONOTONIC); }
int64_t process_cpu_ns() { return clock_ns(CLOCK_PROCESS_CPUTIME_ID); }
int64_t thread_cpu_ns() { return clock_ns(CLOCK_THREAD_CPUTIME_ID); }

void sleep_until_ns(int64_t deadline_ns) {
  timespec ts{};
  ts.tv_sec = deadline_ns / 1000000000LL;
  ts.tv_nsec = deadline_ns % 1000000000LL;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

void spin_cpu_ns(int64_t ns) {
  const int64_t end = thread_cpu_ns() + ns;
  while (thread_cpu_ns() < end) {
  }
}

}  // namespace threadburn
