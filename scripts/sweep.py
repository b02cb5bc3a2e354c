#!/usr/bin/env python3
"""Run a sweep grid from configs/ and append tidy rows to a results CSV.

    scripts/sweep.py default                     # configs/default.toml
    scripts/sweep.py configs/blocktime.toml --repetitions 9 --seed 7
    scripts/sweep.py default --dry-run           # list points + repro lines
    scripts/sweep.py default --resume            # finish the newest default CSV

One fresh process per (environment point, repetition): OpenMP reads its
environment once, at start-up. Runs are shuffled so slow drift of the machine
(thermal, other tenants) spreads over all points instead of biasing the last.
Every run's rows are written with one write + fsync; the file only ever
holds complete runs, so a sweep killed at any moment resumes with --resume
without losing or duplicating rows. Standard library only.
"""
import argparse
import csv
import glob
import io
import json
import os
import random
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from datetime import datetime, timezone

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from threadburn_py import grid as gridmod  # noqa: E402
from threadburn_py import results, schema  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_LIBOMP = "/usr/lib/x86_64-linux-gnu/libomp.so.5"
HEADER = ",".join(schema.COLUMNS) + "\n"  # column names never need quoting
# Google Benchmark's own numeric entry fields: not counters.
GB_FIELDS = {"family_index", "per_family_instance_index", "repetitions",
             "repetition_index", "iterations", "real_time", "cpu_time"}


class SweepError(Exception):
    """A problem found before or between runs; printed as one line, exit 2."""


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("grid", help="grid name in configs/ (default, seed000, ...) or a .toml path")
    p.add_argument("--build-dir", default="build",
                   help="CMake build dir holding bench/<name>_bench (default: build)")
    p.add_argument("--libomp", default=DEFAULT_LIBOMP,
                   help="LLVM OpenMP runtime preloaded for runtime=llvm "
                        f"(default: {DEFAULT_LIBOMP})")
    p.add_argument("--out", help="results CSV (default: results/<grid>-<host>-<timestamp>.csv)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true",
                      help="continue --out (default: the newest results/<grid>-<host>-*.csv), "
                           "skipping runs it already holds")
    mode.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--seed", type=int, help="seed of the run order (printed; default: random)")
    p.add_argument("--repetitions", type=int, help="override the grid's repetitions")
    p.add_argument("--timeout", type=int, help="per-run timeout in s (default: grid's, else 300)")
    p.add_argument("--timeline", action="store_true", help="save burn timelines for every point")
    p.add_argument("--match", help="only points whose label or repro line matches this regex")
    p.add_argument("--dry-run", action="store_true", help="list the points and exit")
    p.add_argument("--no-plot", action="store_true", help="do not run plot.py at the end")
    p.add_argument("--strict", action="store_true", help="exit 1 if any run failed")
    args = p.parse_args(argv)
    for name in ("repetitions", "timeout"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name}: expected an integer >= 1, got {value}")
    return args


def grid_path(name):
    if os.path.exists(name) or name.endswith(".toml"):
        return name
    return os.path.join(REPO, "configs", name + ".toml")


def utc_now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def binary_path(build_dir, bench):
    return os.path.join(build_dir, "bench", f"{bench}_bench")


def repro_line(point, binary, libomp, inherited, benchmark=None):
    """One shell line reproducing a point (without the JSON output flags);
    with benchmark, only that one of the point's benchmarks."""
    setenv, unset = point.child_env(libomp)
    parts = []
    leaked = [k for k in unset if k in inherited]
    if leaked:
        parts.append("env " + " ".join(f"-u {k}" for k in leaked))
    parts += [f"{k}={shlex.quote(v)}" for k, v in setenv.items()]
    parts.append(shlex.quote(binary))
    parts += [shlex.quote(a) for a in point.bench_args()]
    if benchmark and len(point.expected_benchmarks()) > 1:
        # Benchmark names hold only [A-Za-z0-9_/:], all literal in GB's regex.
        parts.append(shlex.quote(f"--benchmark_filter=^{benchmark}$"))
    line = " ".join(parts)
    if point.processes > 1:
        line = f"for i in $(seq {point.processes}); do {line} & done; wait"
    return line


# --- the results file ---------------------------------------------------------

def create_results(path):
    """A new file holding only the header, put in place atomically."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    _replace_contents(path, HEADER.encode())


class SignalsHeld:
    """Hold Ctrl-C / SIGTERM while a results file is being written, so an
    interrupt lands between whole runs, never inside one."""
    SIGNALS = {signal.SIGINT, signal.SIGTERM}

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)


def _replace_contents(path, data):
    tmp = f"{path}.tmp{os.getpid()}"
    with SignalsHeld():
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)


def repair_for_resume(path):
    """Drop a trailing partial line and any run with fewer rows than it
    announced (run_rows); returns (finished run keys, seed of the file)."""
    with open(path, "rb") as f:
        data = f.read()
    if not data.startswith(HEADER.encode()):
        raise SweepError(f"{path}: header differs from this sweep's schema "
                         f"(version {schema.SCHEMA_VERSION}); write to a new --out")
    complete = data[:data.rfind(b"\n") + 1]
    lines = complete[len(HEADER):].split(b"\n")[:-1]
    parsed = [next(csv.reader([ln.decode()])) for ln in lines]
    idx = {c: i for i, c in enumerate(schema.COLUMNS)}
    counts, announced = {}, {}
    for fields in parsed:
        if len(fields) != len(schema.COLUMNS):
            raise SweepError(f"{path}: a row has {len(fields)} fields, expected "
                             f"{len(schema.COLUMNS)}; not a file this script wrote")
        key = fields[idx["run_key"]]
        counts[key] = counts.get(key, 0) + 1
        announced[key] = int(fields[idx["run_rows"]])
    done = {k for k, n in counts.items() if n == announced[k]}
    kept = [ln for ln, fields in zip(lines, parsed) if fields[idx["run_key"]] in done]
    if len(kept) != len(lines) or len(complete) != len(data):
        _replace_contents(path, HEADER.encode() + b"".join(ln + b"\n" for ln in kept))
        print(f"sweep: {path}: dropped {len(lines) - len(kept)} rows of unfinished runs"
              + (" and a partial line" if len(complete) != len(data) else ""))
    seeds = {fields[idx["seed"]] for fields in parsed if fields[idx["seed"]]}
    return done, (int(seeds.pop()) if len(seeds) == 1 else None)


def append_rows(path, rows):
    """All rows of one run with a single write + fsync: a kill leaves either
    all of them or (at worst) a partial last line that resume drops."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in rows:
        writer.writerow([schema.fmt_value(row.get(c)) for c in schema.COLUMNS])
    data = buf.getvalue().encode()
    with SignalsHeld():
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)


# --- running one (point, repetition) --------------------------------------------

def _die_with_parent():
    # If the sweep is SIGKILLed, its benchmarks must not run on and skew the
    # next sweep's numbers: ask the kernel to kill them too (Linux prctl).
    try:
        import ctypes
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Children:
    """Benchmark processes alive right now, so Ctrl-C can stop them."""
    procs = []

    @classmethod
    def kill_all(cls):
        for proc in cls.procs:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
        cls.procs = []


def describe_exit(code):
    if code is not None and code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def last_line(path):
    try:
        with open(path, errors="replace") as f:
            lines = [ln.strip() for ln in f.read()[-4000:].splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""


def run_once(point, rep, ctx):
    """Start the point's processes at once, wait (with timeout), make rows."""
    run_key = f"{point.key}-r{rep}"
    binary = binary_path(ctx["build_dir"], point.bench)
    setenv, unset = point.child_env(ctx["libomp"])
    env = {k: v for k, v in os.environ.items() if k not in schema.CONTROLLED_ENV}
    env.update(setenv)
    work = os.path.join(ctx["work_dir"], run_key)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    started, start_t = utc_now(), time.monotonic()
    launched = []
    for i in range(point.processes):
        tl_dir = threads_file = None
        if point.timeline:
            tl_dir = os.path.join(ctx["timeline_dir"], f"{run_key}-p{i}")
            shutil.rmtree(tl_dir, ignore_errors=True)
            os.makedirs(tl_dir)
        if point.threads_csv:
            os.makedirs(ctx["threads_dir"], exist_ok=True)
            threads_file = os.path.join(ctx["threads_dir"], f"{run_key}-p{i}.csv")
        out_json = os.path.join(work, f"p{i}.json")
        argv = [binary] + point.bench_args(tl_dir, threads_file) + [
            "--benchmark_format=json", f"--benchmark_out={out_json}",
            "--benchmark_out_format=json"]
        with open(os.path.join(work, f"p{i}.out"), "wb") as out, \
                open(os.path.join(work, f"p{i}.err"), "wb") as err:
            proc = subprocess.Popen(argv, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                    start_new_session=True, preexec_fn=_die_with_parent)
        Children.procs.append(proc)
        launched.append({"proc": proc, "json": out_json, "err": os.path.join(work, f"p{i}.err"),
                         "timeline_dir": tl_dir, "threads_file": threads_file, "end": None})
    deadline = start_t + point.timeout_s
    while any(p["end"] is None for p in launched):
        for p in launched:
            if p["end"] is None and p["proc"].poll() is not None:
                p["end"] = time.monotonic()
        if time.monotonic() > deadline:
            Children.kill_all()
            for p in launched:
                if p["end"] is None:
                    p["end"], p["timed_out"] = time.monotonic(), True
            break
        time.sleep(0.02)
    Children.procs = []
    finished = utc_now()
    base = dict(point.knobs(), schema_version=schema.SCHEMA_VERSION, run_key=run_key,
                grid=point.grid, study=point.study, preset=point.preset, repetition=rep,
                point_key=point.key, seed=ctx["seed"], order_index=ctx["order_index"],
                started_at=started, finished_at=finished)
    rows = []
    for i, p in enumerate(launched):
        proc_base = dict(base, proc_index=i, exit_code=p["proc"].returncode,
                         wall_s=round(p["end"] - start_t, 3))
        rows += process_rows(point, proc_base, p, p.get("timed_out", False), ctx)
    shutil.rmtree(work, ignore_errors=True)
    for row in rows:
        row["run_rows"] = len(rows)
        row["repro"] = repro_line(point, binary, ctx["libomp"], os.environ, row["benchmark"])
    return rows


def process_rows(point, base, launched, timed_out, ctx):
    """Rows of one benchmark process: one per benchmark it reported, or one
    failed row per expected benchmark if it reported nothing usable."""
    code = launched["proc"].returncode
    if timed_out:
        return failed_rows(point, base, f"timeout after {point.timeout_s} s")
    try:
        with open(launched["json"]) as f:
            report = json.load(f)
        entries = [e for e in report.get("benchmarks", []) if e.get("run_type") != "aggregate"]
    except (OSError, ValueError, AttributeError) as e:
        why = describe_exit(code) if code != 0 else f"no readable JSON ({type(e).__name__})"
        tail = last_line(launched["err"])
        return failed_rows(point, base, why + (f": {tail}" if tail else ""))
    if not entries:
        return failed_rows(point, base, f"{describe_exit(code)}; the JSON lists no benchmarks")
    context = report.get("context", {})
    rows = []
    for entry in entries:
        row = dict(base, benchmark=entry.get("name", ""))
        row.update(context_columns(context))
        fill_entry(row, entry)
        if row["status"] == "ok" and code != 0:
            row.update(status="failed", reason=f"{describe_exit(code)} after reporting: "
                       + last_line(launched["err"]))
        if row["status"] == "ok":
            check_effective(point, row)
        add_files(row, entry, launched, ctx)
        rows.append(row)
    return rows


def failed_rows(point, base, reason):
    rows = []
    for name, knobs in point.expected_benchmarks():
        rows.append(dict(base, benchmark=name, status="failed", reason=reason, **knobs))
    return rows


def context_columns(context):
    out, extra = {}, []
    known = dict(schema.CONTEXT_COLUMNS)
    for key, value in context.items():
        if key in known:
            out[known[key]] = value
        elif key not in schema.IGNORED_CONTEXT:
            extra.append(f"{key}={schema.fmt_value(value)}")
    out["extra_context"] = ";".join(extra)
    return out


def fill_entry(row, entry):
    row.update(gridmod.parse_benchmark_name(entry.get("name", "")))
    for key in ("iterations", "real_time", "cpu_time", "time_unit"):
        row[key] = entry.get(key)
    extra = []
    for key, value in entry.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool) or key in GB_FIELDS:
            continue
        if key in schema.COUNTER_COLUMNS:
            row[key] = value
        elif key in schema.KNOB_COUNTERS:
            if row.get(key) in (None, ""):
                row[key] = value
        else:
            extra.append(f"{key}={schema.fmt_value(value)}")
    row["extra_counters"] = ";".join(extra)
    if entry.get("error_occurred"):
        message = str(entry.get("error_message", "")).strip()
        row["status"] = "skipped" if message.startswith("skipped:") else "failed"
        row["reason"] = message or "error_occurred without a message"
    else:
        row["status"], row["reason"] = "ok", ""


def check_effective(point, row):
    """Distrust a row whose process did not run the runtime it was asked to:
    its knob columns would describe a setting nobody measured."""
    live = row.get("omp_runtime", "")
    wanted = {"gomp": "libgomp", "llvm": "llvm-libomp"}[point.runtime]
    if live in ("libgomp", "llvm-libomp") and live != wanted:
        row.update(status="failed", reason=f"asked for runtime {point.runtime} but the "
                   f"process reports {live} ({row.get('omp_library', '?')})")
        return
    notes = []
    ignored = [k for k in str(row.get("ignored_knobs", "")).split(",")
               if k in point.env and point.env[k] != schema.UNSET]
    if ignored:
        notes.append("the process reports ignoring " + ",".join(ignored))
    # The driver may refuse a wait policy (e.g. a context that already exists).
    in_force = row.get("cuda_sync_in_force", "")
    if point.cuda_sync not in ("", "auto") and in_force in schema.CUDA_SYNC \
            and in_force != point.cuda_sync:
        notes.append(f"asked for cuda_sync {point.cuda_sync} but {in_force} is in force")
    if notes:
        row["reason"] = "note: " + "; ".join(notes)


# Name components Google Benchmark appends to the registered name; a program
# may name its timeline file after the name without them.
GB_NAME_SUFFIX = re.compile(r"/(manual_time|real_time|iterations:\d+|repeats:\d+|threads:\d+"
                            r"|min_time:[0-9.]+s?|min_warmup_time:[0-9.]+s?)$")


def timeline_candidates(name):
    names = [name]
    while GB_NAME_SUFFIX.search(names[-1]):
        names.append(GB_NAME_SUFFIX.sub("", names[-1]))
    return [re.sub(r"[/: ]", "_", n) + ".timeline.csv" for n in names]


def add_files(row, entry, launched, ctx):
    if launched["timeline_dir"]:
        for candidate in timeline_candidates(str(entry.get("name", ""))):
            path = os.path.join(launched["timeline_dir"], candidate)
            if os.path.exists(path):
                row["timeline_file"] = os.path.relpath(path, ctx["csv_dir"])
                break
    if launched["threads_file"] and os.path.exists(launched["threads_file"]):
        row["threads_file"] = os.path.relpath(launched["threads_file"], ctx["csv_dir"])


# --- main -----------------------------------------------------------------------

def choose_out(args, grid_name):
    host = re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"
    if args.out:
        return args.out
    if args.resume:
        results_dir = os.path.join(REPO, "results")
        pattern = re.compile(re.escape(f"{grid_name}-{host}-") + r"\d{8}-\d{6}\.csv")
        found = sorted(f for f in os.listdir(results_dir) if pattern.fullmatch(f)) \
            if os.path.isdir(results_dir) else []
        if not found:
            raise SweepError(f"--resume: no results/{grid_name}-{host}-*.csv to resume; "
                             "name one with --out")
        return os.path.join(results_dir, found[-1])
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return os.path.join(REPO, "results", f"{grid_name}-{host}-{stamp}.csv")


def load_points(args):
    # The build dir's CMakeCache.txt says whether TBB / oneDNN were built in.
    settings, points = gridmod.load_grid(grid_path(args.grid), args.build_dir)
    for point in points:
        if args.repetitions:
            point.repetitions = args.repetitions
        if args.timeout:
            point.timeout_s = args.timeout
        if args.timeline:
            point.timeline = True
    if args.match:
        rx = re.compile(args.match)
        points = [p for p in points if rx.search(p.label) or rx.search(
            repro_line(p, binary_path(args.build_dir, p.bench), args.libomp, os.environ))]
        if not points:
            raise SweepError(f"--match {args.match!r}: no point matches")
    return settings, points


def dry_run(settings, points, args, seed):
    runs = sum(p.repetitions for p in points)
    print(f"grid {settings['name']}: {len(points)} points, {runs} runs "
          f"(one process per run, shuffled with seed {seed})")
    for point in points:
        print(f"{point.key}  x{point.repetitions}  {point.label}"
              + ("  [timeline]" if point.timeline else ""))
        print("    " + repro_line(point, binary_path(args.build_dir, point.bench),
                                  args.libomp, os.environ))


def check_ready(points, args, out):
    for bench in sorted({p.bench for p in points}):
        path = binary_path(args.build_dir, bench)
        if not os.access(path, os.X_OK):
            raise SweepError(f"{path}: benchmark program not found; build it "
                             "(cmake --build build) or pass --build-dir")
    if any(p.runtime == "llvm" for p in points) and not os.path.exists(args.libomp):
        raise SweepError(f"--libomp {args.libomp}: not found (Debian: apt install libomp-dev)")
    if os.path.exists(out) and not (args.resume or args.force):
        raise SweepError(f"{out}: exists; pass --resume to continue it or --force to replace it")
    if args.resume and not os.path.exists(out):
        raise SweepError(f"{out}: --resume: no such file")


def fmt_duration(seconds):
    seconds = int(round(seconds))
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def run_plots(out):
    plot_python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    plot_dir = os.path.splitext(out)[0] + ".plots"
    result = subprocess.run([plot_python, os.path.join(REPO, "scripts", "plot.py"), out,
                             "--out-dir", plot_dir], capture_output=True, text=True)
    if result.returncode != 0:
        print(f"sweep: plots not made: {last_text_line(result.stderr)}")
        return None
    return plot_dir


def last_text_line(text):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else "plot.py failed"


def resume_command(out, seed):
    argv, skip = [], False
    for arg in sys.argv:
        if skip:
            skip = False
        elif arg in ("--out", "--seed"):
            skip = True
        elif arg not in ("--resume", "--force") and not arg.startswith(("--out=", "--seed=")):
            argv.append(arg)
    return " ".join(shlex.quote(a) for a in argv + ["--resume", "--out", out,
                                                    "--seed", str(seed)])


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def sweep(args):
    settings, points = load_points(args)
    done, file_seed, out = set(), None, None
    if not args.dry_run:
        out = choose_out(args, settings["name"])
        check_ready(points, args, out)
        for stale in glob.glob(glob.escape(out) + ".tmp*"):  # left by a SIGKILL mid-rename
            os.remove(stale)
        if args.resume:
            done, file_seed = repair_for_resume(out)
        else:
            create_results(out)
    seed = next(s for s in (args.seed, file_seed, settings["seed"],
                            random.SystemRandom().randrange(1, 2 ** 31)) if s is not None)
    if args.dry_run:
        dry_run(settings, points, args, seed)
        return 0
    runs = [(p, r) for p in points for r in range(p.repetitions)]
    random.Random(seed).shuffle(runs)
    todo = [(i, p, r) for i, (p, r) in enumerate(runs) if f"{p.key}-r{r}" not in done]
    stem = os.path.splitext(out)[0]
    ctx = {"build_dir": args.build_dir, "libomp": args.libomp, "seed": seed,
           "csv_dir": os.path.dirname(os.path.abspath(out)),
           "work_dir": os.path.join(os.path.dirname(os.path.abspath(out)),
                                    "." + os.path.basename(stem) + ".work"),
           "timeline_dir": stem + ".timelines", "threads_dir": stem + ".threads"}
    shutil.rmtree(ctx["work_dir"], ignore_errors=True)
    print(f"sweep: {settings['name']}: {len(runs)} runs of {len(points)} points, "
          f"{len(runs) - len(todo)} already in {out}; seed {seed} (--seed {seed} repeats "
          "this order)", flush=True)
    failed = 0
    t0 = time.monotonic()
    try:
        for n, (order_index, point, rep) in enumerate(todo, 1):
            ctx["order_index"] = order_index
            rows = run_once(point, rep, ctx)
            append_rows(out, rows)
            statuses = sorted({r["status"] for r in rows})
            failed += any(r["status"] == "failed" for r in rows)
            elapsed = time.monotonic() - t0
            eta = elapsed / n * (len(todo) - n)
            why = next((r["reason"] for r in rows if r["status"] != "ok"), "")
            print(f"[{len(runs) - len(todo) + n}/{len(runs)}] {point.label} rep {rep}: "
                  f"{'/'.join(statuses)} ({max(r['wall_s'] for r in rows):.1f} s)"
                  f"{' ' + why[:120] if why else ''} | ETA {fmt_duration(eta)}", flush=True)
    except KeyboardInterrupt:
        Children.kill_all()
        shutil.rmtree(ctx["work_dir"], ignore_errors=True)
        print(f"\nsweep: interrupted; {out} holds every finished run. Continue with: "
              f"{resume_command(out, seed)}", file=sys.stderr)
        return 130
    shutil.rmtree(ctx["work_dir"], ignore_errors=True)
    print(f"sweep: results in {out}")
    if not args.no_plot:
        plot_dir = run_plots(out)
        if plot_dir:
            print(f"sweep: plots in {plot_dir}")
    print(results.summary_text(results.read_rows(out)))
    return 1 if (args.strict and failed) else 0


def main(argv=None):
    args = parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # clean up like Ctrl-C
    try:
        return sweep(args)
    except (gridmod.GridError, SweepError, results.ResultsError) as e:
        print(f"sweep: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `sweep.py default --dry-run | head`
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
