"""What every format says of a verdict (analysis/verdicts.Verdict), in one
place: the headline a user acts on, the evidence lines, the row per
setting. The formats (text, markdown, jsonfile, html) lay these out; none
of them knows another.

A change's headline gain is the confirmation's (fresh runs the race did not
use to choose), with its interval; the race's own figure is shown beside it
"as selected" (biased toward luck). A confirmation that contradicts the
change makes the verdict undecided and says so.
"""
import shlex

from ..analysis.runfigures import HOST_KINDS
from ..lib import fmt, paths
from ..lib.errors import ThreadburnError

TIME_WORDS = {"loop_ms": "time per iteration (step + gap)", "step_ms": "step time", "wall_ms": "wall time",
              "steady_ms": "the steady phase's time (from the first training step recognised, else the first device work, "
                           "to the end: the startup left out)",
              "unit_ms": "the time a unit of work took in each block (once the switch settled)",
              "metric": "your figure",
              "host": "host throughput (copies / the run's wall time: from their release to the last one's end)",
              "host_metric": "host throughput (your figure summed over the copies)"}
FIGURE_NAMES = {"loop_ms": "iteration ms", "step_ms": "step ms", "wall_ms": "wall ms", "steady_ms": "steady ms",
                "unit_ms": "ms a unit",
                "metric": "your figure",
                "host": "copies/s", "host_metric": "your figure, all copies"}
# The CUDA host wait policies as cudaSetDeviceFlags takes them (cudaDeviceScheduleAuto,
# Spin, Yield, BlockingSync): how a program keeps a policy without threadburn.
CUDA_SCHEDULE_FLAGS = {"auto": 0, "spin": 1, "yield": 2, "blocking_sync": 4}
# A ratio past ten times either way is no figure to print: the interval is too wide yet
# (few runs at a small alpha').
UNBOUNDED_BELOW = 0.1


def bound(v):
    """An interval's end, a ratio, as a change: past ten times either way
    only that (a paired t on 3 runs at a small alpha' reaches e^77)."""
    if v > 1 / UNBOUNDED_BELOW:
        return f">{fmt.pct(1 / UNBOUNDED_BELOW - 1)}"
    if v < UNBOUNDED_BELOW:
        return f"<{fmt.pct(UNBOUNDED_BELOW - 1)}"
    return fmt.pct(v - 1)


def ci(r):
    """A cost ratio as a change with its interval: -7.9% [-10.1%, -5.6%]."""
    return f"{fmt.pct(r.est - 1)} [{bound(r.lo)}, {bound(r.hi)}]"


def ratio_text(r, higher_is_better=False):
    """A Ratio as a change with its interval, as the headline writes it (a
    higher-is-better figure as its own change); "" for none."""
    if r is None:
        return ""
    if higher_is_better:
        return f"{fmt.pct(1 / r.est - 1)} [{bound(1 / r.hi)}, {bound(1 / r.lo)}]"
    return ci(r)


def change(e, r, metric="time"):
    """A ratio's estimate as the change people read: a higher-is-better
    figure as its own change (samples/s up), anything else as the cost's."""
    if r is None:
        return "n/a"
    return fmt.pct(1 / r.est - 1) if e.higher_is_better and metric == "time" else fmt.pct(r.est - 1)


def time_word(e):
    if e.time_kind in HOST_KINDS:
        return "host throughput"
    return "time" if e.time_kind in ("wall_ms", "loop_ms", "steady_ms", "unit_ms") else (
        "step" if e.time_kind == "step_ms" else "figure")


def time_text(e, r):
    if r is None:
        return f"{time_word(e)} n/a"
    if e.time_kind in HOST_KINDS:
        return f"host throughput {ratio_text(r, True)}"
    if e.higher_is_better:
        return f"your figure {ratio_text(r, True)}"
    return f"{time_word(e)} {ci(r)}"


def env_text(env):
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) or "(no variables)"


def set_text(e, name):
    """What to set for a setting: its variables, its setting flags away from
    their baseline (the program's flags: how it is fed), its --param values
    (the command's own knobs), a pinned plan's core set per copy, and how to
    keep a CUDA wait policy without threadburn."""
    env = e.env.get(name, {})
    out = env_text(env)
    flags = e.flags.get(name, {})
    if flags:
        out += "; flags " + " ".join(f"--{k}={v}" for k, v in flags.items())
    params = e.params.get(name, {})
    if params:
        out += "; run with " + " ".join(f"{{{k}}}={v}" for k, v in params.items())
    pins = e.pins.get(name, ())
    if pins:
        out += "; pin copy " + ", ".join(f"{i} to CPUs {c}" for i, c in enumerate(pins)) + " (taskset -c)"
    return out + cuda_sync_text(env, e.command)


def cuda_sync_text(env, command):
    """A setting's CUDA wait policy (THREADBURN_CUDA_SYNC), kept without
    threadburn: its library preloaded with the variable, or the program's
    own cudaSetDeviceFlags call before its first CUDA call; "" without one."""
    policy = env.get(paths.CUDA_SYNC)
    if policy not in CUDA_SCHEDULE_FLAGS or policy == "auto":
        return ""
    try:
        lib = paths.cuda_sync_library()
    except ThreadburnError:
        lib = f"<threadburn's libexec folder>/{paths.CUDA_SYNC_LIBRARY}"
    preload = " ".join(([env["LD_PRELOAD"]] if env.get("LD_PRELOAD") else []) + [lib])
    rest = {k: v for k, v in env.items() if k not in ("LD_PRELOAD", paths.CUDA_SYNC)}
    line = " ".join([env_text(rest)] * bool(rest) + [f"LD_PRELOAD={shlex.quote(preload)}",
                                                      f"{paths.CUDA_SYNC}={policy}", command or "<command>"])
    return (f"; without threadburn the CUDA wait policy needs its library: {line}; or in the program, after `import "
            f"torch` and before its first CUDA call, `ctypes.CDLL('libcudart.so.' + torch.version.cuda.split('.')[0])"
            f".cudaSetDeviceFlags({CUDA_SCHEDULE_FLAGS[policy]})` ({policy}; the runtime torch loaded, libcudart.so.13 "
            "for a CUDA 13 wheel; each device: docs/cuda.md)")


def alone_text(e):
    """Each copy against one copy alone (host tunes): '; each copy +31.0%
    [+25.1%, +37.2%] slower than alone (T1-passive, 5 + 5 fresh runs)'."""
    a = e.alone
    if a is None:
        return ""
    what = "your figure per copy" if a.higher_is_better else "time per copy"
    r = a.ratio
    word = "slower" if r.est >= 1 else "faster"
    return (f"; each copy {fmt.pct(r.est - 1).lstrip('+')} {word} than alone ({what} {ci(r)} against one copy of "
            f"{a.setting} by itself, {a.runs[0]} + {a.runs[1]} fresh runs)")


def fit_lines(verdicts):
    """How many copies fit (a host tune of several copy counts): each step
    with its interval against the margin, then the count."""
    f = verdicts.fit
    if f is None:
        return []
    out = [f"how many fit: each copy count's plan (the confirmed change, else plain) against the previous count's, "
           f"in fresh runs paired by round; one-sided at {f.alpha:.3g} a step ({len(f.steps)} step"
           f"{'s' if len(f.steps) != 1 else ''}), margin {f.margin:.0%}:"]
    for s in f.steps:
        gain = ratio_text(s.ratio, True) if s.ratio else "n/a (too few fresh runs)"
        word = {"adds": f"adds more than {f.margin:.0%}", "adds less": f"adds less than {f.margin:.0%}",
                "open": f"cannot yet tell whether it adds {f.margin:.0%}"}[s.word]
        out.append(f"  {s.fewer} -> {s.more} copies ({s.fewer_plan} -> {s.more_plan}): host throughput {gain}: {word}")
    if f.settled:
        out.append(f"  this host fits {f.fits} of these: more copies add less than {f.margin:.0%} host throughput")
    elif f.fits == f.tried[-1]:
        out.append(f"  this host fits at least {f.fits} of these (the most tried)")
    else:
        out.append(f"  this host fits at least {f.fits} of these; more fresh runs (--budget) would tell about "
                   f"{f.tried[f.tried.index(f.fits) + 1]}")
    return out


def headline(e):
    d = e.decision
    c = e.confirmation
    pct_m = f"{d.margin:.0%}"
    if e.verdict == "change" and c is not None:
        race = d.vs_baseline[c.chosen]
        return (f"CHANGE to {c.chosen}: {time_text(e, c.time)}, CPU {ci(c.cpu) if c.cpu else 'n/a'} against "
                f"{d.baseline} in {c.runs[0]} + {c.runs[1]} fresh runs ({c.coverage:.0%} interval; the race, as "
                f"selected: {time_word(e)} {change(e, race.time)}, CPU {change(e, race.cpu, 'cpu')}){alone_text(e)}. "
                f"Set: {set_text(e, c.chosen)}")
    if e.verdict == "change":
        race = d.vs_baseline[d.chosen]
        return (f"CHANGE to {d.chosen}: {time_text(e, race.time)}, CPU {ci(race.cpu)} against {d.baseline}, as "
                "selected by the race (no fresh runs measured it: a selected figure is biased toward luck)"
                f"{alone_text(e)}. Set: {set_text(e, d.chosen)}")
    if c is not None:  # the race's candidate, not shown again in fresh runs
        race = d.vs_baseline[c.chosen]
        figure = claim_figure(e, c)
        said = ("contradict it: not better by the margin" if c.holds == "no" else
                f"cannot yet tell whether it gains more than {pct_m}")
        more = "More runs (--budget) would tell"
        if c.sequential:  # the fresh runs went on while the budget allowed: what would tell now
            # c.more: the next look's runs (the looks went on until the budget was spent), sized by
            # the gain and spread seen, or (a gain under the margin) by the looks' growth alone.
            if c.holds != "undecided" or not c.more:
                more = "More runs (--budget) would tell"
            elif c.more_sized:
                more = f"The budget is spent; about {c.more} more fresh runs each would tell (--budget)"
            else:
                more = (f"The budget is spent; the gain they measure is under the {pct_m} margin so far, and "
                        "their interval still reaches past it: more runs (--budget) might show it")
        return (f"UNDECIDED: the race chose {c.chosen} ({time_word(e)} {change(e, race.time)}, CPU "
                f"{change(e, race.cpu, 'cpu')} as "
                f"selected) but {c.runs[0]} + {c.runs[1]} fresh runs {said}: {figure} against "
                f"{d.baseline}. {more}{alone_text(e)}")
    if d.verdict == "keep":
        if e.time_kind in HOST_KINDS:
            on = {"balanced": "on host throughput, or on CPU at no loss of it", "time": "on host throughput",
                  "cpu": "on cpu"}[d.objective]
        else:
            on = "on time, or on CPU at no loss of time" if d.objective == "balanced" else "on " + d.objective
        fresh = (f"; {', '.join(c.chosen for c in e.refuted)} by {'its' if len(e.refuted) == 1 else 'their'} fresh "
                 "runs, which contradicted the race's pick" if e.refuted else "")
        return (f"KEEP {d.baseline}: every setting tried is shown not to beat it by more than {pct_m} ({on}{fresh})"
                f"{alone_text(e)}")
    if d.candidate is not None:  # selected by the race, never run fresh (the budget ran out)
        race = d.vs_baseline[d.candidate]
        return (f"UNDECIDED: the race selected {d.candidate} ({time_word(e)} {change(e, race.time)}, CPU "
                f"{change(e, race.cpu, 'cpu')} as selected) against {d.baseline}, but no fresh runs measured it: "
                f"more runs (--budget) would tell{alone_text(e)}")
    lean = f"; leaning to {d.chosen}" if d.chosen and d.chosen != d.baseline else ""
    return f"UNDECIDED: {d.why}{lean}{most_to_gain(e)}{alone_text(e)}"


def most_to_gain(e):
    """What an undecided verdict still tells: the most any setting could
    gain on time (the best lower bound of the intervals), and its CPU."""
    d = e.decision
    best = None
    for name, r in d.vs_baseline.items():
        if r.time is not None and (best is None or r.time.lo < best[1].time.lo):
            best = (name, r)
    if best is None or best[1].time.lo >= 1:
        return ""
    name, r = best
    if r.time.lo < UNBOUNDED_BELOW:  # (3 runs at a tiny alpha': a t bound of +1.7e111 %, printed once)
        return (f". What any setting could gain is not bounded yet: the intervals of {runs_range(d)} runs a setting "
                f"reach past {fmt.pct(1 / UNBOUNDED_BELOW - 1) if e.higher_is_better else fmt.pct(UNBOUNDED_BELOW - 1)}")
    bound = fmt.pct(1 / r.time.lo - 1) if e.higher_is_better else fmt.pct(r.time.lo - 1)
    return (f". The most any setting could gain: {time_word(e)} {bound} ({name}, the bound of its interval), at "
            f"CPU {change(e, r.cpu, 'cpu')}")


def evidence(e):
    d = e.decision
    lines = []
    if d.baseline and d.settings:
        r = d.rule
        over = "run's wall time" if e.time_kind in HOST_KINDS + ("metric",) else time_word(e)
        cpu_m = (f" (CPU: {d.cpu_margin:.0%}, {r.cpu_floor_cores:g} of a core over the {over})"
                 if d.cpu_margin > d.margin + 1e-9 else "")
        lines.append(f"    {len(d.settings)} settings, {e.runs} runs ({runs_range(d)} a setting); {r.method_text}, "
                     f"alpha' {d.alpha_each:.2g} per one-sided test ({family(d)}), margin {d.margin:.0%}{cpu_m}, "
                     f"objective {d.objective}; compared: {TIME_WORDS[e.time_kind]} and CPU")
        if e.startup_ms is not None:
            lines.append(f"    the steady phase decided (rule version {r.version}): each run's time and CPU from its first "
                         "training step recognised (else its first device work) to its end; the startup before it, "
                         "the same fixed cost in every setting, left out (median "
                         f"{fmt.number(e.startup_ms / 1000)} s a run)")
    side = side_by_side(e)
    if side:
        lines.append("    " + side)
    if d.verdict == "keep" and d.fastest and d.fastest != d.baseline and d.fastest in d.vs_baseline:
        r = d.vs_baseline[d.fastest]
        lines.append(f"    the fastest by its estimate, {d.fastest}: {time_text(e, r.time)}, CPU {ci(r.cpu)}")
    if d.contenders and e.verdict == "change":
        names = ", ".join(f"{n} (~{k} runs each would tell)" if k else n for n, k in d.contenders)
        lines.append(f"    might be better still (undecided after {runs_range(d)} runs; --budget more settles it): {names}")
    if d.eliminated:
        lines.append(f"    slower than the fastest by more than {d.margin:.0%}: {', '.join(d.eliminated)}")
    if e.failed:
        lines.append(f"    left out, a run failed: {', '.join(e.failed)} (a setting whose runs fail is no answer)")
    if e.duplicates:
        lines.append("    dropped as duplicates (the same settings in force, as the runs reported them): "
                     + ", ".join(f"{a} = {b}" for a, b in sorted(e.duplicates.items())))
    if e.set_aside:
        lines.append(f"    set aside as disturbed ({len(e.set_aside)} run{'s' if len(e.set_aside) != 1 else ''}): "
                     + "; ".join(f"{n} {k}: {why}" for n, k, why in e.set_aside))
    for name, n in d.open:
        need = f"~{n} runs each would settle it" if n else "no number of runs settles it at this margin"
        lines.append(f"    open: {name} against {d.baseline} ({need})")
    c = e.confirmation
    if c is not None and c.probe_cost is not None:
        lines.append(f"    the probe's cost on your program ({c.chosen}, wall time probed / not): {ci(c.probe_cost)}")
    return lines


def family(d):
    """How alpha was split for this decision: its share at this look, over
    the settings compared and the metrics a change may be claimed on."""
    r = d.rule
    look = (f"a fixed design: all of {r.alpha:g}" if r.design == "fixed" else
            f"look {d.look} of the race: {r.look_share(d.look):.0%} of {r.alpha:g}")
    n = max(1, len(d.settings) - 1)
    return f"{look}, over {n} setting{'s' if n != 1 else ''} x {r.claims} metric{'s' if r.claims != 1 else ''}"


def side_by_side(e):
    """The chosen setting beside the cheapest one within the margin of the
    fastest: the time and CPU of each (geometric means of the race). Only the
    fastest within its own margin (no other setting shown that close to it):
    the fastest, said so. The settings shown within the margin all costlier
    than the chosen one: the fastest, and that said; never a costlier setting
    called the cheapest."""
    d = e.decision
    if not e.chosen or not d.cheapest_within or e.chosen not in d.settings:
        return ""

    def fig(name):
        s = d.settings[name]
        return f"{name}: {FIGURE_NAMES[e.time_kind]} {fmt.number(s.geo('time'), 4)}, CPU {fmt.number(s.geo('cpu'), 4)} ms"
    chosen, m = e.chosen, f"{d.margin:.0%}"
    role = {"change": "chosen", "keep": "kept", "undecided": "leaning"}[e.verdict]
    within = d.within_fastest or [d.fastest]
    alone = len(within) == 1
    if d.cheapest_within == chosen:
        if alone:
            return f"{role} {fig(chosen)}; it is also the fastest, and no other setting is shown within {m} of it"
        return f"{role} {fig(chosen)}; it is also the cheapest within {m} of the fastest"
    if alone:
        return f"{role} {fig(chosen)}; the fastest, {fig(d.fastest)}; no other setting is shown within {m} of it"
    if d.settings[d.cheapest_within].geo("cpu") > d.settings[chosen].geo("cpu"):
        return (f"{role} {fig(chosen)}; the fastest, {fig(d.fastest)}; the settings shown within {m} of it "
                f"({', '.join(within)}) all use more CPU than {chosen}")
    return f"{role} {fig(chosen)}; the cheapest within {m} of the fastest, {fig(d.cheapest_within)}"


def runs_range(d):
    ns = [s.n for s in d.settings.values()]
    return f"{min(ns)}" if min(ns) == max(ns) else f"{min(ns)}-{max(ns)}"


def role(e, name):
    """What the verdict made of one setting: baseline, chosen, contender,
    eliminated, open, or "" (none of these)."""
    d = e.decision
    if name == d.baseline:
        return "baseline" + (" (kept)" if e.verdict == "keep" else "")
    if name == e.chosen:
        return "chosen" if e.verdict == "change" else "leaning to"
    if any(n == name for n, _ in d.contenders):
        return "might be better"
    if name in d.eliminated:
        return "eliminated"
    return "open" if any(n == name for n, _ in d.open) else ""


def setting_rows(e):
    """The evidence per setting, as data: runs, the geometric means of the
    per-run values the rule compared, each ratio to the baseline with its
    interval (after the correction) and what the margin makes of it; the
    chosen setting first, then the baseline, then by the ratio of time."""
    d = e.decision
    out = []
    for name, s in d.settings.items():
        pair = d.vs_baseline.get(name)
        t, c = (pair.time, pair.cpu) if pair else (None, None)
        out.append({"setting": name, "role": role(e, name), "runs": s.n,
                    "time_geomean": s.geo("time"), "cpu_geomean": s.geo("cpu"),
                    "time_ratio": ratio_data(t), "cpu_ratio": ratio_data(c),
                    "time_word": t.word(d.margin) if t else None,
                    "cpu_word": c.word(d.cpu_margin) if c else None,
                    "env": e.env.get(name, {})})
    first = {e.chosen: 0, d.baseline: 1}
    return sorted(out, key=lambda x: (first.get(x["setting"], 2),
                                      x["time_ratio"]["estimate"] if x["time_ratio"] else 1.0, x["setting"]))


def ratio_data(r):
    return None if r is None else {"estimate": round(r.est, 5), "low": round(r.lo, 5), "high": round(r.hi, 5),
                                   "runs": r.n, "baseline_runs": r.n_ref}


def table_columns(e):
    """The header of the per-setting table of an entry."""
    d = e.decision
    figure = FIGURE_NAMES[e.time_kind]
    return ["setting", "verdict's view", "runs", f"{figure} (geo. mean)", f"{time_word(e)} vs {d.baseline}",
            "CPU ms (geo. mean)", f"CPU vs {d.baseline}"]


def table_cells(e, row):
    """One row of setting_rows as the table's cells."""
    pair = e.decision.vs_baseline.get(row["setting"])
    t, c = (pair.time, pair.cpu) if pair else (None, None)
    return [row["setting"], row["role"], str(row["runs"]), fmt.number(row["time_geomean"], 4),
            ratio_text(t, e.higher_is_better), fmt.number(row["cpu_geomean"], 4), ratio_text(c)]


def claim_figure(e, c):
    """A confirmation's figure on what its change was claimed on: the time
    (as the headline writes it) or the CPU, with its interval."""
    r = c.headline_ratio
    return time_text(e, r) if c.claim == "time" else f"CPU {ci(r) if r else 'n/a'}"


def confirmation_lines(e):
    """The confirmation as lines (the headline has its figures already),
    after those of each candidate its fresh runs contradicted (rule version
    5: ruled out, the race went on)."""
    out = [f"ruled out: the race picked {r.chosen}, but {r.runs[0]} + {r.runs[1]} fresh runs contradict it: "
           f"{claim_figure(e, r)} against "
           f"{r.baseline} (look {r.look}); the race went on without it" for r in e.refuted]
    c = e.confirmation
    if c is None:
        return out
    verdict = {"yes": "the gain holds in fresh runs (better by more than the margin)",
               "no": "the gain does NOT hold in fresh runs",
               "undecided": "these fresh runs cannot yet tell whether the gain holds",
               None: "no usable fresh runs"}[c.holds]
    figure = claim_figure(e, c)
    level = (f"{c.coverage:.0%} interval over its look{'s' if c.look > 1 else ''}, look {c.look} each side one-sided "
             f"at {c.alpha:.2g}" if c.sequential else f"{c.coverage:.0%} interval, each side one-sided at "
             f"{(1 - c.coverage) / 2:g}")
    return out + [f"confirmation, {c.runs[0]} + {c.runs[1]} fresh runs interleaved, not used to choose ({level}):",
                  f"  {c.chosen} against {c.baseline}: {figure}: {verdict}"]


def rule_note(e):
    """How to read the per-setting table."""
    d = e.decision
    return (f"One value per run (a fresh process); geometric means of those; ratios are setting / {d.baseline} as a "
            f"change with the interval after the correction (alpha' {d.alpha_each:.2g} per side: {family(d)}); "
            f"margin {d.margin:.0%}, objective {d.objective}.") if d.settings else ""
