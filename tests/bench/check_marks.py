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

The bound: the tail is the worker's spin, within 5 % of b (+ 2 ms: the
recording's 1 ms row, --period_us=1000, and the mark's ms, which Python's
logging truncates), in every window (the [process] row's minimum and
maximum over the steps), where the spin is measured apart from the rows
and the window rule under test: the exact mode from its intervals file (the
end of the other threads' last interval on a CPU before the next mark),
the /proc mode from the threads' schedstat, read beside the monitor every
5 ms by this script (the last sample in which their CPU + run-queue wait
grew: on a CPU or waiting for one, the spin goes on). Why not b itself:
LLVM times its blocktime in TSC ticks per ms that it measures once at
start, which a loaded machine can upset (seen: all four spins of one
process 107-111 ms for b = 200, no wait to explain it), and a worker that
waits for a core when the blocktime is up spins on until it gets one. The
lower bound also gives up the worker's wait for a core in the spin: a
starved spinner burns under the threshold (tails of 1 ms seen with the
worker waiting 105 ms, the machine's load at 4-5 on 2 cores). A spin
through 90 % of the window fails too: such a run cannot tell the burn from
the next step. Before the window ended at the marking thread's wake, both
cases read the sleep's length or more (601-910 ms against spins of
199-208 ms), red whatever the load.
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


# Whether the interpreter has torch, asked of its import system without importing it: an import
# is 1.5-2.5 s of CPU here, which the case's own run pays again (a torch that is there but does
# not import fails the case's run instead of skipping it).
HAS_TORCH = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"


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


def update_windows(log):
    """(update_end, the next mark) in unix ms for each update_end of the log (written in UTC: clean_env's TZ)."""
    marks = []
    for line in open(log):
        m = re.match(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) - \S+ - (\S+)\s*$", line)
        if m:
            t = datetime.datetime.strptime(m[1], "%Y-%m-%d %H:%M:%S").replace(tzinfo=datetime.timezone.utc)
            marks.append((int(t.timestamp()) * 1000 + int(m[2]), m[3]))
    out = []
    for i, (t, event) in enumerate(marks):
        if event == "update_end":
            later = [u for u, _ in marks[i + 1:] if u > t]
            out.append((t, later[0] if later else t + 10 ** 6))
    return out


def exact_figures(intervals, windows):
    """Per window, from the intervals file, in ms: [the worker's spin: from the mark to the end of the other
    threads' last interval on a CPU before the next mark (5 ms before it: the next step's regions come
    after it), their run-queue wait from the mark to 50 ms after that end, 0: the spin known exactly]."""
    with open(intervals) as f:
        meta = dict(p.strip().partition("=")[::2] for p in f.readline().lstrip("#").split(";")[1:])
        t0, pid = float(meta["t0_unix_ms"]), meta["pid"]
        spins, waits = [0.0] * len(windows), [[] for _ in windows]
        for r in csv.DictReader(f):
            if r["kind"] not in ("wait", "run") or r["pid"] != pid or r["tid"] == pid:
                continue
            lo, hi = float(r["start_us"]) / 1000 + t0, float(r["end_us"]) / 1000 + t0
            for i, (m, n) in enumerate(windows):
                if lo < n - 5 and hi > m:
                    if r["kind"] == "run":
                        spins[i] = max(spins[i], min(hi, n - 5) - m)
                    else:
                        waits[i].append((max(lo, m), min(hi, n - 5)))
    return [[spins[i], sum(max(0.0, min(z, windows[i][0] + spins[i] + 50) - a) for a, z in waits[i]), 0.0]
            for i in range(len(windows))]


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
        pid, delays, cpus = None, {}, {}
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
                        fields = f.read().split()
                        delays[tid], cpus[tid] = int(fields[1]), int(fields[0])
                except (OSError, IndexError, ValueError):
                    pass  # a thread gone meanwhile keeps its last reading
            main, main_cpu = delays.get(pid, 0), cpus.get(pid, 0)
            self.samples.append((time.time() * 1000, main / 1e6, (sum(delays.values()) - main) / 1e6,
                                 (sum(cpus.values()) - main_cpu) / 1e6))

    def stop(self):
        self.done.set()
        self.thread.join()

    def wait_ms(self, k, lo, hi):
        """Run-queue wait of the main thread (k = 0) or the others (1) between unix ms lo and hi."""
        before = [x[1 + k] for x in self.samples if x[0] <= lo]
        after = [x[1 + k] for x in self.samples if x[0] >= hi]
        check(before and after, f"no run-delay samples around {lo:.0f}..{hi:.0f}")
        return after[0] - before[-1]

    def spin(self, m, n):
        """(ms from m to the last sample before n - 5 in which the other threads were on a CPU or waiting
        for one (their CPU + run delay grew by more than 0.05 of the interval), that sample's interval):
        the spin ended within that interval before it."""
        last, interval = 0.0, 0.0
        for (t0, _, d0, c0), (t1, _, d1, c1) in zip(self.samples, self.samples[1:]):
            if m < t1 < n - 5 and (c1 + d1) - (c0 + d0) > 0.05 * (t1 - t0):
                last, interval = t1 - m, t1 - max(t0, m)
        return last, interval

    def figures(self, windows):
        """Per window: [the spin, the other threads' wait from the mark to 50 ms after its end, its interval]."""
        out = []
        for m, n in windows:
            spin, interval = self.spin(m, n)
            out.append([spin, self.wait_ms(1, m, m + spin + 50), interval])
        return out


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
    if subprocess.run([PY, "-c", HAS_TORCH], capture_output=True, env=clean_env()).returncode != 0:
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
        windows = update_windows(log)
        check(len(windows) == STEPS, f"{len(windows)} update_end marks in the log, expected {STEPS}")
        if a.mode == "proc":
            figs = delays.figures(windows)
            how = "schedstat read beside the monitor every 5 ms"
        else:
            figs = exact_figures(os.path.join(tmp, "run.intervals.csv"), windows)
            how = "the intervals file"
        print(f"process tail after update_end: mean {mean:.1f} ms, min {lo:.1f}, max {hi:.1f} (KMP_BLOCKTIME={b}); "
              f"window: {window}")
        print(f"per window ({how}), ms: the worker's spin from the mark (known to) / its wait for a core in it: "
              + ", ".join(f"{f[0]:.1f} ({f[2]:.1f}) / {f[1]:.1f}" for f in figs))
        spins = [f[0] for f in figs]
        off = [x for x in spins if abs(x - b) > TOLERANCE * b]
        if off:
            print(f"note: the runtime itself spun {', '.join(f'{x:.0f}' for x in off)} ms, not {b} +- 5 % (LLVM "
                  "times its blocktime in TSC ticks per ms that it measures once at start, which a loaded machine "
                  "can upset; or it waited for a core when the blocktime was up): the tails are checked against "
                  "the spins it did")
        shortest = min(n - m for m, n in windows)
        check(max(spins) < 0.9 * shortest, f"the runtime spun {max(spins):.0f} ms, through the window "
              f"({shortest} ms): this run cannot tell the burn from the next step")
        tol = TOLERANCE * b + 2  # + the row and the mark's ms
        low = min(f[0] - f[1] - f[2] for f in figs) - tol
        high = max(spins) + tol
        check(low <= lo and hi <= high,
              f"the process's tail after update_end ran {lo:.1f}..{hi:.1f} ms, expected the worker's spin "
              f"({min(spins):.1f}..{max(spins):.1f} ms; {b} ms asked) within 5 % of {b} + 2 ms, less its wait "
              f"for a core and the spin's sampling interval: {low:.1f}..{high:.1f}, in every window")
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
