"""threadburn_monitor's exact mode as a library: whether this machine allows
it, the command that records a command beside the preload probe, and the
run-queue figures read from its intervals file (docs/monitor.md, "The
intervals file"): each thread's waits by who held the CPU, by class of
thread, and the waits the command caused in other processes.

The intervals file: a first line `# threadburn intervals 1; ...`, then
kind,tid,pid,name,cpu,start_us,end_us,holder_tid,holder_pid,holder_name,holder
(kind: run, wait, caused, sleep, known, born, renamed, gone).
"""
import csv
import os
import subprocess
import tempfile

from . import paths

HOLDERS = ("same_process", "tree", "other", "idle", "monitor", "unknown")
PROBE_VARIABLES = ("LD_PRELOAD", "THREADBURN_PROBE_DIR")


def exact_available(build=None):
    """(True, "") where the monitor's exact mode is allowed, else (False, its one-line reason)."""
    program = paths.find_program("threadburn_monitor", build)
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([program, "--mode=exact", f"--out={tmp}/x.csv", f"--summary_file={tmp}/x.txt",
                            "--duration_s=0.01", "--", "true"], capture_output=True, text=True)
    if p.returncode == 0:
        return True, ""
    lines = p.stderr.strip().splitlines()
    return False, lines[-1].split(": error: ", 1)[-1] if lines else f"exit {p.returncode}"


def beside(cmd, env, stem, build=None):
    """(command, environment) that run cmd under the exact monitor, which
    writes stem.csv, stem.intervals.csv, stem.gaps.csv and its summary in
    stem.txt. The monitor itself runs without the probe (env's LD_PRELOAD and
    THREADBURN_PROBE_* go to cmd alone, through env(1))."""
    program = paths.find_program("threadburn_monitor", build)
    stem = paths.for_child(stem)
    own = {k: v for k, v in env.items() if k not in PROBE_VARIABLES and not k.startswith("THREADBURN_PROBE_")}
    passed = [f"{k}={v}" for k, v in env.items() if k not in own]
    return ([program, "--mode=exact", "--force", f"--out={stem}.csv", f"--summary_file={stem}.txt", "--",
             "/usr/bin/env", *passed, *cmd], own)


def read(path):
    """(first line's key=value pairs, rows as dicts with start and end in ms)."""
    with open(path, newline="") as f:
        first = f.readline()
        meta = dict(p.strip().partition("=")[::2] for p in first.lstrip("#").split(";")[1:])
        rows = []
        for r in csv.DictReader(f):
            r["start_ms"] = float(r["start_us"]) / 1000
            r["end_ms"] = float(r["end_us"]) / 1000
            rows.append(r)
    return meta, rows


def figures(path, classes):
    """The run-queue figures of a recording, in ms. classes: {tid: class of
    thread} (the probe's); a thread it does not name is `other`. Returns
    {"wait": {class: {holder: ms}}, "caused": ms, "caused_by": {"name (pid)": ms}}."""
    _, rows = read(path)
    wait, caused, caused_by = {}, 0.0, {}
    for r in rows:
        ms = r["end_ms"] - r["start_ms"]
        if r["kind"] == "wait":
            by = wait.setdefault(classes.get(int(r["tid"]), "other"), dict.fromkeys(HOLDERS, 0.0))
            by[r["holder"]] = by.get(r["holder"], 0.0) + ms
        elif r["kind"] == "caused":
            caused += ms
            key = f"{r['name'] or '?'} ({r['pid']})"
            caused_by[key] = caused_by.get(key, 0.0) + ms
    return {"wait": wait, "caused": caused, "caused_by": caused_by}


def counters(fig):
    """The figures as counters a run's row carries (in extra_counters):
    exact_wait_ms and exact_wait_behind_<holder>_ms over every class but
    the probe's sampler (as the probe's wait_ms), exact_wait_<class>_ms,
    caused_wait_ms."""
    measured = [by for cls, by in fig["wait"].items() if cls != "sampler"]
    out = {"exact_wait_ms": sum(sum(by.values()) for by in measured)}
    for h in HOLDERS:
        out[f"exact_wait_behind_{h}_ms"] = sum(by.get(h, 0.0) for by in measured)
    for cls, by in sorted(fig["wait"].items()):
        out[f"exact_wait_{cls}_ms"] = sum(by.values())
    out["caused_wait_ms"] = fig["caused"]
    return {k: round(v, 3) for k, v in out.items()}


def exists(stem):
    return os.path.exists(stem + ".intervals.csv")
