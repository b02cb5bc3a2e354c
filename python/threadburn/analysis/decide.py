"""Decisions: which setting to use, or to keep what you have, with a margin
(docs/design.md, Decisions). Pure functions on per-run values.

The unit is the run, a fresh process: steps inside a run and the copies of
one run are reduced to one value per run before anything is compared,
because they share that process's luck. Each run carries its round (the
shuffled block it ran in); with the rule's "ranks" and "paired" methods two
settings are compared on the rounds they both ran in, pair by pair, so
drift shared by a round cancels.

Each comparison is a ratio, setting / reference, of per-run values as a
cost, with an interval at one-sided level alpha' per side
(Rule.alpha_per_test: alpha over settings x looks x the metrics a change
may be claimed on), and what it says against the margin: the estimators
are analysis/ratios.py's.

Objectives, with the baseline b:
  time      a setting beats b when it is faster by more than m;
  cpu       when it uses less CPU by more than the CPU margin;
  balanced  when it is faster by more than m, or not slower by m and
            cheaper by more than the CPU margin.
The CPU margin is m, or the CPU floor (Rule.cpu_floor_cores of a core over
the baseline's loop time) when that is larger: burn below a twentieth of a
core is no cost worth a change.
Verdict:
  change     some setting beats b (a winner). Among the winners: time, the
             fastest; cpu, the cheapest; balanced, the cheapest of those not
             slower than the fastest winner by m (non-inferior, one-sided).
             Settings not yet shown unable to beat the chosen one are named
             (contenders: more runs would tell);
  keep       every setting is shown unable to beat b: an intersection of
             one-sided tests, each at the look's share of alpha (a keep is
             false only if one of them is, so no split over settings or
             claims: Rule.alpha_keep);
  undecided  neither, with the runs each open comparison would need.
"""
import math
import statistics
from dataclasses import dataclass, field

from .ratios import Ratio, Ratios, clearance, one, ratio, runs_needed
from ..lib import rule as rules
from ..lib.rule import FLOOR, MIN_RUNS


# --- one setting's runs -------------------------------------------------------------

@dataclass
class Runs:
    """One setting's per-run values, each with its block (the round it ran
    in; unique per run of the setting): {block: value}."""
    name: str
    time: dict
    cpu: dict
    set_aside: list = field(default_factory=list)   # [(block, why)] disturbed runs not compared

    @property
    def n(self):
        return len(self.time)

    def geo(self, which):
        values = list((self.time if which == "time" else self.cpu).values())
        if not values:
            return None
        return math.exp(statistics.fmean(math.log(max(v, FLOOR)) for v in values))


# --- the decision -------------------------------------------------------------------

@dataclass
class Decision:
    verdict: str                   # change | keep | undecided
    rule: object                   # lib.rule.Rule
    look: int                      # the race's look this decision is (1: the first; a fixed design: 1)
    alpha_each: float
    baseline: str
    cpu_margin: float
    chosen: str = None             # the setting to use (the baseline when keep; the leaning when undecided)
    fastest: str = None            # the fastest setting by its estimate
    cheapest_within: str = None    # the least CPU among those not slower than the fastest by the margin
    within_fastest: list = field(default_factory=list)  # the fastest, then those shown not slower than it by the margin
    why: str = ""
    vs_baseline: dict = field(default_factory=dict)   # name -> Ratios
    vs_chosen: dict = field(default_factory=dict)     # name -> Ratios
    winners: list = field(default_factory=list)       # shown to beat the baseline (at alpha_each)
    candidates: list = field(default_factory=list)    # shown to beat it at the selection level
    candidate: str = None                             # the pick among them: what fresh runs confirm
    candidate_claim: str = None                       # time | cpu: what it beat the baseline on
    candidate_ratio: Ratio = None                     # that ratio, at the selection level
    contenders: list = field(default_factory=list)    # [(name, runs needed)] might still beat the candidate
    eliminated: list = field(default_factory=list)    # shown slower than the fastest by the margin
    open: list = field(default_factory=list)          # [(name, runs needed)] undecided against the baseline
    behind: list = field(default_factory=list)        # open, but shown behind the leader: the race runs them no more
    needs: list = field(default_factory=list)         # settings the next round should run
    settings: dict = field(default_factory=dict)      # name -> Runs
    higher_is_better: bool = False
    refuted: list = field(default_factory=list)       # candidates their fresh runs contradicted: ruled out

    decided = property(lambda self: self.verdict in ("change", "keep"))
    margin = property(lambda self: self.rule.margin)
    objective = property(lambda self: self.rule.objective)


class Decider:
    """The rule applied to one workload's settings."""

    def __init__(self, rule, settings, baseline, time_higher_is_better=False, cpu_margin=None, look=1, final=False,
                 refuted=()):
        by = {s.name: s for s in settings}
        if baseline not in by:
            raise ValueError(f"baseline {baseline!r} is not among the settings")
        self.rule, self.by, self.baseline, self.thb, self.look = rule, by, baseline, time_higher_is_better, look
        # Settings whose fresh runs showed them not better than the baseline by the margin (rule
        # version 5): no longer a candidate, a winner or open; keep counts them as shown.
        self.refuted = set(refuted) - {baseline}
        self.a = rule.alpha_per_test(len(settings), look)
        self.a_keep = rule.alpha_keep(look, final)
        self.m = rule.margin
        self.mc = max(rule.margin, cpu_margin or 0.0)
        self._ratios = {}  # (setting, reference, metric, alpha, racing) -> Ratio: decide asks many twice

    def compare(self, s, ref, alpha=None, racing=False):
        a = alpha or self.a
        return Ratios(self._ratio(s, ref, "time", a, racing), self._ratio(s, ref, "cpu", a, racing))

    def _time(self, s, ref):
        """compare(s, ref).time, where the CPU's ratio is not read."""
        return self._ratio(s, ref, "time", self.a, False)

    def _ratio(self, s, ref, metric, alpha, racing):
        """ratio() of s to ref on one metric, once per Decider for its own
        settings (their runs do not change while it decides)."""
        higher, method, i = self.thb if metric == "time" else False, self.rule.method, self.rule.interpolates
        if self.by.get(s.name) is not s or self.by.get(ref.name) is not ref:
            return ratio(getattr(s, metric), getattr(ref, metric), alpha, higher, method, racing, i)
        key = (s.name, ref.name, metric, alpha, racing)
        if key not in self._ratios:
            self._ratios[key] = ratio(getattr(s, metric), getattr(ref, metric), alpha, higher, method, racing, i)
        return self._ratios[key]

    def beats(self, r):
        t, c = r.time, r.cpu
        if self.rule.objective == "time":
            return t is not None and t.better(self.m)
        if self.rule.objective == "cpu":
            return c is not None and c.better(self.mc)
        return t is not None and (t.better(self.m) or (c is not None and t.not_worse(self.m) and c.better(self.mc)))

    def claim_of(self, r):
        """What a candidate's fresh runs are to confirm (time | cpu), from its
        selection ratios r (the race's runs only, so the claim is planned
        before the fresh runs: one test, whichever it is). The objective's
        own; balanced: time where the race showed it better, and (version
        7) the CPU claim instead where the race showed that one too (CPU
        better at no loss of time) and further past its margin, in units of
        its spread. Before, time whenever it showed: a blocktime 0 with CPU
        -26 % [-29, -24] and time -3 % had its time claim confirmed, which
        could not hold (tune --in-run of LLVM's blocktime with the cores
        oversubscribed by four spinning processes: undecided 7 of 7)."""
        t, c = r.time, r.cpu
        if self.rule.objective == "cpu" or not (t and t.better(self.m)):
            return "cpu"
        if (self.rule.claims_clearer and self.rule.objective == "balanced" and c is not None
                and c.better(self.mc) and t.not_worse(self.m) and clearance(c, self.mc) > clearance(t, self.m)):
            return "cpu"
        return "time"

    def cannot_beat(self, r):
        t, c = r.time, r.cpu
        if self.rule.objective == "time":
            return t is not None and t.not_better(self.m)
        if self.rule.objective == "cpu":
            return c is not None and c.not_better(self.mc)
        return t is not None and c is not None and t.not_better(self.m) and (t.worse(self.m) or c.not_better(self.mc))

    def runs_needed(self, s, ref):
        r = self.compare(s, ref)
        method = self.rule.method
        t = runs_needed(r.time, self.m, self.a, method)
        if self.rule.objective == "time":
            return t
        c = runs_needed(r.cpu, self.mc, self.a, method)
        if self.rule.objective == "cpu":
            return c
        # balanced: time beyond the margin settles it alone (better by it:
        # beats; worse by it: cannot beat, whatever the CPU); inside the
        # margin time and CPU both must settle.
        alone = t if r.time is not None and abs(math.log(r.time.est)) > math.log1p(self.m) else None
        both = None if t is None or c is None else max(t, c)
        return min((n for n in (alone, both) if n is not None), default=None)

    def pick(self, names, ratios):
        """The objective's choice among names, by their ratios to one
        reference: the fastest (time), the cheapest (cpu), or the cheapest
        of those not slower than the fastest by the margin (balanced)."""
        t = lambda n: ratios[n].time.est if ratios[n].time else math.inf
        c = lambda n: ratios[n].cpu.est if ratios[n].cpu else math.inf
        if self.rule.objective == "time":
            return min(names, key=lambda n: (t(n), c(n)))
        if self.rule.objective == "cpu":
            return min(names, key=lambda n: (c(n), t(n)))
        fastest = min(names, key=lambda n: (t(n), c(n)))
        pool = [fastest] + [n for n in names if n != fastest and
                            (r := self._time(self.by[n], self.by[fastest])) is not None and r.not_worse(self.m)]
        return min(pool, key=lambda n: (c(n), t(n)))

    def decide(self):
        b = self.baseline
        by = self.by
        d = Decision("undecided", self.rule, self.look, self.a, b, self.mc, settings=by, higher_is_better=self.thb,
                     refuted=sorted(self.refuted))
        out = self.refuted
        ready = [n for n, s in by.items() if s.n >= MIN_RUNS and len(s.cpu) >= MIN_RUNS]
        short = [n for n in by if n not in ready]
        if len(by) < 2:
            d.why = "one setting only: nothing to compare it with"
            return d
        if b not in ready:
            d.needs = sorted(by)
            d.why = f"fewer than {MIN_RUNS} runs of {', '.join(short)}"
            return d
        d.vs_baseline = {n: self.compare(by[n], by[b]) for n in ready if n != b}
        ratios = dict(d.vs_baseline, **{b: Ratios(one(), one())})
        d.fastest = min(ratios, key=lambda n: ratios[n].time.est if ratios[n].time else math.inf)
        d.within_fastest, d.cheapest_within = self.pick_balanced_view(ratios)
        d.winners = sorted(n for n, r in d.vs_baseline.items() if self.beats(r) and n not in out)
        # The candidate: the objective's pick among the settings that beat the
        # baseline at the selection level (alpha over the settings, no split
        # over looks or claims). The race stops there: fresh runs the race did
        # not use to choose confirm it (analysis/confirmation.py), and that
        # test, planned once, is the claim of a confirmed change.
        self.a_sel = self.rule.alpha_select(len(by))
        selection = {n: self.compare(by[n], by[b], self.a_sel) for n in ready if n != b}
        d.candidates = sorted(n for n, r in selection.items() if self.beats(r) and n not in out)
        if d.candidates:
            d.candidate = self.pick(d.candidates, ratios)
            r = selection[d.candidate]
            d.candidate_claim = self.claim_of(r)
            d.candidate_ratio = getattr(r, d.candidate_claim)
            d.contenders = [(n, None) for n in ready if n not in (b, d.candidate) and n not in out
                            and not self.cannot_beat(self.compare(by[n], by[d.candidate], self.a_sel, racing=True))]
        if d.winners:
            d.verdict, d.chosen = "change", self.pick(d.winners, ratios)
        elif not short and all(n in out or self.cannot_beat(self.compare(by[n], by[b], self.a_keep))
                               for n in d.vs_baseline):
            d.verdict, d.chosen = "keep", b
        else:
            d.chosen = self.pick([n for n in ratios if n not in out], ratios)
        chosen = by[d.chosen]
        d.vs_chosen = {n: self.compare(by[n], chosen) for n in ready if n != d.chosen}
        fastest = by[d.fastest]
        d.eliminated = sorted(n for n in ready if n != d.fastest
                              and (r := self._time(by[n], fastest)) is not None and r.worse(self.m))
        needs = set(short)
        if d.candidate is not None:
            d.contenders = [(n, self.runs_needed(by[n], by[d.candidate])) for n, _ in d.contenders]
        if d.candidate is not None and self.rule.confirm:
            # The race stops at its candidate: fresh runs confirm it. Version 3: not while a
            # setting that might still beat it has had few runs (a wild run in its first few
            # can hide the better one): the candidate, those and the baseline race on.
            if self.rule.version >= 3 and d.contenders and max(s.n for s in by.values()) < rules.CONTEND_RUNS:
                needs |= {n for n, _ in d.contenders} | {d.candidate, b}
        elif d.verdict == "change":
            d.contenders = [(n, self.runs_needed(by[n], by[d.chosen])) for n in ready if n not in (b, d.chosen)
                            and n not in out and not self.cannot_beat(d.vs_chosen[n])]
            if d.contenders:
                needs |= {n for n, _ in d.contenders} | {d.chosen}
        elif d.verdict == "undecided":
            for n, r in d.vs_baseline.items():
                if n not in out and not self.beats(r) and not self.cannot_beat(self.compare(by[n], by[b], self.a_keep)):
                    d.open.append((n, self.runs_needed(by[n], by[b])))
            # The race runs the baseline, the leader and the open settings not
            # shown behind the leader: those could still be the change. When
            # every open one is behind the leader, no change is left to find
            # and only keep can end the race: keep needs each of them settled
            # against the baseline itself, so they run (never the leader alone,
            # whose runs could not settle them).
            d.behind = sorted(n for n, _ in d.open if n != d.chosen and self.behind(by[n], by[d.chosen]))
            live = {n for n, _ in d.open if n not in d.behind}
            needs |= (live or set(d.behind)) | {b}
            if live and d.chosen != b:
                needs.add(d.chosen)
        d.needs = sorted(needs)
        d.why = self.why(d, short)
        return d

    def behind(self, s, leader):
        """Is s shown unable to be preferred to the leader? Racing only, no
        claim to the user: at Rule.race_alpha per comparison, uncorrected, on
        the sign test's bounds (rule method ranks)
        (a wrong call costs runs, never a false change: every claim is
        tested at alpha'). time: s slower; cpu: s costlier; balanced: s
        slower by the margin, or slower and not cheaper."""
        a = self.rule.race_alpha
        t, c = self._ratio(s, leader, "time", a, True), self._ratio(s, leader, "cpu", a, True)
        if self.rule.objective == "time":
            return t is not None and t.lo > 1
        if self.rule.objective == "cpu":
            return c is not None and c.lo > 1
        return t is not None and (t.lo > 1 + self.m or (t.lo > 1 and c is not None and c.lo > 1))

    def pick_balanced_view(self, ratios):
        """(the fastest and the settings shown not slower than it by the margin,
        the cheapest of them), whatever the objective: shown beside the choice."""
        fastest = min(ratios, key=lambda n: ratios[n].time.est if ratios[n].time else math.inf)
        pool = [fastest] + [n for n in ratios if n != fastest and
                            (r := self._time(self.by[n], self.by[fastest])) is not None and r.not_worse(self.m)]
        return pool, min(pool, key=lambda n: ratios[n].cpu.est if ratios[n].cpu else math.inf)

    def why(self, d, short):
        pct = f"{self.m:.0%}"
        if d.verdict == "keep":
            fresh = (f" ({', '.join(d.refuted)} by {'its' if len(d.refuted) == 1 else 'their'} fresh runs)"
                     if d.refuted else "")
            return f"every setting tried is shown not to beat {d.baseline} by more than {pct}{fresh}"
        if d.verdict == "change":
            r = d.vs_baseline[d.chosen]
            if r.time is not None and r.time.better(self.m):
                return f"{d.chosen} is faster than {d.baseline} by more than {pct}"
            return (f"{d.chosen} is not slower than {d.baseline} by {pct} and uses over {self.mc:.0%} less CPU")
        if short:
            return f"fewer than {MIN_RUNS} runs of {', '.join(short)}"
        return f"{len(d.open)} comparison(s) with {d.baseline} still straddle the {pct} margin"


def decide(rule, settings, baseline, time_higher_is_better=False, cpu_margin=None, look=1, final=False, refuted=()):
    """settings: [Runs]; baseline: the name of one of them; look: the
    race's look (rule.look_of the most runs a setting has); final: the
    race is over (a file's last look: keep's last test, Rule.alpha_keep);
    refuted: candidates their fresh runs contradicted (rule version 5),
    ruled out (analysis/verdicts.py finds them)."""
    return Decider(rule, settings, baseline, time_higher_is_better, cpu_margin, look, final, refuted).decide()


def cpu_margin(rule, baseline_runs, time_is_ms=True):
    """The CPU margin of a workload: the rule's margin, or the CPU floor
    (rule.cpu_floor_cores of a core over the baseline's loop time) as a
    share of the baseline's CPU when that is larger. None without a time
    in ms (a user's figure in other units)."""
    t, c = baseline_runs.geo("time"), baseline_runs.geo("cpu")
    if not time_is_ms or not t or not c:
        return None
    return rule.cpu_floor_cores * t / c
