#!/usr/bin/python3
"""tune --in-run against the process-level tune on programs whose best
setting is known by construction (tests/bench/check_inrun.py's known answers):
the verdict each way, whether it is right, and the wall time to it; quiet
and with a core kept busy (a shell loop that never sleeps, as
scripts/soak.sh's busy rounds):

    bench/inrun_agreement.py [--build-dir build] [--inrun-reps 10] [--process-reps 3]
                             [--startup-s 3] [--only NAME[,NAME]] [--conditions quiet,busy]
                             [--ways in-run,process] [--append] [--out results/inrun-agreement.csv]

The known answers (tests/cpp/regions_child, tests/cpp/fake_cuda/device_training):
  team_up    fixed parallel work a region (its threads sleep their parts),
             passive workers, OMP_NUM_THREADS=1: T2 about twice as fast               -> CHANGE to T2
  team_down  regions of 1 us, OMP_NUM_THREADS=2: the fork costs more than the
             work                                                     -> CHANGE to T1
  nothing    one thread sleeps 10 ms, the others return, passive      -> KEEP
  blocktime  LLVM, a team of 2 the program names, regions 50 ms apart, a
             process spinning on one core beside it: blocktime 0 or 1
             beats LLVM's 200 ms                                      -> CHANGE to llvm-bt0 / llvm-bt1
  gpu        the stand-in CUDA driver's simulated device, 20 ms steps each
             ending in a wait                                         -> CHANGE to cuda-blocking_sync
And real trainings, written the way people write them, at their own defaults
(Debian's PyTorch 1.13 starts at one thread on a 2-CPU machine), each with
its truth measured first by the process-level tune (its most common verdict
over --process-reps; the in-run tune is right where it agrees):
  word_lm    examples/word_language_model.py (pytorch/examples' word-level
             LSTM language model), judged by its own "ms/batch" lines
  mnist      examples/mnist_adadelta.py (pytorch/examples' MNIST CNN) fed
             by a DataLoader with 2 worker processes, each "step N: loss"
             line a unit of work (--progress lines)
Every program first works --startup-s seconds on its main thread before
its first region or device work (a program's imports and initialisation:
~1-2 s for a CPU PyTorch training here, 4-5 s for a CUDA one on the H200
of results/gpu-check-h200.txt, 12-15 s as users report it): the in-run tune
pays it once, the process-level one in every run; with none, the in-run
way's own fixed costs (the warm-up, the settle times) weigh the more.
Each way tries the same settings: the in-run tune those it finds (the
program's own, the team sizes, the blocktimes, the wait policies), the
process-level one the same as a --points file (plain, T1/T2, llvm-bt*),
or, for the GPU training, plain alone with the wait policies tune adds
itself. The in-run program runs up to 90 s and is stopped at the verdict;
the process-level one runs about a second a process (--steps). Seeds
differ per repetition. The time to a verdict: from the command's start to
the verdict line (in-run: "decided in one run"; process-level: its end).
Rows: one per tune (results/README.md, "inrun-agreement.csv"). Standard
library only."""
import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tests", "bench"))
import check_inrun  # noqa: E402  (the known answers' programs: one definition for the tests and this)
LIBOMP = "/usr/lib/x86_64-linux-gnu/libomp.so.5"
IN_RUN_SECONDS = "--seconds=90"
STARTUP_S = 3.0
# With a core kept busy, team_down's own setting (2 threads, libgomp's spinning barrier at each of
# a step's 2000 regions of 1 us) waits out the neighbour's time slices at every region: one process
# of 25 steps ran over 200 s here (quiet: 0.1 s). Its process-level runs then do 2 steps.
BUSY_PROCESS_STEPS = {"team_down": "--steps=2"}


def regions_child(b, *args):
    return [os.path.join(b, "tests", "cpp", "regions_child"), *args]


def point(name, runtime, env):
    return (f'[[point]]\nname = "{name}"\nruntime = "{runtime}"\nenv = {{'
            + ", ".join(f'{k} = "{v}"' for k, v in env.items()) + "}\n")


# The real trainings' programs and how a tune reads their progress; their right answer is the
# process-level tune's (None: measured first, see main).
PY = "/usr/bin/python3"
REAL = ("word_lm", "mnist")


def answers(b, startup_s=STARTUP_S):
    """name -> (program args for in-run, program args for a ~1 s process, env, points or None, tune flags, right)."""
    fakes = os.path.join(b, "tests", "fake_cuda")
    start = f"--startup_ms={startup_s * 1000:g}"
    gpu_start = f"--startup-ms={startup_s * 1000:g}"
    (nap, up1), (tiny, gomp2), (sleep, passive2), (bt, _) = (check_inrun.PROGRAMS[n] for n in (
        "team_up", "team_down", "nothing", "blocktime"))
    up2, gomp1 = dict(up1, OMP_NUM_THREADS="2"), {"OMP_NUM_THREADS": "1"}
    return {
        "team_up": (regions_child(b, *nap, start, IN_RUN_SECONDS), regions_child(b, *nap, start, "--steps=25"), up1,
                    point("plain", "gomp", up1) + point("T2", "gomp", up2), [], {("change", "T2")}),
        "team_down": (regions_child(b, *tiny, start, IN_RUN_SECONDS), regions_child(b, *tiny, start, "--steps=25"),
                      gomp2,
                      point("plain", "gomp", gomp2) + point("T1", "gomp", gomp1), [], {("change", "T1")}),
        "nothing": (regions_child(b, *sleep, start, IN_RUN_SECONDS), regions_child(b, *sleep, start, "--steps=10"),
                    passive2,
                    point("plain", "gomp", passive2) + point("T1", "gomp", dict(passive2, OMP_NUM_THREADS="1")),
                    [], {("keep", "plain")}),
        "blocktime": (regions_child(b, *bt, start, IN_RUN_SECONDS), regions_child(b, *bt, start, "--steps=25"),
                      gomp2,
                      "".join(point(n, "llvm", dict(gomp2, KMP_BLOCKTIME=v))
                              for n, v in (("plain", "200"), ("llvm-bt0", "0"), ("llvm-bt1", "1"))),
                      ["--runtime", "llvm", "--libomp", LIBOMP], {("change", "llvm-bt0"), ("change", "llvm-bt1")}),
        "gpu": ([os.path.join(fakes, "device_training"), gpu_start, "--steps=3000"],
                [os.path.join(fakes, "device_training"), gpu_start, "--steps=30"],
                {"LD_LIBRARY_PATH": fakes, "FAKE_NVML_SAMPLES": "device"},
                point("plain", "gomp", {}).replace("env = {}\n", ""), [], {("change", "cuda-blocking_sync")}),
        # Real trainings at their own thread count against two threads: truth measured first.
        "word_lm": ([PY, os.path.join(REPO, "examples", "word_language_model.py"), "--log-interval=2",
                     "--seconds=120"],
                    [PY, os.path.join(REPO, "examples", "word_language_model.py"), "--log-interval=2",
                     "--seconds=8"], {},
                    point("plain", "gomp", {}).replace("env = {}\n", "") + point("T2", "gomp", {"OMP_NUM_THREADS": "2"}),
                    ["--metric", r"ms/batch +([0-9.]+)", "--metric-better", "lower"], None),
        "mnist": ([PY, os.path.join(REPO, "examples", "mnist_adadelta.py"), "--feed=loader", "--workers=2",
                   "--log-interval=1", "--steps=100000"],
                  [PY, os.path.join(REPO, "examples", "mnist_adadelta.py"), "--feed=loader", "--workers=2",
                   "--log-interval=1", "--steps=40"], {},
                  point("plain", "gomp", {}).replace("env = {}\n", "") + point("T2", "gomp", {"OMP_NUM_THREADS": "2"}),
                  ["--metric", r"samples/s: ([0-9.]+)", "--metric-better", "higher"], None),
    }


def flags_for(name, way, flags):
    """The tune flags of a way: mnist's in-run tune counts its step lines (its samples/s comes at its end)."""
    if name == "mnist" and way == "in-run":
        return ["--metric", r"step [0-9]+: loss", "--progress", "lines"]
    return flags


def env_clean(extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "KMP_", "GOMP_", "THREADBURN_", "FAKE_")) and k != "LD_PRELOAD"}
    return dict(env, **extra)


def verdict_of(out):
    """(verdict, the setting it names, the rule version that decided) of a tune's verdict file."""
    with open(os.path.splitext(out)[0] + ".verdict.json") as f:
        v = json.load(f)
    w = v["workloads"][0]
    return w["verdict"], w["setting"] if w["verdict"] == "change" else (
        w["baseline"] if w["verdict"] == "keep" else ""), v["rule"]["version"]


def in_run(b, tmp, program, env, flags, seed, stem):
    out = os.path.join(tmp, f"{stem}-inrun-{seed}.csv")
    cmd = [os.path.join(REPO, "bin", "threadburn"), "tune", "--in-run", "--build-dir", b, "--block", "0.3",
           "--seed", str(seed), "--out", out, *flags, "--", *program]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    decided, tail = None, []
    for line in p.stdout:
        tail = (tail + [line])[-40:]
        if decided is None and line.startswith("tune --in-run: decided in one run"):
            decided = time.monotonic() - t0
        if line.startswith("tune: verdict in "):
            os.killpg(p.pid, signal.SIGTERM)  # the program dies with it
    p.wait()
    if decided is None:
        sys.stdout.write("".join(tail))
        return "failed", "", "", time.monotonic() - t0
    return (*verdict_of(out), decided)


def process_level(b, tmp, program, env, points, flags, seed, stem):
    out = os.path.join(tmp, f"{stem}-process-{seed}.csv")
    path = os.path.join(tmp, f"{stem}-points-{seed}.toml")
    with open(path, "w") as f:
        f.write(points)
    cmd = [os.path.join(REPO, "bin", "threadburn"), "tune", "--build-dir", b, "--points", path, "--seed", str(seed),
           "--out", out, *flags, "--", *program]
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    took = time.monotonic() - t0
    if p.returncode != 0:
        sys.stdout.write(p.stdout[-3000:] + p.stderr[-2000:])
        return "failed", "", "", took
    return (*verdict_of(out), took)


def main():
    # A SIGTERM (pkill) unwinds like Ctrl-C, so the finally blocks stop the busy-core loops:
    # left running, they sat beside every later measurement on the machine.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--inrun-reps", type=int, default=10)
    ap.add_argument("--process-reps", type=int, default=3)
    ap.add_argument("--startup-s", type=float, default=STARTUP_S,
                    help="seconds each program works before its first region or device work (default %(default)g)")
    ap.add_argument("--only", help="the known answers to run (comma-separated)")
    ap.add_argument("--conditions", default="quiet,busy")
    ap.add_argument("--out", default=os.path.join(REPO, "results", "inrun-agreement.csv"))
    ap.add_argument("--ways", default="in-run,process", help="the ways to run (default %(default)s)")
    ap.add_argument("--append", action="store_true", help="add to --out's rows rather than replace them")
    ap.add_argument("--summary", metavar="CSV", help="print the summary of a file this wrote, and nothing else")
    a = ap.parse_args()
    if a.summary:
        with open(a.summary, newline="") as f:
            summary([[*r[:3], int(r[3]), int(r[4]), *r[5:8], float(r[8])] for r in list(csv.reader(f))[1:]])
        return 0
    b = os.path.abspath(a.build_dir)
    cases = answers(b, a.startup_s)
    names = a.only.split(",") if a.only else list(cases)
    header = ["answer", "condition", "way", "rep", "seed", "verdict", "setting", "right", "seconds", "startup_s",
              "rule_version"]
    rows = []
    # Each row written as it comes (a long benchmark stopped keeps what it measured); --append adds
    # to a file this wrote before (other answers or conditions).
    fresh = not (a.append and os.path.exists(a.out))
    out = open(a.out, "w" if fresh else "a", newline="")
    w = csv.writer(out, lineterminator="\n")
    if fresh:
        w.writerow(header)
    with tempfile.TemporaryDirectory() as tmp:
        for condition in a.conditions.split(","):
            spinner = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if condition == "busy" else None
            try:
                for name in names:
                    inrun_prog, proc_prog, extra, points, flags, right = cases[name]
                    if condition == "busy" and name in BUSY_PROCESS_STEPS:
                        proc_prog = [x for x in proc_prog if not x.startswith("--steps=")] + [BUSY_PROCESS_STEPS[name]]
                    rival = None
                    # The blocktime answer's condition is one core taken by another process: its own
                    # neighbour, on one core; with a core kept busy that loop is the neighbour (as in
                    # check_inrun.py: a second one contests both cores, beyond the known answer).
                    if name == "blocktime" and not spinner:
                        rival = check_inrun.start_rival()
                    try:
                        env = env_clean(extra)
                        truth = None
                        # A real training's truth first: the process-level tune, then the in-run one.
                        order = (("process", a.process_reps), ("in-run", a.inrun_reps)) if right is None else (
                            ("in-run", a.inrun_reps), ("process", a.process_reps))
                        for way, reps in order:
                            if way not in a.ways.split(","):
                                continue
                            for rep in range(reps):
                                seed, stem = 1000 + rep, f"{name}-{condition}"
                                if way == "in-run":
                                    verdict, setting, version, secs = in_run(b, tmp, inrun_prog, env,
                                                                             flags_for(name, way, flags), seed, stem)
                                else:
                                    verdict, setting, version, secs = process_level(b, tmp, proc_prog, env, points,
                                                                                    flags, seed, stem)
                                if right is None and way == "in-run" and truth is None:
                                    truth = measured_truth(rows, name, condition)
                                # A real training's process-level tunes are its truth, not judged.
                                is_truth = right is None and way == "process"
                                ok = (verdict, setting) in (right if right is not None else truth or set())
                                rows.append([name, condition, way, rep, seed, verdict, setting,
                                             "truth" if is_truth else "yes" if ok else "no", round(secs, 1),
                                             # a real training starts as it does: no --startup-s of ours
                                             f"{a.startup_s:g}" if right is not None else "", version])
                                w.writerow(rows[-1])
                                out.flush()
                                print(f"{name:10s} {condition:5s} {way:7s} rep {rep}: {verdict} {setting} "
                                      f"({'truth' if is_truth else 'right' if ok else 'WRONG'}) in {secs:.1f} s",
                                      flush=True)
                    finally:
                        if rival:
                            rival.kill()
                            rival.wait()
            finally:
                if spinner:
                    spinner.kill()
                    spinner.wait()
    out.close()
    print(f"inrun_agreement: wrote {a.out}")
    with open(a.out, newline="") as f:
        summary([[*r[:3], int(r[3]), int(r[4]), *r[5:8], float(r[8])] for r in list(csv.reader(f))[1:]])


def measured_truth(rows, name, condition):
    """A real training's right answer: the process-level tunes' most common verdict (ties: none)."""
    import collections
    got = collections.Counter((r[5], r[6]) for r in rows if (r[0], r[1], r[2]) == (name, condition, "process")
                              and r[5] != "failed").most_common(2)
    if not got or (len(got) == 2 and got[0][1] == got[1][1]):
        return set()
    return {got[0][0]}


def summary(rows):
    """Per answer and condition: right / tunes each way, how many in-run verdicts agree with
    the process-level tunes' most common one (a change to either of two right settings counts
    as the same), the median seconds to a verdict each way, and their ratio."""
    import collections
    import statistics
    right_sets = {name: c[-1] for name, c in answers("").items()}

    def answer(r):
        right = right_sets.get(r[0])
        if right is None:  # a real training: its truth is the process-level tunes' (measured_truth)
            right = measured_truth(rows, r[0], r[1])
        return "right" if (r[5], r[6]) in right else f"{r[5]} {r[6]}".strip()
    keys = sorted({(r[0], r[1]) for r in rows}, key=lambda k: (k[1], k[0]))
    print(f"{'answer':10s} {'cond.':5s}  {'in-run right':>12s} {'median s':>8s}  {'process right':>13s} "
          f"{'median s':>8s}  {'agree':>6s}  {'time ratio':>10s}")
    for name, cond in keys:
        per = {way: [r for r in rows if (r[0], r[1], r[2]) == (name, cond, way)] for way in ("in-run", "process")}
        med = {w: statistics.median(r[8] for r in rs) if rs else float("nan") for w, rs in per.items()}
        right = {w: "truth" if rs and rs[0][7] == "truth" else f"{sum(r[7] == 'yes' for r in rs)}/{len(rs)}"
                 for w, rs in per.items()}
        common = collections.Counter(answer(r) for r in per["process"]).most_common(1)
        agree = f"{sum(answer(r) == common[0][0] for r in per['in-run'])}/{len(per['in-run'])}" if common else "-"
        print(f"{name:10s} {cond:5s}  {right['in-run']:>12s} {med['in-run']:8.1f}  {right['process']:>13s} "
              f"{med['process']:8.1f}  {agree:>6s}  {med['in-run'] / med['process']:10.2f}")


if __name__ == "__main__":
    sys.exit(main())
