"""The figures of results/FINDINGS.md's tables (`threadburn findings`),
computed from the rows of the committed result files: per table, its lines
as values (labels, medians, ratios, intervals, counts) in the order the
table lists them. export/findings.py lays them out as Markdown; nothing
here formats a number.

The medians are over the ok rows of a group (a run's copies and the
repetitions of a setting pooled), as the tables' titles say."""
import re
import statistics

from . import results, runfigures, verdicts
from ..lib import keys, paths, records, stats
from ..lib.records import Row, metric_values


def med(rows, column):
    """The median of a numeric column over the rows that have it; None without one."""
    values = metric_values(rows, column)
    return statistics.median(values) if values else None


def setting(row, flags=True):
    """Runtime + environment, without the thread count (its own column);
    flags=False: without the setting flags too, for a table that has a
    column for each (the loader table's loader and workers)."""
    label = keys.env_label(row) if flags else keys.env_label(row, flags=False)
    label = re.sub(r"\s*OMP_NUM_THREADS=\S+", "", label)
    return label.replace("KMP_AFFINITY=granularity=fine,compact,1,0", "compact affinity")


def groups(rows, key):
    """{key(row): [its ok rows]}, in the rows' order."""
    out = {}
    for row in rows:
        if row.ok:
            out.setdefault(key(row), []).append(row)
    return out


def burn(rows):
    """Step time against post-step burn per workload, thread count and
    setting: (workload, threads, setting, step_ms, residual_cpu_ms, of it the
    OpenMP workers', tail_ms, residual_cores, runs), each workload's settings
    fastest first."""
    by = groups(rows, lambda r: (results.workload_label(r), r.OMP_NUM_THREADS, setting(r)))
    ordered = sorted(by.items(), key=lambda kv: (kv[0][0], med(kv[1], Row.step_ms) or 0))
    return [key + (med(rs, Row.step_ms), med(rs, Row.residual_cpu_ms), med(rs, Row.residual_omp_ms),
                   med(rs, Row.tail_ms), med(rs, Row.residual_cores), len(rs)) for key, rs in ordered]


# The runtime study's kernels at n = 1 Mi floats.
RUNTIME_N = 1048576


def runtime(rows):
    """Region time, wake-up cost and burn per kernel and setting (n = 1 Mi
    floats); region times are the per-run medians over steps, in µs.
    Returns (gaps, lines): the gaps run (ms); per (kernel, setting): the
    region back to back, the serial time, the wake-up after each longer gap
    (the region after it less back to back), and after the longest gap the
    residual CPU, its OpenMP and TBB workers' part and the tail."""
    rows = [r for r in rows if r.n == RUNTIME_N]
    gaps = sorted({r.gap_ms for r in rows if r.gap_ms is not None})
    us = lambda v: v * 1000 if v is not None else None  # noqa: E731
    lines = []
    for (kernel, label), rs in sorted(groups(rows, lambda r: (r.kernel, setting(r))).items()):
        at = {g: [r for r in rs if r.gap_ms == g] for g in gaps}
        wakes = []
        for g in gaps[1:]:
            region, b2b = med(at[g], Row.step_ms_median), med(at[g], Row.backtoback_ms)
            wakes.append(us(region - b2b if region is not None and b2b is not None else None))
        big = at[gaps[-1]]
        lines.append((kernel, label, us(med(at[gaps[0]], Row.step_ms_median)), us(med(at[gaps[0]], Row.serial_ms)),
                      wakes, med(big, Row.residual_cpu_ms_median), med(big, Row.residual_omp_ms),
                      med(big, Row.residual_tbb_ms), med(big, Row.tail_ms_median)))
    return gaps, lines


def loader(rows):
    """Loader contention: per (threads, setting, loader, workers) the
    samples/s, step, data wait, cores busy, the loader's and OpenMP's CPU,
    the threads and involuntary context switches per step."""
    by = groups(rows, lambda r: (r.OMP_NUM_THREADS, setting(r, flags=False), r.loader, r.workers or 0))
    return [key + (med(rs, Row.samples_per_s), med(rs, Row.step_ms), med(rs, Row.data_ms), med(rs, Row.cores_busy),
                   med(rs, Row.step_cpu_loader_ms), med(rs, Row.step_cpu_omp_ms), med(rs, Row.threads),
                   med(rs, Row.invol_ctxsw)) for key, rs in sorted(by.items())]


def onednn(rows):
    """oneDNN on and off: per (model, threads, setting, mkldnn) the step, its
    forward and backward, cores busy and residual CPU."""
    by = groups(rows, lambda r: (r.model, r.OMP_NUM_THREADS, setting(r), r.mkldnn))
    return [key + (med(rs, Row.step_ms), med(rs, Row.forward_ms), med(rs, Row.backward_ms), med(rs, Row.cores_busy),
                   med(rs, Row.residual_cpu_ms)) for key, rs in sorted(by.items())]


def sampler(rows):
    """The sampler's cost: per workload and thread count, the median step
    with the sampler on and off, the change, the Mann-Whitney p-value, the
    sampler's median share of the iteration (None without one), the runs on
    and off. A group without both sides is left out."""
    by = groups(rows, lambda r: (results.workload_label(r.copy(sampler="")), r.OMP_NUM_THREADS))
    lines = []
    for (workload, threads), rs in sorted(by.items()):
        on = metric_values([r for r in rs if r.sampler == "on"], Row.step_ms)
        off = metric_values([r for r in rs if r.sampler == "off"], Row.step_ms)
        if not on or not off:
            continue
        share = [r.sampler_cpu_ms / (r.step_ms + r.gap_ms)
                 for r in rs if r.sampler == "on" and r.sampler_cpu_ms is not None]
        _, p, _ = stats.mann_whitney_u(on, off)
        m_on, m_off = statistics.median(on), statistics.median(off)
        lines.append((workload, threads, m_on, m_off, m_on / m_off - 1, p,
                      statistics.median(share) if share else None, len(on), len(off)))
    return lines


def tune(rows):
    """One `threadburn tune` CSV (its race, not the confirmation; settings
    dropped as duplicates left out): (has a figure, lines); per setting the
    runs, the median and 95 % CI (stats.median_ci: lo, hi, coverage) of the
    time figure (the --metric column when the tune had one, else the wall
    time) and of the CPU, the workers' median CPU between regions; best
    figure first."""
    recs = records.run_records(rows, paths.LIBOMP, runfigures.of_run)
    dropped = {name for by_name in verdicts.duplicates(recs).values() for name in by_name}
    rows = [r for r in rows if r.phase == "race" and r.study not in dropped]
    has_metric = any(r.metric is not None for r in rows)
    higher = has_metric and any(r.metric_higher for r in rows)
    figure = Row.metric if has_metric else Row.wall_ms
    by = groups(rows, lambda r: r.study)
    series = {name: (metric_values(rs, figure), metric_values(rs, Row.cpu_ms)) for name, rs in by.items()}
    ranked = sorted((n for n in series if series[n][0]), key=lambda n: statistics.median(series[n][0]), reverse=higher)
    lines = []
    for name in ranked:
        times, cpus = series[name]
        lines.append((name, len(times), statistics.median(times), stats.median_ci(times), statistics.median(cpus),
                      stats.median_ci(cpus), med(by[name], Row.omp_between_regions_ms)))
    return has_metric, lines


def verdict(rows, source, recorded_rule, libomp, baseline=None):
    """The verdict per workload of a sweep's or tune's rows, as `threadburn
    verdict` computes it (by the rule its rows or its verdict file recorded;
    baseline: its --baseline): per workload (label, verdict, chosen, baseline,
    the time ratio and the CPU ratio of the gain (decide's ratios: est, lo,
    hi), where the gain is from: the fresh runs (their counts), "race" (the
    race, as selected) or None, higher is better, runs)."""
    v = verdicts.decide_rows(rows, source, None, recorded_rule, libomp, baseline=baseline)
    lines = []
    for e in v.entries:
        d, c = e.decision, e.confirmation
        race = d.vs_baseline.get(d.chosen) if d.chosen and d.chosen != d.baseline else None
        if c is not None and c.time is not None:
            time_r, cpu_r, gain_from = c.time, c.cpu, c.runs
        else:
            time_r, cpu_r, gain_from = (race.time, race.cpu, "race") if race else (None, None, None)
        lines.append((e.label, e.verdict, d.chosen, d.baseline, time_r, cpu_r, gain_from, e.higher_is_better, e.runs))
    return lines


def cuda_key(r):
    """(model, setting, item_sync): a CUDA row's workload but its gap, and its setting."""
    return r.model, keys.setting_of(r).label, r.item_sync


def cuda_step(rows):
    """The host's side of a preloaded CUDA step: per (model, setting,
    item_sync, gap) the step, its CPU, the main thread's part, cores busy,
    the end-of-step synchronisation and its CPU, the GPU's span, the runs."""
    by = groups([r for r in rows if r.preload == "1"], lambda r: cuda_key(r) + (r.gap_ms or 0,))
    lines = []
    for key, rs in sorted(by.items()):
        step, cpu = med(rs, Row.step_ms), med(rs, Row.step_cpu_ms)
        lines.append(key + (step, cpu, med(rs, Row.step_cpu_main_ms), cpu / step, med(rs, Row.sync_ms),
                            med(rs, Row.sync_cpu_ms), med(rs, Row.gpu_ms), len(rs)))
    return lines


# The stall before a step the CUDA study compares with back to back (ms).
CUDA_STALL_MS = 100


def cuda_gap(rows):
    """A step after the stall against back to back, where a setting ran
    both: per (model, setting, item_sync) the two medians and the change."""
    by = groups(rows, lambda r: cuda_key(r) + (r.gap_ms or 0,))
    lines = []
    for (model, label, item, gap), rs in sorted(by.items()):
        after = by.get((model, label, item, CUDA_STALL_MS))
        if gap != 0 or not after:
            continue
        before, later = med(rs, Row.step_ms), med(after, Row.step_ms)
        lines.append((model, label, item, before, later, later / before - 1))
    return lines


def cuda_feed(rows):
    """How the step is fed, back to back, without loss.item() and with the
    driver's own wait policy: per model and setting (fastest first) the
    step, samples/s, the wait for data, the CPU per step and its loader's
    and OpenMP's part, the threads."""
    fed = [r for r in rows if (r.gap_ms or 0) == 0 and r.item_sync == "0" and r.cuda_sync in ("", "auto")]
    by = groups(fed, lambda r: cuda_key(r)[:2])
    ordered = sorted(by.items(), key=lambda kv: (kv[0][0], med(kv[1], Row.step_ms)))
    return [key + (med(rs, Row.step_ms), med(rs, Row.samples_per_s), med(rs, Row.data_ms), med(rs, Row.step_cpu_ms),
                   med(rs, Row.step_cpu_loader_ms), med(rs, Row.step_cpu_omp_ms), med(rs, Row.threads))
            for key, rs in ordered]


def gb_sync(entries_by_policy):
    """The end-of-step synchronisation in Google Benchmark JSON of the program
    run by hand ({policy: its entries}): per entry (policy, item_sync,
    gap_ms, as its name says) the step, the synchronisation, its CPU and the
    main thread's CPU."""
    lines = []
    for policy, entries in entries_by_policy.items():
        for e in entries:
            parts = dict(p.split(":", 1) for p in e["name"].split("/") if ":" in p)
            lines.append((policy, parts.get(Row.item_sync.name, ""), parts.get(Row.gap_ms.name, ""))
                         + tuple(e[c.name] for c in (Row.step_ms, Row.sync_ms, Row.sync_cpu_ms, Row.step_cpu_main_ms)))
    return lines


def host(rows):
    """A host tune (--copies): per copy count and plan (plans dropped as
    duplicates left out) the race's runs, the medians of the host's
    throughput, of each copy's own figure and of the CPU of all copies per
    run; by copies, then the highest throughput first."""
    recs = [r for r in records.run_records(rows, paths.LIBOMP, runfigures.of_run)
            if r.phase == "race" and r.status == "ok" and r.time is not None]
    dropped = verdicts.duplicates(recs)
    by = {}
    for r in recs:
        if r.name not in dropped.get(r.workload, {}):
            by.setdefault((r.copies, r.name), []).append(r)
    ordered = sorted(by.items(), key=lambda kv: (kv[0][0], -statistics.median(r.time for r in kv[1])))
    return [(copies, name, len(rs), statistics.median(r.time for r in rs),
             statistics.median(r.per_copy for r in rs if r.per_copy is not None),
             statistics.median(r.cpu for r in rs if r.cpu is not None)) for (copies, name), rs in ordered]


def fit(rows, source, recorded_rule, libomp):
    """How many copies fit (a host tune of several copy counts): the verdicts'
    Fit (analysis/hostplan.py), each step from fresh runs; None without one."""
    return verdicts.decide_rows(rows, source, None, recorded_rule, libomp).fit


def overheads(rows):
    """bench/overheads.py's figures as it wrote them: (figure, median, min,
    max, unit, runs)."""
    return [(r.figure, r.median, r.min, r.max, r.unit, r.runs) for r in rows]


def fleet(rows):
    """The two-node sweep: per node, workload and thread count, the runs it
    got, the tasks that ran them, the step and residual CPU."""
    by = groups(rows, lambda r: (r.host_name, results.workload_label(r), r.OMP_NUM_THREADS))
    return [key + (len({r.run_key for r in rs}), len({r.slurm_job for r in rs}), med(rs, Row.step_ms),
                   med(rs, Row.residual_cpu_ms)) for key, rs in sorted(by.items())]


def fleet_ddp(rows):
    """Two ranks across hosts against the same pair over loopback: per link
    and launcher (loopback first; every row, as test_fleet_ddp.py wrote
    them) the all-reduce's median, min and max, the step, gloo's CPU per step
    and the ranks x runs."""
    by = {}
    for r in rows:
        by.setdefault((r.link, r.launcher), []).append(r)
    lines = []
    for key, rs in sorted(by.items(), key=lambda kv: (kv[0][0] != "loopback", kv[0])):
        values = metric_values(rs, Row.allreduce_ms)
        lines.append(key + (med(rs, Row.allreduce_ms), min(values), max(values), med(rs, Row.step_ms),
                            med(rs, Row.step_cpu_gloo_ms), len(rs)))
    return lines
