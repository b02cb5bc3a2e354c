"""The results file of `threadburn sweep`: an existing --out, --resume of a
finished, a damaged and a SIGKILLed sweep, Ctrl-C: whole runs only, nothing
lost or run twice."""
import os
import shlex
import signal
import subprocess
import time
import unittest

import helpers
from test_sweep import TWO_POINTS, SweepTest
from threadburn.lib import schema

SLOW = """
    repetitions = 3
    [[study]]
    bench = "optimizer_step"
    optimizer = "sgd"
    gap_ms = [0, 10]
    env = {OMP_NUM_THREADS = [1, 2, 3]}
"""


class ResultsFile(SweepTest):
    def whole_lines(self):
        with open(self.out, "rb") as f:
            data = f.read()
        self.assertTrue(data.endswith(b"\n"))
        return data

    def assert_each_run_once(self, expected_rows):
        rows = self.rows()
        self.assertEqual(len(rows), expected_rows)
        ids = [(r["run_key"], r["benchmark"], r["proc_index"]) for r in rows]
        self.assertEqual(len(set(ids)), len(ids))
        for key in {r["run_key"] for r in rows}:
            group = [r for r in rows if r["run_key"] == key]
            self.assertEqual(len(group), int(group[0]["run_rows"]))
        width = len(helpers.read_header(self.out))
        for row in rows:
            self.assertEqual(len(row), width)
            self.assertNotIn(None, row.values())
            self.assertEqual(row["status"], "ok")

    def test_existing_out_needs_resume_or_force(self):
        helpers.write_file(self.out, "precious\n")
        result = self.sweep(self.grid(TWO_POINTS), ok=False)
        helpers.assert_one_line_error(self, result, f"{self.out}: exists; pass --resume to continue it or "
                                      "--force to replace it")
        with open(self.out) as f:
            self.assertEqual(f.read(), "precious\n")
        result = self.sweep(self.grid(TWO_POINTS), "--resume", ok=False)
        helpers.assert_one_line_error(self, result, "its header differs from what this campaign writes")
        with open(self.out) as f:
            self.assertEqual(f.read(), "precious\n")
        both = self.sweep(self.grid(TWO_POINTS), "--force", "--resume", ok=False)
        helpers.assert_one_line_error(self, both, "argument --resume: not allowed with argument --force")
        self.sweep(self.grid(TWO_POINTS), "--force")
        self.assertEqual(len(self.rows()), 8)

    def test_resume_needs_the_file(self):
        result = self.sweep(self.grid(TWO_POINTS), "--resume", ok=False)
        helpers.assert_one_line_error(self, result, f"{self.out}: --resume: no such file")

    def test_resume_of_a_finished_file_runs_nothing(self):
        self.sweep(self.grid(TWO_POINTS))
        before = self.whole_lines()
        log = self.path("log")
        result = self.sweep(self.grid(TWO_POINTS), "--resume", env=self.env(FAKE_LOG=log))
        self.assertIn("4 runs of 2 points, 4 already in", result.stdout)
        self.assertEqual(self.runs_logged(log), [])
        self.assertEqual(self.whole_lines(), before)

    def test_resume_keeps_the_seed_of_the_file(self):
        self.sweep(self.grid(TWO_POINTS))
        args = [a for a in self.args(self.grid(TWO_POINTS), "--resume") if a not in ("--seed", "11")]
        result = helpers.threadburn(*args, env=self.env())
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("seed 11 (--seed 11 repeats this order)", result.stdout)

    def test_resume_drops_a_partial_line_and_unfinished_runs(self):
        grid = self.grid(TWO_POINTS)
        self.sweep(grid)
        lines = self.whole_lines().split(b"\n")[:-1]
        # Cut inside the last run: its first row survives, its second is half there.
        with open(self.out, "wb") as f:
            f.write(b"\n".join(lines[:-1]) + b"\n" + lines[-1][:25])
        log = self.path("log")
        result = self.sweep(grid, "--resume", env=self.env(FAKE_LOG=log))
        self.assertIn("dropped 1 rows of unfinished runs and a partial line", result.stdout)
        self.assertEqual(len(self.runs_logged(log)), 1)  # only the unfinished run ran again
        self.assertTrue(self.whole_lines().startswith(b"\n".join(lines[:-2]) + b"\n"))
        self.assert_each_run_once(8)

    def test_resume_drops_a_run_with_rows_missing(self):
        grid = self.grid(TWO_POINTS)
        self.sweep(grid)
        lines = self.whole_lines().split(b"\n")[:-1]
        with open(self.out, "wb") as f:  # the second row of the first run is gone; whole lines only
            f.write(b"\n".join(lines[:2] + lines[3:]) + b"\n")
        log = self.path("log")
        result = self.sweep(grid, "--resume", env=self.env(FAKE_LOG=log))
        self.assertIn("dropped 1 rows of unfinished runs\n", result.stdout)
        self.assertEqual(len(self.runs_logged(log)), 1)
        self.assert_each_run_once(8)

    def start_slow(self, **fake):
        env = self.env(FAKE_SLEEP_S=1.0, **fake)  # 9 runs of 1 s: a loaded machine still signals mid-sweep (0.3 s: once too late)
        return subprocess.Popen(helpers.threadburn_cmd(*self.args(self.grid(SLOW))), env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)

    def wait_for_rows(self, proc, count):
        """Until the file holds `count` rows (generous deadline: a slow machine is fine)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if os.path.exists(self.out):
                with open(self.out, "rb") as f:
                    if f.read().count(b"\n") >= 1 + count:
                        return
            time.sleep(0.02)
        proc.kill()
        self.fail(f"the sweep wrote fewer than {count} rows: {proc.communicate()}")

    def test_resume_after_sigkill_loses_and_duplicates_nothing(self):
        proc = self.start_slow()
        self.wait_for_rows(proc, 4)
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        with open(self.out, "rb") as f:
            killed = f.read()
        complete = killed[:killed.rfind(b"\n") + 1]
        self.assertGreaterEqual(complete.count(b"\n"), 1 + 4)
        self.assertLess(complete.count(b"\n"), 1 + 18)
        log = self.path("log")
        result = self.sweep(self.grid(SLOW), "--resume", env=self.env(FAKE_LOG=log))
        self.assertTrue(self.whole_lines().startswith(complete))
        self.assert_each_run_once(3 * 3 * 2)
        self.assertEqual(len({r["order_index"] for r in self.rows()}), 9)
        done_before = (complete.count(b"\n") - 1) // 2
        self.assertEqual(len(self.runs_logged(log)), 9 - done_before)
        self.assertIn(f"9 runs of 3 points, {done_before} already in", result.stdout)
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp" in f or f.endswith(".work")], [])

    def test_ctrl_c_leaves_only_whole_runs_and_says_how_to_resume(self):
        proc = self.start_slow()
        self.wait_for_rows(proc, 2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
        self.assertEqual(proc.returncode, 130, err)
        self.whole_lines()
        rows = self.rows()
        self.assertTrue(rows)
        for key in {r["run_key"] for r in rows}:  # every run in the file is whole
            self.assertEqual(sum(r["run_key"] == key for r in rows), 2, key)
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp" in f or f.endswith(".work")], [])
        line = next(ln for ln in err.splitlines() if "Continue with: " in ln)
        self.assertIn(f"{self.out} holds every finished run", line)
        command = shlex.split(line.split("Continue with: ", 1)[1])
        self.assertEqual(command[:2], ["threadburn", "sweep"])
        self.assertEqual(command[-5:], ["--resume", "--out", self.out, "--seed", "11"])
        # The command it prints finishes the sweep.
        result = subprocess.run(helpers.threadburn_cmd(*command[1:]), capture_output=True, text=True,
                                env=self.env(), timeout=120)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assert_each_run_once(3 * 3 * 2)


class Header(SweepTest):
    def test_a_file_of_other_programs_is_not_resumed(self):
        self.sweep(self.grid(TWO_POINTS))
        with open(self.out) as f:
            text = f.read()
        with open(self.out, "w") as f:
            f.write(text.replace(",repro\n", ",repro_line\n", 1))
        result = self.sweep(self.grid(TWO_POINTS), "--resume", ok=False)
        helpers.assert_one_line_error(self, result, f"{self.out}: its header differs from what this campaign writes "
                                      f"(schema {schema.SCHEMA_VERSION}")


if __name__ == "__main__":
    unittest.main()
