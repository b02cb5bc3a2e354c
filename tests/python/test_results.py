"""The oversubscription aggregate (threadburn_py/results.py) on a hand-made
fixture, tests/python/fixtures/oversub_results.csv. Per run, per copy
(step_ms, samples_per_s, step_cpu_ms, residual_cpu_ms, invol_ctxsw):

  train mnist, gomp T=2 (setting A):
    P=1 r0 (30, 2000, 54, 7, 3)            r1 (32, 2100, 56, 6, 5)
    P=2 r0 (60, 1000, 50, 10, 20) (64, 1050, 52, 8, 22)
        r1 (70, 900, 55, 5, 30) (66, 950, 53, 7, 26)
        r2 (1000, 10, 900, 900, 900) + a failed copy: left out
    P=4 r0 (120, 500, 100, 2, 40) (124, 520, 100, 4, 40) (128, 480, 100, 6, 40)
           (132, 500, 100, 8, 40)
  train mnist, llvm T=2 bt=200 (B): P=1 r0 (28, 2200, 50, 200, 2)
                                    P=2 r0 (90, 700, 60, 150, 80) (110, 600, 58, 170, 100)
  train mnist, gomp T=1 (C): P=1 only: not in the aggregate
  optimizer sgd, A: P=2 r0 (4, -, 8, 7, 1) (5, -, 9, 7, 2): no P=1

Hand-checked aggregates (per run, then median over runs):
  A P=1: step (30, 32) -> 31; throughput (2000, 2100) -> 2050; CPU (61, 62) -> 61.5;
         invol (3, 5) -> 4
  A P=2: step (62, 68) -> 65; throughput (2050, 1850) -> 1950; CPU (120, 120) -> 120;
         invol (42, 56) -> 49; slowdown 65/31; throughput ratio 1950/2050
  A P=4: step 126; throughput 2000; CPU 420; invol 160; slowdown 126/31
  B P=1: 28, 2200, 250, 2;  B P=2: 100, 1300, 438, 180; slowdown 100/28
  optimizer A P=2: step 4.5; 1000/4 + 1000/5 = 450 steps/s; CPU 31; invol 3; slowdown n/a
"""
import os
import unittest

import helpers
from threadburn_py import results

FIXTURE = os.path.join(helpers.FIXTURES, "oversub_results.csv")
TRAIN = "train_step/mnist_adadelta/batch:64/workers:0/gap_ms:0/preload:0/tbb_loader:0/mkldnn:1"
OPT = "optimizer_step/sgd/params:4000000/gap_ms:300"


class Aggregate(unittest.TestCase):
    def setUp(self):
        self.entries = results.oversubscription(results.read_rows(FIXTURE))

    def test_points_and_values(self):
        got = [(e["workload"], e["setting"], e["processes"], e["runs"], e["unit"], e["step_ms"],
                e["throughput"], e["cpu_ms"], e["invol_ctxsw"]) for e in self.entries]
        a, b = "gomp OMP_NUM_THREADS=2", "llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=200"
        self.assertEqual(got, [
            (OPT, a, 2, 1, "steps/s", 4.5, 450.0, 31.0, 3.0),
            (TRAIN, a, 1, 2, "samples/s", 31.0, 2050.0, 61.5, 4.0),
            (TRAIN, a, 2, 2, "samples/s", 65.0, 1950.0, 120.0, 49.0),
            (TRAIN, a, 4, 1, "samples/s", 126.0, 2000.0, 420.0, 160.0),
            (TRAIN, b, 1, 1, "samples/s", 28.0, 2200.0, 250.0, 2.0),
            (TRAIN, b, 2, 1, "samples/s", 100.0, 1300.0, 438.0, 180.0)])

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

    def test_run_aggregate_needs_every_copy(self):
        rows = [dict(bench="optimizer_step", step_ms="4", step_cpu_ms="8", residual_cpu_ms="7",
                     invol_ctxsw="1"),
                dict(bench="optimizer_step", step_ms="5", step_cpu_ms="9", residual_cpu_ms="",
                     invol_ctxsw="2")]
        self.assertEqual(results.run_aggregate(rows), {"step_ms": 4.5, "throughput": 450.0,
                                                       "cpu_ms": None, "invol_ctxsw": 3.0})

    def test_no_crowded_point_no_aggregate(self):
        rows = [r for r in results.read_rows(FIXTURE) if r["processes"] == "1"]
        self.assertEqual(results.oversubscription(rows), [])
        self.assertNotIn("oversubscription", results.summary_text(rows))

    def test_summary_section(self):
        lines = results.summary_text(results.read_rows(FIXTURE)).splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith("oversubscription:"))
        self.assertEqual([" ".join(ln.split()) for ln in lines[start + 1:]], [
            OPT,
            "gomp OMP_NUM_THREADS=2",
            "P=2 step 4.5 ms ( x n/a), 450 steps/s, CPU 31 ms, invol ctxsw 3 [1 run]",
            TRAIN,
            "gomp OMP_NUM_THREADS=2",
            "P=1 step 31 ms ( x1.00), 2050 samples/s, CPU 61.5 ms, invol ctxsw 4 [2 runs]",
            "P=2 step 65 ms ( x2.10), 1950 samples/s, CPU 120 ms, invol ctxsw 49 [2 runs]",
            "P=4 step 126 ms ( x4.06), 2000 samples/s, CPU 420 ms, invol ctxsw 160 [1 run]",
            "llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=200",
            "P=1 step 28 ms ( x1.00), 2200 samples/s, CPU 250 ms, invol ctxsw 2 [1 run]",
            "P=2 step 100 ms ( x3.57), 1300 samples/s, CPU 438 ms, invol ctxsw 180 [1 run]"])
        self.assertIn("rows: 17 ok, 0 skipped, 1 failed", lines)


class Labels(unittest.TestCase):
    def test_workload_label_drops_gb_suffixes_and_settings_carry_cuda_sync(self):
        self.assertEqual(results.workload_label({"benchmark": "runtime_region/omp/n:5/gap_ms:0"
                                                              "/iterations:8/manual_time"}),
                         "runtime_region/omp/n:5/gap_ms:0")
        row = {"runtime": "gomp", "cuda_sync": "spin", "device": "cuda", "benchmark": "x"}
        other = dict(row, cuda_sync="blocking_sync")
        self.assertEqual(results.workload_key(row), results.workload_key(other))
        self.assertNotEqual(results.env_key(row), results.env_key(other))


if __name__ == "__main__":
    unittest.main()
