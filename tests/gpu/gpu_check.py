#!/usr/bin/python3
"""The device check's judge (scripts/gpu_check.sh): reads what a step left
(its programs' output, run.csv, the probe's files, a tune's or a sweep's
CSV) and appends one row per check to the checks file, tab-separated:
step, check, figure, bound, PASS|FAIL|SKIP. Each row is printed as it is
decided; `table` prints them all last and exits 1 when one failed.

    gpu_check.py ROWS STEP KIND [options]     (KIND: preflight policy nvml waits inrun gputune busy classes
                                               sweep skip)
    gpu_check.py ROWS - table [--steps FILE]

The bounds, and why (docs/cuda.md, "The device check"):
  policy   spin: the main thread runnable (its CPU + run-queue wait) >= 0.9 of the
           loop's wall (it polls through every wait; on a host with idle cores its
           CPU/wall alone is about 1, printed beside); blocking_sync: the process's
           CPU <= 0.1 of the wall (each step queues ~10 ms of GPU work for well
           under 1 ms of launches). The policy in force (run.csv, and the driver's
           read-back in the program) is the one asked.
  nvml     NVML's samples within the program's alternating window average its own
           busy share of the window (busy_ms / window_ms, about 0.5) to within
           0.1 + 2 sample periods / the window; run.csv's gpu_busy_share, over the
           process's life, lies between busy_ms / the life and busy_ms / the time
           since its first CUDA call (NVML may keep no sample before a context
           exists; the GPU idled then either way), with the same tolerance.
  waits    a sync-bound training (steps of ~24 ms of GPU work, each ending in
           .item()) under `threadburn run`: the main thread inside the driver's waits
           >= 0.5 of the steady phase (main_sync_wait_ms / steady_ms: the steps are
           almost all wait; the startup is not in it); its CPU inside them >= 0.8 of
           their time under the driver's default policy, which spins (main_sync_cpu_ms,
           or that plus the main thread's run-queue wait where other processes took
           the core, as the policy rows); advice exactly sync-bound, with the CPU
           blocking_sync would save quoted. A launch-bound one (thousands of tiny
           kernels a step, the host's own work between them): advice exactly
           host-bound.
  inrun    `tune --in-run --apply` of the sync-bound training: CPU per wait in the
           cuda-blocking_sync blocks over the plain blocks (medians) <= 0.2: the driver
           honoured a live cuCtxSetFlags (a blocking wait costs ~0.03 of its time in
           CPU on an H200, a spinning one all of it; at 0.2 most of the spin is gone);
           the verdict CHANGE to cuda-blocking_sync where it did, keep or undecided
           where it did not; "decided in one run" said before the program's end, which
           it waits for (exit 0).
  gputune  `tune` of a short sync-bound training (plain alone in the points file): the
           CUDA wait policies added after round 1, each race row's policy in force its
           own, every run ok; judged on the steady phase (time_metric steady_ms, the
           startup's median set); the verdict a change to cuda-blocking_sync, keep or
           undecided, never a change to a setting slower than plain by more than the
           5 % margin; the tune's wall time <= 300 s (its budget is fitted to the
           step's time).
  classes  present and sane: a pin-memory thread's CPU > 0, a thread of class cuda,
           >= 2 worker processes with CPU > 0, 0 < main_core_share <= 1.05,
           0 <= gpu_busy_share <= 1 with a GPU sampled.
Standard library only.
"""
import argparse
import csv
import glob
import json
import os
import re
import sys

SPIN_RUNNABLE_MIN = 0.9
BLOCKING_CPU_MAX = 0.1
NVML_TOL = 0.1
CORE_SHARE_MAX = 1.05
POLICIES = ("spin", "yield", "blocking_sync")
WAIT_SHARE_MIN = 0.5      # waits: the main thread's share of the steady phase inside the driver's waits
SPIN_CPU_MIN = 0.8        # waits: CPU inside the waits per their time under a spinning policy
LIVE_CPU_RATIO_MAX = 0.2  # inrun: CPU per wait, cuda-blocking_sync blocks over plain blocks
TIME_MARGIN = 0.05        # gputune: a change slower than plain by more than this fails
TUNE_WALL_MAX_S = 300     # gputune: the tune's wall time


class Rows:
    """The checks file: one row per check, printed as it is added."""

    def __init__(self, path, step):
        self.path, self.step, self.failed = path, step, False

    def add(self, check, figure, bound, verdict):
        if verdict is True or verdict is False:
            verdict = "PASS" if verdict else "FAIL"
        self.failed |= verdict == "FAIL"
        clean = [str(x).replace("\t", " ").replace("\n", " ") for x in (self.step, check, figure, bound, verdict)]
        with open(self.path, "a") as f:
            f.write("\t".join(clean) + "\n")
        print(f"  {verdict:<4}  {self.step}: {check}: {figure} (bound: {bound})", flush=True)


def said(log, prefix):
    """The key=value pairs of the last line of `log` starting with `prefix:` ({} without one)."""
    found = {}
    for line in read_text(log).splitlines():
        if line.startswith(prefix + ":") and "=" in line:
            found = dict(m.groups() for m in re.finditer(r"(\w+)=(\S+)", line))
    return found


def read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def last_line(path):
    lines = [ln for ln in read_text(path).splitlines() if ln.strip()]
    return lines[-1][:200] if lines else "no output"


def fmt(x):
    """A figure for a row: 4 significant digits, "none" without a value."""
    if not isinstance(x, float):
        return "none" if x is None else str(x)
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.4g}"


def number(value):
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return None if x != x else x  # NaN: no value


def run_row(run_dir):
    """run.csv's row ({} without one)."""
    try:
        with open(os.path.join(run_dir, "run.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError:
        return {}
    return rows[0] if rows else {}


def main_summary(run_dir):
    """The probe's summary of the run's main process: the one that sampled a
    GPU, else the one that ran longest (None without one)."""
    found = []
    for path in glob.glob(os.path.join(run_dir, "probe-*.json")):
        try:
            with open(path) as f:
                s = json.load(f)
        except (OSError, ValueError):
            continue
        s["_path"] = path
        found.append(s)
    if not found:
        return None
    return max(found, key=lambda s: (bool(s.get("gpus")), s.get("counters", {}).get("wall_ms", 0)))


def skipped(rows, log, what):
    """A program that skipped (exit 77, "SKIP:" said): one SKIP row; True then."""
    text = read_text(log)
    m = re.search(r"SKIP: (.*)", text)
    if m:
        rows.add(what, m.group(1)[:160], "needs a CUDA device", "SKIP")
    return bool(m)


# --- the steps -----------------------------------------------------------------------------------------------------

def kind_preflight(rows, a):
    """The host's facts (key=value files the shell wrote) to the summary; a CUDA device is the check."""
    facts = {}
    for name in ("host", "smi", "torch"):
        for line in read_text(os.path.join(a.dir, name + ".txt")).splitlines():
            k, sep, v = line.partition("=")
            if sep:
                facts[k.strip()] = v.strip()
    with open(os.path.join(a.dir, "facts.txt"), "w") as f:
        f.write("".join(f"{k}: {v}\n" for k, v in facts.items()))
    for k, v in facts.items():
        print(f"  {k}: {v}")
    name = facts.get("gpu_name") or facts.get("torch_device_name") or ""
    with open(os.path.join(a.dir, "gpu_tag"), "w") as f:
        f.write(gpu_tag(name, a.mode) + "\n")
    if a.mode == "stand-in":
        rows.add("CUDA device", f"stand-in driver and NVML ({a.stand_in_dir})", "a GPU on a lent host", "SKIP")
        return
    ok = facts.get("torch_cuda_available") == "True"
    rows.add("CUDA device", f"{name or 'none'}; driver {facts.get('driver', '?')}; torch {facts.get('torch', '?')} "
             f"(CUDA {facts.get('torch_cuda', '?')}), cuda available {facts.get('torch_cuda_available', '?')}; "
             f"{facts.get('cpus', '?')} CPUs", "torch.cuda.is_available()", ok)


def gpu_tag(name, mode):
    """h100, h200, a100, ...: the first word of the GPU's name that holds a digit, before any '-'."""
    if mode == "stand-in":
        return "stand-in"
    for word in name.lower().replace("nvidia", " ").split():
        if any(c.isdigit() for c in word):
            return re.sub(r"[^a-z0-9]", "", word.split("-")[0]) or "gpu"
    return "gpu"


def kind_policy(rows, a):
    """One run of sync_loop.py under a policy: its figures against the bound, what was in force."""
    what = f"{a.how} {a.policy}"
    if skipped(rows, a.log, what):
        return
    s = said(a.log, "sync_loop")
    if not s:
        rows.add(what, f"no sync_loop line ({last_line(a.log)})", "the program's figures", False)
        return
    cpu, runnable = float(s["cpu_per_wall"]), float(s["runnable_per_wall"])
    figures = (f"CPU/wall {cpu:.3f}, main thread runnable/wall {runnable:.3f} "
               f"({s['steps']} steps of {s['matmuls_per_step']} x {float(s['step_ms']) / int(s['matmuls_per_step']):.2f} ms)")
    if a.policy == "spin":
        rows.add(f"{what}: loop", figures, f"runnable/wall >= {SPIN_RUNNABLE_MIN}", runnable >= SPIN_RUNNABLE_MIN)
    else:
        rows.add(f"{what}: loop", figures, f"CPU/wall <= {BLOCKING_CPU_MAX}", cpu <= BLOCKING_CPU_MAX)
    lines = [ln for ln in read_text(a.log).splitlines() if ln.startswith("threadburn cuda_sync:")]
    back = s.get("policy_in_force", "?")
    rows.add(f"{what}: driver's read-back", back + (f"; {lines[0]}" if lines else ""), f"= {a.policy}, no note",
             back == a.policy and not lines)
    if a.how == "run":
        r = run_row(a.run_dir)
        in_force = r.get("cuda_sync_in_force", "no run.csv")
        rows.add(f"{what}: run.csv cuda_sync_in_force", f"{in_force} (asked {r.get('cuda_sync_requested', '?')}; "
                 f"note {r.get('cuda_sync_note', '?')})", f"= {a.policy}", in_force == a.policy)


def window_share(timeline, index, period, lo, hi):
    """The mean of GPU `index`'s samples (each the share of the period that
    ends at its time) over [lo, hi] ms from the probe's start, each weighted
    by its overlap with it: (share, samples used)."""
    series = f"gpu{index}_busy"
    weighted = weight = 0.0
    used = 0
    with open(timeline, newline="") as f:
        for row in csv.reader(ln for ln in f if not ln.startswith("#")):
            if len(row) < 3 or row[1] != series:
                continue
            t, share = float(row[0]), float(row[2])
            w = max(0.0, min(hi, t) - max(lo, t - period))
            if w > 0:
                weighted, weight, used = weighted + share * w, weight + w, used + 1
    return (weighted / weight if weight else None), used


def kind_nvml(rows, a):
    """half_busy.py under the probe: NVML's share in its window and over its life against its own clocks."""
    if skipped(rows, a.log, "busy share"):
        return
    s, r, summary = said(a.log, "half_busy"), run_row(a.run_dir), main_summary(a.run_dir)
    if not s or not r or not summary or not summary.get("gpus"):
        why = "no half_busy line" if not s else "no run.csv" if not r else "no GPU sampled: " + (
            summary or {}).get("context", {}).get("gpu_note", "no probe summary")
        rows.add("busy share", f"{why} ({last_line(a.log)})", "a sampled GPU", False)
        return
    g = summary["gpus"][0]
    print(f"  GPU {g['index']} ({g['name']}): busy_share {g['busy_share']} over the run, {g['samples']} samples of "
          f"{g['period_ms']} ms (source {g['source']}), memory busy {g['memory_busy_share']}")
    period = float(g["period_ms"] or 0)
    start = float(summary["start_mono_ms"])
    w0, w1 = float(s["window_start_mono_ms"]) - start, float(s["window_end_mono_ms"]) - start
    busy, window = float(s["busy_ms"]), float(s["window_ms"])
    timeline = summary["_path"][:-len(".json")] + ".timeline.csv"
    share, used = window_share(timeline, g["index"], period, w0, w1)
    want, tol = busy / window, NVML_TOL + 2 * period / window
    rows.add("busy share in the window", f"{fmt(share)} from {used} samples; "
             f"the program's {busy:.0f} ms busy of {window:.0f} ms = {want:.3f}", f"{want:.3f} +- {tol:.3f}",
             share is not None and abs(share - want) <= tol)
    life = number(r.get("wall_ms")) or 0.0
    since_cuda = life - (float(s["first_cuda_mono_ms"]) - start)
    got = number(r.get("gpu_busy_share"))
    tol = NVML_TOL + 2 * period / max(life, 1.0)
    lo, hi = busy / max(life, 1.0) - tol, busy / max(since_cuda, 1.0) + tol
    rows.add("run.csv gpu_busy_share", f"{fmt(got)} over {life:.0f} ms ({r.get('gpu_samples')} samples, "
             f"{r.get('gpus_sampled')} GPU)", f"{lo:.3f} .. {hi:.3f}", got is not None and lo <= got <= hi)


def kind_busy(rows, a):
    """tests/gpu/check_gpu_busy.py (scripts/gpu_host.sh check): its S line, its verdict line."""
    text = read_text(a.log)
    figure = next((ln for ln in text.splitlines() if ln.startswith("S = ")), "")
    verdict = next((ln for ln in reversed(text.splitlines()) if ln.startswith(("PASS:", "FAIL:", "SKIP:"))), "")
    if verdict.startswith("SKIP:") or a.rc == 77:
        rows.add("host sleep not in gpu_busy_ms", verdict or last_line(a.log), "needs a CUDA device", "SKIP")
        return
    ok = a.rc == 0 and verdict.startswith("PASS:")
    rows.add("host sleep not in gpu_busy_ms", (figure or verdict or last_line(a.log))[:220],
             "step_ms, gpu_span_ms +S; gpu_busy_ms +0 (each +-0.1 S + 0.5 ms)", ok)


def kind_classes(rows, a):
    """A training under the probe: each class of thread and process present, its figure sane."""
    r, summary = run_row(a.run_dir), main_summary(a.run_dir)
    if not r or summary is None:
        rows.add("the training ran", f"no run.csv ({last_line(a.log)})", "run.csv", False)
        return
    rate = re.findall(r"samples/s: ([0-9.]+)", read_text(a.log))
    rows.add("the training ran", f"status {r.get('status')}, exit {r.get('exit_code')}, wall "
             f"{fmt(number(r.get('wall_ms')))} ms"
             + (f", samples/s {rate[-1]}" if rate else ""), "status ok", r.get("status") == "ok")
    c = {k: number(r.get(k)) for k in ("cpu_pin_ms", "cpu_cuda_ms", "cpu_children_ms", "child_processes",
                                        "main_core_share", "gpu_busy_share", "gpus_sampled", "cpu_main_ms")}
    pin = c["cpu_pin_ms"]
    rows.add("pin-memory thread", f"cpu_pin_ms {fmt(pin)}", "> 0", pin is not None and pin > 0)
    cuda = [t for t in summary.get("threads", []) if t.get("class") == "cuda"]
    rows.add("CUDA driver threads", f"{len(cuda)} of class cuda, cpu_cuda_ms {fmt(c['cpu_cuda_ms'])}",
             ">= 1 thread, cpu_cuda_ms >= 0", bool(cuda) and c["cpu_cuda_ms"] is not None and c["cpu_cuda_ms"] >= 0)
    n, ms = c["child_processes"] or 0, c["cpu_children_ms"]
    rows.add("worker processes", f"{n:.0f} processes, cpu_children_ms {fmt(ms)}", ">= 2, CPU > 0",
             n >= 2 and ms is not None and ms > 0)
    share = c["main_core_share"]
    rows.add("main thread", f"main_core_share {fmt(share)} (cpu_main_ms {fmt(c['cpu_main_ms'])})",
             f"0 < x <= {CORE_SHARE_MAX}", share is not None and 0 < share <= CORE_SHARE_MAX)
    busy = c["gpu_busy_share"]
    rows.add("GPU busy share", f"gpu_busy_share {fmt(busy)}, {fmt(c['gpus_sampled'])} GPU sampled", "0..1, >= 1 GPU",
             busy is not None and 0 <= busy <= 1 and (c["gpus_sampled"] or 0) >= 1)
    for line in read_text(a.log).splitlines():
        if line.strip().startswith("advice:"):
            print("  (run's " + line.strip()[:300] + ")")


def read_csv(path):
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError:
        return []


def verdict_of(path):
    """The first workload's verdict from a <stem>.verdict.json: (verdict, text) or (None, why)."""
    try:
        with open(path) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"no verdict file ({e.__class__.__name__})"
    if not v.get("workloads"):
        return None, "no workload in the verdict"
    w = v["workloads"][0]
    text = f"{w.get('verdict')}: {w.get('setting')} against {w.get('baseline')}" + (
        f", confirmed {w['confirmation'].get('holds', w['confirmation'])}" if w.get("confirmation") else "")
    if len(v.get("workloads") or []) > 1:
        text += f" (+{len(v['workloads']) - 1} more workloads)"
    return w.get("verdict"), text


def in_force_counts(race):
    """Per policy: the race rows whose policy in force is the one asked, of its rows."""
    out = {}
    for p in POLICIES:
        mine = [r for r in race if r.get("cuda_sync") == p]
        out[p] = (sum(r.get("cuda_sync_in_force") == p for r in mine), len(mine))
    return out


def advice_lines(text):
    """The advice lines of a `threadburn run` report, and each one's kind (sync-bound, host-bound, ...)."""
    lines = [ln.strip()[len("advice: "):] for ln in text.splitlines() if ln.startswith("  advice: ")]
    return lines, [ln.split(":", 1)[0] for ln in lines]


def kind_waits(rows, a):
    """A training under `threadburn run`: the main thread's waits on the device, their CPU, the advice."""
    what = {"sync": "sync-bound", "launch": "launch-bound"}[a.what]
    if skipped(rows, a.log, what):
        return
    text, r = read_text(a.log), run_row(a.run_dir)
    if not r or r.get("status") != "ok":
        rows.add(f"{what}: the run", f"status {r.get('status', 'no run.csv')}, exit {r.get('exit_code', '?')} "
                 f"({last_line(a.log)})", "run.csv, status ok", False)
        return
    lines, kinds = advice_lines(text)
    for line in lines:
        print("  (run's advice: " + line[:300] + ")")
    c = {k: number(r.get(k)) for k in ("main_sync_wait_ms", "main_sync_cpu_ms", "main_syncs", "steady_ms",
                                        "startup_ms", "wait_main_ms", "steady_gpu_busy_share", "launches",
                                        "launch_ms", "steady_main_core_share", "steady_wait_main_ms")}
    if a.what == "launch":
        figures = (f"advice {', '.join(kinds) or 'none'}; steady phase {fmt(c['steady_ms'])} ms, GPU busy "
                   f"{fmt(c['steady_gpu_busy_share'])}, main thread {fmt(c['steady_main_core_share'])} of a core (waited "
                   f"{fmt(c['steady_wait_main_ms'])} ms for one), "
                   f"{fmt(c['launches'])} launches ({fmt(c['launch_ms'])} ms inside them), waits "
                   f"{fmt(c['main_sync_wait_ms'])} ms")
        rows.add(f"{what}: advice", figures, "exactly host-bound", kinds == ["host-bound"])
        return
    wait, cpu, steady = c["main_sync_wait_ms"] or 0.0, c["main_sync_cpu_ms"] or 0.0, c["steady_ms"] or 0.0
    share = wait / steady if steady > 0 else None
    rows.add(f"{what}: waits' share of the steady phase",
             f"{fmt(share)}: the main thread {wait:.0f} ms in {fmt(c['main_syncs'])} waits of a {steady:.0f} ms steady "
             f"phase (startup {fmt(c['startup_ms'])} ms, ended by {r.get('startup_ends', '?')})",
             f"main_sync_wait_ms / steady_ms >= {WAIT_SHARE_MIN}", share is not None and share >= WAIT_SHARE_MIN)
    queue = c["wait_main_ms"] or 0.0
    own, runnable = (cpu / wait, (cpu + queue) / wait) if wait > 0 else (None, None)
    rows.add(f"{what}: CPU inside the waits",
             f"{cpu:.0f} ms of CPU in {wait:.0f} ms of waits = {fmt(own)} (+ the main thread's run-queue wait "
             f"{queue:.0f} ms: {fmt(runnable)}) under {r.get('cuda_sync_in_force', '?')}",
             f">= {SPIN_CPU_MIN} of the waits' time (CPU, or CPU + run-queue wait)",
             own is not None and max(own, runnable) >= SPIN_CPU_MIN)
    m = re.search(r"blocking_sync would save about ([0-9.]+ m?s) of CPU, ([0-9]+%) of the steady phase's", text)
    saving = f"saving {m.group(1)} ({m.group(2)} of the steady phase's CPU)" if m else "no saving quoted"
    rows.add(f"{what}: advice", f"advice {', '.join(kinds) or 'none'}; {saving}", "exactly sync-bound, a saving quoted",
             kinds == ["sync-bound"] and m is not None)


def verdict_entry(path):
    """The first workload of a <stem>.verdict.json: (its entry, a line for a row) or (None, why)."""
    try:
        with open(path) as f:
            v = json.load(f)
    except (OSError, ValueError) as e:
        return None, f"no verdict file ({e.__class__.__name__})"
    if not v.get("workloads"):
        return None, "no workload in the verdict"
    w = v["workloads"][0]

    def pct(ratio):
        x = number((ratio or {}).get("estimate"))
        return "?" if x is None else f"{(x - 1) * 100:+.1f}%"
    verdict = str(w.get("verdict")).upper()
    setting, baseline = w.get("setting"), w.get("baseline")
    head = {"CHANGE": f"CHANGE to {setting} against {baseline}",
            "KEEP": f"KEEP {baseline}"}.get(verdict, f"{verdict}: {setting} against {baseline}")
    text = f"{head}: time {pct(w.get('time_ratio'))}, CPU {pct(w.get('cpu_ratio'))} ({w.get('gain_from')})"
    return w, text


def median(values):
    values = sorted(values)
    n = len(values)
    return None if not n else values[n // 2] if n % 2 else (values[n // 2 - 1] + values[n // 2]) / 2


def control_rc(control, describe):
    """The last cuCtxSetFlags result in a copy of the in-run control block ('' without one)."""
    try:
        with open(describe) as f:
            where = json.load(f)["inrun"]["fields"]["cuda_rc"]
        with open(control, "rb") as f:
            data = f.read()
    except (OSError, ValueError, KeyError):
        return ""
    if len(data) < where + 8:
        return ""
    rc = int.from_bytes(data[where:where + 8], "little", signed=True)
    why = {-1: " (none called)", 0: " (CUDA_SUCCESS)", 500: " (the driver has no cuCtxSetFlags: before 12.1)"}
    return f"; the control's cuCtxSetFlags result {rc}{why.get(rc, '')}"


def kind_inrun(rows, a):
    """tune --in-run --apply of the sync-bound training: the live policy's CPU per wait, the verdict, its time."""
    if skipped(rows, a.program_log, "in-run"):
        return
    text, data = read_text(a.log), [r for r in read_csv(a.csv) if r.get("status") == "ok"]
    by = {}
    for r in data:
        by.setdefault(r.get("study"), []).append(r)

    def med(study, column):
        return median([x for x in (number(r.get(column)) for r in by.get(study, [])) if x is not None])
    cpu_b, cpu_p = med("cuda-blocking_sync", "unit_cpu_ms"), med("plain", "unit_cpu_ms")
    unit = (data[0].get("progress") or "unit").rstrip("s") if data else "unit"
    ratio = cpu_b / cpu_p if cpu_b is not None and cpu_p else None
    honoured = ratio is not None and ratio <= LIVE_CPU_RATIO_MAX
    figure = (f"{fmt(ratio)}: {fmt(cpu_b)} ms of CPU a {unit} under cuda-blocking_sync, {fmt(cpu_p)} under plain "
              f"(medians of {len(by.get('cuda-blocking_sync', []))} and {len(by.get('plain', []))} blocks; time a "
              f"{unit} {fmt(med('cuda-blocking_sync', 'unit_ms'))} and {fmt(med('plain', 'unit_ms'))} ms)")
    if ratio is None:
        figure = f"no blocks of both ({len(data)} blocks ok; {last_line(a.log)})"
    elif not honoured:
        figure += ": the driver did not honour a live cuCtxSetFlags"
    figure += control_rc(a.control, a.describe)
    rows.add("live change of the CUDA wait policy: CPU per wait by block", figure,
             f"<= {LIVE_CPU_RATIO_MAX} (the driver honoured it)", honoured)
    w, vtext = verdict_entry(a.verdict)
    if w is None:
        ok = False
    elif honoured:
        ok = (w.get("verdict"), w.get("setting")) == ("change", "cuda-blocking_sync")
    else:
        ok = w.get("verdict") in ("keep", "undecided")
    rows.add("verdict", vtext, "change to cuda-blocking_sync where the driver honoured the live change, else keep "
             "or undecided", ok)
    m = re.search(r"tune --in-run: decided in one run, ([0-9.]+) s, ([0-9]+) blocks( \(the program ended before)?",
                  text)
    kept = re.search(r"tune --in-run: (\S+) in force from ([0-9.]+) s into the run", text)
    end = re.search(r"tune --in-run: the program ended, exit (-?[0-9]+)", text)
    parts = [f"{m.group(1)} s, {m.group(2)} blocks" + (" (the program ended first)" if m.group(3) else "")
             if m else "no 'decided in one run' line"]
    parts += [f"{kept.group(1)} in force from {kept.group(2)} s"] if kept else []
    parts += [f"the program ended, exit {end.group(1)}" if end else "its end not said", f"tune exit {a.rc}"]
    rows.add("decided in one run", "; ".join(parts), "said before the program's end; the program waited for, exit 0",
             bool(m) and not m.group(3) and bool(end) and end.group(1) == "0" and a.rc == 0)


def kind_gputune(rows, a):
    """A tune of a short sync-bound training: the policies added after round 1, the steady phase judged, a verdict."""
    log, data = read_text(a.log), read_csv(a.csv)
    if data and all(r.get("exit_code") == "77" for r in data):
        rows.add("tune", f"its {len(data)} runs exited 77 (the program's skip)", "needs a CUDA device", "SKIP")
        return
    added = re.search(r"tune: the program uses CUDA .*?added its host wait policies on top of plain, "
                      r"THREADBURN_CUDA_SYNC = ([^(]*\([^)]*\)(?:, [^(]*\([^)]*\))*)", log)
    rows.add("CUDA policies added after round 1", added.group(1) if added else f"not said ({last_line(a.log)})",
             "said by tune", bool(added))
    race = [r for r in data if r.get("phase") == "race"]
    counts = in_force_counts(race)
    rows.add("policy in force per race row", ", ".join(f"{p} {k}/{n}" for p, (k, n) in counts.items()),
             "every row its own, >= 1 row each", all(n and k == n for k, n in counts.values()))
    bad = [r.get("run_key") for r in data if r.get("status") != "ok"]
    fresh = len([r for r in data if r.get("phase") != "race"])
    rows.add("runs", f"{len(race)} race + {fresh} fresh, {len(bad)} not ok {bad[:3]}", "all ok", bool(data) and not bad)
    w, text = verdict_entry(a.verdict)
    if w is None:
        ok = False
    elif w.get("verdict") == "change":
        est = number((w.get("time_ratio") or {}).get("estimate"))
        ok = w.get("setting") == "cuda-blocking_sync" or (est is not None and est <= 1 + TIME_MARGIN)
    else:
        ok = w.get("verdict") in ("keep", "undecided")
    rows.add("verdict", text, f"change to cuda-blocking_sync, keep or undecided; no change slower by > "
             f"{TIME_MARGIN:.0%}", ok)
    metric, startup = (w or {}).get("time_metric"), number((w or {}).get("startup_ms"))
    rows.add("judged on the steady phase", f"time_metric {metric}, startup {fmt(startup)} ms a run (median)",
             "time_metric steady_ms, startup_ms set", metric == "steady_ms" and startup is not None)
    rows.add("wall time", f"{a.seconds:.0f} s ({a.plan})", f"<= {TUNE_WALL_MAX_S} s", a.seconds <= TUNE_WALL_MAX_S)


def kind_sweep(rows, a):
    """The reduced CUDA grid: runs ok, the policies in force, CUPTI's figures, a verdict."""
    data = read_csv(a.csv)
    status = {}
    for r in data:
        status[r.get("status")] = status.get(r.get("status"), 0) + 1
    rows.add("rows", ", ".join(f"{n} {s}" for s, n in sorted(status.items())) or f"none ({last_line(a.log)})",
             "all ok", bool(data) and set(status) == {"ok"})
    ok = [r for r in data if r.get("status") == "ok"]
    counts = {p: (k, n) for p, (k, n) in in_force_counts(ok).items() if n}
    rows.add("cuda_sync_in_force", ", ".join(f"{p} {k}/{n}" for p, (k, n) in counts.items()) or "no policy row",
             "= cuda_sync in every row", bool(counts) and all(k == n for k, n in counts.values()))
    # gpu_busy_ms is clipped to the step's window, so it cannot pass the step (2 %: two clocks)
    busy = [number(r.get("gpu_busy_ms")) for r in ok]
    step = [number(r.get("step_ms")) for r in ok]
    have = sum(b is not None and s is not None and 0 < b <= s * 1.02 for b, s in zip(busy, step))
    cupti = sorted({r.get("cuda_cupti", "?") for r in ok})[:2]
    rows.add("gpu_busy_ms (CUPTI)", f"{have}/{len(ok)} rows with 0 < gpu_busy_ms <= step_ms; cuda_cupti {cupti}",
             "every ok row", bool(ok) and have == len(ok))
    verdict, text = verdict_of(a.verdict)
    rows.add("verdict", text, "change, keep or undecided", verdict in ("change", "keep", "undecided"))


def kind_skip(rows, a):
    """A row the shell decided (a step skipped or timed out)."""
    rows.add(a.check, a.figure, a.bound, a.result)


def kind_table(a):
    """Every row, aligned; the steps' times; exit 1 when a row failed."""
    with open(a.rows) as f:
        data = [ln.rstrip("\n").split("\t") for ln in f if ln.strip()]
    head = ["step", "check", "figure", "bound", "result"]
    table = [head] + [[d[0], d[1], d[2][:110], d[3][:60], d[4]] for d in data]
    width = [max(len(r[i]) for r in table) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in table]
    lines.insert(1, "  ".join("-" * w for w in width))
    counts = {v: sum(d[4] == v for d in data) for v in ("PASS", "FAIL", "SKIP")}
    lines.append(f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP")
    print("\n".join(lines))
    return 1 if counts["FAIL"] else 0


def kind_node(rows, a):
    """A training as on a real node (backward_cpu.py --prep, or the stand-in's device_training on device 1
    of 2 with --prep-ms) with CUDA_VISIBLE_DEVICES unset: the process's GPUs, the autograd thread among the
    launchers, the .cpu() copies as hidden waits, the steady phase from the first step after a startup of
    device work."""
    if skipped(rows, a.log, "node"):
        return
    r, s = run_row(a.run_dir), main_summary(a.run_dir)
    if not r or r.get("status") != "ok" or s is None:
        rows.add("node: the run", f"status {r.get('status', 'no run.csv')}, exit {r.get('exit_code', '?')} "
                 f"({last_line(a.log)})", "run.csv, status ok, a probe summary", False)
        return
    c, gpus = s.get("counters", {}), s.get("steady_gpus") or []
    used = [g for g in gpus if g.get("used")]
    unused = [g.get("index") for g in gpus if not g.get("used")]
    busy = number(c.get("steady_gpu_busy_share"))
    own = number(used[0].get("busy_share")) if len(used) == 1 else None
    rows.add("the process's GPUs",
             f"used {[g.get('index') for g in used]} ({', '.join(str(g.get('used_by')) for g in used) or '-'}) of "
             f"{len(gpus)} visible, unused {unused}; steady_gpu_busy_share {fmt(busy)}, the used GPU's {fmt(own)}",
             "one GPU the process's (its context or NVML's list); the busy share its own",
             len(used) == 1 and busy is not None and own is not None and abs(busy - own) < 1e-9)
    calls = s.get("device_calls") or []
    total = sum(t.get("launches") or 0 for t in calls)
    autograd = sum(t.get("launches") or 0 for t in calls if t.get("class") == "autograd")
    kinds = advice_lines(read_text(a.log))[1]
    rows.add("backward on the autograd thread",
             (f"{autograd} of {total} launches by a thread of class autograd ({autograd / total:.0%})" if total
              else "no launch seen") + f"; advice {', '.join(kinds) or 'none'}",
             "a thread of class autograd launched kernels", autograd > 0)
    steps = number(said(a.log, "backward_cpu").get("steps") or said(a.log, "device_training").get("steps"))
    hidden = sum(t.get("hidden_waits") or 0 for t in calls)
    hidden_ms = sum(t.get("hidden_wait_ms") or 0.0 for t in calls)
    blocked = number(said(a.log, "device_training").get("blocked_copies"))
    if blocked is not None and blocked >= 0:
        # The stand-in device knows which copies found work queued and had to wait: each of them is a hidden
        # wait, whatever share of the steps a busy machine left them (a host descheduled past the device's
        # work finds it done, and its copy does not wait); at least half the steps' copies, so that the
        # check holds something. The device counts the whole run's copies: the steady phase's hidden waits
        # and the startup's (the steps before the probe's steady phase began; the preparation's copies are
        # synchronous, not hidden).
        before = sum(t.get("startup_hidden_waits") or 0 for t in calls)
        rows.add(".cpu() each step: hidden waits",
                 f"{hidden} hidden waits ({hidden_ms:.0f} ms inside them) for {fmt(steps)} steps, {before} more in the "
                 f"startup; the stand-in device's copies that waited {fmt(blocked)}",
                 "with the startup's: >= the copies that waited, <= one a step; those >= 0.5 a step",
                 bool(steps) and blocked <= hidden + before <= steps and blocked >= 0.5 * steps)
    else:
        rows.add(".cpu() each step: hidden waits",
                 f"{hidden} hidden waits ({hidden_ms:.0f} ms inside them) for {fmt(steps)} steps",
                 ">= 0.9 a step (the copy into pageable memory blocks)", bool(steps) and hidden >= 0.9 * steps)
    # The startup of device work (--prep: the data prepared on the GPU in uneven pieces, a compile's
    # host work after each) before the steps: the steady phase from the first step the probe
    # recognises (a run of repeated waits), not from the first device work.
    own = said(a.log, "backward_cpu") or said(a.log, "device_training")
    first, seconds = number(own.get("steps_mono_ms")), number(own.get("seconds") or own.get("steps_ms"))
    seconds = seconds / 1000 if seconds and "steps_ms" in own else seconds
    prep = number(own.get("prep_syncs") or own.get("prep_waits"))
    dev, ctx = s.get("startup_device") or {}, s.get("context") or {}
    start = (number(s.get("start_mono_ms")) or 0) + (number(c.get("startup_ms")) or 0)
    after = start - first if first else None
    rows.add("steady phase from the first step",
             f"from {ctx.get('steady_from', '?')}, {fmt(after)} ms after the first step began "
             f"(the steps {fmt(seconds)} s); the startup's device work {dev.get('syncs', '?')} waits, "
             f"{dev.get('launches', '?')} launches, for the preparation's {fmt(prep)} waits",
             "steady_from steps; begins after the first step began, within the first half of the steps; the "
             "startup's waits >= the preparation's",
             ctx.get("steady_from") == "steps" and after is not None and bool(seconds) and
             0 <= after <= 500 * seconds and prep is not None and (dev.get("syncs") or 0) >= prep)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", help="the checks file (appended to)")
    ap.add_argument("step", help="the step's name in the rows")
    ap.add_argument("kind", choices=("preflight", "policy", "nvml", "waits", "inrun", "gputune", "node", "busy",
                                     "classes", "sweep", "skip", "table"))
    ap.add_argument("--mode", choices=("real", "stand-in"), default="real")
    ap.add_argument("--dir", help="preflight: the folder of its fact files")
    ap.add_argument("--stand-in-dir", default="", help="preflight: the stand-in driver's folder")
    ap.add_argument("--log", default="", help="the step's program output")
    ap.add_argument("--run-dir", default="", help="threadburn run's --out")
    ap.add_argument("--how", choices=("run", "preload"), default="run")
    ap.add_argument("--policy", choices=POLICIES)
    ap.add_argument("--rc", type=int, default=0, help="busy, inrun: the command's exit status")
    ap.add_argument("--what", choices=("sync", "launch"), default="sync", help="waits: which training")
    ap.add_argument("--program-log", default="", help="inrun: the program's output (<stem>.program.log)")
    ap.add_argument("--control", default="", help="inrun: a copy of the control block, taken during the run")
    ap.add_argument("--describe", default="", help="inrun: the probe's describe.json (the control block's layout)")
    ap.add_argument("--seconds", type=float, default=0.0, help="gputune: the tune's wall time")
    ap.add_argument("--plan", default="", help="gputune: its plan and budget, for the row")
    ap.add_argument("--csv", default="")
    ap.add_argument("--verdict", default="")
    ap.add_argument("--check", default="(step)")
    ap.add_argument("--figure", default="")
    ap.add_argument("--bound", default="")
    ap.add_argument("--result", default="SKIP", choices=("PASS", "FAIL", "SKIP"))
    return ap.parse_args(argv)


def main(argv):
    a = parse_args(argv)
    if a.kind == "table":
        return kind_table(a)
    rows = Rows(a.rows, a.step)
    globals()["kind_" + a.kind](rows, a)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
