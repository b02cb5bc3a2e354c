"""scripts/sweep.py end to end, against tests/python/fake_bench.py."""
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
import unittest

import helpers
from threadburn_py import schema

LIB = helpers.preloadable_lib()

TWO_POINTS = """
    repetitions = 2
    [[study]]
    bench = "optimizer_step"
    gap_ms = [0, 300]
    runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = 50}]
"""


class SweepTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tb-sweep-")
        self.build = helpers.make_build_dir(os.path.join(self.tmp, "build"))
        self.out = os.path.join(self.tmp, "res.csv")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def grid(self, text, name="g"):
        return helpers.write_file(os.path.join(self.tmp, f"{name}.toml"), textwrap.dedent(text))

    def env(self, **fake):
        return helpers.clean_env(FAKE_BENCH_CPUS=2, **fake)

    def args(self, grid, *extra):
        return [grid, "--build-dir", self.build, "--libomp", LIB, "--out", self.out,
                "--seed", "11", "--no-plot"] + list(extra)

    def sweep(self, grid, *extra, env=None, timeout=60):
        return helpers.run_script("sweep.py", *self.args(grid, *extra), env=env or self.env(),
                                  timeout=timeout)

    def assert_whole_lines(self):
        with open(self.out, "rb") as f:
            data = f.read()
        self.assertTrue(data.endswith(b"\n"))
        return data


class Running(SweepTest):
    def test_rows_hold_knobs_effective_settings_counters_and_repro(self):
        result = self.sweep(self.grid(TWO_POINTS))
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = helpers.read_rows(self.out)
        self.assertEqual(len(rows), 2 * 2 * 2)  # points x repetitions x gaps
        self.assertEqual(list(rows[0]), list(schema.COLUMNS))
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        self.assertEqual({r["schema_version"] for r in rows}, {schema.SCHEMA_VERSION})
        llvm = [r for r in rows if r["runtime"] == "llvm" and r["gap_ms"] == "300"]
        self.assertEqual(len(llvm), 2)
        r = llvm[0]
        # the fake: (T-1) * min(KMP_BLOCKTIME, gap) = 1 * 50
        self.assertEqual((r["residual_cpu_ms"], r["tail_ms"], r["step_ms"]), ("50", "50", "10"))
        self.assertEqual((r["OMP_NUM_THREADS"], r["KMP_BLOCKTIME"], r["GOMP_SPINCOUNT"]),
                         ("2", "50", "unset"))
        self.assertEqual((r["omp_runtime"], r["env_LD_PRELOAD"], r["kmp_blocktime_ms"]),
                         ("llvm-libomp", LIB, "50"))
        self.assertEqual((r["optimizer"], r["params"], r["model"], r["batch"]),
                         ("sgd", "4000000", "", ""))
        self.assertEqual(r["benchmark"],
                         "optimizer_step/sgd/params:4000000/gap_ms:300/iterations:10/manual_time")
        self.assertEqual((r["extra_counters"], r["extra_context"]),
                         ("fake_counter=1.5", "fake_extra_key=x"))
        self.assertEqual((r["load_avg"], r["num_cpus"], r["threads"]), ("0.5 0.25 0.125", "2", "3"))
        self.assertEqual((r["run_rows"], r["seed"], r["exit_code"]), ("2", "11", "0"))
        self.assertEqual(sorted(x["repetition"] for x in llvm), ["0", "1"])
        self.assertEqual(r["run_key"], f"{r['point_key']}-r{r['repetition']}")
        self.assertEqual(r["repro"], f"OMP_NUM_THREADS=2 KMP_BLOCKTIME=50 LD_PRELOAD={LIB} "
                         f"{self.build}/bench/optimizer_step_bench --optimizer=sgd "
                         "--params=4000000 --gap_ms=0,300 --device=cpu --steps=10 --warmup=2 "
                         "'--benchmark_filter=^optimizer_step/sgd/params:4000000/gap_ms:300"
                         "/iterations:10/manual_time$'")
        gomp = next(x for x in rows if x["runtime"] == "gomp" and x["gap_ms"] == "300")
        self.assertEqual((gomp["residual_cpu_ms"], gomp["env_LD_PRELOAD"], gomp["omp_runtime"]),
                         ("7", "unset", "libgomp"))
        # The repro line is a working shell command.
        done = subprocess.run(["bash", "-c", r["repro"]], capture_output=True, text=True,
                              env=self.env())
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn('"residual_cpu_ms": 50', done.stdout)
        self.assertIn("[4/4]", result.stdout)
        self.assertIn("ETA", result.stdout)
        self.assertIn("seed 11", result.stdout)
        self.assertIn(f"sweep: results in {self.out}", result.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, ".res.work")))

    def test_summary_names_best_settings_and_default_cost(self):
        result = self.sweep(self.grid(TWO_POINTS))
        lines = result.stdout.splitlines()
        start = lines.index("optimizer_step/sgd/params:4000000/gap_ms:300")
        block = [" ".join(ln.split()) for ln in lines[start + 1:start + 4]]
        self.assertEqual(block, [
            "fastest step 10 ms, burn 7 ms gomp (no env)",
            "least burn (step <= +5%) step 10 ms, burn 7 ms gomp (no env)",
            "default (gomp, no env) step 10 ms, burn 7 ms step +0.0% vs fastest, burn +0 ms vs "
            "least burn"])
        self.assertIn("rows: 8 ok, 0 skipped, 0 failed", lines)

    def test_plots_are_made_at_the_end(self):
        args = [a for a in self.args(self.grid(TWO_POINTS)) if a != "--no-plot"]
        result = helpers.run_script("sweep.py", *args, env=self.env())
        self.assertEqual(result.returncode, 0, result.stderr)
        plots = os.path.join(self.tmp, "res.plots")
        if os.path.exists("/usr/bin/python3") and subprocess.run(
                ["/usr/bin/python3", "-c", "import matplotlib"]).returncode == 0:
            self.assertIn(f"sweep: plots in {plots}", result.stdout)
            self.assertIn("pareto.png", os.listdir(plots))
        else:
            self.assertIn("sweep: plots not made: plot: matplotlib is missing", result.stdout)

    def test_same_seed_same_order(self):
        self.sweep(self.grid(TWO_POINTS))
        first = [(r["run_key"], r["order_index"]) for r in helpers.read_rows(self.out)]
        self.sweep(self.grid(TWO_POINTS), "--force")
        second = [(r["run_key"], r["order_index"]) for r in helpers.read_rows(self.out)]
        self.assertEqual(first, second)
        self.assertEqual(sorted({int(i) for _, i in first}), [0, 1, 2, 3])

    def test_processes_give_one_row_per_copy(self):
        result = self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            model = ["mnist_adadelta", "cifar_sgd"]
            processes = 3
        """))
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = helpers.read_rows(self.out)
        self.assertEqual(sorted((r["proc_index"], r["model"]) for r in rows),
                         [(str(i), m) for i in range(3) for m in ("cifar_sgd", "mnist_adadelta")])
        self.assertEqual({r["run_rows"] for r in rows}, {"6"})
        self.assertEqual({r["samples_per_s"] for r in rows if r["model"] == "mnist_adadelta"},
                         {"4000"})  # 64 samples / 16 ms
        self.assertTrue(rows[0]["repro"].startswith("for i in $(seq 3); do "))

    def test_timelines_and_thread_files_are_kept_next_to_the_csv(self):
        result = self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            gap_ms = 20
            timeline = true
            threads_csv = true
        """))
        self.assertEqual(result.returncode, 0, result.stderr)
        (row,) = helpers.read_rows(self.out)
        key = row["run_key"]
        # named as the real programs do: without GB's /iterations:N/manual_time
        self.assertEqual(row["timeline_file"], f"res.timelines/{key}-p0/train_step_mnist_adadelta"
                         "_batch_64_workers_0_gap_ms_20_preload_0_tbb_loader_0_mkldnn_1"
                         ".timeline.csv")
        self.assertEqual(row["threads_file"], f"res.threads/{key}-p0.csv")
        self.assertTrue(os.path.exists(os.path.join(self.tmp, row["timeline_file"])))
        self.assertTrue(os.path.exists(os.path.join(self.tmp, row["threads_file"])))

    def test_extra_args_and_unlisted_name_components(self):
        result = self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            model = ["mnist_adadelta", "cifar_sgd"]
            gap_ms = 5
            timeline = true
            extra_args = {sampler_us = 250}
        """), env=self.env(FAKE_BENCH_NAME_SUFFIX="future_knob:3", FAKE_BENCH_TIMELINE_FULL=1))
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = helpers.read_rows(self.out)
        self.assertEqual(sorted((r["model"], r["batch"], r["gap_ms"], r["sampler_period_us"],
                                 r["extra_args"]) for r in rows),
                         [("cifar_sgd", "64", "5", "250", "sampler_us=250"),
                          ("mnist_adadelta", "64", "5", "250", "sampler_us=250")])
        for r in rows:
            self.assertTrue(r["benchmark"].endswith(
                "/preload:0/tbb_loader:0/mkldnn:1/future_knob:3/iterations:10/manual_time"))
            self.assertIn(" --sampler_us=250 '--benchmark_filter=^train_step/", r["repro"])
            self.assertTrue(r["timeline_file"].endswith(
                "_mkldnn_1_future_knob_3_iterations_10_manual_time.timeline.csv"))
            self.assertTrue(os.path.exists(os.path.join(self.tmp, r["timeline_file"])))

    def test_dry_run_lists_points_and_writes_nothing(self):
        result = self.sweep(self.grid(TWO_POINTS), "--dry-run")
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], "grid g: 2 points, 4 runs (one process per run, shuffled "
                         "with seed 11)")
        self.assertRegex(lines[1], r"^[0-9a-f]{12}  x2  optimizer_step gomp \(no env\)$")
        self.assertEqual(lines[2], f"    {self.build}/bench/optimizer_step_bench --optimizer=sgd "
                         "--params=4000000 --gap_ms=0,300 --device=cpu --steps=10 --warmup=2")
        self.assertTrue(lines[4].startswith(f"    OMP_NUM_THREADS=2 KMP_BLOCKTIME=50 LD_PRELOAD={LIB} "))
        self.assertEqual(len(lines), 5)
        self.assertFalse(os.path.exists(self.out))

    def test_inherited_knobs_are_removed_and_shown_in_repro(self):
        env = self.env(OMP_NUM_THREADS=7, KMP_BLOCKTIME=5)
        self.sweep(self.grid(TWO_POINTS), env=env)
        gomp = next(r for r in helpers.read_rows(self.out) if r["runtime"] == "gomp")
        self.assertEqual((gomp["env_OMP_NUM_THREADS"], gomp["env_KMP_BLOCKTIME"]), ("unset", "unset"))
        self.assertTrue(gomp["repro"].startswith("env -u OMP_NUM_THREADS -u KMP_BLOCKTIME "))


class Failures(SweepTest):
    def test_crash_exit_hang_are_failed_rows_and_the_sweep_goes_on(self):
        grid = self.grid("""
            repetitions = 1
            timeout_s = 4
            [[study]]
            bench = "optimizer_step"
            gap_ms = [0, 100]
            env = {OMP_NUM_THREADS = [1, 2, 3, 4]}
        """)
        env = self.env(FAKE_BENCH_CRASH_IF="OMP_NUM_THREADS=2", FAKE_BENCH_EXIT_IF="OMP_NUM_THREADS=3",
                       FAKE_BENCH_HANG_IF="OMP_NUM_THREADS=4")
        start = time.monotonic()
        result = self.sweep(grid, env=env)
        self.assertLess(time.monotonic() - start, 20)
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = helpers.read_rows(self.out)
        got = sorted((r["OMP_NUM_THREADS"], r["gap_ms"], r["status"], r["reason"], r["exit_code"])
                     for r in rows)
        self.assertEqual(got, [
            ("1", "0", "ok", "", "0"), ("1", "100", "ok", "", "0"),
            ("2", "0", "failed", "killed by SIGSEGV", "-11"),
            ("2", "100", "failed", "killed by SIGSEGV", "-11"),
            ("3", "0", "failed", "exit code 3: fake failure: could not load the dataset", "3"),
            ("3", "100", "failed", "exit code 3: fake failure: could not load the dataset", "3"),
            ("4", "0", "failed", "timeout after 4 s", "-9"),
            ("4", "100", "failed", "timeout after 4 s", "-9")])
        crashed = [r for r in rows if r["OMP_NUM_THREADS"] == "2"]
        self.assertEqual(sorted(r["benchmark"] for r in crashed), [
            "optimizer_step/sgd/params:4000000/gap_ms:0/iterations:10/manual_time",
            "optimizer_step/sgd/params:4000000/gap_ms:100/iterations:10/manual_time"])
        self.assertIn("rows: 2 ok, 0 skipped, 6 failed", result.stdout)
        strict = self.sweep(grid, "--force", "--strict",
                            env=self.env(FAKE_BENCH_EXIT_IF="OMP_NUM_THREADS=3"))
        self.assertEqual(strict.returncode, 1)

    def test_reported_errors_exit_after_report_and_wrong_runtime(self):
        grid = self.grid("""
            repetitions = 1
            [[study]]
            bench = "optimizer_step"
            env = {OMP_NUM_THREADS = [1, 2, 3]}
            [[study]]
            bench = "optimizer_step"
            runtimes = [{name = "llvm", OMP_NUM_THREADS = 2}]
        """)
        env = self.env(FAKE_BENCH_ERROR_IF="OMP_NUM_THREADS=1",
                       FAKE_BENCH_EXIT_AFTER_IF="OMP_NUM_THREADS=3",
                       FAKE_BENCH_REPORT_RUNTIME="libgomp")
        self.sweep(grid, env=env)
        got = {(r["runtime"], r["OMP_NUM_THREADS"]): (r["status"], r["reason"])
               for r in helpers.read_rows(self.out)}
        self.assertEqual(got, {
            ("gomp", "1"): ("failed", "CUDA error: out of memory"),
            ("gomp", "2"): ("ok", ""),
            ("gomp", "3"): ("failed", "exit code 4 after reporting: fake: crashed in a destructor"),
            ("llvm", "2"): ("failed", "asked for runtime llvm but the process reports libgomp "
                            f"({LIB})")})

    def test_cuda_without_gpu_is_skipped(self):
        self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            device = ["cpu", "cuda"]
        """))
        got = sorted((r["device"], r["status"], r["reason"], r["benchmark"].split("/")[0])
                     for r in helpers.read_rows(self.out))
        self.assertEqual(got, [
            ("cpu", "ok", "", "train_step"),
            ("cuda", "skipped", "skipped: no CUDA device (cudaGetDeviceCount failed)",
             "train_step_cuda")])

    def test_bad_flag_from_the_program_is_recorded(self):
        # The grid accepts any data_dir; the fake rejects a flag it does not know.
        shutil.copy(os.path.join(self.build, "bench", "train_step_bench"),
                    os.path.join(self.build, "bench", "optimizer_step_bench"))
        self.sweep(self.grid('repetitions = 1\n[[study]]\nbench = "optimizer_step"\n'))
        (row,) = helpers.read_rows(self.out)
        self.assertEqual((row["status"], row["reason"]),
                         ("failed", "exit code 2: train_step_bench: error: --optimizer: "
                          "unknown flag (see --help)"))

    def test_missing_program_and_libomp_stop_before_running(self):
        result = helpers.run_script("sweep.py", self.grid(TWO_POINTS), "--build-dir",
                                    os.path.join(self.tmp, "nobuild"), "--out", self.out)
        self.assertEqual(result.returncode, 2)
        self.assertIn("optimizer_step_bench: benchmark program not found", result.stderr)
        result = self.sweep(self.grid(TWO_POINTS), "--libomp", "/nonexistent/libomp.so.5")
        self.assertEqual(result.returncode, 2)
        self.assertIn("--libomp /nonexistent/libomp.so.5: not found", result.stderr)
        self.assertFalse(os.path.exists(self.out))


class ResultsFile(SweepTest):
    def test_existing_out_needs_resume_or_force(self):
        helpers.write_file(self.out, "precious\n")
        result = self.sweep(self.grid(TWO_POINTS))
        self.assertEqual(result.returncode, 2)
        self.assertIn("exists; pass --resume to continue it or --force to replace it", result.stderr)
        with open(self.out) as f:
            self.assertEqual(f.read(), "precious\n")
        result = self.sweep(self.grid(TWO_POINTS), "--resume")
        self.assertEqual(result.returncode, 2)
        self.assertIn("header differs", result.stderr)
        self.assertEqual(self.sweep(self.grid(TWO_POINTS), "--force").returncode, 0)
        self.assertEqual(len(helpers.read_rows(self.out)), 8)
        both = self.sweep(self.grid(TWO_POINTS), "--force", "--resume")
        self.assertEqual(both.returncode, 2)

    def test_resume_of_a_finished_file_runs_nothing(self):
        self.sweep(self.grid(TWO_POINTS))
        before = self.assert_whole_lines()
        log = os.path.join(self.tmp, "log")
        result = self.sweep(self.grid(TWO_POINTS), "--resume", env=self.env(FAKE_BENCH_LOG=log))
        self.assertIn("4 runs of 2 points, 4 already in", result.stdout)
        self.assertFalse(os.path.exists(log))
        self.assertEqual(self.assert_whole_lines(), before)

    def test_resume_drops_partial_line_and_unfinished_run(self):
        grid = self.grid(TWO_POINTS)
        self.sweep(grid)
        full = self.assert_whole_lines()
        lines = full.split(b"\n")[:-1]
        # Cut inside the last run: its first row survives, its second is half.
        damaged = b"\n".join(lines[:-1]) + b"\n" + lines[-1][:25]
        with open(self.out, "wb") as f:
            f.write(damaged)
        log = os.path.join(self.tmp, "log")
        result = self.sweep(grid, "--resume", env=self.env(FAKE_BENCH_LOG=log))
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("dropped 1 rows of unfinished runs and a partial line", result.stdout)
        with open(log) as f:
            self.assertEqual(len(f.readlines()), 1)  # only the unfinished run ran again
        after = self.assert_whole_lines()
        self.assertTrue(after.startswith(b"\n".join(lines[:-2]) + b"\n"))
        self.assert_each_run_once(8)

    def assert_each_run_once(self, expected_rows):
        rows = helpers.read_rows(self.out)
        self.assertEqual(len(rows), expected_rows)
        ids = [(r["run_key"], r["benchmark"], r["proc_index"]) for r in rows]
        self.assertEqual(len(set(ids)), len(ids))
        for key in {r["run_key"] for r in rows}:
            group = [r for r in rows if r["run_key"] == key]
            self.assertEqual(len(group), int(group[0]["run_rows"]))
        for row in rows:
            self.assertEqual(len(row), len(schema.COLUMNS))
            self.assertNotIn(None, row.values())

    SLOW = """
        repetitions = 3
        [[study]]
        bench = "optimizer_step"
        gap_ms = [0, 10]
        env = {OMP_NUM_THREADS = [1, 2, 3]}
    """

    def start_slow(self):
        args = helpers.script_cmd("sweep.py", *self.args(self.grid(self.SLOW)))
        return subprocess.Popen(args, env=self.env(FAKE_BENCH_SLEEP_S=0.25), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def wait_for_rows(self, proc, count):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.exists(self.out):
                with open(self.out, "rb") as f:
                    if f.read().count(b"\n") >= 1 + count:
                        return
            time.sleep(0.02)
        proc.kill()
        self.fail("the sweep wrote no rows")

    def test_resume_after_sigkill_loses_and_duplicates_nothing(self):
        proc = self.start_slow()
        self.wait_for_rows(proc, 4)
        time.sleep(0.1)  # most likely inside the next run now
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        with open(self.out, "rb") as f:
            killed = f.read()
        complete = killed[:killed.rfind(b"\n") + 1]
        self.assertGreaterEqual(complete.count(b"\n"), 5)
        self.assertLess(complete.count(b"\n"), 1 + 18)
        result = self.sweep(self.grid(self.SLOW), "--resume")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(self.assert_whole_lines().startswith(complete))
        self.assert_each_run_once(3 * 3 * 2)
        self.assertEqual(len({r["order_index"] for r in helpers.read_rows(self.out)}), 9)

    def test_ctrl_c_leaves_only_whole_runs_and_says_how_to_resume(self):
        proc = self.start_slow()
        self.wait_for_rows(proc, 2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        self.assertEqual(proc.returncode, 130)
        self.assertIn(f"--resume --out {self.out} --seed 11", err)
        self.assert_whole_lines()
        rows = helpers.read_rows(self.out)
        self.assertEqual(len(rows) % 2, 0)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, ".res.work")))
        self.assertEqual([f for f in os.listdir(self.tmp) if ".tmp" in f], [])


if __name__ == "__main__":
    unittest.main()
