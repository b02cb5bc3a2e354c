"""python/threadburn/engine/slurm.py against a real Slurm: the local cluster of
scripts/local_slurm.sh. Skipped unless THREADBURN_SLURM_DIR names one that runs:

    sudo scripts/local_slurm.sh start
    eval "$(scripts/local_slurm.sh env)"      # sets THREADBURN_SLURM_DIR and SLURM_CONF
    /usr/bin/python3 -m unittest discover -s tests/python -p 'test_slurm_live.py' -v
    sudo scripts/local_slurm.sh stop
"""
import os
import subprocess
import sys
import tempfile
import time
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
from threadburn.engine import slurm  # noqa: E402

CLUSTER = os.environ.get("THREADBURN_SLURM_DIR", "")


def _cluster_running():
    if not CLUSTER:
        return False, "THREADBURN_SLURM_DIR is not set (see scripts/local_slurm.sh)"
    try:
        status = subprocess.run(["bash", os.path.join(REPO, "scripts", "local_slurm.sh"),
                                 "status", CLUSTER], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"scripts/local_slurm.sh status {CLUSTER} did not run: {e}"
    if status.returncode != 0:
        return False, f"no local Slurm runs in THREADBURN_SLURM_DIR={CLUSTER}"
    return True, ""


RUNNING, WHY_NOT = _cluster_running()
TIMEOUT_S = 120


@unittest.skipUnless(RUNNING, WHY_NOT)
class LocalCluster(unittest.TestCase):
    def setUp(self):
        self.env = {"SLURM_CONF": os.path.join(CLUSTER, "slurm.conf")}
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.tmp = self._tmp.name
        os.chmod(self.tmp, 0o755)   # readable by the job, whoever it runs as

    def script(self, body):
        path = os.path.join(self.tmp, "task.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\n" + body)
        os.chmod(path, 0o755)
        return path

    def submit(self, body, n_tasks, **kwargs):
        job = slurm.sbatch_array(self.script(body), n_tasks, job_name="tb-live-test",
                                 options=[f"--output={self.tmp}/slurm-%A_%a.out"],
                                 env=self.env, cwd=self.tmp, **kwargs)
        self.addCleanup(slurm.cancel, job, env=self.env)   # a no-op once it has ended
        return job

    def test_array_runs_every_task(self):
        job = self.submit('echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_JOB_ID" '
                          '> "task_$SLURM_ARRAY_TASK_ID.txt"\n', 3)
        progress = []
        states = slurm.wait(job, 3, poll_s=0.5, on_progress=progress.append,
                            timeout_s=TIMEOUT_S, env=self.env)
        self.assertEqual(states, {0: "COMPLETED", 1: "COMPLETED", 2: "COMPLETED"})
        for task in range(3):
            with open(os.path.join(self.tmp, f"task_{task}.txt")) as f:
                self.assertEqual(f.read(), f"task {task} of {job}\n")
        self.assertEqual(progress[-1], {"pending": 0, "running": 0, "done": 3, "failed": 0})
        self.assertEqual(slurm.array_states(job, env=self.env), states)
        # The durable record (the jobcomp file here) agrees with squeue.
        self.assertEqual(slurm.completion_records(job, env=self.env), states)

    def test_failing_task(self):
        job = self.submit('exit "$SLURM_ARRAY_TASK_ID"\n', 2)
        states = slurm.wait(job, 2, poll_s=0.5, timeout_s=TIMEOUT_S, env=self.env)
        self.assertEqual(states, {0: "COMPLETED", 1: "FAILED"})

    def test_cancel_one_task(self):
        job = self.submit("sleep 300\n", 2, max_parallel=2)
        deadline = time.monotonic() + TIMEOUT_S
        while slurm.array_states(job, env=self.env).get(0) != "RUNNING":
            self.assertLess(time.monotonic(), deadline, "task 0 never started")
            time.sleep(0.2)
        slurm.cancel(job, 0, env=self.env)
        while slurm.array_states(job, env=self.env).get(0) != "CANCELLED":
            self.assertLess(time.monotonic(), deadline, "task 0 was not cancelled")
            time.sleep(0.2)
        self.assertNotIn(slurm.array_states(job, env=self.env).get(1),
                         slurm.FINAL_STATES, "cancelling task 0 ended task 1 too")
        slurm.cancel(job, env=self.env)
        states = slurm.wait(job, 2, poll_s=0.5, timeout_s=TIMEOUT_S, env=self.env)
        self.assertEqual(states, {0: "CANCELLED", 1: "CANCELLED"})
        self.assertEqual(slurm.completion_records(job, env=self.env), states)

    def test_cancel_before_start(self):
        # --begin keeps the tasks pending.
        job = slurm.sbatch_array(self.script("true\n"), 3, job_name="tb-live-test",
                                 options=["--begin=now+1hour"], env=self.env, cwd=self.tmp)
        self.addCleanup(slurm.cancel, job, env=self.env)
        self.assertEqual(slurm.array_states(job, env=self.env),
                         {0: "PENDING", 1: "PENDING", 2: "PENDING"})
        slurm.cancel(job, env=self.env)
        states = slurm.wait(job, 3, poll_s=0.5, timeout_s=TIMEOUT_S, env=self.env)
        self.assertEqual(states, {0: "CANCELLED", 1: "CANCELLED", 2: "CANCELLED"})
        # Never split off the array job: the jobcomp file has one line for all three.
        self.assertEqual(slurm.completion_records(job, env=self.env, n_tasks=3), states)

    def test_refused_job(self):
        with self.assertRaisesRegex(slurm.SlurmError, "^sbatch refused the job: .*partition"):
            slurm.sbatch_array(self.script("true\n"), 1, job_name="tb-live-test",
                               options=["--partition=no-such-partition"], env=self.env)


if __name__ == "__main__":
    unittest.main()
