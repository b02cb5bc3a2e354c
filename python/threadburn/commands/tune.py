"""threadburn tune: which thread settings for YOUR program, and what they cost.

    threadburn tune -- python3 train.py --steps 200
    threadburn tune --metric 'samples/s: ([0-9.]+)' --metric-better higher -- python3 train.py

Runs the command under a set of settings, each run a fresh process under the
preload probe: wall time, the CPU of every thread, the settings in force,
and your own figure when --metric gives a regular expression whose first
group is a number in the command's output (the last match counts). The
default settings:
  plain           your environment as it is (the baseline)
  launcher        what PyTorch's CPU launcher (torch.backends.xeon.run_cpu)
                  sets: LLVM's runtime, KMP_BLOCKTIME=1, compact
                  KMP_AFFINITY, OMP_NUM_THREADS = physical cores
  T<n>-...        for n in 1, the physical cores, the CPUs, the slot's
                  effective CPUs (a CPU quota's, rounded up: docs/slot.md): libgomp as built
                  (gomp), libgomp with OMP_WAIT_POLICY=passive, LLVM's
                  runtime with KMP_BLOCKTIME=0 and =1
Settings whose effective settings (as the probe reports them: runtime,
team size, and with a team the wait policy, blocktime, spin count) equal
an earlier one's after the first round are dropped as duplicates.
--points FILE (TOML: [[point]] name, runtime, env = {VAR = value}, and
pin = true for a core set per copy) replaces them.

Host plans: --copies N (or a list, 1,2,4, or auto: 1, 2, 4, ... up to the
CPUs) starts N copies of the command in every run, all spawned, then let
go at once, each under its own probe with the setting's environment
(THREADBURN_COPY=i and THREADBURN_COPIES=N tell a copy where it stands).
A run's figure is the host's throughput: copies / the run's wall time, or
your --metric summed over the copies; its CPU, all copies'. The default
plans for N: threads per copy 1, cores / N, the cores and the CPUs, each
with the wait settings above; the launcher's multi-instance mode (a
disjoint core set per copy, cores / N threads each); torchrun's
OMP_NUM_THREADS=1; the baseline is plain at the same N. Each N is decided
on its own; then fresh runs of each N's plain and chosen plan, and one copy
of it alone, say what each copy loses and, with several N, how many fit.

Slot sizes: --cpus N runs the whole tune in a cgroup of N CPUs' quota that
threadburn makes and removes (docs/slot.md); a list (1,2,4, 1.5, or auto)
runs each size's whole tune in its own slot (<stem>-cpus<N>.csv), then each
size's plan and plain in fresh runs, each in a slot of its size, and judges
each size's plan against the previous size's by --copies' rule: how many
CPUs the training needs (engine/slots.py, analysis/slotsizes.py).

A GPU training: when the first round's probe says the program used CUDA,
every run is judged on its steady phase, from its first training step the
probe recognises (the first of a run of repeated waits through the CUDA
driver; else its first wait or launch) to its end (its time and CPU: the startup, a fixed
cost of import and initialisation, left out and reported beside; the fresh
runs preload libthreadburn_phase.so to mark it), and
the CUDA host wait policies join the race on top of plain (cuda-spin,
cuda-yield, cuda-blocking_sync: THREADBURN_CUDA_SYNC, set by the probe
before the program's first CUDA call, and in the fresh runs without the
probe by libthreadburn_cuda_sync.so preloaded); a verdict for one says how to
keep it without threadburn. With --copies N on a host of N GPUs or more,
copy i sees GPU i alone (CUDA_VISIBLE_DEVICES=i; with fewer, they share).
THREADBURN_GPU_COUNT=N (a test hook) stands for the host's GPU count.

Your program's own knobs: --param NAME=v1,v2 (repeatable) runs every
setting with each combination of the values, {NAME} in the command
replaced (the first value of each is the baseline's). Values may change
the work a run does: --param needs --metric (your figure per unit of
work, e.g. samples/s), and its default objective is time (your figure).

The runs go in rounds (every remaining setting once per round, shuffled),
3 rounds first; then a race (docs/design.md, Decisions): settings shown
slower than the best by more than --margin stop, the others get more
rounds at the looks, until the verdict is decided (change / keep) or
--budget is spent (undecided, with the runs a decision would need).
--repetitions N runs a fixed design instead. Then the chosen setting and
plain run interleaved WITHOUT the probe (--confirm runs each): does the
gain hold there, and what did the probe cost your program? Rows go to a
results CSV (results/README.md), the verdict to <stem>.verdict.json;
--resume continues an interrupted tune.
"""
import argparse
import os
import random
import shutil
import signal
import sys
import time
from dataclasses import dataclass

from . import options
from .tune_plan import BLOCKS_PER_SETTING_BUDGET, RUNS_PER_SETTING_BUDGET, budgets, check_args, fresh_reserve, open_out
from ..analysis import advice, confirmation, race as races, runlog, slotsizes as slotsizes_in, verdicts
from ..engine import campaign, inrun_setup, plans, slots
from ..engine import exec_inrun
from ..engine.exec_probe import ProbeExecutor, ProbeOptions
from ..export import jsonfile, slotsizes as slotsizes_out, text
from ..lib import cgroup, files, machine, paths, probe, rule as rules
from ..lib.errors import ThreadburnError
from ..lib.records import ResultsFile
from ..lib.usercmd import add_run_options, command_of, parse_env, probe_extra

# --in-run's least seconds a block measures (--block).
DEFAULT_BLOCK_S = 0.5
# Looks of fresh runs after the race at most: the sequential confirmation's, and a new candidate's
# when fresh runs changed which runs are set aside as disturbed.
MAX_FRESH_LOOKS = 12


def add_parser(sub):
    p = sub.add_parser("tune", help="your program under many thread settings: a verdict, with its evidence",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=options.budget, help="runs in all, the confirmation's included (e.g. 120), or "
                   f"a duration (e.g. 15m); default: {RUNS_PER_SETTING_BUDGET} runs a setting (--in-run: "
                   f"{BLOCKS_PER_SETTING_BUDGET} blocks a setting)")
    p.add_argument("--repetitions", type=options.positive, help="a fixed design: this many runs a setting, no race")
    p.add_argument("--copies", type=options.copies, metavar="N|N,N,...|auto",
                   help="start N copies of the command together in every run and decide for the host: its "
                   "throughput, each copy's time, the CPU of all (a list: each N on its own, then how many fit)")
    p.add_argument("--cpus", metavar="N|N,N,...|auto",
                   help="run the whole tune in a slot of N CPUs' quota (1, 1.5): a cgroup threadburn makes under "
                   "its own and removes after, as a container's --cpus would (root or a delegated subtree; "
                   "docs/slot.md). A list (1,2,4; auto: 1, 2, 4, ... the CPUs): each size's tune in its own "
                   "slot, then each size's plan against the previous size's in fresh runs: how many CPUs it needs")
    p.add_argument("--param", action="append", default=[], metavar="NAME=v1,v2,...",
                   help="your program's own knob: {NAME} in the command takes each value (repeatable; needs --metric)")
    options.add_rule_options(p, objective_default="balanced; time with --param")
    p.add_argument("--confirm", default="auto",
                   help="runs each of the chosen setting and plain in the confirmation, without the probe: auto "
                   f"(default: what the race's spread needs to show the gain again, {confirmation.CONFIRM_MIN} to "
                   f"{confirmation.CONFIRM_MAX}, within the budget), a number, or 0 (none)")
    p.add_argument("--metric", help="regex whose first group is your figure in the command's output")
    p.add_argument("--metric-better", choices=("higher", "lower"), default="higher",
                   help="which way your figure is better (default higher, e.g. samples/s)")
    p.add_argument("--points", help="TOML file of [[point]] tables (name, runtime, env) instead of the defaults")
    p.add_argument("--out", help="results CSV (default: runs/tune-<command>-<time>.csv)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue --out, skipping the runs it holds")
    mode.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--seed", type=int, help="seed of the run order (default: random, printed)")
    p.add_argument("--timeout", type=options.positive, default=3600, help="per-run timeout in s (default 3600)")
    p.add_argument("--dry-run", action="store_true", help="list the settings and the plan, run nothing")
    inrun = p.add_argument_group("in-run trials (--in-run: one run of the command, its in-run settings in blocks)")
    inrun.add_argument("--in-run", action="store_true",
                       help="decide in one run: the settings a running program can change (its team, LLVM's "
                       "blocktime, the CUDA wait policy) alternate in blocks inside it, switched by the probe")
    inrun.add_argument("--apply", action="store_true",
                       help="with --in-run: once decided, a changed setting stays in force for the rest of the run")
    inrun.add_argument("--block", type=options.seconds, metavar="S",
                       help=f"with --in-run: the least seconds a block measures (default {DEFAULT_BLOCK_S:g}; longer "
                       f"when a unit of work needs it: {exec_inrun.MIN_UNITS} x 2 units)")
    inrun.add_argument("--progress", choices=("auto", "regions", "waits", "launches", "lines"),
                       help="with --in-run: the work a block counts (auto, the default: the CUDA driver's waits, else "
                       "OpenMP regions, else launches; --metric: your figure's lines; lines, with --metric: each "
                       "line it matches is a unit of work, its time between lines the figure)")
    options.add_export_options(p)
    add_run_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    p.set_defaults(run=main)
    return p


def plan_text(points, args, budget, rule):
    lines, copies = [], None
    for p in points:
        if p.copies != copies and p.copies:
            lines.append(f"  {p.copies} cop{'y' if p.copies == 1 else 'ies'} a run:")
        copies = p.copies
        lines.append(f"  {p.name:<14} {p.plan_line(args.libomp)}")
    design = (f"{args.repetitions} runs each (fixed)" if args.repetitions else
              f"{rules.START_RUNS} rounds, then a race within {budget.text()} (the confirmation's runs included)")
    counts = sorted({p.copies for p in points if p.copies})
    host = f" for {', '.join(map(str, counts))} copies a run" if counts else ""
    size = f"{len(points)} settings{host}"
    if args.param:
        size += f" ({len(points) // max(1, len({(p.copies, p.name.split(',')[0]) for p in points}))} combinations of --param each)"
    if not args.repetitions:
        size += f"; at most {budget.runs} runs" if budget and budget.runs else ""
    policies = plans.cuda_policies(points)
    if policies:
        lines.append("  and, when the first round shows the program uses CUDA, on top of plain: "
                     + ", ".join(f"{plans.CUDA_PREFIX}{w} ({probe.CUDA_SYNC}={w})" for w in policies))
    return [f"tune: {size}, {design}; margin {rule.margin:.0%}, objective {rule.objective}",
            f"tune: rule {rule.text()}"] + lines


def gpu_text(copies, gpus):
    """Once: which copy counts give each copy a GPU of its own, and which share them."""
    counts = [n for n in copies or () if n > 1]
    if not counts or not gpus:
        return []
    own = [n for n in counts if plans.copy_gpus(n, gpus)]
    share = [n for n in counts if n not in own]
    parts = [f"{', '.join(map(str, own))} copies a run: copy i alone sees GPU i of {', '.join(gpus)} "
             "(CUDA_VISIBLE_DEVICES, in each row's extra_context)"] if own else []
    if share:
        parts.append(f"{', '.join(map(str, share))} copies a run share the {len(gpus)} GPU(s)")
    return ["tune: GPUs: " + "; ".join(parts)]


def new_race(t, points):
    """The race of the settings `points` on the tune's runs so far (in memory)."""
    return races.Race(t.log.records, {p.key: p for p in points}, t.rule, t.out)


def probe_options(args):
    """The executor's options from tune's flags (exec_probe.ProbeOptions)."""
    return ProbeOptions(build_dir=args.build_dir, libomp=args.libomp, timeout=args.timeout, metric=args.metric,
                        metric_better=args.metric_better, probe_env=tuple(probe_extra(args).items()))


def inrun_options(args, user_env):
    """An in-run tune's options from tune's flags (exec_inrun.InRunOptions), --block and
    --progress at their defaults where not given; user_env: --env, parsed."""
    return exec_inrun.InRunOptions(
        build_dir=args.build_dir, libomp=args.libomp, runtime=args.runtime, timeout=args.timeout,
        block=DEFAULT_BLOCK_S if args.block is None else args.block,
        progress="auto" if args.progress is None else args.progress, metric=args.metric,
        metric_better=args.metric_better, probe_env=tuple(probe_extra(args).items()),
        user_env=tuple(user_env.items()))


@dataclass
class Tune:
    """What the steps of one tune share: its flags, command and settings,
    its rule and budget, its results file (the resume log) and its runs in
    memory (log: what the race, the fresh runs and the report read)."""
    args: argparse.Namespace
    cmd: list
    columns: object
    points: list
    rule: rules.Rule
    whole: campaign.Budget
    results_file: ResultsFile
    log: runlog.RunLog
    seed: int
    work: str
    # The program does device work (its first round's probe): its runs are judged on their
    # steady phase (rule version 6), and its fresh runs mark it (libthreadburn_phase.so).
    steady: bool = False
    # An in-run tune's one executor (its blocks, the fresh ones too, are of one process:
    # engine/exec_inrun.py); None: a new ProbeExecutor for each campaign (a fresh process a run).
    shared: object = None
    # What its runs are called: (a run, the fresh runs after the race).
    words: tuple = ("run", "fresh runs without the probe")

    out = property(lambda self: self.results_file.path)

    def executor(self):
        if self.shared is not None:
            return self.shared
        return ProbeExecutor(probe_options(self.args), self.cmd, self.columns, self.work, self.seed, self.steady)

    def campaign(self, executor, done, budget=None, name="tune"):
        return campaign.Campaign(executor, self.results_file, self.seed, done, budget, name=name, log=self.log)


def main(args):
    """The tune; with --cpus, all of it in a slot of that quota."""
    if not getattr(args, "cpus", None):
        return main_in_slot(args)
    try:
        sizes = cgroup.parse_sizes(args.cpus)
    except ValueError as e:
        raise ThreadburnError(f"--cpus {args.cpus}: {e}") from None
    if len(sizes) > 1:  # each size's tune in its own slot, then the sizes side by side (engine/slots.py)
        return main_sizes(args, sizes)
    cpus = sizes[0]
    # threadburn itself joins the slot, so every run (and its probe's reading of the slot) is
    # inside it; it leaves before the slot is removed, on an error or an interrupt too.
    # SIGTERM as Ctrl-C meanwhile: the runs stopped as for an interrupt, then the slot removed.
    previous = signal.signal(signal.SIGTERM, _as_interrupt)
    try:
        with cgroup.QuotaCgroup(cpus) as slot, slot.joined():
            print(f"tune: in a slot of {cpus:g} CPUs' quota: {slot.path} (cgroup {slot.version}, removed after)",
                  flush=True)
            return main_in_slot(args)
    finally:
        signal.signal(signal.SIGTERM, previous)


def _as_interrupt(*_):
    raise KeyboardInterrupt


def main_sizes(args, sizes):
    """tune --cpus 1,2,4 (engine/slots.py), with what it takes of this command."""
    def settings(a):
        points = plans.plan(a.points, parse_env(a.env), [None], plans.parse_params(a.param, command_of(a)))
        return points + plans.cuda_points(points)
    return slots.main_sizes(args, sizes, slots.Hooks(
        tune=main_in_slot, plan_of=slotsizes_in.plan_of, settings=settings, report=slotsizes_out.report,
        executor=lambda cmd, columns, work, seed: ProbeExecutor(probe_options(args), cmd, columns, work, seed)))


def main_in_slot(args):
    check_inrun_flags(args)
    if args.in_run:
        return main_inrun(args)
    cmd = command_of(args)
    user_env = parse_env(args.env)
    params = plans.parse_params(args.param, cmd)
    try:
        gpus = machine.gpus() if args.copies else []
    except ValueError as e:
        raise ThreadburnError(str(e)) from None
    points = plans.plan(args.points, user_env, args.copies or [None], params, gpus)
    check_args(args, points, params)
    objective = args.objective or ("time" if params else "balanced")
    whole, race_budget, confirm_it = budgets(args, points)
    rule = rules.Rule(objective=objective, margin=args.margin, design="fixed" if args.repetitions else "race",
                      confirm=confirm_it)
    if args.dry_run:
        print("\n".join(plan_text(points, args, whole, rule) + gpu_text(args.copies, gpus)))
        return 0
    desc = probe.describe(args.build_dir)
    variables = []
    for p in points:
        variables += [k for k in p.env if k not in variables]
    columns = probe.columns(desc, variables, list(params))
    results_file, held = open_out(args, cmd, columns, rule)
    out = results_file.path
    seed = next(s for s in (args.seed, held.seed, random.SystemRandom().randrange(1, 2 ** 31)) if s is not None)
    work = paths.work_dir(out)
    t = Tune(args, cmd, columns, points, rule, whole, results_file, runlog.RunLog(args.libomp, held.rows), seed,
             work)
    executor = t.executor()
    c = t.campaign(executor, held.done, race_budget)
    print("\n".join(plan_text(points, args, whole, rule) + gpu_text(args.copies, gpus)))
    print(f"tune: {' '.join(cmd)}; {len(held.done)} runs already in {out}; seed {seed}", flush=True)

    def body():
        c.run(points, {p.key: 1 for p in points})  # one round, then drop the duplicates
        gone = drop_duplicates(t, set())
        added = add_cuda(t, c, executor)
        if added:
            points.extend(added)
            gone |= drop_duplicates(t, gone)
        kept = [p for p in points if p.key not in gone]
        race = None if args.repetitions else new_race(t, kept)
        ended = c.run(kept, {p.key: args.repetitions or rules.START_RUNS for p in kept}, race)
        return confirm(t, c) or ended
    ended = campaign.guarded(c, body, lambda: print(
        f"tune: interrupted; {out} holds every finished run; continue with --resume --out {out}"))
    shutil.rmtree(work, ignore_errors=True)
    if ended == 130:
        return 130
    return report(t, ended)


def drop_duplicates(t, said_before):
    """The point keys of tune's own settings whose settings in force (after
    their first round) equal another's; says those not in said_before."""
    recs = t.log.records()
    dropped = verdicts.duplicates(recs)
    said = {r.point_key: f"{r.name} (= {dropped[r.workload][r.name]})" + (
                f" at {r.copies} cop{'y' if r.copies == 1 else 'ies'}" if t.args.copies else "")
            for r in recs if r.name in dropped.get(r.workload, {})}
    new = sorted(k for k in said if k not in said_before)
    if new:
        print("tune: the same settings in force, dropped: " + ", ".join(said[k] for k in new), flush=True)
    return set(said)


def add_cuda(t, c, executor):
    """After the first round: when a run's probe says the program used CUDA
    (cuda_used), the CUDA host wait policies on top of plain
    (plans.cuda_points), with a round of their own and, under the default
    budget, its runs a setting more. The fresh runs without the probe need
    libthreadburn_cuda_sync.so: found now, or one line."""
    if not any(r.phase == "race" and probe.used_cuda(r) for r in t.log.rows):
        return []
    t.steady = t.rule.steady_phase
    if t.steady:
        probe.phase_library(t.args.build_dir)  # raises its one line now, not after the race
        print("tune: its runs are judged on their steady phase, from the first training step recognised "
              "(else the first device work) to the end (the startup "
              f"before it is reported beside; the fresh runs without the probe preload {probe.PHASE_LIBRARY} to "
              "mark it)", flush=True)
    added = plans.cuda_points(t.points)
    if not added:
        return []
    executor.cuda_lib  # noqa: B018  (raises its one line now, not after the race)
    extra = ""
    if t.args.budget is None and t.whole is not None and t.whole.runs is not None:
        more = RUNS_PER_SETTING_BUDGET * len(added)
        t.whole.runs += more
        c.budget.runs += more
        extra = f"; the budget grows by {more} runs"
    names = sorted({p.name.split(",")[0] for p in added})
    print(f"tune: the program uses CUDA (its first round's probe: cuda_used = 1): added its host wait policies on "
          f"top of plain, {probe.CUDA_SYNC} = " + ", ".join(f"{n[len(plans.CUDA_PREFIX):]} ({n})" for n in names) +
          " (the probe sets each before the program's first CUDA call; the fresh runs without the probe preload "
          f"{probe.CUDA_SYNC_LIBRARY}){extra}", flush=True)
    c.run(added, {p.key: 1 for p in added})
    return added


def confirm(t, race_campaign):
    """After the race, what is left of the budget. A race that ended with
    no candidate and keep not shown takes its last looks with it (race.last_looks:
    keep's last test sees every run the budget allows). A candidate gets
    fresh runs without the probe, interleaved in rounds, it and plain, as
    many as the race's spread says its gain needs to show again
    (confirmation.runs_for); a host tune (--copies) also plain at every N,
    and one copy alone of each N's plan (race.confirmation_plan). While the
    fresh runs cannot yet tell and the budget allows, more looks of them
    (race.next_look; look k's rounds from 1000 x k, k counted over the
    whole tune). Fresh runs can change which runs the verdict sets aside as
    disturbed (their evidence moves the median run's), and with it the
    race's candidate: then the new one gets fresh runs of its own, budget
    allowing. Fresh runs that contradict the candidate (rule version 5: it
    is ruled out) send the tune back to the race with what the budget has
    left, less the next candidate's fresh runs (race.Race.refuted): before,
    such a tune ended undecided with the rest of its budget unspent. The
    rule says whether there are fresh runs at all (rule.confirm: --confirm
    0, or a budget without room for them). Returns how the last race ended
    when the tune went back to it, else None."""
    args, rule, whole = t.args, t.rule, t.whole
    done_fresh = len({r.run_key for r in t.log.rows if r.phase != "race"})
    by = {p.key: p for p in t.points}
    c = t.campaign(t.executor(), race_campaign.done, name="confirm")
    reserve = fresh_reserve(t.points) if rule.confirm else 0

    def left():  # runs the budget has left (None: no budget); the file's fresh runs count once resumed
        if whole is None:
            return None
        if whole.runs is not None:
            return max(0, whole.runs - race_campaign.spent - max(c.spent, done_fresh))
        per_run = sum(race_campaign.run_seconds) / max(1, len(race_campaign.run_seconds))
        return int(max(0.0, whole.seconds - (time.monotonic() - race_campaign.t0)) / max(per_run, 1e-3))

    ended, seen, look, asked = None, set(), 0, set()
    while True:
        last_looks(t, race_campaign, left, reserve)
        if not rule.confirm:
            return ended
        look = fresh_looks(t, c, left, by, look, asked)
        race = new_race(t, t.points)
        new = race.refuted() - seen
        if not new or args.repetitions or left() is None:
            return ended
        seen |= new
        room = left() - reserve
        names = ", ".join(sorted(name for _, name in new))
        if room < rules.START_RUNS:
            print(f"tune: the fresh runs contradict {names}: ruled out; no budget left to race on for another "
                  "candidate", flush=True)
            return ended
        needed = race()
        print(f"tune: the fresh runs contradict {names}: ruled out; the race goes on for another candidate with "
              f"what the budget has left ({room} runs; room kept for its fresh runs)"
              + ("" if needed else ": it has one already"), flush=True)
        if needed:
            race_campaign.budget = campaign.Budget(runs=race_campaign.spent + room)
            ended = race_campaign.run(needed, {i.key: race_campaign.runs[i.key] for i in needed}, race)


def last_looks(t, race_campaign, left, reserve):
    """The race's last looks with what the budget has left (race.last_looks)
    when it ended with no candidate and keep not shown."""
    if left() is None or t.args.repetitions:
        return
    for i, (todo, each) in enumerate(races.last_looks(lambda: new_race(t, t.points), left, reserve)):
        kept = " (room kept for fresh runs of a candidate it finds)" if not i and reserve else ""
        print(f"tune: no candidate and keep not shown: a last look with what the budget has left{kept}, {each} "
              f"more run{'s' if each != 1 else ''} each of {', '.join(p.name for p in todo)}", flush=True)
        race_campaign.run(todo, {p.key: race_campaign.runs[p.key] + each for p in todo})


def fresh_looks(t, c, left, by, look, asked):
    """The fresh runs' looks after `look` (the tune's looks so far) while
    a candidate has none yet or its confirmation cannot yet tell, within
    the budget and MAX_FRESH_LOOKS; asked: the (point key, phase) items
    whose first look was made (updated). Returns the last look made."""
    args, whole = t.args, t.whole
    while look < MAX_FRESH_LOOKS:
        available = 10 ** 6 if left() is None or args.confirm != "auto" else left() // 2
        race = new_race(t, t.points)
        plan = race.confirmation_plan(available, host=bool(args.copies))
        first = plan is not None and not set(plan[0]) <= asked
        if not first:  # the candidates have their fresh runs: more looks while they cannot yet tell
            plan = race.next_look(available) if args.confirm == "auto" and whole is not None else None
        if plan is None:
            return look
        wanted, n = plan
        if args.confirm != "auto":
            n = int(args.confirm)
        elif whole is None:
            n = confirmation.CONFIRM_MIN
        elif n * len(wanted) > left():
            n = left() // len(wanted)
            if n < (confirmation.CONFIRM_MIN if first else confirmation.LOOK_MIN_RUNS):
                print("tune: no budget left for fresh runs of " + ", ".join(by[k].name for k, _ in wanted), flush=True)
                return look
        look += 1
        items = [by[k].alone() if phase == "alone" else by[k].for_phase(phase) for k, phase in wanted]
        print(f"tune: {t.words[1]}, look {look} ({n} each): " +
              ", ".join(f"{by[k].name}{' x' + str(by[k].copies) if by[k].copies else ''}"
                        f"{' alone' if phase == 'alone' else ''}" for k, phase in wanted), flush=True)
        c.round = confirmation.ROUNDS_PER_LOOK * look  # the look is in the rows: confirmation.look_of
        c.run(items, {p.key: c.runs.get(p.key, 0) + n for p in items})
        if first:
            asked |= set(wanted)
    return look


def final_verdicts(t):
    """The verdicts on the tune's runs, its race over (keep's last test)."""
    return verdicts.decide_records(t.log.records(), t.rule, os.path.basename(t.out), rule_from="the rows", final=True)


def report(t, ended, after=(), v=None):
    """The verdict (v: final_verdicts(t), made once by a caller that read it
    already): printed (and `after`, lines under it), into <stem>.verdict.json
    and the exports."""
    args, out, rows = t.args, t.out, t.log.rows
    if v is None:
        v = final_verdicts(t)
    ended_text = {"decided": "the race stopped: nothing left for it to run (a candidate for fresh runs, or "
                             "every comparison settled)",
                  "budget": "the race ended with its budget spent", "planned": "a fixed design"}.get(ended, ended)
    spent = len({r.run_key for r in rows if r.phase == "race"})
    fresh = len({r.run_key for r in rows if r.phase != "race"})
    print(f"tune: results in {out}; {ended_text}; {spent} race {t.words[0]}s" + (f" + {fresh} {t.words[1]}"
                                                                                  if fresh else ""))
    for e in v.entries:
        print("\n".join(text.settings_table(e)))
    print("\n".join(text.lines(v, labels=len(v.entries) > 1 or bool(v.fit))))
    slot = machine.slot_line_of_rows(rows)
    if slot:
        print(f"tune: decided in its slot: {slot}")
    for line in after:
        print(line)
    path = files.write_text(files.verdict_path(out), jsonfile.verdict_text(v))
    print(f"tune: verdict in {path}")
    for written in options.write_exports(args, v):
        print(f"tune: exported {written}")
    return 0


# Flags that need a fresh process a run: not with --in-run.
NOT_IN_RUN = {"copies": "--copies", "param": "--param", "repetitions": "--repetitions", "points": "--points",
              "resume": "--resume", "dry_run": "--dry-run"}


# Flags of an in-run tune alone: without --in-run they would be silently ignored.
IN_RUN_ONLY = {"apply": "--apply", "block": "--block", "progress": "--progress"}


def check_inrun_flags(args):
    """--apply, --block and --progress without --in-run: an error that says so; --progress
    lines without --metric (its lines are the units): one too."""
    given = [flag for key, flag in IN_RUN_ONLY.items() if getattr(args, key) not in (None, False)]
    if given and not args.in_run:
        raise ThreadburnError(f"{', '.join(given)}: only with --in-run (one run of the command, its in-run settings "
                              "in blocks); tune without --in-run starts a fresh process a run and has no blocks")
    if args.progress == "lines" and args.metric is None:
        raise ThreadburnError("--progress lines: each line your --metric matches is a unit of work; give --metric "
                              "REGEX (a line your program prints per step or per log interval)")


def main_inrun(args):
    """--in-run: one run of the command under the probe, its in-run settings
    alternating in blocks (engine/exec_inrun.py), judged by the same rule as
    any tune: a race on cycles of blocks, then fresh blocks of the candidate
    and plain that make the claim (docs/design.md, "In-run trials")."""
    given = [flag for key, flag in NOT_IN_RUN.items() if getattr(args, key)]
    if given or args.confirm != "auto":
        raise ThreadburnError(f"--in-run: {', '.join(given or ['--confirm'])} needs a fresh process a run (tune "
                              "without --in-run)")
    cmd, user_env = command_of(args), parse_env(args.env)
    check_args(args, [], {})
    desc = probe.describe(args.build_dir)
    if "inrun" not in desc:
        raise ThreadburnError(f"{probe.library(args.build_dir)}: a probe without in-run trials; rebuild")
    columns = probe.inrun_columns(desc, ["OMP_NUM_THREADS", "KMP_BLOCKTIME", probe.CUDA_SYNC] + list(user_env))
    rule = rules.Rule(objective=args.objective or "balanced", margin=args.margin, design="race", confirm=True)
    results_file, _ = open_out(args, cmd, columns, rule)
    out = results_file.path
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
    ex = inrun_setup.start(cmd, inrun_options(args, user_env), desc["inrun"], columns, out, seed)
    print(f"tune --in-run: {' '.join(cmd)}; seed {seed}; its output in {ex.log_path}"
          + (f" (made line-buffered for --metric: {', '.join(ex.buffering)})" if ex.buffering else ""), flush=True)
    t0 = time.monotonic()
    t, ended = None, "the program ended"
    try:
        unit_s = inrun_setup.warm_up(ex)
        print(ex.steered_text(), flush=True)
        points, left_out, settle_note = inrun_setup.offer(ex)
        whole, race_budget, _ = budgets(args, points, BLOCKS_PER_SETTING_BUDGET)
        t = Tune(args, cmd, columns, points, rule, whole, results_file, runlog.RunLog(args.libomp, []), seed, ex.work,
                 shared=ex, words=("block", "fresh blocks, not used to choose"))
        print(f"tune --in-run: {len(points)} settings in blocks: " + ", ".join(p.name for p in points)
              + f"; progress: {ex.kind} (a unit every {unit_s * 1000:.3g} ms); blocks of {ex.block_s:.3g} s after "
              f"{ex.settle_s:.3g} s settling (at least two units and the longest spin in force or asked; your "
              f"program's own workers: {exec_inrun.spin_text(ex.own_spin)}); budget {whole.text()}; margin "
              f"{rule.margin:.0%}, objective {rule.objective}\ntune --in-run: not in-run here: " + "; ".join(left_out)
              + (f"\n{settle_note}" if settle_note else ""), flush=True)
        c = t.campaign(ex, set(), race_budget, name="tune --in-run")

        def body():
            race_ended = c.run(points, {p.key: rules.START_RUNS for p in points}, new_race(t, points))
            return confirm(t, c) or race_ended
        ended = campaign.guarded(c, body, lambda: print(f"tune --in-run: interrupted; the program was stopped; "
                                                        f"{out} holds every block"))
    except exec_inrun.Ended:
        pass
    except ThreadburnError:
        ex.stop()  # the program (and every process of its session) ends with the tune
        ex.close()
        raise
    if ended == 130:
        return 130
    return inrun_end(t, ex, ended, time.monotonic() - t0)


def inrun_end(t, ex, ended, seconds):
    """The in-run verdict, then the rest of the run under the chosen setting
    (--apply, a change) or the program's own, to the program's end."""
    if t is None or not t.log.rows:
        ex.finish(-1)
        code = ex.wait()
        ex.close()
        raise ThreadburnError(f"--in-run: the program ended (exit {code}) before any block: nothing to decide")
    v = final_verdicts(t)
    e = v.entries[0]
    keep = e.chosen if t.args.apply and e.verdict == "change" else "plain"
    index = ex.index.get(next((p.base_key for p in t.points if p.name == keep), ""), -1)
    ex.finish(index)
    blocks = len({r.run_key for r in t.log.rows})
    alive = ex.alive()
    after = [f"tune --in-run: decided in one run, {seconds:.0f} s, {blocks} blocks"
             + ("" if alive else " (the program ended before the tune did)")]
    spread = advice.unit_spread_note(t.log.records(), ex.kind)
    if spread:
        after.append(spread)
    after += [line for line in (ex.dropped_text(), ex.held_back_text()) if line]
    if alive:
        after.append(f"tune --in-run: {keep} in force from {time.monotonic() - ex.t0:.1f} s into the run"
                     + ("" if keep != "plain" or not t.args.apply else " (--apply: no change was confirmed)")
                     + "; waiting for the program to end")
    report(t, ended, after, v)
    sys.stdout.flush()  # the verdict now, not when the program ends (a pipe: tee, a log collector)
    code = ex.wait()
    ex.close()
    shutil.rmtree(t.work, ignore_errors=True)
    print(f"tune --in-run: the program ended, exit {code}")
    return 0
