"""A tune of several slot sizes (tune --cpus 1,2,4: analysis/slotsizes.py)
as text, JSON and a figure: per size its plan, throughput and CPU, each
size's plan against the previous size's, how many CPUs the training needs;
the figure draws throughput and CPU against the slot size, a line for each
size's plan and one for plain (export/figures.py, slot_sizes: `threadburn
plot`, `threadburn report`)."""
import json

from .views import ratio_text
from ..analysis import slotsizes
from ..lib import files, fmt, records


def _n(x):
    return "n/a" if x is None else fmt.number(x)


def _cpus(x):
    return f"{x:g} CPU{'' if x == 1 else 's'}"


def lines(z):
    """The sizes' report, as tune prints it."""
    unit = z.unit
    out = [f"tune --cpus: each slot size's plan (its own tune's confirmed change, else plain) in fresh runs, each run "
           f"in a slot of its size; throughput: {unit} (median)"]
    for s in z.sizes:
        used = "" if s.cpus_used is None else f", {s.cpus_used:.2f} CPUs busy"
        line = (f"  {_cpus(s.cpus):<9} plan {s.plan}: {_n(s.throughput)} {unit}, CPU {_n(s.cpu_ms)} ms a run"
                f"{used} ({s.runs} runs)")
        if s.plain:
            line += f"; plain: {_n(s.plain.get('throughput'))} {unit}, CPU {_n(s.plain.get('cpu_ms'))} ms a run"
        out.append(line)
    out.append(f"  each size's plan against the previous size's, paired by round; one-sided at {z.alpha:.3g} a step "
               f"({len(z.steps)} step{'s' if len(z.steps) != 1 else ''}), margin {z.margin:.0%}:")
    for s in z.steps:
        gain = ratio_text(s.ratio, True) if s.ratio else "n/a (too few fresh runs)"
        word = {"adds": f"faster by more than {z.margin:.0%}", "adds less": f"not faster by {z.margin:.0%}",
                "open": f"cannot yet tell whether it is {z.margin:.0%} faster"}[s.word]
        out.append(f"    {s.fewer:g} -> {_cpus(s.more)} ({s.fewer_plan} -> {s.more_plan}): throughput {gain}: {word}")
    tried = [s.cpus for s in z.sizes]
    if z.settled:
        out.append(f"  the training needs {_cpus(z.needs)} of these: a larger slot is not faster by {z.margin:.0%}")
    elif z.needs == tried[-1]:
        out.append(f"  the training needs at least {_cpus(z.needs)} (the largest slot tried)")
    else:
        out.append(f"  the training needs at least {_cpus(z.needs)}; more fresh runs (--confirm N) would tell about "
                   f"{_cpus(tried[tried.index(z.needs) + 1])}")
    return out


def data(z, paths=None):
    """The sizes as JSON data (<stem>.slots.json)."""
    return {"command": z.command, "unit": z.unit, "higher_is_better": z.higher, "margin": z.margin,
            "alpha_per_step": z.alpha, "needs_cpus": z.needs, "settled": z.settled,
            "sizes": [{"cpus": s.cpus, "plan": s.plan, "throughput": s.throughput, "cpu_ms": s.cpu_ms,
                       "wall_ms": s.wall_ms, "cpus_busy": s.cpus_used, "runs": s.runs, "plain": s.plain or None,
                       "tune": (paths or {}).get(s.cpus)} for s in z.sizes],
            "steps": [{"from": s.fewer, "to": s.more, "from_plan": s.fewer_plan, "to_plan": s.more_plan,
                       "word": s.word, "throughput_ratio": None if s.ratio is None else
                       {"estimate": 1 / s.ratio.est, "low": 1 / s.ratio.hi, "high": 1 / s.ratio.lo,
                        "pairs": s.ratio.n}} for s in z.steps]}


def json_text(z, paths=None):
    return json.dumps(data(z, paths), indent=1) + "\n"


def report(out, sizes, paths, rule):
    """tune --cpus's last words: the sizes' lines, printed, and <stem>.slots.json beside the CSV."""
    _, rows = records.read_table(out)
    z = slotsizes.decide(rows, rule)
    if z is None:
        print(f"tune --cpus: {out} holds fresh runs of fewer than two sizes: nothing to compare")
        return 1
    print("\n".join(lines(z)))
    path = (out[:-4] if out.endswith(".csv") else out) + ".slots.json"
    files.write_text(path, json_text(z, paths))
    print("tune --cpus: each size's own tune and verdict in " + ", ".join(paths[s] for s in sizes)
          + f"; the sizes side by side in {out} and {path}")
    return 0
