"""Two results files side by side, as numbers (`threadburn compare`):
per (workload, setting) both hold, each metric's medians, their ratio, the
Mann-Whitney p-value and the noise of each side; the geometric mean of the
ratios per metric; and which changes exceed a regression limit. The text is
the command's (commands/compare.py)."""
from . import results
from ..lib import keys, records, schema, stats
from ..lib.records import Row

# The metrics by name (the command line's --fail-if-regress names them), each
# with its column and the value below which it is indistinguishable from zero:
# residual burn under half a millisecond per step is sampler noise (the
# sampler's period is <= 1 ms and idle gaps measure within +-0.01 ms of 0).
# Such a baseline gives no ratio, and such a sample no noise flag (its CV
# would only measure that noise).
STEP_COLUMNS = ((Row.step_ms, 0.0), (Row.residual_cpu_ms, 0.5), (Row.samples_per_s, 0.0))
# Rows of your own command under the preload probe (`threadburn tune` and
# `run`, bench = command) have no steps: their run's wall time, its CPU, the
# OpenMP workers' CPU between regions, and the --metric figure. Which way
# that figure is better is not in the file: it is compared, but cannot be
# used with --fail-if-regress.
RUN_COLUMNS = ((Row.wall_ms, 0.0), (Row.cpu_ms, 0.0), (Row.omp_between_regions_ms, 0.5), (Row.metric, 0.0))
METRICS = tuple(c.name for c, _ in STEP_COLUMNS)
RUN_METRICS = tuple(c.name for c, _ in RUN_COLUMNS)
COLUMNS = {c.name: c for c, _ in STEP_COLUMNS + RUN_COLUMNS}
ZERO_FLOOR = {c.name: floor for c, floor in STEP_COLUMNS + RUN_COLUMNS}
LOWER_IS_BETTER = dict(schema.LOWER_IS_BETTER, **{c.name: True for c, _ in RUN_COLUMNS if c is not Row.metric})

# MACHINE_CONTEXT columns whose value follows a row's setting, read so that the setting
# makes no difference: omp_library per omp_runtime (a file without llvm settings has
# no libomp: no difference), available_cpus and effective_cpus as the most any run had
# (a pinned plan's runs have fewer).
PER_RUNTIME = (Row.omp_library.name,)
MOST = (Row.available_cpus.name, Row.effective_cpus.name)


def machines(rows_a, rows_b):
    """The machine and libraries of two files, from their rows' context
    columns (schema.MACHINE_CONTEXT): [(label, A's values, B's values,
    differs)] for each column either file records; a value is a tuple of
    the distinct texts (with "runtime: " before each omp_library). differs:
    both record it and the values differ (one that records nothing is
    unknown, not different)."""
    out = []
    for column, label in schema.MACHINE_CONTEXT:
        a, b = _recorded(rows_a, column), _recorded(rows_b, column)
        if a or b:
            shared = a.keys() & b.keys()
            out.append((label, _values(a), _values(b), any(a[k] != b[k] for k in shared)))
    return out


def _recorded(rows, column):
    """{key: sorted distinct values} of a column (key: the omp_runtime for
    PER_RUNTIME columns, else "")."""
    found = {}
    for row in rows:
        value = row.text(column)
        if value:
            found.setdefault(row.omp_runtime if column in PER_RUNTIME else "", set()).add(value)
    if column in MOST:
        return {k: (max(v, key=lambda x: (schema.to_float(x) or 0, x)),) for k, v in found.items()}
    return {k: tuple(sorted(v)) for k, v in found.items()}


def _values(found):
    return tuple(f"{k}: {v}" if k else v for k, values in sorted(found.items()) for v in values)


def match_key(row, knobs):
    return tuple(row.text(k) for k in knobs) + (row.benchmark,)


def group(rows, knobs):
    groups = {}
    for row in rows:
        # A tune's fresh runs (confirmation, copies alone; no probe: wall time only) are not samples of its settings.
        if row.ok and row.phase == "race":
            groups.setdefault(match_key(row, knobs), []).append(row)
    return groups


def compare_metric(rows_a, rows_b, metric):
    a = records.metric_values(rows_a, COLUMNS[metric])
    b = records.metric_values(rows_b, COLUMNS[metric])
    if not a or not b:
        return None
    med_a, med_b = stats.median(a), stats.median(b)
    floor = ZERO_FLOOR[metric]
    ratio = med_b / med_a if med_a > floor else None
    _, p_value, method = stats.mann_whitney_u(a, b)

    def cv(values):
        if abs(stats.median(values)) <= floor:
            return None
        return stats.coefficient_of_variation(values)
    return {"n_a": len(a), "n_b": len(b), "median_a": med_a, "median_b": med_b,
            "ratio": ratio, "change": None if ratio is None else ratio - 1,
            "p": p_value, "method": method, "cv_a": cv(a), "cv_b": cv(b),
            "noise_a": schema.rule_of(rows_a, Row.noise_cv), "noise_b": schema.rule_of(rows_b, Row.noise_cv)}


def compare(groups_a, groups_b, metrics=METRICS):
    common = [k for k in groups_a if k in groups_b]
    table = []
    for key in common:
        rows_a, rows_b = groups_a[key], groups_b[key]
        entry = {"key": key, "label": group_label(rows_a[0]),
                 "workload": results.workload_label(rows_a[0]),
                 "setting": keys.env_label(rows_a[0]),
                 "n_a": len(rows_a), "n_b": len(rows_b), "metrics": {}}
        for metric in metrics:
            result = compare_metric(rows_a, rows_b, metric)
            if result:
                entry["metrics"][metric] = result
        table.append(entry)
    table.sort(key=lambda e: e["label"])
    geomeans = {}
    for metric in metrics:
        ratios = [e["metrics"][metric]["ratio"] for e in table if metric in e["metrics"]]
        usable = [r for r in ratios if r is not None]
        if usable:
            geomeans[metric] = {"ratio": stats.geometric_mean(usable), "n": len(usable),
                                "left_out": len(ratios) - len(usable)}
    only_a = sorted(group_label(groups_a[k][0]) for k in groups_a if k not in groups_b)
    only_b = sorted(group_label(groups_b[k][0]) for k in groups_b if k not in groups_a)
    return table, geomeans, only_a, only_b


def group_label(row):
    return f"{results.workload_label(row)} | {keys.env_label(row)}"


def is_worse(metric, change, pct):
    limit = pct / 100
    return change > limit if LOWER_IS_BETTER[metric] else change < -limit


def regressions(table, geomeans, rules):
    found = []
    for metric, pct in rules:
        geo = geomeans.get(metric)
        if geo and is_worse(metric, geo["ratio"] - 1, pct):
            found.append(f"{metric} geomean {geo['ratio'] - 1:+.1%} (limit {pct:g}%)")
        for entry in table:
            m = entry["metrics"].get(metric)
            if m and m["change"] is not None and is_worse(metric, m["change"], pct):
                found.append(f"{metric} {m['change']:+.1%} (limit {pct:g}%): {entry['label']}")
    return found
