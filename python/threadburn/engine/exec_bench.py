"""The benchmark-program executor: one run of a grid point is its P copies
(or W ranks) started at once, waited for with the point's timeout, and
turned into rows from Google Benchmark's JSON (one row per copy and
benchmark; failed rows for what a copy should have reported and did not).
The P copies of a `processes = P` point wait for each other before each
benchmark (--barrier); each row records how much of its timed window the
other copies overlapped.
"""
import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import time

from . import campaign
from ..lib import launch, schema
from ..lib.procs import Children, Interrupt, describe_exit, die_with_parent, last_line, utc_now
from ..lib.records import Row

# Google Benchmark's own numeric entry fields: not counters.
GB_FIELDS = {"family_index", "per_family_instance_index", "repetitions", "repetition_index",
             "iterations", "real_time", "cpu_time", "threads"}
# The columns named after an entry's own fields, copied as they are.
GB_COLUMNS = (Row.iterations, Row.real_time, Row.cpu_time, Row.time_unit)


@dataclasses.dataclass(frozen=True)
class RunContext:
    """What every run of one sweep (or of one Slurm task) shares, and the
    run's place in the order. Rows name their files relative to csv_dir."""
    libomp: str
    seed: int
    columns: schema.Columns
    csv_dir: str
    work_dir: str
    timeline_dir: str
    threads_dir: str
    order_index: int = 0
    round: object = ""

    @classmethod
    def beside(cls, stem, libomp, seed, columns, work_dir):
        """The context of runs whose results go to <stem>.csv: timelines in
        <stem>.timelines/, per-thread files in <stem>.threads/."""
        return cls(libomp=libomp, seed=seed, columns=columns, csv_dir=os.path.dirname(os.path.abspath(stem)),
                   work_dir=work_dir, timeline_dir=stem + ".timelines", threads_dir=stem + ".threads")

    def at(self, order_index, round_):
        return dataclasses.replace(self, order_index=order_index, round=round_)


class Only:
    """A grid point run for some of its benchmarks: what a race's round needs
    (the workloads still undecided), or a confirmation's (phase "confirm").
    In the race, the same key as the point: its runs count as the point's."""

    def __init__(self, point, benchmarks, phase="race"):
        self.point, self.benchmarks, self.phase = point, tuple(sorted(benchmarks)), phase
        self.key = point.key if phase == "race" else f"{phase}-{point.key}"
        n = len(point.description().benchmarks)
        self.label = point.label + (f" [{len(self.benchmarks)} of {n} benchmarks]" if len(self.benchmarks) < n
                                    else "") + ("" if phase == "race" else f" ({phase})")


def point_and_filter(item):
    """(grid point, the benchmark names to run or None for all, phase) of a campaign item."""
    return (item.point, item.benchmarks, item.phase) if isinstance(item, Only) else (item, None, "race")


class BenchExecutor(campaign.Executor):
    """Runs grid points (grid.Point, or Only some of their benchmarks) one run at a time on this host."""

    def __init__(self, ctx):
        self.ctx = ctx

    def execute(self, specs):
        for spec in specs:
            point, only, phase = point_and_filter(spec.item)
            yield spec, Run(point, spec.rep, self.ctx.at(spec.order_index, spec.round), only, phase).execute()

    def stop(self):
        Children.kill_all()
        shutil.rmtree(self.ctx.work_dir, ignore_errors=True)

    def close(self):
        shutil.rmtree(self.ctx.work_dir, ignore_errors=True)


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

    def __init__(self, point, rep, ctx, only=None, phase="race"):
        self.point, self.rep, self.ctx, self.only, self.phase = point, rep, ctx, only, phase
        self.key = f"{point.key}-r{rep}" if phase == "race" else f"{phase}-{point.key}-r{rep}"
        self.work = os.path.join(ctx.work_dir, self.key)

    def execute(self):
        shutil.rmtree(self.work, ignore_errors=True)
        os.makedirs(self.work)
        load = launch.HostLoad()
        copies = self.start()
        self.wait(copies)
        _, other, steal, _ = load.end()
        rows = []
        for c in copies:
            rows += self.copy_rows(c)
        mark_overlap(rows)
        if self.point.ranks:
            mark_world(rows, self.point.processes)
        shutil.rmtree(self.work, ignore_errors=True)
        for row in rows:
            row.update(host_other_cpu_ms=None if other is None else round(other, 1),
                       host_steal_ms=None if steal is None else round(steal, 1), run_rows=len(rows),
                       repro=repro_line(self.point, self.ctx.libomp, os.environ, row.benchmark))
        return rows

    def child_env(self):
        setenv, _ = self.point.child_env(self.ctx.libomp)
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
                tl_dir = os.path.join(ctx.timeline_dir, f"{self.key}-p{i}")
                shutil.rmtree(tl_dir, ignore_errors=True)
                os.makedirs(tl_dir)
            if point.threads_csv:
                os.makedirs(ctx.threads_dir, exist_ok=True)
                threads_file = os.path.join(ctx.threads_dir, f"{self.key}-p{i}.csv")
            c = Copy(i, self.work, tl_dir, threads_file)
            argv = [point.program.path] + point.program_args() + barrier + benchmark_filter(self.only)
            argv += [f"--timeline_dir={tl_dir}"] if tl_dir else []
            argv += [f"--threads_csv={threads_file}"] if threads_file else []
            argv += ["--benchmark_format=json", f"--benchmark_out={c.json}", "--benchmark_out_format=json"]
            with open(c.out, "wb") as out, open(c.err, "wb") as err:
                c.proc = subprocess.Popen(argv, env=dict(env, **rank_env(i, point.processes, port)) if point.ranks
                                          else env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                          start_new_session=True, preexec_fn=die_with_parent)
            Children.procs.append(c.proc)
            copies.append(c)
        return copies

    def wait(self, copies):
        deadline = self.t0 + self.point.timeout_s
        while any(c.end is None for c in copies):
            Interrupt.check()  # a Ctrl-C dropped in the fork's hooks
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
        row = Row(schema_version=schema.SCHEMA_VERSION, run_key=self.key, grid=p.grid, study=p.study,
                  preset=p.preset, bench=p.bench, runtime=p.runtime, processes=p.processes,
                  repetition=self.rep, proc_index=c.index, point_key=p.key, seed=self.ctx.seed,
                  order_index=self.ctx.order_index, round=self.ctx.round, phase=self.phase,
                  started_at=self.started_at, finished_at=self.finished_at, exit_code=c.proc.returncode,
                  wall_s=round(c.end - self.t0, 3), knob_layout=p.layout_text(self.ctx.columns))
        if p.ranks:  # also on failed rows: they belong to a world (Row.world_size)
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
            return failed_rows(desc, base, f"timeout after {self.point.timeout_s} s", self.only)
        try:
            with open(c.json) as f:
                report = json.load(f)
            entries = [e for e in report.get("benchmarks", []) if e.get("run_type") != "aggregate"]
        except (OSError, ValueError, AttributeError) as e:
            why = describe_exit(code) if code != 0 else f"no readable JSON ({type(e).__name__})"
            tail = last_line(c.err)
            return failed_rows(desc, base, why + (f": {tail}" if tail else ""), self.only)
        if not entries:
            return failed_rows(desc, base, f"{describe_exit(code)}; the JSON lists no benchmarks", self.only)
        context = context_columns(report.get("context", {}), self.ctx.columns)
        rows = []
        for entry in entries:
            bench = described(desc, entry, self.only)
            row = base.copy()
            row.update(context)
            row.update(knob_values(desc, bench))
            row.benchmark = entry.get("name", "")
            fill_entry(row, entry, self.ctx.columns, desc)
            if bench is None or not row.benchmark.startswith(bench.name):
                row.update(status="failed", reason=f"the program reported {row.benchmark!r}, "
                           f"not a benchmark of its own description")
            if row.ok and code != 0:
                row.update(status="failed", reason=f"{describe_exit(code)} after reporting: " + last_line(c.err))
            if row.ok:
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


def described(desc, entry, only=None):
    """The benchmark of the description a JSON entry reports: by its
    family_index (the registration order). Google Benchmark numbers the
    families of a filtered run from 0, so there the entry's name must be one
    of the filter's registered names (itself, or followed by '/')."""
    if only:
        name = str(entry.get("name", ""))
        return next((b for b in desc.benchmarks if b.name in only and (name == b.name or name.startswith(b.name + "/"))),
                    None)
    index = entry.get("family_index")
    return desc.benchmarks[index] if isinstance(index, int) and 0 <= index < len(desc.benchmarks) else None


def benchmark_filter(only):
    """Google Benchmark's filter for exactly these registered names (they
    hold only [A-Za-z0-9_/:.-]: literal in its regex but '.')."""
    if not only:
        return []
    return ["--benchmark_filter=^(" + "|".join(re.escape(b) for b in only) + ")(/|$)"]


def failed_rows(desc, base, reason, only=None):
    rows = []
    for b in desc.benchmarks:
        if only and b.name not in only:
            continue
        row = base.copy(benchmark=b.name, status="failed", reason=reason)
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
    out[Row.extra_context.name] = ";".join(extra)
    return out


def fill_entry(row, entry, columns, desc):
    for column in GB_COLUMNS:
        column.fset(row, entry.get(column.name))
    extra = []
    for key, value in entry.items():
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            continue
        # GB writes its own "threads" before the counters; a "threads" counter
        # repeats the key and, read last, wins: it is the counter then.
        if key in GB_FIELDS and not (key in columns.counters and not entry.get("error_occurred")):
            continue
        if key in columns.counters:
            row.set(key, value)
        else:
            extra.append(f"{key}={schema.fmt_value(value)}")
    row.extra_counters = ";".join(extra)
    if entry.get("error_occurred"):
        message = str(entry.get("error_message", "")).strip()
        row.update(status="skipped" if desc.is_skip(message) else "failed",
                   reason=message or "error_occurred without a message")
    else:
        row.update(status="ok", reason="")


def add_note(row, note):
    row.reason = (row.reason + "; " if row.reason else "note: ") + note


def check_effective(point, row, desc):
    """Distrust a row whose process did not run the runtime it was asked to:
    its knob columns would describe a setting nobody measured. Note knobs the
    live runtime ignored or overrode."""
    live = row.omp_runtime
    wanted = desc.runtime_library(point.runtime)
    if live in [r["library"] for r in desc.runtimes] and live != wanted:
        row.update(status="failed", reason=f"asked for runtime {point.runtime} but the process reports "
                   f"{live} ({row.omp_library or '?'})")
        return
    for column, what in ((Row.ignored_knobs, "ignoring"), (Row.overridden_knobs, "overriding")):
        named = [k for k in column(row).split(",") if point.env.get(k, schema.UNSET) != schema.UNSET]
        if named:
            add_note(row, f"the process reports {what} {','.join(named)}")
    in_force = row.cuda_sync_in_force
    asked = point.args.get(Row.cuda_sync.name, "auto")  # the flag whose column it is
    if asked != "auto" and in_force not in ("", "n/a") and in_force != asked:
        add_note(row, f"asked for cuda_sync {asked} but {in_force} is in force")


def mark_overlap(rows):
    """For copies started together: the share of each row's timed window that
    every other copy's window of the same benchmark covered. Below schema.OVERLAP_MIN
    the row is flagged (results.oversubscription leaves such runs out)."""
    by_bench = {}
    for row in rows:
        start, end = row.timed_start_s, row.timed_end_s
        if row.ok and start is not None and end is not None and end > start:
            by_bench.setdefault(row.benchmark, []).append((row, start, end))
    for copies in by_bench.values():
        if len(copies) < 2:
            continue
        for row, start, end in copies:
            lo = max([start] + [s for r, s, e in copies if r is not row])
            hi = min([end] + [e for r, s, e in copies if r is not row])
            share = max(0.0, hi - lo) / (end - start)
            row.overlap = round(share, 4)
            if share < schema.OVERLAP_MIN:
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
        by_bench.setdefault(row.benchmark, []).append(row)
    for ranks in by_bench.values():
        if len(ranks) != world_size or any(not r.ok for r in ranks):
            continue
        rates = [r.samples_per_s for r in ranks]
        compute = [r.step_ms - r.allreduce_ms if r.step_ms is not None and r.allreduce_ms is not None else None
                   for r in ranks]
        for r in ranks:
            if None not in rates:
                r.world_samples_per_s = world_size * min(rates)
            if None not in compute and min(compute) > 0:
                r.rank_spread = round(max(compute) / min(compute) - 1, 4)


def add_files(row, entry, c, ctx, desc):
    """The files the run wrote for this entry: the timeline its JSON entry names."""
    name = desc.timeline_file(entry) if c.timeline_dir else None
    if name:
        path = os.path.join(c.timeline_dir, name)
        if os.path.exists(path):
            row.timeline_file = os.path.relpath(path, ctx.csv_dir)
    if c.threads_file and os.path.exists(c.threads_file):
        row.threads_file = os.path.relpath(c.threads_file, ctx.csv_dir)
