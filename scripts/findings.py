#!/usr/bin/env python3
"""Prints the tables of results/FINDINGS.md from the committed result CSVs,
so every number there can be regenerated and checked:

    python3 scripts/findings.py [--results results] > /tmp/tables.md

Each table is the median over repetitions (and over concurrent copies) of one
grid's rows. Standard library only.
"""
import argparse
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threadburn_py import results, schema  # noqa: E402


def med(rows, metric):
    values = results.metric_values(rows, metric)
    return statistics.median(values) if values else None


def fmt(value, digits=2):
    if value is None:
        return "–"
    if abs(value) >= 100:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def setting(row):
    """Runtime + environment, without the thread count (its own column)."""
    label = schema.env_label(row)
    label = re.sub(r"\s*OMP_NUM_THREADS=\S+", "", label)
    return label.replace("KMP_AFFINITY=granularity=fine,compact,1,0", "compact affinity")


def table(header, body):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in body]
    return "\n".join(out)


def groups(rows, key):
    out = {}
    for row in rows:
        if row.get("status") == "ok":
            out.setdefault(key(row), []).append(row)
    return out


def load(res, grid):
    path = os.path.join(res, grid + ".csv")
    if not os.path.exists(path):
        return None
    return results.read_rows(path)


def burn_table(rows, title):
    """Step time against post-step burn per setting (optimizer or train step)."""
    by = groups(rows, lambda r: (r["benchmark"], r.get("OMP_NUM_THREADS", ""), setting(r)))
    body = []
    for (bench, threads, label), rs in sorted(by.items(), key=lambda kv: (kv[0][0], med(kv[1], "step_ms") or 0)):
        body.append([results.workload_label(rs[0]), threads, label, fmt(med(rs, "step_ms")),
                     fmt(med(rs, "residual_cpu_ms")), fmt(med(rs, "tail_ms"), 1),
                     fmt(med(rs, "residual_cores")), len(rs)])
    return f"### {title}\n\n" + table(
        ["workload", "OMP_NUM_THREADS", "setting", "step_ms", "residual_cpu_ms", "tail_ms",
         "residual_cores", "runs"], body)


def runtime_table(rows):
    """Region time, wake-up cost and burn per kernel and setting (n = 1 Mi floats).
    Region times are the per-run medians over steps (step_ms_median): a kernel
    region is ~0.1 ms, so one preempted step would dominate a mean."""
    rows = [r for r in rows if r.get("n") == "1048576"]
    by = groups(rows, lambda r: (r.get("kernel", ""), setting(r)))
    gaps = sorted({int(r["gap_ms"]) for r in rows if r.get("gap_ms")})
    us = lambda v: fmt(v * 1000 if v is not None else None, 0)
    body = []
    for (kernel, label), rs in sorted(by.items()):
        at = {g: [r for r in rs if r.get("gap_ms") == str(g)] for g in gaps}
        line = [kernel, label, us(med(at[gaps[0]], "step_ms_median")), us(med(at[gaps[0]], "serial_ms"))]
        for g in gaps[1:]:
            region, b2b = med(at[g], "step_ms_median"), med(at[g], "backtoback_ms")
            line.append(us(region - b2b if region is not None and b2b is not None else None))
        big = gaps[-1]
        line += [fmt(med(at[big], "residual_cpu_ms_median")), fmt(med(at[big], "tail_ms_median"), 1)]
        body.append(line)
    header = ["kernel", "setting", "region µs (back-to-back)", "serial µs"]
    header += [f"wake-up µs after {g} ms" for g in gaps[1:]]
    header += [f"residual_cpu_ms after {gaps[-1]} ms", "tail_ms"]
    return ("### Runtimes side by side (runtime.csv, n = 1 Mi floats, OMP_NUM_THREADS=2; "
            "medians over steps, then over runs)\n\n" + table(header, body))


def loader_table(rows):
    by = groups(rows, lambda r: (r.get("OMP_NUM_THREADS", ""), setting(r), r.get("loader", ""), int(r.get("workers") or 0)))
    body = []
    for (threads, label, loader, workers), rs in sorted(by.items()):
        body.append([threads, label, loader, workers, fmt(med(rs, "samples_per_s"), 0), fmt(med(rs, "step_ms")),
                     fmt(med(rs, "data_ms")), fmt(med(rs, "cores_busy")), fmt(med(rs, "threads"), 0),
                     fmt(med(rs, "invol_ctxsw"), 1)])
    return "### Loader contention (loader.csv: cifar_sgd, batch 64, augmentation on, gap 0)\n\n" + table(
        ["OMP_NUM_THREADS", "setting", "loader", "workers", "samples/s", "step_ms", "data_ms", "cores_busy",
         "threads", "invol_ctxsw/step"], body)


def onednn_table(rows):
    by = groups(rows, lambda r: (r.get("model", ""), r.get("OMP_NUM_THREADS", ""), setting(r), r.get("mkldnn", "")))
    body = []
    for (model, threads, label, mk), rs in sorted(by.items()):
        body.append([model, threads, label, mk, fmt(med(rs, "step_ms")), fmt(med(rs, "forward_ms")),
                     fmt(med(rs, "backward_ms")), fmt(med(rs, "cores_busy")), fmt(med(rs, "residual_cpu_ms"))])
    return "### oneDNN on/off (onednn.csv)\n\n" + table(
        ["model", "OMP_NUM_THREADS", "setting", "mkldnn", "step_ms", "forward_ms", "backward_ms", "cores_busy",
         "residual_cpu_ms"], body)


def oversub_table(rows):
    entries = results.oversubscription(rows)
    return "### Oversubscription (oversubscription.csv)\n\n```\n" + "\n".join(results.oversubscription_text(entries)) + "\n```"


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", default=os.path.join(os.path.dirname(__file__), "..", "results"))
    args = ap.parse_args(argv)
    sections = [
        ("seed000", lambda r: burn_table(r, "seed 000: SGD step, then 2 s idle (seed000.csv)")),
        ("default", lambda r: burn_table(r, "The default study (default.csv)")),
        ("blocktime", lambda r: burn_table(r, "Blocktime / spin count / wait policy (blocktime.csv)")),
        ("launcher", lambda r: burn_table(r, "PyTorch's launcher preset against the others (launcher.csv)")),
        ("runtime", runtime_table),
        ("loader", loader_table),
        ("oversubscription", oversub_table),
        ("onednn", onednn_table),
        ("batch_workers", lambda r: burn_table(r, "Batch x workers (batch_workers.csv)")),
    ]
    for grid, render in sections:
        rows = load(args.results, grid)
        if rows is None:
            print(f"<!-- results/{grid}.csv not found -->\n")
            continue
        print(render(rows) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
