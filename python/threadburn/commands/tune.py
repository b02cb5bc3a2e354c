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

from . import options
from ..engine import campaign
from ..analysis import decide, results, verdicts
from ..lib import probe, schema
from ..lib.errors import ThreadburnError
from ..engine.exec_probe import ProbeExecutor, TunePoint
from ..lib.machine import physical_cores, usable_cpus
from ..lib.resultsfile import ResultsFile
from ..lib.usercmd import add_run_options, command_of, default_out, parse_env

LAUNCHER_AFFINITY = "granularity=fine,compact,1,0"
RUNS_PER_SETTING_BUDGET = 10   # the default budget: this many runs a setting, on average
CONFIRM_RUNS = 5


def add_parser(sub):
    p = sub.add_parser("tune", help="your program under many thread settings: a verdict, with its evidence",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budget", type=options.budget, help="runs in all (e.g. 120) or a duration (e.g. 15m); "
                   f"default: {RUNS_PER_SETTING_BUDGET} runs a setting")
    p.add_argument("--repetitions", type=options.positive, help="a fixed design: this many runs a setting, no race")
    p.add_argument("--margin", type=options.margin, default=decide.MARGIN,
                   help=f"practical margin on time and CPU (default {decide.MARGIN:.2f}, i.e. {decide.MARGIN * 100:.0f} %%)")
    p.add_argument("--objective", choices=decide.OBJECTIVES, default="balanced",
                   help="time, cpu, or balanced: the least CPU among the fastest (default)")
    p.add_argument("--confirm", type=int, default=CONFIRM_RUNS,
                   help=f"runs each of the chosen setting and plain without the probe (default {CONFIRM_RUNS}; 0: none)")
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
    verdicts.add_export_options(p)
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
        unknown = set(entry) - {"name", "runtime", "env"}
        if unknown:
            raise ThreadburnError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; expected name, runtime, env")
        points.append(TunePoint(entry["name"], runtime, dict(user_env, **{k: str(v) for k, v in env.items()})))
    if "plain" not in names:
        raise ThreadburnError(f"{path}: no point named \"plain\": the baseline the verdict is about")
    return points


class TuneRace(campaign.Race):
    """The settings the next round needs (the verdict of the rows so far);
    none when decided."""

    def __init__(self, out, points, args, c):
        super().__init__(c, [p.key for p in points])
        self.out, self.by_name, self.args = out, {p.name: p for p in points}, args

    def needed(self):
        entries = verdicts.decide_all(results.read_rows(self.out), self.args.objective, self.args.margin,
                                      looks=self.looks)
        d = entries[0].decision if entries else None
        return [self.by_name[n] for n in d.needs if n in self.by_name] if d else []


def plan_text(points, args, budget):
    lines = [f"  {p.name:<14} {p.env_line(args.libomp)}" for p in points]
    design = (f"{args.repetitions} runs each (fixed)" if args.repetitions else
              f"{decide.START_RUNS} rounds, then a race within {budget.text()}")
    return [f"tune: {len(points)} settings, {design}; margin {args.margin:.0%}, objective {args.objective}"] + lines


def open_out(args, cmd, columns):
    out = args.out or default_out("tune", cmd) + ".csv"
    results_file = ResultsFile(out, columns)
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
    if args.repetitions is not None and args.repetitions < decide.MIN_RUNS:
        raise ThreadburnError(f"--repetitions {args.repetitions}: the decision rule needs at least {decide.MIN_RUNS} "
                              "runs a setting")
    if args.confirm < 0:
        raise ThreadburnError("--confirm: expected 0 or more runs")


def main(args):
    cmd = command_of(args)
    user_env = parse_env(args.env)
    points = load_points(args.points, user_env) if args.points else default_points(user_env)
    check_args(args, points)
    budget = None if args.repetitions else (args.budget or campaign.Budget(runs=RUNS_PER_SETTING_BUDGET * len(points)))
    if args.dry_run:
        print("\n".join(plan_text(points, args, budget)))
        return 0
    desc = probe.describe(args.build_dir)
    knobs = []
    for p in points:
        knobs += [k for k in p.env if k not in knobs]
    columns = probe.columns(desc, knobs or ["OMP_NUM_THREADS"])
    out, results_file, done, file_seed = open_out(args, cmd, columns)
    seed = next(s for s in (args.seed, file_seed, random.SystemRandom().randrange(1, 2 ** 31)) if s is not None)
    work = os.path.join(os.path.dirname(os.path.abspath(out)), "." + os.path.basename(out) + ".work")
    executor = ProbeExecutor(args, cmd, columns, work, seed)
    c = campaign.Campaign(executor, results_file, seed, done, budget, name="tune")
    print("\n".join(plan_text(points, args, budget)))
    print(f"tune: {' '.join(cmd)}; {len(done)} runs already in {out}; seed {seed}", flush=True)
    reps = {p.key: args.repetitions or decide.START_RUNS for p in points}

    def body():
        c.run(points, {p.key: 1 for p in points})  # one round, then drop the duplicates
        dropped = verdicts.duplicates(results.read_rows(out))
        if dropped:
            print("tune: same effective settings, dropped: " + ", ".join(f"{a} (= {b})" for a, b in dropped.items()),
                  flush=True)
        kept = [p for p in points if p.name not in dropped]
        race = None if args.repetitions else TuneRace(out, kept, args, c)
        ended = c.run(kept, reps, race)
        looks = race.looks if race and race.looks else 1
        return race, ended, confirm(args, cmd, columns, work, seed, out, results_file, c.done, points, looks)
    result = campaign.guarded(c, body, lambda: print(
        f"tune: interrupted; {out} holds every finished run; continue with --resume --out {out}"))
    shutil.rmtree(work, ignore_errors=True)
    if result == 130:
        return 130
    race, ended, confirmation = result
    return report(args, out, race, ended, budget, confirmation)


def confirm(args, cmd, columns, work, seed, out, results_file, done, points, looks):
    """The chosen setting and plain, interleaved, without the probe (the
    verdict as the race's looks give it: the one the report prints)."""
    from ..analysis import confirmation
    if args.confirm == 0:
        return None
    entries = verdicts.decide_all(results.read_rows(out), args.objective, args.margin, looks=looks)
    d = entries[0].decision if entries else None
    if d is None or d.verdict != "change":
        return None
    by = {p.name: p for p in points}
    pair = [by[d.baseline].for_phase("confirm"), by[d.chosen].for_phase("confirm")]
    print(f"tune: confirming {d.chosen} against {d.baseline} without the probe ({args.confirm} runs each)", flush=True)
    executor = ProbeExecutor(args, cmd, columns, work, seed, phase="confirm")
    c = campaign.Campaign(executor, results_file, seed, done, name="confirm")
    c.round = 1000  # its own shuffles
    c.run(pair, {p.key: args.confirm for p in pair})
    return confirmation.analyse(results.read_rows(out), d, args.margin)


def report(args, out, race, ended, budget, confirmation):
    from ..analysis import confirmation as conf
    rows = results.read_rows(out)
    looks = race.looks if race and race.looks else 1
    entries = verdicts.decide_all(rows, args.objective, args.margin, looks=looks)
    ended_text = {"decided": "the race ended decided", "budget": "the race ended with its budget spent",
                  "planned": "a fixed design"}.get(ended, ended)
    print(f"tune: results in {out}; {ended_text}")
    dropped = verdicts.duplicates(rows)
    for line in conf.settings_table([r for r in rows if r.get("study") not in dropped], args):
        print(line)
    for e in entries:
        print(verdicts.headline(e))
        print("\n".join(verdicts.evidence(e)))
    extra = {}
    if confirmation:
        print("\n".join(conf.text(confirmation)))
        extra["confirmation"] = confirmation
    data = verdicts.to_json(entries, out, budget.runs if budget else None, extra)
    path = verdicts.write_json(out, data)
    print(f"tune: verdict in {path}")
    for written in verdicts.write_exports(args, entries, data):
        print(f"tune: exported {written}")
    return 0

