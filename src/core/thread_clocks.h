// Precise CPU time of every thread of this process.
//
// Why not CLOCK_PROCESS_CPUTIME_ID: the kernel brings only the *calling*
// thread's runtime up to date when it sums the process clock; a thread that is
// running on another core is accounted at scheduler ticks (4 ms at HZ=250). A
// 0.5 ms sampler then sees a 1-core spin as 0, 0, ..., 8 cores. Reading each
// thread's own CPU clock (clock_gettime on MAKE_THREAD_CPUCLOCK(tid)) makes the
// kernel update a running thread first, so every read is exact.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

namespace threadburn {

// glibc's pthread_getcpuclockid() encoding, for any tid of this process.
clockid_t thread_cpu_clock_id(pid_t tid);

class ThreadClocks {
 public:
  // Re-lists /proc/self/task and reads every clock: a new thread's whole CPU
  // so far counts at discovery. A thread that exited keeps its last value plus
  // what it used after that read, recovered from the process clock (which the
  // kernel settles exactly at exit): the change of (process clock - live
  // thread clocks) since the previous read, minus the dead threads' last
  // values. Threads born and gone between two reads are not seen.
  void refresh();
  // Sum of the CPU of all known threads except those in `exclude`, in ns.
  // Reads every live thread's clock (about 1 us each).
  int64_t sum_ns(const std::vector<pid_t>& exclude = {});
  size_t size() const { return threads_.size(); }

 private:
  struct Entry {
    pid_t tid;
    clockid_t clock;
    int64_t last_ns;
    bool alive;  // false once its clock fails: the tid may be reused by a new thread
  };
  void read_all();

  std::vector<Entry> threads_;
  int64_t residue_ = 0;  // process clock - sum of live thread clocks, at the last read
  bool have_residue_ = false;
};

}  // namespace threadburn
