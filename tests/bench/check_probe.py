#!/usr/bin/python3
"""Known answers of the preload probe (src/probe), live:

    check_probe.py CASE --probe LIB --child regions_child --libomp LIB [--repo DIR]

regions_child runs STEPS x (REGIONS parallel regions, then a sleep). Under
LLVM's runtime with KMP_BLOCKTIME=b and 2 threads, the worker spins b ms (wall
time) after the last region of each step, then sleeps: in each gap its CPU
plus its run-queue wait is b ms, however busy the machine, and the burn ends
b ms into the gap (earlier only by the time it waited for a CPU). Under
libgomp with OMP_WAIT_POLICY=passive the worker sleeps at once: no burn past
the gap's first interval. The python case checks the same on a real PyTorch training in the
sleep/step/sleep pattern (examples/sleep_step_sleep.py; skipped without
python3-torch), the knobs case the read-back of KMP_LIBRARY and
ONEDNN_MAX_CPU_ISA in one, the placement case the read-backs of
OMP_PROC_BIND, OMP_PLACES and OMP_SCHEDULE under both runtimes. The exit
path: long_isa (oneDNN's ISA with a long name, from a stand-in oneDNN, read
right at exit), exit_statics (the probe registers no destructor that could
run before its report), sigterm (SIGTERM, once or in a burst, always ends the
process by SIGTERM with its summary written, never a hang). Standard library
only.
"""
import argparse
import csv
import glob
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from check_monitor import taken_ms

STEPS, REGIONS, GAP_MS = 6, 20, 150


# Whether the interpreter has torch, asked of its import system without importing it: an import
# is 1.5-2.5 s of CPU here, which the case's own run pays again (a torch that is there but does
# not import fails the case's run instead of skipping it).
HAS_TORCH = "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def probed(a, tmp, cmd, env, llvm=None):
    """Runs cmd under the probe (and LLVM's runtime: llvm, by default where a KMP_ knob is set)."""
    out = os.path.join(tmp, "probe")
    os.makedirs(out, exist_ok=True)
    llvm = any(k.startswith("KMP_") for k in env) if llvm is None else llvm
    # A sanitized probe (tests/sanitize) needs its sanitizer's runtime loaded before it.
    first = [os.environ["THREADBURN_TEST_PRELOAD"]] if os.environ.get("THREADBURN_TEST_PRELOAD") else []
    preload = first + [a.probe] + ([a.libomp] if llvm else [])
    full = dict(os.environ, LD_PRELOAD=" ".join(preload), THREADBURN_PROBE_DIR=out, **env)
    print("$ " + " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(cmd))
    t0, taken0 = time.monotonic(), taken_ms()
    p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=300)
    probed.life_ms = (time.monotonic() - t0) * 1000  # the process's whole life, at least
    # Time the kernel counted as taken from the CPUs' tasks meanwhile (interrupts, the hypervisor's steal),
    # machine-wide: neither a thread's CPU clock nor its run-queue wait holds it.
    probed.taken_ms = taken_ms() - taken0
    print(f"the run: {probed.life_ms:.0f} ms; taken from the CPUs meanwhile (irq, softirq, steal): "
          f"{probed.taken_ms:.0f} ms")
    sys.stdout.write(p.stdout + p.stderr)
    check(p.returncode == 0, f"{cmd[0]} exited {p.returncode}")
    probed.stdout, probed.stderr = p.stdout, p.stderr
    summaries = []
    for path in glob.glob(os.path.join(out, "probe-*.json")):
        with open(path) as f:
            summaries.append((json.load(f), path))
    check(summaries, "the probe wrote no summary")
    summary, path = max(summaries, key=lambda s: s[0]["counters"]["regions"])
    probed.context = summary["context"]
    with open(path.removesuffix(".json") + ".gaps.csv") as f:
        gaps = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    c = summary["counters"]
    print("counters: " + ", ".join(f"{k}={v:.4g}" if v is not None else f"{k}=null" for k, v in c.items()))
    for g in gaps:
        print(f"gap at {g['start_ms']:.1f} ms: {g['length_ms']:.1f} ms long, omp cpu {g['omp_cpu_ms']:.2f} + "
              f"wait {g['others_wait_ms']:.2f}, tail {g['omp_tail_ms']:.2f} (boundary {g['boundary_ms']:.2f}, "
              f"tail's interval {g['tail_interval_ms']:.2f})")
    closed = [g for g in gaps if g["open"] == 0 and g["measured"] == 1]
    return c, closed


def child_cmd(a, steps=STEPS):
    return [a.child, f"--steps={steps}", f"--regions={REGIONS}", f"--gap_ms={GAP_MS}", "--work_us=200"]


# The CPU of the sampling interval around a gap's start is split between the
# region before and the gap by time (boundary_ms long): the burn is known to
# within that much CPU per worker. The tail is the end of the last interval
# that burned: the burn stopped inside it, so the tail is known to within that
# interval (tail_interval_ms). Not always 1 ms: the probe's sampler stretches
# its period where sampling fast costs more than its share of a core (6-10 ms
# on the development VM: a tail of 38.7 ms for 30.6 ms of spin, seen).
# A worker that spins b ms of wall time is on a CPU or waiting for one all
# that time: in every gap CPU + wait >= b, and the burn ends no earlier than
# b less the wait, however busy the machine; less, in CPU + wait, what the
# kernel counted as taken from the CPUs meanwhile (interrupts, a hypervisor
# running another guest: steal), which neither a thread's CPU clock nor its
# run-queue wait holds (seen on the development VM with a core busy: 12.4 ms
# of CPU and 1.1 ms of wait in a 33 ms spin, 5 runs in 20 for a while, then
# none in 30). Not CPU + wait <= b: the gap's
# wait also holds other threads' waits and the worker's wait for a core when
# the next region wakes it (a few ms with one core busy). The spin itself
# cannot outlast b by more than the slack, but with a core busy LLVM's
# runtime now and then overshoots its own blocktime (seen: one gap in about
# 180 spun 40 ms for b = 30, its tail as long), so the upper bounds hold for
# the median gap, not for each.
def check_blocktime(gaps, b, what, taken=0.0):
    check(gaps, f"{what}: no gap to check")
    slack = lambda g: 0.03 * b + g["boundary_ms"] + 1.0
    for g in gaps:
        spun = g["omp_cpu_ms"] + g["others_wait_ms"]
        check(spun >= b - slack(g) - taken, f"{what}: a gap shows {spun:.2f} ms of spin (cpu + wait), "
              f"expected >= {b} - {slack(g):.2f} - {taken:.0f} taken from the CPUs")
        check(g["omp_tail_ms"] >= b - g["others_wait_ms"] - 2 - g["boundary_ms"],
              f"{what}: the burn ended {g['omp_tail_ms']:.2f} ms into a gap, expected {b} (less the wait)")
    mid = sorted(gaps, key=lambda g: g["omp_cpu_ms"])[len(gaps) // 2]
    check(mid["omp_cpu_ms"] <= b + slack(mid), f"{what}: the median gap shows {mid['omp_cpu_ms']:.2f} ms of the "
          f"workers' CPU, expected <= {b} + {slack(mid):.2f}")
    mid = sorted(gaps, key=lambda g: g["omp_tail_ms"])[len(gaps) // 2]
    check(mid["omp_tail_ms"] <= b + 2 + mid["tail_interval_ms"],
          f"{what}: the median gap's burn ended {mid['omp_tail_ms']:.2f} ms into it (known to "
          f"{mid['tail_interval_ms']:.2f} ms), expected {b}")


# "Burning" is the project's own rule (src/core/burn.h): more than
# BURN_THRESHOLD_CORES of a core, averaged over a couple of ms. A team that
# sleeps at once burns at most the interval around the gap's start (its last
# region's work prorated into it, plus its wake-up and return to sleep), then
# stays under the threshold for the rest of the gap, and its tail ends within
# one fast sampling interval (1 ms) of that first interval. Wake-ups cost
# 20-60 us of CPU on a VM and more on slower ones, so "under the threshold"
# rather than "zero"; a spin of even a few ms breaks both bounds.
BURN_THRESHOLD_CORES = 0.05  # kTailThresholdCores
FAST_PERIOD_MS = 1.0         # kDefaultSamplerPeriodNs


def check_no_burn(gaps, what):
    for g in gaps:
        allowed = g["boundary_ms"] + BURN_THRESHOLD_CORES * (g["length_ms"] - g["boundary_ms"])
        check(g["omp_cpu_ms"] <= allowed, f"{what}: {g['omp_cpu_ms']:.2f} ms of CPU in a {g['length_ms']:.0f} ms gap "
              f"(more than its {g['boundary_ms']:.2f} ms first interval + {BURN_THRESHOLD_CORES} core after it)")
        check(g["omp_tail_ms"] <= g["boundary_ms"] + FAST_PERIOD_MS,
              f"{what}: a tail of {g['omp_tail_ms']:.2f} ms (first interval {g['boundary_ms']:.2f} ms)")


def case_llvm(a, tmp):
    c, gaps = probed(a, tmp, child_cmd(a), {"OMP_NUM_THREADS": "2", "KMP_BLOCKTIME": "30"})
    check(c["regions"] == STEPS * REGIONS, f"{c['regions']} regions, expected {STEPS * REGIONS}")
    check(c["max_team"] == 2 and c["threads_omp"] == 1, "expected a team of 2: main + one worker")
    check(len(gaps) == STEPS - 1, f"{len(gaps)} closed gaps, expected {STEPS - 1}")
    check_blocktime(gaps, 30, "LLVM KMP_BLOCKTIME=30", probed.taken_ms)
    # The burn between regions is the workers' spin in the gaps, plus their
    # short spins between back-to-back regions.
    check(c["omp_between_regions_ms"] >= sum(g["omp_cpu_ms"] for g in gaps) - 1, "burn between regions < the gaps' burn")


def case_gomp_passive(a, tmp):
    c, gaps = probed(a, tmp, child_cmd(a), {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"})
    check(c["regions"] == STEPS * REGIONS, f"{c['regions']} regions, expected {STEPS * REGIONS}")
    check_no_burn(gaps, "passive workers")


def case_gomp_default(a, tmp):
    c, gaps = probed(a, tmp, child_cmd(a), {"OMP_NUM_THREADS": "2"})
    # The median gap: with a core busy, a single gap's few-ms spin can read as
    # no tail when the sampler itself waited for a core so long that its
    # interval averaged the spin under the burn threshold (seen: 1 gap in ~180).
    check(gaps, "no gap to check")
    mid = sorted(g["omp_tail_ms"] for g in gaps)[len(gaps) // 2]
    check(1 <= mid <= 50, f"libgomp's default spin ended {mid:.2f} ms into the median gap, expected 1..50")


def case_python(a, tmp):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", HAS_TORCH], capture_output=True).returncode != 0:
        print("SKIP: no python3-torch")
        return
    script = os.path.join(a.repo, "examples", "sleep_step_sleep.py")
    cmd = [py, script, "--steps=3", "--sleep_s=0.3", f"--log={tmp}/ckpt.log", "--threads=2"]
    c, gaps = probed(a, tmp, cmd, {"OMP_NUM_THREADS": "2", "KMP_BLOCKTIME": "50"})
    check(c["regions"] > 0 and c["max_team"] == 2, "no 2-thread region in the training")
    sleeps = [g for g in gaps if g["length_ms"] >= 250]
    check(len(sleeps) >= 5, f"{len(sleeps)} gaps of a sleep, expected >= 5 (2 per step)")
    check_blocktime(sleeps, 50, "python, LLVM KMP_BLOCKTIME=50", probed.taken_ms)
    c, gaps = probed(a, tmp + "/p", cmd, {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"})
    check_no_burn([g for g in gaps if g["length_ms"] >= 250], "passive workers, python")


# The knobs' read-back in a probed Python process: oneDNN's ISA capped by
# ONEDNN_MAX_CPU_ISA (SSE4.1: every x86-64 CPU this runs on has it, so the ISA
# in force is exactly it), LLVM's execution mode from KMP_LIBRARY. oneDNN is
# asked while the program runs: asked at exit, when its state is gone, it
# threw and the process died of SIGABRT (the exit code is checked).
CONVOLUTIONS = ("import torch\ntorch.set_num_threads(2)\nnet = torch.nn.Conv2d(3, 16, 3)\n"
                "for _ in range(5): net(torch.randn(8, 3, 32, 32)).sum().backward()\n")


def case_knobs(a, tmp):
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", HAS_TORCH], capture_output=True).returncode != 0:
        print("SKIP: no python3-torch")
        return
    probed(a, tmp, [py, "-c", CONVOLUTIONS],
           {"OMP_NUM_THREADS": "2", "ONEDNN_MAX_CPU_ISA": "SSE41", "KMP_LIBRARY": "turnaround"})
    ctx = probed.context
    print({k: ctx.get(k) for k in ("omp_runtime", "kmp_library", "dnnl_cpu_isa", "ignored_knobs")})
    check(ctx.get("omp_runtime") == "llvm-libomp", f"omp_runtime {ctx.get('omp_runtime')}, expected llvm-libomp")
    check(ctx.get("kmp_library") == "turnaround", f"kmp_library {ctx.get('kmp_library')}, expected turnaround")
    check(ctx.get("dnnl_cpu_isa") == "sse41", f"dnnl_cpu_isa {ctx.get('dnnl_cpu_isa')}, expected sse41")


# The read-backs of the placement and schedule knobs (omp_get_proc_bind,
# omp_get_place_*, omp_get_schedule of the serving runtime), known answers
# under both runtimes for regions_child (built by GCC: libgomp is loaded under
# LLVM's runtime too, as libtorch loads it):
# * set (OMP_PROC_BIND=close, OMP_PLACES=cores, OMP_SCHEDULE=dynamic,4): close
#   and dynamic,4; under libgomp one place per core of the CPUs the process may
#   use (/sys's thread siblings); under LLVM one place, its first core: libgomp
#   reads OMP_PLACES too when it loads and binds the main thread to its first
#   place, before LLVM starts, and LLVM then sees that core alone.
# * what PyTorch's launcher sets for libgomp (OMP_PROC_BIND=CLOSE,
#   OMP_SCHEDULE=STATIC): close and static; libgomp without OMP_PLACES binds to
#   one place per CPU, and so LLVM sees the first CPU alone.
# * unset: the runtimes' defaults: false; libgomp no places and dynamic,1;
#   LLVM one place of every CPU and static.
# The places are read back from OpenMP's notation ("{0,112}:56") here, not
# written: a second reading of the same list.
def expand_places(text):
    if text == "none":
        return []
    places, found = [], re.findall(r"(\{[^}]*\}(?::\d+(?::-?\d+)?)?)", text)
    check(",".join(found) == text, f"omp_places {text!r} is not in OpenMP's place notation")
    for item in found:
        inside, _, interval = item[1:].partition("}")
        cpus = []
        for part in inside.split(","):
            first, _, count = part.partition(":")
            cpus += [int(first) + i for i in range(int(count or 1))]
        count, _, stride = interval[1:].partition(":")
        places += [[c + k * int(stride or 1) for c in cpus] for k in range(int(count or 1))]
    return places


def cores_of(cpus):
    """The CPUs grouped by core (/sys's thread siblings), each core's within cpus, by its first CPU."""
    cores = set()
    for cpu in cpus:
        with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
            siblings = set()
            for part in f.read().strip().split(","):
                lo, _, hi = part.partition("-")
                siblings.update(range(int(lo), int(hi or lo) + 1))
        cores.add(tuple(sorted(siblings & set(cpus))))
    return [list(c) for c in sorted(cores)]


def case_placement(a, tmp):
    cpus = sorted(os.sched_getaffinity(0))
    cores = cores_of(cpus)
    launcher = {"OMP_PROC_BIND": "CLOSE", "OMP_SCHEDULE": "STATIC"}
    placed = {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores", "OMP_SCHEDULE": "dynamic,4"}
    cases = [("gomp", placed, "close", cores, "dynamic,4"), ("llvm", placed, "close", cores[:1], "dynamic,4"),
             ("gomp", launcher, "close", [[c] for c in cpus], "static"), ("llvm", launcher, "close", [cpus[:1]], "static"),
             ("gomp", {}, "false", [], "dynamic,1"), ("llvm", {}, "false", [cpus], "static")]
    for i, (runtime, env, bind, places, schedule) in enumerate(cases):
        probed(a, f"{tmp}/{i}", child_cmd(a, steps=2), dict(env, OMP_NUM_THREADS="2"), llvm=runtime == "llvm")
        ctx = probed.context
        got = {k: ctx.get(k) for k in ("omp_runtime", "omp_proc_bind", "omp_places", "omp_schedule", "ignored_knobs")}
        print(f"{runtime} {env or 'unset'}: {got}")
        check(ctx.get("omp_runtime") == ("llvm-libomp" if runtime == "llvm" else "libgomp"), "not the runtime asked")
        check(ctx.get("omp_proc_bind") == bind, f"omp_proc_bind {ctx.get('omp_proc_bind')}, expected {bind}")
        check(ctx.get("omp_schedule") == schedule, f"omp_schedule {ctx.get('omp_schedule')}, expected {schedule}")
        check(expand_places(ctx.get("omp_places")) == places,
              f"omp_places {ctx.get('omp_places')}, expected the places {places}")
        check(ctx.get("ignored_knobs") == "none", f"ignored: {ctx.get('ignored_knobs')}")


# Forked children: a PyTorch training with DataLoader(num_workers=2)
# (examples/dataloader_workers.py, whose workers spin a known CPU time per item
# and report it). Under the probe, cpu_ms must be the whole tree's CPU: within
# 10 % of what /usr/bin/time says the same training uses without the probe
# (user + sys, which holds the reaped workers); the workers are two child
# processes whose CPU is at least what they measured spinning on items.
# CPU-time facts, so they hold on a busy machine (the team sleeps at once:
# OMP_WAIT_POLICY=passive, no spin that a busy core would lengthen).
def case_children(a, tmp):
    """The probe's cpu_ms (every thread and the DataLoader's worker
    processes) against the kernel's own count of the same run: /usr/bin/time
    around the probed program reports the user + system time of it and every
    child it waited for. The two differ by the sampler (reported apart, added
    back), time's two 10 ms roundings and what the probe cannot see (its own
    start before its first read, the workers' own sampler at their exit: about
    1 % here). Comparing with another, unprobed run instead would measure the
    program's own run-to-run spread: this training's CPU moves 2.5-3.3 s from
    run to run."""
    py = "/usr/bin/python3"
    if subprocess.run([py, "-c", HAS_TORCH], capture_output=True).returncode != 0:
        print("SKIP: no python3-torch")
        return
    if not os.path.exists("/usr/bin/time"):
        print("SKIP: no /usr/bin/time (scripts/setup.sh installs it)")
        return
    env = {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"}
    cmd = [py, os.path.join(a.repo, "examples", "dataloader_workers.py"), "--workers=2"]
    c, _ = probed(a, tmp, ["/usr/bin/time", "-f", "time: %U %S", *cmd], env)
    user, sys_ = [ln for ln in probed.stderr.splitlines() if ln.startswith("time: ")][-1].split()[1:]
    kernel = (float(user) + float(sys_)) * 1000
    seen = c["cpu_ms"] + c["sampler_cpu_ms"]
    print(f"cpu_ms under the probe {c['cpu_ms']:.1f} (children {c['cpu_children_ms']:.1f} in "
          f"{c['child_processes']:.0f} processes) + its sampler {c['sampler_cpu_ms']:.1f}; /usr/bin/time of the "
          f"same run: {kernel:.1f} ms")
    check(c["child_processes"] == 2, f"{c['child_processes']} worker processes measured, expected 2")
    items = float(probed.stdout.split("worker item CPU: ")[1].split()[0])
    check(c["cpu_children_ms"] >= items, f"the workers' CPU {c['cpu_children_ms']:.1f} ms < the {items:.1f} ms "
          "they measured spinning on items")
    check(kernel - 0.03 * kernel - 20 <= seen <= kernel + 20,
          f"cpu_ms + sampler {seen:.1f} ms: not within [-3 % - 20 ms, +20 ms] of the {kernel:.1f} ms the kernel "
          "counted for the same run")


def case_wait(a, tmp):
    """The probe's run-queue wait by class: period_child's one thread spins a
    known CPU time pinned to one CPU beside a thread that never stops
    spinning there; all that time it is either on the CPU or waiting for it,
    so its wait is the spin's wall time less its CPU (less any time the CPU
    lost to interrupts or the hypervisor, which neither clock counts: 5 %,
    or what /proc/stat counted as taken meanwhile where that is more),
    plus at most the process's life outside the spin: its wait counts from
    its birth (exec and the loader, before the probe's constructor, beside
    the rival too), so the run's own wall time (from the probe's load) is
    no bound; the process's life, timed from outside, is."""
    child = os.path.join(os.path.dirname(a.child), "period_child")
    cpu = max(os.sched_getaffinity(0))
    rival = subprocess.Popen([child, f"--cpu={cpu}", "--forever"])
    try:
        c, _ = probed(a, tmp, [child, f"--cpu={cpu}", "--periods=1", "--period_ms=1", "--spin_ms=300"], {})
    finally:
        rival.kill()
        rival.wait()
    cpu_ns, wall_ns = (int(v) for v in probed.stdout.split("cpu_ns ")[1].split(" wall_ns "))
    waited = (wall_ns - cpu_ns) / 1e6
    outside = probed.life_ms - wall_ns / 1e6
    print(f"the spin: {wall_ns / 1e6:.1f} ms of wall time for {cpu_ns / 1e6:.1f} ms of CPU: {waited:.1f} ms "
          f"waiting; the probe: wait_main_ms {c['wait_main_ms']:.1f}, wait_ms {c['wait_ms']:.1f} "
          f"({outside:.1f} ms of the process's life outside the spin)")
    check(waited > 50, f"the rival did not share the CPU ({waited:.1f} ms of wait)")
    lost = max(0.05 * wall_ns / 1e6, probed.taken_ms)
    check(waited - lost <= c["wait_main_ms"] <= waited + outside,
          f"wait_main_ms {c['wait_main_ms']:.1f}, expected {waited:.1f} (- {lost:.1f}: 5 % of the spin or what was "
          f"taken from the CPUs, + {outside:.1f})")
    check(c["wait_ms"] >= c["wait_main_ms"] and c["wait_omp_ms"] == 0, "the classes do not add up")


def strict_summary(path):
    """A summary read as the Python side must be able to: valid UTF-8, valid
    JSON (no control character left raw in a string), or the test fails
    naming the bytes."""
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        fail(f"{path}: not UTF-8 ({e}): {raw[max(0, e.start - 60):e.end + 20]!r}")
    try:
        return json.loads(text)
    except ValueError as e:
        fail(f"{path}: not JSON ({e})")


# oneDNN's ISA as the summary's context reports it, read at exit from what the
# probe kept while the program ran. With a stand-in oneDNN (fake_dnnl.c,
# preloaded after the probe) whose name is Granite Rapids' (20 bytes: longer
# than a std::string holds inline, so it lives on the heap), the exit report
# must print exactly that name: a string destroyed before the report (a
# function's static made after atexit(report)) gives freed heap bytes here,
# on any CPU. The file must be valid UTF-8 JSON whatever the bytes.
LONG_ISA = "avx512_core_amx_fp16"


def case_long_isa(a, tmp):
    fake = os.path.join(os.path.dirname(a.child), "libfake_dnnl.so")
    check(os.path.exists(fake), f"{fake}: not built")
    out = os.path.join(tmp, "probe")
    os.makedirs(out)
    first = [os.environ["THREADBURN_TEST_PRELOAD"]] if os.environ.get("THREADBURN_TEST_PRELOAD") else []  # as probed()
    env = dict(os.environ, LD_PRELOAD=" ".join(first + [a.probe, fake]), THREADBURN_PROBE_DIR=out, OMP_NUM_THREADS="2")
    cmd = child_cmd(a, steps=3)
    print(f"$ LD_PRELOAD='{env['LD_PRELOAD']}' " + " ".join(cmd))
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    sys.stdout.write(p.stdout + p.stderr)
    check(p.returncode == 0, f"{cmd[0]} exited {p.returncode}")
    paths = glob.glob(os.path.join(out, "probe-*.json"))
    check(len(paths) == 1, f"{len(paths)} summaries, expected 1")
    summary = strict_summary(paths[0])
    isa = summary["context"]["dnnl_cpu_isa"]
    print(f"dnnl_cpu_isa: {isa!r}")
    check(isa == LONG_ISA, f"dnnl_cpu_isa {isa!r}, expected {LONG_ISA!r} (the stand-in oneDNN's)")
    check(summary["counters"]["regions"] == 3 * REGIONS, f"{summary['counters']['regions']} regions, expected {3 * REGIONS}")


# The rule of the probe's exit path (src/probe/probe.cc, "What the exit path
# reads"): nothing the exit report may touch is destroyed before it, so the
# probe registers no destructor at all: no static with one (function-local
# or namespace-scope), no thread_local with one. Read from the library's
# machine code: the only caller of __cxa_atexit may be atexit itself (glibc's
# wrapper, through which start() registers the report); a C++ static with a
# destructor calls it from its initialisation (a function's static from the
# function, a namespace-scope one from the file's _GLOBAL__sub_I_), a
# thread_local from __cxa_thread_atexit. Each caller is named.
def case_exit_statics(a, tmp):
    import shutil
    objdump = shutil.which("objdump")
    if not objdump:
        print("SKIP: no objdump (binutils)")
        return
    text = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", a.probe], capture_output=True, text=True,
                          check=True).stdout
    fn, callers = "?", set()
    register = re.compile(r"\s(call|jmp)\w*\s.*<(__cxa_atexit|__cxa_thread_atexit(_impl)?)(@[^>]*)?>")
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <(.*)>:$", line)
        if m:
            fn = m.group(1)
        elif register.search(line) and not fn.endswith("@plt"):
            callers.add(fn)
    print("functions that register an exit-time destructor or handler: " + (", ".join(sorted(callers)) or "none"))
    check(callers <= {"atexit"}, "the probe destroys at exit what its report may read: "
          + "; ".join(sorted(callers - {"atexit"})) + " (make each a heap object never destroyed)")


# SIGTERM (scancel, kill) ends a probed program as it would end it unprobed,
# killed by the signal, after the probe wrote its summary. The report runs in
# a normal context, never in the handler: there it would take the probe's
# mutex, which the interrupted thread may hold (regions_child's main thread
# takes it at each of its many tiny regions, most of its time), and allocate
# while the interrupted thread may be in malloc: the process hung; and a
# second signal, landing on another thread while the first wrote the report,
# ended the process mid-report. Each round sends SIGTERM at a random moment
# of the run, once or as a burst of 20 (2 ms apart); the process must die of
# SIGTERM within 20 s with a readable summary.
SIGTERM_ROUNDS, SIGTERM_BURST, SIGTERM_WAIT_S = 20, 20, 20


def case_sigterm(a, tmp):
    import random
    import select
    import signal
    rng = random.Random(45)
    # --say: a line after each step of 100 regions, flushed: the first one
    # says the probe is in place and regions are running.
    cmd = [a.child, "--seconds=60", "--regions=100", "--gap_ms=0", "--work_us=0", "--say"]
    hung = bad = 0
    first = [os.environ["THREADBURN_TEST_PRELOAD"]] if os.environ.get("THREADBURN_TEST_PRELOAD") else []  # as probed()
    for k in range(SIGTERM_ROUNDS):
        out = os.path.join(tmp, f"round{k}")
        os.makedirs(out)
        env = dict(os.environ, LD_PRELOAD=" ".join(first + [a.probe]), THREADBURN_PROBE_DIR=out, OMP_NUM_THREADS="2")
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        t0 = time.monotonic()
        if not select.select([p.stdout], [], [], 60)[0] or not p.stdout.readline():
            p.kill()
            fail(f"round {k}: no step within 60 s: {p.communicate()[1][-2000:]}")
        time.sleep(rng.uniform(0.0, 0.4))  # mid-run: the handler is in place, regions are running
        burst = SIGTERM_BURST if k % 2 else 1
        t_signal = time.monotonic()
        for _ in range(burst):  # 2 ms apart: sent at once, they would merge into one pending signal
            try:
                os.kill(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                break
            time.sleep(0.002)
        try:
            err = p.communicate(timeout=SIGTERM_WAIT_S)[1]
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            hung += 1
            print(f"round {k}: {burst} x SIGTERM: HUNG (no end within {SIGTERM_WAIT_S} s; killed)")
            continue
        path = os.path.join(out, f"probe-{p.pid}.json")
        regions = None
        if os.path.exists(path):
            regions = strict_summary(path)["counters"]["regions"]
        print(f"round {k}: {burst} x SIGTERM: exit status {rc}, ended {time.monotonic() - t_signal:.2f} s after the "
              f"first ({time.monotonic() - t0:.2f} s in all), summary "
              + (f"with {regions:.0f} regions" if regions is not None else "MISSING"))
        if rc != -signal.SIGTERM or not regions:
            bad += 1
            sys.stdout.write(err[-3000:])
    check(hung == 0 and bad == 0, f"{hung} of {SIGTERM_ROUNDS} rounds hung, {bad} did not die of SIGTERM "
          "with a summary of their regions")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=("llvm", "gomp_passive", "gomp_default", "python", "knobs", "placement", "children",
                                       "wait", "long_isa", "exit_statics", "sigterm"))
    for name in ("--probe", "--child", "--libomp", "--repo"):
        ap.add_argument(name, required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        globals()["case_" + a.case](a, tmp)
    print("OK " + a.case)


if __name__ == "__main__":
    main()
