"""threadburn sweep --slurm: a grid as a Slurm job array, for fleets.

The grid is expanded exactly as locally; its runs (points x repetitions,
shuffled) are dealt out to the tasks of one job array, --runs-per-task at a
time. Each task runs its runs as the local sweep does, one fresh process per
run on a node it has to itself (--exclusive unless --shared), and writes each
run's rows to a file of its own in the job folder (<stem>.slurm/rows/, with
the host, CPU model and core count in every row, and the job and task id):
no two tasks write one file. The sweep then waits, showing how many tasks are
pending, running and done, and merges the rows into the sweep's CSV in the
usual schema. --detach submits and returns; --merge collects what arrived.
--resume merges what arrived, finds the runs that have no rows (a task
failed, a node died, a task was cancelled) and submits only those. A run
never lands twice: merging skips run keys the CSV already holds.

Multi-node use: docs/slurm.md.
"""
import json
import os
import shlex
import socket
import sys
import time
from dataclasses import dataclass

from . import campaign, exec_bench, slurm
from ..lib import fmt, paths, records, schema
from ..lib.errors import ThreadburnError

PLAN = "plan.json"


@dataclass(frozen=True)
class SlurmOptions:
    """What a sweep --slurm's executor takes of the sweep's flags, built once
    by the command (commands/sweep.py, slurm_options), never read from its
    namespace."""
    grid: str                   # the grid as the user named it (the --merge hint repeats it)
    grid_file: str              # its TOML file (each task loads it)
    build_dir: str = None       # the programs' build (None: found)
    libomp: str = ""            # LLVM's runtime for points whose runtime is llvm
    repetitions: int = None     # overrides the grid's (None: the grid's)
    timeout: float = None       # per run, in s (None: the grid's)
    timeline: bool = False      # burn timelines for every point
    match: str = None           # only the points matching this regex
    runs_per_task: int = 1
    max_parallel: int = None    # tasks at once (array %N)
    shared: bool = False        # no --exclusive
    partition: str = None
    nodelist: str = None
    constraint: str = None
    time_limit: str = None      # sbatch --time
    sbatch: tuple = ()          # more sbatch options, as typed


def job_dir(out):
    return os.path.splitext(out)[0] + ".slurm"


def plan_seed(out):
    """The seed of the job submitted for `out`, if any: a --merge or --resume
    before any rows arrived deals the same order."""
    try:
        with open(os.path.join(job_dir(out), PLAN)) as f:
            return json.load(f)["seed"]
    except (OSError, ValueError, KeyError):
        return None


def sbatch_options(options):
    """The sbatch options of a SlurmOptions."""
    opts = []
    if not options.shared:
        opts.append("--exclusive")
    for flag, value in (("--partition", options.partition), ("--nodelist", options.nodelist),
                        ("--constraint", options.constraint), ("--time", options.time_limit)):
        if value:
            opts.append(f"{flag}={value}")
    for extra in options.sbatch:
        opts += shlex.split(extra)
    return opts


def deal(runs, per_task):
    """[campaign.RunSpec] -> tasks of at most per_task runs each."""
    return [runs[i:i + per_task] for i in range(0, len(runs), per_task)]


def write_plan(jdir, options, g, seed, tasks, attempt):
    os.makedirs(os.path.join(jdir, "rows"), exist_ok=True)
    plan = {"grid": os.path.abspath(options.grid_file), "grid_name": g.name, "schema_version": schema.SCHEMA_VERSION,
            "build_dir": os.path.abspath(options.build_dir) if options.build_dir else None, "libomp": options.libomp,
            "repetitions": options.repetitions, "timeout": options.timeout, "timeline": options.timeline,
            "match": options.match, "seed": seed, "attempt": attempt,
            # What the build's programs answered --describe here: each task starts from it instead
            # of asking every program again (each answer loads libtorch: ~1 s of CPU, 5 a task).
            "described": {bench: prog.answers() for bench, prog in g.programs.items()},
            "tasks": [[{"order_index": sp.order_index, "round": sp.round, "rep": sp.rep,
                        "point_key": exec_bench.point_and_filter(sp.item)[0].key,
                        "only": list(exec_bench.point_and_filter(sp.item)[1] or []),
                        "phase": exec_bench.point_and_filter(sp.item)[2]}
                       for sp in task] for task in tasks]}
    with open(os.path.join(jdir, PLAN + ".tmp"), "w") as f:
        json.dump(plan, f)
    os.replace(os.path.join(jdir, PLAN + ".tmp"), os.path.join(jdir, PLAN))
    script = os.path.join(jdir, "task.sh")
    with open(script, "w") as f:
        f.write("#!/bin/sh\n# One task of a threadburn sweep's job array: its runs, one fresh process each.\n"
                f"exec {shlex.quote(paths.command())} slurm-task "
                f"{shlex.quote(jdir)} \"$SLURM_ARRAY_TASK_ID\"\n")
    os.chmod(script, 0o755)
    return script


def submit(options, g, seed, todo, jdir, attempt):
    tasks = deal(todo, options.runs_per_task)
    script = write_plan(jdir, options, g, seed, tasks, attempt)
    job = slurm.sbatch_array(script, len(tasks), job_name=f"threadburn-{g.name}", options=sbatch_options(options),
                             max_parallel=options.max_parallel, cwd=jdir)
    with open(os.path.join(jdir, "jobs.txt"), "a") as f:
        f.write(f"{job} {len(tasks)} attempt {attempt}\n")
    print(f"sweep: submitted job array {job}: {len(tasks)} tasks of up to {options.runs_per_task} runs "
          f"({len(todo)} runs), sbatch {' '.join(sbatch_options(options)) or '(no options)'}", flush=True)
    return job, len(tasks)


def wait(job, n_tasks):
    t0 = time.monotonic()

    def progress(c):
        print(f"sweep: job {job}: {c['pending']} pending, {c['running']} running, {c['done']} done, "
              f"{c['failed']} failed ({fmt.duration(time.monotonic() - t0)})", flush=True)
    return slurm.wait(job, n_tasks, poll_s=2.0, on_progress=progress)


def merge(jdir, results_file, done):
    """Appends every run in jdir/rows/ that the CSV lacks; returns the run
    keys now in the CSV. Refuses rows of another grid or schema, naming the file."""
    rows_dir = os.path.join(jdir, "rows")
    added = 0
    for name in sorted(os.listdir(rows_dir)) if os.path.isdir(rows_dir) else []:
        if not name.endswith(".csv"):
            continue
        path = os.path.join(rows_dir, name)
        header, rows = records.read_table(path)
        if tuple(header) != tuple(results_file.columns.all):
            raise ThreadburnError(f"{path}: written by another grid, schema or build than {results_file.path} "
                                  "(its header differs); not merged")
        run_key = rows[0].run_key if rows else ""
        if not rows or run_key in done:
            continue
        if any(r.schema_version != schema.SCHEMA_VERSION for r in rows):
            raise ThreadburnError(f"{path}: schema version {rows[0].schema_version}, not "
                                  f"{schema.SCHEMA_VERSION}")
        results_file.append(rows)
        done.add(run_key)
        added += 1
    return added


class SlurmExecutor(campaign.Executor):
    """A round as one job array: submitted, waited for, its rows read back
    as they were written by the tasks (rows/<run_key>.csv). The grid's
    planned rounds go as one array (whole_plan), a race's later rounds one
    array each."""
    whole_plan = True

    def __init__(self, options, g, seed, out):
        self.options, self.g, self.seed, self.out = options, g, seed, out
        self.jdir = job_dir(out)
        self.job = None

    def attempt(self):
        jobs = os.path.join(self.jdir, "jobs.txt")
        return sum(1 for _ in open(jobs)) if os.path.exists(jobs) else 0

    def submit(self, specs):
        self.job, n_tasks = submit(self.options, self.g, self.seed, specs, self.jdir, self.attempt())
        return n_tasks

    def execute(self, specs):
        if not specs:
            return
        n_tasks = self.submit(specs)
        states = wait(self.job, n_tasks)
        failed = {t: s for t, s in states.items() if s != "COMPLETED"}
        if failed:
            print(f"sweep: job {self.job}: tasks {', '.join(f'{t} ({s})' for t, s in sorted(failed.items()))} did "
                  "not complete; their runs have no rows (--resume submits them again)", file=sys.stderr)
        for spec in specs:
            rows = read_rows_file(self.jdir, spec.key)
            if rows is not None:
                yield spec, rows

    def stop(self):
        if self.job:
            print(f"sweep: stopped waiting; job {self.job} keeps running (scancel {self.job} stops it). Collect "
                  f"its rows with: threadburn sweep {self.options.grid} --slurm --merge --out {self.out}",
                  file=sys.stderr)


def read_rows_file(jdir, run_key):
    path = os.path.join(jdir, "rows", f"{run_key}.csv")
    if not os.path.exists(path):
        return None
    return records.read_rows(path)


# --- inside a task ------------------------------------------------------------------

def task_main(job_dir, task):
    """Runs task `task` of the job in job_dir (commands/slurm_task.py);
    each run's rows go to rows/<run_key>.csv, put in place whole (written
    aside, then renamed)."""
    from ..lib import grid as gridmod
    from ..lib.programs import programs as build_programs
    with open(os.path.join(job_dir, PLAN)) as f:
        plan = json.load(f)
    if task >= len(plan["tasks"]):
        raise ThreadburnError(f"task {task}: the plan has {len(plan['tasks'])} tasks")
    progs = build_programs(plan["build_dir"], answers=plan.get("described"))
    g = gridmod.load(plan["grid"], progs)
    by_key = {p.key: p for p in g.points}
    columns = schema.Columns(p.describe() for p in progs.values())
    tag = f"{os.environ.get('SLURM_ARRAY_JOB_ID', '?')}_{task}"
    host = socket.gethostname()
    rows_dir = os.path.join(job_dir, "rows")
    for run in plan["tasks"][task]:
        point = by_key.get(run["point_key"])
        if point is None:
            raise ThreadburnError(f"point {run['point_key']} is not in {plan['grid']} any more: it changed since "
                                  "the job was submitted")
        for attr, key in (("repetitions", "repetitions"), ("timeout_s", "timeout")):
            if plan[key]:
                setattr(point, attr, plan[key])
        if plan["timeline"]:
            point.timeline = True
        work = os.path.join(job_dir, "work", f"task{task}")
        ctx = exec_bench.RunContext.beside(os.path.splitext(job_dir)[0], plan["libomp"], plan["seed"], columns,
                                           work).at(run["order_index"], run.get("round", ""))
        this = exec_bench.Run(point, run["rep"], ctx, run.get("only") or None, run.get("phase", "race"))
        rows = this.execute()
        for row in rows:
            # The programs report host_name, num_cpus and cpu_model; a failed
            # run's rows get them here.
            row.host_name = row.host_name or host
            row.slurm_job = tag
        path = os.path.join(rows_dir, f"{this.key}.csv")
        results_file = records.ResultsFile(path + f".tmp{os.getpid()}", columns)
        results_file.create()
        results_file.append(rows)
        os.replace(results_file.path, path)
        print(f"slurm-task {tag}: {point.label} rep {run['rep']}: {'/'.join(sorted({r.status for r in rows}))}",
              flush=True)
    return 0
