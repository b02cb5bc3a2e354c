// Exact CPU time of every thread of this process, summed by class of thread.
//
// Why not CLOCK_PROCESS_CPUTIME_ID: the kernel brings only the *calling*
// thread's runtime up to date when it sums the process clock; a thread that is
// running on another core is accounted at scheduler ticks (4 ms at HZ=250). A
// 1 ms sampler would then see a 1-core spin as 0, 0, 0, 4 cores. Reading each
// thread's own CPU clock (clock_gettime on the thread's CPU clock id) makes the
// kernel update a running thread first, so every read is exact.
//
// Per-class totals are running sums of per-thread deltas: the CPU a thread uses
// between two reads goes to the class it has at the later read, so totals only
// grow and a thread that is marked late (an OpenMP worker marked when it first
// runs a region) does not move its past CPU between classes.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <vector>

#include "core/thread_class.h"

namespace threadburn {

// glibc's pthread_getcpuclockid() encoding, for any tid of this process.
clockid_t thread_cpu_clock_id(pid_t tid);

// Totals at one read: CPU and run-queue wait so far, by class. "Others" are all
// threads but the measuring (main) thread and the sampler: what burns while the
// main thread sleeps.
struct ClassTotals {
  ClassArray cpu_ns{};
  ClassArray wait_ns{};  // filled only by reads with_wait
  int threads = 0;       // threads alive at the read
  int64_t others_cpu_ns() const;
  int64_t others_wait_ns() const;
  int64_t all_but_sampler_cpu_ns() const;
  int64_t all_but_sampler_wait_ns() const;
};

// One thread at the last read (exited threads keep their final value).
struct ThreadCpu {
  pid_t tid = 0;
  ThreadClass cls = ThreadClass::kOther;
  int64_t cpu_ns = 0;
  bool alive = true;
};

class ThreadClocks {
 public:
  ThreadClocks() = default;
  ~ThreadClocks();
  ThreadClocks(const ThreadClocks&) = delete;
  ThreadClocks& operator=(const ThreadClocks&) = delete;

  // Re-lists /proc/self/task (about 2 us): a new thread's whole CPU so far
  // counts at the next read, in the class it has then.
  void relist();
  // Reads every known live thread's CPU clock (~0.1-1 us each). with_wait also
  // reads each thread's run-queue wait, the second field of its schedstat
  // (~0.3 us each through a kept-open file): the time it was runnable but not
  // running. A spinning thread is always one of the two, so CPU + wait is the
  // wall time it spun, however loaded the machine.
  //
  // A thread that exited keeps its last value plus what it used after that
  // read. That tail is recovered from the kernel's accounted runtimes, the
  // same measure on both sides: the process clock sums each thread's
  // accounted runtime (a thread running elsewhere is settled only at ticks),
  // and each thread's schedstat shows its own. Their difference, taken at
  // every relist and at each read that finds an exit, is the CPU of threads
  // no longer alive; its growth since the last such pass, less the exited
  // threads' last values, is their tail. (Process clock minus the live
  // threads' own clocks would not do: those are current to the nanosecond, the
  // process clock lags by up to a tick per thread running elsewhere, and the
  // difference lands on the exited thread.) Threads born and gone between two
  // relists are not seen at all; their CPU joins the next exited thread's tail.
  ClassTotals read(bool with_wait = false);
  // The threads as of the last read.
  std::vector<ThreadCpu> threads() const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    pid_t tid;
    clockid_t clock;
    ThreadClass cls;
    int64_t last_ns;  // CPU at the last read; -1 before the first
    int64_t wait_ns;  // run delay at the last wait read; -1 before the first
    int fd;           // /proc/self/task/<tid>/schedstat, kept open; -1 when not yet
    bool alive;
    int64_t runtime_ns = -1;  // accounted runtime (schedstat) as read by the wait read of pass runtime_pass
    uint64_t runtime_pass = 0;
  };
  void resolve_classes();
  void retire(Entry* e, bool forget);
  void list_tasks();
  // Reads entries [from, end): CPU by class; exited ones retired, their
  // indices and last values collected.
  void read_live(size_t from, bool with_wait, std::vector<size_t>* died, int64_t* died_last);
  // This thread's kernel-accounted runtime and run delay (schedstat).
  bool read_schedstat(Entry* e, int64_t* runtime_ns, int64_t* wait_ns);
  void read_wait(Entry* e);
  // The process clock less every live thread's accounted runtime: the CPU of
  // threads gone (or never listed). False when a thread exited mid-pass.
  bool unowned_ns(int64_t* out);

  std::vector<Entry> entries_;
  ClassTotals totals_;
  int64_t unowned_ = 0;  // unowned_ns() at the last pass that could take it
  bool have_unowned_ = false;
  bool relisted_ = false;  // relist() since the last read
  uint64_t pass_ = 0;      // reads so far: a wait read's schedstat serves unowned_ns in the same pass
  uint64_t generation_ = 0;
};

}  // namespace threadburn
