"""Reading results CSVs, grouping rows into points, and the end-of-sweep summary."""
import csv
import statistics

from . import schema

# "Within 5 % of the fastest": differences below that are rarely reproducible
# on a shared machine (same order as stats.NOISE_CV_THRESHOLD), so among such
# near-ties the setting that burns the least CPU is the one to recommend.
STEP_TOLERANCE = 0.05

ENV_KEY_COLUMNS = ("runtime",) + schema.ENV_KNOBS + ("preset",)


class ResultsError(Exception):
    """A results file that cannot be used; str() is the one line to print."""


def read_rows(path, required=()):
    """Rows of a results CSV as dicts; checks the columns named in required."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            header = reader.fieldnames or []
            missing = [c for c in required if c not in header]
            if missing:
                raise ResultsError(f"{path}: missing columns: {', '.join(missing)}")
            return list(reader)
    except OSError as e:
        raise ResultsError(f"{path}: cannot read: {e.strerror}") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise ResultsError(f"{path}: not a readable CSV: {e}") from None


def workload_key(row):
    """What was measured, apart from the runtime and environment."""
    return (row.get("benchmark", ""),) + tuple(
        row.get(k, "") for k in schema.KNOB_COLUMNS
        if k != "runtime" and k not in schema.ENV_KNOBS)


def workload_label(row):
    label = row.get("benchmark", "").removesuffix("/manual_time")
    extra = []
    if row.get("processes", "1") not in ("1", ""):
        extra.append(f"{row['processes']} processes")
    if row.get("device") == "cuda" and "_cuda" not in label:
        extra.append("cuda")
    return label + (f" ({', '.join(extra)})" if extra else "")


def env_key(row):
    return tuple(row.get(k, "") for k in ENV_KEY_COLUMNS)


def metric_values(rows, metric):
    values = [schema.to_float(r.get(metric)) for r in rows]
    return [v for v in values if v is not None]


def group_points(rows):
    """{workload key: {env key: [ok rows]}}: repetitions and concurrent
    processes of one setting are pooled as samples of that setting."""
    groups = {}
    for row in rows:
        if row.get("status") != "ok":
            continue
        groups.setdefault(workload_key(row), {}).setdefault(env_key(row), []).append(row)
    return groups


def point_medians(rows):
    out = {"n": len(rows)}
    for metric in ("step_ms", "residual_cpu_ms", "samples_per_s"):
        values = metric_values(rows, metric)
        out[metric] = statistics.median(values) if values else None
    return out


def best_settings(rows):
    """Per workload: fastest setting, least-burn setting within STEP_TOLERANCE
    of the fastest, and the default (libgomp, no environment) for contrast."""
    table = []
    for workload, by_env in group_points(rows).items():
        points = []
        for env, env_rows in by_env.items():
            medians = point_medians(env_rows)
            if medians["step_ms"] is not None:
                points.append((env_rows[0], medians))
        if not points:
            continue
        fastest = min(points, key=lambda p: (p[1]["step_ms"], p[1]["residual_cpu_ms"] or 0.0))
        limit = fastest[1]["step_ms"] * (1 + STEP_TOLERANCE)
        near = [p for p in points if p[1]["step_ms"] <= limit
                and p[1]["residual_cpu_ms"] is not None]
        least_burn = min(near, key=lambda p: (p[1]["residual_cpu_ms"], p[1]["step_ms"]),
                         default=None)
        default = next((p for p in points if schema.is_default_env(p[0])), None)
        table.append({"workload": workload_label(points[0][0]), "fastest": fastest,
                      "least_burn": least_burn, "default": default})
    table.sort(key=lambda t: t["workload"])
    return table


def fmt_number(value):
    """3 significant digits; |x| < 0.0005 prints as 0 (sampler noise around
    zero burn would otherwise read like -0.000197)."""
    if value is None:
        return "n/a"
    if abs(value) < 5e-4:
        return "0"
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def _fmt_ms(value):
    return "n/a" if value is None else fmt_number(value) + " ms"


def summary_text(rows):
    lines = []
    counts = {s: sum(1 for r in rows if r.get("status") == s) for s in schema.STATUSES}
    lines.append("rows: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
    for entry in best_settings(rows):
        lines.append(entry["workload"])
        for title, point in (("fastest", entry["fastest"]),
                             (f"least burn (step <= +{STEP_TOLERANCE:.0%})",
                              entry["least_burn"])):
            if point is None:
                continue
            row, med = point
            lines.append(f"  {title:<28} step {_fmt_ms(med['step_ms']):>9}, burn "
                         f"{_fmt_ms(med['residual_cpu_ms']):>9}  {schema.env_label(row)}")
        if entry["default"] is None:
            lines.append(f"  {'default (gomp, no env)':<28} not in this sweep")
            continue
        row, med = entry["default"]
        best_step = entry["fastest"][1]["step_ms"]
        best_burn = (entry["least_burn"] or entry["fastest"])[1]["residual_cpu_ms"]
        step_change = (med["step_ms"] / best_step - 1) if best_step else None
        burn_change = (med["residual_cpu_ms"] - best_burn
                       if med["residual_cpu_ms"] is not None and best_burn is not None else None)
        versus = ["n/a" if step_change is None else f"step {step_change:+.1%} vs fastest"]
        if burn_change is not None:
            versus.append(f"burn {'+' if burn_change >= 0 else '-'}"
                          f"{_fmt_ms(abs(burn_change))} vs least burn")
        lines.append(
            f"  {'default (gomp, no env)':<28} step {_fmt_ms(med['step_ms']):>9}, burn "
            f"{_fmt_ms(med['residual_cpu_ms']):>9}  " + ", ".join(versus))
    return "\n".join(lines)
