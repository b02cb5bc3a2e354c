"""What a run's figures are: the time and CPU the decision rule compares,
and the evidence of disturbance, from the typed rows of one run
(lib/records.py reads them; its run_records groups the rows into runs and
takes these definitions as of_run). A sweep's run: the loop's time per
iteration (the counters its program names in loop_counters) and the CPU of
all copies per iteration; a tune's: its wall time (or the user's figure)
and the CPU of its process tree; a tune's run of N copies started
together: the host's throughput. Rows are read by their attributes alone:
this module sits below the verdicts, which import it, so it imports
nothing of the package (docs/design.md, Architecture).
"""
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Disturbance:
    """What else ran during a run, by the run's own evidence: the CPU other
    processes used plus the time the hypervisor stole (ms), its wall time,
    its involuntary context switches (summed over its rows, where the
    program counts them). None where a file predates the columns."""
    other_ms: float = None
    wall_ms: float = None
    invol_ctxsw: float = None

    @property
    def known(self):
        return self.other_ms is not None and bool(self.wall_ms)

    @property
    def cores(self):
        return self.other_ms / self.wall_ms if self.known else None


def _loop_time(row):
    """The time of one iteration of the program's loop: the sum of the
    counters the program names in its loop_counters context (the step and
    the gap after it); files that predate the rule: the step alone."""
    names = row.loop_counters.split()
    if names:
        values = [row.number(n) for n in names]
        return (None if None in values else sum(values)), "loop_ms"
    return row.step_ms, "step_ms"


def _sweep_figures(run_rows):
    """(time, kind, cpu) of one run's rows of one workload (its copies, or a
    world made one row): the mean loop time of the copies, the CPU of all
    copies per iteration (step + residual)."""
    times, kinds, cpu = [], set(), 0.0
    for r in run_rows:
        t, kind = _loop_time(r)
        a, b = r.step_cpu_ms, r.residual_cpu_ms
        if t is None or a is None or b is None:
            return None, "step_ms", None
        times.append(t)
        kinds.add(kind)
        cpu += a + b
    return statistics.fmean(times), ("loop_ms" if kinds == {"loop_ms"} else "step_ms"), cpu


# The figures of a host's run (tune --copies): throughput, higher is better.
HOST_KINDS = ("host", "host_metric")
# A tune's run judged on its steady phase (rule version 6): its time from the
# first training step the probe recognises (else the first device work) to its end.
STEADY_KIND = "steady_ms"
# An in-run tune's block (engine/exec_inrun.py): its rows' bench, and its figure, the
# time a unit of work took in it.
INRUN_BENCH = "inrun"
UNIT_KIND = "unit_ms"
# Where a device did work, what ended the startup (the probe's and the phase
# mark's context startup_ends).
DEVICE_STARTUP = "device"


def _steady(row):
    """(steady_ms, steady_cpu_ms) of a tune's row whose run did device work,
    when its rule judges runs so (version 6); else None: the whole run's
    figures, as files made under an earlier rule were judged."""
    rule = row.rule
    if rule is not None and not rule.steady_phase:
        return None
    if row.startup_ends != DEVICE_STARTUP or row.steady_ms is None or row.steady_cpu_ms is None:
        return None
    return row.steady_ms, row.steady_cpu_ms


def _host_figures(run_rows):
    """(time, kind, cpu, per copy, overlap, wall ms) of one run of N copies
    started together: the host's throughput, every copy's CPU, the mean of
    the copies' own figures, their least overlap, the run's wall time (from
    the release to the last end). None figures when a copy is missing or
    failed, or a figure is absent."""
    first = run_rows[0]
    n = first.processes
    wall_s = first.wall_s
    wall_ms = None if wall_s is None else wall_s * 1000
    metric = first.metric is not None
    laps = [r.overlap for r in run_rows if r.overlap is not None]
    overlap = min(laps) if laps and n > 1 else None
    if len(run_rows) != n or any(not r.ok for r in run_rows):
        return None, "host_metric" if metric else "host", None, None, overlap, wall_ms
    cpus = [r.cpu_ms for r in run_rows]
    cpu = None if None in cpus else sum(cpus)
    if metric:
        values = [r.metric for r in run_rows]
        if None in values or min(values) <= 0:
            return None, "host_metric", cpu, None, overlap, wall_ms
        rates = values if first.metric_higher else [1.0 / v for v in values]
        return sum(rates), "host_metric", cpu, statistics.fmean(values), overlap, wall_ms
    walls = [r.wall_ms for r in run_rows]
    per_copy = None if None in walls else statistics.fmean(walls)
    host = n / wall_s if wall_s else None
    return host, "host", cpu, per_copy, overlap, wall_ms


def _disturbance(run_rows, wall_ms):
    first = run_rows[0]
    other, steal = first.host_other_cpu_ms, first.host_steal_ms
    invol = [r.invol_ctxsw for r in run_rows if r.invol_ctxsw is not None]
    return Disturbance(None if other is None else other + (steal or 0.0), wall_ms, sum(invol) if invol else None)


def of_run(first, run_rows, status):
    """The figures of one run for records.run_records: a dict of
    RunRecord's figure fields. first: its first ok row (else its first);
    status: the worst of its rows. A sweep's run: the copies' mean loop
    time and all copies' CPU per iteration; a tune's: its --metric, else
    its wall time, and the CPU of its process tree; a tune's run of N
    copies started together: the host's (_host_figures)."""
    wall_ms = first.wall_ms
    if wall_ms is None and first.wall_s is not None:
        wall_ms = first.wall_s * 1000
    host = {}
    if first.is_tune and first.host_run:
        run_rows = sorted(run_rows, key=lambda r: r.proc_index)
        time, kind, cpu, per_copy, overlap, wall_ms = _host_figures(run_rows)
        burns = [r.omp_between_regions_ms for r in run_rows]
        pins = tuple(r.pinned_cpus for r in run_rows)
        host = dict(copies=first.processes, per_copy=per_copy, per_copy_higher=first.metric_higher,
                    overlap=overlap, between_ms=None if None in burns else sum(burns), pins=pins if any(pins) else ())
    elif first.is_tune and first.bench == INRUN_BENCH:
        # A block of an in-run tune: the time and CPU a unit of work took (or the user's figure).
        time, kind = (first.metric, "metric") if first.metric is not None else (first.unit_ms, UNIT_KIND)
        cpu = first.unit_cpu_ms
    elif first.is_tune:
        steady = _steady(first)
        if steady:
            time, kind = (first.metric, "metric") if first.metric is not None else (steady[0], STEADY_KIND)
            cpu = steady[1]
        else:
            time, kind = (first.metric, "metric") if first.metric is not None else (wall_ms, "wall_ms")
            cpu = first.cpu_ms
        host = dict(between_ms=first.omp_between_regions_ms, startup_ms=first.startup_ms if steady else None)
    else:
        time, kind, cpu = _sweep_figures(run_rows) if status == "ok" else (None, "step_ms", None)
    return dict(time=time, time_kind=kind, higher_is_better=kind in HOST_KINDS or first.metric_higher, cpu=cpu,
                wall_ms=wall_ms, disturbance=_disturbance(run_rows, wall_ms), rows=tuple(run_rows), **host)
