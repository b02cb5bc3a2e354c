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
  T<n>-...        for n in 1, the physical cores, the CPUs: libgomp as built
                  (gomp), libgomp with OMP_WAIT_POLICY=passive, LLVM's
                  runtime with KMP_BLOCKTIME=0 and =1
Settings whose effective settings (as the probe reports them: runtime,
team size, and with a team the wait policy, blocktime, spin count) equal
an earlier one's after the first round are dropped as duplicates.
--points FILE (TOML: [[point]] name, runtime, env = {VAR = value}) replaces
them.

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
import re
import shutil
import time

from . import options
from ..analysis import confirmation, race as races, verdicts
from ..engine import campaign
from ..engine.exec_probe import ProbeExecutor, TunePoint
from ..export import jsonfile, text
from ..lib import files, knobs, probe, records, rule as rules, schema
from ..lib.errors import ThreadburnError
from ..lib.machine import physical_cores, usable_cpus
from ..lib.records import ResultsFile
from ..lib.usercmd import add_run_options, command_of, default_out, parse_env

LAUNCHER_AFFINITY = "granularity=fine,compact,1,0"
RUNS_PER_SETTING_BUDGET = 10   # the default budget: this many runs a setting, on average
# With a duration budget, the share of it the race may use; the rest is the confirmation's.
RACE_SHARE_OF_TIME = 0.85


def add_parser(sub):
    p = sub.add_parser("tune", help="your program under many thread settings: a verdict, with its evidence",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=options.budget, help="runs in all, the confirmation's included (e.g. 120), or "
                   f"a duration (e.g. 15m); default: {RUNS_PER_SETTING_BUDGET} runs a setting")
    p.add_argument("--repetitions", type=options.positive, help="a fixed design: this many runs a setting, no race")
    options.add_rule_options(p)
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
    options.add_export_options(p)
    add_run_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    p.set_defaults(run=main)
    return p


def default_points(user_env):
    """plain, launcher, and the thread counts crossed with the wait settings."""
    cores, cpus = physical_cores() or usable_cpus(), usable_cpus()
    points = [TunePoint("plain", "gomp", {}),
              TunePoint("launcher", "llvm", {"OMP_NUM_THREADS": str(cores), "KMP_BLOCKTIME": "1",
                                             "KMP_AFFINITY": LAUNCHER_AFFINITY})]
    for n in sorted({1, cores, cpus}):
        t = {"OMP_NUM_THREADS": str(n)}
        points += [TunePoint(f"T{n}-gomp", "gomp", t),
                   TunePoint(f"T{n}-passive", "gomp", dict(t, OMP_WAIT_POLICY="passive")),
                   TunePoint(f"T{n}-llvm-bt0", "llvm", dict(t, KMP_BLOCKTIME="0")),
                   TunePoint(f"T{n}-llvm-bt1", "llvm", dict(t, KMP_BLOCKTIME="1"))]
    for p in points:  # --env applies to every point; a point's own setting wins
        p.env = dict(user_env, **p.env)
        p.builtin = True
    return points


def load_points(path, user_env):
    import tomllib
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ThreadburnError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ThreadburnError(f"{path}: not valid TOML: {e}") from None
    raw = data.get("point")
    if not isinstance(raw, list) or not raw:
        raise ThreadburnError(f"{path}: expected [[point]] tables (name, runtime, env)")
    points, names = [], set()
    for i, entry in enumerate(raw):
        where = f"{path}: point[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ThreadburnError(f"{where}.name: expected a non-empty string")
        if entry["name"] in names:
            raise ThreadburnError(f"{where}.name: {entry['name']!r} twice")
        if not re.fullmatch(r"[A-Za-z0-9_.=+-]+", entry["name"]):
            raise ThreadburnError(f"{where}.name: letters, digits and _.=+- only, got {entry['name']!r}")
        names.add(entry["name"])
        runtime = entry.get("runtime", "gomp")
        if runtime not in schema.RUNTIMES:
            raise ThreadburnError(f"{where}.runtime: expected one of {', '.join(schema.RUNTIMES)}, got {runtime!r}")
        env = entry.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, (str, int)) for v in env.values()):
            raise ThreadburnError(f"{where}.env: expected a table of VAR = value")
        for name, value in env.items():  # the knob table's values (lib/knobs.py); the user's own variables: any
            try:
                knobs.check(name, value, extra=(schema.UNSET,) if knobs.get(name) else ())
            except knobs.KnobError as e:
                raise ThreadburnError(f"{where}.env.{name}: {e}") from None
        unknown = set(entry) - {"name", "runtime", "env"}
        if unknown:
            raise ThreadburnError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; expected name, runtime, env")
        points.append(TunePoint(entry["name"], runtime, dict(user_env, **{k: str(v) for k, v in env.items()})))
    if "plain" not in names:
        raise ThreadburnError(f"{path}: no point named \"plain\": the baseline the verdict is about")
    return points


def new_race(out, points, args, rule):
    """The race of the settings `points` on the rows of `out` so far."""
    return races.Race(lambda: records.read_rows(out), {p.name: p for p in points}, rule, args.libomp, out)


def plan_text(points, args, budget, rule):
    lines = [f"  {p.name:<14} {p.env_line(args.libomp)}" for p in points]
    design = (f"{args.repetitions} runs each (fixed)" if args.repetitions else
              f"{rules.START_RUNS} rounds, then a race within {budget.text()} (the confirmation's runs included)")
    return [f"tune: {len(points)} settings, {design}; margin {rule.margin:.0%}, objective {rule.objective}",
            f"tune: rule {rule.text()}"] + lines


def open_out(args, cmd, columns, rule):
    out = args.out or default_out("tune", cmd) + ".csv"
    results_file = ResultsFile(out, columns, rule)
    done, file_seed = set(), None
    if args.resume:
        if not os.path.exists(out):
            raise ThreadburnError(f"{out}: --resume: no such file")
        done, file_seed = results_file.repair_for_resume()
    elif os.path.exists(out) and not args.force:
        raise ThreadburnError(f"{out}: exists; pass --resume to continue it or --force to replace it")
    else:
        results_file.create()
    return out, results_file, done, file_seed


def check_args(args, points):
    if args.metric is not None:
        try:
            re.compile(args.metric)
        except re.error as e:
            raise ThreadburnError(f"--metric {args.metric!r}: not a regular expression: {e}") from None
    if any(p.runtime == "llvm" for p in points) and not os.path.exists(args.libomp):
        raise ThreadburnError(f"--libomp {args.libomp}: not found (Debian: apt install libomp-dev)")
    if args.repetitions and args.budget:
        raise ThreadburnError("--repetitions (a fixed design) and --budget (a race): pick one")
    if args.repetitions is not None and args.repetitions < rules.MIN_RUNS:
        raise ThreadburnError(f"--repetitions {args.repetitions}: the decision rule needs at least {rules.MIN_RUNS} "
                              "runs a setting")
    if args.confirm != "auto" and not (args.confirm.isdigit() and (int(args.confirm) == 0 or
                                                                   int(args.confirm) >= rules.MIN_RUNS)):
        raise ThreadburnError(f"--confirm {args.confirm!r}: expected auto, 0 (none) or a number of runs >= "
                              f"{rules.MIN_RUNS}")


def budgets(args, points):
    """(the whole budget, the race's part of it, whether fresh runs confirm
    a change): the confirmation needs room for CONFIRM_MIN runs of each side
    after the race; a budget too small for it leaves the claim to the race."""
    if args.repetitions:
        return None, None, args.confirm != "0"
    whole = args.budget or campaign.Budget(runs=RUNS_PER_SETTING_BUDGET * len(points))
    confirm = args.confirm != "0"
    if whole.runs is not None:
        if whole.runs < 2 * rules.MIN_RUNS:
            raise ThreadburnError(f"--budget {whole.runs}: too few runs to compare two settings (at least "
                                  f"{2 * rules.MIN_RUNS})")
        reserve = 2 * confirmation.CONFIRM_MIN
        if confirm and whole.runs - reserve < rules.START_RUNS * 2:
            print(f"tune: --budget {whole.runs} leaves no room for fresh runs to confirm a change "
                  f"({rules.START_RUNS * 2 + reserve} would): the race's own test makes the claim", flush=True)
            confirm = False
        return whole, campaign.Budget(runs=whole.runs - (reserve if confirm else 0)), confirm
    return whole, campaign.Budget(seconds=whole.seconds * (RACE_SHARE_OF_TIME if confirm else 1.0)), confirm


def main(args):
    cmd = command_of(args)
    user_env = parse_env(args.env)
    points = load_points(args.points, user_env) if args.points else default_points(user_env)
    check_args(args, points)
    whole, race_budget, confirm_it = budgets(args, points)
    rule = rules.Rule(objective=args.objective, margin=args.margin, design="fixed" if args.repetitions else "race",
                      confirm=confirm_it)
    if args.dry_run:
        print("\n".join(plan_text(points, args, whole, rule)))
        return 0
    desc = probe.describe(args.build_dir)
    knobs = []
    for p in points:
        knobs += [k for k in p.env if k not in knobs]
    columns = probe.columns(desc, knobs or ["OMP_NUM_THREADS"])
    out, results_file, done, file_seed = open_out(args, cmd, columns, rule)
    seed = next(s for s in (args.seed, file_seed, random.SystemRandom().randrange(1, 2 ** 31)) if s is not None)
    work = os.path.join(os.path.dirname(os.path.abspath(out)), "." + os.path.basename(out) + ".work")
    executor = ProbeExecutor(args, cmd, columns, work, seed)
    c = campaign.Campaign(executor, results_file, seed, done, race_budget, name="tune")
    print("\n".join(plan_text(points, args, whole, rule)))
    print(f"tune: {' '.join(cmd)}; {len(done)} runs already in {out}; seed {seed}", flush=True)
    reps = {p.key: args.repetitions or rules.START_RUNS for p in points}

    def body():
        c.run(points, {p.key: 1 for p in points})  # one round, then drop the duplicates
        dropped = verdicts.duplicates(records.run_records(records.read_rows(out), args.libomp))
        if dropped:
            print("tune: the same settings in force, dropped: " +
                  ", ".join(f"{a} (= {b})" for a, b in dropped.items()), flush=True)
        kept = [p for p in points if p.name not in dropped]
        race = None if args.repetitions else new_race(out, kept, args, rule)
        ended = c.run(kept, reps, race)
        confirm(args, cmd, columns, work, seed, out, results_file, c, points, rule, whole)
        return ended
    ended = campaign.guarded(c, body, lambda: print(
        f"tune: interrupted; {out} holds every finished run; continue with --resume --out {out}"))
    shutil.rmtree(work, ignore_errors=True)
    if ended == 130:
        return 130
    return report(args, out, ended, rule)


def confirm(args, cmd, columns, work, seed, out, results_file, race_campaign, points, rule, whole):
    """After a change: the chosen setting and plain, interleaved in rounds
    of two, without the probe, as many runs each as the race's spread says
    the gain needs to show again (confirmation.runs_for), within what the
    budget has left."""
    if not rule.confirm:
        return
    have = sum(1 for r in records.read_rows(out) if r.phase == "confirm") // 2
    if whole is None or args.confirm != "auto":
        available = 10 ** 6
    elif whole.runs is not None:
        available = max(0, whole.runs - race_campaign.spent) // 2 + have
    else:
        left = whole.seconds - (time.monotonic() - race_campaign.t0)
        per_run = sum(race_campaign.run_seconds) / max(1, len(race_campaign.run_seconds))
        available = int(max(0.0, left) / max(per_run, 1e-3)) // 2
    plan = new_race(out, points, args, rule).confirmation_plan(available)
    if plan is None:
        return
    (baseline, chosen), n = plan
    if args.confirm != "auto":
        n = int(args.confirm)
    elif whole is None:
        n = confirmation.CONFIRM_MIN
    by = {p.name: p for p in points}
    pair = [by[baseline].for_phase("confirm"), by[chosen].for_phase("confirm")]
    print(f"tune: confirming {chosen} against {baseline} in fresh runs without the probe ({n} runs each)",
          flush=True)
    executor = ProbeExecutor(args, cmd, columns, work, seed, phase="confirm")
    c = campaign.Campaign(executor, results_file, seed, race_campaign.done, name="confirm")
    c.round = 1000  # its own shuffles
    c.run(pair, {p.key: n for p in pair})


def report(args, out, ended, rule):
    rows = records.read_rows(out)
    v = verdicts.decide_records(records.run_records(rows, args.libomp), rule, os.path.basename(out),
                                rule_from="the rows")
    ended_text = {"decided": "the race ended decided", "budget": "the race ended with its budget spent",
                  "planned": "a fixed design"}.get(ended, ended)
    spent = sum(1 for r in rows if r.phase == "race")
    confirmed = sum(1 for r in rows if r.phase == "confirm")
    print(f"tune: results in {out}; {ended_text}; {spent} race runs" + (f" + {confirmed} confirmation runs"
                                                                          if confirmed else ""))
    for e in v.entries:
        print("\n".join(text.settings_table(e)))
    print("\n".join(text.lines(v, labels=False)))
    path = files.write_text(files.verdict_path(out), jsonfile.verdict_text(v))
    print(f"tune: verdict in {path}")
    for written in options.write_exports(args, v):
        print(f"tune: exported {written}")
    return 0
