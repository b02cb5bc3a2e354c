#include "monitor/waits.h"

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <vector>

#include "core/clock.h"

namespace threadburn::monitor {

TreeClass tree_class(pid_t root, pid_t tid, pid_t pid) {
  if (pid != root) return TreeClass::kChildren;
  return tid == root ? TreeClass::kMain : TreeClass::kThreads;
}

const char* tree_class_label(TreeClass c) {
  switch (c) {
    case TreeClass::kMain: return "[main thread]";
    case TreeClass::kThreads: return "[other threads]";
    case TreeClass::kChildren: break;
  }
  return "[child processes]";
}

void WaitTable::add(const WaitPiece& w) {
  const int64_t ns = w.end_ns - w.start_ns;
  if (w.caused) {
    ThreadWaits& h = threads_[w.holder_tid];
    h.tid = w.holder_tid;
    h.pid = w.holder_pid;
    if (h.name.empty()) h.name = w.holder_name;
    h.caused_ns += ns;
    auto& p = caused_[w.pid];
    if (p.first.empty()) p.first = w.name;
    p.second += ns;
    return;
  }
  ThreadWaits& t = threads_[w.tid];
  t.tid = w.tid;
  t.pid = w.pid;
  t.name = w.name;
  t.by_holder[static_cast<size_t>(w.holder)] += ns;
  t.total_ns += ns;
}

void WaitTable::add_total(pid_t tid, pid_t pid, const std::string& name, int64_t wait_ns) {
  ThreadWaits& t = threads_[tid];
  t.tid = tid;
  t.pid = pid;
  t.name = name;
  t.total_ns += wait_ns;
}

ThreadWaits WaitTable::tree_total() const {
  ThreadWaits sum;
  for (const auto& [tid, t] : threads_) {
    for (int h = 0; h < kHolders; ++h) sum.by_holder[static_cast<size_t>(h)] += t.by_holder[static_cast<size_t>(h)];
    sum.total_ns += t.total_ns;
    sum.caused_ns += t.caused_ns;
  }
  return sum;
}

std::string WaitTable::format(bool exact, size_t top) const {
  std::ostringstream out;
  char line[320];
  auto row = [&](const std::string& tid, const std::string& name, const ThreadWaits& t) {
    int n = std::snprintf(line, sizeof line, "  %-8s %-16s %10.3f", tid.c_str(), name.c_str(), ns_to_ms(t.total_ns));
    if (exact) {
      for (int64_t v : t.by_holder) n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), " %12.3f", ns_to_ms(v));
      std::snprintf(line + n, sizeof line - static_cast<size_t>(n), " %10.3f", ns_to_ms(t.caused_ns));
    }
    out << line << "\n";
  };
  if (exact) {
    out << "run-queue wait of the tree's threads (runnable, not running, ms), by who held the CPU meanwhile; "
           "caused = waits of threads outside the tree while this one held their CPU:\n";
    int n = std::snprintf(line, sizeof line, "  %-8s %-16s %10s", "tid", "name", "wait_ms");
    for (int h = 0; h < kHolders; ++h) {
      n += std::snprintf(line + n, sizeof line - static_cast<size_t>(n), " %12s", holder_name(static_cast<Holder>(h)));
    }
    std::snprintf(line + n, sizeof line - static_cast<size_t>(n), " %10s", "caused_ms");
  } else {
    out << "run-queue wait of the process's threads (runnable, not running; schedstat's run delay, ms; who held "
           "the CPU needs the exact mode):\n";
    std::snprintf(line, sizeof line, "  %-8s %-16s %10s", "tid", "name", "wait_ms");
  }
  out << line << "\n";
  std::vector<const ThreadWaits*> order;
  for (const auto& [tid, t] : threads_) order.push_back(&t);
  std::stable_sort(order.begin(), order.end(), [](const ThreadWaits* a, const ThreadWaits* b) {
    return a->total_ns + a->caused_ns > b->total_ns + b->caused_ns;
  });
  for (size_t i = 0; i < order.size() && i < top; ++i) row(std::to_string(order[i]->tid), order[i]->name, *order[i]);
  std::map<TreeClass, ThreadWaits> classes;
  for (const auto& [tid, t] : threads_) {
    ThreadWaits& c = classes[tree_class(root_, t.tid, t.pid)];
    for (int h = 0; h < kHolders; ++h) c.by_holder[static_cast<size_t>(h)] += t.by_holder[static_cast<size_t>(h)];
    c.total_ns += t.total_ns;
    c.caused_ns += t.caused_ns;
  }
  for (const auto& [cls, t] : classes) row("", tree_class_label(cls), t);
  row("", "[tree]", tree_total());
  if (exact && !caused_.empty()) {
    std::vector<std::pair<int64_t, pid_t>> by;
    for (const auto& [pid, p] : caused_) by.push_back({p.second, pid});
    std::sort(by.rbegin(), by.rend());
    out << "  caused, by waiting process:";
    for (size_t i = 0; i < by.size() && i < 8; ++i) {
      std::snprintf(line, sizeof line, "%s pid %d (%s) %.3f ms", i ? ";" : "", static_cast<int>(by[i].second),
                    caused_.at(by[i].second).first.c_str(), ns_to_ms(by[i].first));
      out << line;
    }
    if (by.size() > 8) out << "; " << by.size() - 8 << " more";
    out << "\n";
  }
  return out.str();
}

}  // namespace threadburn::monitor
