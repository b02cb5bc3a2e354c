"""The run engine (python/threadburn/engine/campaign.py) with a mock executor whose
runs come from synthetic.py (known true times and CPU): rounds as blocks,
resume, the budget, and a race over decide.py whose decision rates are known
(a clear winner found, no false change on a null)."""
import math
import random
import unittest

import helpers  # noqa: F401  (puts python/ on the path)
from synthetic import Truth, run_steps
from threadburn.engine import campaign
from threadburn.analysis import decide


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
            yield spec, [{"run_key": spec.key, "study": spec.item.key, "round": spec.round, "status": "ok",
                          "time": sum(times) / len(times), "cpu": sum(cpus) / len(cpus), "wall_s": 0.0}]


def make_race(memory, items, baseline, c, objective="balanced"):
    state = {}

    def race():
        if "looks" not in state:
            state["looks"] = decide.looks_for_budget(len(items), c.budget.runs)
        settings = [decide.Setting(i.key, [r["time"] for r in memory.rows if r["study"] == i.key],
                                   [r["cpu"] for r in memory.rows if r["study"] == i.key]) for i in items]
        d = decide.decide(settings, baseline, objective, looks=state["looks"])
        state["decision"] = d
        return [i for i in items if i.key in d.needs]
    return race, state


def race_once(truths, baseline, budget, seed, **noise):
    items = [Item(t) for t in truths]
    memory = Memory()
    ex = MockExecutor(random.Random(seed), **noise)
    c = campaign.Campaign(ex, memory, seed, budget=campaign.Budget(runs=budget), say=lambda *a, **k: None)
    race, state = make_race(memory, items, baseline, c)
    ended = c.run(items, {i.key: decide.START_RUNS for i in items}, race)
    return ended, state["decision"], ex, memory


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

    def test_budget_is_respected_and_rounds_stay_whole(self):
        truths = [Truth(f"s{i}", 1.0 + 0.01 * i, 1.0) for i in range(6)]  # hard to separate: runs to the budget
        for seed in range(10):
            ended, d, ex, memory = race_once(truths, "s0", 40, seed, run_sd=0.05)
            self.assertLessEqual(len(ex.started), 40)
            by_round = {}
            for s in ex.started:
                by_round.setdefault(s.round, []).append(s.item.key)
            for keys in by_round.values():
                self.assertEqual(len(keys), len(set(keys)))  # no item twice in a round

    def test_clear_winner_with_preempted_runs_is_found_within_the_budget(self):
        truths = [Truth("plain", 1.0, 1.0), Truth("win", 0.8, 0.9), Truth("near", 0.97, 1.0),
                  Truth("slow", 1.1, 1.2), Truth("slower", 1.5, 1.0)]
        decisions = [race_once(truths, "plain", 100, seed, preempt=0.05)[1] for seed in range(self.TRIALS)]
        found = sum((d.verdict, d.chosen) == ("change", "win") for d in decisions)
        self.assertGreaterEqual(found / self.TRIALS, 0.95)

    def test_null_race_changes_nothing_beyond_alpha(self):
        truths = [Truth(f"s{i}", 1.0, 1.0) for i in range(6)]
        verdicts = [race_once(truths, "s0", 120, seed, run_sd=0.02)[1].verdict for seed in range(self.TRIALS)]
        changes = verdicts.count("change") / self.TRIALS
        self.assertLessEqual(changes, decide.ALPHA + 3 * math.sqrt(decide.ALPHA * (1 - decide.ALPHA) / self.TRIALS))
        self.assertGreaterEqual(verdicts.count("keep") / self.TRIALS, 0.8)

    def test_losers_stop_early(self):
        truths = [Truth("plain", 1.0, 1.0), Truth("win", 0.7, 1.0), Truth("bad", 2.0, 2.0)]
        _, d, ex, _ = race_once(truths, "plain", 200, 3)
        runs = {k: sum(1 for s in ex.started if s.item.key == k) for k in ("plain", "win", "bad")}
        self.assertEqual(d.verdict, "change")
        self.assertEqual(runs["bad"], decide.START_RUNS)


if __name__ == "__main__":
    unittest.main()
