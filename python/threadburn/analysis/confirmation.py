"""The confirmation of a change: fresh runs of the chosen setting and the
baseline, interleaved in rounds of two (and in a tune without the probe),
that the race did not use to choose. Their ratio is the gain a user can
expect: the race's own estimate of the setting it picked is biased toward
luck (the winner's curse), these runs are not. Does the gain the change was
claimed on hold there, and what did the probe cost the program (its wall
time probed / not, same setting)?

One planned comparison per claim, looked at in turns (rule version 3):
the k-th look at the fresh runs tests each side one-sided at
Rule.alpha_confirm(k), shares of confirm_alpha that sum to it, so a
confirmation that cannot yet tell goes on with more fresh runs while the
budget allows and its false-change rate stays confirm_alpha over all its
looks; its interval at any look is a repeated confidence interval: it holds
the truth at every look at once with 1 - 2 x confirm_alpha (90 %). The
looks are in the rows: look k's rounds are numbered from 1000 x k. Version
2: one look, at confirm_alpha. The claim holds ("yes") when the fresh runs
show it, is contradicted ("no") when they show its opposite (not better by
the margin), and is open ("undecided") otherwise. Version 5: a contradicted
candidate is ruled out and the race goes on (analysis/verdicts.py,
confirmed_decision); the looks are numbered over the whole campaign, so the
next candidate's confirmation tests at the shares the earlier looks left.
"""
import math
from dataclasses import dataclass

from . import ratios
from ..lib.rule import MIN_RUNS
from ..lib.stats import normal_quantile

# The confirmation runs of each side at its first look, at least (6 pairs:
# the fewest whose signed-rank bound reaches the first look's level, 2^-6 <
# 0.05 x CONFIRM_SPENDING[0]), and by default at most at the first look
# (the looks after it take what the budget has left).
CONFIRM_MIN = 6
CONFIRM_MAX = 30
# A look after the first adds at least this share of the fresh runs so far
# (each look costs a share of alpha), and at least LOOK_MIN_RUNS runs each;
# with less left in the budget the confirmation ends.
LOOK_GROWTH = 0.5
LOOK_MIN_RUNS = 3
# ... and at most this share of them (one look at most doubles the runs): the
# runs a look would need to tell follow from the gain seen, and a gain just
# past the margin by luck asks for any number (ratios.runs_needed). Sized
# that way, one look took the whole budget (190 + 190 fresh runs of a
# setting its runs then contradicted, none left for the next candidate:
# tests/python/test_robust.py); capped, a gain seen near the margin is seen
# again, more exactly, at the next look.
LOOK_MAX_GROWTH = 1.0
# Fresh runs of look k are in rounds from ROUNDS_PER_LOOK x k.
ROUNDS_PER_LOOK = 1000
# The power a confirmation is sized for, at the race's spread, if the true
# gain were a third of the way from the margin to the race's estimate (the
# race's estimate of the setting it picked is too good: the winner's curse).
CONFIRM_POWER = 0.9
HEDGE = 1 / 3


@dataclass
class Confirmation:
    chosen: str
    baseline: str
    claim: str                  # time | cpu: what the change was claimed on
    runs: tuple                 # (runs of chosen, of baseline)
    time: object                # ratios.Ratio (chosen / baseline as a cost) or None
    cpu: object
    holds: str                  # yes | no | undecided | None (no usable fresh runs)
    margin: float
    cpu_margin: float
    coverage: float             # of the two-sided interval, over every look (a repeated interval)
    probe_cost: object = None   # ratios.Ratio: probed / unprobed wall time of the chosen setting (tune)
    look: int = 1               # the confirmation's look these runs are
    alpha: float = None         # each side's one-sided level at that look
    more: int = None            # undecided: runs each for a next look (None: no usable ratio)
    more_sized: bool = False    # `more` from the gain and spread seen (else: the looks' growth, the gain
                                # seen being under the margin while the interval still reaches past it)
    sequential: bool = False    # looked at in turns (rule version 3)

    @property
    def headline_ratio(self):
        return self.cpu if self.claim == "cpu" else self.time


def _values(recs, name, attr):
    out, seen = {}, set()
    for r in sorted(recs, key=lambda r: (r.round if r.round is not None else -1, r.run_key)):
        if r.name != name or r.status != "ok" or getattr(r, attr) is None:
            continue
        block = r.round if r.round is not None and r.round not in seen else r.run_key
        seen.add(r.round)
        out[block] = getattr(r, attr)
    return out


def look_of(recs, name, rule):
    """The confirmation's look that the fresh runs of `name` make. Version
    5: the campaign's look number, the thousands of their last round: looks
    are counted over every candidate's confirmation, so one after a
    contradicted candidate spends the shares its looks left (all together
    spend confirm_alpha at most); versions 3 and 4: the looks (thousands)
    they span, each candidate's counted from 1; version 2: one."""
    if rule.version < 3:
        return 1
    looks = {r.round // ROUNDS_PER_LOOK for r in recs if r.name == name and r.round is not None}
    if rule.rules_out_refuted:
        return max(looks, default=1)
    return max(1, len(looks))


def next_look_of(recs, rule):
    """The look number the next fresh runs of a campaign would make (its
    rows' rounds: look_of), for the level a first look is sized at."""
    if not rule.rules_out_refuted:
        return 1
    return 1 + max((r.round // ROUNDS_PER_LOOK for r in recs if r.phase == "confirm" and r.round is not None),
                   default=0)


def analyse(recs, d, rule):
    """The Confirmation of decision d's candidate from the confirm-phase run
    records (None without MIN_RUNS fresh runs of it and of the baseline)."""
    chosen = d.candidate
    mine = [r for r in recs if r.phase == "confirm" and r.name in (chosen, d.baseline)]
    if rule.rules_out_refuted:  # the baseline's fresh runs of this candidate's rounds: not an earlier one's
        rounds = {r.round for r in mine if r.name == chosen}
        mine = [r for r in mine if r.name == chosen or r.round is None or r.round in rounds]
    if chosen is None or min(len(_values(mine, n, "time")) for n in (chosen, d.baseline)) < MIN_RUNS:
        return None  # no fresh runs of this candidate (and its baseline) to speak of
    look = look_of(mine, chosen, rule)
    a = rule.alpha_confirm(look)
    t = ratios.ratio(_values(mine, chosen, "time"), _values(mine, d.baseline, "time"), a, d.higher_is_better,
                     rule.method, interpolate=rule.interpolates)
    c = ratios.ratio(_values(mine, chosen, "cpu"), _values(mine, d.baseline, "cpu"), a, False, rule.method,
                     interpolate=rule.interpolates)
    claim = d.candidate_claim
    m, mc = rule.margin, d.cpu_margin
    if claim == "time":
        holds = None if t is None else "yes" if t.better(m) else "no" if t.not_better(m) else "undecided"
    elif rule.objective == "cpu":
        holds = None if c is None else "yes" if c.better(mc) else "no" if c.not_better(mc) else "undecided"
    else:
        holds = None if t is None or c is None else (
            "yes" if c.better(mc) and t.not_worse(m) else "no" if c.not_better(mc) or t.worse(m) else "undecided")
    n = (len(_values(mine, chosen, "time")), len(_values(mine, d.baseline, "time")))
    conf = Confirmation(chosen, d.baseline, claim, n, t, c, holds, m, mc, 1 - 2 * rule.confirm_alpha,
                        probe_cost(recs, chosen, rule), look, a, sequential=rule.version >= 3)
    if holds == "undecided" and rule.version >= 3:
        conf.more, conf.more_sized = more_needed(conf, rule)
    return conf


def probe_cost(recs, name, rule):
    """Probed / unprobed wall time of one setting (a tune's race runs ran
    under the probe, its confirmation runs without): the probe's cost on the
    user's program. None where both phases are not there (a sweep)."""
    probed = [r.wall_ms for r in recs if r.name == name and r.phase == "race" and r.status == "ok" and r.wall_ms]
    bare = [r.wall_ms for r in recs if r.name == name and r.phase == "confirm" and r.status == "ok" and r.wall_ms]
    if not probed or not bare or not recs[0].rows[0].is_tune:
        return None
    return ratios.ratio(dict(enumerate(probed)), dict(enumerate(bare)), rule.confirm_alpha, method="welch")


def runs_for(d, rule, available, look=1):
    """Runs per side the confirmation of decision d's candidate needs: enough
    for its claim to show again in fresh runs with CONFIRM_POWER, at the
    spread the race saw between it and the baseline, if the true gain
    were HEDGE of the way from the margin to the race's estimate, at the
    level of the look it makes (next_look_of). Within CONFIRM_MIN and the
    smaller of CONFIRM_MAX and the runs available."""
    r = d.candidate_ratio
    top = max(CONFIRM_MIN, min(available, CONFIRM_MAX))
    if r is None:
        return min(top, CONFIRM_MIN)
    edge = math.log1p(rule.margin if d.candidate_claim == "time" else d.cpu_margin)
    room = (abs(math.log(r.est)) - edge) * HEDGE
    if room <= 0 or r.sd == 0:
        return CONFIRM_MIN if r.sd == 0 else top
    z = normal_quantile(1 - rule.alpha_confirm(look)) + normal_quantile(CONFIRM_POWER)
    ranks = ratios.SIGN_RUNS if rule.method == "ranks" else 1.0  # its claim's bound is the sign test's
    need = math.ceil(ranks * (z * r.sd / room) ** 2) + 1
    return max(CONFIRM_MIN, min(top, need))


def more_needed(conf, rule):
    """(runs each for a next look, whether sized by what these fresh runs
    show). With the gain seen past the margin: what the next look would
    need for the open claim to settle, at their spread and gain
    (ratios.runs_needed at the next look's level), less those there are.
    With the gain seen under the margin (or on the wrong side of it) no
    size follows from it, yet an undecided interval still reaches past the
    margin: the next look grows the runs by LOOK_GROWTH. Before, the looks
    stopped there ("no number of runs would show it"), after as few as 8
    pairs whose interval was [-10.6 %, +23.8 %], with 125 runs of the
    budget left, on a true 12 % gain (a soak round of tune_hidden, a core
    busy); the looks' error is spent over them whatever their number
    (Rule.alpha_confirm), so going on costs runs, not false changes.
    (None, False) without a ratio."""
    r = conf.headline_ratio
    if r is None:
        return None, False
    m = conf.margin if conf.claim == "time" else conf.cpu_margin
    if r.est < 1 / (1 + m):
        need = ratios.runs_needed(r, m, rule.alpha_confirm(conf.look + 1), rule.method)
        if need is not None:
            return max(LOOK_MIN_RUNS, need - min(conf.runs)), True
    return max(LOOK_MIN_RUNS, math.ceil(LOOK_GROWTH * min(conf.runs))), False


def next_look(conf, rule, available):
    """Runs each for the confirmation's next look, within `available` runs
    each: what it would need to tell (more_needed), at least LOOK_GROWTH of
    the runs so far and LOOK_MIN_RUNS, at most LOOK_MAX_GROWTH of them; 0
    when it is over (settled, a single look by the rule, nothing would
    tell, or too little budget left)."""
    if rule.version < 3 or conf is None or conf.holds != "undecided" or conf.more is None:
        return 0
    n = max(conf.more, LOOK_MIN_RUNS, math.ceil(LOOK_GROWTH * min(conf.runs)))
    n = min(n, max(LOOK_MIN_RUNS, math.ceil(LOOK_MAX_GROWTH * min(conf.runs))), available)
    return n if n >= LOOK_MIN_RUNS else 0
