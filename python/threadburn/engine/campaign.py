"""The run engine: plan, seed, rounds, resume, progress, interrupts, budget,
and the seam to whatever starts the processes (an Executor).

Every command that runs processes (sweep, sweep --slurm, tune and its
confirmation) is a Campaign over items (grid points, tune settings: each
has .key and .label) and an executor:

  exec_bench.BenchExecutor   a benchmark program, P copies or W ranks a run
  exec_probe.ProbeExecutor   the user's command under the preload probe
  exec_probe.PlainExecutor   the user's command without it (confirmation)
  exec_slurm.SlurmExecutor   a round as one Slurm job array
  tests: a mock executor with known answers

Rounds are blocks: a round runs every item it names once, in an order
shuffled by the seed and the round's number, so slow drift of the machine
spreads over all items alike. Run r of item k has the key "k-r<r>"; a run
whose key the results file holds is not run again (resume). After the
planned rounds a race (a callable given the rows so far) may name the items
the next round needs; it is asked at looks (rule.LOOK_SCHEDULE: when the
items it named have that many runs) and stops the campaign by naming none.
The budget (runs, or seconds) bounds the whole campaign: the rounds to the
next look are started only when all of them fit.

The results file is the campaign's log, for resuming; each run's rows, as
the file holds them (ResultsFile.append returns them), also go to `log`
when one is given (a tune's runs in memory, analysis/runlog.py, RunLog:
what its race, fresh runs and verdict read instead of the file).
"""
import random
import sys
import time
from dataclasses import dataclass

from ..lib import fmt, rule


@dataclass(frozen=True)
class RunSpec:
    item: object
    rep: int
    order_index: int
    round: int

    @property
    def key(self):
        return f"{self.item.key}-r{self.rep}"


class Executor:
    """Runs a round's specs; yields (spec, rows) as each run ends. An
    executor that starts its runs in batches (a Slurm job array) takes the
    planned rounds in one call (whole_plan): each round is still its own
    shuffled block, in order."""
    whole_plan = False

    def execute(self, specs):
        raise NotImplementedError

    def stop(self):
        """Ctrl-C: end what is running (its rows are not written)."""

    def close(self):
        """The campaign is over: remove what the runs left behind (scratch)."""


@dataclass
class Budget:
    runs: int = None
    seconds: float = None

    def text(self):
        parts = ([f"{self.runs} runs"] if self.runs else []) + ([fmt.duration(self.seconds)] if self.seconds else [])
        return " or ".join(parts) or "none"


def parse_budget(text):
    """'120' (runs) or '15m', '90s', '1h' (a duration): a Budget; ValueError otherwise."""
    text = str(text).strip()
    units = {"s": 1, "m": 60, "h": 3600}
    try:
        if text[-1:] in units:
            seconds = float(text[:-1]) * units[text[-1]]
            if seconds > 0:
                return Budget(seconds=seconds)
        elif int(text) > 0:
            return Budget(runs=int(text))
    except ValueError:
        pass
    raise ValueError(f"expected a number of runs (e.g. 120) or a duration (e.g. 15m, 90s, 1h), got {text!r}")


class Campaign:
    def __init__(self, executor, results_file, seed, done=(), budget=None, say=print, name="campaign", log=None):
        self.executor, self.results_file, self.seed, self.log = executor, results_file, seed, log
        self.done = set(done)
        self.budget = budget or Budget()
        self.say, self.name = say, name
        self.runs = {}          # item key -> reps planned so far
        self.order_index = 0
        self.round = 0
        self.spent = 0          # runs planned (done before or now)
        self.position = 0       # of those, finished
        self.ran = 0            # runs executed now
        self.t0 = time.monotonic()
        self.run_seconds = []

    # --- planning ---------------------------------------------------------------
    def plan(self, items):
        """One round: every item once, shuffled by (seed, round)."""
        items = list(items)
        random.Random(f"{self.seed}-{self.round}").shuffle(items)
        specs = []
        for item in items:
            rep = self.runs.get(item.key, 0)
            self.runs[item.key] = rep + 1
            specs.append(RunSpec(item, rep, self.order_index, self.round))
            self.order_index += 1
        self.round += 1
        return specs

    def runs_possible(self):
        """Runs the budget allows in all: its runs; for a duration, the runs
        so far plus the time left over the mean run's (None: no budget)."""
        if self.budget.runs is not None:
            return self.budget.runs
        if self.budget.seconds is not None and self.run_seconds:
            per_run = max(1e-3, sum(self.run_seconds) / len(self.run_seconds))
            return self.spent + int(max(0.0, self.budget.seconds - (time.monotonic() - self.t0)) / per_run)
        return None

    def fits(self, n_runs):
        if self.budget.runs is not None and self.spent + n_runs > self.budget.runs:
            return False
        if self.budget.seconds is not None and self.run_seconds:
            per_run = sum(self.run_seconds) / len(self.run_seconds)
            if time.monotonic() - self.t0 + per_run * n_runs > self.budget.seconds:
                return False
        return True

    # --- running ----------------------------------------------------------------
    def run_round(self, specs, total=None):
        self.spent += len(specs)
        self.position += sum(1 for s in specs if s.key in self.done)
        for spec, rows in self.executor.execute([s for s in specs if s.key not in self.done]):
            held = self.results_file.append(rows)
            if self.log is not None:
                self.log.append(held)
            self.done.add(spec.key)
            self.ran += 1
            self.position += 1
            self.run_seconds.append(max((r.wall_s or 0) for r in rows) if rows else 0)
            self.progress(spec, rows, total)

    def progress(self, spec, rows, total):
        statuses = "/".join(sorted({r.status or "?" for r in rows}))
        why = next((r.reason for r in rows if r.reason), "")
        where = f"[{self.position}/{total}]" if total else f"[{self.position}]"
        eta = ""
        if total and self.ran:
            eta = f" | ETA {fmt.duration((time.monotonic() - self.t0) / self.ran * max(0, total - self.position))}"
        self.say(f"{where} {spec.item.label} rep {spec.rep}: {statuses} ({self.run_seconds[-1]:.1f} s)"
                 + (f" {why[:120]}" if why else "") + eta, flush=True)

    def run(self, items, reps, race=None):
        """reps: {item key: runs it should have}: rounds until each has them;
        then, with race() -> [items] or [] (decided), more rounds at the
        looks, within the budget. Returns "decided", "budget" or "planned"
        (no race)."""
        items = list(items)
        total = self.spent + sum(max(0, reps[i.key] - self.runs.get(i.key, 0)) for i in items)
        planned = []
        while True:
            behind = [i for i in items if self.runs.get(i.key, 0) < reps[i.key]]
            if not behind:
                break
            if self.executor.whole_plan:
                planned += self.plan(behind)
            else:
                self.run_round(self.plan(behind), total)
        if planned:
            self.run_round(planned, total)
        if race is None:
            return "planned"
        looks = iter(n for n in rule.LOOK_SCHEDULE if n > min(reps.values(), default=0))
        while True:
            needed = race()
            if not needed:
                return "decided"
            target = next(looks, None)
            if target is None:
                return "budget"
            # Only whole stretches to the next look: the last analysis is then
            # always a look the rule counted (lib/rule.py, SPENDING).
            behind = {i.key: target - self.runs[i.key] for i in needed if self.runs[i.key] < target}
            if not self.fits(sum(behind.values())):
                return "budget"
            while min(self.runs[i.key] for i in needed) < target:
                todo = [i for i in needed if self.runs[i.key] < target]
                self.say(f"{self.name}: round {self.round + 1}: {len(todo)} contender(s) to {target} runs each",
                         flush=True)
                self.run_round(self.plan(todo))


def guarded(campaign, body, on_interrupt):
    """Runs body() with Ctrl-C / SIGTERM ending the executor's processes
    and then on_interrupt() (which says how to resume); returns its value
    or 130."""
    try:
        return body()
    except KeyboardInterrupt:
        campaign.executor.stop()
        print(file=sys.stderr)
        on_interrupt()
        return 130
