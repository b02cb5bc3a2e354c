"""A tune's evidence per setting (medians with intervals) and its
confirmation: the chosen setting and the baseline run again, interleaved,
without the probe. Does the gain hold where nobody watches, and what did the
probe cost the user's program (its wall time probed / unprobed, same
setting)?"""
import statistics

from . import decide
from ..lib import fmt, schema
from ..lib.stats import median_ci


def _values(rows, study, phase, key):
    return [schema.to_float(r.get(key)) for r in rows if r.get("study") == study and r.get("status") == "ok"
            and r.get("phase", "race") in ((phase, "") if phase == "race" else (phase,))
            and schema.to_float(r.get(key)) is not None]


def analyse(rows, d, margin):
    """{chosen, baseline, key, ratio (chosen/baseline as a cost, on time or
    the user's figure), holds (better by the margin), probe_cost (probed /
    unprobed wall time of the chosen setting)} from the confirm rows."""
    has_metric = any(r.get("metric", "") != "" for r in rows if r.get("phase") == "confirm")
    key = "metric" if has_metric else "wall_ms"
    higher = has_metric and any(r.get("metric_better") == "higher" for r in rows)
    chosen = _values(rows, d.chosen, "confirm", key)
    base = _values(rows, d.baseline, "confirm", key)
    r = decide.ratio(chosen, base, decide.ALPHA, higher)
    probed = _values(rows, d.chosen, "race", "wall_ms")
    bare = _values(rows, d.chosen, "confirm", "wall_ms")
    cost = decide.ratio(probed, bare, decide.ALPHA)
    out = {"chosen": d.chosen, "baseline": d.baseline, "metric": key, "runs": [len(chosen), len(base)],
           "ratio": None, "holds": None, "probe_cost": None, "margin": margin}
    if r:
        out["ratio"] = {"estimate": round(r.est, 5), "low": round(r.lo, 5), "high": round(r.hi, 5)}
        out["holds"] = "yes" if r.better(margin) else ("no" if r.not_better(margin) else "undecided")
    if cost:
        out["probe_cost"] = {"estimate": round(cost.est, 5), "low": round(cost.lo, 5), "high": round(cost.hi, 5)}
    return out


def text(c):
    lines = [f"confirmation without the probe ({c['runs'][0]} + {c['runs'][1]} runs, interleaved):"]
    if c["ratio"]:
        r = c["ratio"]
        what = "time" if c["metric"] == "wall_ms" else "time per unit of your figure"
        verdict = {"yes": f"the gain holds (better by more than {c['margin']:.0%})",
                   "no": "the gain does NOT hold without the probe",
                   "undecided": "these runs cannot tell whether the gain holds"}[c["holds"]]
        lines.append(f"  {c['chosen']} against {c['baseline']}: {what} {fmt.pct(r['estimate'] - 1)} "
                     f"[{fmt.pct(r['low'] - 1)}, {fmt.pct(r['high'] - 1)}] (95 % two-sided): {verdict}")
    if c["probe_cost"]:
        p = c["probe_cost"]
        lines.append(f"  the probe's cost on your program ({c['chosen']}, wall time probed / not): "
                     f"{fmt.pct(p['estimate'] - 1)} [{fmt.pct(p['low'] - 1)}, {fmt.pct(p['high'] - 1)}]")
    return lines


def settings_table(rows, args):
    """Per setting: runs, median and distribution-free interval of time (or
    the figure) and CPU, and the workers' CPU between regions."""
    race = [r for r in rows if r.get("phase", "race") in ("race", "") and r.get("status") == "ok"]
    key = "metric" if args.metric else "wall_ms"
    names = []
    for r in race:
        if r["study"] not in names:
            names.append(r["study"])
    body = []
    medians = {n: statistics.median(v) for n in names for v in [_values(race, n, "race", key)] if v}
    names = sorted(medians, key=medians.get, reverse=bool(args.metric and args.metric_better == "higher"))
    for name in names:
        t = _values(race, name, "race", key)
        c = _values(race, name, "race", "cpu_ms")
        b = _values(race, name, "race", "omp_between_regions_ms")
        if not t:
            continue
        lo, hi, cov = median_ci(t)
        clo, chi, _ = median_ci(c)
        body.append([name, str(len(t)), fmt.number(sorted(t)[len(t) // 2], 4),
                     f"{fmt.number(lo, 4)}..{fmt.number(hi, 4)}" + ("" if cov >= 0.95 else f" ({cov:.0%})"),
                     fmt.number(sorted(c)[len(c) // 2], 4) if c else "", f"{fmt.number(clo, 4)}..{fmt.number(chi, 4)}",
                     fmt.number(sorted(b)[len(b) // 2], 4) if b else ""])
    name = "your figure" if args.metric else "wall ms"
    return fmt.table(["setting", "runs", f"{name} median", "CI (coverage)", "CPU ms median", "CI", "between regions ms"],
                     body, right_from=1)
