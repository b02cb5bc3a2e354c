"""The decision rule's fixed parts: its defaults, the look schedule of a
race, and how alpha is split over comparisons and looks (docs/design.md,
Decisions). The engine plans rounds by it; analysis decides by it."""

ALPHA = 0.05
MARGIN = 0.05
OBJECTIVES = ("time", "cpu", "balanced")
METHOD = "Welch t on log per-run values"
# The first look of a race, and the runs a setting needs before any
# comparison: 2 give a variance; 3 is where a race starts (docs/design.md).
MIN_RUNS = 2
START_RUNS = 3
# Runs per setting at which a race looks at its data: about x1.5 apart,
# so the looks a budget allows stay few (each costs alpha).
LOOK_SCHEDULE = (3, 5, 8, 12, 18, 27, 40, 60, 90, 135, 200, 300, 450, 675, 1000)
# Values are clamped to this before their log is taken: a CPU of 0 ms
# compares as equal to another 0, not as minus infinity.
FLOOR = 1e-6


def looks_for_budget(n_settings, budget_runs, start=START_RUNS):
    """How many looks a race can take within budget_runs: the schedule's
    entries up to the most runs one setting could get (every setting runs
    `start` times, then at least two settings share each later round)."""
    if budget_runs is None:
        return 1
    n_cap = start + max(0, budget_runs - n_settings * start) // 2
    return max(1, sum(1 for n in LOOK_SCHEDULE if start <= n <= n_cap))


def alpha_each(alpha, n_settings, looks):
    """Bonferroni: alpha over the settings compared with the baseline and
    over the looks; one-sided per test."""
    return alpha / (max(1, n_settings - 1) * max(1, looks))
