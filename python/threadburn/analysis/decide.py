"""Decisions: which setting to use, or to keep what you have, with a margin.

Pure functions on per-run values (docs/design.md, "Decisions"). The unit is
the run, a fresh process: steps inside a run and the copies of one run are
reduced to one value per run before anything is compared (per_run), because
they share that process's luck (placement, frequency, neighbours) and are
not independent samples.

Each comparison is a ratio, setting / reference, of the geometric means of
the per-run values, with a confidence interval from Welch's t on the log
values. Against a practical margin delta (default 5 %) a ratio's interval
says, one-sided at alpha' each:

  better      the whole interval below 1/(1+delta)
  worse       the whole interval above 1+delta
  equivalent  the whole interval inside [1/(1+delta), 1+delta] (TOST)
  undecided   anything else: "not significant" is never read as "the same".

alpha' = alpha / (comparisons x looks) (Bonferroni): comparisons = the
settings compared with the baseline; looks = the times a race may look at
its data before stopping (looks_for_budget). Why Welch t and no bootstrap:
after that correction each one-sided test works at alpha' ~ 1e-3..1e-4; a
percentile bootstrap of 8-30 runs cannot resolve tails that thin (and
covers too little at small n), and the per-step values behind a run's mean
are already in the spread of the run means.

Objectives (lower is better for both metrics; a higher-is-better figure is
turned around by Metric.higher_is_better):
  time      the fastest; cpu: the least CPU;
  balanced  the least CPU among the fastest: the best on time and every
            setting shown equivalent to it on time, then the least CPU.
Verdict against the baseline b:
  change     some setting among those beats b by more than the margin
             (time: faster; cpu: less CPU; balanced: faster, or not slower
             and less CPU), the least-CPU (or fastest) such one is chosen;
  keep       every setting is shown not to beat b by the margin: "your
             settings are within the margin of the best tried" (an
             intersection of one-sided tests: no correction needed for it);
  undecided  neither, with the runs each open comparison would need.
"""
import functools
import math
import statistics
from dataclasses import dataclass, field

from ..lib.rule import (ALPHA, FLOOR, LOOK_SCHEDULE, MARGIN, METHOD, MIN_RUNS, OBJECTIVES, START_RUNS,  # noqa: F401
                        alpha_each, looks_for_budget)


# --- Student's t, from the regularized incomplete beta function ------------------

def _betacf(a, b, x):
    """Continued fraction of the incomplete beta function (Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c if abs(1.0 + aa / c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a, b, x):
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    ln = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1) / (a + b + 2):
        return math.exp(ln) * _betacf(a, b, x) / a
    return 1.0 - math.exp(ln) * _betacf(b, a, 1 - x) / b


def t_sf(t, df):
    """P(T > t) for Student's t with df degrees of freedom (df may be fractional)."""
    if math.isinf(df):
        return 0.5 * math.erfc(t / math.sqrt(2))
    tail = 0.5 * _betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1 - tail


@functools.lru_cache(maxsize=4096)
def t_quantile(p, df):
    """The t with P(T <= t) = p, by bisection on t_sf (p in (0, 1))."""
    if p == 0.5:
        return 0.0
    if p < 0.5:
        return -t_quantile(1 - p, df)
    lo, hi = 0.0, 1.0
    while t_sf(hi, df) > 1 - p:
        hi *= 2
        if hi > 1e12:
            return math.inf
    while hi - lo > 1e-10 * hi:
        mid = (lo + hi) / 2
        if t_sf(mid, df) > 1 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


# --- one value per run ------------------------------------------------------------

def per_run(values_by_run, combine=statistics.fmean):
    """{run key: [values of that run's steps or copies]} -> one value per
    run (combine: the mean by default; a world's CPU is a sum). The only
    way samples enter a comparison: never steps or copies as units."""
    return [combine(v) for v in values_by_run.values() if v]


def _logs(values, higher_is_better):
    sign = -1.0 if higher_is_better else 1.0
    return [sign * math.log(max(v, FLOOR)) for v in values]


# --- ratios -------------------------------------------------------------------------

@dataclass
class Ratio:
    """setting / reference as a cost ratio (below 1: the setting is better),
    with a two-sided 1 - 2 alpha' interval (each side a one-sided test)."""
    est: float
    lo: float
    hi: float
    n: int
    n_ref: int
    alpha: float
    df: float

    def better(self, margin):
        return self.hi < 1 / (1 + margin)

    def worse(self, margin):
        return self.lo > 1 + margin

    def not_better(self, margin):
        return self.lo > 1 / (1 + margin)

    def not_worse(self, margin):
        return self.hi < 1 + margin

    def equivalent(self, margin):
        return self.not_better(margin) and self.not_worse(margin)

    def word(self, margin):
        if self.better(margin):
            return "better"
        if self.worse(margin):
            return "worse"
        if self.equivalent(margin):
            return "equivalent"
        return "undecided"


def ratio(values, ref, alpha_each, higher_is_better=False):
    """Ratio of geometric means, values / ref, as a cost (for a
    higher-is-better figure: ref / values), with Welch's interval at one
    -sided level alpha_each per side. None with fewer than MIN_RUNS a side."""
    if len(values) < MIN_RUNS or len(ref) < MIN_RUNS:
        return None
    x, y = _logs(values, higher_is_better), _logs(ref, higher_is_better)
    d = statistics.fmean(x) - statistics.fmean(y)
    vx, vy = statistics.variance(x) / len(x), statistics.variance(y) / len(y)
    se = math.sqrt(vx + vy)
    if se == 0:  # both constant: the difference is known exactly
        return Ratio(math.exp(d), math.exp(d), math.exp(d), len(x), len(y), alpha_each, math.inf)
    df = (vx + vy) ** 2 / ((vx ** 2 / (len(x) - 1) if vx else 0) + (vy ** 2 / (len(y) - 1) if vy else 0))
    half = t_quantile(1 - alpha_each, df) * se
    return Ratio(math.exp(d), math.exp(d - half), math.exp(d + half), len(x), len(y), alpha_each, df)


def runs_needed(values, ref, margin, alpha_each, higher_is_better=False, cap=10000):
    """Runs per side that would likely settle this comparison at the margin:
    the n at which the interval's half width, with the spread seen so far
    and the estimate as it is, no longer straddles a margin boundary. None
    when the estimate sits on a boundary (no n settles it) or the spread is
    unknown."""
    if len(values) < MIN_RUNS or len(ref) < MIN_RUNS:
        return START_RUNS
    x, y = _logs(values, higher_is_better), _logs(ref, higher_is_better)
    d = abs(statistics.fmean(x) - statistics.fmean(y))
    s = math.sqrt((statistics.variance(x) + statistics.variance(y)) / 2)
    edge = math.log1p(margin)
    room = abs(edge - d)  # to prove equivalence (d < edge) or a difference (d > edge)
    if room < 1e-12:
        return None
    if s == 0:
        return MIN_RUNS
    # n = 2 (t s / room)^2 with t at 2n - 2 degrees of freedom: a fixed point,
    # reached from the normal quantile's n in a few steps (t falls as n grows).
    n = MIN_RUNS
    for _ in range(8):
        t = t_quantile(1 - alpha_each, max(1, 2 * n - 2))
        new = max(MIN_RUNS, math.ceil(2 * (t * s / room) ** 2))
        if new == n or new > cap:
            break
        n = new
    return None if n > cap or new > cap else n


# --- the family of tests ------------------------------------------------------------

@dataclass
class Metric:
    name: str
    higher_is_better: bool = False


@dataclass
class Setting:
    """One setting's per-run values (one value per run: per_run)."""
    name: str
    time: list
    cpu: list
    env: str = ""

    def geo(self, which, higher_is_better=False):
        values = self.time if which == "time" else self.cpu
        if not values:
            return None
        g = math.exp(statistics.fmean(math.log(max(v, FLOOR)) for v in values))
        return 1 / g if higher_is_better else g  # as a cost


@dataclass
class Decision:
    verdict: str                   # change | keep | undecided
    objective: str
    margin: float
    alpha: float
    alpha_each: float
    looks: int
    baseline: str
    chosen: str = None             # the setting to use (the baseline when keep)
    best: str = None               # the best on the objective's key metric
    why: str = ""
    vs_baseline: dict = field(default_factory=dict)   # name -> {"time": Ratio, "cpu": Ratio}
    vs_chosen: dict = field(default_factory=dict)     # name -> {"time": Ratio, "cpu": Ratio}
    equivalent: list = field(default_factory=list)    # shown within the margin of the chosen
    eliminated: list = field(default_factory=list)    # shown worse than the best by the margin
    open: list = field(default_factory=list)          # [(name, what is open, runs needed or None)]
    needs: list = field(default_factory=list)         # settings the next round should run
    method: str = METHOD
    settings: dict = field(default_factory=dict)      # name -> Setting

    @property
    def decided(self):
        return self.verdict in ("change", "keep")


class Rule:
    """The decision rule for one objective, margin and alpha'."""

    def __init__(self, objective="balanced", margin=MARGIN, alpha=ALPHA, looks=1, time_higher_is_better=False):
        if objective not in OBJECTIVES:
            raise ValueError(f"objective {objective!r}: expected one of {', '.join(OBJECTIVES)}")
        if not margin > 0:
            raise ValueError("margin must be > 0: with none, equivalence can never be shown")
        self.objective, self.margin, self.alpha, self.looks = objective, margin, alpha, looks
        self.thb = time_higher_is_better
        self.key = "cpu" if objective == "cpu" else "time"

    def compare(self, s, ref, a):
        return {"time": ratio(s.time, ref.time, a, self.thb), "cpu": ratio(s.cpu, ref.cpu, a)}

    def beats(self, r):
        """r: ratios of a setting against a reference: does it beat it?"""
        m = self.margin
        if r["time"] is None or r["cpu"] is None:
            return False
        if self.objective == "time":
            return r["time"].better(m)
        if self.objective == "cpu":
            return r["cpu"].better(m)
        return r["time"].better(m) or (r["time"].not_worse(m) and r["cpu"].better(m))

    def cannot_beat(self, r):
        m = self.margin
        if r["time"] is None or r["cpu"] is None:
            return False
        if self.objective == "time":
            return r["time"].not_better(m)
        if self.objective == "cpu":
            return r["cpu"].not_better(m)
        return r["time"].not_better(m) and (r["time"].worse(m) or r["cpu"].not_better(m))

    def decide(self, settings, baseline):
        """settings: [Setting]; baseline: the name of one of them."""
        by = {s.name: s for s in settings}
        if baseline not in by:
            raise ValueError(f"baseline {baseline!r} is not among the settings")
        a = alpha_each(self.alpha, len(settings), self.looks)
        d = Decision("undecided", self.objective, self.margin, self.alpha, a, self.looks, baseline,
                     settings=by)
        ready = [s for s in settings if len(s.time) >= MIN_RUNS and len(s.cpu) >= MIN_RUNS]
        short = [s.name for s in settings if s not in ready]
        if len(settings) < 2:
            d.why = "one setting only: nothing to compare it with"
            return d
        if by[baseline] not in ready or len(ready) < 2:
            d.needs = [s.name for s in settings]
            d.why = f"fewer than {MIN_RUNS} runs of {', '.join(short)}"
            return d
        b = by[baseline]
        key_cost = lambda s: s.geo(self.key, self.thb if self.key == "time" else False)
        best = min(ready, key=key_cost)
        d.best = best.name
        vs_best = {s.name: self.compare(s, best, a) for s in ready if s is not best}
        pool = [best] + [s for s in ready if s is not best and vs_best[s.name][self.key].equivalent(self.margin)]
        d.vs_baseline = {s.name: self.compare(s, b, a) for s in ready if s is not b}
        winners = [s for s in pool if s is not b and self.beats(d.vs_baseline[s.name])]
        order = (lambda s: s.geo("cpu")) if self.objective == "balanced" else key_cost
        if winners:
            chosen = min(winners, key=order)
            d.verdict = "change"
        elif all(self.cannot_beat(r) for r in d.vs_baseline.values()) and not short:
            chosen = b
            d.verdict = "keep"
        else:
            chosen = min(pool, key=order)
        d.chosen = chosen.name
        d.vs_chosen = {s.name: self.compare(s, chosen, a) for s in ready if s is not chosen}
        d.equivalent = [n for n, r in d.vs_chosen.items()
                        if r["time"].equivalent(self.margin) and r["cpu"].equivalent(self.margin)]
        d.eliminated = [n for n, r in vs_best.items() if r[self.key].worse(self.margin)]
        self._open_and_needs(d, ready, short, a)
        d.why = self._why(d)
        return d

    def _open_and_needs(self, d, ready, short, a):
        """What is still open, and which settings the next round should run:
        when undecided, every setting whose comparison with the baseline is
        open (with the baseline and the current choice); when decided
        (change), the settings not yet shown unable to beat the chosen one."""
        by = d.settings
        needs = set(short)
        if d.verdict == "keep":
            d.needs = sorted(needs)
            return
        for s in ready:
            if s.name == d.baseline or (d.verdict == "change" and s.name == d.chosen):
                continue
            r_b = d.vs_baseline[s.name]
            r_c = d.vs_chosen.get(s.name)
            if d.verdict == "undecided" and not (self.beats(r_b) or self.cannot_beat(r_b)):
                d.open.append((s.name, f"against {d.baseline}",
                               self._runs_needed(s, by[d.baseline], a)))
                needs.update({s.name, d.baseline})
            elif d.verdict == "change" and not self.cannot_beat(r_c):
                d.open.append((s.name, f"against {d.chosen}", self._runs_needed(s, by[d.chosen], a)))
                needs.add(s.name)
        if needs - {d.chosen}:
            needs.add(d.chosen)
        d.needs = sorted(needs)

    def _runs_needed(self, s, ref, a):
        """The runs per side the metric that matters here would need."""
        if self.objective == "cpu":
            return runs_needed(s.cpu, ref.cpu, self.margin, a)
        t = runs_needed(s.time, ref.time, self.margin, a, self.thb)
        if self.objective == "time":
            return t
        c = runs_needed(s.cpu, ref.cpu, self.margin, a)
        return None if t is None or c is None else max(t, c)

    def _why(self, d):
        pct = f"{d.margin:.0%}"
        if d.verdict == "keep":
            return f"every setting tried is shown not to beat {d.baseline} by more than {pct}"
        if d.verdict == "change":
            r = d.vs_baseline[d.chosen]
            if r["time"].better(d.margin):
                return f"{d.chosen} is faster than {d.baseline} by more than {pct}"
            return f"{d.chosen} is not slower than {d.baseline} by {pct} and uses over {pct} less CPU"
        return f"{len(d.open)} comparison(s) still straddle the {pct} margin"


def decide(settings, baseline, objective="balanced", margin=MARGIN, alpha=ALPHA, looks=1,
           time_higher_is_better=False):
    return Rule(objective, margin, alpha, looks, time_higher_is_better).decide(settings, baseline)
