#include "core/procfs.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace threadburn {
namespace {

std::string task_dir(pid_t pid) {
  return pid == 0 ? std::string("/proc/self/task") : "/proc/" + std::to_string(pid) + "/task";
}

// read() into a fixed buffer: cheaper than iostreams, which matters when a
// monitor reads every thread every few milliseconds.
bool read_small_file(const std::string& path, std::string* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[4096];
  out->clear();
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return true;
}

std::vector<pid_t> list_tids(pid_t pid) {
  std::vector<pid_t> out;
  DIR* dir = ::opendir(task_dir(pid).c_str());
  if (!dir) return out;
  while (dirent* e = ::readdir(dir)) {
    if (e->d_name[0] >= '0' && e->d_name[0] <= '9') out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
  }
  ::closedir(dir);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::optional<SchedStat> parse_schedstat(const char* text) {
  SchedStat s;
  int64_t* fields[3] = {&s.cpu_ns, &s.run_delay_ns, &s.timeslices};
  const char* p = text;
  for (int64_t* f : fields) {
    while (*p == ' ') ++p;
    if (*p < '0' || *p > '9') return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(p, &end, 10);
    if (errno != 0 || end == p) return std::nullopt;
    *f = static_cast<int64_t>(v);
    p = end;
  }
  return s;
}

std::string thread_name(pid_t pid, pid_t tid) {
  std::string text;
  if (!read_small_file(task_dir(pid) + "/" + std::to_string(tid) + "/comm", &text)) return "";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

std::vector<ThreadStat> read_threads(pid_t pid) {
  std::vector<ThreadStat> out;
  std::string text;
  for (pid_t tid : list_tids(pid)) {
    if (!read_small_file(task_dir(pid) + "/" + std::to_string(tid) + "/schedstat", &text)) continue;
    const auto s = parse_schedstat(text.c_str());
    if (!s) continue;
    out.push_back({tid, thread_name(pid, tid), s->cpu_ns, s->run_delay_ns});
  }
  return out;
}

TaskReader::TaskReader(pid_t pid, int relist_every) : pid_(pid), relist_every_(relist_every) {}

TaskReader::~TaskReader() {
  for (Task& t : tasks_) ::close(t.fd);
}

void TaskReader::relist() {
  std::vector<Task> next;
  for (pid_t tid : list_tids(pid_)) {
    auto it = std::find_if(tasks_.begin(), tasks_.end(), [&](const Task& t) { return t.tid == tid; });
    if (it != tasks_.end()) {
      it->name = thread_name(pid_, tid);  // exec and pthread_setname_np rename threads
      next.push_back(*it);
      it->fd = -1;
      continue;
    }
    const std::string path = task_dir(pid_) + "/" + std::to_string(tid) + "/schedstat";
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) next.push_back({tid, fd, thread_name(pid_, tid)});
  }
  for (Task& t : tasks_) {
    if (t.fd >= 0) ::close(t.fd);
  }
  tasks_ = std::move(next);
}

std::vector<ThreadStat> TaskReader::read() {
  if (reads_++ % relist_every_ == 0) relist();
  std::vector<ThreadStat> out;
  out.reserve(tasks_.size());
  char buf[128];
  for (const Task& t : tasks_) {
    const ssize_t n = ::pread(t.fd, buf, sizeof buf - 1, 0);
    if (n <= 0) continue;  // exited
    buf[n] = '\0';
    if (const auto s = parse_schedstat(buf)) out.push_back({t.tid, t.name, s->cpu_ns, s->run_delay_ns});
  }
  return out;
}

int count_threads(pid_t pid) { return static_cast<int>(list_tids(pid).size()); }

Availability process_readable(pid_t pid) {
  const std::string dir = task_dir(pid);
  DIR* d = ::opendir(dir.c_str());
  if (!d) return Availability::no(errno == ENOENT ? "no such process" : std::strerror(errno));
  ::closedir(d);
  if (read_threads(pid).empty()) return Availability::no("cannot read " + dir + "/*/schedstat (permission?)");
  return Availability::yes();
}

namespace {

// The text after "(comm) " of a stat file: comm may hold spaces and ')'.
bool stat_fields(const std::string& path, std::string* after) {
  std::string text;
  if (!read_small_file(path, &text)) return false;
  const auto paren = text.rfind(')');
  if (paren == std::string::npos || paren + 2 >= text.size()) return false;
  *after = text.substr(paren + 2);
  return true;
}

// The first number after "<key>:" in /proc/<id>/status, -1 when absent.
long status_field(pid_t id, const char* key) {
  std::string text;
  if (!read_small_file("/proc/" + std::to_string(id) + "/status", &text)) return -1;
  const std::string k = std::string("\n") + key + ":";
  const auto at = text.find(k);
  if (at == std::string::npos) return -1;
  return std::strtol(text.c_str() + at + k.size(), nullptr, 10);
}

}  // namespace

char process_state(pid_t pid) {
  std::string after;
  if (!stat_fields("/proc/" + std::to_string(pid) + "/stat", &after)) return '\0';
  return after[0];
}

int process_uid(pid_t pid) { return static_cast<int>(status_field(pid, "Uid")); }

pid_t process_of_thread(pid_t tid) { return static_cast<pid_t>(status_field(tid, "Tgid")); }

int thread_last_cpu(pid_t pid, pid_t tid) {
  std::string after;
  if (!stat_fields(task_dir(pid) + "/" + std::to_string(tid) + "/stat", &after)) return -1;
  // "processor" is field 39 of stat; after "(comm) " the state is field 3.
  const char* p = after.c_str();
  for (int field = 3; field < 39 && *p; ++field) {
    p = std::strchr(p, ' ');
    if (!p) return -1;
    ++p;
  }
  return std::atoi(p);
}

std::vector<pid_t> child_processes(pid_t pid) {
  std::vector<pid_t> out;
  std::string text;
  for (pid_t tid : list_tids(pid)) {
    if (!read_small_file(task_dir(pid) + "/" + std::to_string(tid) + "/children", &text)) continue;
    const char* p = text.c_str();
    char* end = nullptr;
    for (long v = std::strtol(p, &end, 10); end != p; v = std::strtol(p, &end, 10)) {
      out.push_back(static_cast<pid_t>(v));
      p = end;
    }
  }
  return out;
}

CtxSwitches process_ctxsw() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return {static_cast<int64_t>(ru.ru_nvcsw), static_cast<int64_t>(ru.ru_nivcsw)};
}

}  // namespace threadburn
