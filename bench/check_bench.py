#!/usr/bin/env python3
"""Runs one benchmark program for ctest and judges its JSON.

    check_bench.py [--expect NAME_RE:COUNTER:VALUE:TOL]...

TOL is relative (0.05 = 5 %) or absolute with a +- prefix (+-1.5). -- PROGRAM ARGS...

Fails (exit 1) when the program exits non-zero, when no benchmark ran, when any
benchmark reports an error other than "skipped: ...", when the context lacks the
effective settings, or when an --expect does not hold for every matching run.
Standard library only: runs under any python3.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

REQUIRED_CONTEXT = ["threadburn_schema_version", "omp_runtime", "omp_max_threads",
                    "omp_wait_policy", "aten_intra_op_threads", "ignored_knobs"]


def parse_expect(text):
    parts = text.rsplit(":", 3)
    if len(parts) != 4:
        raise argparse.ArgumentTypeError("--expect: NAME_RE:COUNTER:VALUE:TOL, got %r" % text)
    name_re, counter, value, tol = parts
    # "0.05": within 5 % of VALUE; "+-1.5": within 1.5 of VALUE (for VALUE 0).
    absolute = float(tol[2:]) if tol.startswith("+-") else float(tol) * abs(float(value))
    return re.compile(name_re), counter, float(value), absolute


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
        run = subprocess.run(cmd + ["--benchmark_out=" + out, "--benchmark_out_format=json"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(run.stdout)
        if run.returncode != 0:
            print("FAIL: %s exited %d" % (cmd[0], run.returncode))
            return 1
        with open(out) as f:
            doc = json.load(f)
    ctx = doc.get("context", {})
    failures = ["context lacks %s" % k for k in REQUIRED_CONTEXT if k not in ctx]
    print("context: runtime=%s max_threads=%s wait=%s blocktime=%s spincount=%s ignored=%s" % (
        ctx.get("omp_runtime"), ctx.get("omp_max_threads"), ctx.get("omp_wait_policy"),
        ctx.get("kmp_blocktime_ms"), ctx.get("gomp_spincount"), ctx.get("ignored_knobs")))
    runs = [b for b in doc.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]
    if not runs:
        failures.append("no benchmark ran")
    for b in runs:
        msg = b.get("error_message", "")
        if b.get("error_occurred") and not msg.startswith("skipped:"):
            failures.append("%s: error: %s" % (b["name"], msg))
    for name_re, counter, value, tol in args.expect:
        matched = [b for b in runs if name_re.search(b["name"]) and not b.get("error_occurred")]
        if not matched:
            failures.append("--expect %s matched no benchmark" % name_re.pattern)
        for b in matched:
            got = b.get(counter)
            ok = got is not None and abs(got - value) <= tol
            print("expect %s %s = %s, %g +- %g: %s" % (b["name"], counter, got, value, tol, "ok" if ok else "NO"))
            if not ok:
                failures.append("%s: %s = %s, expected %g +- %g" % (b["name"], counter, got, value, tol))
    for f in failures:
        print("FAIL: " + f)
    print("%d benchmarks, %d failures" % (len(runs), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
