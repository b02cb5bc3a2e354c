#!/usr/bin/python3
"""The exact monitor on the built-in trainings, on this machine: writes
results/monitor/exact_*.

    bench/exact_figures.py [--build-dir build] [--out results/monitor] [--rounds 3] [cifar] [pair]

  cifar   train_step_bench's CIFAR-10 training (cifar_sgd, batch 64, 300 ms
          sleep after each step) under LLVM's runtime with KMP_BLOCKTIME=123
          and 2 threads, with threadburn_monitor attached (--pid) in its exact
          mode: the burn, wait and tail of each thread after each step, to
          the us (exact_cifar123.gaps.csv, the monitor's summary in
          exact_cifar123.summary.txt, the program's own figures in
          exact_cifar123.program.txt).
  pair    two copies of the 2-thread libgomp MNIST training (mnist_adadelta,
          batch 64, no sleep: the oversubscription study's point) started
          together on 2 cores, each watched by its own exact monitor; per
          round: one copy alone, the pair without monitors, the pair with them.
          exact_pair.csv: per copy and round, step_ms alone and together, the
          slowdown, and the run-queue wait per timed step of each copy's main
          thread and other threads by who held the CPU (its own process, the
          other copy, any other process, the monitor), and the wait it caused
          the other copy; the CPUs each thread ran on.
Needs root (the exact mode).
"""
import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "python"))
from threadburn.lib import knobs, paths  # noqa: E402  (the checkout's package)

# Every variable of the knob table is removed from the environment the
# programs get: a run sets only what it names.
CONTROLLED = tuple(knobs.names())


def clean_env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    env.update(extra)
    return env


def program(b, *args):
    return [os.path.join(b, "bench", "train_step_bench"), *args, "--benchmark_format=json"]


def first_benchmark(text):
    return json.loads(text)["benchmarks"][0]


def cifar(a, monitor):
    env = clean_env(OMP_NUM_THREADS="2", KMP_BLOCKTIME="123", LD_PRELOAD=" ".join(knobs.preloads("llvm", paths.LIBOMP)))
    cmd = program(a.build_dir, "--model=cifar_sgd", "--batch=64", "--workers=0", "--gap_ms=300", "--steps=20",
                  "--warmup=2")
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        mon = subprocess.run([monitor, f"--pid={p.pid}", f"--out={tmp}/m.csv", f"--summary_file={tmp}/m.txt"],
                             capture_output=True, text=True)
        out, err = p.communicate()
        if mon.returncode != 0 or p.returncode != 0:
            sys.exit(f"exact_figures: cifar: monitor {mon.returncode} {mon.stderr.strip()}, program {p.returncode}")
        shutil.copy(f"{tmp}/m.gaps.csv", os.path.join(a.out, "exact_cifar123.gaps.csv"))
        shutil.copy(f"{tmp}/m.txt", os.path.join(a.out, "exact_cifar123.summary.txt"))
    b = first_benchmark(out)
    with open(os.path.join(a.out, "exact_cifar123.program.txt"), "w") as f:
        f.write(f"{b['name']}\nstep_ms {b['step_ms']:.3f} residual_cpu_ms {b['residual_cpu_ms']:.3f} "
                f"residual_omp_ms {b['residual_omp_ms']:.3f} tail_ms {b['tail_ms']:.3f} "
                f"tail_ms_median {b['tail_ms_median']:.3f} (the program's own clocks, in-process)\n")
    print(f"cifar: wrote {a.out}/exact_cifar123.*")


def waits(path, main_tid, other_pid, t0_s, t1_s):
    """ms of waits in [t0, t1] (CLOCK_MONOTONIC s) by (main|threads, holder), the wait caused to the
    other copy, and {tid: {cpu: ms on it}}."""
    with open(path) as f:
        meta = dict(p.strip().partition("=")[::2] for p in f.readline().lstrip("#").split(";")[1:])
        lo = t0_s * 1e3 - float(meta["t0_mono_ms"])
        hi = t1_s * 1e3 - float(meta["t0_mono_ms"])
        by, caused, cpus = {}, 0.0, {}
        for r in csv.DictReader(f):
            ms = max(0.0, min(float(r["end_us"]) / 1e3, hi) - max(float(r["start_us"]) / 1e3, lo))
            if ms <= 0:
                continue
            if r["kind"] == "wait":
                holder = "other_copy" if int(r["holder_pid"]) == other_pid else r["holder"]
                key = ("main" if int(r["tid"]) == main_tid else "threads", holder)
                by[key] = by.get(key, 0.0) + ms
            elif r["kind"] == "caused" and int(r["pid"]) == other_pid:
                caused += ms
            elif r["kind"] == "run":
                on = cpus.setdefault(int(r["tid"]), {})
                on[r["cpu"]] = on.get(r["cpu"], 0.0) + ms
    return by, caused, cpus


def pair_round(a, monitor, rnd, tmp):
    """One round: the rows of both copies."""
    env = clean_env(OMP_NUM_THREADS="2")
    cmd = program(a.build_dir, "--model=mnist_adadelta", "--batch=64", "--workers=0", "--gap_ms=0", "--steps=10",
                  "--warmup=2")
    alone = first_benchmark(subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout)

    def together(watch):
        bar = os.path.join(tmp, f"barrier-{rnd}-{watch}")
        with open(bar, "wb") as f:
            f.write(b"\0\0\0\0")
        procs = [subprocess.Popen(cmd + [f"--barrier={bar}:2"], env=env, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True) for _ in range(2)]
        mons = [subprocess.Popen([monitor, f"--pid={p.pid}", f"--out={tmp}/r{rnd}-c{i}.csv", "--force",
                                  f"--summary_file={tmp}/r{rnd}-c{i}.txt"]) for i, p in enumerate(procs)] if watch else []
        res = [first_benchmark(p.communicate()[0]) for p in procs]
        for m in mons:
            m.wait()
        return [p.pid for p in procs], res

    _, plain = together(False)
    pids, res = together(True)
    holders = ("same_process", "other_copy", "other", "monitor", "idle", "unknown")
    rows = []
    for i in range(2):
        r = res[i]
        n = r["iterations"]
        by, caused, cpus = waits(f"{tmp}/r{rnd}-c{i}.intervals.csv", pids[i], pids[1 - i], r["timed_start_s"],
                                 r["timed_end_s"])
        row = {"round": rnd, "copy": i, "alone_step_ms": round(alone["step_ms"], 3),
               "pair_step_ms_unwatched": round(plain[i]["step_ms"], 3), "pair_step_ms": round(r["step_ms"], 3),
               "slowdown": round(r["step_ms"] / alone["step_ms"], 2)}
        for who in ("main", "threads"):
            for h in holders:
                row[f"{who}_wait_behind_{h}_ms_per_step"] = round(by.get((who, h), 0.0) / n, 3)
        row["caused_other_copy_ms_per_step"] = round(caused / n, 3)
        row["cpus_ms"] = " ".join(f"{'main' if tid == pids[i] else tid}:" + "/".join(
            f"cpu{c}={v:.0f}" for c, v in sorted(on.items())) for tid, on in sorted(cpus.items()))
        rows.append(row)
    return rows


def pair(a, monitor):
    path = os.path.join(a.out, "exact_pair.csv")
    with tempfile.TemporaryDirectory() as tmp, open(path, "w", newline="") as f:
        writer = None
        for rnd in range(a.rounds):
            for row in pair_round(a, monitor, rnd, tmp):
                if writer is None:
                    writer = csv.DictWriter(f, list(row), lineterminator="\n")
                    writer.writeheader()
                writer.writerow(row)
                print(", ".join(f"{k} {v}" for k, v in row.items() if k in ("round", "copy") or v not in (0, 0.0)),
                      flush=True)
    print(f"pair: wrote {path}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", help="cifar, pair (default: both)")
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--out", default=os.path.join(REPO, "results", "monitor"))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    a.what = a.what or ["cifar", "pair"]
    if set(a.what) - {"cifar", "pair"}:
        ap.error(f"unknown: {' '.join(set(a.what) - {'cifar', 'pair'})} (cifar, pair)")
    monitor = os.path.join(a.build_dir, "src", "monitor", "threadburn_monitor")
    os.makedirs(a.out, exist_ok=True)
    if "cifar" in a.what:
        cifar(a, monitor)
    if "pair" in a.what:
        pair(a, monitor)


if __name__ == "__main__":
    sys.exit(main())
