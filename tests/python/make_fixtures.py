#!/usr/bin/env python3
"""Writes the hand-checked results CSVs of tests/python/fixtures/ (the current schema):

    /usr/bin/python3 tests/python/make_fixtures.py

Rows as `threadburn sweep` writes them for the recorded programs
(tests/fixtures/programs): the header is schema.Columns of their
descriptions, every flag column holds the benchmark's axis value or the
program's default, and benchmark names are the programs'. Only the columns a
test reads get values; the numbers below are the ones the tests check by hand.

  oversub_results.csv   results.oversubscription (test_results.py, test_plot.py,
                        test_findings.py)
  compare_a.csv, compare_b.csv   compare (test_compare.py)
  plot_results.csv      plot and findings (test_plot.py, test_findings.py)
compare_schema2.csv is a file of the previous schema (version 2), kept as it
was written, for the refusal to compare across versions; plot_timelines/*.csv
are timeline files in the one timeline format (src/core/timeline.h).
"""
import csv
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import helpers  # noqa: E402  (puts the package on sys.path)
from threadburn.lib import schema  # noqa: E402

# What the programs report as omp_runtime under each runtime name (their --describe).
RUNTIME_LIBRARY = {r["name"]: r["library"] for r in helpers.recording("train_step")["runtimes"]}

OUT = helpers.FIXTURES
RULE_CONTEXT = ("noise_cv", "burn_threshold_cores", "throughput_counter", "throughput_unit")


def columns():
    return schema.Columns(helpers.recorded_descriptions())


def registered_name(recording, args):
    prefix = recording["benchmarks"][0]["name"].split("/")[0]
    parts = []
    for i, axis in enumerate(a["name"] for a in recording["axes"]):
        value = args[axis]
        parts.append(value if i == 0 else f"{axis}:{value}")
    return prefix + "/" + "/".join(parts)


def row(bench, args, runtime="gomp", env=None, processes=1, rep=0, proc=0, status="ok", reason="",
        run_key=None, grid="fixture", preset="", **values):
    """One results row; args: flag values (axis values of the benchmark);
    values: counters and any other column."""
    device = "cuda" if args.get("device", "cpu").startswith("cuda") else "cpu"
    recording = helpers.recording(bench, device)
    flags = {f["name"]: f["default"] for f in recording["flags"] if f["name"] not in schema.SWEEP_FLAGS}
    flags.update({k: str(v) for k, v in args.items()})
    steps = flags.get("steps", "10")
    knobs = {k: "unset" for k in schema.env_knob_names(helpers.recorded_descriptions()[0])}
    knobs.update({k: str(v) for k, v in (env or {}).items()})
    ident = json.dumps([bench, flags, runtime, knobs, processes, preset], sort_keys=True)
    point = hashlib.sha1(ident.encode()).hexdigest()[:12]
    out = dict(flags, **knobs)
    out.update(schema_version=schema.SCHEMA_VERSION, run_key=run_key or f"{point}-r{rep}", status=status,
               reason=reason, grid=grid, study="s", preset=preset,
               benchmark=registered_name(recording, flags) + f"/iterations:{steps}/manual_time", bench=bench,
               runtime=runtime, processes=processes, repetition=rep, proc_index=proc, point_key=point,
               run_rows=processes, seed=1, omp_runtime=RUNTIME_LIBRARY[runtime], iterations=steps,
               time_unit="ms", exit_code=0)
    # The rules a program's rows carry (noise_cv, throughput_...): its context, as recorded.
    out.update({k: recording["context"][k] for k in RULE_CONTEXT})
    out.update({k: v for k, v in values.items()})
    return out


def as_read(r):
    """A row as results.read_rows gives it: every column, in the header's order, as text."""
    return {c: schema.fmt_value(r.get(c)) for c in columns().all}


def write(name, rows):
    cols = columns().all
    for r in rows:
        unknown = set(r) - set(cols)
        if unknown:
            raise SystemExit(f"make_fixtures.py: {name}: not columns: {sorted(unknown)}")
    with open(os.path.join(OUT, name), "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(cols)
        for r in rows:
            writer.writerow([schema.fmt_value(r.get(c)) for c in cols])
    print(f"make_fixtures.py: {OUT}/{name}: {len(rows)} rows")


MNIST = {"model": "mnist_adadelta", "workers": "0", "gap_ms": "0"}
SGD300 = {"optimizer": "sgd", "gap_ms": "300"}


def oversub_rows():
    """Per run, per copy (step_ms, samples_per_s, step_cpu_ms, residual_cpu_ms, invol_ctxsw):

      train mnist, gomp T=2 (setting A):
        P=1 r0 (30, 2000, 54, 7, 3)            r1 (32, 2100, 56, 6, 5)
        P=2 r0 (60, 1000, 50, 10, 20) (64, 1050, 52, 8, 22)
            r1 (70, 900, 55, 5, 30) (66, 950, 53, 7, 26)
            r2 (1000, 10, 900, 900, 900) + a failed copy: left out
            r3 (5000, 1, 9, 9, 9) x 2, copies overlapped 50 %: left out
        P=4 r0 (120, 500, 100, 2, 40) (124, 520, 100, 4, 40) (128, 480, 100, 6, 40)
               (132, 500, 100, 8, 40)
      train mnist, llvm T=2 bt=200 (B): P=1 r0 (28, 2200, 50, 200, 2)
                                        P=2 r0 (90, 700, 60, 150, 80) (110, 600, 58, 170, 100)
      train mnist, gomp T=1 (C): P=1 only: not in the aggregate
      optimizer sgd gap 300, A: P=2 r0 (4, -, 8, 7, 1) (5, -, 9, 7, 2): no P=1
    """
    a, b, c = {"OMP_NUM_THREADS": 2}, {"OMP_NUM_THREADS": 2, "KMP_BLOCKTIME": 200}, {"OMP_NUM_THREADS": 1}
    rows = []

    def run(bench, args, runtime, env, copies, rep, status=None, overlap=None):
        procs = len(copies)
        for i, cells in enumerate(copies):
            step, sps, cpu, res, invol = cells
            values = dict(step_ms=step, step_cpu_ms=cpu, residual_cpu_ms=res, invol_ctxsw=invol)
            if sps is not None:
                values["samples_per_s"] = sps
            if procs > 1:
                values["overlap"] = overlap if overlap is not None else 0.98
            failed = status is not None and i == procs - 1
            rows.append(row(bench, args, runtime, env, processes=procs, rep=rep, proc=i,
                            status="failed" if failed else "ok", reason="exit code 3" if failed else "",
                            **values))

    run("train_step", MNIST, "gomp", a, [(30, 2000, 54, 7, 3)], 0)
    run("train_step", MNIST, "gomp", a, [(32, 2100, 56, 6, 5)], 1)
    run("train_step", MNIST, "gomp", a, [(60, 1000, 50, 10, 20), (64, 1050, 52, 8, 22)], 0)
    run("train_step", MNIST, "gomp", a, [(70, 900, 55, 5, 30), (66, 950, 53, 7, 26)], 1)
    run("train_step", MNIST, "gomp", a, [(1000, 10, 900, 900, 900), (1000, 10, 900, 900, 900)], 2, status="failed")
    run("train_step", MNIST, "gomp", a, [(5000, 1, 9, 9, 9), (5000, 1, 9, 9, 9)], 3, overlap=0.5)
    run("train_step", MNIST, "gomp", a, [(120, 500, 100, 2, 40), (124, 520, 100, 4, 40), (128, 480, 100, 6, 40),
                                         (132, 500, 100, 8, 40)], 0)
    run("train_step", MNIST, "llvm", b, [(28, 2200, 50, 200, 2)], 0)
    run("train_step", MNIST, "llvm", b, [(90, 700, 60, 150, 80), (110, 600, 58, 170, 100)], 0)
    run("train_step", MNIST, "gomp", c, [(40, 1600, 40, 0, 1)], 0)
    run("optimizer_step", SGD300, "gomp", a, [(4, None, 8, 7, 1), (5, None, 9, 7, 2)], 0)
    return rows


def compare_rows(side):
    """Status ok rows:
      G1 optimizer llvm T=2 bt=200: step A 10,11,12  B 13,14,15; residual A 200,201,202  B 0.5,1,1.5
      G2 optimizer gomp (no env):   step A 10 x4     B 10 x4;    residual A 0 x4         B 1 x4
      G3 train mnist gap 100 gomp:  step A 19,20,21  B 24,25,26; residual A 6,7,8       B 0,0.5,1
                                    samples_per_s A 3400,3200,3050  B 2700,2560,2460
      G4 only in A (optimizer llvm T=1 bt=0), G5 only in B (train cifar gap 0).
    A also has a failed row of G1, B a skipped CUDA row.
    """
    g1 = {"OMP_NUM_THREADS": 2, "KMP_BLOCKTIME": 200}
    train = dict(MNIST, gap_ms="100")
    data = {
        "a": {"g1": [(10, 200), (11, 201), (12, 202)], "g2": [(10, 0)] * 4,
              "g3": [(19, 6, 3400), (20, 7, 3200), (21, 8, 3050)]},
        "b": {"g1": [(13, 0.5), (14, 1), (15, 1.5)], "g2": [(10, 1)] * 4,
              "g3": [(24, 0, 2700), (25, 0.5, 2560), (26, 1, 2460)]},
    }[side]
    rows = []
    for rep, (step, res) in enumerate(data["g1"]):
        rows.append(row("optimizer_step", SGD300, "llvm", g1, rep=rep, grid=side, step_ms=step, residual_cpu_ms=res))
    for rep, (step, res) in enumerate(data["g2"]):
        rows.append(row("optimizer_step", SGD300, "gomp", rep=rep, grid=side, step_ms=step, residual_cpu_ms=res))
    for rep, (step, res, sps) in enumerate(data["g3"]):
        rows.append(row("train_step", train, "gomp", rep=rep, grid=side, step_ms=step, residual_cpu_ms=res,
                        samples_per_s=sps))
    if side == "a":
        rows.append(row("optimizer_step", SGD300, "llvm", g1, rep=3, grid=side, status="failed",
                        reason="killed by SIGSEGV"))
        rows.append(row("optimizer_step", SGD300, "llvm", {"OMP_NUM_THREADS": 1, "KMP_BLOCKTIME": 0}, grid=side,
                        step_ms=18, residual_cpu_ms=0))
    else:
        rows.append(row("train_step", dict(MNIST, device="cuda"), "gomp", grid=side, status="skipped",
                        reason="skipped: no CUDA device"))
        rows.append(row("train_step", dict(MNIST, model="cifar_sgd"), "gomp", grid=side, step_ms=40,
                        residual_cpu_ms=3, samples_per_s=1600))
    return rows


def plot_rows():
    """12 optimizer_step settings (gap 300) x 2 repetitions; repetition 1 is 4 %
    slower. step_ms: 18 with OMP_NUM_THREADS=1, else 10; residual_cpu_ms: 7
    under libgomp's default spin with 2 threads, the blocktime with llvm and 2
    threads, else 0. Three settings saved a timeline (repetition 0)."""
    settings = [("gomp", {}, ""), ("gomp", {"OMP_NUM_THREADS": 1}, ""),
                ("gomp", {"OMP_NUM_THREADS": 1, "OMP_WAIT_POLICY": "passive"}, ""),
                ("gomp", {"OMP_NUM_THREADS": 2}, ""),
                ("gomp", {"OMP_NUM_THREADS": 2, "OMP_WAIT_POLICY": "passive"}, "")]
    settings += [("llvm", {"OMP_NUM_THREADS": t, "KMP_BLOCKTIME": bt}, "") for t in (1, 2) for bt in (0, 50, 200)]
    settings.append(("llvm", {"OMP_NUM_THREADS": 2, "KMP_BLOCKTIME": 1,
                              "KMP_AFFINITY": "granularity=fine,compact,1,0"}, "launcher"))
    timelines = {("gomp", ()): "gomp_default", ("llvm", (2, 0)): "llvm_t2_bt0", ("llvm", (2, 200)): "llvm_t2_bt200"}
    rows = []
    for runtime, env, preset in settings:
        threads = env.get("OMP_NUM_THREADS", 2)
        if threads == 1 or env.get("OMP_WAIT_POLICY") == "passive":
            burn = 0
        else:
            burn = env["KMP_BLOCKTIME"] if runtime == "llvm" else 7
        tl = timelines.get((runtime, tuple(env.get(k) for k in ("OMP_NUM_THREADS", "KMP_BLOCKTIME") if k in env)))
        for rep in (0, 1):
            step = (18 if threads == 1 else 10) * (1.04 if rep else 1)
            rows.append(row("optimizer_step", dict(SGD300, steps=8), runtime, env, rep=rep, preset=preset,
                            grid="plot", step_ms=round(step, 6), residual_cpu_ms=burn, step_cpu_ms=step * threads,
                            tail_ms=burn, residual_cores=burn / 300, invol_ctxsw=3,
                            timeline_file=f"plot_timelines/{tl}.timeline.csv" if tl and rep == 0 else ""))
    return rows


def main():
    write("oversub_results.csv", oversub_rows())
    write("compare_a.csv", compare_rows("a"))
    write("compare_b.csv", compare_rows("b"))
    write("plot_results.csv", plot_rows())
    return 0


if __name__ == "__main__":
    sys.exit(main())
