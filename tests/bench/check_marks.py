#!/usr/bin/python3
"""Live known answers of threadburn_monitor --marks (stdlib only): the burn
after a mark is the burn, not the program's next step.

A seed-style training (examples/sleep_step_sleep.py: forward + backward, a
sleep, `update_start`, optimizer.step() + zero_grad(), `update_end`, a
sleep, `sleep_end`, in Python's logging format) under LLVM's libomp with 2
threads and KMP_BLOCKTIME=b: after each update the one OpenMP worker spins
b ms of wall time, then sleeps; the main thread logs `update_end` and
sleeps too. So the process's tail after `update_end` is the worker's: b,
in every window. Cases:

  seed          the training as is: the main thread wakes from its sleep and
                logs `sleep_end` at once, then starts the next step
  work_at_mark  the main thread works --work_ms of its own CPU (pure Python,
                no OpenMP: a checkpoint, a metric) at the end of that sleep,
                right before `sleep_end`: its next action, which a window
                "until the next mark" read as a tail of the whole sleep (red
                before the window ended at the marking thread's wake)

The bound: within 5 % of b in every window (the [process] row's minimum and
maximum tail over the steps). What the tail is known to: the recording's
row (--period_us=1000: 1 ms) and the mark's ms (Python's logging truncates
to the ms), 2 ms in all, 1 % of b = 200; the worker starts its spin when
the update's last region ends, a few us before the program logs
`update_end`. The rest of the 5 % is the runtime's own slack (it reads its
clock every so many spins) and a wait for a core when the spin ends with a
core busy (scripts/soak.sh). Every program is started from a cleared
environment: the caller's OMP_*, KMP_* or LD_PRELOAD cannot change it.
Exit 77 (skipped) without python3-torch or LLVM's libomp.
Usage: check_marks.py CASE --mode auto|proc --monitor BIN --libomp SO --repo DIR [--keep DIR]
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_monitor import check  # noqa: E402  (the live checks' one way to fail)

SKIP = 77
PY = "/usr/bin/python3"
BLOCKTIME_MS = 200
SLEEP_S = 0.6
STEPS = 4
WORK_MS = 30
PERIOD_US = 1000
TOLERANCE = 0.05


def clean_env(**extra):
    """A cleared environment: what a program needs to start, and the test's own settings."""
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"), "TZ": "UTC", "LC_ALL": "C.UTF-8"}
    env.update(extra)
    return env


def tails_table(err, event):
    """(windows, the window's description, {tid or [process]: {column: value}}) of the table after `event`."""
    m = re.search(rf"^after '{event}' \((\d+) events recorded; window = (.*?)\):\n(.*?)(?:\n(?! )|\Z)", err,
                  re.S | re.M)
    check(m, f"no table after '{event}' in the summary:\n{err}")
    lines = m[3].splitlines()
    columns = lines[0].split()[2:]  # after tid, name
    rows = {}
    for line in lines[1:]:
        f = line.split()
        rows[f[0]] = dict(zip(columns, (float(x) for x in f[-len(columns):])))
    return int(m[1]), m[2], rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=("seed", "work_at_mark"))
    ap.add_argument("--mode", choices=("auto", "proc"), default="auto")
    ap.add_argument("--monitor", required=True)
    ap.add_argument("--libomp", default="")
    ap.add_argument("--repo", required=True)
    ap.add_argument("--keep", help="keep the files in this folder")
    a = ap.parse_args()
    if not a.libomp or not os.path.exists(a.libomp):
        print(f"SKIP: no LLVM libomp ({a.libomp!r})")
        sys.exit(SKIP)
    if subprocess.run([PY, "-c", "import torch"], capture_output=True, env=clean_env()).returncode != 0:
        print("SKIP: no python3-torch")
        sys.exit(SKIP)
    tmp = a.keep or tempfile.mkdtemp(prefix="check_marks.")
    os.makedirs(tmp, exist_ok=True)
    try:
        work = WORK_MS if a.case == "work_at_mark" else 0
        log, out = os.path.join(tmp, "ckpt.log"), os.path.join(tmp, "run.csv")
        script = os.path.join(a.repo, "examples", "sleep_step_sleep.py")
        cmd = [a.monitor, f"--mode={a.mode}", f"--period_us={PERIOD_US}", "--force", f"--out={out}", f"--marks={log}",
               "--", PY, script, f"--steps={STEPS}", f"--sleep_s={SLEEP_S}", "--threads=2", f"--log={log}",
               f"--work_ms={work}"]
        env = clean_env(LD_PRELOAD=a.libomp, KMP_BLOCKTIME=str(BLOCKTIME_MS), OMP_NUM_THREADS="2")
        print("$ " + " ".join(f"{k}={v}" for k, v in env.items() if k not in ("PATH", "HOME")) + " " + " ".join(cmd))
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
        sys.stdout.write(p.stdout + p.stderr)
        check(p.returncode == 0, f"the monitor (and the training) returned {p.returncode}")
        if a.mode == "proc":
            check("/proc mode" in p.stderr, "not the /proc mode")
        n, window, rows = tails_table(p.stderr, "update_end")
        check(n == STEPS, f"{n} windows after update_end, expected {STEPS}")
        check("[process]" in rows, "no [process] row")
        r = rows["[process]"]
        mean, hi = r["mean_tail_ms"], r["max_tail_ms"]
        lo = r.get("min_tail_ms", min(mean, hi))  # (a monitor before min_tail_ms: the mean)
        b = BLOCKTIME_MS
        print(f"process tail after update_end: mean {mean:.1f} ms, min {lo:.1f}, max {hi:.1f} (KMP_BLOCKTIME={b}); "
              f"window: {window}")
        check(lo >= (1 - TOLERANCE) * b and hi <= (1 + TOLERANCE) * b,
              f"the process's tail after update_end ran {lo:.1f}..{hi:.1f} ms, expected {b} ms within "
              f"{TOLERANCE * 100:.0f} % in every window")
        if work:
            # The main thread woke >= WORK_MS before each sleep_end: every window ends at its wake.
            m = re.search(r"(\d+) of (\d+) windows ended there", window)
            check(m and m[1] == m[2] == str(STEPS), f"expected all {STEPS} windows to end at the main thread's wake: "
                  f"{window}")
        print("OK")
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
