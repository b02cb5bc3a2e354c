"""The summary a sweep prints before its verdicts: row counts, and the
aggregates of analysis/results.py (oversubscription, data-parallel worlds)
as text."""
from ..analysis.results import oversubscription, world_scaling
from ..lib import fmt, schema


def grouped_text(title, entries, line):
    """The summary's layout of aggregate entries: the title, then per
    workload, per setting, one line per entry (line(entry)) with its runs."""
    if not entries:
        return []
    lines, last = [title], (None, None)
    for e in entries:
        if e["workload"] != last[0]:
            lines.append(e["workload"])
        if (e["workload"], e["setting"]) != last:
            lines.append(f"  {e['setting']}")
        last = (e["workload"], e["setting"])
        lines.append(f"    {line(e)}  [{e['runs']} run{'s' if e['runs'] != 1 else ''}]")
    return lines


def world_scaling_text(entries):
    def line(e):
        scaling = "x n/a" if e["scaling"] is None else f"x{e['scaling']:.2f}"
        threads = f" T={e['threads']}" if e["threads"] not in ("", schema.UNSET) else ""
        where = f"W={e['world_size']}{threads}"
        return (f"{where:<9} {fmt.number(e['samples_per_s'])} samples/s ({scaling:>6}), step {fmt.ms(e['step_ms'])}, "
                f"all-reduce {fmt.ms(e['allreduce_ms'])}, CPU {fmt.ms(e['cpu_ms'])}")
    return grouped_text("data-parallel worlds: medians over runs; samples/s of the world (at the slowest rank's "
                        "pace), its step, mean all-reduce, CPU per step of all ranks (step + residual); scaling = "
                        "samples/s vs world size 1", entries, line)


def oversubscription_text(entries):
    def line(e):
        slowdown = "x n/a" if e["slowdown"] is None else f"x{e['slowdown']:.2f}"
        return (f"P={e['processes']:<3} step {fmt.ms(e['step_ms']):>9} ({slowdown:>6}), "
                f"{fmt.number(e['throughput'])} {e['unit']}, CPU {fmt.ms(e['cpu_ms'])}, "
                f"invol ctxsw {fmt.number(e['invol_ctxsw'])}")
    return grouped_text("oversubscription: P copies at once; per step, medians over runs of the mean step per copy, "
                        "the throughput, CPU (step + residual) and involuntary context switches summed over the "
                        "copies; slowdown = step vs P=1", entries, line)


def summary_text(rows):
    """Row counts and the aggregate blocks (oversubscription, data-parallel
    worlds); the verdicts follow it (verdicts.py)."""
    counts = {st: sum(1 for r in rows if r.status == st) for st in schema.STATUSES}
    lines = ["rows: " + ", ".join(f"{n} {st}" for st, n in counts.items())]
    lines += oversubscription_text(oversubscription(rows))
    lines += world_scaling_text(world_scaling(rows))
    return "\n".join(lines)
