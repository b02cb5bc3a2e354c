// The slot a process runs in: the CPUs it may really use. Its affinity mask
// says which CPUs the scheduler may put its threads on; a CFS quota (cgroup v2
// cpu.max, v1 cpu.cfs_quota_us / cpu.cfs_period_us) says how much CPU time per
// period the whole cgroup may take, whatever the mask. A container's --cpus, a
// Kubernetes CPU limit and Slurm's cgroups set one or the other; the OpenMP
// runtimes size their teams from the mask alone (docs/slot.md).
//
// Everything is read under a root folder ("" for the live system; a fixture
// tree of a fake /proc and /sys/fs/cgroup in tests): /proc/self/cgroup names
// the process's cgroup in each hierarchy, /proc/self/mountinfo where each
// hierarchy is mounted. The quota in force is the tightest on the path from
// the process's cgroup up to the hierarchy's root: a parent's limit holds for
// every child beneath it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace threadburn {

struct Slot {
  std::string cgroup_version = "none";  // "v1", "v2" or "none" (no cpu controller found)
  std::string cgroup_dir;    // the process's cgroup folder in the cpu hierarchy ("" when none)
  std::string limit_dir;     // the folder whose quota is the tightest ("" when no quota)
  int64_t quota_us = -1;     // the tightest quota per period (-1: none)
  int64_t period_us = -1;    // its period (-1: none)
  int affinity_cpus = -1;    // CPUs in the affinity mask
  std::string cpuset;        // the cgroup's cpuset ("0-3"), "" when none was read
  // Slurm's allocation as its variables say ("" when unset).
  std::string slurm_cpus_per_task, slurm_cpus_on_node, slurm_job_cpus_per_node;

  // The quota in CPUs (quota / period), or 0 without a quota.
  double quota_cpus() const;
  // min(affinity CPUs, ceil(quota / period)); the affinity CPUs without a quota.
  int effective_cpus() const;
  // The context keys (cgroup_version, cpu_quota, cpu_quota_us, cpu_period_us,
  // effective_cpus, cpuset, slurm_*): "none" / "unset" where absent.
  std::vector<std::pair<std::string, std::string>> context() const;
};

using SlotEnv = std::function<const char*(const char*)>;

// The slot of the process whose /proc/self files lie under root, with this
// affinity count (the live mask's when -1) and these environment variables
// (getenv when null).
Slot read_slot(const std::string& root = "", int affinity_cpus = -1, const SlotEnv& env = nullptr);

// A cgroup's cpu.stat: the periods its quota was enforced in, those in which
// it ran out, and the time its threads were held back for it.
struct CpuStat {
  bool ok = false;  // read (false: no quota's folder, or no cpu.stat)
  int64_t nr_periods = 0, nr_throttled = 0;
  int64_t throttled_ns = 0;  // v2 throttled_usec * 1000; v1 throttled_time (ns)
};
CpuStat parse_cpu_stat(const std::string& text);
// The cpu.stat of a cgroup folder (Slot::limit_dir, where throttling is
// counted; the leaf's when no quota).
CpuStat read_cpu_stat(const std::string& dir);

// A - B, field by field (ok when both are).
CpuStat cpu_stat_delta(const CpuStat& later, const CpuStat& earlier);

// Parsers, exposed for tests.
// "max 100000" / "50000 100000" (v2 cpu.max): {quota_us (-1 for max), period_us}; {-1,-1} when malformed.
std::pair<int64_t, int64_t> parse_cpu_max(const std::string& text);

}  // namespace threadburn
