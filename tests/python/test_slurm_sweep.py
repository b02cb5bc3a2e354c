"""threadburn sweep --slurm (python/threadburn/slurm_sweep.py).

Without a cluster: the flags' rules, no sbatch on PATH, and a merge that
refuses rows of another grid. With the local cluster of scripts/local_slurm.sh
(THREADBURN_SLURM_DIR; tests/python/slurm_live.sh starts one for ctest -L
slurm): a grid through Slurm gives the rows a local sweep gives, key for key;
a cancelled task's runs come back with --resume, nothing duplicated; a run
that fails inside a task gives failed rows; sbatch's refusal is one line.
The programs are the fake build (fake_program.py), so the tests take seconds.
"""
import collections
import json
import os
import subprocess
import unittest

import helpers
from helpers import assert_one_line_error, threadburn

from threadburn.engine import slurm

CLUSTER = os.environ.get("THREADBURN_SLURM_DIR", "")


RUNNING, WHY_NOT = helpers.private_cluster("local_slurm.sh", CLUSTER, "tests/python/slurm_live.sh")

GRID = """name = "tiny"
repetitions = 2
timeout_s = 60

[[study]]
name = "threads"
bench = "optimizer_step"
optimizer = "sgd"
env.OMP_NUM_THREADS = [1, 2]
steps = 3
"""

# What makes a row the same row: the run, the benchmark, what was asked for,
# its outcome and its place in the shuffled order.
KEY_COLUMNS = ("run_key", "point_key", "benchmark", "repetition", "proc_index", "status", "order_index", "seed")


def row_keys(rows, header):
    knobs = helpers.typed(rows[:1])[0].knob_columns if rows else ()
    return collections.Counter(tuple(r[c] for c in KEY_COLUMNS + tuple(knobs)) for r in rows)


class SlurmFlags(helpers.TempDir, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.build = helpers.make_fake_build(self.path("build"))
        self.grid = helpers.write_file(self.path("tiny.toml"), GRID)

    def sweep(self, *args, env=None):
        return threadburn("sweep", self.grid, "--build-dir", self.build, "--out", self.path("out.csv"),
                          "--no-plot", *args, env=env)

    def test_slurm_options_need_slurm(self):
        for flag in (["--partition", "cpu"], ["--time", "10"], ["--detach"], ["--merge"], ["--sbatch=--qos=x"],
                     ["--runs-per-task", "3"]):
            assert_one_line_error(self, self.sweep(*flag), f"{flag[0].split('=')[0]} needs --slurm")
        self.assertFalse(os.path.exists(self.path("out.csv")))

    def test_no_sbatch_on_path(self):
        # PATH with the system's commands but Slurm's.
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        for d in ("/usr/bin", "/bin"):
            for name in os.listdir(d):
                if not name.startswith(("sbatch", "squeue", "scancel", "scontrol", "sacct", "srun")) \
                        and not os.path.lexists(os.path.join(bin_dir, name)):
                    os.symlink(os.path.join(d, name), os.path.join(bin_dir, name))
        env = helpers.clean_env(PATH=bin_dir)
        result = self.sweep("--slurm", env=env)
        assert_one_line_error(self, result, "sbatch")
        # The CSV it created holds its header, nothing lost: --resume submits once sbatch is there.
        self.assertEqual(helpers.read_rows(self.path("out.csv")), [])

    def test_dry_run_says_how_many_tasks(self):
        result = self.sweep("--slurm", "--dry-run", "--runs-per-task", "3", "--partition", "cpu", "--shared")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("one job array of 2 tasks of up to 3 runs; sbatch --partition=cpu", result.stdout)

    def test_a_task_starts_from_the_programs_answers_in_the_plan(self):
        # Submitted to an sbatch that only prints a job id (--detach: no wait), then the array's
        # task 0 run by hand as Slurm would run it: its runs start the program, and none asks a
        # program to --describe itself again (the plan carries what they answered the sweep).
        bin_dir = self.path("bin")
        os.makedirs(bin_dir)
        helpers.write_file(os.path.join(bin_dir, "sbatch"), "#!/bin/sh\necho 4242\n")
        os.chmod(os.path.join(bin_dir, "sbatch"), 0o755)
        env = helpers.clean_env(PATH=f"{bin_dir}:{os.environ['PATH']}")
        result = self.sweep("--slurm", "--detach", "--runs-per-task", "2", env=env)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        task_log = self.path("task.log")
        task = subprocess.run([self.path("out.slurm", "task.sh")], capture_output=True, text=True, timeout=120,
                              env=helpers.clean_env(SLURM_ARRAY_TASK_ID="0", SLURM_ARRAY_JOB_ID="4242",
                                                    FAKE_LOG=task_log))
        self.assertEqual(task.returncode, 0, task.stdout + task.stderr)
        with open(task_log) as f:
            starts = [json.loads(line)["argv"] for line in f]
        self.assertEqual(len(starts), 2, starts)  # the task's two runs
        self.assertEqual([a for a in starts if "--describe" in a], [])
        self.assertEqual(len(os.listdir(self.path("out.slurm", "rows"))), 2)

    def test_merge_refuses_rows_of_another_grid(self):
        out = self.path("out.csv")
        self.assertEqual(threadburn("sweep", self.grid, "--build-dir", self.build, "--out", out, "--no-plot",
                                    "--seed", "3").returncode, 0)
        rows_dir = self.path("out.slurm", "rows")
        os.makedirs(rows_dir)
        helpers.write_file(os.path.join(rows_dir, "abc-r0.csv"), "schema_version,run_key\n3,abc-r0\n")
        result = self.sweep("--slurm", "--merge")
        assert_one_line_error(self, result, os.path.join(rows_dir, "abc-r0.csv"), "not merged")
        self.assertEqual(len(helpers.read_rows(out)), 8)  # 4 runs, 2 benchmarks each


@unittest.skipUnless(RUNNING, WHY_NOT)
class ThroughSlurm(helpers.TempDir, unittest.TestCase):
    TIMEOUT_S = 300

    def setUp(self):
        super().setUp()
        os.chmod(self.tmp, 0o755)
        self.build = helpers.make_fake_build(self.path("build"))
        self.grid = helpers.write_file(self.path("tiny.toml"), GRID)
        self.env = helpers.clean_env(SLURM_CONF=os.path.join(CLUSTER, "slurm.conf"))
        self.jobs = []

    def tearDown(self):
        for job in self.jobs:
            slurm.cancel(job, env=self.env)
        super().tearDown()

    def sweep(self, out, *args, env=None, timeout=TIMEOUT_S):
        result = threadburn("sweep", self.grid, "--build-dir", self.build, "--out", out, "--no-plot",
                            "--seed", "11", *args, env=env or self.env, timeout=timeout)
        self.jobs += [line.split()[4].rstrip(":") for line in result.stdout.splitlines()
                      if line.startswith("sweep: submitted job array")]
        return result

    def test_rows_equal_a_local_sweep(self):
        local, through = self.path("local.csv"), self.path("slurm.csv")
        self.assertEqual(self.sweep(local).returncode, 0)
        result = self.sweep(through, "--slurm", "--runs-per-task", "2")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("2 tasks of up to 2 runs (4 runs), sbatch --exclusive", result.stdout)
        self.assertRegex(result.stdout, r"job \d+: 0 pending, 0 running, 2 done, 0 failed")
        self.assertEqual(helpers.read_header(local), helpers.read_header(through))
        a, b = helpers.read_rows(local), helpers.read_rows(through)
        self.assertEqual(len(a), 8)  # 4 runs, 2 benchmarks each
        self.assertEqual(row_keys(a, helpers.read_header(local)), row_keys(b, helpers.read_header(through)))
        job = self.jobs[0]
        self.assertEqual({r["slurm_job"] for r in b}, {f"{job}_0", f"{job}_1"})
        self.assertTrue(all(r["host_name"] and r["num_cpus"] and r["cpu_model"] for r in b))
        self.assertEqual({r["slurm_job"] for r in a}, {""})

    def test_cancelled_task_is_resubmitted_by_resume(self):
        out = self.path("out.csv")
        # One task at a time, each run slow enough to cancel the last task before it starts.
        env = dict(self.env, FAKE_SLEEP_S="1")
        result = self.sweep(out, "--slurm", "--detach", "--max-parallel", "1", env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("detached", result.stdout)
        job = self.jobs[0]
        slurm.cancel(job, 3, env=self.env)
        states = slurm.wait(job, 4, poll_s=0.5, timeout_s=self.TIMEOUT_S, env=self.env)
        self.assertEqual(states[3], "CANCELLED")
        merged = self.sweep(out, "--slurm", "--merge")
        self.assertEqual(merged.returncode, 0, merged.stderr)
        self.assertIn("3 of 4 runs in", merged.stdout)
        self.assertIn("1 missing", merged.stdout)
        resumed = self.sweep(out, "--slurm", "--resume")
        self.assertEqual(resumed.returncode, 0, resumed.stdout + resumed.stderr)
        self.assertIn("1 tasks of up to 1 runs (1 runs)", resumed.stdout)
        rows = helpers.read_rows(out)
        self.assertEqual(sorted(collections.Counter(r["run_key"] for r in rows).values()), [2, 2, 2, 2])
        # The same rows, key for key, as a local sweep of the same seed.
        local = self.path("local.csv")
        self.assertEqual(self.sweep(local).returncode, 0)
        self.assertEqual(row_keys(rows, helpers.read_header(out)), row_keys(helpers.read_rows(local), helpers.read_header(local)))
        # A second --resume finds nothing to do and submits nothing.
        again = self.sweep(out, "--slurm", "--resume")
        self.assertIn("every run is in", again.stdout)
        self.assertEqual(len(self.jobs), 2)

    def test_a_run_failing_inside_a_task_gives_failed_rows(self):
        out = self.path("out.csv")
        env = dict(self.env, FAKE_EXIT_IF="OMP_NUM_THREADS=2")
        result = self.sweep(out, "--slurm", "--runs-per-task", "4", env=env)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        rows = helpers.read_rows(out)
        self.assertEqual(collections.Counter((r["OMP_NUM_THREADS"], r["status"]) for r in rows),
                         {("1", "ok"): 4, ("2", "failed"): 4})
        self.assertTrue(all("exit code 3" in r["reason"] for r in rows if r["status"] == "failed"),
                        [r["reason"] for r in rows])

    def test_sbatch_refusal_is_one_line(self):
        out = self.path("out.csv")
        result = self.sweep(out, "--slurm", "--partition", "no-such-partition")
        assert_one_line_error(self, result, "sbatch refused the job", "partition")
        self.assertEqual(helpers.read_rows(out), [])


if __name__ == "__main__":
    unittest.main()
