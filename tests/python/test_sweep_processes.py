"""`processes = P`: P copies per run, started together and waiting for each
other (--barrier); the overlap of their timed windows; late copies are noted
and left out of the oversubscription aggregate (results.oversubscription)."""
import unittest

from test_sweep import SweepTest
from threadburn.export import summary
from threadburn.analysis import results
from threadburn.lib import records

# One benchmark with a long nominal timed window (10 steps x (10 + GAP) ms, reported,
# not slept): copies released together overlap almost fully (with a gap of 1000 ms,
# unless one starts a second after the other).
GRID = """
    repetitions = 1
    [[study]]
    bench = "optimizer_step"
    optimizer = "sgd"
    gap_ms = {gap}
    processes = [1, 2]
    env = {{OMP_NUM_THREADS = 2}}
"""


class Processes(SweepTest):
    def test_one_row_per_copy_and_the_barrier(self):
        log = self.path("log")
        self.sweep(self.grid(GRID.format(gap=1000)), env=self.env(FAKE_LOG=log))
        rows = self.rows()
        self.assertEqual(sorted((r["processes"], r["proc_index"]) for r in rows), [("1", "0"), ("2", "0"), ("2", "1")])
        crowded = [r for r in rows if r["processes"] == "2"]
        self.assertEqual(len({r["run_key"] for r in crowded}), 1)
        self.assertEqual({r["run_rows"] for r in crowded}, {"2"})
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        self.assertEqual({r["barrier_ok"] for r in crowded}, {"1"})
        for r in crowded:
            self.assertGreaterEqual(float(r["overlap"]), results.OVERLAP_MIN, r)
            self.assertEqual(r["reason"], "")
            self.assertTrue(r["repro"].startswith("for i in $(seq 2); do OMP_NUM_THREADS=2 "), r["repro"])
            self.assertTrue(r["repro"].endswith(" & done; wait"), r["repro"])
        alone = next(r for r in rows if r["processes"] == "1")
        self.assertEqual((alone["overlap"], alone["barrier_ok"]), ("", ""))
        runs = self.runs_logged(log)
        barriers = [[a for a in call["argv"] if a.startswith("--barrier=")] for call in runs]
        self.assertEqual(sorted(len(b) for b in barriers), [0, 1, 1])
        paths = {b[0] for b in barriers if b}
        self.assertEqual(len(paths), 1)  # both copies wait on one file
        self.assertTrue(paths.pop().endswith(":2"))
        (entry,) = [e for e in results.oversubscription(records.read_rows(self.out)) if e["processes"] == 2]
        self.assertEqual((entry["runs"], entry["step_ms"], entry["throughput"], entry["slowdown"]),
                         (1, 10.0, 200.0, 1.0))

    def test_a_late_copy_is_noted_and_left_out_of_the_aggregate(self):
        # The first copy at the barrier sleeps 1 s before its 2.1 s window: about half overlaps.
        self.sweep(self.grid(GRID.format(gap=200)), env=self.env(FAKE_LATE_S=1))
        rows = self.rows()
        crowded = [r for r in rows if r["processes"] == "2"]
        self.assertEqual(len(crowded), 2)
        for r in crowded:
            self.assertEqual(r["status"], "ok")
            self.assertLess(float(r["overlap"]), results.OVERLAP_MIN, r)
            self.assertRegex(r["reason"], r"^note: the other copies overlapped only \d+% of its timed steps$")
        typed = records.read_rows(self.out)
        self.assertTrue(all(results.poorly_overlapped(r) for r in typed if r.processes == 2))
        self.assertEqual([e["processes"] for e in results.oversubscription(typed)], [1])
        self.assertNotIn("P=2", summary.summary_text(typed))


if __name__ == "__main__":
    unittest.main()
