"""Statistics as pure functions on lists of floats. Every distribution comes
from scipy.stats (Debian's python3-scipy): Student's t for the decision
rule's intervals, the exact and normal Mann-Whitney U for compare, the
binomial for a median's distribution-free interval."""
import functools
import math
import statistics

from scipy import stats as _dist

# Below this many samples per side a Mann-Whitney p-value cannot get small
# enough to mean much. google/benchmark's tools/gbench/report.py draws the same
# line: it computes its U test from UTEST_MIN_REPETITIONS = 2 repetitions per
# side but, below UTEST_OPTIMAL_REPETITIONS = 9, adds "WARNING: Results
# unreliable! 9+ repetitions recommended." to the row (the p-value row is the
# benchmark's name plus UTEST_COL_NAME = "_pvalue").
MIN_REPETITIONS_FOR_UTEST = 9

# The exact U distribution for samples up to this size (per side) and
# without ties; beyond that (or with ties) the normal approximation with tie
# and continuity correction.
EXACT_MAX_N = 20


def median(values):
    return statistics.median(values) if values else None


def coefficient_of_variation(values):
    """Sample standard deviation / mean; None when undefined (n < 2 or mean 0)."""
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    if mean == 0:
        return None
    return statistics.stdev(values) / abs(mean)


def geometric_mean(ratios):
    """Geometric mean of the positive finite ratios; None if there are none."""
    logs = [math.log(r) for r in ratios if r is not None and r > 0 and math.isfinite(r)]
    if not logs:
        return None
    return math.exp(statistics.fmean(logs))


@functools.lru_cache(maxsize=65536)
def t_quantile(p, df):
    """The t with P(T <= t) = p for Student's t with df degrees of freedom
    (df may be fractional, as Welch's; inf: the normal)."""
    if math.isinf(df):
        return float(_dist.norm.ppf(p))
    return float(_dist.t.ppf(p, df))


def normal_quantile(p):
    return float(_dist.norm.ppf(p))


def mann_whitney_u(a, b):
    """Two-sided Mann-Whitney U test. Returns (U of a, p-value, method) with
    method "exact" or "normal"; p is None when a side is empty."""
    if not a or not b:
        return None, None, None
    values = list(a) + list(b)
    ties = len(set(values)) < len(values)
    exact = not ties and len(a) <= EXACT_MAX_N and len(b) <= EXACT_MAX_N
    if len(set(values)) == 1:  # every value equal: no evidence of any difference
        return len(a) * len(b) / 2, 1.0, "normal"
    r = _dist.mannwhitneyu(a, b, alternative="two-sided", method="exact" if exact else "asymptotic",
                           use_continuity=True)
    return float(r.statistic), min(1.0, float(r.pvalue)), "exact" if exact else "normal"


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
        coverage = 1 - 2 * float(_dist.binom.cdf(k - 1, n, 0.5))
        if coverage < confidence:
            break
        best = (xs[k - 1], xs[n - k], coverage)
    return best
