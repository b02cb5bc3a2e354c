"""Statistics as pure functions on lists of floats. Every distribution comes
from scipy.stats (Debian's python3-scipy): Student's t and the Wilcoxon
signed-rank statistic for the decision rule's intervals, the exact and
normal Mann-Whitney U for compare, the binomial for a median's
distribution-free interval."""
import functools
import math
import statistics


class _LazyScipyStats:
    """scipy.stats, imported at its first use: its ~0.7 s of import is most of
    what starting `threadburn` costs, and the commands that decide nothing
    (--help, list, run, doctor) never use it."""

    def __getattr__(self, name):
        global _dist
        from scipy import stats
        _dist = stats
        return getattr(stats, name)


_dist = _LazyScipyStats()

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


# The signed-rank statistic's exact distribution for up to this many pairs
# (scipy's own limit for it); beyond, its normal approximation.
SIGNED_RANK_EXACT_MAX_N = 50


@functools.lru_cache(maxsize=65536)
def signed_rank_cdf(n, t):
    """P(T+ <= t) for the Wilcoxon signed-rank statistic of n pairs without
    ties or zeros, under the null (each sign a coin): scipy.stats.wilcoxon's
    p-value for a sample whose positive ranks sum to t."""
    sample, left = [], t
    for rank in range(n, 0, -1):  # ranks n..1, positive while they fit in what t has left
        sample.append(rank if rank <= left else -rank)
        left -= rank if rank <= left else 0
    method = "exact" if n <= SIGNED_RANK_EXACT_MAX_N else "approx"
    return float(_dist.wilcoxon(sample, alternative="less", method=method, correction=method == "approx").pvalue)


@functools.lru_cache(maxsize=65536)
def signed_rank_depth(n, alpha):
    """The depth k of the exact one-sided level-alpha bound from n pairs'
    Walsh averages (the k-th smallest is the lower bound, the k-th largest
    the upper): the largest k with P(T+ <= k - 1) <= alpha. 0 when no depth
    reaches alpha: with n pairs the smallest level is 2^-n (3 pairs: 1/8)."""
    if signed_rank_cdf(n, 0) > alpha:
        return 0
    lo, hi = 0, n * (n + 1) // 2  # P(T+ <= lo) <= alpha < P(T+ <= hi) = 1: bisect for the last t within alpha
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if signed_rank_cdf(n, mid) <= alpha:
            lo = mid
        else:
            hi = mid
    return lo + 1


@functools.lru_cache(maxsize=65536)
def sign_depth(n, alpha):
    """The depth k of the exact one-sided level-alpha bound on the median
    from n values (the k-th smallest is the lower bound, the k-th largest
    the upper): the largest k with P(B <= k - 1) <= alpha, B binomial(n,
    1/2) (the sign test). 0 when no depth reaches alpha (below 2^-n)."""
    k = 0
    while k < n and float(_dist.binom.cdf(k, n, 0.5)) <= alpha:
        k += 1
    return k


def sign_bound(ranked, alpha, upper):
    """The sign test's one-sided level-alpha bound on the median of the
    sorted values `ranked`, interpolated between the two order statistics
    whose exact levels straddle alpha (Hettmansperger and Sheather, 1986:
    the weight that makes the bound exact for the Laplace distribution and
    within a fraction of a percent of alpha for the symmetric ones they
    studied), where the exact bound alone is at a level below alpha: with
    n values the binomial's steps are coarse (17 values at 3 %: the 5th
    largest, at 2.5 %). None when no depth reaches alpha (below 2^-n)."""
    n = len(ranked)
    k = sign_depth(n, alpha)
    if not k:
        return None
    at = lambda i: ranked[-i] if upper else ranked[i - 1]   # the i-th largest (upper) or smallest
    if k >= (n + 1) // 2:
        return at(k)
    weight = sign_weight(n, alpha, k)
    return (1 - weight) * at(k) + weight * at(k + 1)


@functools.lru_cache(maxsize=65536)
def sign_weight(n, alpha, k):
    """Hettmansperger and Sheather's weight of the (k+1)-th order statistic
    in sign_bound: from the two-sided coverages at depths k and k + 1 and
    the one wanted, 1 - 2 alpha."""
    g_k = 1 - 2 * float(_dist.binom.cdf(k - 1, n, 0.5))   # coverage of the two-sided interval at depth k
    g_next = 1 - 2 * float(_dist.binom.cdf(k, n, 0.5))    # ... at depth k + 1
    share = (g_k - (1 - 2 * alpha)) / (g_k - g_next) if g_k > g_next else 0.0
    return (n - k) * share / (k + (n - 2 * k) * share)


def walsh_averages(values):
    """Every (x_i + x_j) / 2, i <= j, sorted: their k-th smallest and
    largest are the signed-rank test's bounds on the centre of a symmetric
    distribution (signed_rank_depth)."""
    n = len(values)
    return sorted((values[i] + values[j]) / 2 for i in range(n) for j in range(i, n))


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
