#!/usr/bin/python3
"""`threadburn run -- CMD` and `threadburn tune -- CMD` end to end, live:

    check_tune.py CASE --repo DIR --build-dir DIR [--libomp LIB]

Each case starts bin/threadburn on real processes under the preload probe
(src/probe) and checks what it printed and wrote against what the processes
did and against the rules the commands document (docs/probe.md,
python/threadburn/analysis/decide.py):

  run_gomp      examples/sleep_step_sleep.py under libgomp: exit 0, the
                summary (regions, CPU by class, gaps), the probe's files, and
                run.csv: one row in the column order of results/README.md
                that says what was in force
  run_llvm      the same with --runtime llvm --env KMP_BLOCKTIME=50: LLVM's
                runtime served it, and each sleep shows the known answer (the
                worker spins 50 ms, then sleeps)
  tune_change   a program that sleeps what its environment says (known.py):
                the fast setting is the verdict, confirmed in fresh runs
                without the probe (the gain printed theirs), the slow one
                raced no further, within the budget
  tune_keep     every setting alike: keep plain, within a budget derived
                from the run noise the test measures first
  tune_frugal   equally fast, one spins a tenth of the CPU: balanced
                changes to it; --objective time keeps plain
  tune_undecided  run times that are mostly luck and a budget of 6 runs:
                undecided, with the runs a decision would need
  tune_failing  a tiny script that fails in some runs of one setting: those
                runs are `failed` rows with the exit status and the last
                stderr line, the tune goes on, the setting is no answer,
                and the figure is the last match of --metric; runs without
                any OpenMP region are `ok` rows that say so
  tune_resume   a tune interrupted with Ctrl-C (SIGINT to its process group)
                and continued with --resume: no run lost, none twice
  bad_input     one line on stderr and a non-zero exit, nothing lost: a
                command that is missing or not executable, a --metric that
                never matches or does not compile, a program the probe cannot
                load into, an existing --out without --force; a program that
                runs no OpenMP region gets its report (and, failing, its exit
                status after it)

Every tune case knows its answer by construction (what the program does
under each setting), checks the verdict printed, written (<stem>.verdict.json)
and recomputed by `threadburn verdict` from the CSV; `threadburn compare`
and `plot` must read the CSV (tune_change, tune_failing). The tiny scripts run no OpenMP and take a fraction of a
second each; a PyTorch run takes about a second. The cases that run PyTorch
exit 77 (skipped) when /usr/bin/python3 has no torch; the others need
only Python. Standard library only.
"""
import argparse
import csv
import json
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

PY = "/usr/bin/python3"
SKIP = 77
ALPHA = 0.05
POWER = 0.8
# The exact two-sided Mann-Whitney test reaches p < 0.05 only with 4 runs a
# side: complete separation gives p = 2 / C(2n, n), 0.1 for n = 3 and 0.029 for 4.
MIN_RUNS = 4
# Variables the commands' rows report as knobs (every variable of the knob
# table, python/threadburn/knobs.tsv): removed from the environment the tests
# give threadburn, so "unset" in a row means what it says.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
from threadburn.lib import knobs  # noqa: E402
CONTROLLED = tuple(knobs.names())


class Fail(Exception):
    pass


class Skip(Exception):
    """A case that cannot judge on this machine now (its reason printed): exit SKIP_CODE, never a pass."""


SKIP_CODE = 77  # the tests' SKIP_RETURN_CODE


def check(cond, msg):
    if not cond:
        raise Fail(msg)


def env_clean(**extra):
    env = {k: v for k, v in os.environ.items() if k not in CONTROLLED}
    env.update(extra)
    return env


def threadburn(a, args, timeout=300, env=None, echo=True):
    cmd = [os.path.join(a.repo, "bin", "threadburn")] + args
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env or env_clean())
    if echo:
        sys.stdout.write(p.stdout)
        sys.stdout.write("".join("stderr: " + ln + "\n" for ln in p.stderr.splitlines()))
    return p


def need_torch():
    # Whether /usr/bin/python3 has torch, asked of its import system without importing it (an
    # import is 1.5-2.5 s of CPU, which the case's own run pays again); a torch that is there
    # but does not import fails the case's run instead of skipping it.
    if subprocess.run([PY, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"],
                      capture_output=True).returncode != 0:
        print("SKIP: /usr/bin/python3 has no torch (Debian 12: apt install python3-torch)")
        sys.exit(SKIP)


def need_libomp(a):
    if not a.libomp or not os.path.exists(a.libomp):
        print(f"SKIP: no LLVM libomp ({a.libomp!r})")
        sys.exit(SKIP)


def read_csv(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def one_line_error(p, *must, code=2):
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    check(p.returncode == code, f"exit {p.returncode}, expected {code}")
    check(len(lines) == 1, f"expected one line on stderr, got {len(lines)}: {p.stderr!r}")
    check("error: " in lines[0], f"not an error line: {lines[0]!r}")
    for m in must:
        check(m in lines[0], f"{m!r} not in {lines[0]!r}")
    check("Traceback" not in p.stdout + p.stderr, "a traceback")
    return lines[0]


def number(text):
    return None if text in ("n/a", "") else float(text)


def close(printed, value, what, digits=4):
    """printed is value through fmt.number(value, digits): that many
    significant digits, integers from 10^digits on, 0 below 5e-4."""
    if printed is None or value is None:
        check(printed is None and value is None, f"{what}: printed {printed}, the rows give {value}")
        return
    v = abs(value)
    if v >= 10 ** digits:
        tol = 0.5
    elif v < 5e-4:
        tol = 5e-4
    else:  # half a unit in the last printed digit
        tol = 0.5 * 10 ** (math.floor(math.log10(v)) - digits + 1)
    tol *= 1.001
    check(abs(printed - value) <= tol, f"{what}: printed {printed}, the rows give {value}")


# --- what tune printed and wrote --------------------------------------------------------

def verdict_of(csv_path):
    """The tune's <stem>.verdict.json: its one workload."""
    with open(os.path.splitext(csv_path)[0] + ".verdict.json") as f:
        data = json.load(f)
    check(len(data["workloads"]) == 1, f"{len(data['workloads'])} workloads in a tune's verdict")
    return data["workloads"][0]


def check_verdict(a, p, csv_path, verdict, setting=None):
    """tune printed one verdict line and wrote it; both say verdict (and
    setting, unless None); `threadburn verdict` on the CSV says the same."""
    check(p.returncode == 0, f"tune exited {p.returncode}")
    w = verdict_of(csv_path)
    check(w["verdict"] == verdict and (setting is None or w["setting"] == setting),
          f"verdict {w['verdict']} {w['setting']}, expected {verdict} {setting}: {json.dumps(w)}")
    head = {"change": f"CHANGE to {setting}: ", "keep": f"KEEP {setting}: ", "undecided": "UNDECIDED: "}[verdict]
    check(any(ln.startswith(head) for ln in p.stdout.splitlines()), f"no line starting {head!r}")
    # The same verdict recomputed from the CSV alone: the same line, and exactly the same
    # verdict file (the rule recorded in the rows).
    again = os.path.join(os.path.dirname(csv_path), "again.json")
    q = threadburn(a, ["verdict", csv_path, "--no-write", "--export-json", again], echo=False)
    check(q.returncode == 0 and any(ln.strip().startswith(head) for ln in q.stdout.splitlines()),
          f"threadburn verdict on the CSV disagrees: {q.stdout!r}")
    with open(again) as f, open(os.path.splitext(csv_path)[0] + ".verdict.json") as g:
        recomputed, written = json.load(f), json.load(g)
    recomputed.pop("export_schema")
    for x in recomputed["workloads"]:
        x.pop("headline"), x.pop("settings")
    check(recomputed == written, "threadburn verdict on the CSV does not reproduce the verdict file exactly")
    return w


def check_compare_and_plot(a, tmp, csv_path):
    """compare reads the tune CSV (against itself: each setting's ok runs, no
    change; failed runs counted apart) and plot draws it."""
    _, rows = read_csv(csv_path)
    ok = {}
    for r in rows:
        if r["status"] == "ok" and r["phase"] != "confirm":
            ok.setdefault(r["study"], []).append(float(r["cpu_ms"]))
    p = threadburn(a, ["compare", csv_path, csv_path])
    check(p.returncode == 0, f"compare exited {p.returncode}")
    body = [ln for ln in p.stdout.splitlines() if re.search(r"\s\d+/\d+\s", ln)]
    check(len(body) == len(ok), f"compare: {len(body)} rows, expected one per setting with ok runs ({len(ok)})")
    for name, cpu in ok.items():
        line = next((ln for ln in body if f"[{name}]" in ln), None)
        check(line is not None, f"compare: no row for {name}")
        check(f" {len(cpu)}/{len(cpu)} " in line, f"compare: {name}: not its {len(cpu)} ok runs: {line}")
        check("+0.0%" in line, f"compare: {name} changed against itself: {line}")
        med = statistics.median(cpu)
        text = f"{med:.4g}" if med < 1e4 else f"{med:.0f}"
        check(text in line.split(), f"compare: {name}: CPU median {text} missing from {line!r}")
    failed = sum(1 for r in rows if r["status"] == "failed")
    if failed:
        check(f"not compared: {failed} failed, 0 skipped rows" in p.stdout,
              "compare does not say it left the failed runs out")
    out_dir = os.path.join(tmp, "plots")
    p = threadburn(a, ["plot", csv_path, "--out-dir", out_dir])
    check(p.returncode == 0, f"plot exited {p.returncode}")
    png = os.path.join(out_dir, "tune.png")
    check(os.path.exists(png), "plot wrote no tune.png")
    with open(png, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "tune.png is not a PNG")


def write_points(tmp, points):
    """points: [(name, runtime, {VAR: value})] as a --points TOML file."""
    path = os.path.join(tmp, "points.toml")
    with open(path, "w") as f:
        for name, runtime, env in points:
            f.write(f'[[point]]\nname = "{name}"\nruntime = "{runtime}"\n')
            if env:
                f.write("env = {" + ", ".join(f'{k} = "{v}"' for k, v in env.items()) + "}\n")
    return path


# --- run ------------------------------------------------------------------------------

def readme_columns(repo):
    """The column order results/README.md gives for rows of run and tune."""
    with open(os.path.join(repo, "results", "README.md")) as f:
        text = f.read()

    def table_after(title):
        part = text[text.index(title):]
        part = part[part.index("\n|"):]
        cols = []
        for ln in part.splitlines()[3:]:
            if not ln.startswith("|"):
                break
            cols += re.findall(r"`([^`]+)`", ln.split("|")[1])
        return cols
    lead = table_after("### Lead columns")
    run_cols = [c for c in table_after("### Run columns") if c not in ("repetition", "proc_index", "repro")]
    counters = table_after("#### Counters of the preload probe")
    return lead, counters, run_cols


def run_example(a, tmp, extra_args, script_args):
    out = os.path.join(tmp, "run")
    cmd = [PY, os.path.join(a.repo, "examples", "sleep_step_sleep.py"), "--steps=2", "--sleep_s=0.25",
           f"--log={tmp}/ckpt.log"] + script_args
    p = threadburn(a, ["run", "--build-dir", a.build_dir, "--out", out] + extra_args + ["--"] + cmd)
    check(p.returncode == 0, f"run exited {p.returncode}")
    check(p.stderr.strip() == "", "run wrote to stderr")
    files = sorted(os.listdir(out))
    probes = [f for f in files if re.fullmatch(r"probe-\d+\.json", f)]
    check(len(probes) == 1, f"expected one probed process, files: {files}")
    stem = probes[0].removesuffix(".json")
    for suffix in (".timeline.csv", ".gaps.csv"):
        check(stem + suffix in files, f"no {stem + suffix}")
    # The one timeline format (src/core/timeline.h): the probe's series, per-thread ones included.
    with open(os.path.join(out, stem + ".timeline.csv")) as f:
        lines = f.read().splitlines()
    # Its first line carries the burn threshold the run's rows state (the probe's one rule).
    with open(os.path.join(out, "run.csv"), newline="") as f:
        threshold = next(csv.DictReader(f))["burn_threshold_cores"]
    header = f"# threadburn timeline 1; origin=program_start; burn_threshold_cores={threshold}"
    check(threshold != "" and lines[:2] == [header, "t_ms,series,cores"],
          f"timeline header: {lines[:2]} (threshold {threshold!r})")
    series = {ln.split(",")[1] for ln in lines[2:]}
    check({"in_region", "others", "main", "class:omp", "children"} <= series, f"timeline series: {sorted(series)[:8]}")
    check(any(s.startswith("thread:") and s.endswith(":omp") for s in series), "no per-thread OpenMP series")
    check("run.csv" in files and "timeline.png" in files, f"no run.csv or timeline.png: {files}")
    with open(os.path.join(out, "timeline.png"), "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "timeline.png is not a PNG")
    with open(os.path.join(out, probes[0])) as f:
        summary = json.load(f)
    header, rows = read_csv(os.path.join(out, "run.csv"))
    check(len(rows) == 1, f"run.csv has {len(rows)} rows")
    row = rows[0]

    # The column order of results/README.md.
    lead, counters, run_cols = readme_columns(a.repo)
    check(header[:len(lead)] == lead, f"lead columns {header[:len(lead)]}, README: {lead}")
    knobs = header[len(lead):header.index("processes")]
    check(all(k.isupper() for k in knobs) and knobs, f"knob columns {knobs}")
    # (cuda_sync: the CUDA wait policy asked, where the probe reports the one in force)
    flags = ["command", "metric_better"] + (["cuda_sync"] if "cuda_sync_in_force" in header else [])
    check(header[header.index("processes") + 1:header.index("repetition")] == flags, f"flags: {', '.join(flags)}")
    check(header[header.index("proc_index") + 1:header.index("extra_counters")] == counters,
          "counter columns differ from results/README.md's probe counters")
    # (The README's table of run columns is not in the header's order.)
    check(sorted(header[header.index("extra_context") + 1:-1]) == sorted(run_cols) and header[-1] == "repro",
          "run columns differ from the README")
    with open(os.path.join(a.repo, "python", "threadburn", "schema_version.txt")) as f:
        version = f.read().strip()
    check(row["schema_version"] == version and row["threadburn_schema_version"] == version, "schema version")
    check(row["status"] == "ok" and row["reason"] == "" and row["exit_code"] == "0", "status")
    check(row["bench"] == "command" and row["command"] == " ".join(cmd), f"command {row['command']!r}")
    for k, v in summary["counters"].items():  # the row is the probe's summary (no value, null: an empty cell)
        check(row[k] == "" if v is None else row[k] != "" and abs(float(row[k]) - v) <= 1e-6 * max(1, abs(v)),
              f"{k}: row {row[k]}, probe {v}")
    for k in (k for k in knobs if f"env_{k}" in row):
        check(row[k] == row[f"env_{k}"], f"knob {k} is {row[k]!r}, the process saw {row[f'env_{k}']!r}")

    # The summary printed: regions, CPU by class, gaps, as the row has them.
    text = p.stdout
    c = summary["counters"]
    check(f"(pid {summary['pid']})" in text, "the summary names another process")
    m = re.search(r"settings in force: (\S+) with (\d+) threads", text)
    check(m and m.group(1) == row["omp_runtime"] and m.group(2) == row["omp_max_threads"],
          f"settings line vs row: {m and m.groups()} / {row['omp_runtime']}, {row['omp_max_threads']}")
    m = re.search(r"regions: (\d+) \(.*largest team (\d+)", text)
    check(m and int(m.group(1)) == c["regions"] > 0 and int(m.group(2)) == c["max_team"] == 2,
          f"regions line: {m and m.groups()}, counters {c['regions']}, team {c['max_team']}")
    m = re.search(r"OpenMP workers \((\d+)\)\s+(\S+)\s+(\S+)\s+(\S+)", text)
    check(m and int(m.group(1)) == c["threads_omp"] == 1, "OpenMP workers row: one worker")
    close(number(m.group(2)), c["cpu_omp_ms"], "workers' CPU", digits=3)
    m = re.search(r"gaps without a region \(>= 1 ms\): (\d+), median", text)
    check(m and int(m.group(1)) == c["gaps"], f"gaps line: {m and m.group(1)}, counters {c['gaps']}")
    with open(os.path.join(out, stem + ".gaps.csv")) as f:
        gaps = [{k: float(v) for k, v in g.items()} for g in csv.DictReader(f)]
    check(int(c["gaps"]) == sum(1 for g in gaps if g["measured"] == 1), "gaps counter vs .gaps.csv")
    sleeps = [g for g in gaps if g["length_ms"] >= 200]  # 250 ms sleeps
    check(len(sleeps) >= 3, f"{len(sleeps)} gaps of a sleep, expected >= 3 (2 per step, the last may be open)")
    return row, text, sleeps


def case_run_gomp(a, tmp):
    need_torch()
    row, _, sleeps = run_example(a, tmp, [], ["--threads=2"])
    check(row["runtime"] == "gomp" and row["omp_runtime"] == "libgomp", "libgomp did not serve it")
    check(row["OMP_NUM_THREADS"] == "unset", f"OMP_NUM_THREADS column {row['OMP_NUM_THREADS']!r}: not given")
    # libgomp's default: a worker spins its spin count after a region, then
    # sleeps: a tail of 1..50 ms (docs/design.md, "Known answers"); only at
    # the full count (libgomp throttles it with more threads than CPUs).
    if row["gomp_spincount_in_force"] == "300000":
        for g in sleeps:
            if g["open"] == 0:
                check(1 <= g["omp_tail_ms"] <= 50, f"libgomp's spin ended {g['omp_tail_ms']} ms into a sleep")


def case_run_llvm(a, tmp):
    need_torch()
    need_libomp(a)
    b = 50
    row, text, sleeps = run_example(a, tmp, ["--runtime", "llvm", "--libomp", a.libomp, "--env", f"KMP_BLOCKTIME={b}",
                                             "--env", "OMP_NUM_THREADS=2"], [])
    check(row["runtime"] == "llvm" and row["omp_runtime"] == "llvm-libomp", f"served by {row['omp_runtime']}")
    check(row["omp_library"] == a.libomp or os.path.realpath(row["omp_library"]) == os.path.realpath(a.libomp),
          f"library {row['omp_library']}")
    check(row["KMP_BLOCKTIME"] == row["env_KMP_BLOCKTIME"] == str(b) and row["kmp_blocktime_ms"] == str(b),
          f"KMP_BLOCKTIME {row['KMP_BLOCKTIME']}, in force {row['kmp_blocktime_ms']}")
    check(row["OMP_NUM_THREADS"] == "2" and a.libomp in row["env_LD_PRELOAD"], "environment")
    check(f"settings in force: llvm-libomp with 2 threads, blocktime {b} ms, wait policy default, " in text,
          "settings line")
    # The worker spins b ms of wall time after the last region before each
    # sleep: CPU plus run-queue wait = b, however busy the machine; the edge
    # interval (boundary_ms) is split by time, hence its slack.
    for g in sleeps:
        if g["open"] == 0:
            spun = g["omp_cpu_ms"] + g["others_wait_ms"]
            slack = 0.03 * b + g["boundary_ms"] + 1.0
            check(abs(spun - b) <= slack, f"a sleep shows {spun:.2f} ms of spin, expected {b} +- {slack:.2f}")


# --- tune -----------------------------------------------------------------------------

def tune(a, tmp, points, reps, cmd, extra=(), out=None, seed=7, env=None):
    out = out or os.path.join(tmp, "tune.csv")
    pts = write_points(tmp, points)
    args = ["tune", "--build-dir", a.build_dir, "--points", pts, "--repetitions", str(reps), "--seed", str(seed),
            "--out", out] + (["--libomp", a.libomp] if a.libomp else []) + list(extra) + ["--"] + cmd
    return threadburn(a, args, env=env), out


# A program that runs no OpenMP region: sleeps as long as OMP_NUM_THREADS
# says, prints two figures (the last one counts); --burn MS spins MS of CPU
# unless OMP_WAIT_POLICY=passive or GOMP_SPINCOUNT is set (as an OpenMP
# team's spin would); --count FILE makes the 1st and 3rd run with
# OMP_NUM_THREADS=1 fail (exit 3, a last stderr line); --sleep-share S sleeps
# S of the figure it prints (where --metric judges the figure, not the time).
TINY = r'''
import os, sys, time
args = sys.argv[1:]
opt = lambda name: args[args.index(name) + 1] if name in args else None
n = os.environ.get("OMP_NUM_THREADS", "unset")
if opt("--count") and n == "1":
    with open(opt("--count"), "a+") as f:
        f.seek(0)
        count = len(f.read()) + 1
        f.write("x")
    if count in (1, 3):
        print("tiny: starting", file=sys.stderr)
        print(f"tiny: cannot run with OMP_NUM_THREADS=1 (run {count})", file=sys.stderr)
        sys.exit(3)
burn = float(opt("--burn") or 0) / 1000
if os.environ.get("OMP_WAIT_POLICY") != "passive" and "GOMP_SPINCOUNT" not in os.environ:
    t0 = time.thread_time()
    while time.thread_time() - t0 < burn:
        pass
ms = {"1": 20, "2": 150}.get(n, float(os.environ.get("TINY_SLEEP_MS", "300")))
time.sleep(ms * float(opt("--sleep-share") or 1) / 1000)
print("figure: 0")
print(f"figure: {ms:g}")
'''


def tiny(tmp):
    path = os.path.join(tmp, "tiny.py")
    with open(path, "w") as f:
        f.write(TINY)
    return path


def case_tune_failing(a, tmp):
    points = [("plain", "gomp", {}), ("threads=1", "gomp", {"OMP_NUM_THREADS": 1}),
              ("threads=2", "gomp", {"OMP_NUM_THREADS": 2})]
    counter = os.path.join(tmp, "count")
    # The verdict reads the figures the runs print (--metric), not their time: each run sleeps a
    # tenth of its figure (2, 15, 30 ms), not all of it (the 27 runs slept 5.0 s in all).
    p, out = tune(a, tmp, points, 5, [PY, tiny(tmp), "--count", counter, "--sleep-share", "0.1"],
                  ["--metric", r"figure: ([0-9.]+)", "--metric-better", "lower", "--objective", "time"])
    check(p.returncode == 0, f"tune exited {p.returncode}: it must go on past failed runs")
    _, rows = read_csv(out)
    # a fixed design confirms in one look of confirmation.CONFIRM_MIN runs each (6: the fewest whose sign
    # test reaches the first look's level)
    check(len(rows) == 15 + 12, f"{len(rows)} rows: 5 runs of 3 settings, then 6 + 6 to confirm")
    rows = [r for r in rows if r["phase"] == "race"]
    failed = [r for r in rows if r["status"] == "failed"]
    check(sorted(int(r["repetition"]) for r in failed) == sorted(
        int(r["repetition"]) for r in sorted((r for r in rows if r["study"] == "threads=1"),
                                             key=lambda r: int(r["order_index"]))[0:3:2]),
          "the failed rows are not the 1st and 3rd runs of threads=1")
    for r in failed:
        check(r["study"] == "threads=1" and r["exit_code"] == "3", f"{r['run_key']}: exit {r['exit_code']}")
        check(re.fullmatch(r"exit code 3: tiny: cannot run with OMP_NUM_THREADS=1 \(run [13]\)", r["reason"]),
              f"{r['run_key']}: reason {r['reason']!r}")
        check(r["metric"] == "", f"{r['run_key']}: a figure for a failed run")
    for r in rows:
        if r["status"] == "ok":
            want = {"1": "20", "2": "150"}.get(r["OMP_NUM_THREADS"], "300")
            check(r["metric"] == want, f"{r['run_key']}: figure {r['metric']}, expected the last match {want}")
            # No region ran: recorded as such, not as zeros that look measured.
            check(r["regions"] == "0" and r["reason"].startswith("note: no OpenMP region"),
                  f"{r['run_key']}: regions {r['regions']}, reason {r['reason']!r}")
    # The figures are exact here, so the rule's answer is known: threads=1's
    # successful runs (20) would beat every other, but a setting whose runs
    # fail is no answer; threads=2 (150 in every run, plain 300) is.
    w = check_verdict(a, p, out, "change", "threads=2")
    check("threads=1" in w["why"] or "threads=1" in json.dumps(w), "the failing setting is not named")
    check_compare_and_plot(a, tmp, out)


# A program whose best setting is known by construction: it sleeps
# KA_SLEEP_MS (default 200) while a second thread spins KA_SPIN_MS of CPU
# (default 40), both read from its environment; with KA_COUNTER=FILE its
# k-th run sleeps 100, 600 or 300 ms ((k + KA_OFFSET) mod 3) instead: a run
# time that is mostly luck.
KNOWN = r'''
import os, threading, time
env = lambda k, d: float(os.environ.get(k, d))
sleep = env("KA_SLEEP_MS", 200)
if os.environ.get("KA_COUNTER"):
    with open(os.environ["KA_COUNTER"], "a+") as f:
        f.seek(0)
        k = len(f.read()) + int(env("KA_OFFSET", 0))
        f.write("x")
    sleep = (100, 600, 300)[k % 3]
spin = env("KA_SPIN_MS", 40) / 1000
def burn():
    t0 = time.thread_time()
    while time.thread_time() - t0 < spin:
        pass
t = threading.Thread(target=burn)
t.start()
time.sleep(sleep / 1000)
t.join()
'''


def known(tmp):
    path = os.path.join(tmp, "known.py")
    with open(path, "w") as f:
        f.write(KNOWN)
    return [PY, path]


def race(a, tmp, points, extra=(), name="race.csv"):
    pts = write_points(tmp, points)
    out = os.path.join(tmp, name)
    args = ["tune", "--build-dir", a.build_dir, "--points", pts, "--seed", "7", "--out", out] + list(extra)
    return threadburn(a, args + ["--"] + known(tmp), env=env_clean()), out


def case_tune_change(a, tmp):
    """fast sleeps 130 ms where plain sleeps 200: the race selects fast (slow,
    300 ms, gets no runs past the first rounds) and fresh runs without the
    probe confirm it: change to fast, the gain printed the fresh runs'."""
    points = [("plain", "gomp", {}), ("fast", "gomp", {"KA_SLEEP_MS": 130}), ("slow", "gomp", {"KA_SLEEP_MS": 300})]
    p, out = race(a, tmp, points, ["--budget", "30"])
    w = check_verdict(a, p, out, "change", "fast")
    check(w["gain_from"] == "confirmation", f"the gain printed is not the fresh runs': {w['gain_from']}")
    check(w["time_ratio"]["high"] < 1 / 1.05, f"the interval {w['time_ratio']} does not clear the margin")
    check(w["env"] == {"KA_SLEEP_MS": "130"}, f"env to set: {w['env']}")
    _, rows = read_csv(out)
    race_rows = [r for r in rows if r["phase"] == "race"]
    confirm = [r for r in rows if r["phase"] == "confirm"]
    check(len(race_rows) + len(confirm) <= 30, "the tune spent more than its budget")
    check(sum(1 for r in race_rows if r["study"] == "slow") <= 3, "slow (300 ms) raced past the first rounds")
    check(sorted({r["study"] for r in confirm}) == ["fast", "plain"] and len(confirm) >= 10,
          f"confirmation runs: {[(r['study'], r['status']) for r in confirm]}")
    check(all(r["regions"] == "" and r["cpu_ms"] != "" for r in confirm),
          "a confirmation run under the probe, or without its CPU")
    check(w["confirmation"]["holds"] == "yes", f"the gain did not hold without the probe: {w['confirmation']}")
    check("confirmation, " in p.stdout and "the gain holds in fresh runs" in p.stdout, "no confirmation lines")
    check_compare_and_plot(a, tmp, out)


def noise_cv(cmd, runs=6):
    """The run-to-run coefficient of variation of a command's wall time on
    this machine now, measured by running it `runs` times."""
    walls = []
    for _ in range(runs):
        t0 = time.monotonic()
        subprocess.run(cmd, env=env_clean(), check=True, capture_output=True)
        walls.append(time.monotonic() - t0)
    return statistics.stdev(walls) / statistics.fmean(walls)


def keep_budget(cv, settings, margin=0.05):
    """Runs a race of `settings` alike settings needs to show every one
    within the margin of the baseline on time, at a run noise of cv: the
    schedule's first look whose interval (paired, alpha spent by the rule's
    table, split over settings and balanced's two claims) is at most half
    the room to the margin, so the known answer shows also where the noise
    is twice what was measured. The CPU needs no runs here: the program burns
    under 5 % of a core, the rule's floor. Between 60 and 400 runs."""
    from scipy import stats
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from threadburn.lib import rule as rules
    r = rules.Rule()
    sd = math.sqrt(2) * cv
    for look, n in enumerate(rules.LOOK_SCHEDULE, 1):
        if n < rules.START_RUNS:
            continue
        a_each = r.alpha_per_test(settings, look)
        if stats.t.ppf(1 - a_each, n - 1) * 2 * sd / math.sqrt(n) <= 0.5 * math.log1p(margin):
            return max(60, min(400, settings * (n + 1)))
    return 400


def case_tune_keep(a, tmp):
    """Every setting sleeps 800 ms and spins 40: keep plain. (800 ms, so that
    the interpreter's start-up jitter is a few % of a run, also on a busy
    machine.) The budget follows from the run noise measured first
    (keep_budget), not from this machine's luck."""
    points = [("plain", "gomp", {"KA_SLEEP_MS": 800}), ("same1", "gomp", {"KA_SLEEP_MS": 800}),
              ("same2", "gomp", {"KA_SLEEP_MS": 800, "KA_SPIN_MS": 40})]
    cmd = known(tmp)
    cv = noise_cv(cmd, runs=6)
    budget = keep_budget(cv, len(points))
    print(f"tune_keep: run noise {cv:.2%}: a budget of {budget} runs", flush=True)
    p, out = race(a, tmp, points, ["--budget", str(budget)])
    check_verdict(a, p, out, "keep", "plain")
    _, rows = read_csv(out)
    check(len(rows) <= budget, f"{len(rows)} runs for a budget of {budget}")
    check(not any(r["phase"] == "confirm" for r in rows), "confirmation runs for a keep")


def case_tune_frugal(a, tmp):
    """Equally fast (the spin runs beside the sleep), frugal spins 10 ms of
    CPU where plain spins 100: balanced changes to frugal for its CPU."""
    points = [("plain", "gomp", {"KA_SPIN_MS": 100}), ("frugal", "gomp", {"KA_SPIN_MS": 10})]
    p, out = race(a, tmp, points, ["--budget", "40", "--confirm", "0"])
    w = check_verdict(a, p, out, "change", "frugal")
    check(w["cpu_ratio"]["high"] < 1 / 1.05 and w["time_ratio"]["high"] < 1.05,
          f"not 'not slower and less CPU': time {w['time_ratio']}, CPU {w['cpu_ratio']}")
    # The time objective cannot pick it: equally fast is no change.
    p, out = race(a, tmp, points, ["--budget", "40", "--confirm", "0", "--objective", "time"], name="time.csv")
    check_verdict(a, p, out, "keep", "plain")


def case_tune_undecided(a, tmp):
    """Run times that are mostly luck (100, 600, 300 ms for plain; 600, 300,
    100 for the other) and a budget of 6 runs: paired by round the ratios are
    6, 1/2 and 1/3, their mean ratio about 1 with an interval far wider than
    the margin: neither change nor keep can be shown. (With the same luck for
    both, as this case first had, each round's pair is alike and the paired
    test rightly keeps: it went red that way in a fresh clone's CI.)"""
    points = [("plain", "gomp", {"KA_COUNTER": os.path.join(tmp, "c1")}),
              ("other", "gomp", {"KA_COUNTER": os.path.join(tmp, "c2"), "KA_OFFSET": 1})]
    p, out = race(a, tmp, points, ["--budget", "6"])
    w = check_verdict(a, p, out, "undecided")
    check(w["open"] and all(o["runs_needed"] is None or o["runs_needed"] > 3 for o in w["open"]),
          f"open comparisons {w['open']}")
    _, rows = read_csv(out)
    check(len(rows) == 6, f"{len(rows)} runs for a budget of 6")
    check("leaves no room for fresh runs to confirm a change" in p.stdout, "a budget of 6 and no word of it")


def case_tune_resume(a, tmp):
    points = [("plain", "gomp", {}), ("passive", "gomp", {"OMP_WAIT_POLICY": "passive"})]
    reps, stop_after = 3, 2
    pts = write_points(tmp, points)
    out = os.path.join(tmp, "tune.csv")
    args = [os.path.join(a.repo, "bin", "threadburn"), "tune", "--build-dir", a.build_dir, "--points", pts,
            "--repetitions", str(reps), "--out", out, "--objective", "cpu", "--", PY, tiny(tmp)]
    print("$ " + " ".join(args))
    # A session of its own: SIGINT to the group, as Ctrl-C in a terminal
    # reaches the tune and the run in flight alike.
    # A shell that started this test in the background may have left SIGINT ignored, and a child
    # inherits that: the tune gets the default disposition back, as in a terminal.
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=env_clean(TINY_SLEEP_MS="400"),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    rows = 0
    while rows < stop_after and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
        rows = len(read_csv(out)[1]) if os.path.exists(out) else 0
    check(rows >= stop_after and proc.poll() is None, f"the tune ended or stalled before {stop_after} runs")
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    sys.stdout.write(stdout + stderr)
    check(proc.returncode == 130, f"interrupted tune exited {proc.returncode}, expected 130")
    check(f"continue with --resume --out {out}" in stdout, "no word on how to continue")
    with open(out, "rb") as f:
        before = f.read()
    kept = read_csv(out)[1]
    check(len(kept) < len(points) * reps, "the tune finished before the interrupt")
    check(all(r["status"] == "ok" for r in kept), "the interrupted run was recorded: " +
          "; ".join(f"{r['run_key']} {r['status']} {r['reason']}" for r in kept if r["status"] != "ok"))
    check(not os.path.exists(os.path.join(tmp, ".tune.csv.work")), "the work folder was left behind")
    seed = kept[0]["seed"]
    p = threadburn(a, ["tune", "--build-dir", a.build_dir, "--points", pts, "--repetitions", str(reps), "--out", out,
                       "--resume", "--objective", "cpu", "--", PY, tiny(tmp)], env=env_clean(TINY_SLEEP_MS="400"))
    check(p.returncode == 0, f"resumed tune exited {p.returncode}")
    check(f"{len(kept)} runs already in {out}; seed {seed}" in p.stdout, "the resume did not take the file's runs and seed")
    with open(out, "rb") as f:
        after = f.read()
    check(after.startswith(before), "the resume changed the rows it kept")
    # The whole file now: every run once, the seed's order, and the report
    # (the resume printed progress only for the runs it made).
    total = len(points) * reps
    _, rows = read_csv(out)
    race_keys = [r["run_key"] for r in rows if r["phase"] == "race"]
    check(sorted(race_keys) == sorted(f"{n}-r{i}" for n, _, _ in points for i in range(reps)),
          f"runs after the resume: {sorted(race_keys)}")
    check(len({r["seed"] for r in rows}) == 1, "two seeds in one file")
    check(p.stdout.count(" rep ") == total - len(kept), "the resume reported runs it did not make")


def case_bad_input(a, tmp):
    base = ["--build-dir", a.build_dir]
    out_dir = os.path.join(tmp, "out")
    # A command that is not there or cannot be executed: refused before anything runs.
    script = os.path.join(tmp, "not_executable.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    for cmd, must in ((["no-such-command-here"], "no-such-command-here: command not found"),
                      ([os.path.join(tmp, "missing.py")], "missing.py: command not found"),
                      ([script], "not_executable.sh: not an executable file"),
                      ([tmp], ": not an executable file")):
        one_line_error(threadburn(a, ["run"] + base + ["--out", out_dir, "--"] + cmd), must)
        one_line_error(threadburn(a, ["tune"] + base + ["--out", out_dir + ".csv", "--"] + cmd), must)
        check(not os.path.exists(out_dir) and not os.path.exists(out_dir + ".csv"), "bad input wrote files")

    # A program without any OpenMP region (a GPU training may start none): its report, the regions said
    # to be none, not reported as zeros.
    for cmd in (["/bin/sleep", "0.2"], [PY, "-c", "print('no torch here')"]):
        shutil.rmtree(out_dir, ignore_errors=True)
        p = threadburn(a, ["run"] + base + ["--out", out_dir, "--"] + cmd)
        check(p.returncode == 0 and p.stderr == "", f"exit {p.returncode}, stderr {p.stderr!r}")
        check("regions: no OpenMP region" in p.stdout and "regions: 0" not in p.stdout and "all (cpu_ms)" in p.stdout,
              "no report of a program without regions")
    # ... and one that fails before any region: its report, then its failure.
    shutil.rmtree(out_dir, ignore_errors=True)
    p = threadburn(a, ["run"] + base + ["--out", out_dir, "--", PY, "-c",
                                        "import sys; print('tiny: gave up', file=sys.stderr); sys.exit(3)"])
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    check(p.returncode == 1 and lines == ["tiny: gave up", "run: the command ended with exit code 3"],
          f"exit {p.returncode}, stderr {p.stderr!r}: the program's line, then its exit")
    # A program the probe cannot load into (statically linked).
    static = next((s for s in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(s)
                   and b"/ld-linux" not in open(s, "rb").read(4096)), None)
    if static:
        shutil.rmtree(out_dir, ignore_errors=True)
        one_line_error(threadburn(a, ["run"] + base + ["--out", out_dir, "--", static, "--version"]),
                       "the probe did not load")

    # A --metric that never matches: stops after the first run, with one line;
    # the file holds its header, ready for --resume.
    points = [("plain", "gomp", {}), ("passive", "gomp", {"OMP_WAIT_POLICY": "passive"})]
    csv_path = os.path.join(tmp, "nomatch.csv")
    p, _ = tune(a, tmp, points, 4, [PY, tiny(tmp)], ["--metric", r"samples/s: ([0-9.]+)"], out=csv_path,
                env=env_clean(TINY_SLEEP_MS="10"))
    one_line_error(p, "--metric", "no match", "run ")
    check(not re.search(r"^\[\d+/", p.stdout, re.M), "a run was reported after the one without a match")
    check(read_csv(csv_path)[1] == [], "rows written though no run was measured")
    # One that is not a regular expression: refused before any run.
    csv_path = os.path.join(tmp, "badrx.csv")
    p, _ = tune(a, tmp, points, 4, [PY, tiny(tmp)], ["--metric", "samples/s: ([0-9.]+"], out=csv_path)
    one_line_error(p, "--metric", "not a regular expression")
    check(not os.path.exists(csv_path) and "tune: " not in p.stdout, "runs started with a bad --metric")

    # An existing --out is kept unless --force: run's folder and tune's file.
    shutil.rmtree(out_dir, ignore_errors=True)
    os.makedirs(out_dir)
    with open(os.path.join(out_dir, "keep.txt"), "w") as f:
        f.write("mine\n")
    one_line_error(threadburn(a, ["run"] + base + ["--out", out_dir, "--", "/bin/sleep", "0.1"]),
                   "exists; pass --force")
    check(os.listdir(out_dir) == ["keep.txt"], "run touched an existing --out")
    csv_path = os.path.join(tmp, "existing.csv")
    with open(csv_path, "w") as f:
        f.write("mine\n")
    p, _ = tune(a, tmp, points, 4, [PY, tiny(tmp)], [], out=csv_path)
    one_line_error(p, "exists; pass --resume to continue it or --force to replace it")
    with open(csv_path) as f:
        check(f.read() == "mine\n", "tune touched an existing --out")
    # --force replaces the folder.
    p = threadburn(a, ["run"] + base + ["--out", out_dir, "--force", "--", "/bin/sleep", "0.1"])
    check(p.returncode == 0 and not os.path.exists(os.path.join(out_dir, "keep.txt")), "--force kept the old files")


def run_main(doc, names, extra=()):
    """The check scripts' command line: CASE --repo --build-dir [--libomp]
    (and the `extra` required options); runs case_CASE of `names` (a
    module's globals) in a temporary folder and prints OK, FAIL or SKIP."""
    cases = [n[5:] for n in names if n.startswith("case_")]
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("case", choices=cases)
    ap.add_argument("--repo", required=True)
    ap.add_argument("--build-dir", required=True)
    for option in extra:
        ap.add_argument(option, required=True)
    ap.add_argument("--libomp", default="")
    a = ap.parse_args()
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            names["case_" + a.case](a, tmp)
        except Fail as e:
            print(f"FAIL {a.case}: {e}")
            return 1
        except Skip as e:
            print(f"SKIP {a.case}: {e}")
            return SKIP_CODE
    print(f"OK {a.case} ({time.monotonic() - t0:.1f} s)")
    return 0


def main():
    return run_main(__doc__, globals())


if __name__ == "__main__":
    sys.exit(main())
