// Classes of threads, decided by how a thread was created or entered, never by
// its name: the measuring thread marks itself "main", the burn sampler
// "sampler"; OpenMP team members are marked when they run a parallel region's
// body (omptap/), TBB workers when they enter an observed arena
// (task_scheduler_observer), our loaders' threads when they start loading,
// gloo's threads when the process group starts them; in the preload probe,
// threads the CUDA driver creates (its pthread_create interposer, by the
// creator's library) and the thread that names itself PyTorch's pin-memory
// thread or, as it enters, an autograd engine's device thread (its
// pthread_setname_np / prctl interposers). Unmarked threads are
// "other" (in the benchmark programs, the CUDA driver's threads land here).
//
// The registry is process-wide; a thread's first mark wins (a thread does not
// change class). Marking is cheap after the first time (a thread_local check),
// so it can sit on hot paths such as a parallel region's entry.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <string>

namespace threadburn {

enum class ThreadClass : uint8_t { kOther = 0, kMain, kSampler, kOmp, kTbb, kLoader, kGloo, kCuda, kPin, kAutograd };
constexpr int kThreadClasses = 10;
using ClassArray = std::array<int64_t, kThreadClasses>;

constexpr int index_of(ThreadClass c) { return static_cast<int>(c); }
// "other", "main", "sampler", "omp", "tbb", "loader", "gloo", "cuda", "pin", "autograd".
const char* thread_class_name(ThreadClass c);
// The inverse; false for an unknown name.
bool parse_thread_class(const std::string& name, ThreadClass* out);

// Marks the calling thread (first mark wins; kOther is ignored).
void mark_current_thread(ThreadClass c);
// Marks another thread by tid (first mark wins).
void mark_thread(pid_t tid, ThreadClass c);
// kOther for a thread never marked.
ThreadClass thread_class(pid_t tid);
// Drops a thread that exited, so a new thread reusing its tid starts unmarked.
void forget_thread(pid_t tid);
// Changes whenever a mark is added or dropped: readers cache classes and
// re-resolve only when it moved.
uint64_t thread_class_generation();

// The calling thread's kernel tid.
pid_t current_tid();

}  // namespace threadburn
