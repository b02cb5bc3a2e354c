"""Which setting to recommend, by a stated rule, with its evidence; or, when
the data cannot tell, saying so and how many runs would.

Each setting ("point") has samples of a time metric (lower is better: a
step's or a whole run's wall time, or a user's figure turned that way) and of
a CPU metric (CPU per step or per run). A sample is one fresh process.

The rule (docs/design.md, "Recommendations"):
  1. best = the point with the lowest median of the objective's key metric
     (time: time; cpu: CPU; balanced: time).
  2. tied = the other points a two-sided Mann-Whitney test cannot tell from
     best on that metric (p >= ALPHA).
  3. time or cpu: no tie -> best is recommended; a tie -> no winner.
     balanced: among best and tied (the fastest, within the noise), the point
     with the lowest median CPU, if the test tells its CPU from every other
     one's; else no winner.
  4. With no winner, the tied points are listed with the number of runs per
     point that would likely tell each from best (runs_needed).
Evidence for the chosen point: median and a distribution-free confidence
interval (median_ci), and the change against the baselines (the plain
environment, PyTorch's launcher preset) with p-values.
"""
import math
import statistics
from dataclasses import dataclass, field

from . import stats

ALPHA = 0.05
POWER = 0.8
OBJECTIVES = ("time", "cpu", "balanced")


def median_ci(values, confidence=0.95):
    """(low, high, coverage): the order statistics x(k), x(n+1-k) around the
    median with the largest k whose coverage (binomial, p = 1/2) is at least
    `confidence`; with too few values, the full range and its coverage
    (5 values: 93.75 %)."""
    xs = sorted(values)
    n = len(xs)
    if n == 0:
        return None, None, 0.0
    best = (xs[0], xs[-1], 1 - 2 * 0.5 ** n)
    for k in range(1, n // 2 + 1):
        # P(x(k) <= median <= x(n+1-k)) = 1 - 2 * P(Binom(n, 1/2) <= k - 1)
        tail = sum(math.comb(n, i) for i in range(k)) / 2 ** n
        coverage = 1 - 2 * tail
        if coverage < confidence:
            break
        best = (xs[k - 1], xs[n - k], coverage)
    return best


def min_runs_for_utest(alpha=ALPHA):
    """The fewest runs per side with which the exact two-sided Mann-Whitney
    test can reach p < alpha at all (complete separation: p = 2 / C(2n, n)):
    4 for alpha = 0.05 (p = 0.029; 3 runs give at best p = 0.1)."""
    n = 1
    while 2 / math.comb(2 * n, n) >= alpha:
        n += 1
    return n


def runs_needed(a, b, alpha=ALPHA, power=POWER):
    """Runs per point that would likely tell a from b: the two-sample normal
    sample size for the observed difference of medians and the pooled
    spread, divided by the Mann-Whitney test's asymptotic relative efficiency
    (3/pi), and never fewer than min_runs_for_utest(). None when the medians
    are equal (no difference to find)."""
    if len(a) < 2 or len(b) < 2:
        return None
    diff = abs(statistics.median(a) - statistics.median(b))
    spread = math.sqrt((statistics.variance(a) + statistics.variance(b)) / 2)
    if diff == 0:
        return None
    z = statistics.NormalDist().inv_cdf(1 - alpha / 2) + statistics.NormalDist().inv_cdf(power)
    n = 2 * (z * spread / diff) ** 2 / (3 / math.pi)
    return max(min_runs_for_utest(alpha), math.ceil(n))


@dataclass
class Point:
    name: str
    time: list
    cpu: list
    env_line: str = ""
    med_time: float = field(init=False)
    med_cpu: float = field(init=False)

    def __post_init__(self):
        self.med_time = statistics.median(self.time) if self.time else None
        self.med_cpu = statistics.median(self.cpu) if self.cpu else None


@dataclass
class Versus:
    baseline: str
    time_change: float
    time_p: float
    cpu_change: float
    cpu_p: float


@dataclass
class Recommendation:
    objective: str
    winner: Point = None
    best: Point = None
    tied: list = field(default_factory=list)    # [(Point, runs_needed)]
    versus: list = field(default_factory=list)  # [Versus] for the winner (or best)
    why: str = ""
    single: bool = False                        # only one point: nothing was chosen


def _p(a, b):
    return stats.mann_whitney_u(a, b)[1] if a and b else None


def _change(new, old):
    return None if not old else new / old - 1


def recommend(points, objective="balanced", baselines=(), time_higher_is_better=False):
    """points: [Point] with samples; baselines: names of points to compare the
    result with (e.g. plain, launcher); time_higher_is_better: the time
    samples are a figure such as samples/s. Returns a Recommendation."""
    points = [p for p in points if p.time]
    if not points:
        return Recommendation(objective, why="no point has a successful run")
    key = "cpu" if objective == "cpu" else "time"
    values = lambda p: p.cpu if key == "cpu" else p.time
    sign = -1 if key == "time" and time_higher_is_better else 1
    med = lambda p: sign * (p.med_cpu if key == "cpu" else p.med_time)
    best = min(points, key=med)
    tied = [p for p in points if p is not best and (_p(values(best), values(p)) or 1.0) >= ALPHA]
    rec = Recommendation(objective, best=best, single=len(points) == 1)
    if rec.single:
        rec.winner, rec.why = best, "one setting only"
    elif objective == "balanced" and tied:
        group = [best] + tied
        frugal = min(group, key=lambda p: p.med_cpu)
        others = [p for p in group if p is not frugal]
        if all((_p(frugal.cpu, p.cpu) or 1.0) < ALPHA for p in others):
            rec.winner = frugal
            rec.why = (f"the fastest settings are within the noise of each other on time; {frugal.name} "
                       f"uses the least CPU among them, distinguishably")
        else:
            rec.tied = [(p, runs_needed(best.time, p.time)) for p in tied]
            rec.why = "the fastest settings cannot be told apart on time nor on CPU with these runs"
    elif tied:
        rec.tied = [(p, runs_needed(values(best), values(p))) for p in tied]
        rec.why = f"the best settings cannot be told apart on {key} with these runs"
    else:
        rec.winner = best
        rec.why = f"the lowest median {key}, distinguishably below every other setting's"
    chosen = rec.winner or best
    by_name = {p.name: p for p in points}
    for name in baselines:
        base = by_name.get(name)
        if base is None or base is chosen:
            continue
        rec.versus.append(Versus(name, _change(chosen.med_time, base.med_time), _p(chosen.time, base.time),
                                 _change(chosen.med_cpu, base.med_cpu), _p(chosen.cpu, base.cpu)))
    return rec
