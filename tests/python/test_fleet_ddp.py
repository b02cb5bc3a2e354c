"""ddp_step across hosts: two ranks on the two nodes of scripts/local_fleet.sh
(THREADBURN_FLEET_DIR and THREADBURN_FLEET_NET; tests/python/fleet_live.sh
starts a fleet), meeting at node 1's address over the veth link:

* torchrun's variables and Slurm's (SLURM_JOB_NODELIST names the nodes,
  resolved on the nodes), and `srun -N 2`: each rank's row has its own node,
  its own address as gloo's device, allreduce_ms > 0, equal parameters;
* the known answer across hosts: each rank's averaged gradients and
  parameters equal one process's over both batches (workload_unit_tests'
  DdpKnownAnswer.AcrossProcesses);
* a rank on the unreachable host: both ranks stop with one error line within
  --timeout_s, not a hang;
* the same pair over loopback (both ranks on node 1), for comparison.
With THREADBURN_FLEET_RESULTS=DIR each rank's figures are appended to
DIR/fleet_ddp.csv (results/README.md).
"""
import csv
import json
import os
import subprocess
import time
import unittest

import helpers

CLUSTER = os.environ.get("THREADBURN_FLEET_DIR", "")
NET = os.environ.get("THREADBURN_FLEET_NET", "")
BUILD = helpers.real_build_dir()
FLEET = ["bash", os.path.join(helpers.REPO, "scripts", "local_fleet.sh")]
RESULTS = os.environ.get("THREADBURN_FLEET_RESULTS", "")
PORT = 29531
# The figures recorded: the ddp sweep's settings (configs/ddp.toml), one bucket size, no gap.
FLAGS = ["--model=mnist_adadelta", "--batch=64", "--bucket_mb=25", "--gap_ms=0", "--steps=10", "--warmup=2"]
RESULT_COLUMNS = ["link", "launcher", "rank", "world_size", "host_name", "gloo_device", "dist_master", "model",
                  "batch", "bucket_mb", "allreduce_ms", "step_ms", "step_cpu_gloo_ms", "param_checksum", "date"]


# The fleet's folder, and "" (not running) without its network's address: `CLUSTER and NET`
# gave the address itself as the folder, whose status said "not running", and every test here
# was skipped.
RUNNING, WHY_NOT = helpers.private_cluster("local_fleet.sh", CLUSTER if NET else "", "tests/python/fleet_live.sh",
                                           needs_build=True)
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")


def rank_env(**extra):
    env = {k: v for k, v in helpers.clean_env().items()
           if k not in LAUNCHER_VARS and not k.startswith(("SLURM_", "OMPI_", "PMI"))}
    env["OMP_NUM_THREADS"] = "1"  # two ranks on two cores
    env.update({k: str(v) for k, v in extra.items()})
    return env


@unittest.skipUnless(RUNNING, WHY_NOT)
class AcrossHosts(helpers.TempDir, unittest.TestCase):
    program = os.path.join(BUILD or "", "bench", "ddp_step_bench")

    def start_ranks(self, hosts, envs, argv, timeout=240):
        """Rank r on host hosts[r] ('1', '2' or 'x') with envs[r]; [(exit code, stdout, stderr, seconds)]."""
        procs = [subprocess.Popen(FLEET + ["on", h] + argv, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True) for h, e in zip(hosts, envs)]
        t0, out = time.monotonic(), []
        for p in procs:
            try:
                stdout, stderr = p.communicate(timeout=timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                stdout, stderr = p.communicate()
            out.append((p.returncode, stdout, stderr, time.monotonic() - t0))
        return out

    def check_world(self, reports, hosts, master, rendezvous):
        for rank, report in enumerate(reports):
            ctx = report["context"]
            self.assertEqual(ctx["dist_rendezvous"], rendezvous)
            self.assertEqual(ctx["dist_master"], master)
            self.assertEqual(ctx["host_name"], hosts[rank])
            (bench,) = report["benchmarks"]
            self.assertEqual((bench["rank"], bench["world_size"]), (rank, 2))
            self.assertGreater(bench["allreduce_ms"], 0)
            self.assertGreater(bench["step_cpu_gloo_ms"], 0)
        self.assertEqual(reports[0]["benchmarks"][0]["param_checksum"], reports[1]["benchmarks"][0]["param_checksum"])

    def record(self, link, launcher, reports):
        if not RESULTS:
            return
        path = os.path.join(RESULTS, "fleet_ddp.csv")
        new = not os.path.exists(path)
        with open(path, "a", newline="") as f:
            w = csv.DictWriter(f, RESULT_COLUMNS)
            if new:
                w.writeheader()
            for report in reports:
                ctx, (b,) = report["context"], report["benchmarks"]
                w.writerow({"link": link, "launcher": launcher, "rank": int(b["rank"]), "world_size": int(b["world_size"]),
                            "host_name": ctx["host_name"], "gloo_device": ctx["gloo_device"],
                            "dist_master": ctx["dist_master"], "model": "mnist_adadelta", "batch": 64,
                            "bucket_mb": 25, "allreduce_ms": f"{b['allreduce_ms']:.4f}",
                            "step_ms": f"{b['step_ms']:.4f}", "step_cpu_gloo_ms": f"{b['step_cpu_gloo_ms']:.4f}",
                            "param_checksum": int(b["param_checksum"]), "date": ctx["date"]})

    def pair(self, hosts, envs):
        out = self.start_ranks(hosts, envs, [self.program, *FLAGS, "--benchmark_format=json"])
        for rc, stdout, stderr, _ in out:
            self.assertEqual(rc, 0, stderr)
        return [json.loads(stdout) for _, stdout, _, _ in out]

    def test_torchrun_style_over_veth(self):
        envs = [rank_env(RANK=r, WORLD_SIZE=2, LOCAL_RANK=0, MASTER_ADDR=f"{NET}.2", MASTER_PORT=PORT) for r in (0, 1)]
        reports = self.pair(("1", "2"), envs)
        self.check_world(reports, ("tbfleet1", "tbfleet2"), f"{NET}.2:{PORT}", "env")
        # Each rank's gloo device is its own node's address, toward the master.
        self.assertEqual([r["context"]["gloo_device"] for r in reports], [f"{NET}.2", f"{NET}.3"])
        self.record("veth", "torchrun-style", reports)

    def test_slurm_style_over_veth(self):
        # What srun sets, by hand: the master is the first node of the list, resolved on the node.
        envs = [rank_env(SLURM_PROCID=r, SLURM_NTASKS=2, SLURM_LOCALID=0, SLURM_STEP_ID=0,
                         SLURM_JOB_NODELIST="tbfleet[1-2]", MASTER_PORT=PORT) for r in (0, 1)]
        reports = self.pair(("1", "2"), envs)
        self.check_world(reports, ("tbfleet1", "tbfleet2"), f"tbfleet1:{PORT}", "slurm")
        self.assertEqual([r["context"]["gloo_device"] for r in reports], [f"{NET}.2", f"{NET}.3"])
        self.record("veth", "slurm-style", reports)

    def test_loopback_for_comparison(self):
        envs = [rank_env(RANK=r, WORLD_SIZE=2, LOCAL_RANK=r, MASTER_ADDR="127.0.0.1", MASTER_PORT=PORT) for r in (0, 1)]
        reports = self.pair(("1", "1"), envs)
        self.check_world(reports, ("tbfleet1", "tbfleet1"), f"127.0.0.1:{PORT}", "env")
        self.assertEqual([r["context"]["gloo_device"] for r in reports], ["127.0.0.1", "127.0.0.1"])
        self.record("loopback", "torchrun-style", reports)

    def test_srun_on_two_nodes(self):
        env = rank_env(SLURM_CONF=os.path.join(CLUSTER, "slurm.conf"), MASTER_PORT=PORT)
        result = subprocess.run(["srun", "-N", "2", "-n", "2", "--exclusive", f"--output={self.tmp}/rank%t.json",
                                 self.program, *FLAGS, "--benchmark_format=json"], env=env, capture_output=True,
                                text=True, timeout=240)
        self.assertEqual(result.returncode, 0, result.stderr)
        reports = []
        for rank in (0, 1):
            with open(self.path(f"rank{rank}.json")) as f:
                reports.append(json.load(f))
        self.check_world(reports, ("tbfleet1", "tbfleet2"), f"tbfleet1:{PORT}", "slurm")
        self.assertEqual([r["context"]["gloo_device"] for r in reports], [f"{NET}.2", f"{NET}.3"])
        self.record("veth", "srun", reports)

    def test_known_answer_across_hosts(self):
        program = os.path.join(BUILD, "tests", "cpp", "workload_unit_tests")
        envs = [rank_env(THREADBURN_DDP_KNOWN_ANSWER=1, RANK=r, WORLD_SIZE=2, MASTER_ADDR=f"{NET}.2",
                         MASTER_PORT=PORT) for r in (0, 1)]
        out = self.start_ranks(("1", "2"), envs, [program, "--gtest_filter=DdpKnownAnswer.AcrossProcesses"])
        for rank, (rc, stdout, stderr, _) in enumerate(out):
            self.assertEqual(rc, 0, stdout[-3000:] + stderr)
            self.assertIn(f"known answer: rank {rank} of 2, gloo device {NET}.{rank + 2}, master {NET}.2:{PORT}",
                          stdout)
            self.assertIn("[  PASSED  ] 1 test.", stdout)

    def test_unreachable_host_times_out(self):
        envs = [rank_env(RANK=r, WORLD_SIZE=2, MASTER_ADDR=f"{NET}.2", MASTER_PORT=PORT) for r in (0, 1)]
        out = self.start_ranks(("1", "x"), envs, [self.program, *FLAGS, "--timeout_s=5"], timeout=120)
        (rc0, _, err0, t0), (rc1, _, err1, t1) = out
        self.assertEqual((rc0, rc1), (2, 2), err0 + err1)
        self.assertEqual(err0.strip(), f"ddp_step_bench: error: rank 0 of 2: rank(s) 1 did not arrive at {NET}.2:{PORT} "
                                       "within 5 s (started? same MASTER_ADDR/MASTER_PORT?)")
        self.assertEqual(len(err1.strip().splitlines()), 1, err1)
        self.assertRegex(err1, rf"^ddp_step_bench: error: rank 1 of 2: joining the TCPStore at {NET}\.2:{PORT} .*"
                               r"timed out after 5s")
        self.assertLess(max(t0, t1), 60)  # the timeout, plus start-up; never a hang


if __name__ == "__main__":
    unittest.main()
