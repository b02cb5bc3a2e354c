"""threadburn sweep: run a grid (configs/*.toml) and append tidy rows to a CSV.

One fresh process per (environment point, repetition): OpenMP reads its
environment once, at start-up. Runs are shuffled so slow drift of the machine
(thermal, other tenants) spreads over all points instead of biasing the last.
Every run's rows are written with one write + fsync, so the file only ever
holds complete runs: a sweep killed at any moment continues with --resume,
losing and duplicating nothing. The P copies of a `processes = P` point start
together and wait for each other before each benchmark (--barrier); each row
records how much of its timed window the other copies overlapped.
"""
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

from . import fmt, grid as gridmod, paths, results, schema, slurm, slurm_sweep
from .errors import ThreadburnError
from .programs import programs as build_programs

# Google Benchmark's own numeric entry fields: not counters.
GB_FIELDS = {"family_index", "per_family_instance_index", "repetitions", "repetition_index",
             "iterations", "real_time", "cpu_time", "threads"}


def add_parser(sub):
    p = sub.add_parser("sweep", help="run a grid of settings, one fresh process per point",
                       description=__doc__, formatter_class=_raw())
    p.add_argument("grid", help="grid name in configs/ (default, seed000, ...) or a .toml path")
    p.add_argument("--build-dir", help="CMake build dir holding the programs (default: build)")
    p.add_argument("--libomp", default=paths.LIBOMP, help="LLVM OpenMP runtime preloaded for runtime = "
                   f'"llvm" (default: {paths.LIBOMP})')
    p.add_argument("--out", help="results CSV (default: runs/<grid>-<host>-<time>.csv)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue --out (default: the newest "
                      "runs/<grid>-<host>-*.csv), skipping the runs it already holds")
    mode.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--seed", type=int, help="seed of the run order (printed; default: random)")
    p.add_argument("--repetitions", type=_positive, help="override the grid's repetitions")
    p.add_argument("--timeout", type=_positive, help="per-run timeout in s (default: the grid's)")
    p.add_argument("--timeline", action="store_true", help="save burn timelines for every point")
    p.add_argument("--match", help="only points whose label or repro line matches this regex")
    p.add_argument("--dry-run", action="store_true", help="list the points and their benchmarks, run nothing")
    p.add_argument("--no-plot", action="store_true", help="make no plots at the end")
    p.add_argument("--strict", action="store_true", help="exit 1 if any run failed")
    s = p.add_argument_group("Slurm: the runs as one job array, for a fleet (docs/slurm.md)")
    s.add_argument("--slurm", action="store_true", help="submit the runs as a Slurm job array, wait, merge "
                   "the rows into --out (with --resume: submit only the runs without rows)")
    s.add_argument("--partition", help="sbatch --partition")
    s.add_argument("--nodelist", help="sbatch --nodelist (e.g. node[01-04])")
    s.add_argument("--constraint", help="sbatch --constraint (node features, e.g. a CPU type)")
    s.add_argument("--time", dest="time_limit", help="sbatch --time per task (e.g. 30, 1:00:00)")
    s.add_argument("--sbatch", action="append", default=[], metavar="OPTIONS",
                   help="more sbatch options, shell-quoted (repeatable)")
    s.add_argument("--runs-per-task", type=_positive, default=1, help="runs per array task (default 1)")
    s.add_argument("--max-parallel", type=_positive, help="at most this many tasks at once (array %%N)")
    s.add_argument("--shared", action="store_true", help="no --exclusive: tasks may share a node "
                   "(their numbers then include each other's load)")
    s.add_argument("--detach", action="store_true", help="submit and return; collect later with --merge")
    s.add_argument("--merge", action="store_true", help="only merge the rows that arrived into --out")
    p.set_defaults(run=main)
    return p


SLURM_ONLY = ("partition", "nodelist", "constraint", "time_limit", "max_parallel", "detach", "merge", "shared")


def check_slurm_args(args):
    if args.slurm:
        if args.merge and args.detach:
            raise ThreadburnError("--merge and --detach: pick one")
        return
    used = [name for name in SLURM_ONLY if getattr(args, name)] + (["sbatch"] if args.sbatch else []) \
        + (["runs_per_task"] if args.runs_per_task != 1 else [])
    if used:
        raise ThreadburnError(f"--{used[0].replace('_', '-').replace('time-limit', 'time')} needs --slurm")


def _raw():
    import argparse
    return argparse.RawDescriptionHelpFormatter


def _positive(text):
    import argparse
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def grid_path(name):
    if os.path.exists(name) or name.endswith(".toml"):
        return name
    return os.path.join(paths.configs_dir(), name + ".toml")


def utc_now():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def repro_line(point, libomp, inherited, benchmark=None):
    """One shell line reproducing a point (without the sweep's output flags);
    with benchmark, only that one of the point's benchmarks."""
    setenv, unset = point.child_env(libomp)
    parts = []
    leaked = [k for k in unset if k in inherited]
    if leaked:
        parts.append("env " + " ".join(f"-u {k}" for k in leaked))
    parts += [f"{k}={shlex.quote(v)}" for k, v in setenv.items()]
    parts.append(shlex.quote(point.program.path))
    parts += [shlex.quote(a) for a in point.program_args()]
    if benchmark and len(point.description().benchmarks) > 1:
        # Benchmark names hold only [A-Za-z0-9_/:.-]: literal in GB's regex but '.'.
        parts.append(shlex.quote(f"--benchmark_filter=^{re.escape(benchmark)}(/|$)"))
    line = " ".join(parts)
    if point.ranks:
        world = " ".join(f"{k}={v}" for k, v in rank_env("$r", point.processes, 29500).items())
        line = f"for r in $(seq 0 {point.processes - 1}); do {world} {line} & done; wait"
    elif point.processes > 1:
        line = f"for i in $(seq {point.processes}); do {line} & done; wait"
    return line


# --- the results file -------------------------------------------------------------

class SignalsHeld:
    """Hold Ctrl-C / SIGTERM while a results file is being written, so an
    interrupt lands between whole runs, never inside one."""
    SIGNALS = {signal.SIGINT, signal.SIGTERM}

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)


class ResultsFile:
    def __init__(self, path, columns):
        self.path = path
        self.columns = columns
        self.header = columns.header()

    def create(self):
        """A new file holding only the header, put in place atomically."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._replace(self.header.encode())

    def _replace(self, data):
        tmp = f"{self.path}.tmp{os.getpid()}"
        with SignalsHeld():
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)

    def repair_for_resume(self):
        """Drops a trailing partial line and any run with fewer rows than it
        announced (run_rows); returns (finished run keys, seed of the file)."""
        with open(self.path, "rb") as f:
            data = f.read()
        if not data.startswith(self.header.encode()):
            raise ThreadburnError(f"{self.path}: its header differs from what this sweep writes (schema "
                                  f"{schema.SCHEMA_VERSION}, these programs' flags and counters); write to a new --out")
        complete = data[:data.rfind(b"\n") + 1]
        lines = complete[len(self.header):].split(b"\n")[:-1]
        parsed = [next(csv.reader([ln.decode()])) for ln in lines]
        idx = {c: i for i, c in enumerate(self.columns.all)}
        counts, announced = {}, {}
        for fields in parsed:
            if len(fields) != len(self.columns.all):
                raise ThreadburnError(f"{self.path}: a row has {len(fields)} fields, expected "
                                      f"{len(self.columns.all)}; not a file this sweep wrote")
            key = fields[idx["run_key"]]
            counts[key] = counts.get(key, 0) + 1
            announced[key] = int(fields[idx["run_rows"]])
        done = {k for k, n in counts.items() if n == announced[k]}
        kept = [ln for ln, fields in zip(lines, parsed) if fields[idx["run_key"]] in done]
        if len(kept) != len(lines) or len(complete) != len(data):
            self._replace(self.header.encode() + b"".join(ln + b"\n" for ln in kept))
            print(f"sweep: {self.path}: dropped {len(lines) - len(kept)} rows of unfinished runs"
                  + (" and a partial line" if len(complete) != len(data) else ""))
        seeds = {fields[idx["seed"]] for fields in parsed if fields[idx["seed"]]}
        return done, (int(seeds.pop()) if len(seeds) == 1 else None)

    def append(self, rows):
        """All rows of one run with a single write + fsync: a kill leaves
        either all of them or (at worst) a partial last line that resume drops."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        for row in rows:
            writer.writerow([schema.fmt_value(row.get(c)) for c in self.columns.all])
        data = memoryview(buf.getvalue().encode())
        with SignalsHeld():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)


# --- running one (point, repetition) -----------------------------------------------

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


class Copy:
    """One process of a run: its command, files and end."""

    def __init__(self, index, work, timeline_dir, threads_file):
        self.index = index
        self.json = os.path.join(work, f"p{index}.json")
        self.out = os.path.join(work, f"p{index}.out")
        self.err = os.path.join(work, f"p{index}.err")
        self.timeline_dir = timeline_dir
        self.threads_file = threads_file
        self.proc = None
        self.end = None
        self.timed_out = False


class Run:
    """One repetition of one point: its P copies started at once, waited for
    (with the point's timeout), and turned into rows."""

    def __init__(self, point, rep, ctx):
        self.point, self.rep, self.ctx = point, rep, ctx
        self.key = f"{point.key}-r{rep}"
        self.work = os.path.join(ctx["work_dir"], self.key)

    def execute(self):
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        copies = self.start()
        self.wait(copies)
        rows = []
        for c in copies:
            rows += self.copy_rows(c)
        mark_overlap(rows)
        if self.point.ranks:
            mark_world(rows, self.point.processes)
        shutil.rmtree(self.work, ignore_errors=True)
        for row in rows:
            row["run_rows"] = len(rows)
            row["repro"] = repro_line(self.point, self.ctx["libomp"], os.environ, row["benchmark"])
        return rows

    def child_env(self):
        setenv, _ = self.point.child_env(self.ctx["libomp"])
        env = {k: v for k, v in os.environ.items()
               if k not in self.point.env and k not in schema.NOT_A_KNOB}
        env.update(setenv)
        return env

    def start(self):
        point, ctx = self.point, self.ctx
        barrier = []
        if point.processes > 1 and not point.ranks:  # ranks meet through their own process group
            path = os.path.join(self.work, "barrier")
            with open(path, "wb") as f:
                f.write(bytes(4))
            barrier = [f"--barrier={path}:{point.processes}"]
        env = self.child_env()
        port = free_port() if point.ranks else None
        self.started_at, self.t0 = utc_now(), time.monotonic()
        copies = []
        for i in range(point.processes):
            tl_dir = threads_file = None
            if point.timeline:
                tl_dir = os.path.join(ctx["timeline_dir"], f"{self.key}-p{i}")
                shutil.rmtree(tl_dir, ignore_errors=True)
                os.makedirs(tl_dir)
            if point.threads_csv:
                os.makedirs(ctx["threads_dir"], exist_ok=True)
                threads_file = os.path.join(ctx["threads_dir"], f"{self.key}-p{i}.csv")
            c = Copy(i, self.work, tl_dir, threads_file)
            argv = [point.program.path] + point.program_args() + barrier
            argv += [f"--timeline-dir={tl_dir}"] if tl_dir else []
            argv += [f"--threads-csv={threads_file}"] if threads_file else []
            argv += ["--benchmark_format=json", f"--benchmark_out={c.json}", "--benchmark_out_format=json"]
            with open(c.out, "wb") as out, open(c.err, "wb") as err:
                c.proc = subprocess.Popen(argv, env=dict(env, **rank_env(i, point.processes, port)) if point.ranks
                                          else env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=_die_with_parent)
            Children.procs.append(c.proc)
            copies.append(c)
        return copies

    def wait(self, copies):
        deadline = self.t0 + self.point.timeout_s
        while any(c.end is None for c in copies):
            for c in copies:
                if c.end is None and c.proc.poll() is not None:
                    c.end = time.monotonic()
            if time.monotonic() > deadline:
                Children.kill_all()
                for c in copies:
                    if c.end is None:
                        c.end, c.timed_out = time.monotonic(), True
                break
            time.sleep(0.02)
        Children.procs = []
        self.finished_at = utc_now()

    def base_row(self, c):
        p = self.point
        row = {"schema_version": schema.SCHEMA_VERSION, "run_key": self.key, "grid": p.grid, "study": p.study,
               "preset": p.preset, "bench": p.bench, "runtime": p.runtime, "processes": p.processes,
               "repetition": self.rep, "proc_index": c.index, "point_key": p.key, "seed": self.ctx["seed"],
               "order_index": self.ctx["order_index"], "started_at": self.started_at,
               "finished_at": self.finished_at, "exit_code": c.proc.returncode,
               "wall_s": round(c.end - self.t0, 3)}
        if p.ranks:  # also on failed rows: they belong to a world (schema.is_ranks_row)
            row.update(world_size=p.processes, rank=c.index)
        row.update(p.env)
        return row

    def copy_rows(self, c):
        """Rows of one copy: one per benchmark it reported, or one failed row
        per benchmark it should have run if it reported nothing usable."""
        desc = self.point.description()
        base = self.base_row(c)
        code = c.proc.returncode
        if c.timed_out:
            return failed_rows(desc, base, f"timeout after {self.point.timeout_s} s")
        try:
            with open(c.json) as f:
                report = json.load(f)
            entries = [e for e in report.get("benchmarks", []) if e.get("run_type") != "aggregate"]
        except (OSError, ValueError, AttributeError) as e:
            why = describe_exit(code) if code != 0 else f"no readable JSON ({type(e).__name__})"
            tail = last_line(c.err)
            return failed_rows(desc, base, why + (f": {tail}" if tail else ""))
        if not entries:
            return failed_rows(desc, base, f"{describe_exit(code)}; the JSON lists no benchmarks")
        context = context_columns(report.get("context", {}), self.ctx["columns"])
        rows = []
        for entry in entries:
            index = entry.get("family_index")
            bench = desc.benchmarks[index] if isinstance(index, int) and index < len(desc.benchmarks) else None
            row = dict(base, **context)
            row.update(knob_values(desc, bench))
            row["benchmark"] = entry.get("name", "")
            fill_entry(row, entry, self.ctx["columns"], desc)
            if bench is None or not row["benchmark"].startswith(bench.name):
                row.update(status="failed", reason=f"the program reported {row['benchmark']!r}, "
                           f"not a benchmark of its own description")
            if row["status"] == "ok" and code != 0:
                row.update(status="failed", reason=f"{describe_exit(code)} after reporting: " + last_line(c.err))
            if row["status"] == "ok":
                check_effective(self.point, row, desc)
            add_files(row, entry, c, self.ctx, desc)
            rows.append(row)
        return rows


def knob_values(desc, bench):
    """Flag columns of one benchmark: its axis values, and every other flag's
    value in force (the default unless the point set it)."""
    out = {name: f.value for name, f in desc.flags.items() if name not in schema.SWEEP_FLAGS}
    if bench is not None:
        out.update(bench.args)
    return out


def failed_rows(desc, base, reason):
    rows = []
    for b in desc.benchmarks:
        row = dict(base, benchmark=b.name, status="failed", reason=reason)
        row.update(knob_values(desc, b))
        rows.append(row)
    return rows


def context_columns(context, columns):
    out, extra = {}, []
    for key, value in context.items():
        if key in columns.context:
            out[key] = value
        elif key not in ("caches", "json_schema_version"):
            extra.append(f"{key}={schema.fmt_value(value)}")
    out["extra_context"] = ";".join(extra)
    return out


def fill_entry(row, entry, columns, desc):
    for key in ("iterations", "real_time", "cpu_time", "time_unit"):
        row[key] = entry.get(key)
    extra = []
    for key, value in entry.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        # GB writes its own "threads" before the counters; a "threads" counter
        # repeats the key and, read last, wins: it is the counter then.
        if key in GB_FIELDS and not (key in columns.counters and not entry.get("error_occurred")):
            continue
        if key in columns.counters:
            row[key] = value
        else:
            extra.append(f"{key}={schema.fmt_value(value)}")
    row["extra_counters"] = ";".join(extra)
    if entry.get("error_occurred"):
        message = str(entry.get("error_message", "")).strip()
        row["status"] = "skipped" if desc.is_skip(message) else "failed"
        row["reason"] = message or "error_occurred without a message"
    else:
        row["status"], row["reason"] = "ok", ""


def add_note(row, note):
    row["reason"] = (row["reason"] + "; " if row.get("reason") else "note: ") + note


def check_effective(point, row, desc):
    """Distrust a row whose process did not run the runtime it was asked to:
    its knob columns would describe a setting nobody measured. Note knobs the
    live runtime ignored or overrode."""
    live = row.get("omp_runtime", "")
    wanted = desc.runtime_library(point.runtime)
    if live in [r["library"] for r in desc.runtimes] and live != wanted:
        row.update(status="failed", reason=f"asked for runtime {point.runtime} but the process reports "
                   f"{live} ({row.get('omp_library', '?')})")
        return
    for column, what in (("ignored_knobs", "ignoring"), ("overridden_knobs", "overriding")):
        named = [k for k in str(row.get(column, "")).split(",") if point.env.get(k, schema.UNSET) != schema.UNSET]
        if named:
            add_note(row, f"the process reports {what} {','.join(named)}")
    in_force = row.get("cuda_sync_in_force", "")
    asked = point.args.get("cuda_sync", "auto")
    if asked != "auto" and in_force not in ("", "n/a") and in_force != asked:
        add_note(row, f"asked for cuda_sync {asked} but {in_force} is in force")


def mark_overlap(rows):
    """For copies started together: the share of each row's timed window that
    every other copy's window of the same benchmark covered. Below results.OVERLAP_MIN
    the row is flagged (results.oversubscription leaves such runs out)."""
    by_bench = {}
    for row in rows:
        start, end = schema.to_float(row.get("timed_start_s")), schema.to_float(row.get("timed_end_s"))
        if row.get("status") == "ok" and start is not None and end is not None and end > start:
            by_bench.setdefault(row["benchmark"], []).append((row, start, end))
    for copies in by_bench.values():
        if len(copies) < 2:
            continue
        for row, start, end in copies:
            lo = max([start] + [s for r, s, e in copies if r is not row])
            hi = min([end] + [e for r, s, e in copies if r is not row])
            share = max(0.0, hi - lo) / (end - start)
            row["overlap"] = round(share, 4)
            if share < results.OVERLAP_MIN:
                add_note(row, f"the other copies overlapped only {share:.0%} of its timed steps")


def free_port():
    """A TCP port free on 127.0.0.1 now, for a world's MASTER_PORT (the ranks'
    store binds it a moment later; a port taken meanwhile fails the run,
    naming MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rank_env(rank, world_size, port):
    """Where rank `rank` of a world started by the sweep stands: torchrun's
    variables (src/core/rendezvous.h reads them first), all on this host."""
    return {"RANK": str(rank), "WORLD_SIZE": str(world_size), "LOCAL_RANK": str(rank),
            "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}


def mark_world(rows, world_size):
    """The ranks of one world, per benchmark (only when every rank reported
    it ok): world_samples_per_s = world_size x the slowest rank's samples/s
    (synchronous data parallelism goes at the slowest rank's pace), and
    rank_spread = the slowest rank's compute (step_ms - allreduce_ms) over the
    fastest's, minus 1: how unevenly the ranks computed (the fast ones wait
    for the slow inside the all-reduce)."""
    by_bench = {}
    for row in rows:
        by_bench.setdefault(row["benchmark"], []).append(row)
    for ranks in by_bench.values():
        if len(ranks) != world_size or any(r.get("status") != "ok" for r in ranks):
            continue
        rates = [schema.to_float(r.get("samples_per_s")) for r in ranks]
        compute = [schema.to_float(r.get("step_ms")) - schema.to_float(r.get("allreduce_ms"))
                   if schema.to_float(r.get("step_ms")) is not None and schema.to_float(r.get("allreduce_ms")) is not None
                   else None for r in ranks]
        for r in ranks:
            if None not in rates:
                r["world_samples_per_s"] = world_size * min(rates)
            if None not in compute and min(compute) > 0:
                r["rank_spread"] = round(max(compute) / min(compute) - 1, 4)


def add_files(row, entry, c, ctx, desc):
    """The files the run wrote for this entry: the timeline its JSON entry names."""
    name = desc.timeline_file(entry) if c.timeline_dir else None
    if name:
        path = os.path.join(c.timeline_dir, name)
        if os.path.exists(path):
            row["timeline_file"] = os.path.relpath(path, ctx["csv_dir"])
    if c.threads_file and os.path.exists(c.threads_file):
        row["threads_file"] = os.path.relpath(c.threads_file, ctx["csv_dir"])


# --- main ------------------------------------------------------------------------

def host_tag():
    return re.sub(r"[^A-Za-z0-9_.-]", "_", socket.gethostname()) or "host"


def choose_out(args, grid_name):
    if args.out:
        return args.out
    runs = paths.runs_dir()
    if args.resume:
        pattern = re.compile(re.escape(f"{grid_name}-{host_tag()}-") + r"\d{8}-\d{6}\.csv")
        found = sorted(f for f in os.listdir(runs) if pattern.fullmatch(f)) if os.path.isdir(runs) else []
        if not found:
            raise ThreadburnError(f"--resume: no {runs}/{grid_name}-{host_tag()}-*.csv to resume; name one with --out")
        return os.path.join(runs, found[-1])
    return os.path.join(runs, f"{grid_name}-{host_tag()}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.csv")


def load_grid(args, progs):
    g = gridmod.load(grid_path(args.grid), progs)
    for point in g.points:
        if args.repetitions:
            point.repetitions = args.repetitions
        if args.timeout:
            point.timeout_s = args.timeout
        if args.timeline:
            point.timeline = True
    if args.match:
        rx = re.compile(args.match)
        g.points = [p for p in g.points if rx.search(p.label) or rx.search(repro_line(p, args.libomp, os.environ))]
        if not g.points:
            raise ThreadburnError(f"--match {args.match!r}: no point matches")
    return g


def dry_run(g, args, seed):
    runs = sum(p.repetitions for p in g.points)
    print(f"grid {g.name}: {len(g.points)} points, {runs} runs (one process per run, shuffled with seed {seed})")
    for point in g.points:
        print(f"{point.key}  x{point.repetitions}  {point.label}" + ("  [timeline]" if point.timeline else ""))
        print("    " + repro_line(point, args.libomp, os.environ))
        for b in point.description().benchmarks:
            print("      " + b.name)
    if args.slurm:
        tasks = -(-runs // args.runs_per_task)
        print(f"--slurm: one job array of {tasks} tasks of up to {args.runs_per_task} runs; sbatch "
              + (" ".join(slurm_sweep.sbatch_options(args)) or "(no options)"))


def check_ready(g, args, out):
    if any(p.runtime == "llvm" for p in g.points) and not os.path.exists(args.libomp):
        raise ThreadburnError(f"--libomp {args.libomp}: not found (Debian: apt install libomp-dev)")
    if os.path.exists(out) and not (args.resume or args.force or args.merge):
        raise ThreadburnError(f"{out}: exists; pass --resume to continue it or --force to replace it")
    if (args.resume or args.merge) and not os.path.exists(out):
        raise ThreadburnError(f"{out}: --{'merge' if args.merge else 'resume'}: no such file")


def resume_command(out, seed):
    argv, skip = [], False
    for arg in sys.argv[1:]:
        if skip:
            skip = False
        elif arg in ("--out", "--seed"):
            skip = True
        elif arg not in ("--resume", "--force") and not arg.startswith(("--out=", "--seed=")):
            argv.append(arg)
    return "threadburn " + " ".join(shlex.quote(a) for a in argv + ["--resume", "--out", out, "--seed", str(seed)])


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def make_plots(out):
    from . import plot
    plot_dir = os.path.splitext(out)[0] + ".plots"
    try:
        plot.make_all(results.read_rows(out), os.path.dirname(os.path.abspath(out)), plot_dir)
    except ThreadburnError as e:
        print(f"sweep: plots not made: {e}")
        return None
    return plot_dir


def sweep(args):
    progs = build_programs(args.build_dir)
    g = load_grid(args, progs)
    columns = schema.Columns(p.describe() for p in progs.values())
    done, file_seed, out = set(), None, None
    if not args.dry_run:
        out = choose_out(args, g.name)
        check_ready(g, args, out)
        for stale in glob.glob(glob.escape(out) + ".tmp*"):  # left by a SIGKILL mid-rename
            os.remove(stale)
        results_file = ResultsFile(out, columns)
        if args.resume or args.merge:
            done, file_seed = results_file.repair_for_resume()
            if file_seed is None and args.slurm:  # submitted, nothing merged yet: the job's seed
                file_seed = slurm_sweep.plan_seed(out)
        else:
            results_file.create()
    seed = next(s for s in (args.seed, file_seed, g.settings["seed"], random.SystemRandom().randrange(1, 2 ** 31))
                if s is not None)
    if args.dry_run:
        dry_run(g, args, seed)
        return 0
    runs = [(p, r) for p in g.points for r in range(p.repetitions)]
    random.Random(seed).shuffle(runs)
    if args.slurm:
        rc = slurm_sweep.run_sweep(args, g, seed, runs, results_file, done, out)
        if done and not (args.detach or args.no_plot):
            plot_dir = make_plots(out)
            if plot_dir:
                print(f"sweep: plots in {plot_dir}")
        if done and not args.detach:
            print(results.summary_text(results.read_rows(out)))
        return rc
    todo = [(i, p, r) for i, (p, r) in enumerate(runs) if f"{p.key}-r{r}" not in done]
    stem = os.path.splitext(out)[0]
    csv_dir = os.path.dirname(os.path.abspath(out))
    ctx = {"libomp": args.libomp, "seed": seed, "csv_dir": csv_dir, "columns": columns,
           "work_dir": os.path.join(csv_dir, "." + os.path.basename(stem) + ".work"),
           "timeline_dir": stem + ".timelines", "threads_dir": stem + ".threads"}
    shutil.rmtree(ctx["work_dir"], ignore_errors=True)
    print(f"sweep: {g.name}: {len(runs)} runs of {len(g.points)} points, {len(runs) - len(todo)} already in "
          f"{out}; seed {seed} (--seed {seed} repeats this order)", flush=True)
    failed = 0
    t0 = time.monotonic()
    try:
        for n, (order_index, point, rep) in enumerate(todo, 1):
            ctx["order_index"] = order_index
            rows = Run(point, rep, ctx).execute()
            results_file.append(rows)
            statuses = sorted({r["status"] for r in rows})
            failed += any(r["status"] == "failed" for r in rows)
            eta = (time.monotonic() - t0) / n * (len(todo) - n)
            why = next((r["reason"] for r in rows if r["status"] != "ok" or r.get("reason")), "")
            print(f"[{len(runs) - len(todo) + n}/{len(runs)}] {point.label} rep {rep}: {'/'.join(statuses)} "
                  f"({max(r['wall_s'] for r in rows):.1f} s){' ' + why[:120] if why else ''} | ETA "
                  f"{fmt.duration(eta)}", flush=True)
    except KeyboardInterrupt:
        Children.kill_all()
        shutil.rmtree(ctx["work_dir"], ignore_errors=True)
        print(f"\nsweep: interrupted; {out} holds every finished run. Continue with: {resume_command(out, seed)}",
              file=sys.stderr)
        return 130
    shutil.rmtree(ctx["work_dir"], ignore_errors=True)
    print(f"sweep: results in {out}")
    if not args.no_plot:
        plot_dir = make_plots(out)
        if plot_dir:
            print(f"sweep: plots in {plot_dir}")
    print(results.summary_text(results.read_rows(out)))
    return 1 if (args.strict and failed) else 0


def main(args):
    check_slurm_args(args)
    args.grid_file = grid_path(args.grid)
    signal.signal(signal.SIGTERM, _interrupt)  # clean up like Ctrl-C
    try:
        return sweep(args)
    except slurm.SlurmError as e:  # one line, as every error; the CSV keeps what was merged
        raise ThreadburnError(str(e)) from None
