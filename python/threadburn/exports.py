"""A verdict to paste into an issue (hyperfine's --export-markdown FILE and
--export-json FILE, on `tune`, `sweep` and `verdict`): per workload the line
a user acts on, then one row per setting with its ratios to the baseline and
their intervals (verdicts.setting_rows). The JSON is the verdict file's data
(verdicts.to_json, <stem>.verdict.json) with, per workload, the headline and
the rows added, under its own version (export_schema; results/README.md).
"""
import json
import os

from . import confirmation, fmt, verdicts
from .errors import ThreadburnError

EXPORT_SCHEMA = 1


def add_options(p):
    g = p.add_argument_group("exports (to paste into an issue; results/README.md, Exports)")
    g.add_argument("--export-markdown", metavar="FILE", help="also write the verdict and the evidence per setting "
                   "as a Markdown table")
    g.add_argument("--export-json", metavar="FILE", help="also write them as JSON (the verdict file's data, "
                   "with the rows per setting)")


def to_json(entries, data):
    """data: the verdict file's dict for these entries (verdicts.to_json)."""
    out = {"export_schema": EXPORT_SCHEMA}
    out.update(data)
    out["workloads"] = [dict(w, headline=verdicts.headline(e), settings=verdicts.setting_rows(e))
                        for w, e in zip(data["workloads"], entries)]
    return out


def columns(e):
    """The header of the per-setting table of an entry (also the report's)."""
    d = e.decision
    figure = {"step_ms": "step ms", "wall_ms": "wall ms", "your figure": "your figure"}[e.time_name]
    time = "your figure" if e.higher_is_better else ("time" if e.time_name != "step_ms" else "step")
    return ["setting", "verdict's view", "runs", f"{figure} (geo. mean)", f"{time} vs {d.baseline}",
            "CPU ms (geo. mean)", f"CPU vs {d.baseline}"]


def cells(e, row):
    """One row of setting_rows as the table's cells (text)."""
    return [row["setting"], row["role"], str(row["runs"]), fmt.number(row["time_geomean"], 4),
            verdicts.ratio_text(row["time_ratio"], e.higher_is_better), fmt.number(row["cpu_geomean"], 4),
            verdicts.ratio_text(row["cpu_ratio"])]


def markdown(entries, data):
    lines = [f"### threadburn verdict: `{data['source']}`", ""]
    for e in entries:
        d = e.decision
        lines += [f"**{e.label}**", "", f"> {verdicts.headline(e)}", ""]
        lines += [f"- {ln.strip()}" for ln in verdicts.evidence(e)]
        if d.settings:
            lines += ["", f"Ratios are setting / {d.baseline} as a change, [interval] after the correction "
                          f"(alpha' {d.alpha_each:.2g} per side); margin {d.margin:.0%}.", ""]
            lines += fmt.table(columns(e), [cells(e, r) for r in verdicts.setting_rows(e)], fmt="md")
        lines.append("")
    if data.get("confirmation"):
        conf = confirmation.text(data["confirmation"])
        lines += [conf[0], ""] + [f"- {ln.strip()}" for ln in conf[1:]] + [""]
    return "\n".join(lines)


def _write(path, text):
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise ThreadburnError(f"{path}: cannot write: {e.strerror}") from None
    return path


def write_requested(args, entries, data):
    """The exports args asks for (--export-markdown, --export-json); the paths written."""
    written = []
    if getattr(args, "export_markdown", None):
        written.append(_write(args.export_markdown, markdown(entries, data)))
    if getattr(args, "export_json", None):
        written.append(_write(args.export_json, json.dumps(to_json(entries, data), indent=1) + "\n"))
    return written
