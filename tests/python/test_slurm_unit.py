"""python/threadburn/engine/slurm.py against fake Slurm commands: no Slurm needed.

Each test writes fake sbatch/squeue/scontrol/sacct/scancel executables into a
temporary directory put first on PATH. A fake answers its n-th call with the
n-th canned response (the last one again once they run out) and logs its
arguments, working directory and SLURM_CONF.
"""
import json
import os
import sys
import tempfile
import textwrap
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "python"))
from threadburn.engine import slurm  # noqa: E402

FAKE = textwrap.dedent("""\
    #!{python}
    import json, os, sys, time
    here, name = os.path.split(os.path.abspath(sys.argv[0]))
    log = os.path.join(here, name + ".calls")
    with open(log, "a") as f:
        f.write(json.dumps({{"argv": sys.argv[1:], "cwd": os.getcwd(),
                            "SLURM_CONF": os.environ.get("SLURM_CONF")}}) + "\\n")
    with open(log) as f:
        n = sum(1 for _ in f) - 1
    with open(os.path.join(here, name + ".json")) as f:
        responses = json.load(f)
    r = responses[min(n, len(responses) - 1)]
    time.sleep(r.get("sleep", 0))
    sys.stdout.write(r.get("out", ""))
    sys.stderr.write(r.get("err", ""))
    sys.exit(r.get("rc", 0))
""")

COMMANDS = ("sbatch", "squeue", "scontrol", "sacct", "scancel")


def config_text(accounting="accounting_storage/none", jobcomp="jobcomp/none", jobcomp_loc="(null)"):
    """An excerpt of `scontrol show config`, in its layout."""
    return textwrap.dedent(f"""\
        Configuration data as of 2026-11-22T02:20:06
        AccountingStorageBackupHost = (null)
        AccountingStorageType   = {accounting}
        ClusterName             = threadburn
        JobCompHost             = localhost
        JobCompLoc              = {jobcomp_loc}
        JobCompType             = {jobcomp}
        MinJobAge               = 3600 sec

        Cgroup Support Configuration:
        AllowedRAMSpace         = 100.0%

        Slurmctld(primary) at vm is UP
        """)


def jobcomp_line(job, array_job, task, state):
    """One line of a jobcomp/filetxt file, as Slurm 22.05 writes it; with
    array_job None, the line of an array's tasks that never started."""
    array = "" if array_job is None else f"ArrayJobId={array_job} ArrayTaskId={task} "
    return (f"JobId={job} UserId=root(0) GroupId=root(0) Name=wrap JobState={state} "
            "Partition=threadburn TimeLimit=UNLIMITED StartTime=2026-11-22T02:13:37 "
            "EndTime=2026-11-22T02:13:37 NodeList=vm NodeCnt=1 ProcCnt=1 WorkDir=/tmp "
            "ReservationName= Tres=cpu=1,mem=24105M,node=1,billing=1 Account= QOS= WcKey= "
            "Cluster=unknown SubmitTime=2026-11-22T02:13:35 EligibleTime=2026-11-22T02:13:37 "
            f"{array}DerivedExitCode=0:0 ExitCode=0:0 \n")


INVALID_JOB = {"rc": 1, "err": "slurm_load_jobs error: Invalid job id specified\n"}


class FakeSlurm(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.tmp = self._tmp.name
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        for name in COMMANDS:
            path = os.path.join(self.bin, name)
            with open(path, "w") as f:
                f.write(FAKE.format(python=sys.executable))
            os.chmod(path, 0o755)
            self.canned(name, {"rc": 99, "err": f"{name}: error: fake {name} has no canned output\n"})
        self.canned("scontrol", {"out": config_text()})
        old_path = os.environ.get("PATH", "")
        os.environ["PATH"] = self.bin + os.pathsep + old_path
        self.addCleanup(os.environ.__setitem__, "PATH", old_path)
        slurm._config_cache.clear()
        self.addCleanup(slurm._config_cache.clear)

    def canned(self, name, *responses):
        with open(os.path.join(self.bin, name + ".json"), "w") as f:
            json.dump(list(responses), f)

    def calls(self, name):
        try:
            with open(os.path.join(self.bin, name + ".calls")) as f:
                return [json.loads(line) for line in f]
        except FileNotFoundError:
            return []


class Sbatch(FakeSlurm):
    def test_command_line_and_job_id(self):
        self.canned("sbatch", {"out": "1234\n"})
        job = slurm.sbatch_array("/x/task.sh", 5, job_name="tb-sweep",
                                 options=("--partition=threadburn", "--exclusive", "--time=5"),
                                 max_parallel=2, env={"SLURM_CONF": "/c/slurm.conf"}, cwd=self.tmp)
        self.assertEqual(job, "1234")
        [call] = self.calls("sbatch")
        self.assertEqual(call["argv"], ["--parsable", "--array=0-4%2", "--job-name=tb-sweep",
                                        "--partition=threadburn", "--exclusive", "--time=5",
                                        "/x/task.sh"])
        self.assertEqual(os.path.realpath(call["cwd"]), os.path.realpath(self.tmp))
        self.assertEqual(call["SLURM_CONF"], "/c/slurm.conf")

    def test_no_max_parallel_and_cluster_suffix(self):
        self.canned("sbatch", {"out": "77;threadburn\n"})
        self.assertEqual(slurm.sbatch_array("t.sh", 1, job_name="one"), "77")
        self.assertEqual(self.calls("sbatch")[0]["argv"],
                         ["--parsable", "--array=0-0", "--job-name=one", "t.sh"])

    def test_refusal_names_sbatch_message(self):
        self.canned("sbatch", {"rc": 1, "err": "sbatch: error: invalid partition? see below\n"
                               "sbatch: error: Batch job submission failed: "
                               "Invalid partition name specified\n"})
        with self.assertRaises(slurm.SlurmError) as cm:
            slurm.sbatch_array("t.sh", 3, job_name="x", options=["-p", "nope"])
        self.assertEqual(str(cm.exception), "sbatch refused the job: Batch job submission "
                                            "failed: Invalid partition name specified")

    def test_no_job_id_printed(self):
        self.canned("sbatch", {"out": "Submitted batch job\n"})
        with self.assertRaisesRegex(slurm.SlurmError, "^sbatch printed no job id"):
            slurm.sbatch_array("t.sh", 3, job_name="x")

    def test_options_must_not_be_one_string(self):
        with self.assertRaises(TypeError):
            slurm.sbatch_array("t.sh", 3, job_name="x", options="--exclusive")
        self.assertEqual(self.calls("sbatch"), [])

    def test_missing_command(self):
        empty = os.path.join(self.tmp, "empty")
        os.mkdir(empty)
        os.environ["PATH"] = empty
        with self.assertRaises(slurm.SlurmError) as cm:
            slurm.sbatch_array("t.sh", 3, job_name="x")
        self.assertEqual(str(cm.exception), "sbatch: not found on PATH (install slurm-wlm, "
                                            "or run where Slurm's client commands are)")

    def test_command_that_hangs_times_out(self):
        self.canned("sbatch", {"sleep": 5, "out": "1\n"})
        old = slurm.COMMAND_TIMEOUT_S
        slurm.COMMAND_TIMEOUT_S = 0.5
        self.addCleanup(setattr, slurm, "COMMAND_TIMEOUT_S", old)
        with self.assertRaisesRegex(slurm.SlurmError, r"^sbatch did not answer within 0.5 s"):
            slurm.sbatch_array("t.sh", 3, job_name="x")


class States(FakeSlurm):
    def test_squeue_parsing(self):
        self.canned("squeue", {"out": "3|PENDING\n2|PENDING\n1|RUNNING\n0|COMPLETED\n"})
        self.assertEqual(slurm.array_states("41"),
                         {0: "COMPLETED", 1: "RUNNING", 2: "PENDING", 3: "PENDING"})
        [call] = self.calls("squeue")
        self.assertEqual(call["argv"], ["--noheader", "--array", "--states=all", "--jobs=41",
                                        "--format=%K|%T"])

    def test_jobcomp_file_fills_in_finished_tasks(self):
        path = os.path.join(self.tmp, "jobcomp.txt")
        with open(path, "w") as f:
            f.write(jobcomp_line(42, 41, 0, "COMPLETED"))
            f.write(jobcomp_line(43, 41, 1, "NODE_FAIL"))     # then requeued...
            f.write(jobcomp_line(410, 410, 3, "FAILED"))      # another array
            f.write(jobcomp_line(44, 410, 4, "FAILED"))
            f.write(jobcomp_line(43, 41, 1, "COMPLETED"))     # ...and done
            f.write(jobcomp_line(41, 41, 3, "TIMEOUT"))
        self.canned("scontrol", {"out": config_text(jobcomp="jobcomp/filetxt", jobcomp_loc=path)})
        self.canned("squeue", {"out": "2|RUNNING\n3|RUNNING\n"}, INVALID_JOB)
        # squeue's live view wins over the file.
        self.assertEqual(slurm.array_states(41),
                         {0: "COMPLETED", 1: "COMPLETED", 2: "RUNNING", 3: "RUNNING"})
        # All of the job gone from squeue: the file alone.
        self.assertEqual(slurm.array_states(41), {0: "COMPLETED", 1: "COMPLETED", 3: "TIMEOUT"})
        self.assertEqual(len(self.calls("scontrol")), 1)   # the config is read once

    def test_jobcomp_tasks_cancelled_before_they_started(self):
        # Tasks 2 and 3 never left the array job: one line for JobId=41, no task ids.
        path = os.path.join(self.tmp, "jobcomp.txt")
        with open(path, "w") as f:
            f.write(jobcomp_line(42, 41, 0, "COMPLETED"))
            f.write(jobcomp_line(43, 41, 1, "FAILED"))
            f.write(jobcomp_line(41, None, None, "CANCELLED"))
            f.write(jobcomp_line(410, None, None, "FAILED"))   # another job
        self.canned("scontrol", {"out": config_text(jobcomp="jobcomp/filetxt", jobcomp_loc=path)})
        self.canned("squeue", INVALID_JOB)
        self.assertEqual(slurm.array_states(41, n_tasks=4),
                         {0: "COMPLETED", 1: "FAILED", 2: "CANCELLED", 3: "CANCELLED"})
        self.assertEqual(slurm.array_states(41), {0: "COMPLETED", 1: "FAILED"})
        self.assertEqual(slurm.wait(41, 4, poll_s=0, timeout_s=10),
                         {0: "COMPLETED", 1: "FAILED", 2: "CANCELLED", 3: "CANCELLED"})

    def test_no_jobcomp_file_yet(self):
        path = os.path.join(self.tmp, "missing.txt")
        self.canned("scontrol", {"out": config_text(jobcomp="jobcomp/filetxt", jobcomp_loc=path)})
        self.canned("squeue", {"out": "0|PENDING\n"})
        self.assertEqual(slurm.array_states(41), {0: "PENDING"})

    def test_sacct_where_accounting_is_configured(self):
        self.canned("scontrol", {"out": config_text(accounting="accounting_storage/slurmdbd")})
        # Tasks cancelled before they started: one line for a range of them.
        self.canned("sacct", {"out": "41_0|COMPLETED\n41_1|CANCELLED by 0\n41_4|FAILED\n"
                                     "41_[2-3,5-6%2]|CANCELLED by 0\n410_7|FAILED\n"})
        self.canned("squeue", INVALID_JOB)
        self.assertEqual(slurm.array_states("41"),
                         {0: "COMPLETED", 1: "CANCELLED", 2: "CANCELLED", 3: "CANCELLED",
                          4: "FAILED", 5: "CANCELLED", 6: "CANCELLED"})
        self.assertEqual(self.calls("sacct")[0]["argv"],
                         ["--noheader", "--parsable2", "--allocations", "--jobs=41",
                          "--format=JobID,State"])

    def test_no_record_kept(self):
        self.canned("squeue", INVALID_JOB)
        self.assertEqual(slurm.array_states(41), {})
        self.assertEqual(self.calls("sacct"), [])

    def test_squeue_failure(self):
        self.canned("squeue", {"rc": 1, "err": "slurm_load_jobs error: Unable to contact slurm "
                                               "controller (connect failure)\n"})
        with self.assertRaises(slurm.SlurmError) as cm:
            slurm.array_states(41)
        self.assertEqual(str(cm.exception), "squeue failed (exit status 1): slurm_load_jobs "
                                            "error: Unable to contact slurm controller "
                                            "(connect failure)")

    def test_bad_job_id(self):
        with self.assertRaises(ValueError):
            slurm.array_states("41_2; rm -rf /")


class Cancel(FakeSlurm):
    def test_task_and_whole_job(self):
        self.canned("scancel", {"out": ""})
        slurm.cancel("41", 2)
        slurm.cancel(41)
        self.assertEqual([c["argv"] for c in self.calls("scancel")], [["41_2"], ["41"]])

    def test_already_finished_is_no_error(self):
        self.canned("scancel", {"rc": 1, "err": "scancel: error: Kill job error on job id 41_2: "
                                                "Job/step already completing or completed\n"})
        slurm.cancel(41, 2)

    def test_failure(self):
        self.canned("scancel", {"rc": 1, "err": "scancel: error: Kill job error on job id 41: "
                                                "Access/permission denied\n"})
        with self.assertRaisesRegex(slurm.SlurmError, "^scancel failed .*Access/permission denied$"):
            slurm.cancel(41)


def counts(pending=0, running=0, done=0, failed=0):
    return {"pending": pending, "running": running, "done": done, "failed": failed}


class Wait(FakeSlurm):
    # timeout_s everywhere: a broken wait() fails these tests instead of hanging.
    def test_progress_counts_and_result(self):
        self.canned("squeue",
                    {"out": "1|PENDING\n2|PENDING\n"},            # task 0 not listed yet
                    {"out": "0|RUNNING\n1|RUNNING\n2|PENDING\n"},
                    {"out": "0|RUNNING\n1|RUNNING\n2|PENDING\n"},  # no change: no call
                    {"out": "0|COMPLETED\n1|FAILED\n2|COMPLETING\n"},
                    {"out": "0|COMPLETED\n1|FAILED\n2|CANCELLED\n"})
        progress = []
        states = slurm.wait(41, 3, poll_s=0, on_progress=progress.append, timeout_s=10)
        self.assertEqual(progress, [counts(pending=3), counts(pending=1, running=2),
                                    counts(running=1, done=1, failed=1),
                                    counts(done=1, failed=2)])
        self.assertEqual(states, {0: "COMPLETED", 1: "FAILED", 2: "CANCELLED"})
        self.assertEqual(len(self.calls("squeue")), 5)

    def test_finished_tasks_from_the_completion_file(self):
        path = os.path.join(self.tmp, "jobcomp.txt")
        with open(path, "w") as f:
            f.write(jobcomp_line(50, 50, 1, "COMPLETED"))
            f.write(jobcomp_line(51, 50, 0, "OUT_OF_MEMORY"))
        self.canned("scontrol", {"out": config_text(jobcomp="jobcomp/filetxt", jobcomp_loc=path)})
        self.canned("squeue", {"out": "0|RUNNING\n1|RUNNING\n"}, INVALID_JOB)
        progress = []
        states = slurm.wait("50", 2, poll_s=0, on_progress=progress.append, timeout_s=10)
        self.assertEqual(states, {0: "OUT_OF_MEMORY", 1: "COMPLETED"})
        self.assertEqual(progress, [counts(running=2), counts(done=1, failed=1)])

    def test_timeout(self):
        self.canned("squeue", {"out": "0|PENDING\n"})
        with self.assertRaisesRegex(slurm.SlurmError, r"^job 41: 1 of 1 task\(s\) not finished "
                                                      r"after 0.2 s$"):
            slurm.wait(41, 1, poll_s=0.05, timeout_s=0.2)

    def test_tasks_vanishing_without_record(self):
        self.canned("squeue", {"out": "0|RUNNING\n"}, INVALID_JOB)
        with self.assertRaisesRegex(slurm.SlurmError, r"task\(s\) 0 left squeue with no "
                                                      r"completion record"):
            slurm.wait(41, 1, poll_s=0, timeout_s=10)

    def test_pending_task_cancelled_alone_leaves_no_record(self):
        # scancel JOB_1 while it waits: Slurm 22.05 drops it from squeue and writes no record.
        self.canned("squeue", {"out": "0|RUNNING\n1|PENDING\n"}, {"out": "0|RUNNING\n"},
                    {"out": "0|COMPLETED\n"})
        states = slurm.wait(41, 2, poll_s=0, timeout_s=10)
        self.assertEqual(states, {0: "COMPLETED", 1: "CANCELLED"})

    def test_task_never_seen_while_the_rest_finished(self):
        # The wait began after task 2 had been dropped: once nothing is pending
        # or running, two polls that agree make it CANCELLED.
        self.canned("squeue", {"out": "0|RUNNING\n1|PENDING\n"}, {"out": "0|COMPLETED\n1|RUNNING\n"},
                    {"out": "0|COMPLETED\n1|COMPLETED\n"})
        progress = []
        states = slurm.wait(41, 3, poll_s=0, on_progress=progress.append, timeout_s=10)
        self.assertEqual(states, {0: "COMPLETED", 1: "COMPLETED", 2: "CANCELLED"})
        self.assertEqual(progress[-2:], [counts(pending=1, done=2), counts(done=2, failed=1)])

    def test_unknown_job(self):
        self.canned("squeue", INVALID_JOB)
        with self.assertRaisesRegex(slurm.SlurmError, "^job 41: unknown to squeue"):
            slurm.wait(41, 2, poll_s=0, timeout_s=10)


class Errors(unittest.TestCase):
    def test_one_line(self):
        self.assertEqual(str(slurm.SlurmError("squeue failed:\n  two\nlines")),
                         "squeue failed: two lines")


if __name__ == "__main__":
    unittest.main()
