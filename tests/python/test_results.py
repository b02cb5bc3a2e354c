"""Reading results (python/threadburn/analysis/results.py): best settings per workload
and the oversubscription aggregate, on hand-checked rows (make_fixtures.py).

oversub_results.csv, per run and copy (step_ms, samples_per_s, step_cpu_ms,
residual_cpu_ms, invol_ctxsw): see make_fixtures.oversub_rows. Hand-checked
aggregates (per run, then the median over runs):
  A P=1: step (30, 32) -> 31; throughput (2000, 2100) -> 2050; CPU (61, 62) -> 61.5; invol (3, 5) -> 4
  A P=2: step (62, 68) -> 65; throughput (2050, 1850) -> 1950; CPU (120, 120) -> 120;
         invol (42, 56) -> 49; slowdown 65/31; throughput ratio 1950/2050
         (r2 lacks a copy, r3's copies overlapped 50 %: both left out)
  A P=4: step 126; throughput 2000; CPU 420; invol 160; slowdown 126/31
  B P=1: 28, 2200, 250, 2;  B P=2: 100, 1300, 438, 180; slowdown 100/28
  optimizer A P=2: step 4.5; 1000/4 + 1000/5 = 450 steps/s; CPU 31; invol 3; slowdown n/a
"""
import math
import os
import statistics
import unittest

import helpers
import make_fixtures
from threadburn.lib import paths, records
from threadburn.lib.records import Row
from threadburn.export import summary
from threadburn.analysis import results, verdicts

FIXTURE = os.path.join(helpers.FIXTURES, "oversub_results.csv")
TRAIN = "train_step/mnist_adadelta/preload:0/batch:64/workers:0/loader:torch/mkldnn:1/gap_ms:0"
OPT = "optimizer_step/sgd/params:4000000/gap_ms:300"
A, B = "gomp OMP_NUM_THREADS=2", "llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=200"


class Aggregate(unittest.TestCase):
    def setUp(self):
        self.rows = records.read_rows(FIXTURE)
        self.entries = results.oversubscription(self.rows)

    def test_points_and_values(self):
        got = [(e["workload"], e["setting"], e["processes"], e["runs"], e["unit"], e["step_ms"],
                e["throughput"], e["cpu_ms"], e["invol_ctxsw"]) for e in self.entries]
        self.assertEqual(got, [
            (OPT, A, 2, 1, "steps/s", 4.5, 450.0, 31.0, 3.0),
            (TRAIN, A, 1, 2, "samples/s", 31.0, 2050.0, 61.5, 4.0),
            (TRAIN, A, 2, 2, "samples/s", 65.0, 1950.0, 120.0, 49.0),
            (TRAIN, A, 4, 1, "samples/s", 126.0, 2000.0, 420.0, 160.0),
            (TRAIN, B, 1, 1, "samples/s", 28.0, 2200.0, 250.0, 2.0),
            (TRAIN, B, 2, 1, "samples/s", 100.0, 1300.0, 438.0, 180.0)])

    def test_slowdown_against_the_same_setting_alone(self):
        slow = [e["slowdown"] for e in self.entries]
        self.assertIsNone(slow[0])  # the optimizer point has no P = 1 run
        self.assertEqual(slow[1], 1.0)
        self.assertAlmostEqual(slow[2], 65 / 31, places=12)
        self.assertAlmostEqual(slow[3], 126 / 31, places=12)
        self.assertEqual(slow[4], 1.0)
        self.assertAlmostEqual(slow[5], 100 / 28, places=12)
        ratio = [e["throughput_ratio"] for e in self.entries]
        self.assertIsNone(ratio[0])
        self.assertAlmostEqual(ratio[2], 1950 / 2050, places=12)
        self.assertAlmostEqual(ratio[5], 1300 / 2200, places=12)

    def test_poorly_overlapped_runs_are_left_out(self):
        late = [r for r in self.rows if r.text("overlap") == "0.5"]
        self.assertEqual(len(late), 2)
        self.assertTrue(all(results.poorly_overlapped(r) for r in late))
        self.assertFalse(any(results.poorly_overlapped(r) for r in self.rows if r not in late))
        # counted in, the 5000 ms run would make the median of A P=2's three runs 68
        on_time = [r.copy(overlap="0.95") if r in late else r for r in self.rows]
        a2 = next(e for e in results.oversubscription(on_time)
                  if (e["workload"], e["setting"], e["processes"]) == (TRAIN, A, 2))
        self.assertEqual((a2["runs"], a2["step_ms"]), (3, 68.0))

    def test_run_aggregate_needs_every_copy(self):
        rows = [Row(bench="optimizer_step", step_ms="4", step_cpu_ms="8", residual_cpu_ms="7", invol_ctxsw="1"),
                Row(bench="optimizer_step", step_ms="5", step_cpu_ms="9", residual_cpu_ms="", invol_ctxsw="2")]
        self.assertEqual(results.run_aggregate(rows), {"step_ms": 4.5, "throughput": 450.0,
                                                       "cpu_ms": None, "invol_ctxsw": 3.0})

    def test_no_crowded_point_no_aggregate(self):
        rows = [r for r in self.rows if r.processes == 1]
        self.assertEqual(results.oversubscription(rows), [])
        self.assertNotIn("oversubscription", summary.summary_text(rows))

    def test_summary_section(self):
        lines = summary.summary_text(self.rows).splitlines()
        self.assertIn("rows: 19 ok, 0 skipped, 1 failed", lines)
        start = next(i for i, ln in enumerate(lines) if ln.startswith("oversubscription:"))
        self.assertEqual([" ".join(ln.split()) for ln in lines[start + 1:]], [
            OPT, A,
            "P=2 step 4.5 ms ( x n/a), 450 steps/s, CPU 31 ms, invol ctxsw 3 [1 run]",
            TRAIN, A,
            "P=1 step 31 ms ( x1.00), 2050 samples/s, CPU 61.5 ms, invol ctxsw 4 [2 runs]",
            "P=2 step 65 ms ( x2.10), 1950 samples/s, CPU 120 ms, invol ctxsw 49 [2 runs]",
            "P=4 step 126 ms ( x4.06), 2000 samples/s, CPU 420 ms, invol ctxsw 160 [1 run]",
            B,
            "P=1 step 28 ms ( x1.00), 2200 samples/s, CPU 250 ms, invol ctxsw 2 [1 run]",
            "P=2 step 100 ms ( x3.57), 1300 samples/s, CPU 438 ms, invol ctxsw 180 [1 run]"])


class Throughput(unittest.TestCase):
    """A run's throughput is what its rows say it is (throughput_counter, the
    program's own rule), summed over its copies; steps/s without a counter."""

    def copies(self, counter, unit):
        return [Row({"step_ms": "20", "samples_per_s": "3000", "step_cpu_ms": "1", "residual_cpu_ms": "1",
                     "invol_ctxsw": "0", "throughput_counter": counter, "throughput_unit": unit})] * 2

    def test_the_rows_rule(self):
        self.assertEqual(results.run_aggregate(self.copies("samples_per_s", "samples/s"))["throughput"], 6000)
        # the same cells, a program without a throughput counter: 2 x 1000 / 20 ms
        self.assertEqual(results.run_aggregate(self.copies("none", "steps/s"))["throughput"], 100)
        # rows older than schema 5: a filled samples_per_s is the counter
        self.assertEqual(results.run_aggregate(self.copies("", ""))["throughput"], 6000)


class Verdicts(unittest.TestCase):
    """verdicts.decide_rows: per workload, decide.py over its settings (time =
    step_ms in rows older than the loop rule, CPU = step_cpu_ms +
    residual_cpu_ms per run), by the defaults for a file that records no rule."""

    def rows(self, settings):
        """settings: [(runtime, env, preset, [(step_ms, step_cpu_ms + residual_cpu_ms) per run])]"""
        out = []
        for runtime, env, preset, runs in settings:
            for rep, (step, cpu) in enumerate(runs):
                out.append(Row(make_fixtures.as_read(make_fixtures.row(
                    "optimizer_step", make_fixtures.SGD300, runtime, env, rep=rep, preset=preset, step_ms=step,
                    step_cpu_ms=cpu - 1, residual_cpu_ms=1))))
        return out

    SETTINGS = [
        ("gomp", {}, "", [(10.6, 27), (10.8, 27.5), (10.7, 27), (10.9, 26.5), (10.5, 27)]),      # the default
        ("llvm", {"KMP_BLOCKTIME": 200}, "", [(10.0, 60), (10.1, 61), (10.2, 60), (10.0, 59), (10.1, 60)]),
        ("llvm", {"KMP_BLOCKTIME": 0}, "", [(10.05, 21), (10.15, 22), (10.1, 21), (10.2, 21), (10.0, 20)]),
        ("gomp", {"OMP_WAIT_POLICY": "passive"}, "launcher", [(11.5, 20), (11.6, 19), (11.4, 20), (11.5, 20),
                                                              (11.7, 20)]),
    ]
    BT0, BT200 = "llvm KMP_BLOCKTIME=0", "llvm KMP_BLOCKTIME=200"
    PASSIVE = "gomp OMP_WAIT_POLICY=passive [launcher]"

    def test_balanced_changes_to_the_frugal_one_among_the_fastest(self):
        rows = self.rows(self.SETTINGS)
        bt200 = next(r for r in rows if r.text("KMP_BLOCKTIME") == "200")
        rows.append(bt200.copy(status="failed", step_ms="1", run_key="failed-r9"))
        (e,) = verdicts.decide_rows(rows).entries
        d = e.decision
        # A setting with a failed run is no answer: left out, and said so.
        self.assertNotIn(self.BT200, d.settings)
        self.assertIn(f"left out, a run failed: {self.BT200}", d.why)
        self.assertEqual((e.label, d.baseline), (OPT, "gomp (no env)"))
        # blocktime 200 and 0 are equivalent on time (within 5 %); 0 uses the least CPU of the two,
        # 22 % less than the default, and is not slower than it by 5 %: change.
        self.assertEqual((d.verdict, d.chosen), ("change", self.BT0))
        self.assertEqual(d.settings[self.BT0].n, 5)
        r = d.vs_baseline[self.BT0]
        geo = lambda v: math.exp(statistics.fmean(math.log(x) for x in v))
        self.assertAlmostEqual(r.time.est, geo([10.05, 10.15, 10.1, 10.2, 10.0]) / geo([10.6, 10.8, 10.7, 10.9, 10.5]))
        self.assertAlmostEqual(r.cpu.est, geo([21, 22, 21, 21, 20]) / geo([27, 27.5, 27, 26.5, 27]))
        self.assertTrue(r.cpu.better(0.05) and r.time.not_worse(0.05))
        self.assertEqual(e.env[self.BT0], {"KMP_BLOCKTIME": "0", "LD_PRELOAD": paths.LIBOMP})
        text = [" ".join(ln.split()) for ln in summary.summary_text(rows).splitlines()]
        self.assertEqual(text[0], "rows: 20 ok, 0 skipped, 1 failed")

    def test_cpu_objective(self):
        (e,) = verdicts.decide_rows(self.rows(self.SETTINGS), asked={"objective": "cpu"}).entries
        self.assertEqual((e.decision.verdict, e.decision.chosen), ("change", self.PASSIVE))

    def test_without_the_default_point(self):
        (e,) = verdicts.decide_rows(self.rows(self.SETTINGS[1:3])).entries
        self.assertEqual(e.decision.verdict, "undecided")
        self.assertIn("the baseline", e.decision.why)


class InForce(unittest.TestCase):
    """What a run really ran (keys.in_force): settings equal on it are one setting."""

    def row(self, runtime, regions, team, **extra):
        return Row(dict({"omp_runtime": runtime, "regions": str(regions), "max_team": str(team),
                         "omp_wait_policy": "default", "kmp_blocktime_ms": "0" if runtime == "llvm-libomp" else "n/a",
                         "dnnl_cpu_isa": "avx2"}, **extra))

    def test_no_region_run_means_no_runtime_mattered(self):
        from threadburn.lib import keys
        # One thread, no OpenMP region: libgomp and LLVM with its blocktime 0 ran the same program.
        self.assertEqual(keys.in_force(self.row("libgomp", 0, 1)), keys.in_force(self.row("llvm-libomp", 0, 1)))
        # ... but what oneDNN ran still counts.
        self.assertNotEqual(keys.in_force(self.row("libgomp", 0, 1)),
                            keys.in_force(self.row("libgomp", 0, 1, dnnl_cpu_isa="sse41")))
        # With a team of two, the runtime and its wait settings do.
        self.assertNotEqual(keys.in_force(self.row("libgomp", 40, 2)), keys.in_force(self.row("llvm-libomp", 40, 2)))
        self.assertNotEqual(keys.in_force(self.row("libgomp", 40, 2)),
                            keys.in_force(self.row("libgomp", 40, 2, omp_wait_policy="passive")))

    def test_a_read_back_when_the_row_has_one_else_the_value_asked(self):
        from threadburn.lib import keys
        # OMP_PROC_BIND=CLOSE and =close are the same binding in force ...
        self.assertEqual(keys.in_force(self.row("libgomp", 40, 2, OMP_PROC_BIND="CLOSE", omp_proc_bind="close")),
                         keys.in_force(self.row("libgomp", 40, 2, OMP_PROC_BIND="close", omp_proc_bind="close")))
        # ... and in a file written before the read-back, the values asked stand for themselves
        self.assertNotEqual(keys.in_force(self.row("libgomp", 40, 2, OMP_PROC_BIND="close")),
                            keys.in_force(self.row("libgomp", 40, 2, OMP_PROC_BIND="spread")))


class Labels(unittest.TestCase):
    def test_workload_label_drops_gb_suffixes_and_settings_carry_cuda_sync(self):
        self.assertEqual(results.workload_label(Row({"benchmark": "runtime_region/omp/n:5/gap_ms:0/iterations:8"
                                                                  "/manual_time"})), "runtime_region/omp/n:5/gap_ms:0")
        self.assertEqual(results.workload_label(Row({"benchmark": "x/y", "processes": "4"})), "x/y (4 processes)")
        header = ["benchmark", "bench", "runtime", "OMP_NUM_THREADS", "processes", "device", "cuda_sync",
                  "repetition"]
        row = Row(dict(zip(header, ["x", "train_step", "gomp", "2", "1", "cuda", "spin", "0"])))
        other = row.copy(cuda_sync="blocking_sync")
        self.assertEqual(results.workload_key(row), results.workload_key(other))
        self.assertNotEqual(results.env_key(row), results.env_key(other))
        self.assertNotEqual(results.workload_key(row), results.workload_key(row.copy(device="cpu")))

    def test_bad_files(self):
        with self.assertRaises(records.ResultsError) as caught:
            records.read_rows(os.path.join(helpers.FIXTURES, "none.csv"))
        self.assertIn("none.csv: cannot read: No such file or directory", str(caught.exception))
        with self.assertRaises(records.ResultsError) as caught:
            records.read_rows(FIXTURE, ("status", "no_such_column"))
        self.assertEqual(str(caught.exception), f"{FIXTURE}: missing columns: no_such_column")


if __name__ == "__main__":
    unittest.main()
