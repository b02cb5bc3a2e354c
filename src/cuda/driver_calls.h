// The calls a program makes to the CUDA driver that wait for the device, and
// its kernel launches: timed on the thread that makes them, for an unmodified
// program (docs/cuda.md, "Waits on the device").
//
// How a program's calls reach these wrappers: a CUDA runtime (libcudart, and
// with it PyTorch's wheels, cuBLAS, cuDNN) opens libcuda.so.1 with dlopen,
// asks dlsym for cuGetProcAddress_v2 (falling back to dlsym of each entry
// point by name when the driver lacks it: seen with libcudart 13 against the
// stand-in driver) and then gets every entry point through it. The preload
// probe's dlsym (src/probe/dlsym_tap.cc) hands on_lookup() every answer of a
// lookup in a library: cuGetProcAddress itself comes back wrapped, and so do
// the entry points of kTable below, by name; the wrapped cuGetProcAddress
// wraps the table's entry points it returns. Nothing here loads or calls
// the driver on its own account, and no CUDA header is needed: the few
// signatures are the driver's API (cuda.h), every argument an integer or a
// pointer.
//
// What a wrapped call costs the program: two CLOCK_MONOTONIC reads (vDSO,
// ~40 ns here) and, for a wait, two reads of the thread's CPU clock (a system
// call, ~0.3 us here); a launch reads the CPU clock only on every
// kLaunchCpuEvery-th call (bench/overheads.py measures both).
#pragma once

#include <sys/types.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

namespace threadburn::cuda {

// What a wrapped entry point does for the host.
enum class CallKind : int {
  kWait = 0,    // returns when the device has done something: stream, event and context
                // synchronisation, synchronous copies (what .item(), .cpu() and
                // torch.cuda.synchronize() end in), and the calls that wait only
                // sometimes when they blocked (kBlockingNs)
  kLaunch = 1,  // enqueues device work: kernel launches, graph launches
};
constexpr int kCallKinds = 2;

// A launch's CPU clock is read on this share of launches (1 in N per thread,
// its first included); the CPU of the others is estimated from them.
constexpr int kLaunchCpuEvery = 16;

// One kind of call on one thread.
struct CallTally {
  int64_t calls = 0;
  int64_t wall_ns = 0;  // time inside the calls (CLOCK_MONOTONIC)
  int64_t cpu_ns = 0;   // the thread's CPU inside them; launches: wall_ns times the
                        // CPU share of the launches whose CPU clock was read
};

struct ThreadCalls {
  pid_t tid = 0;
  CallTally of[kCallKinds];
  // Of the waits (of[kWait]), the hidden ones: calls that wait only
  // sometimes and blocked (kBlockingNs).
  int64_t hidden_waits = 0;
  int64_t hidden_wait_ns = 0;
  // Of the waits, the polling loops (kPollMin) and their time.
  int64_t poll_loops = 0;
  int64_t poll_wall_ns = 0;
};

// A polling loop: cuEventQuery or cuStreamQuery called again and again on one
// thread until the work is done (a framework's wait that spins; NCCL's
// watchdog asks too, but seldom): kPollMin queries or more, each starting at
// most kPollGapNs after the one before ended (a time slice lost to another
// thread under load stays in the loop) with at most kPollGapCpuNs of the
// thread's CPU between (a loop's own overhead, or a sleep; not work), are
// one wait, counted when the loop ends (a query that finds the work done, or
// the next query after a longer gap or more work), its time from the first
// query's start to the last's end, its CPU the thread's between (the spin).
// Fewer queries, or a loop shorter than kBlockingNs (a burst of queries, as
// PyTorch's caching allocator asks its events' state), are not a wait.
constexpr int64_t kPollMin = 10;
constexpr int64_t kPollGapNs = 50000000;
constexpr int64_t kPollGapCpuNs = 100000;

// The calls that wait only sometimes: cuMemcpyDtoHAsync, cuMemcpyHtoDAsync
// and cuMemcpyAsync (to or from pageable host memory the driver copies
// synchronously: .cpu() or .to('cpu') into ordinary memory blocks inside
// it, and the cuStreamSynchronize after it then returns at once), and
// cuMemFree (it synchronises the device first). Each is timed, and counted
// as a wait (its time and CPU) when it took this long or more: an enqueue
// costs a few microseconds (a launch's cost), a copy that waited for the
// device's work, or copied through a staging buffer, far more; a shorter
// call is not counted at all.
constexpr int64_t kBlockingNs = 50000;

// dlsym's answer `found` for `name` in a library: the wrapper when `name` is
// cuGetProcAddress(_v2) or an entry point of the table (by its name in the
// driver: the base name with _v2, _ptsz or _ptds), else `found` unchanged.
// Null stays null.
void* on_lookup(const char* name, void* found);

// Every thread that made a wrapped call, its tallies so far (a thread's own
// tallies are written by it alone; read while it runs, a figure may lag by
// the call in progress).
std::vector<ThreadCalls> thread_calls();
// The sum over threads of one kind.
CallTally total(const std::vector<ThreadCalls>& threads, CallKind kind);

// The first wrapped call of the process starts its device work: the hook is
// called once, on the thread that makes it, with its CLOCK_MONOTONIC time,
// before the call goes on. Set it before the program can call the driver.
using FirstWorkHook = void (*)(int64_t t_ns);
void set_first_work_hook(FirstWorkHook hook);
// That time (CLOCK_MONOTONIC ns), or 0 before any wrapped call.
int64_t first_work_ns();

// The steady phase begins at the first training step the probe can recognise
// (docs/cuda.md, "Phases"), not at the first device work: dataset
// preparation, model.cuda() and a compile come first. A training step ends
// in a wait for the device (loss.item(), .cpu(), synchronize()), so steps
// are a run of repeated waits:
//  - waits that end within kBurstGapNs (250 us) of the one before, on any
//    thread, are one burst (a step's .cpu() then .item(), tens of us apart;
//    model.cuda()'s small copies);
//  - the first kStepRun bursts in a row whose intervals (from a burst's
//    first wait's end to the next's) differ by at most kStepSpread (the
//    longest over the shortest) are steps (a first step slowed by warm-up,
//    or irregular preparation, is not in such a run);
//  - the steady phase begins as the first wait of the run's first burst
//    returns: that step and everything before it are the startup.
// A program whose waits never form such a run (no waits, steps under
// kBurstGapNs apart, or steps whose waits come at uneven times) keeps the
// first device work as its start. Known limits: a preparation that repeats
// the same device work at an even pace (a dataset normalised in chunks, a
// model of many equal layers whose copies each take over kBurstGapNs) is
// read as steps. The rule is StepRun, a pure function of the waits' end
// times; the probe and libthreadburn_phase.so both follow it through
// set_step_hook.
constexpr int kStepRun = 8;
constexpr int64_t kBurstGapNs = 250000;
constexpr double kStepSpread = 2.0;

class StepRun {
 public:
  struct Seen {
    bool burst = false;      // a new burst began with this wait (it may start the run: take a snapshot now)
    int64_t index = -1;      // that burst's index (0: the first)
    bool confirmed = false;  // this wait completed a run: the steady phase began at burst `first`
    int64_t first = -1;
    int64_t first_ns = 0;    // when that burst's first wait ended
  };
  // A wait ended at end_ns (CLOCK_MONOTONIC); nothing once a run is confirmed.
  Seen add(int64_t end_ns) {
    Seen seen;
    if (done_) return seen;
    if (bursts_ > 0 && end_ns - last_end_ns_ < kBurstGapNs) {  // the same burst (or a wait that ended a moment earlier elsewhere)
      if (end_ns > last_end_ns_) last_end_ns_ = end_ns;
      return seen;
    }
    last_end_ns_ = end_ns;
    const int64_t b = bursts_++;
    at_[b % kStepRun] = end_ns;
    seen.burst = true;
    seen.index = b;
    if (b + 1 < kStepRun) return seen;
    // The last kStepRun bursts: their intervals alike?
    int64_t lo = INT64_MAX, hi = 0;
    for (int64_t k = b - kStepRun + 1; k < b; ++k) {
      const int64_t interval = at_[(k + 1) % kStepRun] - at_[k % kStepRun];
      lo = std::min(lo, interval);
      hi = std::max(hi, interval);
    }
    if (static_cast<double>(hi) > kStepSpread * static_cast<double>(lo)) return seen;
    done_ = true;
    seen.burst = false;  // the run is whole: no snapshot needed for this burst
    seen.confirmed = true;
    seen.first = b - kStepRun + 1;
    seen.first_ns = at_[seen.first % kStepRun];
    return seen;
  }

 private:
  bool done_ = false;
  int64_t bursts_ = 0, last_end_ns_ = 0;
  int64_t at_[kStepRun] = {};  // the last bursts' first ends, by index modulo kStepRun
};

// The waits' run, as the wrappers see it: called on the thread whose wait
// ended, outside any wrapped call, for each new burst before the run is
// confirmed (confirmed false: index the burst, t_ns its first wait's end;
// the client snapshots what the steady phase will be measured from) and once
// when a run is confirmed (confirmed true: index the run's first burst, t_ns
// its time). Set it before the program can call the driver.
using StepHook = void (*)(int64_t index, int64_t t_ns, bool confirmed);
void set_step_hook(StepHook hook);
// The confirmed run's first burst and its time; index -1 before (or without) one.
struct StepStart {
  int64_t index = -1;
  int64_t t_ns = 0;
};
StepStart steady_start();

// The calls of a kind so far, every thread, and when the last one ended
// (CLOCK_MONOTONIC ns; 0: none), both of one instant, the time never going
// back (the progress of threadburn tune --in-run; a wrapped call's end takes
// a short spin lock).
struct Progress {
  int64_t calls = 0;
  int64_t last_end_ns = 0;
};
Progress progress(CallKind kind);

// Called on the waiting thread just before each wait, outside any wait
// (threadburn tune --in-run changes the context's flags there: the next wait
// honours them); null: none.
using BeforeWaitHook = void (*)();
void set_before_wait_hook(BeforeWaitHook hook);

// Entry points handed out wrapped so far, and those left as they were
// because every slot of their name was taken (distinct addresses of one
// name: versions and per-thread-stream variants; a note in the summary).
int wrapped_entry_points();
int unwrapped_entry_points();

}  // namespace threadburn::cuda
