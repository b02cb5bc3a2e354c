#include "monitor/binner.h"

#include <algorithm>

#include "core/clock.h"

namespace threadburn::monitor {

Binner::Binner(int64_t origin_ns, int64_t period_ns, int64_t unix0_ns)
    : origin_(origin_ns), period_(period_ns), unix0_(unix0_ns) {}

int64_t Binner::index(int64_t t_ns) const {
  const int64_t d = t_ns - origin_;
  return d >= 0 ? d / period_ : -((-d + period_ - 1) / period_);
}

void Binner::run(pid_t tid, int64_t start_ns, int64_t end_ns) {
  auto& counted = counted_until_[tid];
  start_ns = std::max(start_ns, counted);
  if (end_ns <= start_ns) return;
  counted = end_ns;
  const auto& names = names_[tid];
  // The parts between renames, each under its name.
  size_t i = 0;
  while (i + 1 < names.size() && names[i + 1].first <= start_ns) ++i;
  int64_t from = start_ns;
  for (; from < end_ns; ++i) {
    const int64_t to = i + 1 < names.size() ? std::min(end_ns, names[i + 1].first) : end_ns;
    add(tid, names.empty() ? std::string() : names[i].second, from, to);
    from = to;
    if (i + 1 >= names.size()) break;
  }
}

void Binner::add(pid_t tid, const std::string& name, int64_t start_ns, int64_t end_ns) {
  if (end_ns <= start_ns) return;
  const int64_t open_from = origin_ + first_open_ * period_;
  if (start_ns < open_from) {
    // A closed bin's CPU (a thread whose process was learned late): keep the
    // total, count the displacement.
    const int64_t late = std::min(end_ns, open_from) - start_ns;
    late_ns_ += late;
    bins_[first_open_].cpu_ns[{tid, name}] += late;
    start_ns = open_from;
    if (end_ns <= start_ns) return;
  }
  for (int64_t k = index(start_ns); k <= index(end_ns - 1); ++k) {
    const int64_t lo = std::max(start_ns, origin_ + k * period_);
    const int64_t hi = std::min(end_ns, origin_ + (k + 1) * period_);
    if (hi > lo) bins_[k].cpu_ns[{tid, name}] += hi - lo;
  }
}

void Binner::thread(pid_t tid, const std::string& name, int64_t t_ns, ThreadChange change) {
  auto& names = names_[tid];
  if (change == ThreadChange::kRenamed || names.empty()) {
    names.push_back({t_ns, name});
  } else if (change == ThreadChange::kBorn) {
    names.assign(1, {t_ns, name});  // a reused tid: a new thread
  }
  if (change == ThreadChange::kKnown) {
    alive_.insert(tid);  // alive before the first bin
    return;
  }
  const int64_t k = std::max(index(t_ns), first_open_);
  Bin& b = bins_[k];
  auto it = b.changes.find(tid);
  // Born and gone in one bin: its rows must still end with the gone row.
  if (it == b.changes.end() || change == ThreadChange::kGone || it->second != ThreadChange::kBorn) {
    b.changes[tid] = change;
  }
}

void Binner::close(int64_t k, int64_t end_ns, std::vector<Row>* out) {
  const int64_t start = origin_ + k * period_;
  const auto it = bins_.find(k);
  Bin empty;
  const Bin& b = it == bins_.end() ? empty : it->second;
  auto row = [&](pid_t tid, const std::string& name, int64_t cpu, const char* change) {
    Row r;
    const int64_t unix_ns = unix0_ + (end_ns - origin_);
    r.unix_ms = unix_ns / 1000000 - (unix_ns % 1000000 < 0 ? 1 : 0);
    r.t_ms = ns_to_ms(end_ns - origin_);
    r.dt_ms = ns_to_ms(end_ns - start);
    r.tid = tid;
    r.name = name;
    r.cpu_ms = ns_to_ms(cpu);
    r.cores = r.dt_ms > 0 ? r.cpu_ms / r.dt_ms : 0;
    r.change = change;
    return r;
  };
  int64_t total = 0;
  for (const auto& [key, ns] : b.cpu_ns) total += ns;
  const size_t first = out->size();
  out->push_back(row(kProcessTid, kProcessName, total, ""));
  std::vector<pid_t> gone;
  auto latest = [this](pid_t tid) {
    const auto it = names_.find(tid);
    return it == names_.end() || it->second.empty() ? std::string() : it->second.back().second;
  };
  // CPU rows by thread and name; then a row for a change without CPU.
  std::set<pid_t> with_cpu;
  for (const auto& [key, ns] : b.cpu_ns) {
    const auto change = b.changes.find(key.first);
    const bool marked = change != b.changes.end() && change->second != ThreadChange::kGone &&
                        key.second == latest(key.first);
    const char* what = !marked ? "" : change->second == ThreadChange::kBorn ? "new" : "renamed";
    if (ns > 0 || *what != '\0') out->push_back(row(key.first, key.second, ns, what));
    if (marked) with_cpu.insert(key.first);
  }
  for (const auto& [tid, change] : b.changes) {
    if (change == ThreadChange::kGone) {
      gone.push_back(tid);
    } else if (!with_cpu.count(tid)) {
      out->push_back(row(tid, latest(tid), 0, change == ThreadChange::kBorn ? "new" : "renamed"));
    }
  }
  // A thread's last row is its end: a zero row after its CPU in the bin.
  for (pid_t tid : gone) out->push_back(row(tid, latest(tid), 0, "gone"));
  // Threads alive at the bin's end: the closed bins' births and ends so far.
  for (const auto& [tid, change] : b.changes) {
    if (change == ThreadChange::kGone) {
      alive_.erase(tid);
    } else {
      alive_.insert(tid);
    }
  }
  const int alive = static_cast<int>(alive_.size());
  for (size_t i = first; i < out->size(); ++i) (*out)[i].threads = alive;
  if (it != bins_.end()) bins_.erase(it);
}

std::vector<Row> Binner::take(int64_t until_ns) {
  std::vector<Row> out;
  while (origin_ + (first_open_ + 1) * period_ <= until_ns) {
    close(first_open_, origin_ + (first_open_ + 1) * period_, &out);
    ++first_open_;
  }
  return out;
}

std::vector<Row> Binner::finish(int64_t end_ns) {
  std::vector<Row> out = take(end_ns);
  if (end_ns > origin_ + first_open_ * period_) {
    // The last bin, partial: what lies beyond end_ns (none, normally) joins it.
    int64_t k = first_open_;
    for (auto it = bins_.upper_bound(k); it != bins_.end(); it = bins_.erase(it)) {
      for (const auto& [tid, ns] : it->second.cpu_ns) bins_[k].cpu_ns[tid] += ns;
      for (const auto& [tid, c] : it->second.changes) bins_[k].changes[tid] = c;
    }
    close(k, end_ns, &out);
    ++first_open_;
  }
  return out;
}

}  // namespace threadburn::monitor
