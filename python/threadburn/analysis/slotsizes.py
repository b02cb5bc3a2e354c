"""A tune of several slot sizes (tune --cpus 1,2,4; engine/slots.py): each
size's plan, and how many CPUs the training needs. Pure functions of rows.

Each size's plan is what its own tune ends with (hostplan.best: the
confirmed change, else plain). The fresh runs of the sizes side by side
(phase confirm, point_key cpus<size>-plan and cpus<size>-plain, their slot
in cpu_quota) give each run's throughput: the user's --metric where the
runs have one (its direction theirs), else runs per second (1 / the run's
wall time: the same work a run). Each size's plan against the previous
size's is --copies' rule (hostplan.steps, one-sided at confirm_alpha over
the steps): a step *adds* when the larger slot's plan is faster by more
than the margin, *adds less* when it is shown not faster by the margin,
and is open otherwise. The training needs the smallest size whose plan the
next larger one's is not measurably faster than: the size before the first
step that does not add, said only when that step is settled (else: at least).
"""
import json
import statistics
from dataclasses import dataclass, field

from . import hostplan
from ..lib import files


@dataclass
class Size:
    cpus: float
    plan: str
    throughput: float = None       # median over its fresh runs (runs/s, or the --metric)
    cpu_ms: float = None           # median CPU of a run (the process tree's)
    wall_ms: float = None          # median wall time of a run
    cpus_used: float = None        # median CPU / wall time: the CPUs it kept busy
    runs: int = 0
    plain: dict = field(default_factory=dict)  # the same of plain at this size, where the plan is not plain
    figures: dict = field(default_factory=dict)  # {round: throughput} of the plan


@dataclass
class Sizes:
    command: str
    sizes: list                    # [Size], by cpus
    steps: list                    # [hostplan.Step]
    needs: float                   # the smallest size the next larger one is not measurably faster than
    settled: bool
    margin: float
    alpha: float                   # one-sided, per step
    unit: str                      # "runs/s" or "your figure"
    higher: bool


def plan_of(csv_path):
    """The plan a size's own tune ended with, from its verdict file
    (<stem>.verdict.json, what the tune decided): the confirmed change, else
    plain (hostplan.best)."""
    try:
        with open(files.verdict_path(csv_path)) as f:
            w = json.load(f)["workloads"][0]
    except (OSError, ValueError, KeyError, IndexError):
        return "plain"
    return w["setting"] if w.get("verdict") == "change" and w.get("setting") else w.get("baseline") or "plain"


def _figure(row):
    """(a run's throughput, higher is better)."""
    if row.metric is not None:
        return row.metric, row.metric_better != "lower"
    return (1000.0 / row.wall_ms if row.wall_ms else None), True


def _summary(rows):
    ok = [r for r in rows if r.status == "ok" and r.wall_ms]
    if not ok:
        return {}
    figs = [f for f, _ in map(_figure, ok) if f is not None]
    cpu = [r.cpu_ms for r in ok if r.cpu_ms is not None]
    used = [r.cpu_ms / r.wall_ms for r in ok if r.cpu_ms is not None]
    return {"name": ok[0].study, "throughput": statistics.median(figs) if figs else None,
            "cpu_ms": statistics.median(cpu) if cpu else None, "wall_ms": statistics.median(r.wall_ms for r in ok),
            "cpus_used": statistics.median(used) if used else None, "runs": len(ok)}


def size_rows(rows):
    """{(size, role): [rows]} of a sizes file's fresh runs (role: plan or plain)."""
    out = {}
    for r in rows:
        key = r.point_key or ""
        if r.phase != "confirm" or not key.startswith("cpus") or "-" not in key:
            continue
        size, role = key[4:].split("-", 1)
        try:
            out.setdefault((float(size), role), []).append(r)
        except ValueError:
            continue
    return out


def decide(rows, rule):
    """Sizes of a sizes file's rows under `rule` (None: fewer than two sizes)."""
    groups = size_rows(rows)
    cpus = sorted({s for s, _ in groups})
    if len(cpus) < 2:
        return None
    higher = next((_figure(r)[1] for g in groups.values() for r in g if r.status == "ok"), True)
    sizes = []
    for s in cpus:
        plan_rows = groups.get((s, "plan"), [])
        summary = _summary(plan_rows)
        figures = {}
        for r in sorted(plan_rows, key=lambda r: (r.round if r.round is not None else -1, r.run_key)):
            f = _figure(r)[0] if r.status == "ok" else None
            if f is not None:
                figures[r.round if r.round is not None and r.round not in figures else r.run_key] = f
        sizes.append(Size(s, summary.get("name") or (plan_rows[0].study if plan_rows else "?"),
                          summary.get("throughput"), summary.get("cpu_ms"), summary.get("wall_ms"),
                          summary.get("cpus_used"), summary.get("runs", 0), _summary(groups.get((s, "plain"), [])),
                          figures))
    alpha = hostplan.step_alpha(rule, len(sizes))
    stepped = hostplan.steps([(z.cpus, z.plan, z.figures) for z in sizes], alpha, rule, higher)
    needs, settled = hostplan.enough(sizes[0].cpus, stepped)
    metric = any(r.metric is not None for g in groups.values() for r in g)
    command = next((r.command for g in groups.values() for r in g), "")
    return Sizes(command, sizes, stepped, needs, settled, rule.margin, alpha, "your figure" if metric else "runs/s",
                 higher)


def figure_points(rows):
    """A sizes file's points for its figure (export/figures.py, slot_sizes):
    per size, its plan's and plain's median throughput and CPUs busy."""
    out = []
    for (cpus, role), rs in size_rows(rows).items():
        s = _summary(rs)
        if not s:
            continue
        command = rs[0].command or ""
        out.append({"workload": command if len(command) <= 70 else command[:67] + "...",
                    "setting": "each size's plan" if role == "plan" else "plain", "cpus": cpus,
                    "throughput": s["throughput"], "cpus_busy": s["cpus_used"],
                    "unit": "your figure" if any(r.metric is not None for r in rs) else "runs/s"})
    return out
