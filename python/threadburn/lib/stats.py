"""Statistics for comparisons, as pure functions on lists of floats."""
import math
import statistics
from functools import lru_cache

# Below this many samples per side a Mann-Whitney p-value cannot get small
# enough to mean much. google/benchmark's tools/gbench/report.py draws the same
# line: it computes its U test from UTEST_MIN_REPETITIONS = 2 repetitions per
# side but, below UTEST_OPTIMAL_REPETITIONS = 9, adds "WARNING: Results
# unreliable! 9+ repetitions recommended." to the row (the p-value row is the
# benchmark's name plus UTEST_COL_NAME = "_pvalue").
MIN_REPETITIONS_FOR_UTEST = 9

# Exact U distribution for samples up to this size (per side) and without
# ties; beyond that (or with ties) the normal approximation with tie and
# continuity correction is used, as scipy.stats.mannwhitneyu(method="asymptotic").
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


def _ranks(values):
    """1-based ranks, ties get the mean of the ranks they span; also tie sizes."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    tie_sizes = []
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        if j > i:
            tie_sizes.append(j - i + 1)
        i = j + 1
    return ranks, tie_sizes


@lru_cache(maxsize=None)
def _u_counts(n1, n2):
    """Number of arrangements of n1 'a' and n2 'b' giving each U = 0..n1*n2.
    Recurrence on the largest value: it belongs to a (adding n2 to U) or to b."""
    if n1 == 0 or n2 == 0:
        return (1,)
    with_a = _u_counts(n1 - 1, n2)
    with_b = _u_counts(n1, n2 - 1)
    counts = [0] * (n1 * n2 + 1)
    for u, c in enumerate(with_a):
        counts[u + n2] += c
    for u, c in enumerate(with_b):
        counts[u] += c
    return tuple(counts)


def mann_whitney_u(a, b):
    """Two-sided Mann-Whitney U test. Returns (U of a, p-value, method) with
    method "exact" or "normal"; p is None when a side is empty."""
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return None, None, None
    ranks, tie_sizes = _ranks(list(a) + list(b))
    u1 = sum(ranks[:n1]) - n1 * (n1 + 1) / 2
    if not tie_sizes and n1 <= EXACT_MAX_N and n2 <= EXACT_MAX_N:
        counts = _u_counts(n1, n2)
        total = math.comb(n1 + n2, n1)
        u = int(round(u1))
        low = sum(counts[:u + 1]) / total
        high = sum(counts[u:]) / total
        return u1, min(1.0, 2 * min(low, high)), "exact"
    n = n1 + n2
    tie_term = sum(t ** 3 - t for t in tie_sizes)
    variance = n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1)))
    if variance <= 0:  # every value equal: no evidence of any difference
        return u1, 1.0, "normal"
    z = (abs(u1 - n1 * n2 / 2) - 0.5) / math.sqrt(variance)
    return u1, min(1.0, math.erfc(max(z, 0.0) / math.sqrt(2))), "normal"


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
