// The slot reader (src/core/slot.h) on fixture trees of a fake /proc and
// /sys/fs/cgroup (tests/fixtures/slot): cgroup v1 on a hybrid host (a
// container whose parent's quota is the tightest), v2 seen through a cgroup
// namespace's mount (a pod's quota two levels above the container's leaf),
// and none; then the live system, whatever it has.
#include "core/slot.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <map>
#include <string>

namespace threadburn {
namespace {

const std::string kFixtures = SLOT_FIXTURES_DIR;

std::map<std::string, std::string> as_map(const Slot& s) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : s.context()) out[k] = v;
  return out;
}

SlotEnv no_env() {
  return [](const char*) -> const char* { return nullptr; };
}

TEST(Slot, V1TheTightestQuotaOnThePathUp) {
  // The leaf allows 150000/50000 = 3 CPUs, its parent docker/ 2.5: 2.5 holds, 3 CPUs rounded up.
  const Slot s = read_slot(kFixtures + "/v1", 8, no_env());
  EXPECT_EQ(s.cgroup_version, "v1");
  EXPECT_EQ(s.cgroup_dir, kFixtures + "/v1/sys/fs/cgroup/cpu,cpuacct/docker/abc");
  EXPECT_EQ(s.limit_dir, kFixtures + "/v1/sys/fs/cgroup/cpu,cpuacct/docker");
  EXPECT_EQ(s.quota_us, 250000);
  EXPECT_EQ(s.period_us, 100000);
  EXPECT_DOUBLE_EQ(s.quota_cpus(), 2.5);
  EXPECT_EQ(s.effective_cpus(), 3);
  EXPECT_EQ(s.cpuset, "2-5");  // effective_cpus before cpus
  auto ctx = as_map(s);
  EXPECT_EQ(ctx["cpu_quota"], "2.5");
  EXPECT_EQ(ctx["cpu_period_us"], "100000");
  EXPECT_EQ(ctx["effective_cpus"], "3");
  EXPECT_EQ(ctx["slurm_cpus_per_task"], "unset");
  // The affinity is the smaller: it holds.
  EXPECT_EQ(read_slot(kFixtures + "/v1", 2, no_env()).effective_cpus(), 2);
  // Throttling is counted where the quota is: the parent's cpu.stat (v1 ns).
  const CpuStat st = read_cpu_stat(s.limit_dir);
  ASSERT_TRUE(st.ok);
  EXPECT_EQ(st.nr_periods, 500);
  EXPECT_EQ(st.nr_throttled, 310);
  EXPECT_EQ(st.throttled_ns, 4100000000LL);
}

TEST(Slot, V2ThroughANamespacedMount) {
  // Mounted root /kubepods.slice: the leaf /kubepods.slice/pod1/ctr is pod1/ctr under
  // the mount point; no limit at the leaf, 1.5 CPUs at pod1, 4 at the mount's root.
  const Slot s = read_slot(kFixtures + "/v2", 8, no_env());
  EXPECT_EQ(s.cgroup_version, "v2");
  EXPECT_EQ(s.cgroup_dir, kFixtures + "/v2/sys/fs/cgroup/pod1/ctr");
  EXPECT_EQ(s.limit_dir, kFixtures + "/v2/sys/fs/cgroup/pod1");
  EXPECT_EQ(s.quota_us, 150000);
  EXPECT_EQ(s.period_us, 100000);
  EXPECT_EQ(s.effective_cpus(), 2);
  EXPECT_EQ(s.cpuset, "0-3");
  EXPECT_EQ(as_map(s)["cpu_quota"], "1.5");
  const CpuStat st = read_cpu_stat(s.limit_dir);
  ASSERT_TRUE(st.ok);
  EXPECT_EQ(st.nr_periods, 40);
  EXPECT_EQ(st.nr_throttled, 25);
  EXPECT_EQ(st.throttled_ns, 2500000000LL);  // throttled_usec 2500000
}

TEST(Slot, NoCgroupTheAffinityAlone) {
  const Slot s = read_slot(kFixtures + "/none", 6, no_env());
  EXPECT_EQ(s.cgroup_version, "none");
  EXPECT_EQ(s.effective_cpus(), 6);
  auto ctx = as_map(s);
  EXPECT_EQ(ctx["cpu_quota"], "none");
  EXPECT_EQ(ctx["cpu_period_us"], "none");
  EXPECT_EQ(ctx["cpuset"], "none");
  EXPECT_FALSE(read_cpu_stat(s.limit_dir).ok);
}

TEST(Slot, SlurmVariablesAsSet) {
  const Slot s = read_slot(kFixtures + "/none", 4, [](const char* n) -> const char* {
    const std::string name = n;
    if (name == "SLURM_CPUS_PER_TASK") return "2";
    if (name == "SLURM_JOB_CPUS_PER_NODE") return "4(x2)";
    return nullptr;
  });
  auto ctx = as_map(s);
  EXPECT_EQ(ctx["slurm_cpus_per_task"], "2");
  EXPECT_EQ(ctx["slurm_cpus_on_node"], "unset");
  EXPECT_EQ(ctx["slurm_job_cpus_per_node"], "4(x2)");
}

TEST(Slot, Parsers) {
  EXPECT_EQ(parse_cpu_max("max 100000\n"), (std::pair<int64_t, int64_t>{-1, 100000}));
  EXPECT_EQ(parse_cpu_max("50000 100000\n"), (std::pair<int64_t, int64_t>{50000, 100000}));
  EXPECT_EQ(parse_cpu_max("garbage"), (std::pair<int64_t, int64_t>{-1, -1}));
  const CpuStat a = parse_cpu_stat("nr_periods 10\nnr_throttled 4\nthrottled_usec 300\n");
  const CpuStat b = parse_cpu_stat("nr_periods 25\nnr_throttled 9\nthrottled_usec 1300\n");
  const CpuStat d = cpu_stat_delta(b, a);
  EXPECT_TRUE(d.ok);
  EXPECT_EQ(d.nr_periods, 15);
  EXPECT_EQ(d.nr_throttled, 5);
  EXPECT_EQ(d.throttled_ns, 1000000);
  EXPECT_FALSE(parse_cpu_stat("usage_usec 5\n").ok);  // v2 without the cpu controller: no periods
  Slot q;
  q.affinity_cpus = 16;
  q.quota_us = 100001, q.period_us = 100000;  // just above one CPU: two
  EXPECT_EQ(q.effective_cpus(), 2);
  q.quota_us = 50000;  // half a CPU: one
  EXPECT_EQ(q.effective_cpus(), 1);
}

TEST(Slot, LiveSystem) {
  // Whatever this machine has: the affinity count is the mask's, the effective
  // CPUs never above it, and a quota read is positive with its period.
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const Slot s = read_slot();
  EXPECT_EQ(s.affinity_cpus, CPU_COUNT(&set));
  EXPECT_GE(s.effective_cpus(), 1);
  EXPECT_LE(s.effective_cpus(), s.affinity_cpus);
  if (s.quota_us > 0) {
    EXPECT_GT(s.period_us, 0);
  }
  if (s.cgroup_version != "none") {
    EXPECT_FALSE(s.cgroup_dir.empty());
  }
}

}  // namespace
}  // namespace threadburn
