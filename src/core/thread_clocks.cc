#include "core/thread_clocks.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/clock.h"
#include "core/procfs.h"

namespace threadburn {
namespace {

bool counts_as_other(int c) {
  return c != index_of(ThreadClass::kMain) && c != index_of(ThreadClass::kSampler);
}

}  // namespace

int64_t ClassTotals::others_cpu_ns() const {
  int64_t s = 0;
  for (int c = 0; c < kThreadClasses; ++c) s += counts_as_other(c) ? cpu_ns[c] : 0;
  return s;
}

int64_t ClassTotals::others_wait_ns() const {
  int64_t s = 0;
  for (int c = 0; c < kThreadClasses; ++c) s += counts_as_other(c) ? wait_ns[c] : 0;
  return s;
}

int64_t ClassTotals::all_but_sampler_cpu_ns() const {
  return others_cpu_ns() + cpu_ns[index_of(ThreadClass::kMain)];
}

int64_t ClassTotals::all_but_sampler_wait_ns() const {
  return others_wait_ns() + wait_ns[index_of(ThreadClass::kMain)];
}

clockid_t thread_cpu_clock_id(pid_t tid) {
  // CPUCLOCK_PERTHREAD_MASK (4) | CPUCLOCK_SCHED (2), tid inverted in the high bits.
  return static_cast<clockid_t>((~static_cast<unsigned>(tid)) << 3) | 6;
}

ThreadClocks::~ThreadClocks() {
  for (Entry& e : entries_) {
    if (e.fd >= 0) ::close(e.fd);
  }
}

void ThreadClocks::list_tasks() {
  DIR* dir = ::opendir("/proc/self/task");
  if (!dir) return;
  while (dirent* d = ::readdir(dir)) {
    if (d->d_name[0] < '0' || d->d_name[0] > '9') continue;
    const pid_t tid = static_cast<pid_t>(std::atoi(d->d_name));
    const bool known = std::any_of(entries_.begin(), entries_.end(),
                                   [&](const Entry& e) { return e.alive && e.tid == tid; });
    if (!known) entries_.push_back({tid, thread_cpu_clock_id(tid), thread_class(tid), -1, -1, -1, true});
  }
  ::closedir(dir);
}

void ThreadClocks::resolve_classes() {
  const uint64_t g = thread_class_generation();
  if (g == generation_) return;
  generation_ = g;
  for (Entry& e : entries_) {
    if (e.alive) e.cls = thread_class(e.tid);
  }
}

void ThreadClocks::retire(Entry* e, bool forget) {
  e->alive = false;
  if (e->fd >= 0) ::close(e->fd);
  e->fd = -1;
  // The tid is free again: a new thread reusing it must start unmarked. (When
  // the tid was already reused, the mark may be the new thread's: kept.)
  if (forget) forget_thread(e->tid);
}

bool ThreadClocks::read_schedstat(Entry* e, int64_t* runtime_ns, int64_t* wait_ns) {
  if (e->fd < 0) {
    const std::string path = "/proc/self/task/" + std::to_string(e->tid) + "/schedstat";
    e->fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (e->fd < 0) return false;
  }
  char buf[128];
  const ssize_t n = ::pread(e->fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return false;
  buf[n] = '\0';
  const auto fields = parse_schedstat(buf);
  if (!fields) return false;
  *runtime_ns = fields->cpu_ns;
  *wait_ns = fields->run_delay_ns;
  return true;
}

void ThreadClocks::read_wait(Entry* e) {
  int64_t runtime = 0, wait = 0;
  if (!read_schedstat(e, &runtime, &wait)) return;
  e->runtime_ns = runtime;
  e->runtime_pass = pass_;
  if (e->wait_ns >= 0 && wait >= e->wait_ns) totals_.wait_ns[index_of(e->cls)] += wait - e->wait_ns;
  // The first read of a thread counts its whole wait so far, like its CPU.
  if (e->wait_ns < 0) totals_.wait_ns[index_of(e->cls)] += wait;
  e->wait_ns = wait;
}

void ThreadClocks::relist() {
  list_tasks();
  relisted_ = true;
}

void ThreadClocks::read_live(size_t from, bool with_wait, std::vector<size_t>* died, int64_t* died_last) {
  std::vector<Entry> reborn;  // new threads behind reused tids
  for (size_t i = from; i < entries_.size(); ++i) {
    Entry& e = entries_[i];
    if (!e.alive) continue;
    int64_t now = 0;
    const bool ok = read_clock_ns(e.clock, &now);
    if (ok && (e.last_ns < 0 || now >= e.last_ns)) {
      totals_.cpu_ns[index_of(e.cls)] += now - std::max<int64_t>(e.last_ns, 0);
      e.last_ns = now;
      if (with_wait) read_wait(&e);
      continue;
    }
    // Gone, or (clock went backwards) a new thread behind a reused tid.
    *died_last += std::max<int64_t>(e.last_ns, 0);
    died->push_back(i);
    retire(&e, /*forget=*/!ok);
    if (ok) {
      reborn.push_back({e.tid, e.clock, thread_class(e.tid), now, -1, -1, true});
      totals_.cpu_ns[index_of(reborn.back().cls)] += now;
    }
  }
  entries_.insert(entries_.end(), reborn.begin(), reborn.end());
}

bool ThreadClocks::unowned_ns(int64_t* out) {
  const int64_t process = process_cpu_ns();
  int64_t live = 0;
  for (Entry& e : entries_) {
    if (!e.alive) continue;
    int64_t runtime = e.runtime_ns, wait = 0;
    // A thread that exits during this pass: its time is in neither sum
    // consistently, so this pass cannot be a baseline. (A wait read of this
    // pass has read its schedstat already: not read twice.)
    if (e.runtime_pass != pass_ && !read_schedstat(&e, &runtime, &wait)) return false;
    live += runtime;
  }
  *out = process - live;
  return true;
}

ClassTotals ThreadClocks::read(bool with_wait) {
  ++pass_;
  resolve_classes();
  std::vector<size_t> died;
  int64_t died_last = 0;
  read_live(0, with_wait, &died, &died_last);
  if (!died.empty() && !relisted_) {
    // Threads born since the last relist are in the process clock but in no
    // entry yet: list them now, so their CPU is theirs, not the exited one's.
    const size_t known = entries_.size();
    list_tasks();
    read_live(known, with_wait, &died, &died_last);
  }
  if (!died.empty() || relisted_ || !have_unowned_) {
    int64_t unowned = 0;
    if (unowned_ns(&unowned)) {
      const int64_t unread = unowned - unowned_ - died_last;
      if (!died.empty() && have_unowned_ && unread > 0) {
        Entry& first = entries_[died.front()];
        first.last_ns += unread;
        totals_.cpu_ns[index_of(first.cls)] += unread;
      }
      unowned_ = unowned;
      have_unowned_ = true;
    } else if (!died.empty()) {
      have_unowned_ = false;  // the exited threads' tails are lost; the next pass starts afresh
    }
  }
  relisted_ = false;
  totals_.threads = static_cast<int>(std::count_if(entries_.begin(), entries_.end(),
                                                   [](const Entry& e) { return e.alive; }));
  return totals_;
}

std::vector<ThreadCpu> ThreadClocks::threads() const {
  std::vector<ThreadCpu> out;
  out.reserve(entries_.size());
  for (const Entry& e : entries_) out.push_back({e.tid, e.cls, std::max<int64_t>(e.last_ns, 0), e.alive});
  return out;
}

}  // namespace threadburn
