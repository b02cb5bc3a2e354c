"""`world_size = W` for a program whose processes are the ranks of one world
(ddp_step): W processes per run with torchrun's variables, no --barrier,
rows per rank, the world's columns (sweep.mark_world) and the world as one
sample (results.world_rows). The fake's ddp_step: rank r computes 10 % more
slowly per rank and waits for the slowest in a 2 ms all-reduce; its optimizer
takes 0.5 ms more per rank (fake_program.py)."""
import collections
import unittest

from test_sweep import SweepTest
import helpers
from threadburn.export import summary
from threadburn.analysis import results, verdicts
from threadburn.lib import records

GRID = """
    repetitions = 2
    [[study]]
    bench = "ddp_step"
    model = "mnist_adadelta"
    gap_ms = 0
    world_size = [1, 3]
    env = {OMP_NUM_THREADS = 1}
"""


class Ranks(SweepTest):
    def test_ranks_get_their_place_in_one_world(self):
        log = self.path("log")
        self.sweep(self.grid(GRID), env=self.env(FAKE_LOG=log))
        calls = self.runs_logged(log)
        self.assertEqual(len(calls), 2 * (1 + 3))
        self.assertFalse(any(a.startswith("--barrier") for c in calls for a in c["argv"]))
        worlds = collections.defaultdict(list)
        for c in calls:
            e = c["env"]
            self.assertEqual((e["LOCAL_RANK"], e["MASTER_ADDR"]), (e["RANK"], "127.0.0.1"))
            worlds[(e["WORLD_SIZE"], e["MASTER_PORT"])].append(int(e["RANK"]))
        # Each run its own port; its ranks 0..W-1 once each.
        self.assertEqual(sorted((w, sorted(r)) for (w, _), r in worlds.items()),
                         [("1", [0]), ("1", [0]), ("3", [0, 1, 2]), ("3", [0, 1, 2])])

    def test_rows_per_rank_and_the_world_columns(self):
        self.sweep(self.grid(GRID))
        rows = self.rows()
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        big = [r for r in rows if r["processes"] == "3"]
        self.assertEqual(len(big), 6)
        self.assertEqual(sorted(r["proc_index"] for r in big), ["0", "0", "1", "1", "2", "2"])
        self.assertTrue(all(r["rank"] == r["proc_index"] and r["world_size"] == "3" for r in big))
        base = 30.0  # the fake's MNIST step at batch 64, one thread
        slowest = base * 1.2 + 2.0 + 0.5 * 2  # rank 2's step
        for r in big:
            self.assertAlmostEqual(float(r["world_samples_per_s"]), 3 * 64 / slowest * 1000, places=6)
            # compute = step - all-reduce: base (1 + 0.1 r) + 0.5 r; rank 2's over rank 0's
            self.assertAlmostEqual(float(r["rank_spread"]), (base * 1.2 + 1.0) / base - 1, places=4)
            self.assertIn("RANK=$r WORLD_SIZE=3", r["repro"])
        alone = [r for r in rows if r["processes"] == "1"]
        self.assertTrue(all(r["rank_spread"] == "0" for r in alone), [r["rank_spread"] for r in alone])
        self.assertEqual(results.workload_label(helpers.typed(big)[0]), "ddp_step/mnist_adadelta/batch:64/bucket_mb:25/gap_ms:0"
                                                         " (world_size 3)")
        # A world is no set of copies: not in the oversubscription aggregate.
        self.assertEqual(results.oversubscription(helpers.typed(rows)), [])

    def test_a_world_is_one_sample(self):
        self.sweep(self.grid(GRID))
        rows = self.rows()
        worlds = [w for w in records.world_rows(helpers.typed(rows)) if w.processes == 3]
        self.assertEqual(len(worlds), 2)  # two runs, one world each
        for w in worlds:
            ranks = [r for r in rows if r["run_key"] == w.run_key]
            self.assertEqual(w.number("step_ms"), max(float(r["step_ms"]) for r in ranks))
            self.assertAlmostEqual(w.number("step_cpu_ms"), sum(float(r["step_cpu_ms"]) for r in ranks))
            self.assertEqual(w.text("samples_per_s"), ranks[0]["world_samples_per_s"])
        # A world that lost a rank measured nothing.
        broken = [r for r in rows if not (r["run_key"] == worlds[0].run_key and r["rank"] == "2")]
        self.assertEqual(len([w for w in records.world_rows(helpers.typed(broken)) if w.processes == 3]), 1)
        (e,) = [e for e in verdicts.decide_rows(helpers.typed(rows)).entries if "world_size 3" in e.label]
        self.assertEqual({s.n for s in e.decision.settings.values()}, {2})  # one sample per run, not per rank

    def test_world_scaling_and_its_plot(self):
        self.sweep(self.grid(GRID))
        rows = self.rows()
        entries = results.world_scaling(helpers.typed(rows))
        self.assertEqual([(e["world_size"], e["runs"], e["threads"]) for e in entries], [(1, 2, "1"), (3, 2, "1")])
        one, three = entries
        self.assertEqual(one["setting"], "gomp OMP_NUM_THREADS=1")
        base = 30.0
        self.assertAlmostEqual(one["samples_per_s"], 64 / (base + 2.0) * 1000)
        self.assertAlmostEqual(three["samples_per_s"], 3 * 64 / (base * 1.2 + 3.0) * 1000)
        self.assertAlmostEqual(three["scaling"], three["samples_per_s"] / one["samples_per_s"])
        self.assertAlmostEqual(three["step_ms"], base * 1.2 + 3.0)                     # the slowest rank
        self.assertAlmostEqual(three["allreduce_ms"], (3 * 2.0 + base * 0.1 * (2 + 1 + 0)) / 3)  # the ranks' mean
        self.assertAlmostEqual(three["cpu_ms"], sum(float(r["step_cpu_ms"]) + float(r["residual_cpu_ms"])
                                                    for r in rows if r["run_key"] == three["row"].run_key
                                                    and r["benchmark"] == three["row"].benchmark))
        self.assertIn("W=3 T=1", summary.summary_text(helpers.typed(rows)))
        from threadburn.export import figures
        try:
            plt = figures.pyplot()
        except Exception as e:  # no matplotlib: the plot half is skipped
            self.skipTest(f"no matplotlib: {e}")
        written = figures.world_size(helpers.typed(rows), plt, self.tmp)
        self.assertEqual([p.rsplit("/", 1)[1] for p in written], ["world_size.png"])

    def test_a_dead_rank_fails_the_run_and_the_sweep_goes_on(self):
        result = self.sweep(self.grid(GRID), env=self.env(FAKE_EXIT_IF="RANK=1"))
        rows = self.rows()
        failed = [r for r in rows if r["status"] == "failed"]
        self.assertEqual({(r["processes"], r["rank"]) for r in failed}, {("3", "1")})
        self.assertTrue(all("exit code 3" in r["reason"] for r in failed))
        self.assertEqual([w.processes for w in records.world_rows(helpers.typed(rows))], [1, 1])
        self.assertIn("rows: ", result.stdout)


if __name__ == "__main__":
    unittest.main()
