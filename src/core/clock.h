// Clocks used by every measurement: monotonic wall time and CPU time of the
// process and of the calling thread. All values are nanoseconds as int64_t so
// differences never overflow or round.
#pragma once

#include <time.h>

#include <cstdint>

namespace threadburn {

constexpr double kNsPerMs = 1e6;
constexpr int64_t kNsPerMsInt = 1000000;

inline int64_t to_ns(const timespec& ts) {
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}
inline double ns_to_ms(int64_t ns) { return static_cast<double>(ns) / kNsPerMs; }

// Reads any clock; 0 if the clock is gone (e.g. a thread clock of an exited
// thread): callers that must tell "gone" from "0" use read_clock_ns.
int64_t clock_ns(clockid_t id);
// false when clock_gettime fails (the thread behind a thread clock exited).
bool read_clock_ns(clockid_t id, int64_t* ns);

// CLOCK_MONOTONIC: unaffected by NTP slews that CLOCK_REALTIME would show, and
// the same clock in every process of the host (cross-process windows use it).
int64_t wall_ns();
// CLOCK_PROCESS_CPUTIME_ID: CPU time of every thread of the process, in ns.
// Lags by up to a scheduler tick for threads running on other cores (see
// thread_clocks.h); used only where that lag is accounted for.
int64_t process_cpu_ns();
// CLOCK_THREAD_CPUTIME_ID: CPU time of the calling thread, in ns (exact).
int64_t thread_cpu_ns();

// Sleeps until an absolute CLOCK_MONOTONIC deadline, restarting on signals.
void sleep_until_ns(int64_t deadline_ns);
inline void sleep_for_ns(int64_t ns) { sleep_until_ns(wall_ns() + ns); }

// Busy-waits until the calling thread has used `ns` of CPU: the known-answer
// load for the tests, exact even when other processes preempt the spinner.
void spin_cpu_ns(int64_t ns);

}  // namespace threadburn
