#include "core/thread_class.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <unordered_map>

namespace threadburn {
namespace {

constexpr const char* kNames[kThreadClasses] = {"other", "main", "sampler", "omp", "tbb", "loader", "gloo",
                                                  "cuda", "pin", "autograd"};

struct Registry {
  std::mutex mu;
  std::unordered_map<pid_t, ThreadClass> classes;
  std::atomic<uint64_t> generation{1};
};

// Never destroyed: threads may mark themselves while static destructors run.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

thread_local ThreadClass t_marked = ThreadClass::kOther;

}  // namespace

const char* thread_class_name(ThreadClass c) { return kNames[index_of(c)]; }

bool parse_thread_class(const std::string& name, ThreadClass* out) {
  for (int i = 0; i < kThreadClasses; ++i) {
    if (name == kNames[i]) {
      *out = static_cast<ThreadClass>(i);
      return true;
    }
  }
  return false;
}

// Not cached in a thread_local: a forked child's thread would inherit the
// parent's value.
pid_t current_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

void mark_thread(pid_t tid, ThreadClass c) {
  if (c == ThreadClass::kOther) return;
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.classes.emplace(tid, c).second) r.generation.fetch_add(1, std::memory_order_release);
}

void mark_current_thread(ThreadClass c) {
  if (t_marked != ThreadClass::kOther || c == ThreadClass::kOther) return;
  mark_thread(current_tid(), c);
  t_marked = thread_class(current_tid());  // whatever won
}

ThreadClass thread_class(pid_t tid) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.classes.find(tid);
  return it == r.classes.end() ? ThreadClass::kOther : it->second;
}

void forget_thread(pid_t tid) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  if (r.classes.erase(tid) > 0) r.generation.fetch_add(1, std::memory_order_release);
}

uint64_t thread_class_generation() { return registry().generation.load(std::memory_order_acquire); }

}  // namespace threadburn
