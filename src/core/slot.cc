#include "core/slot.h"

#include <sched.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace threadburn {
namespace {

std::string read_text(const std::string& path, bool* ok = nullptr) {
  std::ifstream in(path);
  if (ok) *ok = static_cast<bool>(in);
  if (!in) return "";
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(s);
  while (std::getline(in, item, sep)) out.push_back(item);
  return out;
}

bool is_dir(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool has(const std::vector<std::string>& items, const std::string& what) {
  return std::find(items.begin(), items.end(), what) != items.end();
}

// mountinfo escapes blanks in paths as octal ("\040").
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      const std::string oct = s.substr(i + 1, 3);
      if (oct.size() == 3 && oct.find_first_not_of("01234567") == std::string::npos) {
        out += static_cast<char>(std::strtol(oct.c_str(), nullptr, 8));
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

struct Mount {
  std::string root, point;  // the hierarchy's folder mounted, and where
};

// The mount of a cgroup hierarchy: v2 (fstype cgroup2), or v1 with this
// controller among its super options. Empty point: none.
Mount find_mount(const std::string& mountinfo, bool v2, const std::string& controller) {
  for (const std::string& line : split(mountinfo, '\n')) {
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    const std::vector<std::string> head = split(line.substr(0, dash), ' ');
    const std::vector<std::string> tail = split(line.substr(dash + 3), ' ');
    if (head.size() < 5 || tail.size() < 3) continue;
    if (v2 ? tail[0] != "cgroup2" : (tail[0] != "cgroup" || !has(split(tail[2], ','), controller))) continue;
    return {unescape(head[3]), unescape(head[4])};
  }
  return {};
}

// The folder of a cgroup path (as /proc/self/cgroup names it) under a mount.
// A path outside the mounted root (a cgroup namespace names its own root "/")
// is taken as relative to the mount point; a folder that does not exist
// there falls back to the mount point itself.
std::string cgroup_folder(const std::string& root, const Mount& m, const std::string& path) {
  std::string rel = path;
  if (m.root != "/" && rel.rfind(m.root, 0) == 0) rel = rel.substr(m.root.size());
  if (rel == "/") rel = "";
  const std::string dir = root + m.point + rel;
  return is_dir(dir) ? dir : root + m.point;
}

// {quota_us, period_us} of one folder (-1: none).
std::pair<int64_t, int64_t> quota_of(const std::string& dir, bool v2) {
  if (v2) {
    bool ok = false;
    const std::string text = read_text(dir + "/cpu.max", &ok);
    return ok ? parse_cpu_max(text) : std::pair<int64_t, int64_t>{-1, -1};
  }
  bool ok_q = false, ok_p = false;
  const std::string q = trim(read_text(dir + "/cpu.cfs_quota_us", &ok_q));
  const std::string p = trim(read_text(dir + "/cpu.cfs_period_us", &ok_p));
  if (!ok_q || !ok_p || q.empty() || p.empty()) return {-1, -1};
  return {std::atoll(q.c_str()), std::atoll(p.c_str())};
}

std::string cpus_text(double cpus) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", cpus);
  std::string s = buf;
  s.erase(s.find_last_not_of('0') + 1);
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

}  // namespace

std::pair<int64_t, int64_t> parse_cpu_max(const std::string& text) {
  const std::vector<std::string> f = split(trim(text), ' ');
  if (f.size() != 2 || f[1].empty() || f[1].find_first_not_of("0123456789") != std::string::npos) return {-1, -1};
  const int64_t period = std::atoll(f[1].c_str());
  if (f[0] == "max") return {-1, period};
  if (f[0].empty() || f[0].find_first_not_of("0123456789") != std::string::npos) return {-1, -1};
  return {std::atoll(f[0].c_str()), period};
}

double Slot::quota_cpus() const {
  return quota_us > 0 && period_us > 0 ? static_cast<double>(quota_us) / static_cast<double>(period_us) : 0;
}

int Slot::effective_cpus() const {
  if (quota_us <= 0 || period_us <= 0) return affinity_cpus;
  const int by_quota = static_cast<int>(std::max<int64_t>(1, (quota_us + period_us - 1) / period_us));
  return affinity_cpus > 0 ? std::min(affinity_cpus, by_quota) : by_quota;
}

std::vector<std::pair<std::string, std::string>> Slot::context() const {
  const bool quota = quota_us > 0 && period_us > 0;
  auto or_unset = [](const std::string& v) { return v.empty() ? std::string("unset") : v; };
  return {
      {"cgroup_version", cgroup_version},
      {"cpu_quota", quota ? cpus_text(quota_cpus()) : "none"},
      {"cpu_period_us", quota ? std::to_string(period_us) : "none"},
      {"effective_cpus", std::to_string(effective_cpus())},
      {"cpuset", cpuset.empty() ? "none" : cpuset},
      {"slurm_cpus_per_task", or_unset(slurm_cpus_per_task)},
      {"slurm_cpus_on_node", or_unset(slurm_cpus_on_node)},
      {"slurm_job_cpus_per_node", or_unset(slurm_job_cpus_per_node)},
  };
}

Slot read_slot(const std::string& root, int affinity_cpus, const SlotEnv& env) {
  Slot s;
  if (affinity_cpus < 0) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) affinity_cpus = CPU_COUNT(&set);
  }
  s.affinity_cpus = affinity_cpus;
  const SlotEnv get = env ? env : [](const char* n) -> const char* { return std::getenv(n); };
  auto var = [&](const char* n) {
    const char* v = get(n);
    return std::string(v ? v : "");
  };
  s.slurm_cpus_per_task = var("SLURM_CPUS_PER_TASK");
  s.slurm_cpus_on_node = var("SLURM_CPUS_ON_NODE");
  s.slurm_job_cpus_per_node = var("SLURM_JOB_CPUS_PER_NODE");

  const std::string mountinfo = read_text(root + "/proc/self/mountinfo");
  std::string v1_cpu, v1_cpuset, v2;
  bool has_v1_cpu = false, has_v1_cpuset = false, has_v2 = false;
  for (const std::string& line : split(read_text(root + "/proc/self/cgroup"), '\n')) {
    const auto a = line.find(':');
    const auto b = a == std::string::npos ? a : line.find(':', a + 1);
    if (b == std::string::npos) continue;
    const std::string hier = line.substr(0, a), controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    const std::vector<std::string> names = split(controllers, ',');
    if (hier == "0" && controllers.empty()) {
      v2 = path, has_v2 = true;
    } else {
      if (has(names, "cpu")) v1_cpu = path, has_v1_cpu = true;
      if (has(names, "cpuset")) v1_cpuset = path, has_v1_cpuset = true;
    }
  }
  // The cpu controller lives in one hierarchy: a v1 one where a v1 line names
  // it (a hybrid system also lists the unified hierarchy, without it), else v2.
  Mount m;
  std::string path;
  if (has_v1_cpu && !(m = find_mount(mountinfo, false, "cpu")).point.empty()) {
    s.cgroup_version = "v1";
    path = v1_cpu;
  } else if (has_v2 && !(m = find_mount(mountinfo, true, "")).point.empty()) {
    s.cgroup_version = "v2";
    path = v2;
  }
  const bool v2_cpu = s.cgroup_version == "v2";
  if (s.cgroup_version != "none") {
    s.cgroup_dir = cgroup_folder(root, m, path);
    const std::string top = root + m.point;
    // The leaf up to the hierarchy's root: the tightest quota/period.
    for (std::string dir = s.cgroup_dir;;) {
      const auto [q, p] = quota_of(dir, v2_cpu);
      // As ratios: quota x period overflows 64 bits for the largest quotas v1 accepts.
      const bool tighter = s.quota_us <= 0 || static_cast<double>(q) / static_cast<double>(p) <
                                                  static_cast<double>(s.quota_us) / static_cast<double>(s.period_us);
      if (q > 0 && p > 0 && tighter) {
        s.quota_us = q, s.period_us = p, s.limit_dir = dir;
      }
      if (dir.size() <= top.size()) break;
      const auto slash = dir.find_last_of('/');
      if (slash == std::string::npos || slash < top.size()) break;
      dir = dir.substr(0, slash);
    }
  }
  // The cpuset: v2's cpuset.cpus.effective where the controller is on; v1's
  // effective_cpus (or cpus on older kernels) of the cpuset hierarchy.
  std::vector<std::string> candidates;
  if (has_v1_cpuset) {
    const Mount cm = find_mount(mountinfo, false, "cpuset");
    if (!cm.point.empty()) {
      const std::string dir = cgroup_folder(root, cm, v1_cpuset);
      candidates = {dir + "/cpuset.effective_cpus", dir + "/cpuset.cpus"};
    }
  } else if (has_v2) {
    const Mount vm = find_mount(mountinfo, true, "");
    if (!vm.point.empty()) candidates = {cgroup_folder(root, vm, v2) + "/cpuset.cpus.effective"};
  }
  for (const std::string& file : candidates) {
    bool ok = false;
    const std::string text = trim(read_text(file, &ok));
    if (ok && !text.empty()) {
      s.cpuset = text;
      break;
    }
  }
  return s;
}

CpuStat parse_cpu_stat(const std::string& text) {
  CpuStat st;
  bool periods = false;
  for (const std::string& line : split(text, '\n')) {
    std::istringstream in(line);
    std::string key;
    long long value = 0;
    if (!(in >> key >> value)) continue;
    if (key == "nr_periods") st.nr_periods = value, periods = true;
    if (key == "nr_throttled") st.nr_throttled = value;
    if (key == "throttled_usec") st.throttled_ns = value * 1000;  // v2
    if (key == "throttled_time") st.throttled_ns = value;         // v1, ns
  }
  st.ok = periods;
  return st;
}

CpuStat read_cpu_stat(const std::string& dir) {
  if (dir.empty()) return {};
  bool ok = false;
  const std::string text = read_text(dir + "/cpu.stat", &ok);
  return ok ? parse_cpu_stat(text) : CpuStat{};
}

CpuStat cpu_stat_delta(const CpuStat& later, const CpuStat& earlier) {
  CpuStat d;
  d.ok = later.ok && earlier.ok;
  if (!d.ok) return d;
  d.nr_periods = later.nr_periods - earlier.nr_periods;
  d.nr_throttled = later.nr_throttled - earlier.nr_throttled;
  d.throttled_ns = later.throttled_ns - earlier.throttled_ns;
  return d;
}

}  // namespace threadburn
