"""Per workload, one decision (decide.py) from a results file's rows, and the
verdict as text (a line a user acts on, then the evidence) and as data
(<stem>.verdict.json, results/README.md), and the exports to paste into an
issue (hyperfine's --export-markdown FILE and --export-json FILE, on `tune`,
`sweep` and `verdict`): per workload the headline, then one row per setting
with its ratios to the baseline and their intervals (setting_rows); the JSON
is the verdict file's data with, per workload, the headline and those rows,
under its own version (export_schema; results/README.md, Exports).

One value per run (decide.per_run): a sweep run's time is the mean step_ms
of its copies (a data-parallel world: its slowest rank), its CPU the sum of
step_cpu_ms + residual_cpu_ms over the copies (what the run spent per
step); a tune run's time is its wall time or the user's --metric, its CPU
the probe's cpu_ms. A run with a copy that did not end ok is left out. The
baseline is the default environment in a sweep (keys.Setting.is_default)
and `plain` in a tune.
"""
import json
import os
import shlex
import statistics
from dataclasses import dataclass, field

from . import confirmation, decide, results
from ..lib import errors, fmt, keys, paths, schema

VERDICT_SCHEMA = 1


@dataclass
class Entry:
    label: str
    decision: decide.Decision
    runs: int
    env: dict = field(default_factory=dict)         # name -> the variables a user sets
    time_name: str = "step_ms"
    higher_is_better: bool = False
    points: dict = field(default_factory=dict)      # name -> the point keys (campaign items) behind it
    duplicates: dict = field(default_factory=dict)  # dropped setting -> the one kept (same effective settings)
    benchmark: str = ""                             # the rows' benchmark name


def is_tune(row):
    return row.get("grid") == "tune"


def setting_name(row):
    return row.get("study", "") if is_tune(row) else keys.setting_of(row).label


def user_env(row, libomp=paths.LIBOMP):
    """The variables that give a row's setting (LD_PRELOAD for LLVM's runtime)."""
    env = {k: v for k, v in keys.setting_of(row).env if v not in (schema.UNSET, "")}
    if row.get("runtime") == "llvm":
        env["LD_PRELOAD"] = libomp
    return env


def _tune_values(run_rows):
    row = run_rows[0]
    value = schema.to_float(row.get("metric")) if row.get("metric") not in (None, "") else \
        schema.to_float(row.get("wall_ms"))
    return value, schema.to_float(row.get("cpu_ms"))


def _sweep_values(run_rows):
    steps = [schema.to_float(r.get("step_ms")) for r in run_rows]
    cpu = [(schema.to_float(r.get("step_cpu_ms")), schema.to_float(r.get("residual_cpu_ms"))) for r in run_rows]
    if None in steps or any(None in c for c in cpu):
        return None, None
    return statistics.fmean(steps), sum(a + b for a, b in cpu)


def effective_key(row):
    """What a tune run really ran, as the probe reports it: the runtime, the
    team it used, and with a team of 2 or more the wait settings in force
    and the affinity asked for. Settings equal on it are one setting."""
    team = int(schema.to_float(row.get("max_team")) or 1) if (schema.to_float(row.get("regions")) or 0) > 0 else 1
    if team <= 1:
        return (row.get("omp_runtime", ""), 1)
    return (row.get("omp_runtime", ""), team, row.get("omp_wait_policy", ""), row.get("kmp_blocktime_ms", ""),
            row.get("gomp_spincount_in_force", ""), row.get("KMP_AFFINITY", ""), row.get("OMP_PROC_BIND", ""),
            row.get("OMP_PLACES", ""))


def duplicates(rows):
    """{dropped setting: the setting kept} among a tune's default settings
    (preset "default"; a user's own --points are never pruned) whose
    effective_key is the same (most runs agreeing); plain is kept first,
    then launcher, then by name."""
    keys_by = {}
    for r in rows:
        if (is_tune(r) and r.get("preset") == "default" and r.get("status") == "ok"
                and r.get("phase", "race") in ("race", "")):
            keys_by.setdefault(r["study"], []).append(effective_key(r))
    effective = {name: max(set(ks), key=ks.count) for name, ks in keys_by.items()}
    order = sorted(effective, key=lambda n: (n != "plain", n != "launcher", n))
    kept, out = {}, {}
    for name in order:
        k = effective[name]
        if k in kept:
            out[name] = kept[k]
        else:
            kept[k] = name
    return out


def gather(rows):
    """{Workload: {"settings": {name: decide.Setting}, "baseline": name,
    "env": {name: env}, "tune": bool}} from the rows of a results file."""
    rows = [r for r in rows if r.get("phase", "") in ("", "race")]
    dropped = duplicates(rows) if rows and is_tune(rows[0]) else {}
    rows = [r for r in rows if not (is_tune(r) and r.get("study") in dropped)]
    by_run = {}
    for r in rows if rows and is_tune(rows[0]) else results.world_rows(rows):
        w = keys.workload_of(r)
        by_run.setdefault(w, {}).setdefault(setting_name(r), {}).setdefault(r.get("run_key", ""), []).append(r)
    out = {}
    for w, by_setting in by_run.items():
        entry = {"settings": {}, "baseline": None, "env": {}, "tune": False, "higher": False, "points": {}, "has_metric": False,
                 "failed": [],
                 "command": ""}
        for name, runs in by_setting.items():
            times, cpus = {}, {}
            if any(r.get("status") == "failed" for rs in runs.values() for r in rs):
                entry["failed"].append(name)  # a setting whose runs fail is no answer
                continue
            for run_key, run_rows in runs.items():
                if any(r.get("status") != "ok" for r in run_rows):
                    continue
                tune = is_tune(run_rows[0])
                t, c = (_tune_values if tune else _sweep_values)(run_rows)
                if t is not None and c is not None:
                    times[run_key], cpus[run_key] = [t], [c]
            all_rows = [r for rs in runs.values() for r in rs]
            first = next((r for r in all_rows if r.get("status") == "ok"), all_rows[0])
            entry["points"][name] = {r.get("point_key", "") for rs in runs.values() for r in rs}
            entry["tune"], entry["command"] = is_tune(first), first.get("command", "")
            entry["has_metric"] = first.get("metric", "") != ""
            entry["higher"] = first.get("metric_better") == "higher" and entry["has_metric"]
            if times:
                entry["settings"][name] = decide.Setting(name, decide.per_run(times), decide.per_run(cpus))
                entry["env"][name] = user_env(first)
            if entry["baseline"] is None and (name == "plain" if entry["tune"] else keys.setting_of(first).is_default):
                entry["baseline"] = name
        if entry["settings"]:
            entry["duplicates"] = dropped
            out[w] = entry
    return out


def decide_all(rows, objective="balanced", margin=decide.MARGIN, alpha=decide.ALPHA, looks=1):
    """[Entry] sorted by label; a workload without its baseline gets an
    undecided Decision saying so."""
    gathered = gather(rows)
    labels = keys.labels(list(gathered))
    out = []
    for w, g in gathered.items():
        settings = list(g["settings"].values())
        base = g["baseline"]
        if g["baseline"] is None and g["failed"]:
            base = None
        if base is None or base not in g["settings"]:
            d = decide.Decision("undecided", objective, margin, alpha, alpha, looks, base or "",
                                settings=g["settings"])
            d.why = ("the baseline (" + ("plain" if g["tune"] else "the default environment: gomp, no env") +
                     ") has " + ("failed runs" if (base or "plain") in g["failed"] else "no complete run") +
                     " in this file")
        else:
            d = decide.decide(settings, base, objective, margin, alpha, looks, g["higher"])
        time_name = "step_ms" if not g["tune"] else ("your figure" if g["has_metric"] else "wall_ms")
        if g["failed"]:
            d.why += f" (left out, a run failed: {', '.join(g['failed'])})"
        out.append(Entry(g["command"] if g["tune"] else labels[w], d, sum(len(s.time) for s in settings),
                         g["env"], time_name, g["higher"], g["points"], g["duplicates"], w.benchmark))
    return sorted(out, key=lambda e: e.label)


# --- text -----------------------------------------------------------------------

def _ci(r):
    return f"{fmt.pct(r.est - 1)} [{fmt.pct(r.lo - 1)}, {fmt.pct(r.hi - 1)}]"


def _time_word(e):
    return "time" if e.time_name in ("wall_ms", "your figure") else "step"


def _time_text(e, r):
    """The time ratio as people read it: a higher-is-better figure (samples/s)
    as its own change (the inverse of the cost ratio), else the time's."""
    if e.higher_is_better:
        return f"your figure {ratio_text(r, True)} (time per unit {fmt.pct(r.est - 1)})"
    return f"{_time_word(e)} {_ci(r)}"


def headline(e):
    d = e.decision
    pct = f"{d.margin:.0%}"
    if d.verdict == "change":
        r = d.vs_baseline[d.chosen]
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in e.env.get(d.chosen, {}).items()) or "(no variables)"
        return (f"CHANGE to {d.chosen}: {_time_text(e, r['time'])}, CPU {_ci(r['cpu'])} against "
                f"{d.baseline}. Set: {env}")
    if d.verdict == "keep":
        return f"KEEP {d.baseline}: every setting tried is shown within {pct} of it or worse (none beats it by {pct})"
    lean = f"; leaning to {d.chosen}" if d.chosen and d.chosen != d.baseline else ""
    return f"UNDECIDED: {d.why}{lean}"


def evidence(e):
    d = e.decision
    lines = []
    if d.baseline and d.settings:
        lines.append(f"    {len(d.settings)} settings, {e.runs} runs ({_runs_range(d)} a setting); {d.method}, "
                     f"alpha' {d.alpha_each:.2g} per one-sided test ({d.alpha} over {max(1, len(d.settings) - 1)} "
                     f"settings x {d.looks} look{'s' if d.looks != 1 else ''}), margin {d.margin:.0%}, objective "
                     f"{d.objective}")
    if d.verdict == "keep" and d.best and d.best != d.baseline:
        r = d.vs_baseline[d.best]
        lines.append(f"    the best by its geometric mean, {d.best}: {_time_text(e, r['time'])}, CPU {_ci(r['cpu'])}")
    if d.equivalent:
        lines.append(f"    equivalent to {d.chosen} on time and CPU (within {d.margin:.0%}): {', '.join(d.equivalent)}")
    if d.eliminated:
        lines.append(f"    slower than the best by more than {d.margin:.0%}: {', '.join(d.eliminated)}")
    if e.duplicates:
        lines.append("    dropped as duplicates (same effective settings, as the probe reported them): "
                     + ", ".join(f"{a} = {b}" for a, b in sorted(e.duplicates.items())))
    for name, what, n in d.open:
        need = f"~{n} runs each would settle it" if n else "no number of runs settles it at this margin soon"
        lines.append(f"    open: {name} {what} ({need})")
    return lines


def _runs_range(d):
    ns = [len(s.time) for s in d.settings.values()]
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


def role(e, name):
    """What the verdict made of one setting: baseline, chosen, equivalent (to
    the chosen), eliminated (slower than the best by the margin), open (a
    comparison still straddles the margin), or "" (none of these)."""
    d = e.decision
    if name == d.baseline:
        return "baseline" + (" (kept)" if d.verdict == "keep" else "")
    if name == d.chosen:
        return "chosen" if d.verdict == "change" else "leaning to"
    if name in d.equivalent:
        return "equivalent"
    if name in d.eliminated:
        return "eliminated"
    return "open" if any(n == name for n, _, _ in d.open) else ""


def setting_rows(e):
    """The evidence per setting, as data: runs, the geometric means of the
    per-run values the rule compared, each ratio to the baseline with its
    interval (after the correction) and what the margin makes of it; the
    chosen setting first, then the baseline, then by the ratio of time."""
    d = e.decision
    out = []
    for name, s in d.settings.items():
        r = d.vs_baseline.get(name, {})
        out.append({"setting": name, "role": role(e, name), "runs": len(s.time),
                    "time_geomean": s.geo("time"), "cpu_geomean": s.geo("cpu"),
                    "time_ratio": _ratio_json(r.get("time")), "cpu_ratio": _ratio_json(r.get("cpu")),
                    "time_word": r["time"].word(d.margin) if r.get("time") else None,
                    "cpu_word": r["cpu"].word(d.margin) if r.get("cpu") else None,
                    "env": e.env.get(name, {})})
    first = {d.chosen: 0, d.baseline: 1}
    return sorted(out, key=lambda x: (first.get(x["setting"], 2),
                                      x["time_ratio"]["estimate"] if x["time_ratio"] else 1.0, x["setting"]))


def ratio_text(r, higher_is_better=False):
    """A Ratio as a change with its interval, -7.9% [-10.1%, -5.6%], as the
    headline writes it (a higher-is-better figure as its own change); "" for none."""
    if r is None:
        return ""
    if higher_is_better:
        return f"{fmt.pct(1 / r.est - 1)} [{fmt.pct(1 / r.hi - 1)}, {fmt.pct(1 / r.lo - 1)}]"
    return _ci(r)


def text(entries):
    lines = []
    for e in entries:
        lines.append(e.label)
        lines.append("  " + headline(e))
        lines += evidence(e)
    return lines


# --- data -----------------------------------------------------------------------

def _ratio_json(r):
    return None if r is None else {"estimate": round(r.est, 5), "low": round(r.lo, 5), "high": round(r.hi, 5),
                                   "runs": r.n, "baseline_runs": r.n_ref}


def to_json(entries, source, budget_runs=None, extra=None):
    out = {"verdict_schema": VERDICT_SCHEMA, "source": os.path.basename(source), "workloads": []}
    for e in entries:
        d = e.decision
        vs = d.vs_baseline.get(d.chosen, {}) if d.chosen and d.chosen != d.baseline else {}
        out["workloads"].append({
            "workload": e.label, "verdict": d.verdict, "setting": d.chosen, "baseline": d.baseline,
            "env": e.env.get(d.chosen, {}) if d.chosen else {}, "why": d.why,
            "time_ratio": _ratio_json(vs.get("time")), "cpu_ratio": _ratio_json(vs.get("cpu")),
            "time_metric": e.time_name, "objective": d.objective, "margin": d.margin, "alpha": d.alpha,
            "alpha_per_test": d.alpha_each, "looks": d.looks, "method": d.method,
            "equivalent": d.equivalent, "eliminated": d.eliminated,
            "open": [{"setting": n, "against": w, "runs_needed": k} for n, w, k in d.open],
            "runs": e.runs, "runs_per_setting": {n: len(s.time) for n, s in d.settings.items()},
            "duplicates": e.duplicates,
            "budget_runs": budget_runs})
    out.update(extra or {})
    return out


def verdict_path(csv_path):
    return os.path.splitext(csv_path)[0] + ".verdict.json"


def write_json(csv_path, data):
    return write_text(verdict_path(csv_path), json.dumps(data, indent=1) + "\n")


def rule_of(csv_path, objective=None, margin=None, looks=None):
    """The rule a file's verdict is recomputed by: what is asked, else what
    its verdict.json recorded, else the defaults; (objective, margin,
    looks, recorded(csv_path))."""
    rec = recorded(csv_path)
    return (objective or rec.get("objective") or "balanced", margin or rec.get("margin") or decide.MARGIN,
            looks or rec.get("looks") or 1, rec)


def recorded(csv_path):
    """What the verdict file beside csv_path recorded of its rule: looks,
    objective, margin (the first workload's), and the whole file."""
    try:
        with open(verdict_path(csv_path)) as f:
            data = json.load(f)
        first = data["workloads"][0] if data.get("workloads") else {}
        return {"looks": max((w.get("looks") or 1) for w in data["workloads"]) if data.get("workloads") else None,
                "objective": first.get("objective"), "margin": first.get("margin"), "file": data}
    except (OSError, ValueError, AttributeError, KeyError, TypeError):
        return {}


# --- exports ----------------------------------------------------------------------

EXPORT_SCHEMA = 1


def add_export_options(p):
    g = p.add_argument_group("exports (to paste into an issue; results/README.md, Exports)")
    g.add_argument("--export-markdown", metavar="FILE", help="also write the verdict and the evidence per setting "
                   "as a Markdown table")
    g.add_argument("--export-json", metavar="FILE", help="also write them as JSON (the verdict file's data, "
                   "with the rows per setting)")


def export_json(entries, data):
    """data: the verdict file's dict for these entries (to_json)."""
    out = {"export_schema": EXPORT_SCHEMA}
    out.update(data)
    out["workloads"] = [dict(w, headline=headline(e), settings=setting_rows(e))
                        for w, e in zip(data["workloads"], entries)]
    return out


def table_columns(e):
    """The header of the per-setting table of an entry (also the report's)."""
    d = e.decision
    figure = {"step_ms": "step ms", "wall_ms": "wall ms", "your figure": "your figure"}[e.time_name]
    time = "your figure" if e.higher_is_better else ("time" if e.time_name != "step_ms" else "step")
    return ["setting", "verdict's view", "runs", f"{figure} (geo. mean)", f"{time} vs {d.baseline}",
            "CPU ms (geo. mean)", f"CPU vs {d.baseline}"]


def table_cells(e, row):
    """One row of setting_rows as the table's cells (text; the ratios as the headline writes them)."""
    r = e.decision.vs_baseline.get(row["setting"], {})
    return [row["setting"], row["role"], str(row["runs"]), fmt.number(row["time_geomean"], 4),
            ratio_text(r.get("time"), e.higher_is_better), fmt.number(row["cpu_geomean"], 4),
            ratio_text(r.get("cpu"))]


def markdown(entries, data):
    lines = [f"### threadburn verdict: `{data['source']}`", ""]
    for e in entries:
        d = e.decision
        lines += [f"**{e.label}**", "", f"> {headline(e)}", ""]
        lines += [f"- {ln.strip()}" for ln in evidence(e)]
        if d.settings:
            lines += ["", f"Ratios are setting / {d.baseline} as a change, [interval] after the correction "
                          f"(alpha' {d.alpha_each:.2g} per side); margin {d.margin:.0%}.", ""]
            lines += fmt.table(table_columns(e), [table_cells(e, r) for r in setting_rows(e)], fmt="md")
        lines.append("")
    if data.get("confirmation"):
        conf = confirmation.text(data["confirmation"])
        lines += [conf[0], ""] + [f"- {ln.strip()}" for ln in conf[1:]] + [""]
    return "\n".join(lines)


def write_text(path, text):
    """path holds text whole or not at all (a .tmp renamed over it); one-line error."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise errors.ThreadburnError(f"{path}: cannot write: {e.strerror}") from None
    return path


def write_exports(args, entries, data):
    """The exports args asks for (--export-markdown, --export-json); the paths written."""
    written = []
    if getattr(args, "export_markdown", None):
        written.append(write_text(args.export_markdown, markdown(entries, data)))
    if getattr(args, "export_json", None):
        written.append(write_text(args.export_json, json.dumps(export_json(entries, data), indent=1) + "\n"))
    return written
