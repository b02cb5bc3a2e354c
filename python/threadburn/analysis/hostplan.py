"""A host's plan (tune --copies, docs/design.md, Host plans): what each
copy loses against one copy by itself, and with several copy counts, how
many copies this host fits. Pure functions on run records and verdicts.

Both read fresh runs only (the confirmation's rounds, which run every copy
count's plain plan, its candidate, and one copy of its best plan alone,
interleaved, after the races): numbers the races did not use to choose.

Each copy against alone: the per-copy figure (each copy's own --metric, else
its own wall time) of the plan at N over one copy of the same plan by
itself (copy 0's environment and core set), paired by round, as a cost
ratio with the confirmation's two-sided 1 - 2 x confirm_alpha interval.
A description of what sharing costs a copy: no claim against a margin.

How many fit: each copy count's best plan (the confirmed change, else
plain) against the previous count's, on the host's figure (higher is
better), paired by round, each step a one-sided test at confirm_alpha /
(steps) (Bonferroni over the steps). A step *adds* when the interval lies
above 1 + margin, *adds less than the margin* when it lies below, and is
open otherwise; the host fits the copy count before the first step that
does not add, said only when that step is settled (else: at least).

The same steps (steps, enough: one rule) size a slot: tune --cpus 1,2,4
compares each slot size's plan with the previous size's on the run's
throughput in fresh runs, each run in a slot of its size
(analysis/slotsizes.py), and the training needs the size before the first
step that does not add.
"""
from dataclasses import dataclass

from . import ratios


@dataclass
class Alone:
    setting: str                # the plan one copy of which ran alone
    ratio: ratios.Ratio         # per copy at N / alone, as a cost: above 1, each copy loses
    higher_is_better: bool      # of the per-copy figure (a --metric's direction; wall time: lower)
    runs: tuple                 # (fresh runs at N, alone) compared


@dataclass
class Step:
    fewer: int                  # copies
    more: int
    fewer_plan: str             # each count's best plan
    more_plan: str
    ratio: ratios.Ratio         # host figure fewer / more as a cost (below 1: more copies, more work done)
    word: str                   # adds | adds less | open


@dataclass
class Fit:
    command: str
    steps: list
    fits: int                   # the most copies every step up to which adds more than the margin
    settled: bool               # the step after `fits` is shown to add less (else open, or none was tried)
    margin: float
    alpha: float                # one-sided, per step
    tried: tuple                # the copy counts


def by_round(recs, attr):
    """{round: value} of ok records (a second run in a round: a block of its own)."""
    out, seen = {}, set()
    for r in sorted(recs, key=lambda r: (r.round if r.round is not None else -1, r.run_key)):
        value = getattr(r, attr)
        if r.status != "ok" or value is None:
            continue
        out[r.round if r.round is not None and r.round not in seen else r.run_key] = value
        seen.add(r.round)
    return out


def best(e):
    """The plan a copy count ends with: the confirmed change, else plain."""
    return e.chosen if e.verdict == "change" else e.baseline


def fresh(e, confirm_recs):
    """{setting: {round: host figure}} of a workload's fresh runs."""
    out = {}
    for name in {r.name for r in confirm_recs}:
        values = by_round([r for r in confirm_recs if r.name == name], "time")
        if values:
            out[name] = values
    return out


def alone(e, confirm_recs, alone_recs, rule):
    """Alone of a host entry (N > 1 copies): its best plan's fresh runs at
    N (or the race's candidate's, or plain's: the first that a copy alone
    ran for) against one copy of it by itself. None without both."""
    if not e.copies or e.copies < 2:
        return None
    for name in dict.fromkeys(n for n in (best(e), e.decision.candidate, e.baseline) if n):
        keys = e.points.get(name, set())
        solo = [r for r in alone_recs if r.point_key in keys]
        mine = [r for r in confirm_recs if r.name == name]
        if not solo or not mine:
            continue
        higher = mine[0].per_copy_higher
        a, b = by_round(mine, "per_copy"), by_round(solo, "per_copy")
        r = ratios.ratio(a, b, rule.confirm_alpha, higher, rule.method, interpolate=rule.interpolates)
        if r is not None:
            return Alone(name, r, higher, (len(a), len(b)))
    return None


def steps(series, alpha, rule, higher=True):
    """Each plan in `series` against the one before it: series, sorted by
    size, is [(size, plan, {round: figure})] (copies and the host's
    figure; tune --cpus: slot sizes and the run's throughput), each step a
    ratio of the larger over the smaller at one-sided alpha, paired by
    round: adds (better by more than the margin), adds less (shown not
    better by the margin) or open. The one rule of --copies and --cpus."""
    out = []
    for (lo, lo_plan, lo_fig), (hi, hi_plan, hi_fig) in zip(series, series[1:]):
        r = ratios.ratio(hi_fig, lo_fig, alpha, higher, rule.method, interpolate=rule.interpolates)
        word = "open" if r is None else "adds" if r.better(rule.margin) else (
            "adds less" if r.not_better(rule.margin) else "open")
        out.append(Step(lo, hi, lo_plan, hi_plan, r, word))
    return out


def enough(first, stepped):
    """(the size up to which every step adds, whether the step after it is
    settled: shown to add less than the margin; else open, or none tried)."""
    size, settled = first, False
    for s in stepped:
        if s.word != "adds":
            settled = s.word == "adds less"
            break
        size = s.more
    return size, settled


def step_alpha(rule, sizes):
    """Each step's one-sided level: confirm_alpha over the steps (Bonferroni)."""
    return rule.confirm_alpha / max(1, sizes - 1)


def fit(entries, rule):
    """Fit of a host tune of several copy counts (None otherwise): each
    count's best plan against the previous count's, in fresh runs."""
    host = [e for e in entries if e.copies]
    if len({e.command for e in host}) != 1 or len(host) < 2:
        return None
    host.sort(key=lambda e: e.copies)
    alpha = step_alpha(rule, len(host))
    stepped = steps([(e.copies, best(e), e.fresh.get(best(e), {})) for e in host], alpha, rule)
    fits, settled = enough(host[0].copies, stepped)
    return Fit(host[0].command, stepped, fits, settled, rule.margin, alpha, tuple(e.copies for e in host))
