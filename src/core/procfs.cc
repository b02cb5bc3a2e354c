#include "core/procfs.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <sstream>

namespace threadburn {
namespace {

std::string task_dir(pid_t pid) {
  return pid == 0 ? std::string("/proc/self/task") : "/proc/" + std::to_string(pid) + "/task";
}

// read() into a fixed buffer: cheaper than iostreams, which matters when a
// monitor reads every thread every millisecond.
bool read_small_file(const std::string& path, std::string* out) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  out->clear();
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

}  // namespace

std::optional<int64_t> parse_schedstat(const std::string& text) {
  const char* p = text.c_str();
  while (*p == ' ') ++p;
  if (*p < '0' || *p > '9') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(p, &end, 10);
  if (errno != 0 || end == p) return std::nullopt;
  return static_cast<int64_t>(v);
}

void parse_status_ctxsw(const std::string& text, int64_t* vol, int64_t* invol) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    long long v = 0;
    if (std::sscanf(line.c_str(), "voluntary_ctxt_switches: %lld", &v) == 1) *vol = v;
    if (std::sscanf(line.c_str(), "nonvoluntary_ctxt_switches: %lld", &v) == 1) *invol = v;
  }
}

std::optional<ThreadStat> read_thread(pid_t pid, pid_t tid, bool with_ctxsw) {
  const std::string base = task_dir(pid) + "/" + std::to_string(tid);
  std::string text;
  if (!read_small_file(base + "/schedstat", &text)) return std::nullopt;
  auto cpu = parse_schedstat(text);
  if (!cpu) return std::nullopt;
  ThreadStat s;
  s.tid = tid;
  s.cpu_ns = *cpu;
  if (read_small_file(base + "/comm", &text)) {
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    s.name = text;
  }
  if (with_ctxsw && read_small_file(base + "/status", &text)) {
    parse_status_ctxsw(text, &s.vol_ctxsw, &s.invol_ctxsw);
  }
  return s;
}

std::vector<ThreadStat> read_threads(pid_t pid, bool with_ctxsw) {
  std::vector<ThreadStat> out;
  DIR* dir = ::opendir(task_dir(pid).c_str());
  if (!dir) return out;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    auto s = read_thread(pid, static_cast<pid_t>(std::atoi(e->d_name)), with_ctxsw);
    if (s) out.push_back(std::move(*s));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end(),
            [](const ThreadStat& a, const ThreadStat& b) { return a.tid < b.tid; });
  return out;
}

int count_threads(pid_t pid) {
  DIR* dir = ::opendir(task_dir(pid).c_str());
  if (!dir) return 0;
  int n = 0;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') ++n;
  }
  ::closedir(dir);
  return n;
}

bool process_readable(pid_t pid, std::string* why) {
  const std::string dir = task_dir(pid);
  DIR* d = ::opendir(dir.c_str());
  if (!d) {
    if (why) *why = (errno == ENOENT) ? "no such process" : std::strerror(errno);
    return false;
  }
  ::closedir(d);
  auto threads = read_threads(pid);
  if (threads.empty()) {
    if (why) *why = "cannot read " + dir + "/*/schedstat (permission?)";
    return false;
  }
  return true;
}

pid_t current_tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

std::vector<ThreadDelta> thread_deltas(const std::vector<ThreadStat>& before,
                                       const std::vector<ThreadStat>& after) {
  std::map<pid_t, int64_t> start;
  for (const auto& s : before) start[s.tid] = s.cpu_ns;
  std::vector<ThreadDelta> out;
  for (const auto& s : after) {
    auto it = start.find(s.tid);
    const int64_t base = it == start.end() ? 0 : it->second;
    out.push_back({s.tid, s.name, s.cpu_ns - base});
  }
  return out;
}

CtxSwitches process_ctxsw() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<int64_t>(ru.ru_nvcsw), static_cast<int64_t>(ru.ru_nivcsw)};
}

}  // namespace threadburn
