"""`threadburn run`'s report: what one probed run's threads did, as the
console prints it (commands/run.py runs the command and prints these lines).
The steady phase first and the startup in one line, the settings in force,
the OpenMP regions and their entry points, CPU by class of thread, the gaps
without a region, the run-queue wait, the slot's quota, the GPUs, the
probe's own cost, then the advice (analysis/advice.py: pure functions of the
counters; this module only lays them out), and the exact monitor's lines.
"""
from ..analysis import advice
from ..analysis.advice import figure
from ..lib import fmt, intervals, knobs, probe
from ..lib.machine import slot_line


def describe_report(report, cmd):
    """The summary people read: settings, regions, CPU by class, gaps, GPUs, overhead, advice."""
    c = report.counters
    lines = [f"threadburn run: {' '.join(cmd)} (pid {report.pid}): {fmt.number(c['wall_ms'] / 1000)} s"]
    lines += phase_lines(report)
    lines += settings_lines(report)
    lines += region_lines(report)
    lines += ["  " + ln for ln in fmt.table(["CPU (ms)", "total", "steady phase", "in regions", "between regions"],
                                             cpu_rows(report))]
    if report.others:
        lines.append("  processes by command (each with its forked workers):")
        for command, (n, cpu) in probe.command_totals(report).items():
            lines.append(f"    {n} x {command[:90]}: {fmt.ms(cpu)}")
    if c["gaps"] > 0:
        lines.append(f"  gaps without a region (>= {fmt.number(report.summary.get('gap_min_ms', 1))} ms): "
                     f"{int(c['gaps'])}, median {fmt.ms(c['gap_ms_median'])}; in each (a region's end to the next "
                     f"one's start: the main thread's next step is not in it) the OpenMP workers burned "
                     f"{fmt.ms(c['gap_omp_cpu_ms_median'])} (median), until {fmt.ms(c['gap_tail_ms_median'])} "
                     f"after it began (p90 {fmt.ms(c['gap_tail_ms_p90'])})")
    if "wait_ms" in c:
        lines.append(f"  run-queue wait (runnable, no CPU): {fmt.ms(c['wait_ms'])}; main thread "
                     f"{fmt.ms(c['wait_main_ms'])}, OpenMP workers {fmt.ms(c['wait_omp_ms'])}, other threads "
                     f"{fmt.ms(c['wait_other_ms'])}")
    quota = advice.quota_line(c, report.summary.get("context", {}))
    if quota:
        lines.append("  " + quota)
    lines += gpu_lines(report)
    lines.append(f"  the probe's own cost: sampler {fmt.ms(c['sampler_cpu_ms'])} of CPU "
                 f"({c['sampler_share']:.2%} of a core), {int(c['samples'])} samples")
    spin = advice.between_regions(c)
    if spin:
        lines.append("  advice: " + spin)
    lines += ["  advice: " + a for a in advice.device_advice(c, report.summary.get("context", {}),
                                                             report.summary.get("device_calls"),
                                                             report.summary.get("steady_classes"),
                                                             report.summary.get("steady_gpus"))]
    throttled = advice.throttled(c, report.summary.get("context", {}))
    if throttled:
        lines.append("  advice: " + throttled)
    return lines


# What ended the startup (the probe's context startup_ends).
STARTUP_ENDS = {"device": "the first device work (a wait or launch through the CUDA driver)",
                "openmp": "the first OpenMP region"}


def phase_lines(report):
    """The steady phase first (its time, CPU, the main thread's share of a
    core, the GPUs' busy share, the waits on the device and the launches),
    then the startup in one line; a run without a steady phase says so."""
    c, ctx = report.counters, report.summary.get("context", {})
    p = advice.steady_of(c)
    if p is None:
        return ["  phases: no device work and no OpenMP region, so no steady phase: the figures below are the "
                "whole run's"]
    busy = f", GPU busy {p.gpu_busy:.0%}" if p.gpu_busy is not None else ""
    # Its wait for a core (steady_wait_main_ms; absent in files from before it was counted).
    starved = (f"; the main thread waited for a core {p.main_runq_share:.1%} of it"
               if figure(c, "steady_wait_main_ms") is not None else "")
    lines = [f"  steady phase: {fmt.number(p.ms / 1000)} s: CPU {fmt.ms(p.cpu_ms)} ({p.cpu_ms / p.ms:.2f} cores), "
             f"main thread {p.main_share:.2f} of a core{busy}{starved}"]
    if figure(c, "syncs") or figure(c, "launches"):
        lines.append(f"  waits on the device: the main thread {fmt.ms(p.main_wait_ms)} in {p.waits} waits "
                     f"({p.wait_share:.0%} of the steady phase) with {fmt.ms(p.main_wait_cpu_ms)} of CPU inside them; "
                     f"every thread {fmt.ms(figure(c, 'sync_wait_ms'))} in {int(figure(c, 'syncs') or 0)}, "
                     f"{fmt.ms(p.wait_cpu_ms)} of CPU; launches {p.launches}, {fmt.ms(p.launch_ms)} inside them "
                     f"({fmt.ms(figure(c, 'launch_cpu_ms'))} of CPU)")
    elif ctx.get("cuda_used") == "1":
        lines.append("  waits on the device: none seen (the program reached the driver another way than the probe "
                     "wraps: docs/cuda.md)")
    ends = STARTUP_ENDS.get(ctx.get("startup_ends", ""), "the steady phase")
    if ctx.get("steady_from") == "steps":
        ends = ("the first training step recognised (the first of a run of repeated waits on the device: "
                "the phase begins as its wait returns)")
    dev, device = report.summary.get("startup_device") or {}, ""
    if dev.get("first_work_ms") is not None and (dev.get("syncs") or dev.get("launches")):
        device = (f"; device work from {fmt.number(dev['first_work_ms'] / 1000)} s: {dev.get('syncs', 0)} waits "
                  f"({fmt.ms(dev.get('sync_wait_ms') or 0)}), {dev.get('launches', 0)} launches (dataset "
                  "preparation, model.cuda(), a compile, the first step)")
    lines.append(f"  startup: {fmt.number(figure(c, 'startup_ms') / 1000)} s before {ends}, "
                 f"{fmt.ms(figure(c, 'startup_cpu_ms'))} of CPU{device} (not in the steady phase's figures)")
    if ctx.get("driver_calls_note", "none") != "none":
        lines.append(f"  note: {ctx['driver_calls_note']}")
    return lines


def settings_lines(report):
    ctx = report.summary.get("context", {})
    lines = [f"  settings in force: {knobs.in_force_line(ctx)}"]
    if slot_line(ctx):
        lines.append(f"  slot: {slot_line(ctx)}")
    if ctx.get("knob_notes", "none") != "none":
        lines.append(f"  note: {ctx['knob_notes']}")
    asked = ctx.get("cuda_sync_requested", "auto")
    if ctx.get("cuda_used") == "1" or (asked != "auto" and "cuda_sync_in_force" in ctx):
        lines.append(f"  CUDA host wait policy: asked {asked}, in force {ctx.get('cuda_sync_in_force', 'n/a')} "
                     f"({ctx.get('cuda_devices', 'n/a')} device(s) in the driver)")
        if ctx.get("cuda_sync_note", "none") != "none":
            lines.append(f"  note: {ctx['cuda_sync_note']}")
    return lines


def region_lines(report):
    c = report.counters
    if not c.get("regions"):
        return ["  regions: no OpenMP region (the program started no OpenMP team: one thread, or no OpenMP)"]
    sampled = "" if report.summary.get("region_durations_exact", True) else " (from a uniform sample)"
    nested = (f"; {int(c['regions_nested'])} nested inside them (depth up to {int(c['region_depth_max'])})"
              if c.get("regions_nested") else "")
    lines = [f"  regions: {int(c['regions'])} ({fmt.number(c['regions_per_s'])}/s), a region running "
             f"{c['region_share']:.0%} of the time; duration median {fmt.number(c['region_us_p50'])} us, "
             f"p90 {fmt.number(c['region_us_p90'])} us, p99 {fmt.number(c['region_us_p99'])} us{sampled}; "
             f"largest team {int(c['max_team'])}{nested}"]
    entries = report.summary.get("entry_points", [])
    if entries:
        rows = [[e["name"], str(e["regions"]), f"{e['share']:.1%}", fmt.number(e["us_p50"]), fmt.number(e["us_p90"]),
                 fmt.number(e["us_p99"]), " ".join(f"{n}x{t}" for t, n in e["teams"].items()) or "-",
                 str(e["nested"])] for e in entries]
        lines += ["  " + ln for ln in fmt.table(["entry point", "regions", "time share", "p50 us", "p90 us",
                                                  "p99 us", "teams (regions x threads)", "nested"], rows)]
    return lines


def gpu_run(report):
    """A process that used CUDA (it loaded the driver) or had a GPU sampled:
    its report has the GPU's lines (a CPU run's is as it was)."""
    return report.summary.get("context", {}).get("cuda_used") == "1" or bool(report.summary.get("gpus"))


def cpu_rows(report):
    """CPU by class of thread: the main thread (a GPU run: with its share of
    a core), the OpenMP workers in and between regions, the CUDA driver's
    threads and the pin-memory thread (a GPU run, or where they burned), the
    other threads, the forked worker processes (DataLoader workers), the
    command's other probed processes."""
    c = report.counters
    cuda = gpu_run(report)
    share = figure(c, "main_core_share") if cuda else None

    def steady(name):
        return fmt.number(figure(c, name)) if figure(c, name) is not None else ""
    rows = [["main thread" + (f" ({fmt.number(share, 2)} of a core)" if share is not None else ""),
             fmt.number(c["cpu_main_ms"]), steady("steady_cpu_main_ms"), "", ""],
            [f"OpenMP workers ({int(c['threads_omp'])})", fmt.number(c["cpu_omp_ms"]), "",
             fmt.number(c["omp_in_regions_ms"]), fmt.number(c["omp_between_regions_ms"])]]
    for name, label in (("cpu_cuda_ms", "CUDA driver threads"), ("cpu_pin_ms", "pin-memory thread")):
        if name in c and (cuda or (figure(c, name) or 0) > 0):
            rows.append([label, fmt.number(figure(c, name)), "", "", ""])
    rows.append(["other threads", fmt.number(c["cpu_other_ms"]), "", "", ""])
    if c.get("child_processes"):
        rows.append([f"worker processes ({int(c['child_processes'])}: forked, e.g. DataLoader workers)",
                     fmt.number(probe.workers_ms(report)), steady("steady_children_cpu_ms"), "", ""])
    if report.others:
        rows.append([f"other probed processes ({len(report.others)})",
                     fmt.number(sum(o.counters.get("cpu_ms", 0) for o in report.others)), "", "", ""])
    rows.append(["all (cpu_ms)", fmt.number(c["cpu_ms"]), steady("steady_cpu_ms"), "", ""])
    return rows


def gpu_lines(report):
    """The process's own GPUs first, a line each: its busy share (NVML's
    utilisation), how it is known to be the process's (a context of its own
    on it, NVML's list of the device's processes), the wait policy its
    context ran under and the process's memory there; then the GPUs it could
    see and did not use, named apart (their busy share is other processes'
    work, not this one's). Without a GPU known to be the process's, every
    sampled GPU as before, with a line saying so. For a process that used
    CUDA without a sampled GPU, that; the probe's note on what kept a GPU
    from being sampled."""
    gpus = report.summary.get("gpus") or []
    ctx = report.summary.get("context", {})
    steady = {g.get("index"): g.get("busy_share") for g in report.summary.get("steady_gpus") or []}
    own = [g for g in gpus if g.get("used")]
    lines = []

    def busy_of(g):
        busy, in_steady = g.get("busy_share"), steady.get(g.get("index"))
        return ((f"busy {in_steady:.0%} of the steady phase, " if isinstance(in_steady, (int, float)) else "")
                + (f"busy {busy:.0%} of the time" if isinstance(busy, (int, float)) else "no sample"))

    for g in own or gpus:
        memory, period = g.get("memory_busy_share"), g.get("period_ms")
        how = (f"{int(g.get('samples') or 0)} readings of NVML's utilisation rate, polled"
               if g.get("source") == "utilization_rates" else
               f"{int(g.get('samples') or 0)} NVML samples" + (f" of {fmt.number(period)} ms each"
                                                                 if isinstance(period, (int, float)) else ""))
        whose = ""
        if own:
            by = {"context": "a context of its own", "nvml": "NVML lists it",
                  "context+nvml": "a context of its own, NVML lists it"}.get(g.get("used_by"), "?")
            dev = g.get("cuda_device")
            whose = (f" the process's ({by}" + (f", CUDA device {dev}" if isinstance(dev, int) else "")
                     + (f", wait policy {g['wait_policy']}" if g.get("wait_policy", "n/a") != "n/a" else "")
                     + (f", {fmt.number(g['memory_mib'])} MiB" if isinstance(g.get("memory_mib"), (int, float))
                        else "") + "):")
        lines.append(f"  GPU {g.get('index')} ({g.get('name', '?')}):{whose} " + busy_of(g)
                     + (f", memory busy {memory:.0%}" if isinstance(memory, (int, float)) else "") + f" ({how})")
    unused = [g for g in gpus if not g.get("used")]
    if own and unused:
        lines.append(f"  visible, not used by the process ({len(unused)}; its figures and advice leave them out): "
                     + "; ".join(f"GPU {g.get('index')} {busy_of(g)}" for g in unused))
    elif len(gpus) > 1:
        lines.append("  which of these GPUs the process used is not known (no context of its own seen, not in "
                     "NVML's process lists): its busy share is their mean")
    if gpus:
        lines.append("    (busy: the share of each driver sample period in which a kernel ran: its resolution is "
                     "that period, and a busy period says a kernel ran, not how much of the GPU it used)")
    elif ctx.get("cuda_used") == "1":
        lines.append("  GPU: the process used CUDA, but no GPU was sampled: no busy share")
    if ctx.get("gpu_note", "none") != "none":
        lines.append(f"  note: {ctx['gpu_note']}")
    return lines


def describe_exact(fig):
    """The exact monitor's lines: waits by class and by who held the CPU, and what the command caused."""
    holders = intervals.HOLDERS
    rows = [[cls, fmt.number(sum(by.values()))] + [fmt.number(by.get(h, 0.0)) for h in holders]
            for cls, by in sorted(fig["wait"].items())]
    lines = ["  exact (the scheduler's records): run-queue wait by class of thread and by who held the CPU (ms):"]
    lines += ["  " + ln for ln in fmt.table(["class", "wait"] + list(holders), rows)]
    top = sorted(fig["caused_by"].items(), key=lambda kv: -kv[1])[:5]
    lines.append(f"  the command's threads held the CPU other processes waited for: {fmt.ms(fig['caused'])}"
                 + (" (" + ", ".join(f"{k} {fmt.ms(v)}" for k, v in top) + ")" if top else ""))
    return lines
