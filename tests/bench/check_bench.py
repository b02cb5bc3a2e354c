#!/usr/bin/python3
"""Runs one benchmark program for ctest (label bench) and judges its JSON.

    check_bench.py [--expect 'NAME_RE :: EXPRESSION']... -- PROGRAM ARGS...

EXPRESSION is a Python expression over the counters of every benchmark whose
name matches NAME_RE (e.g. 'residual_cpu_ms + residual_wait_ms'); it must be
true for each of them, and at least one must match. Beside the counters, an
expression may read taken_ms_per_step: the CPU time the kernel counted as taken
from every CPU's tasks (interrupts, soft interrupts, steal: a hypervisor running
another guest on this one's CPU) between the benchmark's first timed step's
start and its last step's end, per timed step. A spinning thread loses that
time from its CPU clock without waiting in a run queue, so a check that adds a
spinner's CPU and wait adds this too (0 on a host that hides its steal).

Fails (exit 1) when the program exits non-zero, when no benchmark ran, when
any benchmark reports an error other than "skipped: ...", when the context
lacks the settings in force, or when an --expect does not hold.
Standard library only (and check_monitor's taken_ms beside it).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time

from check_monitor import taken_ms

STAT_PERIOD_S = 0.01


class TakenLog:
    """Reads taken_ms() every STAT_PERIOD_S with CLOCK_MONOTONIC (the clock of
    the benchmarks' timed_start_s / timed_end_s) while a program runs."""

    def __init__(self):
        self.samples = [(time.monotonic(), taken_ms())]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.wait(STAT_PERIOD_S):
            self.samples.append((time.monotonic(), taken_ms()))

    def stop(self):
        self._stop.set()
        self._thread.join()
        self.samples.append((time.monotonic(), taken_ms()))

    def between(self, start_s, end_s):
        """Taken in a window that holds [start_s, end_s]: from the last read at
        or before its start to the first at or after its end (never less)."""
        before = [v for t, v in self.samples if t <= start_s] or [self.samples[0][1]]
        after = [v for t, v in self.samples if t >= end_s] or [self.samples[-1][1]]
        return after[0] - before[-1]

REQUIRED_CONTEXT = ["threadburn_schema_version", "omp_runtime", "omp_max_threads", "omp_wait_policy",
                    "gomp_spincount_in_force", "kmp_blocktime_ms", "aten_intra_op_threads",
                    "ignored_knobs", "overridden_knobs"]


def parse_expect(text):
    name_re, sep, expr = text.partition("::")
    if not sep:
        raise argparse.ArgumentTypeError(f"--expect: 'NAME_RE :: EXPRESSION', got {text!r}")
    return re.compile(name_re.strip()), expr.strip(), compile(expr.strip(), "--expect", "eval")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--expect", action="append", type=parse_expect, default=[])
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args(argv)
    cmd = [c for c in args.command if c != "--"]
    if not cmd:
        ap.error("no program given")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "out.json")
        taken = TakenLog()
        run = subprocess.run(cmd + ["--benchmark_out=" + out, "--benchmark_out_format=json"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        taken.stop()
        print(run.stdout)
        if run.returncode != 0:
            print(f"FAIL: {cmd[0]} exited {run.returncode}")
            return 1
        with open(out) as f:
            doc = json.load(f)
    ctx = doc.get("context", {})
    failures = [f"context lacks {k}" for k in REQUIRED_CONTEXT if k not in ctx]
    runs = [b for b in doc.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
    if not runs:
        failures.append("no benchmark ran")
    for b in runs:
        msg = b.get("error_message", "")
        if b.get("error_occurred") and not msg.startswith("skipped:"):
            failures.append(f"{b['name']}: error: {msg}")
    for name_re, text, code in args.expect:
        matched = [b for b in runs if name_re.search(b["name"]) and not b.get("error_occurred")]
        if not matched:
            failures.append(f"--expect {name_re.pattern}: matched no benchmark")
        for b in matched:
            counters = {k: v for k, v in b.items() if isinstance(v, (int, float))}
            if "timed_start_s" in counters and counters.get("iterations"):
                counters["taken_ms_per_step"] = taken.between(
                    counters["timed_start_s"], counters["timed_end_s"]) / counters["iterations"]
            try:
                ok = bool(eval(code, {"abs": abs, "min": min, "max": max}, counters))
            except NameError as e:
                ok, text = False, f"{text} ({e})"
            shown = ", ".join(f"{k}={counters[k]:.4g}" for k in sorted(counters) if re.search(rf"\b{k}\b", text))
            print(f"expect {b['name']}: {text}   [{shown}]: {'ok' if ok else 'NO'}")
            if not ok:
                failures.append(f"{b['name']}: {text} does not hold [{shown}]")
    for f in failures:
        print("FAIL: " + f)
    print(f"{len(runs)} benchmarks, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
