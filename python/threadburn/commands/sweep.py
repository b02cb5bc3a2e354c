"""threadburn sweep: run a grid (configs/*.toml), append tidy rows to a CSV,
and per workload decide which setting to use.

One fresh process per (environment point, repetition): OpenMP reads its
environment once, at start-up. The runs go in rounds (every point once per
round, shuffled: blocks that absorb the machine's drift) through the run
engine (campaign.py) and an executor: this host (exec_bench.py) or a Slurm
job array per round (--slurm, exec_slurm.py). A sweep killed at any moment
continues with --resume, losing and duplicating nothing. At the end, per
workload, the verdict of analysis/decide.py against the default
environment (change / keep / undecided), also in <stem>.verdict.json.
--decide adds rounds for each undecided workload's contenders until every
workload is decided or most of --budget is spent, then confirms each change
in fresh runs of the chosen setting and the baseline (the gain it prints).
"""
import argparse
import glob
import os
import random
import re
import shlex
import shutil
import signal
import socket
import sys
import time
from datetime import datetime

from . import options
from ..analysis import confirmation, race as races, verdicts
from ..engine import campaign, exec_bench, exec_slurm, slurm
from ..export import jsonfile, summary, text
from ..lib import files, grid as gridmod, keys, paths, records, rule as rules, schema
from ..lib.errors import ThreadburnError
from ..lib.programs import programs as build_programs
from ..lib.records import ResultsFile, Row

def add_parser(sub):
    p = sub.add_parser("sweep", help="run a grid of settings, one fresh process per point",
                       description=__doc__, formatter_class=_raw())
    p.add_argument("grid", help="grid name in configs/ (default, seed000, ...) or a .toml path")
    p.add_argument("--build-dir", help="CMake build dir holding the programs (default: build)")
    p.add_argument("--libomp", default=paths.LIBOMP, type=paths.for_child,
                   help=f'LLVM OpenMP runtime preloaded for runtime = "llvm" (default: {paths.LIBOMP})')
    p.add_argument("--out", help="results CSV (default: runs/<grid>-<host>-<time>.csv)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue --out (default: the newest "
                      "runs/<grid>-<host>-*.csv), skipping the runs it already holds")
    mode.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--seed", type=int, help="seed of the run order (printed; default: random)")
    p.add_argument("--repetitions", type=options.positive, help="override the grid's repetitions")
    p.add_argument("--timeout", type=options.positive, help="per-run timeout in s (default: the grid's)")
    p.add_argument("--timeline", action="store_true", help="save burn timelines for every point")
    p.add_argument("--match", help="only points whose label or repro line matches this regex")
    p.add_argument("--dry-run", action="store_true", help="list the points and their benchmarks, run nothing")
    p.add_argument("--no-plot", action="store_true", help="make no plots at the end")
    p.add_argument("--strict", action="store_true", help="exit 1 if any run failed")
    d = p.add_argument_group("deciding (docs/design.md, Decisions)")
    d.add_argument("--decide", action="store_true", help="after the grid, more rounds for each undecided "
                   "workload's contenders, until decided or --budget is spent")
    d.add_argument("--budget", type=options.budget, help="with --decide: runs in all (e.g. 200) or a duration "
                   "(e.g. 8m), the confirmations' included; default: twice the grid's runs")
    options.add_rule_options(p)
    options.add_export_options(p)
    s = p.add_argument_group("Slurm: the runs as one job array, for a fleet (docs/slurm.md)")
    s.add_argument("--slurm", action="store_true", help="submit the runs as a Slurm job array, wait, merge "
                   "the rows into --out (with --resume: submit only the runs without rows)")
    s.add_argument("--partition", help="sbatch --partition")
    s.add_argument("--nodelist", help="sbatch --nodelist (e.g. node[01-04])")
    s.add_argument("--constraint", help="sbatch --constraint (node features, e.g. a CPU type)")
    s.add_argument("--time", dest="time_limit", help="sbatch --time per task (e.g. 30, 1:00:00)")
    s.add_argument("--sbatch", action="append", default=[], metavar="OPTIONS",
                   help="more sbatch options, shell-quoted (repeatable)")
    s.add_argument("--runs-per-task", type=options.positive, default=1, help="runs per array task (default 1)")
    s.add_argument("--max-parallel", type=options.positive, help="at most this many tasks at once (array %%N)")
    s.add_argument("--shared", action="store_true", help="no --exclusive: tasks may share a node "
                   "(their numbers then include each other's load)")
    s.add_argument("--detach", action="store_true", help="submit and return; collect later with --merge")
    s.add_argument("--merge", action="store_true", help="only merge the rows that arrived into --out")
    p.set_defaults(run=main)
    return p


# With --decide, the share of --budget the race may use; the rest is the confirmations'.
RACE_SHARE = 0.85
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
    return argparse.RawDescriptionHelpFormatter


def grid_path(name):
    if os.path.exists(name) or name.endswith(".toml"):
        return name
    return os.path.join(paths.configs_dir(), name + ".toml")


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
        g.points = [p for p in g.points if rx.search(p.label) or rx.search(exec_bench.repro_line(p, args.libomp, os.environ))]
        if not g.points:
            raise ThreadburnError(f"--match {args.match!r}: no point matches")
    return g


def planned_settings(g, columns):
    """{workload: {setting: [point keys]}} of the grid's benchmarks, grouped as
    the verdict will group their rows (lib/keys.py: the setting flags of each
    study with their baselines, the rest the workload)."""
    out = {}
    for point in g.points:
        desc = point.description()
        for b in desc.benchmarks:
            row = Row(point.env, runtime=point.runtime, preset=point.preset, processes=str(point.processes),
                      world_size=str(point.processes) if point.ranks else "", benchmark=b.name,
                      knob_layout=point.layout_text(columns))
            row.update(exec_bench.knob_values(desc, b))
            keys_ = out.setdefault(row.workload, {}).setdefault(row.setting, [])
            if point.key not in keys_:
                keys_.append(point.key)
    return out


def dry_run_settings(g, columns):
    """The dry run's second part: per workload, the settings compared within it."""
    planned = planned_settings(g, columns)
    labels = keys.labels(list(planned))
    print(f"{len(planned)} workload{'s' if len(planned) != 1 else ''}; each compares its settings with its baseline "
          "(the default setting):")
    for w in sorted(planned, key=lambda w: labels[w]):
        settings = planned[w]
        base = next(iter(settings)).baseline_text()
        print(f"  {labels[w]}: {len(settings)} setting{'s' if len(settings) != 1 else ''} (baseline: {base})")
        for s in sorted(settings, key=lambda s: (not s.is_default, s.label)):
            print(f"    {s.label}{'  [baseline]' if s.is_default else ''}  <- point {', '.join(settings[s])}")


def dry_run(g, args, seed, columns):
    runs = sum(p.repetitions for p in g.points)
    print(f"grid {g.name}: {len(g.points)} points, {runs} runs (one process per run, shuffled with seed {seed})")
    for point in g.points:
        print(f"{point.key}  x{point.repetitions}  {point.label}" + ("  [timeline]" if point.timeline else ""))
        print("    " + exec_bench.repro_line(point, args.libomp, os.environ))
        for b in point.description().benchmarks:
            print("      " + b.name)
    dry_run_settings(g, columns)
    if args.slurm:
        tasks = -(-runs // args.runs_per_task)
        print(f"--slurm: one job array of {tasks} tasks of up to {args.runs_per_task} runs; sbatch "
              + (" ".join(exec_slurm.sbatch_options(slurm_options(args))) or "(no options)"))


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


def check_design(g, args):
    """Grids too small for the decision rule are said before anything runs."""
    few = sorted({(p.study, p.repetitions) for p in g.points if p.repetitions < rules.START_RUNS})
    if not few:
        return
    names = ", ".join(f"{s} ({n})" for s, n in few)
    if args.decide:
        print(f"sweep: note: {names} start below {rules.START_RUNS} runs; --decide runs them {rules.START_RUNS} "
              "times before its first look", flush=True)
        return
    print(f"sweep: warning: the decision rule needs at least {rules.MIN_RUNS} runs a setting to compare it, "
          f"{rules.START_RUNS} to start; these studies have fewer: {names}. Their workloads cannot be decided: "
          "raise repetitions or add --decide.", flush=True)


def race_item(by_key):
    """The campaign item of a sweep's race (analysis/race.GridRace asks it):
    item(point key, [(verdict, setting)], phase) runs that grid point for
    only the benchmarks of those settings (exec_bench.Only)."""
    def item(key, settings, phase):
        point = by_key[key]
        names = set()
        for e, name in settings:
            names |= registered(point, e, name)
        return exec_bench.Only(point, names, phase=phase)
    return item


def registered(point, e, name):
    """The registered names of the benchmarks the grid point ran for setting `name` of verdict e."""
    return {registered_name(point, b) for b in e.benchmarks.get(name, {e.benchmark})
            if any(b == d.name or b.startswith(d.name + "/") for d in point.description().benchmarks)}


def registered_name(point, reported):
    """The point's benchmark whose name Google Benchmark reported as `reported`
    (it appends /iterations:N/manual_time and the like)."""
    for b in point.description().benchmarks:
        if reported == b.name or reported.startswith(b.name + "/"):
            return b.name
    raise ThreadburnError(f"{reported!r}: not a benchmark of {point.label}")


def make_plots(out):
    from ..export import figures
    plot_dir = os.path.splitext(out)[0] + ".plots"
    try:
        figures.make_all(records.read_rows(out), os.path.dirname(os.path.abspath(out)), plot_dir)
    except ThreadburnError as e:
        print(f"sweep: plots not made: {e}")
        return None
    return plot_dir


def open_results(args, g, columns, rule):
    """(results file, run keys it holds, its seed, its path)."""
    out = choose_out(args, g.name)
    check_ready(g, args, out)
    for stale in glob.glob(glob.escape(out) + ".tmp*"):  # left by a SIGKILL mid-rename
        os.remove(stale)
    results_file = ResultsFile(out, columns, rule)
    done, file_seed = set(), None
    if args.resume or args.merge:
        done, file_seed, _ = results_file.repair_for_resume()
        if args.slurm:
            if file_seed is None:  # submitted, nothing merged yet: the job's seed
                file_seed = exec_slurm.plan_seed(out)
            added = exec_slurm.merge(exec_slurm.job_dir(out), results_file, done)
            print(f"sweep: merged {added} runs from {exec_slurm.job_dir(out)}/rows into {out}")
    else:
        results_file.create()
    return results_file, done, file_seed, out


def slurm_options(args):
    """The Slurm executor's options from the sweep's flags (exec_slurm.SlurmOptions)."""
    return exec_slurm.SlurmOptions(
        grid=args.grid, grid_file=args.grid_file, build_dir=args.build_dir, libomp=args.libomp,
        repetitions=args.repetitions, timeout=args.timeout, timeline=args.timeline, match=args.match,
        runs_per_task=args.runs_per_task, max_parallel=args.max_parallel, shared=args.shared,
        partition=args.partition, nodelist=args.nodelist, constraint=args.constraint, time_limit=args.time_limit,
        sbatch=tuple(args.sbatch))


def executor_for(args, g, seed, out, columns):
    if args.slurm:
        return exec_slurm.SlurmExecutor(slurm_options(args), g, seed, out)
    stem = os.path.splitext(out)[0]
    work = os.path.join(os.path.dirname(os.path.abspath(out)), "." + os.path.basename(stem) + ".work")
    shutil.rmtree(work, ignore_errors=True)
    return exec_bench.BenchExecutor(exec_bench.RunContext.beside(stem, args.libomp, seed, columns, work))


def planned_keys(reps):
    """The run keys of the grid's planned runs ({point key: runs}), as campaign.RunSpec names them."""
    return {f"{k}-r{r}" for k, n in reps.items() for r in range(n)}


def sweep(args):
    progs = build_programs(args.build_dir)
    g = load_grid(args, progs)
    columns = schema.Columns(p.describe() for p in progs.values())
    if args.dry_run:
        seed = next(s for s in (args.seed, g.settings["seed"], 1) if s is not None)
        dry_run(g, args, seed, columns)
        return 0
    check_design(g, args)
    rule = rules.Rule(objective=args.objective, margin=args.margin, design="race" if args.decide else "fixed")
    results_file, done, file_seed, out = open_results(args, g, columns, rule)
    seed = next(s for s in (args.seed, file_seed, g.settings["seed"], random.SystemRandom().randrange(1, 2 ** 31))
                if s is not None)
    # A race starts at rules.START_RUNS runs a setting: --decide brings smaller studies there first.
    reps = {p.key: max(p.repetitions, rules.START_RUNS) if args.decide else p.repetitions for p in g.points}
    grid_runs = sum(reps.values())
    if args.merge:
        missing = len(planned_keys(reps) - done)
        print(f"sweep: {grid_runs - missing} of {grid_runs} runs in {out}" + (
            f"; {missing} missing: `threadburn sweep {args.grid} --slurm --resume --out {out}` submits them"
            if missing > 0 else ""))
        return finish(args, out)
    if args.slurm and not args.decide and not planned_keys(reps) - done:
        print(f"sweep: every run is in {out}")
        return finish(args, out)
    executor = executor_for(args, g, seed, out, columns)
    budget = args.budget or campaign.Budget(runs=2 * grid_runs) if args.decide else None
    race_budget = budget and campaign.Budget(
        runs=None if budget.runs is None else int(budget.runs * RACE_SHARE),
        seconds=None if budget.seconds is None else budget.seconds * RACE_SHARE)
    c = campaign.Campaign(executor, results_file, seed, done, race_budget, name="sweep")
    if args.slurm and args.detach:
        specs = [s for r in range(max(reps.values())) for s in c.plan(p for p in g.points if reps[p.key] > r)]
        specs = [s for s in specs if s.key not in done]
        if specs:
            executor.submit(specs)
        print(f"sweep: detached. Progress: squeue -j {executor.job}. Then: threadburn sweep {args.grid} --slurm "
              f"--merge --out {out}" if specs else f"sweep: every run is in {out}")
        return 0
    print(f"sweep: {g.name}: {grid_runs} runs of {len(g.points)} points, {len(done)} already in {out}; in rounds, "
          f"seed {seed} (--seed {seed} repeats this order)" +
          (f"; deciding within {budget.text()}" if budget else ""), flush=True)
    race = races.GridRace(out, [p.key for p in g.points], rule, args.libomp, race_item({p.key: p for p in g.points}),
                          lambda: None if c.runs_possible() is None else c.runs_possible() - c.spent,
                          say=lambda line: print(line, flush=True)) if args.decide else None
    signal.signal(signal.SIGTERM, _interrupt)  # clean up like Ctrl-C

    def body():
        ended = c.run(g.points, reps, race)
        if race:
            confirm(race, c, budget, executor, results_file, seed)
        return ended
    ended = campaign.guarded(c, body, lambda: print(
        f"sweep: interrupted; {out} holds every finished run. Continue with: {resume_command(out, seed)}",
        file=sys.stderr))
    if ended == 130:
        return 130
    executor.close()
    stopped = f", {len(race.futile)} workload(s) stopped short of the runs they need" if race and race.futile else ""
    print(f"sweep: results in {out}" + (f" ({c.spent} race runs; race {ended}{stopped})" if race else ""))
    missing = len(planned_keys(reps) - c.done)
    if args.slurm and missing > 0:
        print(f"sweep: {missing} runs have no rows: `threadburn sweep {args.grid} --slurm --resume --out {out}` "
              "submits only those", file=sys.stderr)
        finish(args, out)
        return 1
    rc = finish(args, out)
    failed = any(r.status == "failed" for r in records.read_rows(out))
    return 1 if (args.strict and failed) else rc


def runs_available(budget, race_campaign, spent=0, seconds=()):
    """Runs the whole budget has left after the race's and `spent` more
    (a duration: the time left over the mean run's so far)."""
    if budget.runs is not None:
        return max(0, budget.runs - race_campaign.spent - spent)
    left = budget.seconds - (time.monotonic() - race_campaign.t0)
    times = list(race_campaign.run_seconds) + list(seconds)
    return int(max(0.0, left) / max(sum(times) / max(1, len(times)), 1e-3))


def confirm(race, race_campaign, budget, executor, results_file, seed):
    """Each change confirmed in fresh runs: the baseline's and the chosen
    setting's points, in rounds of their own, within what the budget left;
    then (rule version 3 on) more looks at those that cannot yet tell while
    the budget allows (analysis/confirmation.py: each look its share of the
    error), look k in rounds from 1000 x k."""
    available = runs_available(budget, race_campaign)
    items, n = race.confirmations(available)
    if not items or available < len(items) * confirmation.CONFIRM_MIN:
        if items:
            print(f"sweep: no confirmation: the budget left {available} runs, {len(items)} points need "
                  f"{confirmation.CONFIRM_MIN} each", flush=True)
        return
    n = min(n, available // len(items))
    print(f"sweep: confirming {len(items) // 2 or 1} change(s) in fresh runs: {len(items)} points, {n} rounds",
          flush=True)
    c = campaign.Campaign(executor, results_file, seed, race_campaign.done, name="confirm")
    c.round = confirmation.ROUNDS_PER_LOOK  # its own shuffles
    c.run(items, {i.key: n for i in items})
    for look in range(2, 100):
        available = runs_available(budget, race_campaign, c.spent, c.run_seconds)
        plan = race.next_looks(available)
        if not plan or plan[1] < confirmation.LOOK_MIN_RUNS:
            return
        items, n = plan
        print(f"sweep: confirmation look {look}: {len(items)} points, {n} more rounds (the fresh runs cannot yet "
              f"tell; {available} runs left in the budget)", flush=True)
        c.round = confirmation.ROUNDS_PER_LOOK * look
        c.run(items, {i.key: c.runs.get(i.key, 0) + n for i in items})


def finish(args, out):
    """Plots, the summary, the verdicts by the rule the rows recorded (text
    and <stem>.verdict.json)."""
    rows = records.read_rows(out)
    if not rows:
        return 0
    if not args.no_plot:
        plot_dir = make_plots(out)
        if plot_dir:
            print(f"sweep: plots in {plot_dir}")
    print(summary.summary_text(rows))
    v = verdicts.decide_rows(rows, os.path.basename(out), libomp=args.libomp)
    print("verdicts: per workload, against the default setting (gomp, no env, every setting flag at the program's "
          "default); docs/design.md, Decisions")
    print("\n".join(text.lines(v)))
    path = files.write_text(files.verdict_path(out), jsonfile.verdict_text(v))
    print(f"sweep: verdicts in {path}")
    for written in options.write_exports(args, v):
        print(f"sweep: exported {written}")
    return 0


def main(args):
    check_slurm_args(args)
    if args.budget and not args.decide:
        raise ThreadburnError("--budget needs --decide")
    if args.decide and args.slurm and args.detach:
        raise ThreadburnError("--decide needs to see each round's rows: not with --detach")
    args.grid_file = grid_path(args.grid)
    try:
        return sweep(args)
    except slurm.SlurmError as e:  # one line, as every error; the CSV keeps what was merged
        raise ThreadburnError(str(e)) from None
