// Clocks used by every measurement: monotonic wall time and CPU time of the
// process, of the calling thread, and of any other thread of this process.
// All values are nanoseconds as int64_t so differences never overflow or round.
#pragma once

#include <pthread.h>

#include <cstdint>

namespace threadburn {

constexpr double kNsPerMs = 1e6;

// CLOCK_MONOTONIC: unaffected by NTP slews that CLOCK_REALTIME would show.
int64_t wall_ns();
// CLOCK_PROCESS_CPUTIME_ID: CPU time of every thread of the process, in ns.
int64_t process_cpu_ns();
// CLOCK_THREAD_CPUTIME_ID: CPU time of the calling thread, in ns.
int64_t thread_cpu_ns();

// CPU clock of another thread of this process (pthread_getcpuclockid), so a
// sampler can read the measuring thread's CPU without that thread's help.
class ThreadCpuClock {
 public:
  ThreadCpuClock() = default;
  explicit ThreadCpuClock(pthread_t thread);
  int64_t now_ns() const;
  bool valid() const { return valid_; }

 private:
  clockid_t clock_{};
  bool valid_ = false;
};

// Sleeps until an absolute CLOCK_MONOTONIC deadline, restarting on signals.
void sleep_until_ns(int64_t deadline_ns);
inline void sleep_for_ns(int64_t ns) { sleep_until_ns(wall_ns() + ns); }

// Busy-waits on the wall clock.
void spin_for_ns(int64_t ns);
// Busy-waits until the calling thread has used `ns` of CPU: the known-answer
// load for the tests, exact even when other processes preempt the spinner.
void spin_cpu_ns(int64_t ns);

}  // namespace threadburn
