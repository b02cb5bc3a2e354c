"""Aggregates of a results file's rows: grouping rows into points, the
oversubscription aggregate, data-parallel worlds by size, and the
end-of-sweep summary (the rows come typed from lib/records.py)."""
import re
import statistics

from ..lib import keys, schema
from ..lib.records import Row, metric_values, world_rows

OVERLAP_MIN = schema.OVERLAP_MIN


def workload_key(row):
    """What was measured, apart from the runtime and environment."""
    return keys.workload_of(row)


def workload_label(row):
    return keys.workload_of(row).label()


def env_key(row):
    return keys.setting_of(row)


def group_points(rows):
    """{workload key: {env key: [ok rows]}}: repetitions and concurrent
    processes of one setting are pooled as samples of that setting."""
    groups = {}
    for row in rows:
        if not row.ok:
            continue
        groups.setdefault(workload_key(row), {}).setdefault(env_key(row), []).append(row)
    return groups


POINT_METRICS = (Row.step_ms, Row.residual_cpu_ms, Row.samples_per_s)


def point_medians(rows):
    """{"n": rows, column name: median} of POINT_METRICS over a point's rows."""
    out = {"n": len(rows)}
    for metric in POINT_METRICS:
        values = metric_values(rows, metric)
        out[metric.name] = statistics.median(values) if values else None
    return out


SCALING_METRICS = (Row.samples_per_s, Row.step_ms, Row.allreduce_ms, Row.cpu_ms, Row.residual_cpu_ms,
                   Row.step_cpu_gloo_ms)


def world_scaling(rows):
    """Data-parallel worlds by size: per (workload, setting, world size), the
    medians over runs of the world's figures (world_rows): samples/s, step,
    all-reduce, CPU per step of all ranks (step + residual), its residual and
    gloo parts; scaling = samples/s over the same setting's at world size 1.
    A preset is one setting across world sizes even where its
    OMP_NUM_THREADS follows them ("cores_per_process"): entries say the
    threads in force. Sorted by workload, setting, world size."""
    groups = {}
    for w in world_rows(rows):
        if w.world_size is None:
            continue
        base = w.copy(world_size="", processes="1")
        setting = keys.env_label(base)
        if w.preset:  # a preset is one line across world sizes, its thread count may vary with them
            setting = re.sub(r" OMP_NUM_THREADS=\S+", "", setting)
        key = (workload_label(base), setting, w.world_size)
        groups.setdefault(key, []).append(w)
    entries = {}
    for (workload, setting, size), worlds in groups.items():
        e = {"workload": workload, "setting": setting, "world_size": size, "runs": len(worlds), "row": worlds[0],
             "threads": worlds[0].OMP_NUM_THREADS}
        for w in worlds:
            a, b = w.step_cpu_ms, w.residual_cpu_ms
            w.cpu_ms = None if a is None or b is None else a + b
        for metric in SCALING_METRICS:
            values = metric_values(worlds, metric)
            e[metric.name] = statistics.median(values) if values else None
        entries[(workload, setting, size)] = e
    for (workload, setting, size), e in entries.items():
        one = entries.get((workload, setting, 1))
        e["scaling"] = (e["samples_per_s"] / one["samples_per_s"]
                        if one and one["samples_per_s"] and e["samples_per_s"] is not None else None)
    return sorted(entries.values(), key=lambda e: (e["workload"], e["setting"], e["world_size"]))


def base_workload_key(row):
    """workload_key without processes: the P = 1 and P = 4 rows of a setting match."""
    return keys.workload_of(row, with_processes=False)


def _sum_or_none(values):
    return None if any(v is None for v in values) else sum(values)


def run_aggregate(copies):
    """One run's P copies (its ok rows of one benchmark) -> per step:
    mean step_ms per copy, throughput summed over copies (the program's
    throughput counter, Row.throughput; without one steps/s = 1000 / step_ms
    of each copy), CPU of all
    copies (step_cpu_ms + residual_cpu_ms, summed) and involuntary context
    switches (summed). A metric some copy lacks is None."""
    steps = [r.step_ms for r in copies]
    step_ms = None if None in steps else sum(steps) / len(steps)
    counter, _ = copies[0].throughput
    if counter:
        throughput = _sum_or_none([r.number(counter) for r in copies])
    else:
        throughput = None if None in steps or 0 in steps else sum(1000.0 / s for s in steps)
    cpu = [None if r.step_cpu_ms is None or r.residual_cpu_ms is None else r.step_cpu_ms + r.residual_cpu_ms
           for r in copies]
    return {"step_ms": step_ms, "throughput": throughput, "cpu_ms": _sum_or_none(cpu),
            "invol_ctxsw": _sum_or_none([r.invol_ctxsw for r in copies])}


AGGREGATE_METRICS = ("step_ms", "throughput", "cpu_ms", "invol_ctxsw")


def poorly_overlapped(row):
    share = row.overlap
    return share is not None and share < OVERLAP_MIN


def oversubscription(rows):
    """For every (workload, setting) run with processes P > 1, and its P = 1
    point if the file has one: run_aggregate per run (only runs whose P
    copies all reported ok), then the median over the runs, and the slowdown
    = per-copy step_ms at P / the same at P = 1. Sorted by workload,
    setting, P. Each entry: workload, setting, processes, runs, unit, the
    AGGREGATE_METRICS, slowdown, throughput_ratio (vs P = 1) and row."""
    runs = {}
    for row in rows:
        if not row.ok or row.world_size is not None:  # a world's ranks are no copies
            continue
        key = (base_workload_key(row), env_key(row), row.processes)
        runs.setdefault(key, {}).setdefault(row.run_key, []).append(row)
    # A run whose copies did not measure together says nothing about sharing.
    for by_run in runs.values():
        for run_key in [k for k, copies in by_run.items() if any(poorly_overlapped(c) for c in copies)]:
            del by_run[run_key]
    crowded = {(base, env) for base, env, procs in runs if procs > 1}
    points = {}
    for (base, env, procs), by_run in runs.items():
        if (base, env) not in crowded:
            continue
        aggregates = [run_aggregate(c) for c in by_run.values() if len(c) == procs]
        if not aggregates:
            continue
        row = next(iter(by_run.values()))[0]
        entry = {"workload": workload_label(row.copy(processes="1")),
                 "setting": keys.env_label(row.copy(processes="1")),
                 "processes": procs, "runs": len(aggregates),
                 "unit": row.throughput[1], "row": row}
        for metric in AGGREGATE_METRICS:
            values = [a[metric] for a in aggregates if a[metric] is not None]
            entry[metric] = statistics.median(values) if values else None
        points[(base, env, procs)] = entry
    for (base, env, procs), entry in points.items():
        alone = points.get((base, env, 1))
        entry["slowdown"] = entry["throughput_ratio"] = None
        if alone and alone["step_ms"] and entry["step_ms"] is not None:
            entry["slowdown"] = entry["step_ms"] / alone["step_ms"]
        if alone and alone["throughput"] and entry["throughput"] is not None:
            entry["throughput_ratio"] = entry["throughput"] / alone["throughput"]
    return sorted(points.values(), key=lambda e: (e["workload"], e["setting"], e["processes"]))


