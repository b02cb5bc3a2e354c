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
maximum tail over the steps), give or take the run-queue wait measured for the process's threads around the windows: a spinning worker
that waits for a core at the end of its blocktime gets it back only to go
to sleep (its last row is then under the threshold, the tail short: 108 ms
for b = 200 seen with the machine's load at 4.7 on 2 cores), and a main
thread that waits for a core between the update's last region (where the
spin begins) and its `update_end` logs the mark late, the tail shorter by
as much. Both modes measure those waits per window (the main thread's in
the 50 ms before the mark, the others' from b / 2 after it to 50 ms after
b + 5 %): the exact mode from its intervals file's wait rows, the /proc mode
from the threads' schedstat run delay, read beside the monitor every 5 ms
by this script; the bounds take the largest window's.
On a quiet machine the waits are near 0 and the bound is the 5 %. What the tail is known to: the
recording's row (--period_us=1000: 1 ms) and the mark's ms (Python's logging
truncates to the ms), 2 ms in all, 1 % of b = 200. Before the window ended
at the marking thread's wake, both cases read the sleep's length, ~600 ms
(red whatever the allowance: the waits measured are tens of ms).
Every program is started from a cleared environment: the caller's OMP_*,
KMP_* or LD_PRELOAD cannot change it.
Exit 77 (skipped) without python3-torch or LLVM's libomp.
Usage: check_marks.py CASE --mode auto|proc --monitor BIN --libomp SO --repo DIR [--keep DIR]
"""
import argparse
import csv
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

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


def update_ends(log):
    """The unix ms of each update_end in the log (written in UTC: clean_env's TZ)."""
    out = []
    for line in open(log):
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) - \S+ - update_end\s*$", line)
        if m:
            t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
            out.append(int(t.timestamp()) * 1000 + int(m[2]))
    return out


def spans(m, b):
    """Where a wait shortens or lengthens the tail after the mark at m (unix ms):
    the marking thread's in the 50 ms before it (the mark logged late after
    the region where the spin began), the other threads' from b / 2 after it
    to 50 ms after b + 5 % (the spin's end)."""
    return (m - 50, m), (m + b / 2, m + (1 + TOLERANCE) * b + 50)


def exact_waits(intervals, marks, b):
    """Per mark: (the marking thread's lag, the other threads' wait at the end) in ms, from the intervals file."""
    with open(intervals) as f:
        meta = dict(p.strip().partition("=")[::2] for p in f.readline().lstrip("#").split(";")[1:])
        t0, pid = float(meta["t0_unix_ms"]), meta["pid"]
        waits = [[0.0, 0.0] for _ in marks]
        for r in csv.DictReader(f):
            if r["kind"] != "wait" or r["pid"] != pid:
                continue
            lo, hi = float(r["start_us"]) / 1000 + t0, float(r["end_us"]) / 1000 + t0
            for i, m in enumerate(marks):
                k = 0 if r["tid"] == pid else 1
                a, z = spans(m, b)[k]
                waits[i][k] += max(0.0, min(hi, z) - max(lo, a))
    return waits


class RunDelays:
    """The /proc mode's allowance, measured beside the monitor: every 5 ms the
    run delay (schedstat's run-queue wait, ns) summed over the threads of the
    monitor's child, so the wait in any span of the run is known to 5 ms."""

    def __init__(self, monitor_pid):
        self.monitor_pid, self.samples, self.done = monitor_pid, [], threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def child(self):
        try:
            with open(f"/proc/{self.monitor_pid}/task/{self.monitor_pid}/children") as f:
                kids = f.read().split()
            return kids[0] if kids else None
        except OSError:
            return None

    def run(self):
        pid, delays = None, {}
        while not self.done.wait(0.005):
            pid = pid or self.child()
            if not pid:
                continue
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                break  # the training ended
            for tid in tids:
                try:
                    with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                        delays[tid] = int(f.read().split()[1])
                except (OSError, IndexError, ValueError):
                    pass  # a thread gone meanwhile keeps its last reading
            main = delays.get(pid, 0)
            self.samples.append((time.time() * 1000, main / 1e6, (sum(delays.values()) - main) / 1e6))

    def stop(self):
        self.done.set()
        self.thread.join()

    def wait_ms(self, k, lo, hi):
        """Run-queue wait of the main thread (k = 0) or the others (1) between unix ms lo and hi."""
        before = [s[1 + k] for s in self.samples if s[0] <= lo]
        after = [s[1 + k] for s in self.samples if s[0] >= hi]
        check(before and after, f"no run-delay samples around {lo:.0f}..{hi:.0f}")
        return after[0] - before[-1]

    def waits(self, marks, b):
        return [[self.wait_ms(k, *spans(m, b)[k]) for k in (0, 1)] for m in marks]


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
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        delays = RunDelays(proc.pid)
        out_text, err_text = proc.communicate(timeout=240)
        delays.stop()
        p = subprocess.CompletedProcess(cmd, proc.returncode, out_text, err_text)
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
        marks = update_ends(log)
        check(len(marks) == STEPS, f"{len(marks)} update_end marks in the log, expected {STEPS}")
        if a.mode == "proc":
            waits = delays.waits(marks, b)
            how = "schedstat's run delay, read beside the monitor every 5 ms"
        else:
            waits = exact_waits(os.path.join(tmp, "run.intervals.csv"), marks, b)
            how = "the intervals file's wait rows"
        lag, end = max(w[0] for w in waits), max(w[1] for w in waits)
        print(f"process tail after update_end: mean {mean:.1f} ms, min {lo:.1f}, max {hi:.1f} (KMP_BLOCKTIME={b}); "
              f"window: {window}")
        print(f"waits ({how}), per window, ms: the main thread's before the mark, the others' at the spin's end: "
              + ", ".join(f"{w[0]:.1f}/{w[1]:.1f}" for w in waits))
        low, high = (1 - TOLERANCE) * b - lag - end, (1 + TOLERANCE) * b + end
        check(low <= lo and hi <= high,
              f"the process's tail after update_end ran {lo:.1f}..{hi:.1f} ms, expected {b} ms within "
              f"{TOLERANCE * 100:.0f} %, less the main thread's {lag:.1f} ms wait before the mark and give or take "
              f"the others' {end:.1f} ms at the spin's end: {low:.1f}..{high:.1f}, in every window")
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
