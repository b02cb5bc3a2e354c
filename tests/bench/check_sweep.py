#!/usr/bin/env python3
"""ctest -L bench: runs threadburn sweep on tests/bench/smoke_grid.toml against the
built programs into a temporary CSV and checks every row: ok, except CUDA rows,
which must be ok on a GPU machine and 'skipped' on one without.

    check_sweep.py BUILD_DIR
"""
import csv
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)


def main(build_dir):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "smoke.csv")
        run = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "sweep.py"),
                              os.path.join(HERE, "smoke_grid.toml"), "--build-dir", build_dir,
                              "--out", out, "--no-plot", "--seed", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        print(run.stdout)
        if run.returncode != 0:
            print(f"FAIL: sweep exited {run.returncode}")
            return 1
        with open(out, newline="") as f:
            rows = list(csv.DictReader(f))
    failures = []
    for r in rows:
        want = {"ok"} if r["device"] == "cpu" else {"ok", "skipped"}
        if r["status"] not in want:
            failures.append(f"{r['benchmark']} ({r['study']}): {r['status']} {r['reason']}")
    studies = {r["study"] for r in rows}
    for s in ("optimizer_procs", "runtime_kernels", "loader_tbb", "cuda_skip"):
        if s not in studies:
            failures.append(f"no rows for study {s}")
    procs2 = [r for r in rows if r["processes"] == "2"]
    if sorted({r["proc_index"] for r in procs2}) != ["0", "1"]:
        failures.append("processes = 2 did not give one row per copy")
    for f in failures:
        print("FAIL: " + f)
    print(f"{len(rows)} rows, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
