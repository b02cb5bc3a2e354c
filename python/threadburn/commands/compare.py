"""threadburn compare: two results CSVs, per matched setting: medians, change, significance.

    threadburn compare A.csv B.csv [--format md|text] [--fail-if-regress step_ms:10 ...]

Rows match on every knob column the two files share (the benchmark, bench,
runtime, environment, processes and program flags; results/README.md) plus
the benchmark name; only status=ok rows count, and the repetitions and
concurrent processes of one setting are pooled. Per group and metric
(step_ms, residual_cpu_ms, samples_per_s where present; for the runs of a
command that `threadburn tune` and `run` write: wall_ms, cpu_ms,
omp_between_regions_ms, metric): median in A and B,
relative change B/A - 1, and a two-sided Mann-Whitney U p-value (exact
distribution when both sides have <= 20 values and no ties, else the normal
approximation with tie and continuity correction; stats.py). A geometric-mean
row summarises the ratios; groups whose median in A is zero within noise
(ZERO_FLOOR) have no ratio and are left out of it. Cells whose coefficient of
variation exceeds the noise_cv their rows carry (the programs' rule,
src/core/rules.h) are marked "(! CV%)"; rows written before schema 5 carry
none, and their cells are not flagged.

--fail-if-regress METRIC:PCT exits 1 when the metric's geometric mean OR any
single matched group is worse by more than PCT percent (worse = higher for
step_ms, residual_cpu_ms, wall_ms, cpu_ms and omp_between_regions_ms, lower
for samples_per_s; tune's metric has no known direction). Bad input (missing
columns, another schema version, nothing in common) exits 2 with one line.
"""
import argparse
import sys

from ..lib import keys, fmt, schema, stats
from ..analysis import results
from ..lib import records
from ..lib.errors import ThreadburnError

METRICS = ("step_ms", "residual_cpu_ms", "samples_per_s")
# Rows of your own command under the preload probe (`threadburn tune` and
# `run`, bench = command) have no steps: their run's wall time, its CPU, the
# OpenMP workers' CPU between regions, and the --metric figure. Which way
# that figure is better is not in the file: it is compared, but cannot be
# used with --fail-if-regress.
RUN_METRICS = ("wall_ms", "cpu_ms", "omp_between_regions_ms", "metric")
LOWER_IS_BETTER = dict(schema.LOWER_IS_BETTER, wall_ms=True, cpu_ms=True, omp_between_regions_ms=True)
# Below this a metric is indistinguishable from zero: residual burn under half
# a millisecond per step is sampler noise (the sampler's period is <= 1 ms and
# idle gaps measure within +-0.01 ms of 0). Such a baseline gives no ratio,
# and such a sample no noise flag (its CV would only measure that noise).
ZERO_FLOOR = {"step_ms": 0.0, "residual_cpu_ms": 0.5, "samples_per_s": 0.0,
              "wall_ms": 0.0, "cpu_ms": 0.0, "omp_between_regions_ms": 0.5, "metric": 0.0}
REQUIRED = ("schema_version", "status", "benchmark", "runtime", "repetition") + METRICS
REQUIRED_RUNS = ("schema_version", "status", "benchmark", "runtime", "repetition", "wall_ms", "cpu_ms")


class CompareError(ThreadburnError):
    pass


def parse_regress(text):
    metric, sep, pct = text.partition(":")
    try:
        value = float(pct)
    except ValueError:
        value = -1.0
    if not sep or metric not in LOWER_IS_BETTER or value < 0:
        raise argparse.ArgumentTypeError(
            f"expected METRIC:PCT with METRIC one of {', '.join(LOWER_IS_BETTER)} and PCT >= 0, "
            f"got {text!r}")
    return metric, value


def add_parser(sub):
    p = sub.add_parser("compare", help="compare two results CSVs: change, p-value, noise",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("a", help="baseline results CSV")
    p.add_argument("b", help="contender results CSV")
    p.add_argument("--format", choices=("md", "text"), default="text")
    p.add_argument("--fail-if-regress", type=parse_regress, action="append", default=[],
                   metavar="METRIC:PCT", help="exit 1 if METRIC's geomean or any group is "
                   "worse than A by more than PCT percent (repeatable)")
    p.add_argument("--a-where", type=parse_where, action="append", default=[], metavar="COLUMN=VALUE",
                   help="only A's rows with this value (repeatable), e.g. host_name=node01: one file "
                   "of a fleet compared host against host")
    p.add_argument("--b-where", type=parse_where, action="append", default=[], metavar="COLUMN=VALUE",
                   help="only B's rows with this value (repeatable)")
    p.set_defaults(run=main)
    return p


def parse_where(text):
    column, sep, value = text.partition("=")
    if not sep or not column:
        raise argparse.ArgumentTypeError(f"expected COLUMN=VALUE, got {text!r}")
    return column, value


def only_where(path, header, rows, conditions):
    for column, _ in conditions:
        if column not in header:
            raise CompareError(f"{path}: no column {column!r} to select on")
    return [r for r in rows if all(r.text(c) == v for c, v in conditions)]


def match_key(row, knobs):
    return tuple(row.text(k) for k in knobs) + (row.benchmark,)


def load(path):
    header, rows = records.read_table(path)
    # The version first: a file of another schema lacks columns for a reason,
    # and "missing columns" would hide it.
    records.check_columns(path, header, ("schema_version",))
    versions = {r.text("schema_version") for r in rows}
    if len(versions) > 1:
        raise CompareError(f"{path}: mixes schema versions {', '.join(sorted(versions))}")
    if versions and not versions <= set(schema.READABLE_VERSIONS):
        raise CompareError(f"{path}: schema_version {versions.pop()}, this threadburn reads "
                           f"{schema.SCHEMA_VERSION} (columns differ between versions: compare "
                           f"files of one version, e.g. re-run the older sweep; it also reads "
                           f"{', '.join(v for v in schema.READABLE_VERSIONS if v != schema.SCHEMA_VERSION)})")
    records.check_columns(path, header, REQUIRED_RUNS if is_runs_file(header) else REQUIRED)
    statuses = {s: sum(1 for r in rows if r.status == s) for s in ("skipped", "failed")}
    return header, rows, statuses


def is_runs_file(header):
    """A file of runs of a command under the probe (tune, run), not of benchmarks."""
    return "step_ms" not in header and "wall_ms" in header


def metrics_of(header):
    return [m for m in (RUN_METRICS if is_runs_file(header) else METRICS) if m in header]


def group(rows, knobs):
    groups = {}
    for row in rows:
        # A tune's confirmation runs (no probe: wall time only) are not samples of its settings.
        if row.ok and row.phase == "race":
            groups.setdefault(match_key(row, knobs), []).append(row)
    return groups


def compare_metric(rows_a, rows_b, metric):
    a = records.metric_values(rows_a, metric)
    b = records.metric_values(rows_b, metric)
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
            "noise_a": schema.rule_of(rows_a, "noise_cv"), "noise_b": schema.rule_of(rows_b, "noise_cv")}


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


def fmt_num(value):
    return "-" if value is None else fmt.number(value, 4)


def fmt_cell(value, cv, noise_cv):
    text = fmt_num(value)
    if cv is not None and noise_cv is not None and cv > noise_cv:
        text += f" (! {cv:.1%})" if cv < 0.1 else f" (! {cv:.0%})"
    return text


def fmt_change(m):
    return "n/a (A~0)" if m["change"] is None else f"{m['change']:+.1%}"


def render(table, geomeans, only_a, only_b, statuses, names, style, metrics=METRICS):
    metrics = [m for m in metrics if any(m in e["metrics"] for e in table)]
    header = ["benchmark", "setting", "n A/B"]
    for metric in metrics:
        header += [f"{metric} A", f"{metric} B", "change", "p"]
    body = []
    for entry in table:
        cells = [entry["workload"], entry["setting"], f"{entry['n_a']}/{entry['n_b']}"]
        for metric in metrics:
            m = entry["metrics"].get(metric)
            if m is None:
                cells += ["-"] * 4
            else:
                cells += [fmt_cell(m["median_a"], m["cv_a"], m["noise_a"]),
                          fmt_cell(m["median_b"], m["cv_b"], m["noise_b"]),
                          fmt_change(m), fmt_num(m["p"])]
        body.append(cells)
    geo = [f"geomean ({len(table)} groups)", "", ""]
    for metric in metrics:
        g = geomeans.get(metric)
        geo += ["", "", "-" if g is None else f"{g['ratio'] - 1:+.1%}", ""]
    body.append(geo)
    out = [f"A = {names[0]}", f"B = {names[1]}", ""]
    out += fmt.table(header, body, style)
    notes = []
    few = sum(1 for e in table if min(e["n_a"], e["n_b"]) < stats.MIN_REPETITIONS_FOR_UTEST)
    if few:
        notes.append(f"warning: {few} of {len(table)} groups have fewer than "
                     f"{stats.MIN_REPETITIONS_FOR_UTEST} samples on a side; their p-values "
                     "cannot be trusted (run more --repetitions)")
    limits = sorted({m[k] for e in table for m in e["metrics"].values() for k in ("noise_a", "noise_b")
                     if m[k] is not None})
    if any("(!" in c for row in body for c in row):
        notes.append("noisy: (! X%) marks a coefficient of variation above the rows' noise_cv ("
                     + ", ".join(f"{v:.0%}" for v in limits) + ")")
    if any(m[k] is None for e in table for m in e["metrics"].values() for k in ("noise_a", "noise_b")):
        notes.append("rows written before schema 5 carry no noise_cv: their cells are not flagged as noisy")
    for metric, g in geomeans.items():
        if g["left_out"]:
            notes.append(f"{metric}: {g['left_out']} group(s) with a median in A of at most "
                         f"{ZERO_FLOOR[metric]:g} (zero within noise) have no ratio; left out "
                         "of the geomean and of --fail-if-regress")
    for name, counts in zip(names, statuses):
        if any(counts.values()):
            notes.append(f"{name}: not compared: {counts['failed']} failed, "
                         f"{counts['skipped']} skipped rows")
    for name, labels in ((names[0], only_a), (names[1], only_b)):
        if labels:
            notes.append(f"only in {name} ({len(labels)}):")
            notes += [f"  {'- ' if style == 'md' else ''}{label}" for label in labels]
    if notes:
        out.append("")
        out += [("- " + n if style == "md" and not n.startswith("  ") else n) for n in notes]
    return "\n".join(out)


def main(args):
    header_a, rows_a, statuses_a = load(args.a)
    header_b, rows_b, statuses_b = load(args.b)
    rows_a = only_where(args.a, header_a, rows_a, args.a_where)
    rows_b = only_where(args.b, header_b, rows_b, args.b_where)
    knobs = [k for k in keys.knob_columns(rows_a[0] if rows_a else dict.fromkeys(header_a)) if k in header_b]
    if is_runs_file(header_a) != is_runs_file(header_b):
        raise CompareError(f"{args.a} and {args.b}: one holds benchmark rows (sweep), the other runs of a "
                           "command (tune, run): nothing to compare")
    va, vb = ({r.text("schema_version") for r in rows} for rows in (rows_a, rows_b))
    if va and vb and va != vb:
        raise CompareError(f"{args.a} is schema {va.pop()}, {args.b} schema {vb.pop()}: compare files of one version")
    metrics = [m for m in metrics_of(header_a) if m in header_b]
    groups_a, groups_b = group(rows_a, knobs), group(rows_b, knobs)
    table, geomeans, only_a, only_b = compare(groups_a, groups_b, metrics)
    if not table:
        raise CompareError(f"no common rows: no (knobs, benchmark) with status ok is in both {args.a} and {args.b}")
    names = tuple(path + "".join(f" [{c}={v}]" for c, v in where)
                  for path, where in ((args.a, args.a_where), (args.b, args.b_where)))
    print(render(table, geomeans, only_a, only_b, (statuses_a, statuses_b), names, args.format, metrics))
    found = regressions(table, geomeans, args.fail_if_regress)
    for line in found:
        print(f"regression: {line}", file=sys.stderr)
    return 1 if found else 0
