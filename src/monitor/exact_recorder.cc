#include "monitor/exact_recorder.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "core/clock.h"
#include "core/procfs.h"
#include "monitor/gaps.h"
#include "monitor/intervals_file.h"
#include "monitor/launch.h"

namespace threadburn::monitor {
namespace {

// An event is handed to the model once it is this old: by then every CPU's
// ring holds every earlier event (a record is written microseconds after its
// time; 50 ms also covers a virtual CPU descheduled mid-write).
constexpr int64_t kReadLagNs = 50 * kNsPerMsInt;
// A bin is closed this long after the events are in: a thread whose process
// is learned late (at its first switch-out) still lands in its own bins.
constexpr int64_t kBinLagNs = 200 * kNsPerMsInt;
// Threads of the baseline no record has named yet are looked up in /proc at
// most this often.
constexpr int64_t kUnseenCheckNs = 100 * kNsPerMsInt;

}  // namespace

ExactRecorder::ExactRecorder(const Options& o, OutFile* csv, OutFile* intervals, OutFile* gaps,
                             std::unique_ptr<SchedTracer> tracer)
    : Recorder(o, csv, tracer->start_ns()),
      tracer_(std::move(tracer)),
      intervals_(intervals),
      gaps_(gaps),
      model_(o.pid, ::getpid(), t0_, this),
      binner_(t0_, o.period_ns, unix0_),
      waits_(o.pid) {
  model_.set_lookup(process_of_thread, [](pid_t tid) { return thread_name(tid, tid); });
  intervals_->add(intervals_header(unix0_, t0_, o_.pid, ::getpid()), false);
  seed();
}

void ExactRecorder::seed() {
  // The tree as /proc has it now: the process, its descendants, their threads.
  std::vector<pid_t> todo = {o_.pid};
  std::set<pid_t> done;
  while (!todo.empty()) {
    const pid_t pid = todo.back();
    todo.pop_back();
    if (!done.insert(pid).second) continue;
    model_.seed_process(pid);
    const std::vector<ThreadStat> threads = read_threads(pid);
    const int64_t at = wall_ns();
    for (const ThreadStat& t : threads) {
      model_.seed_thread(t.tid, pid, t.name, at);
      unseen_[t.tid] = {pid, t.cpu_ns};
    }
    for (pid_t child : child_processes(pid)) todo.push_back(child);
  }
}

void ExactRecorder::start() {
  char mono[32];
  std::snprintf(mono, sizeof mono, "%.3f", static_cast<double>(t0_ / 1000) / 1000.0);
  csv_->add(recording_header(unix0_, o_.pid, o_.period_ns / 1000, o_.threshold,
                             {{"t0_mono_ms", mono}, {"source", source_meta(true, "")}}),
            false);
}

void ExactRecorder::run(const RunInterval& r) {
  intervals_->add(run_row(r, names_[r.tid].second, t0_));
  binner_.run(r.tid, r.start_ns, r.end_ns);
}

void ExactRecorder::wait(const WaitPiece& w) {
  intervals_->add(wait_row(w, t0_));
  waits_.add(w);
}

void ExactRecorder::sleep(const SleepInterval& s) { intervals_->add(sleep_row(s, names_[s.tid].second, t0_)); }

void ExactRecorder::thread(pid_t tid, pid_t pid, const std::string& name, int64_t t_ns, ThreadChange change) {
  names_[tid] = {pid, name};
  if (tid == o_.pid) leader_ = name;
  if (change == ThreadChange::kGone) {
    alive_.erase(tid);
  } else {
    alive_.insert(tid);
  }
  intervals_->add(thread_row(tid, pid, name, t_ns, change, t0_));
  binner_.thread(tid, name, t_ns, change);
}

void ExactRecorder::check_unseen(int64_t now, int64_t horizon) {
  // Nearly all the time since the start on a CPU, and no record about it
  // while the records up to the horizon are in: it was on that CPU from the
  // start. Looked at every kUnseenCheckNs, one read of /proc per process.
  const int64_t span = now - t0_;
  if (unseen_.empty() || span <= 0 || 5 * (horizon - t0_) < span || now - unseen_checked_ < kUnseenCheckNs) return;
  unseen_checked_ = now;
  std::map<pid_t, std::map<pid_t, int64_t>> cpu_now;  // pid -> tid -> schedstat CPU
  for (auto it = unseen_.begin(); it != unseen_.end();) {
    if (model_.seen(it->first)) {
      it = unseen_.erase(it);
      continue;
    }
    const pid_t pid = it->second.first;
    if (!cpu_now.count(pid)) {
      auto& m = cpu_now[pid];
      for (const ThreadStat& t : read_threads(pid)) m[t.tid] = t.cpu_ns;
    }
    const auto found = cpu_now[pid].find(it->first);
    if (found != cpu_now[pid].end() && 5 * (found->second - it->second.second) >= 4 * span) {
      model_.assume_running(it->first, thread_last_cpu(pid, it->first));
      it = unseen_.erase(it);
      continue;
    }
    ++it;
  }
}

void ExactRecorder::feed(int64_t before_ns, bool last) {
  tracer_->read(&events_, before_ns);
  events_in_ += static_cast<int64_t>(events_.size());
  for (const SchedEvent& e : events_) model_.add(e);
  events_.clear();
  if (last) return;
  for (const RunInterval& r : model_.running(before_ns)) binner_.run(r.tid, r.start_ns, r.end_ns);
  for (const Row& r : binner_.take(before_ns - kBinLagNs)) add_row(r);
}

bool ExactRecorder::tick(int64_t now, bool launched_exited) {
  const int64_t horizon = now - kReadLagNs;
  check_unseen(now, horizon);
  feed(horizon, false);
  return o_.launch() ? launched_exited : attached_process_ended(o_.pid);
}

void ExactRecorder::stop(int64_t now, bool ended) {
  // An ended process's last threads switch out for the last time just after
  // it became a zombie: let those events in.
  if (ended) sleep_for_ns(kNsPerMsInt);
  tracer_->stop();
  end_ns_ = ended ? now + kNsPerMsInt : now;
  feed(end_ns_, true);
  model_.finish(end_ns_);
  if (ended) {
    // Every thread's last row is its end.
    const std::set<pid_t> left = alive_;
    for (pid_t tid : left) thread(tid, names_[tid].first, names_[tid].second, end_ns_, ThreadChange::kGone);
  }
  for (const Row& r : binner_.finish(end_ns_)) add_row(r);
}

void ExactRecorder::flush() {
  csv_->flush();
  intervals_->flush();
}

void ExactRecorder::discard() {
  intervals_->discard();
  gaps_->discard();
}

void ExactRecorder::report() {
  // The gaps: two passes over the intervals file as written.
  intervals_->flush();
  const pid_t main_tid = o_.main_tid > 0 ? o_.main_tid : o_.pid;
  GapFinder finder(main_tid, o_.gap_min_ns, end_ns_ - t0_);
  std::string line;
  IntervalRow row;
  {
    std::ifstream in(intervals_->path());
    while (std::getline(in, line)) {
      if (parse_interval_row(line, &row)) finder.add(row);
    }
  }
  GapBurns burns(finder.take(), main_tid);
  {
    std::ifstream in(intervals_->path());
    while (std::getline(in, line)) {
      if (parse_interval_row(line, &row)) burns.add(row);
    }
  }
  gaps_->add(gaps_csv(burns.gaps(), main_tid, o_.gap_min_ns));
  gaps_->flush();
  char mode[640];
  std::snprintf(mode, sizeof mode,
                "exact mode: the scheduler's events (%s): %lld events (%.0f/s), %lld lost%s, %lld inferred (not reported "
                "by the kernel), %lld contradicted the state, %lld wait pieces without a process, %.3f ms of CPU "
                "placed late; rows in %s and %s",
                tracer_->description().c_str(), static_cast<long long>(events_in_),
                end_ns_ > t0_ ? static_cast<double>(events_in_) * 1e9 / static_cast<double>(end_ns_ - t0_) : 0.0,
                static_cast<long long>(tracer_->lost()),
                tracer_->lost() > 0 ? " (a ring was full: intervals near them are uncertain)" : "",
                static_cast<long long>(model_.unreported()), static_cast<long long>(model_.inconsistencies()),
                static_cast<long long>(model_.unresolved()),
                ns_to_ms(binner_.late_ns()), intervals_->path().c_str(), gaps_->path().c_str());
  print_summary(mode, waits_, true, intervals_->path());
  const auto it = names_.find(main_tid);
  std::fputs(format_gaps(burns.gaps(), main_tid, it == names_.end() ? "?" : it->second.second, o_.gap_min_ns).c_str(),
             stderr);
}

}  // namespace threadburn::monitor
