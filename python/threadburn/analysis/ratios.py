"""The ratio of two settings' per-run values, with its interval: the
estimators every decision stands on (analysis/decide.py's Decider, the
confirmation's fresh runs, a host plan's steps: analysis/confirmation.py,
analysis/hostplan.py), and the runs a comparison would need.

Each comparison is a ratio, setting / reference, of per-run values as a
cost (a higher-is-better figure is turned around), with an interval on the
logs at one-sided level alpha' per side (Rule.alpha_per_test: alpha over
settings x looks x the metrics a change may be claimed on): "ranks" the
median of the rounds' log ratios, its better-side bound the sign test's and
its no-better-side bound the signed-rank test's (a run slowed 2x by what no
evidence shows moves one rank, not the mean), or the paired t's where too
few rounds can reach alpha'; "paired" the paired t; "welch" a t on all runs
of each side. Against the
margin m a ratio's interval says: better (all below 1/(1+m)), worse (all
above 1+m), not worse (all below 1+m: non-inferior), not better (all above
1/(1+m)); a test that does not reject says nothing ("not significant" is
never read as "the same").
"""
import functools
import math
import statistics
from dataclasses import dataclass

from ..lib import rule as rules
from ..lib.rule import FLOOR, MIN_RUNS
from ..lib.stats import sign_bound, sign_depth, signed_rank_depth, t_quantile, walsh_averages


def quantum(values):
    """The resolution the values were written with: a unit of the last
    decimal any of them needs (12.34 and 12.3: 0.01; whole numbers: 1, a
    trailing zero being a digit too). A figure printed with few digits
    varies at least by this, however alike its runs look."""
    return 10.0 ** -max((_digits(v) for v in values), default=0)


@functools.lru_cache(maxsize=1 << 17, typed=True)
def _digits(v):
    """The decimals v needs (quantum; a run's value is asked at every look
    of every comparison it is in)."""
    for d in range(0, 10):
        if abs(v * 10 ** d - round(v * 10 ** d)) < 1e-6 * max(1.0, abs(v) * 10 ** d) * 1e-3:
            break
    return d


def _log_cost(values, higher_is_better):
    sign = -1.0 if higher_is_better else 1.0
    return {k: sign * math.log(max(v, FLOOR)) for k, v in values.items()}


def _var_floor(values):
    """The variance of a log value that a resolution of q alone gives
    (uniform rounding error, q^2/12 over the value squared)."""
    vs = list(values.values())
    q = quantum(vs)
    g = math.exp(statistics.fmean(math.log(max(v, FLOOR)) for v in vs))
    return (q / max(g, FLOOR)) ** 2 / 12


def _rounding(values):
    """The most a log value can be off by its rounding: half the resolution
    over the value (at the geometric mean)."""
    return _rounding_of(tuple(values.values()))


@functools.lru_cache(maxsize=4096)
def _rounding_of(vs):
    """_rounding of the values vs (a setting's runs meet every other setting)."""
    q = quantum(vs)
    g = math.exp(statistics.fmean(math.log(max(v, FLOOR)) for v in vs))
    return q / 2 / max(g, FLOOR)


# --- ratios -------------------------------------------------------------------------

@dataclass
class Ratio:
    """setting / reference as a cost ratio (below 1: the setting is better),
    with a two-sided 1 - 2 alpha interval (each side a one-sided test)."""
    est: float
    lo: float
    hi: float
    n: int          # runs (or pairs) of the setting
    n_ref: int
    alpha: float
    df: float
    sd: float       # the spread the interval came from (log scale: of the pair differences, or pooled)

    def better(self, m):
        return self.hi < 1 / (1 + m)

    def worse(self, m):
        return self.lo > 1 + m

    def not_better(self, m):
        return self.lo > 1 / (1 + m)

    def not_worse(self, m):
        return self.hi < 1 + m

    def word(self, m):
        if self.better(m):
            return "better"
        if self.worse(m):
            return "worse"
        if self.not_better(m) and self.not_worse(m):
            return "equivalent"
        return "undecided"


def clearance(r, m):
    """How far ratio r's interval lies past the margin m on the better side
    (a claim that holds), in units of the spread it came from: the log
    distance from its upper bound to 1 / (1 + m), over its sd (infinite at
    no spread)."""
    room = math.log(1 / (1 + m)) - math.log(r.hi)
    return math.inf if r.sd == 0 else room / r.sd


def ratio(values, ref, alpha, higher_is_better=False, method="ranks", racing=False, interpolate=False):
    """Ratio of values / ref ({block: value} each) as a cost, with the
    interval at one-sided level alpha per side; None with fewer than MIN_RUNS
    runs (pairs) a side. ranks, paired: on the blocks both have; welch: all
    runs. racing (ranks): both bounds the sign test's (a race's guesses, no
    claim: the most robust). interpolate (ranks, Rule.interpolates): the
    sign test's bounds interpolated to the level (lib/stats.sign_bound)."""
    x, y = _log_cost(values, higher_is_better), _log_cost(ref, higher_is_better)
    if method in ("ranks", "paired"):
        common = [k for k in x if k in y]
        if len(common) < MIN_RUNS:
            return None
        d = [x[k] - y[k] for k in common]
        n = len(d)
        if method == "ranks":
            return _ranks(d, alpha, _rounding(values) + _rounding(ref), racing, interpolate)
        floor = _var_floor(values) + _var_floor(ref) if x and y else 0.0
        mean = statistics.fmean(d)
        var = max(statistics.variance(d), floor)
        se, df = math.sqrt(var / n), n - 1
        sd = math.sqrt(var)
        n_x = n_y = n
    else:
        if len(x) < MIN_RUNS or len(y) < MIN_RUNS:
            return None
        xs, ys = list(x.values()), list(y.values())
        mean = statistics.fmean(xs) - statistics.fmean(ys)
        vx = max(statistics.variance(xs), _var_floor(values)) / len(xs)
        vy = max(statistics.variance(ys), _var_floor(ref)) / len(ys)
        se = math.sqrt(vx + vy)
        df = (vx + vy) ** 2 / (vx ** 2 / (len(xs) - 1) + vy ** 2 / (len(ys) - 1))
        sd = math.sqrt((vx * len(xs) + vy * len(ys)) / 2)
        n_x, n_y = len(xs), len(ys)
    half = min(t_quantile(1 - alpha, df) * se, 700.0)  # with 2 runs and a tiny alpha the bound is astronomical
    return Ratio(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n_x, n_y, alpha, df, sd)


# The runs the ranks' bounds need over the t's at normal noise (their
# asymptotic relative efficiency): the sign test's pi/2, the signed-rank's pi/3.
SIGN_RUNS = math.pi / 2
SIGNED_RANK_RUNS = math.pi / 3


def _ranks(d, alpha, rounding, racing=False, interpolate=False):
    """The Ratio of the log ratios d of n rounds (rule method "ranks"): their
    median (a wild round in a few moves it by one rank); the upper
    bound, on which a setting is shown better (a change), the sign test's
    (the k-th largest ratio: a setting's run slowed 2x by what no evidence
    shows moves it by one rank, whatever its size); the lower bound, on
    which a setting is shown no better (a keep) or slower (eliminated), the
    signed-rank test's (the k-th smallest Walsh average: nearly the t's
    power at normal noise). Each bound exact at one-sided level alpha for
    the centre of the ratios, which pairing makes symmetric (two runs of a
    round are alike but for the setting); each widened by the most rounding
    can move a pair (few digits written: no certainty from round figures).
    A bound that no depth reaches (fewer than log2(1/alpha) rounds: the two
    tests' floor is the same) is the paired t's. racing: the lower bound the
    sign test's too. sd: the rounds' standard deviation, wild rounds and all
    (what the runs needed are planned on: a spread the wild rounds widen
    asks for the runs that will outnumber them)."""
    n = len(d)
    ranked = sorted(d)
    est = statistics.median(ranked)
    k_lo, k_hi = (sign_depth if racing else signed_rank_depth)(n, alpha), sign_depth(n, alpha)
    q = t_quantile(1 - alpha, n - 1)
    if not (k_lo and k_hi):
        mean = statistics.fmean(d)
        half = min(q * math.sqrt(_variance(tuple(d)) / n), 700.0)
    exact = lambda upper, k: ranked[-k] if upper else ranked[k - 1]
    bound = (lambda upper, k: sign_bound(ranked, alpha, upper)) if interpolate else exact
    if k_lo:
        lo = bound(False, k_lo) if racing else walsh_averages(d)[k_lo - 1]
    else:
        lo = mean - half
    hi = bound(True, k_hi) if k_hi else mean + half
    lo, hi = max(lo - rounding, est - 700.0), min(hi + rounding, est + 700.0)  # a CPU of 0 ms: 1e-6 rounded to 1
    sd = max(_stdev(tuple(d)), rounding / math.sqrt(3))
    return Ratio(math.exp(est), math.exp(lo), math.exp(hi), n, n, alpha, n - 1, sd)


@functools.lru_cache(maxsize=4096)
def _stdev(d):
    """statistics.stdev of the tuple d (exact, and slow: a Decider asks it of
    the same rounds at several alphas)."""
    return statistics.stdev(d)


@functools.lru_cache(maxsize=4096)
def _variance(d):
    """statistics.variance of the tuple d (as _stdev)."""
    return statistics.variance(d)


@dataclass(frozen=True)
class Ratios:
    """A setting against a reference on both metrics (None: too few runs)."""
    time: Ratio
    cpu: Ratio


def runs_needed(r, margin, alpha, method="ranks", cap=100000):
    """Runs per side (pairs) at which this comparison's interval, with the
    spread and estimate seen so far, would no longer straddle the margin
    boundary nearest its estimate: the smallest n whose half width fits in
    the room between them. None when the estimate sits on the boundary."""
    if r is None:
        return rules.START_RUNS
    d = abs(math.log(r.est))
    edge = math.log1p(margin)
    room = abs(edge - d)
    if room < 1e-9:
        return None
    if r.sd == 0:
        return MIN_RUNS

    # ranks: better is shown on the sign test's bound, no better (keep) or worse on the signed-rank's
    ranks = SIGN_RUNS if r.est < 1 and d > edge else SIGNED_RANK_RUNS

    def fits(n):
        df = 2 * n - 2 if method == "welch" else n - 1
        k = math.sqrt(2) if method == "welch" else math.sqrt(ranks) if method == "ranks" else 1.0
        return t_quantile(1 - alpha, df) * k * r.sd / math.sqrt(n) < room
    lo, hi = MIN_RUNS, MIN_RUNS
    while not fits(hi):
        if hi >= cap:
            return None
        lo, hi = hi, min(cap, hi * 2)
    while lo < hi:  # the half width falls as n grows: bisect for the first n that fits
        mid = (lo + hi) // 2
        if fits(mid):
            hi = mid
        else:
            lo = mid + 1
    return hi


def one():
    """A setting against itself: 1 exactly, no spread."""
    return Ratio(1.0, 1.0, 1.0, 0, 0, 0.0, math.inf, 0.0)
