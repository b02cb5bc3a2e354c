"""Synthetic runs with a known truth, for the decision rule's tests.

A setting has a true time and a true CPU per step. A run (a fresh process)
draws its own luck: a log-normal run effect (sd `run_sd`), then `steps`
steps each with log-normal step noise (sd `step_sd`); with probability
`preempt` the whole run is slowed by a factor in [1.3, 2.0] (another
tenant took the core). A run reports its steps; decide.per_run turns them
into one value per run. CPU follows the run's time effect (a slower run
spins longer) with its own small noise.
"""
import math
import random

from threadburn.analysis import decide


class Truth:
    def __init__(self, name, time, cpu):
        self.name, self.time, self.cpu = name, time, cpu


def run_steps(rng, truth, steps=20, run_sd=0.03, step_sd=0.02, preempt=0.0):
    effect = rng.gauss(0, run_sd)
    slow = rng.uniform(1.3, 2.0) if rng.random() < preempt else 1.0
    times = [truth.time * slow * math.exp(effect + rng.gauss(0, step_sd)) for _ in range(steps)]
    cpus = [truth.cpu * math.exp(effect + rng.gauss(0, step_sd)) for _ in range(steps)]
    return times, cpus


def settings(rng, truths, n, **kw):
    """decide.Setting per truth with n runs, one value per run."""
    out = []
    for t in truths:
        by_run_t, by_run_c = {}, {}
        for r in range(n):
            by_run_t[r], by_run_c[r] = run_steps(rng, t, **kw)
        out.append(decide.Setting(t.name, decide.per_run(by_run_t), decide.per_run(by_run_c)))
    return out


def rates(truths, baseline, n, trials=200, seed=1, objective="balanced", looks=1, **kw):
    """{verdict:chosen: share of trials} over `trials` seeded data sets."""
    counts = {}
    for i in range(trials):
        rng = random.Random(seed * 100003 + i)
        d = decide.decide(settings(rng, truths, n, **kw), baseline, objective=objective, looks=looks)
        key = f"{d.verdict}:{d.chosen}" if d.verdict != "undecided" else "undecided"
        counts[key] = counts.get(key, 0) + 1
    return {k: v / trials for k, v in counts.items()}
