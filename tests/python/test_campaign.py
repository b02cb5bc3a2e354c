"""The run engine (python/threadburn/engine/campaign.py) with mock executors
whose runs have known truths: rounds as blocks, resume, the budget, and the
whole race of a tune (analysis/race.py, a change confirmed in fresh runs)
over synthetic settings (bench/decisions.py's generator): a clear winner
found, no false change on a null, losers stop early, the gain reported is
the fresh runs' (the race's own figure for its pick is too good), and runs
disturbed by another tenant are set aside by their own evidence."""
import math
import os
import random
import sys
import unittest

import helpers
from synthetic import Truth, run_steps
from threadburn.analysis import runfigures, verdicts
from threadburn.engine import campaign
from threadburn.lib import records, rule as rules
from threadburn.lib.records import Row

sys.path.insert(0, os.path.join(helpers.REPO, "bench"))
import decisions  # noqa: E402  (the decision rule's benchmark: its synthetic tune)


class Item:
    def __init__(self, truth):
        self.truth, self.key, self.label = truth, truth.name, truth.name


class Memory:
    """A results file in memory."""

    def __init__(self):
        self.rows = []

    def append(self, rows):
        self.rows += rows


class MockExecutor(campaign.Executor):
    """Each run: synthetic steps of the item's truth; one row per run."""

    def __init__(self, rng, **noise):
        self.rng, self.noise, self.started = rng, noise, []

    def execute(self, specs):
        for spec in specs:
            self.started.append(spec)
            times, cpus = run_steps(self.rng, spec.item.truth, **self.noise)
            yield spec, [Row(run_key=spec.key, study=spec.item.key, round=spec.round, status="ok",
                             wall_s=0.0)]


def tune_case(truths, seed, **noise):
    """One synthetic tune (bench/decisions.py, one_case): (verdict, chosen, candidate, claim,
    race estimate, confirmed estimate, runs)."""
    sc = {"truths": [decisions.Truth(n, t, c, k) for n, t, c, k in truths], "objective": "balanced",
          "noise": noise.get("noise", 0.03), "drift": noise.get("drift", 0.0), "preempt": noise.get("preempt", 0.0)}
    return decisions.one_case(sc, seed)


class Rounds(unittest.TestCase):
    def test_rounds_are_blocks_and_the_order_follows_the_seed(self):
        items = [Item(Truth(f"s{i}", 1.0, 1.0)) for i in range(5)]
        orders = []
        for _ in range(2):
            ex = MockExecutor(random.Random(1))
            c = campaign.Campaign(ex, Memory(), 42, say=lambda *a, **k: None)
            c.run(items, {i.key: 3 for i in items})
            orders.append([(s.item.key, s.rep) for s in ex.started])
            for r in range(3):  # every item once per round, reps in order
                block = [s for s in ex.started if s.round == r]
                self.assertEqual(sorted(s.item.key for s in block), sorted(i.key for i in items))
                self.assertEqual({s.rep for s in block}, {r})
        self.assertEqual(orders[0], orders[1])
        self.assertNotEqual([k for k, _ in orders[0][:5]], [k for k, _ in orders[0][5:10]])  # reshuffled per round

    def test_a_batch_executor_gets_the_planned_rounds_in_one_call(self):
        class Batch(MockExecutor):
            whole_plan = True
            calls = 0

            def execute(self, specs):
                Batch.calls += 1
                yield from MockExecutor.execute(self, specs)
        items = [Item(Truth(f"s{i}", 1.0, 1.0)) for i in range(3)]
        ex = Batch(random.Random(1))
        campaign.Campaign(ex, Memory(), 5, say=lambda *a, **k: None).run(items, {i.key: 3 for i in items})
        self.assertEqual(Batch.calls, 1)
        self.assertEqual([s.round for s in ex.started], [0, 0, 0, 1, 1, 1, 2, 2, 2])  # still blocks, in order

    def test_resume_runs_only_what_the_file_lacks(self):
        items = [Item(Truth(f"s{i}", 1.0, 1.0)) for i in range(3)]
        ex = MockExecutor(random.Random(1))
        done = {"s0-r0", "s1-r0", "s2-r0", "s1-r1"}
        c = campaign.Campaign(ex, Memory(), 7, done=done, say=lambda *a, **k: None)
        c.run(items, {i.key: 2 for i in items})
        self.assertEqual(sorted(s.key for s in ex.started), ["s0-r1", "s2-r1"])

    def test_budget_parsing(self):
        self.assertEqual(campaign.parse_budget("120"), campaign.Budget(runs=120))
        self.assertEqual(campaign.parse_budget("15m"), campaign.Budget(seconds=900))
        for bad in ("0", "-3", "15x", "", "m"):
            with self.assertRaises(ValueError):
                campaign.parse_budget(bad)


class Race(unittest.TestCase):
    TRIALS = 100
    DEFAULTS = [("plain", 1.0, 1.0, 1), ("W", 0.8, 1.0, 1), ("near", 0.97, 1.0, 1), ("slow", 1.1, 1.2, 1),
                ("slower", 1.5, 1.0, 1)]

    def test_a_clear_winner_is_found_and_confirmed_within_the_budget(self):
        found = 0
        for seed in range(self.TRIALS):
            verdict, chosen, candidate, claim, race_est, conf_est, runs = tune_case(self.DEFAULTS, seed)
            self.assertLessEqual(runs, decisions.RUNS_PER_SETTING_BUDGET * len(self.DEFAULTS))
            found += (verdict, chosen) == ("change", "W")
        self.assertGreaterEqual(found / self.TRIALS, 0.95)

    def test_a_null_race_changes_nothing_beyond_alpha(self):
        null = [("plain", 1.0, 1.0, 1)] + [(f"s{i}", 1.0, 1.0, 1) for i in range(5)]
        verdicts_ = [tune_case(null, seed, noise=0.02)[0] for seed in range(self.TRIALS)]
        changes = verdicts_.count("change") / self.TRIALS
        self.assertLessEqual(changes, rules.ALPHA + 3 * math.sqrt(rules.ALPHA * (1 - rules.ALPHA) / self.TRIALS))

    def test_the_gain_printed_is_the_fresh_runs_not_the_races(self):
        # W is 10 % faster. The race picks the setting that looked best, so its own estimate
        # of its pick is too good (the winner's curse); the confirmation's fresh runs are not.
        truths = [("plain", 1.0, 1.0, 1), ("W", 0.9, 1.0, 1), ("a", 0.93, 1.0, 1), ("b", 0.93, 1.0, 1),
                  ("c", 1.0, 1.0, 1)]
        race, fresh = [], []
        for seed in range(200):
            _, _, candidate, claim, race_est, conf_est, _ = tune_case(truths, 5000 + seed, noise=0.04)
            if candidate and conf_est:
                truth = {n: t for n, t, _, _ in truths}[candidate]
                race.append(math.log(race_est / truth))
                fresh.append(math.log(conf_est / truth))
        self.assertGreater(len(fresh), 100)
        self.assertLess(sum(race) / len(race), -0.01)               # as selected: over 1 pp too good
        self.assertLess(abs(sum(fresh) / len(fresh)), 0.005)        # fresh runs: within 0.5 pp

    def test_losers_stop_early(self):
        truths = [Truth("plain", 1.0, 1.0), Truth("win", 0.7, 1.0), Truth("bad", 2.0, 2.0)]
        items = {t.name: decisions.Item(decisions.Truth(t.name, t.time, t.cpu)) for t in truths}
        memory = Memory()
        ex = decisions.Synthetic(random.Random(3), 0.02, 0.0, 0.0, 60)
        c = campaign.Campaign(ex, memory, 3, budget=campaign.Budget(runs=60), say=lambda *a, **k: None)
        from threadburn.analysis import race as races
        race = races.Race(lambda: records.run_records(memory.rows, "libomp", runfigures.of_run), items, rules.Rule())
        c.run(items.values(), {k: rules.START_RUNS for k in items}, race)
        runs = {k: sum(1 for r in memory.rows if r.study == k) for k in items}
        self.assertEqual(runs["bad"], rules.START_RUNS)
        self.assertIsNotNone(race.verdict().decision.candidate)

    def test_runs_disturbed_by_another_tenant_are_set_aside_by_their_evidence(self):
        # 20 % of runs take twice as long while another tenant holds the core, and /proc/stat
        # saw its CPU: those runs are named and left out, the rest decide.
        rows = []
        ex = decisions.Synthetic(random.Random(21), 0.02, 0.0, 0.2, 60)
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("W", 0.85)]
        items = [decisions.Item(t) for t in truths]
        c = campaign.Campaign(ex, Memory(), 1, say=lambda *a, **k: None)
        for spec, out in ex.execute(c.plan(items) + c.plan(items) + c.plan(items) + c.plan(items) + c.plan(items)
                                    + c.plan(items) + c.plan(items) + c.plan(items)):
            rows += out
        slow = {r.run_key for r in rows if r.number("host_other_cpu_ms") > 0.3 * r.number("wall_ms")}
        self.assertTrue(slow)
        v = verdicts.decide_records(records.run_records(rows, "libomp", runfigures.of_run), rules.Rule(design="fixed"))
        (e,) = v.entries
        self.assertEqual({k for _, k, _ in e.set_aside}, slow)
        self.assertEqual((e.verdict, e.chosen), ("change", "W"))
        # seen without the evidence, the same runs blur the comparison
        blind = [r.copy(host_other_cpu_ms="") for r in rows]
        (e,) = verdicts.decide_records(records.run_records(blind, "libomp", runfigures.of_run), rules.Rule(design="fixed")).entries
        self.assertEqual((e.set_aside, e.verdict), ([], "undecided"))


if __name__ == "__main__":
    unittest.main()
