"""tune's flags checked before anything runs, its results file opened, its
budget split between the race and the fresh runs after it (commands/tune.py). Not a command
(tests/python/test_layers.py: shared by the commands)."""
import os
import re

from ..analysis import confirmation
from ..engine import campaign
from ..lib import rule as rules
from ..lib.errors import ThreadburnError
from ..lib.records import ResultsFile, Resumed
from ..lib.usercmd import default_out

RUNS_PER_SETTING_BUDGET = 10   # the default budget: this many runs a setting, on average
# --in-run's default: blocks of ~0.5 s cost no process start, so twice the runs a setting. At 10 a
# setting, a KEEP needed all 10 pairs within the margin (the sign test's interval at 10 pairs is their
# extremes) and a change with a core busy left its fresh blocks 3 short (bench.threadburn.inrun_*).
BLOCKS_PER_SETTING_BUDGET = 20
# With a duration budget, the share of it the race may use; the rest is the confirmation's.
RACE_SHARE_OF_TIME = 0.85


def open_out(args, cmd, columns, rule):
    """(the results file, what it holds: records.Resumed): with --resume the
    file's finished runs, read here once (the tune keeps them in memory)."""
    out = args.out or default_out("tune", cmd) + ".csv"
    results_file = ResultsFile(out, columns, rule)
    if args.resume:
        if not os.path.exists(out):
            raise ThreadburnError(f"{out}: --resume: no such file")
        return results_file, results_file.repair_for_resume()
    if os.path.exists(out) and not args.force:
        raise ThreadburnError(f"{out}: exists; pass --resume to continue it or --force to replace it")
    results_file.create()
    return results_file, Resumed(set(), None, [])


def check_args(args, points, params):
    if params and args.metric is None:
        raise ThreadburnError("--param: its values may change the work a run does (a batch size, a number of "
                              "steps), so a run's wall time cannot compare them; give --metric (your figure per "
                              "unit of work, e.g. --metric 'samples/s: ([0-9.]+)')")
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


def fresh_items(points):
    """The most items the fresh runs after the race can have: a pair (plain
    and a candidate) per copy count, and with copies a copy alone for each
    N > 1 (one copy count of one copy: the pair)."""
    counts = sorted({p.copies or 1 for p in points})
    several = len(counts) > 1 or counts[-1] > 1
    return sum(2 + (1 if several and n > 1 else 0) for n in counts)


def fresh_reserve(points):
    """The runs the fresh runs after the race need at the least: CONFIRM_MIN
    of each of their items (fresh_items)."""
    return fresh_items(points) * confirmation.CONFIRM_MIN


def budgets(args, points, per_setting=RUNS_PER_SETTING_BUDGET):
    """(the whole budget, the race's part of it, whether fresh runs confirm
    a change): the fresh runs after the race need room for CONFIRM_MIN runs
    of each of their items (fresh_items); a budget too small for them leaves
    the claim to the race."""
    if args.repetitions:
        return None, None, args.confirm != "0"
    whole = args.budget or campaign.Budget(runs=per_setting * len(points))
    confirm = args.confirm != "0"
    if whole.runs is not None:
        if whole.runs < 2 * rules.MIN_RUNS:
            raise ThreadburnError(f"--budget {whole.runs}: too few runs to compare two settings (at least "
                                  f"{2 * rules.MIN_RUNS})")
        reserve = fresh_reserve(points)
        if confirm and whole.runs - reserve < rules.START_RUNS * 2:
            print(f"tune: --budget {whole.runs} leaves no room for fresh runs to confirm a change "
                  f"({rules.START_RUNS * 2 + reserve} would): the race's own test makes the claim", flush=True)
            confirm = False
        return whole, campaign.Budget(runs=whole.runs - (reserve if confirm else 0)), confirm
    return whole, campaign.Budget(seconds=whole.seconds * (RACE_SHARE_OF_TIME if confirm else 1.0)), confirm
