"""threadburn compare: two results CSVs, per matched setting: medians, change, significance.

    threadburn compare A.csv B.csv [--format md|text] [--fail-if-regress step_ms:10 ...]

First the machine and the libraries of each file, from its rows' context
columns (host, CPU model, CPUs, CPUs available, the OpenMP library per
runtime, torch, oneDNN, TBB, BLAS, CUDA runtime, schema), with a warning
naming those that differ: a change between files from two machines, core
counts or library versions is not the settings' alone.

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

from ..analysis import comparison
from ..analysis.comparison import LOWER_IS_BETTER, METRICS, RUN_METRICS
from ..lib import fmt, records, schema, stats
from ..lib.errors import ThreadburnError
from ..lib.records import Row

BASIC = tuple(c.name for c in (Row.schema_version, Row.status, Row.benchmark, Row.runtime, Row.repetition))
REQUIRED = BASIC + METRICS
REQUIRED_RUNS = BASIC + (Row.wall_ms.name, Row.cpu_ms.name)


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


def load(path):
    header, rows = records.read_table(path)
    # The version first: a file of another schema lacks columns for a reason,
    # and "missing columns" would hide it.
    records.check_columns(path, header, (Row.schema_version.name,))
    versions = {r.schema_version for r in rows}
    if len(versions) > 1:
        raise CompareError(f"{path}: mixes schema versions {', '.join(sorted(versions))}")
    if versions and not versions <= set(schema.READABLE_VERSIONS):
        raise CompareError(f"{path}: schema_version {versions.pop()}, this threadburn reads "
                           f"{schema.SCHEMA_VERSION} (columns differ between versions: compare "
                           f"files of one version, e.g. re-run the older sweep; it also reads "
                           f"{', '.join(v for v in schema.READABLE_VERSIONS if v != schema.SCHEMA_VERSION)})")
    records.check_columns(path, header, REQUIRED_RUNS if records.is_runs_file(header) else REQUIRED)
    statuses = {s: sum(1 for r in rows if r.status == s) for s in ("skipped", "failed")}
    return header, rows, statuses


def metrics_of(header):
    return [m for m in (RUN_METRICS if records.is_runs_file(header) else METRICS) if m in header]


def fmt_num(value):
    return "-" if value is None else fmt.number(value, 4)


def fmt_cell(value, cv, noise_cv):
    text = fmt_num(value)
    if cv is not None and noise_cv is not None and cv > noise_cv:
        text += f" (! {cv:.1%})" if cv < 0.1 else f" (! {cv:.0%})"
    return text


def fmt_change(m):
    return "n/a (A~0)" if m["change"] is None else f"{m['change']:+.1%}"


def render_machines(found, style):
    """The machine and libraries of A and B (comparison.machines), first:
    a table, and a warning naming what differs."""
    if not found:
        return ["machine and libraries: neither file records them (no context columns)", ""]
    text = lambda values: ", ".join(values) or "(not recorded)"
    body = [[label, text(a), "same" if a == b else text(b)] for label, a, b, _ in found]
    out = ["machine and libraries (the rows' context columns):"] + fmt.table(["", "A", "B"], body, style)
    differ = [label for label, _, _, differs in found if differs]
    if differ:
        out.append(f"warning: A and B ran on different machines or libraries ({', '.join(differ)} differ): "
                   "every change below is theirs as much as the settings'")
    return out + [""]


def render(table, geomeans, only_a, only_b, statuses, names, style, metrics=METRICS, machine=None):
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
    out += render_machines(machine, style) if machine is not None else []
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
                         f"{comparison.ZERO_FLOOR[metric]:g} (zero within noise) have no ratio; left out "
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
    knobs = [k for k in (rows_a[0] if rows_a else records.Row(dict.fromkeys(header_a, ""))).knob_columns
             if k in header_b]
    if records.is_runs_file(header_a) != records.is_runs_file(header_b):
        raise CompareError(f"{args.a} and {args.b}: one holds benchmark rows (sweep), the other runs of a "
                           "command (tune, run): nothing to compare")
    va, vb = ({r.schema_version for r in rows} for rows in (rows_a, rows_b))
    if va and vb and va != vb:
        raise CompareError(f"{args.a} is schema {va.pop()}, {args.b} schema {vb.pop()}: compare files of one version")
    metrics = [m for m in metrics_of(header_a) if m in header_b]
    groups_a, groups_b = comparison.group(rows_a, knobs), comparison.group(rows_b, knobs)
    table, geomeans, only_a, only_b = comparison.compare(groups_a, groups_b, metrics)
    if not table:
        raise CompareError(f"no common rows: no (knobs, benchmark) with status ok is in both {args.a} and {args.b}")
    names = tuple(path + "".join(f" [{c}={v}]" for c, v in where)
                  for path, where in ((args.a, args.a_where), (args.b, args.b_where)))
    machine = comparison.machines(rows_a, rows_b)
    print(render(table, geomeans, only_a, only_b, (statuses_a, statuses_b), names, args.format, metrics, machine))
    found = comparison.regressions(table, geomeans, args.fail_if_regress)
    for line in found:
        print(f"regression: {line}", file=sys.stderr)
    return 1 if found else 0
