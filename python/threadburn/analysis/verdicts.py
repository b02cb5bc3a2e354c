"""Per workload, one decision (decide.py) from a results file's run records
(lib/records.py, their figures analysis/runfigures.py's), under one rule (lib/rule.py): the Verdicts object every
exporter (export/) renders and the race asks. Nothing here renders.

The runs compared are the race's (phase race): a sweep run's figures are
its loop time per iteration and its CPU per iteration (all copies; a
world: its slowest rank, its ranks' CPU), a tune run's its wall time (or
the user's --metric) and the CPU of its process tree. A run with a failed
copy is left out, and a setting with a failed run is no answer (named). A
run whose own evidence says something else ran (other processes' CPU and
steal time above the campaign's median by Rule.disturbed_cores) is set
aside and named, never silently. The baseline is the default setting in a
sweep (keys.Setting.is_baseline: no environment, every setting flag at the
program's default, or at the value `baseline` moves it to) and `plain` in a
tune. The settings of one workload may come from one process (a setting
flag that is an axis: one run, one record per setting; lib/records.py).

Of a tune's default settings (preset "default"), those whose settings in
force equal an earlier one's are duplicates: dropped and named (a user's
own --points are never pruned).
"""
import statistics
from dataclasses import dataclass, field

from . import confirmation, decide, hostplan, runfigures
from ..lib import keys, paths, records, rule as rules, schema

# Presets kept first among duplicates (engine/plans.py names them).
PRESETS = ("launcher", "torchrun")


@dataclass
class Verdict:
    """One workload's verdict: the race's decision, and its confirmation."""
    label: str
    decision: decide.Decision
    runs: int                                        # race runs compared
    time_kind: str = "step_ms"                       # its runs' time_kind (lib/records.RunRecord)
    env: dict = field(default_factory=dict)          # name -> the variables a user sets
    points: dict = field(default_factory=dict)       # name -> the point keys (campaign items) behind it
    duplicates: dict = field(default_factory=dict)   # dropped setting -> the one kept (same settings in force)
    failed: list = field(default_factory=list)       # settings left out: a run failed
    set_aside: list = field(default_factory=list)    # [(setting, run key, why)]: disturbed runs
    benchmark: str = ""
    command: str = ""
    repro: dict = field(default_factory=dict)        # name -> one run's command line
    between_regions: dict = field(default_factory=dict)  # name -> median CPU ms the OpenMP workers burned between regions
    confirmation: object = None                      # analysis.confirmation.Confirmation of a change
    refuted: list = field(default_factory=list)      # [Confirmation] of candidates fresh runs contradicted, in turn
    copies: int = None                               # a host tune's copies a run (None: one process a run)
    params: dict = field(default_factory=dict)       # name -> {param: value} put into the command
    pins: dict = field(default_factory=dict)         # name -> the CPUs of each copy (a pinned plan), or ()
    alone: object = None                             # hostplan.Alone: each copy against one copy by itself
    fresh: dict = field(default_factory=dict)        # name -> {round: host figure} of its fresh runs (confirm)
    benchmarks: dict = field(default_factory=dict)   # name -> the benchmark names its runs reported (a sweep)
    flags: dict = field(default_factory=dict)        # name -> {setting flag: value} away from its baseline
    startup_ms: float = None                         # runs judged on their steady phase: the startup's median

    @property
    def verdict(self):
        """With fresh runs of the race's candidate: change when they show
        its gain, else undecided. Without: the race's own verdict, at the
        level corrected for every setting, look and claim."""
        if self.confirmation is not None:
            return "change" if self.confirmation.holds == "yes" else "undecided"
        return self.decision.verdict

    @property
    def chosen(self):
        """The setting to use (change), kept (keep), or leaned to (undecided)."""
        if self.confirmation is not None:
            return self.confirmation.chosen
        return self.decision.chosen

    higher_is_better = property(lambda self: self.decision.higher_is_better)
    baseline = property(lambda self: self.decision.baseline)


@dataclass
class Verdicts:
    """A results file's verdicts, and the rule they were made by."""
    source: str
    kind: str                                        # sweep | tune
    rule: rules.Rule
    rule_from: str                                   # where the rule came from: the rows, a verdict file, asked, defaults
    entries: list
    budget_runs: int = None
    fit: object = None                               # hostplan.Fit: how many copies fit (a tune of several)

    @property
    def undecided(self):
        return [e for e in self.entries if e.verdict == "undecided"]


def duplicates(recs):
    """{workload: {dropped setting: the setting kept}} among a tune's
    default settings whose settings in force (keys.setting_id's effective:
    the runtime's report, the command's params, pinned or not; most runs
    agreeing) are the same, per workload (a host tune's copy count); plain
    is kept first, then the presets (launcher, torchrun), then by name."""
    found = {}
    for r in recs:
        # (A tune's setting is named by its point: the rows' preset column says "default" for tune's own.)
        if r.status == "ok" and r.phase == "race" and r.rows[0].preset == "default":
            found.setdefault(r.workload, {}).setdefault(r.name, []).append(r.setting.effective)
    out = {}
    for w, by_name in found.items():
        effective = {name: max(set(ks), key=ks.count) for name, ks in by_name.items()}
        kept = {}
        # (a --param value's setting is named point,NAME=value: its point decides the order)
        for name in sorted(effective, key=lambda n: (n.split(",")[0] != "plain", n.split(",")[0] not in PRESETS, n)):
            if effective[name] in kept:
                out.setdefault(w, {})[name] = kept[effective[name]]
            else:
                kept[effective[name]] = name
    return out


def poorly_overlapped(recs):
    """{run key: why} of the runs of copies whose figure is their --metric
    summed (host_metric) and whose copies ran together during less than
    schema.OVERLAP_MIN of a copy's time: each copy's figure then was partly
    measured alone, and their sum is no host's throughput. (Without
    --metric the host's figure, copies over the run's wall time, counts an
    uneven end as it is: it only is said, in the rows.)"""
    return {r.run_key: f"its copies ran together during only {r.overlap:.0%} of a copy's time"
            for r in recs if r.status == "ok" and r.time_kind == "host_metric" and r.overlap is not None
            and r.overlap < schema.OVERLAP_MIN}


def disturbed(recs, rule):
    """{run key: why} of the runs whose evidence says something else ran:
    other processes' CPU and steal, as cores over the run, above the median
    of the same setting's runs (of the same workload and phase) by
    rule.disturbed_cores, and by at least rule.DISTURBED_MIN_MS in all (what
    /proc/stat's ticks alone cannot make). Against the setting's own median,
    not the campaign's: a setting that leaves cores idle lets a co-runner use
    them, one that spins does not, so the level of other load is the
    setting's own; a burst above it is the run's luck. A legacy rule
    (rule.legacy_disturbed: the text its campaign wrote predates that) judges
    as its code did: every run against the median of all the file's runs."""
    if rule.legacy_disturbed:
        return _disturbed_against_all(recs, rule)
    groups = {}
    for r in recs:
        if r.status == "ok" and r.disturbance.known:
            groups.setdefault((r.workload, r.name, r.phase), []).append(r)
    out = {}
    for runs in groups.values():
        if len(runs) < 3:
            continue
        typical = statistics.median(r.disturbance.cores for r in runs)
        for r in runs:
            x = r.disturbance
            excess = x.other_ms - typical * x.wall_ms
            if excess > max(rule.disturbed_cores * x.wall_ms, rules.DISTURBED_MIN_MS):
                out[r.run_key] = (f"other processes and steal took {x.cores:.2f} cores during the run (the "
                                  f"setting's median run {typical:.2f})")
    return out


def _disturbed_against_all(recs, rule):
    """disturbed() as rule version 2's code judged it until its text gained
    `confirm`: against the median run of every record (race and fresh,
    every workload), by the same thresholds."""
    runs = {r.run_key: r.disturbance for r in recs if r.status == "ok" and r.disturbance.known}
    if len(runs) < 3:
        return {}
    typical = statistics.median(x.cores for x in runs.values())
    out = {}
    for key, x in runs.items():
        excess = x.other_ms - typical * x.wall_ms
        if excess > max(rule.disturbed_cores * x.wall_ms, rules.DISTURBED_MIN_MS):
            out[key] = f"other processes and steal took {x.cores:.2f} cores during the run (the median run {typical:.2f})"
    return out


def _runs(recs):
    """decide.Runs of one setting's usable race records: {round: value}; a
    second run in the same round (or a file without rounds) gets a block of
    its own."""
    t, c, seen = {}, {}, set()
    for r in sorted(recs, key=lambda r: (r.round if r.round is not None else -1, r.run_key)):
        block = r.round if r.round is not None and r.round not in seen else f"{r.run_key}"
        seen.add(r.round)
        t[block], c[block] = r.time, r.cpu
    return t, c


def _cpu_margin(rule, base_recs):
    """The baseline's CPU floor as a share of its CPU (decide.cpu_margin):
    cores = CPU / the time in ms of the loop or the run (a user's figure
    or a host's throughput: the run's wall time)."""
    pairs = [(r.cpu, r.time if r.time_kind in ("loop_ms", "step_ms", "wall_ms", "steady_ms", "unit_ms")
              else r.wall_ms) for r in base_recs]
    pairs = [(c, t) for c, t in pairs if c and t]
    if not pairs:
        return None
    cpu = statistics.fmean(c for c, _ in pairs)
    ms = statistics.fmean(t for _, t in pairs)
    return rule.cpu_floor_cores * ms / cpu


@dataclass
class Gathered:
    """One workload's runs as decide needs them (gather): the race's, by
    setting; the fresh runs (confirm, alone); what a verdict says of them."""
    duplicates: dict                                  # dropped setting -> the one kept (same settings in force)
    alone: list                                       # records of a copy alone (a host tune), every workload's
    settings: dict = field(default_factory=dict)      # name -> decide.Runs of its usable race runs
    baseline: str = None                              # the baseline's name (None: no run of it)
    baseline_text: str = ""                           # a sweep's default setting, in words
    env: dict = field(default_factory=dict)           # name -> the variables a user sets
    points: dict = field(default_factory=dict)        # name -> the point keys behind it
    failed: list = field(default_factory=list)        # settings with a failed run
    set_aside: list = field(default_factory=list)     # [(setting, run key, why)]: disturbed runs
    time_kind: str = "step_ms"
    higher: bool = False                              # the time figure is better higher
    command: str = ""
    benchmark: str = ""
    repro: dict = field(default_factory=dict)         # name -> one run's command line
    base_recs: list = field(default_factory=list)     # the baseline's usable race records (its CPU floor)
    confirm: list = field(default_factory=list)       # fresh runs (phase confirm) not set aside
    look: int = 1                                     # the race's look
    between: dict = field(default_factory=dict)       # name -> median CPU ms of the workers between regions
    copies: int = None                                # a host tune's copies a run
    params: dict = field(default_factory=dict)        # name -> {param: value}
    pins: dict = field(default_factory=dict)          # name -> each copy's CPUs (a pinned plan), or ()
    benchmarks: dict = field(default_factory=dict)    # name -> the benchmark names its runs reported
    flags: dict = field(default_factory=dict)         # name -> {setting flag: value} away from its baseline
    startups: list = field(default_factory=list)      # the startups of runs judged on their steady phase (ms)


def _gather_setting(g, name, srecs, aside, baseline):
    """One setting's race records into g: its identity, and its usable runs
    (ok, measured, not set aside) as decide.Runs; a failed run: none."""
    first = next((r for r in srecs if r.status == "ok"), srecs[0])
    tune = first.rows[0].is_tune
    g.points[name] = {r.point_key for r in srecs}
    g.benchmarks[name] = {r.benchmark for r in srecs}
    # A program's flags to set; a tune's cuda_sync column holds its
    # THREADBURN_CUDA_SYNC (the knob table's column), set as a variable.
    g.flags[name] = {} if tune else dict(first.setting.asked.flags_to_set(baseline))
    g.baseline_text = first.setting.asked.baseline_text(baseline)
    g.command, g.benchmark = first.command, first.benchmark
    if first.time_kind in runfigures.HOST_KINDS:
        g.copies = first.copies
    if g.baseline is None and (name == "plain" if tune else first.setting.asked.is_baseline(baseline)):
        g.baseline = name
    if any(r.status == "failed" for r in srecs):
        g.failed.append(name)  # a setting whose runs fail is no answer
        return
    usable = []
    for r in srecs:
        if r.status != "ok" or r.time is None or r.cpu is None:
            continue
        if r.run_key in aside:
            g.set_aside.append((name, r.run_key, aside[r.run_key]))
            continue
        usable.append(r)
    if usable:
        t, c = _runs(usable)
        g.settings[name] = decide.Runs(name, t, c)
        g.env[name] = first.env
        g.params[name] = dict(first.setting.asked.params)
        g.pins[name] = first.pins
        g.time_kind, g.higher = first.time_kind, first.higher_is_better
        g.repro[name] = first.repro
        g.startups += [r.startup_ms for r in usable if r.startup_ms is not None]
        burn = [r.between_ms for r in usable if r.between_ms is not None]
        if burn:
            g.between[name] = statistics.median(burn)
        if name == g.baseline:
            g.base_recs = usable


def gather(recs, rule, baseline=None):
    """{workload: Gathered} from run records. The race's runs (phase race)
    are compared; a confirmation's (confirm) confirm; a copy alone's
    (alone: one copy of a host plan by itself) are what each copy is
    compared with (analysis/hostplan.py). baseline: {setting flag: value}
    moving a sweep's baseline (keys.Setting.is_baseline)."""
    dropped = duplicates(recs) if recs and recs[0].rows[0].is_tune else {}
    aside = disturbed(recs, rule)
    aside.update({k: why for k, why in poorly_overlapped(recs).items() if k not in aside})
    by_w = {}
    for r in recs:
        by_w.setdefault(r.workload, []).append(r)
    alone = [r for r in recs if r.phase == "alone" and r.run_key not in aside]
    out = {}
    for w, wrecs in by_w.items():
        g = Gathered(duplicates=dropped.get(w, {}), alone=alone)
        by_s = {}
        for r in wrecs:
            if r.name in g.duplicates or r.phase == "alone":
                continue
            if r.phase == "race":
                by_s.setdefault(r.name, []).append(r)
            elif r.run_key in aside:
                g.set_aside.append((r.name, r.run_key, aside[r.run_key]))
            else:
                g.confirm.append(r)
        # The race's look: the schedule's entries up to the most runs a setting has.
        g.look = rule.look_of(max((len(v) for v in by_s.values()), default=0))
        for name, srecs in by_s.items():
            _gather_setting(g, name, srecs, aside, baseline)
        if g.settings or g.failed:
            out[w] = g
    return out


def confirmed_decision(rule, settings, base, g, final):
    """(the race's decision, its candidate's Confirmation or None, [the
    Confirmation of each candidate ruled out]):
    rule version 5 rules out a candidate its fresh runs contradict (shown
    not better by the margin: holds "no") and decides again without it, so
    the next candidate, if any, is the one fresh runs confirm next, and
    keep counts the contradicted as shown. Before version 5: one decision,
    its candidate's confirmation whatever it says."""
    cpu_m = _cpu_margin(rule, g.base_recs)
    refuted = []
    while True:
        d = decide.decide(rule, settings, base, g.higher, cpu_m, g.look, final, [c.chosen for c in refuted])
        c = None if d.candidate is None else confirmation.analyse(g.confirm, d, rule)
        if not rule.rules_out_refuted or c is None or c.holds != "no":
            return d, c, refuted
        refuted.append(c)


def decide_records(recs, rule, source="", kind=None, rule_from="asked", budget_runs=None, baseline=None,
                   final=False):
    """Verdicts of run records under one rule; entries sorted by label (a
    host tune's by copies); with several copy counts, how many fit.
    baseline: {setting flag: value} moving a sweep's baseline (gather).
    final: the race is over, its last look is keep's last test (a race
    asking what to run next is not)."""
    gathered = gather(recs, rule, baseline)
    kind = kind or ("tune" if recs and recs[0].rows[0].is_tune else "sweep")
    labels = keys.labels(list(gathered))
    entries = []
    for w, g in gathered.items():
        base = g.baseline
        settings = list(g.settings.values())
        if base is None or base not in g.settings:
            d = decide.Decision("undecided", rule, g.look, rule.alpha, base or "", rule.margin,
                                settings=g.settings, higher_is_better=g.higher)
            confirmed, refuted = None, []
            d.why = ("the baseline (" + ("plain" if kind == "tune" else "the default setting: " + g.baseline_text) +
                     ") has " + ("failed runs" if (base or "plain") in g.failed else "no complete run") +
                     " in this file" + (" (`threadburn verdict --baseline FLAG=VALUE` compares with another)"
                                        if kind == "sweep" and any(g.flags.values()) else ""))
        else:
            d, confirmed, refuted = confirmed_decision(rule, settings, base, g, final)
        if g.failed:
            d.why += f" (left out, a run failed: {', '.join(g.failed)})"
        label = labels[w]
        if kind == "tune":
            label = g.command + (f" ({g.copies} cop{'y' if g.copies == 1 else 'ies'})" if g.copies else "")
        e = Verdict(label, d, sum(s.n for s in settings), g.time_kind, g.env, g.points, g.duplicates, g.failed,
                    g.set_aside, g.benchmark, g.command, g.repro, g.between, copies=g.copies, params=g.params,
                    pins=g.pins, benchmarks=g.benchmarks, flags=g.flags,
                    startup_ms=statistics.median(g.startups) if g.startups else None)
        e.confirmation, e.refuted = confirmed, refuted
        if g.copies:
            e.alone = hostplan.alone(e, g.confirm, g.alone, rule)
            e.fresh = hostplan.fresh(e, g.confirm)
        entries.append(e)
    entries.sort(key=lambda e: (e.command if e.copies else e.label, e.copies or 0, e.label))
    return Verdicts(source, kind, rule, rule_from, entries, budget_runs, fit=hostplan.fit(entries, rule))


def recorded_rule(rows):
    """The rule the rows carry (the last race row's): the campaign's own."""
    for r in reversed(rows):
        if r.phase == "race" and r.rule is not None:
            return r.rule
    return None


def rule_for(rows, asked=None, recorded_file=None):
    """(Rule, where it came from) for a file's verdict: the rule its rows
    recorded, else its verdict file's, else the defaults (with the method a
    file without rounds needs); then whatever was asked on top."""
    r, where = recorded_rule(rows), "the rows"
    if r is None and recorded_file:
        r, where = recorded_file, "its verdict file"
    if r is None:
        rounds = any(row.round is not None for row in rows)
        r, where = rules.Rule(method="ranks" if rounds else "welch"), "the defaults (the file records no rule)"
    asked = {k: v for k, v in (asked or {}).items() if v is not None}
    if asked:
        r = r.with_(**asked)
        where += " with " + ", ".join(f"--{k} {v}" for k, v in asked.items())
    return r, where


def decide_rows(rows, source="", asked=None, recorded_file=None, libomp=paths.LIBOMP, budget_runs=None,
                baseline=None):
    """Verdicts of a results file's rows by the rule they recorded (rule_for),
    at its last look (final); baseline: {setting flag: value} moving a
    sweep's baseline."""
    rule, where = rule_for(rows, asked, recorded_file)
    recs = records.run_records(rows, libomp, runfigures.of_run)
    return decide_records(recs, rule, source, rule_from=where, budget_runs=budget_runs,
                          baseline=baseline, final=True)
