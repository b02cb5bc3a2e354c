"""Synthetic runs with a known truth, for the decision rule's tests.

A setting has a true time and a true CPU per step. A run (a fresh process)
in round r draws its own luck: a log-normal run effect (sd `run_sd`), the
round's shared effect (`round_effects[r]`: drift, a neighbour, shared by
every setting run in that round), then `steps` steps each with log-normal
step noise (sd `step_sd`); with probability `preempt` the whole run is
slowed by a factor in [1.3, 2.0]. A run reports its steps; one value per
run is their mean. CPU follows the run's effect (a slower run spins longer)
with its own small noise, or with cpu_sd its own luck, independent of the
time's.
"""
import math
import random
import statistics

from threadburn.analysis import decide
from threadburn.lib import rule as rules


class Truth:
    def __init__(self, name, time, cpu):
        self.name, self.time, self.cpu = name, time, cpu


def run_steps(rng, truth, steps=20, run_sd=0.03, step_sd=0.02, preempt=0.0, shared=0.0, cpu_sd=None):
    effect = rng.gauss(0, run_sd) + shared
    cpu_effect = effect if cpu_sd is None else rng.gauss(0, cpu_sd) + shared
    slow = rng.uniform(1.3, 2.0) if rng.random() < preempt else 1.0
    times = [truth.time * slow * math.exp(effect + rng.gauss(0, step_sd)) for _ in range(steps)]
    cpus = [truth.cpu * math.exp(cpu_effect + rng.gauss(0, step_sd)) for _ in range(steps)]
    return times, cpus


def settings(rng, truths, n, round_effects=None, **kw):
    """decide.Runs per truth with n runs, one value per run, keyed by round."""
    out = []
    for t in truths:
        time, cpu = {}, {}
        for r in range(n):
            shared = round_effects[r] if round_effects else 0.0
            steps_t, steps_c = run_steps(rng, t, shared=shared, **kw)
            time[r], cpu[r] = statistics.fmean(steps_t), statistics.fmean(steps_c)
        out.append(decide.Runs(t.name, time, cpu))
    return out


def rates(truths, baseline, n, trials=200, seed=1, objective="balanced", design="fixed", method="paired",
          **kw):
    """{verdict:chosen: share of trials} over `trials` seeded data sets,
    by the rule's own claims (no confirmation: a fixed design)."""
    rule = rules.Rule(objective=objective, design=design, method=method)
    counts = {}
    for i in range(trials):
        rng = random.Random(seed * 100003 + i)
        d = decide.decide(rule, settings(rng, truths, n, **kw), baseline)
        key = f"{d.verdict}:{d.chosen}" if d.verdict != "undecided" else "undecided"
        counts[key] = counts.get(key, 0) + 1
    return {k: v / trials for k, v in counts.items()}
