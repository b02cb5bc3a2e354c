"""threadburn sweep --slurm on two nodes: the fleet of scripts/local_fleet.sh
(THREADBURN_FLEET_DIR; tests/python/fleet_live.sh starts one for ctest -L
fleet), each node a network namespace with its own slurmd and hostname.

* configs/fleet.toml through Slurm: tasks on both nodes, each row's host_name
  the node Slurm ran its task on, the rows key for key a local sweep's.
* A node dies mid-array (every process of its namespace killed): its task
  ends failed (no requeue), --resume submits exactly the runs without rows,
  which run on the surviving node; nothing lost or duplicated.
With THREADBURN_FLEET_RESULTS=DIR the two-node rows are copied to DIR/fleet.csv.
Needs the real build (the rows name the node the program ran on).
"""
import collections
import json
import os
import shutil
import subprocess
import time
import unittest

import helpers
from test_slurm_sweep import row_keys

from threadburn.engine import slurm

CLUSTER = os.environ.get("THREADBURN_FLEET_DIR", "")
BUILD = helpers.real_build_dir()
FLEET = ["bash", os.path.join(helpers.REPO, "scripts", "local_fleet.sh")]
NODES = ("tbfleet1", "tbfleet2")
RESULTS = os.environ.get("THREADBURN_FLEET_RESULTS", "")


RUNNING, WHY_NOT = helpers.private_cluster("local_fleet.sh", CLUSTER, "tests/python/fleet_live.sh", needs_build=True)

# Slow runs (3 gaps of 1.5 s), so a node can be killed while its task runs.
SLOW_GRID = """name = "fleet_slow"
repetitions = 2
timeout_s = 120

[[study]]
name = "slow"
bench = "optimizer_step"
optimizer = "sgd"
params = 100000
gap_ms = 1500
steps = 3
warmup = 0
env.OMP_NUM_THREADS = [1, 2]
"""


@unittest.skipUnless(RUNNING, WHY_NOT)
class TwoNodes(helpers.TempDir, unittest.TestCase):
    TIMEOUT_S = 300

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)
        self.env = helpers.clean_env(SLURM_CONF=os.path.join(CLUSTER, "slurm.conf"))
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            slurm.cancel(job, env=self.env)
        super().tearDown()

    def sweep(self, grid, out, *args):
        result = helpers.threadburn("sweep", grid, "--build-dir", BUILD, "--out", out, "--no-plot", "--seed", "7",
                                    *args, env=self.env, timeout=self.TIMEOUT_S)
        self.jobs += [line.split()[4].rstrip(":") for line in result.stdout.splitlines()
                      if line.startswith("sweep: submitted job array")]
        return result

    def task_nodes(self, job):
        """{task: node} as Slurm records it (squeue keeps finished tasks for MinJobAge)."""
        out = subprocess.run(["squeue", "-h", "-t", "all", "-r", "-j", job, "-o", "%K %N"], env=self.env,
                             capture_output=True, text=True, timeout=60).stdout
        return {int(t): n for t, n in (line.split() for line in out.splitlines() if len(line.split()) == 2)}

    def node_state(self, node):
        return subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], env=self.env, capture_output=True,
                              text=True, timeout=60).stdout.strip()

    def test_grid_over_both_nodes(self):
        grid = os.path.join(helpers.REPO, "configs", "fleet.toml")
        through, local = self.path("fleet.csv"), self.path("local.csv")
        result = self.sweep(grid, through, "--slurm")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("6 tasks of up to 1 runs (6 runs), sbatch --exclusive", result.stdout)
        rows = helpers.read_rows(through)
        self.assertEqual(len(rows), 12)  # 6 runs, 2 gaps each
        self.assertEqual({r["status"] for r in rows}, {"ok"}, [r["reason"] for r in rows])
        nodes = self.task_nodes(self.jobs[0])
        self.assertEqual(set(nodes.values()), set(NODES), "the tasks did not spread over both nodes")
        for r in rows:
            job, task = r["slurm_job"].split("_")
            self.assertEqual(job, self.jobs[0])
            # The program's own host_name (the node's hostname) is the node Slurm ran the task on.
            self.assertEqual(r["host_name"], nodes[int(task)], r["run_key"])
        self.assertEqual(self.sweep(grid, local).returncode, 0)
        self.assertEqual(row_keys(helpers.read_rows(local), None), row_keys(rows, None))
        if RESULTS:
            shutil.copy(through, os.path.join(RESULTS, "fleet.csv"))

    def test_node_dies_mid_array(self):
        grid = helpers.write_file(self.path("fleet_slow.toml"), SLOW_GRID)
        out = self.path("slow.csv")
        self.addCleanup(subprocess.run, FLEET + ["revive-node", "2", CLUSTER], capture_output=True, timeout=120)
        # --no-requeue: the dead node's task ends NODE_FAIL instead of running again by itself.
        result = self.sweep(grid, out, "--slurm", "--detach", "--sbatch=--no-requeue")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        job = self.jobs[0]
        deadline = time.monotonic() + 120
        while "tbfleet2" not in {n for t, n in self.task_nodes_running(job).items()}:
            self.assertLess(time.monotonic(), deadline, "no task ever ran on tbfleet2")
            time.sleep(0.2)
        killed = subprocess.run(FLEET + ["kill-node", "2", CLUSTER], capture_output=True, text=True, timeout=60)
        self.assertEqual(killed.returncode, 0, killed.stderr)
        states = slurm.wait(job, 4, poll_s=1.0, timeout_s=self.TIMEOUT_S, env=self.env)
        nodes = self.task_nodes(job)
        dead = {t for t, n in nodes.items() if n == "tbfleet2"}
        self.assertTrue(dead)
        for t, s in states.items():
            if t in dead:
                self.assertIn(s, slurm.FAILED_STATES, f"task {t} on the dead node")
            else:
                self.assertEqual((s, nodes[t]), ("COMPLETED", "tbfleet1"), f"task {t}")
        self.assertTrue(self.node_state("tbfleet2").startswith("down"), self.node_state("tbfleet2"))
        # The runs without rows: planned minus rows/ (a killed run leaves none, written aside).
        with open(self.path("slow.slurm", "plan.json")) as f:
            planned = {f"{r['point_key']}-r{r['rep']}" for task in json.load(f)["tasks"] for r in task}
        arrived = {n[:-len(".csv")] for n in os.listdir(self.path("slow.slurm", "rows")) if n.endswith(".csv")}
        missing = planned - arrived
        self.assertTrue(missing)
        resumed = self.sweep(grid, out, "--slurm", "--resume")
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        self.assertIn(f"{len(missing)} tasks of up to 1 runs ({len(missing)} runs)", resumed.stdout)
        rows = helpers.read_rows(out)
        self.assertEqual(collections.Counter(r["run_key"] for r in rows), {k: 1 for k in planned})
        rerun = [r for r in rows if r["run_key"] in missing]
        self.assertEqual({(r["host_name"], r["slurm_job"].split("_")[0]) for r in rerun}, {("tbfleet1", self.jobs[1])})
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        local = self.path("local.csv")
        self.assertEqual(self.sweep(grid, local).returncode, 0)
        self.assertEqual(row_keys(helpers.read_rows(local), None), row_keys(rows, None))

    def task_nodes_running(self, job):
        out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-r", "-j", job, "-o", "%K %N"], env=self.env,
                             capture_output=True, text=True, timeout=60).stdout
        return {int(t): n for t, n in (line.split() for line in out.splitlines() if len(line.split()) == 2)}


if __name__ == "__main__":
    unittest.main()
