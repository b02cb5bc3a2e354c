#include "monitor/sched_model.h"

#include <algorithm>

namespace threadburn::monitor {

const char* holder_name(Holder h) {
  switch (h) {
    case Holder::kSameProcess: return "same_process";
    case Holder::kTree: return "tree";
    case Holder::kOther: return "other";
    case Holder::kIdle: return "idle";
    case Holder::kMonitor: return "monitor";
    case Holder::kUnknown: break;
  }
  return "unknown";
}

SchedModel::SchedModel(pid_t root, pid_t self, int64_t start_ns, Sink* sink)
    : self_(self), start_ns_(start_ns), sink_(sink) {
  tree_.insert(root);
}

SchedModel::Task& SchedModel::task(pid_t tid) { return tasks_[tid]; }

SchedModel::Cpu& SchedModel::cpu(int c) {
  if (static_cast<size_t>(c) >= cpus_.size()) cpus_.resize(static_cast<size_t>(c) + 1);
  return cpus_[static_cast<size_t>(c)];
}

bool SchedModel::seen(pid_t tid) const {
  const auto it = tasks_.find(tid);
  return it != tasks_.end() && it->second.state != State::kUnseen;
}

void SchedModel::seed_thread(pid_t tid, pid_t pid, const std::string& name, int64_t at_ns) {
  Task& t = task(tid);
  t.pid = pid;
  t.name = name;
  t.seeded_ns = at_ns;
  announce(tid, t, start_ns_, ThreadChange::kKnown);
}

void SchedModel::announce(pid_t tid, Task& t, int64_t at, ThreadChange change) {
  if (!in_tree(t.pid)) return;
  if (change == ThreadChange::kKnown || change == ThreadChange::kBorn) {
    if (t.announced) return;
    t.announced = true;
  } else if (!t.announced) {
    return;
  }
  sink_->thread(tid, t.pid, t.name, at, change);
}

void SchedModel::learn(pid_t tid, pid_t pid) {
  if (tid <= 0 || pid <= 0) return;
  Task& t = task(tid);
  if (t.pid == pid) return;
  t.pid = pid;
  if (t.name.empty() && name_lookup_) t.name = name_lookup_(tid);
  // Known from before the start: its first record names its process.
  announce(tid, t, start_ns_, ThreadChange::kKnown);
  release_parked(tid);
}

void SchedModel::name(pid_t tid, const char* comm, int64_t t) {
  if (tid <= 0 || comm[0] == '\0') return;
  Task& k = task(tid);
  if (k.name == comm) return;
  const bool renamed = !k.name.empty();
  k.name = comm;
  if (renamed) announce(tid, k, t, ThreadChange::kRenamed);
}

void SchedModel::dequeue(pid_t tid, Task& t) {
  if (t.cpu < 0) return;
  auto& q = cpu(t.cpu).queue;
  q.erase(std::remove(q.begin(), q.end(), tid), q.end());
}

void SchedModel::charge(pid_t w, int c, int64_t t, pid_t holder, int64_t holder_since) {
  Task& W = task(w);
  piece(w, c, std::max(W.seg, holder_since), t, holder);
  W.seg = std::max(W.seg, t);
}

void SchedModel::piece(pid_t w, int c, int64_t from, int64_t to, pid_t holder) {
  if (to <= from) return;
  const Task& W = task(w);
  WaitPiece p;
  p.tid = w;
  p.pid = W.pid;
  p.name = W.name;
  p.cpu = c;
  p.start_ns = from;
  p.end_ns = to;
  p.holder_tid = holder;
  p.holder_pid = holder;  // 0: idle, -1: unknown
  if (holder > 0) {
    const Task& H = task(holder);
    p.holder_pid = H.pid;
    p.holder_name = H.name;
  }
  emit(std::move(p));
}

void SchedModel::emit(WaitPiece p) {
  if (p.pid < 0) {
    parked_[p.tid].push_back(std::move(p));
    return;
  }
  if (p.holder_tid > 0 && p.holder_pid < 0) {
    parked_[p.holder_tid].push_back(std::move(p));
    return;
  }
  const bool waiter_in = in_tree(p.pid), holder_in = p.holder_tid > 0 && in_tree(p.holder_pid);
  if (!waiter_in && !holder_in) return;
  if (p.holder_tid == 0) {
    p.holder = Holder::kIdle;
  } else if (p.holder_tid < 0) {
    p.holder = Holder::kUnknown;
  } else if (p.holder_pid == self_) {
    p.holder = Holder::kMonitor;
  } else if (p.holder_pid == p.pid) {
    p.holder = Holder::kSameProcess;
  } else {
    p.holder = holder_in ? Holder::kTree : Holder::kOther;
  }
  p.caused = !waiter_in;
  sink_->wait(p);
}

void SchedModel::release_parked(pid_t tid) {
  const auto it = parked_.find(tid);
  if (it == parked_.end()) return;
  std::vector<WaitPiece> pieces = std::move(it->second);
  parked_.erase(it);
  for (WaitPiece& p : pieces) {
    p.pid = task(p.tid).pid;
    if (p.holder_tid > 0) p.holder_pid = task(p.holder_tid).pid;
    emit(std::move(p));
  }
}

void SchedModel::add(const SchedEvent& e) {
  switch (e.kind) {
    case SchedKind::kSwitchOut:
      on_out(e);
      break;
    case SchedKind::kSwitchIn:
      on_in(e);
      break;
    case SchedKind::kWakeup:
    case SchedKind::kWakeupNew:
      on_wakeup(e);
      break;
    case SchedKind::kMigrate:
      on_migrate(e);
      break;
    case SchedKind::kFork: {
      learn(e.a, e.b);
      const auto known = tasks_.find(e.tid);
      if (known != tasks_.end() && known->second.seeded_ns > e.t_ns && known->second.pid == e.pid) {
        break;  // read from /proc after this fork: it is that thread
      }
      const std::string parent = task(e.a).name;
      tasks_.erase(e.tid);  // a reused tid is a new thread
      // A new process (its tid is its pid) of a process of the tree joins it.
      if (e.pid == e.tid && in_tree(e.b)) tree_.insert(e.pid);
      Task& c = task(e.tid);
      c.pid = e.pid;
      c.name = parent;          // a child starts with its parent's name
      c.state = State::kAsleep;  // until sched_wakeup_new puts it in a queue
      announce(e.tid, c, e.t_ns, ThreadChange::kBorn);
      break;
    }
    case SchedKind::kExit:
      learn(e.tid, e.pid);
      task(e.tid).exiting = true;
      break;
    case SchedKind::kComm:
      learn(e.tid, e.pid);
      name(e.tid, e.comm, e.t_ns);
      break;
  }
}

void SchedModel::assume_running(pid_t tid, int c) {
  if (c < 0 || seen(tid)) return;
  Cpu& C = cpu(c);
  if (C.occupant != -1) return;
  C.occupant = tid;
  C.since = start_ns_;
  Task& t = task(tid);
  t.state = State::kRunning;
  t.cpu = c;
  t.since = start_ns_;
}

void SchedModel::leave(pid_t p, int c, int64_t from, int64_t t, bool runnable) {
  Cpu& C = cpu(c);
  for (pid_t w : C.queue) {
    if (w != p) charge(w, c, t, p, from);
  }
  if (p <= 0) return;
  Task& P = task(p);
  if (P.state == State::kRunnable) {
    ++inconsistent_;  // believed waiting, yet it ran
    dequeue(p, P);
  }
  if (in_tree(P.pid) && t > from) sink_->run({p, P.pid, c, from, t});
  if (P.exiting && !runnable) {
    announce(p, P, t, ThreadChange::kGone);
    tasks_.erase(p);
  } else if (runnable) {
    P.state = State::kRunnable;
    P.cpu = c;
    P.since = P.seg = t;
    C.queue.push_back(p);
  } else {
    P.state = State::kAsleep;
    P.since = t;
    P.slept = true;
  }
}

void SchedModel::enter(pid_t n, int c, int64_t t, bool from_idle) {
  Cpu& C = cpu(c);
  C.occupant = n;
  C.since = t;
  if (n <= 0) return;
  Task& N = task(n);
  if (N.pid < 0 && lookup_) learn(n, lookup_(n));
  switch (N.state) {
    case State::kRunnable:
      if (N.cpu != c && N.cpu >= 0) {  // queued elsewhere, its move not seen: the rest is that CPU's
        const Cpu& Q = cpu(N.cpu);
        charge(n, N.cpu, t, Q.occupant, Q.occupant == -1 ? start_ns_ : Q.since);
      }
      dequeue(n, N);
      break;
    case State::kUnseen:
      // Runnable since before the start, behind a task (who held the CPU
      // before the first record is not known); from the idle task: asleep
      // until a wakeup the idle task's context did not report.
      if (!from_idle) piece(n, c, start_ns_, t, -1);
      break;
    case State::kRunning:
      ++inconsistent_;  // its switch-out elsewhere was lost
      if (N.cpu >= 0 && N.cpu != c && cpu(N.cpu).occupant == n) cpu(N.cpu).occupant = -1;
      break;
    case State::kAsleep:
      // A wakeup handled on an idle CPU is not always reported: the sleep
      // ends at the switch-in, the wake-up's latency in it.
      if (N.slept) {
        // Woken in the idle task's context (a timer on an idle CPU) onto
        // another CPU: the wait before this switch-in, if any, is not seen.
        if (!from_idle) ++unreported_;
        if (in_tree(N.pid)) sink_->sleep({n, N.pid, N.since, t});
      }
      break;
  }
  N.state = State::kRunning;
  N.cpu = c;
  N.since = t;
  N.slept = false;
}

void SchedModel::on_out(const SchedEvent& e) {
  const int c = e.cpu;
  const int64_t t = e.t_ns;
  Cpu& C = cpu(c);
  // A thread's last switch-out, after its exit, names no thread (-1): it is
  // the CPU's occupant.
  const bool dead = e.tid < 0;
  const pid_t p = dead ? C.occupant : e.tid, n = e.a;
  if (!dead) learn(p, e.pid);
  learn(n, e.b);
  // Its interval: since its switch-in here, or since the start when this is
  // the first record of this CPU.
  int64_t from = C.occupant == -1 ? start_ns_ : C.since;
  if (C.occupant != -1 && C.occupant != p) {
    ++inconsistent_;  // a record of this CPU was lost
    const Task& P = task(p);
    from = P.state == State::kRunning && P.cpu == c ? P.since : t;
    if (C.occupant > 0 && tasks_.count(C.occupant)) task(C.occupant).state = State::kUnseen;
  }
  leave(p, c, from, t, e.runnable && !dead);
  enter(n, c, t, false);
}

void SchedModel::on_in(const SchedEvent& e) {
  const int c = e.cpu;
  const int64_t t = e.t_ns;
  const pid_t n = e.tid;
  learn(n, e.pid);
  Cpu& C = cpu(c);
  if (C.occupant == n) return;  // its switch-out record came first: done
  // The outgoing task's record is missing: the idle task's and those of a
  // few others are not reported on every kernel; or this is the first record
  // of this CPU.
  const pid_t p = e.a < 0 ? C.occupant : e.a;  // -1: a thread that exited
  learn(p, e.b);
  pid_t holder = C.occupant;
  int64_t since = C.since;
  if (holder == -1) {
    holder = p;
    since = start_ns_;
  } else if (holder != p) {
    ++unreported_;  // the occupant left for p, which left for n: neither reported it
  }
  leave(holder, c, since, t, false);
  enter(n, c, t, holder == 0);
}

void SchedModel::on_wakeup(const SchedEvent& e) {
  const pid_t w = e.a;
  if (w <= 0) return;
  Task& W = task(w);
  name(w, e.comm, e.t_ns);
  if (W.name.empty() && name_lookup_) W.name = name_lookup_(w);
  if (W.state == State::kRunning || W.state == State::kRunnable) return;
  if (W.state == State::kUnseen) {
    for (const Cpu& C : cpus_) {
      if (C.occupant == w) return;  // on a CPU: a wakeup of a running thread changes nothing
    }
  }
  if (W.state == State::kAsleep && W.slept && in_tree(W.pid)) sink_->sleep({w, W.pid, W.since, e.t_ns});
  W.state = State::kRunnable;
  W.cpu = e.b;
  W.since = W.seg = e.t_ns;
  W.slept = false;
  cpu(e.b).queue.push_back(w);
}

void SchedModel::on_migrate(const SchedEvent& e) {
  Task& W = task(e.a);
  if (W.state == State::kRunnable && W.cpu >= 0 && W.cpu != e.b) {
    const Cpu& Q = cpu(W.cpu);
    charge(e.a, W.cpu, e.t_ns, Q.occupant, Q.occupant == -1 ? start_ns_ : Q.since);
    dequeue(e.a, W);
    W.cpu = e.b;
    cpu(e.b).queue.push_back(e.a);
  } else if (W.state != State::kRunning) {
    W.cpu = e.b;
  }
}

std::vector<RunInterval> SchedModel::running(int64_t now_ns) const {
  std::vector<RunInterval> out;
  for (size_t c = 0; c < cpus_.size(); ++c) {
    const Cpu& C = cpus_[c];
    if (C.occupant <= 0) continue;
    const auto it = tasks_.find(C.occupant);
    if (it == tasks_.end() || !in_tree(it->second.pid) || now_ns <= C.since) continue;
    out.push_back({C.occupant, it->second.pid, static_cast<int>(c), C.since, now_ns});
  }
  return out;
}

void SchedModel::finish(int64_t end_ns) {
  // Processes the events never named: ask once more, then give up on them.
  if (lookup_) {
    std::vector<pid_t> unknown;
    for (const auto& [tid, pieces] : parked_) unknown.push_back(tid);
    for (size_t c = 0; c < cpus_.size(); ++c) {
      if (cpus_[c].occupant > 0 && task(cpus_[c].occupant).pid < 0) unknown.push_back(cpus_[c].occupant);
    }
    for (pid_t tid : unknown) learn(tid, lookup_(tid));
  }
  for (size_t c = 0; c < cpus_.size(); ++c) {
    Cpu& C = cpus_[c];
    const std::vector<pid_t> queue = C.queue;
    for (pid_t w : queue) charge(w, static_cast<int>(c), end_ns, C.occupant, C.occupant == -1 ? start_ns_ : C.since);
    if (C.occupant > 0) {
      const Task& O = task(C.occupant);
      if (in_tree(O.pid) && end_ns > C.since) sink_->run({C.occupant, O.pid, static_cast<int>(c), C.since, end_ns});
    }
  }
  for (const auto& [tid, t] : tasks_) {
    if (t.state == State::kAsleep && t.slept && in_tree(t.pid) && end_ns > t.since) {
      sink_->sleep({tid, t.pid, t.since, end_ns});
    }
  }
  for (const auto& [tid, pieces] : parked_) unresolved_ += static_cast<int64_t>(pieces.size());
  parked_.clear();
}

}  // namespace threadburn::monitor
