"""threadburn findings: results/FINDINGS.md from its template and the committed
result CSVs, so every number in it can be regenerated and checked.

The template (docs/findings.template.md) holds the prose; in it
  {{table NAME}}            is replaced by the table NAME (TABLES below), and
  {{NAME|ROW|COLUMN}}       by one cell of it: ROW is the row's key (its label
                            cells joined by " / "), COLUMN the header text.
So prose numbers come from the tables too. `threadburn findings --check`
(a unit test) fails when results/FINDINGS.md differs from what the template
and the CSVs give; `--write` rewrites it.
"""
import argparse
import difflib
import os
import re
import statistics

from ..lib import keys, fmt, paths, records, schema
from ..analysis import results
from ..lib.errors import ThreadburnError


def add_parser(sub):
    p = sub.add_parser("findings", help="regenerate or check results/FINDINGS.md from the committed CSVs",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--results", default=os.path.join(paths.data_dir(), "results"),
                   help="folder of the reference CSVs and FINDINGS.md (default: results/)")
    p.add_argument("--template", default=os.path.join(paths.data_dir(), "docs", "findings.template.md"))
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="exit 1 if FINDINGS.md is not what they give")
    mode.add_argument("--write", action="store_true", help="rewrite FINDINGS.md")
    p.set_defaults(run=main)
    return p


class Table:
    def __init__(self, title, header, key_cells=1):
        self.title, self.header, self.key_cells = title, header, key_cells
        self.rows = []

    def add(self, cells):
        self.rows.append([str(c) for c in cells])

    def key(self, row):
        return " / ".join(row[:self.key_cells])

    def cell(self, row_key, column):
        if column not in self.header:
            raise ThreadburnError(f"table {self.title!r} has no column {column!r}; it has: {', '.join(self.header)}")
        for row in self.rows:
            if self.key(row) == row_key:
                return row[self.header.index(column)]
        raise ThreadburnError(f"table {self.title!r} has no row {row_key!r}; rows: "
                              + "; ".join(self.key(r) for r in self.rows))

    def markdown(self):
        return f"### {self.title}\n\n" + "\n".join(fmt.table(self.header, self.rows, "md", self.key_cells))


def med(rows, metric):
    values = records.metric_values(rows, metric)
    return statistics.median(values) if values else None


def num(value, digits=2):
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.{digits}f}"


def setting(row):
    """Runtime + environment, without the thread count (its own column)."""
    label = re.sub(r"\s*OMP_NUM_THREADS=\S+", "", keys.env_label(row))
    return label.replace("KMP_AFFINITY=granularity=fine,compact,1,0", "compact affinity")


def groups(rows, key):
    out = {}
    for row in rows:
        if row.ok:
            out.setdefault(key(row), []).append(row)
    return out


def burn_table(rows, title):
    """Step time against post-step burn per setting."""
    t = Table(title, ["workload", "OMP_NUM_THREADS", "setting", "step_ms", "residual_cpu_ms", "of it OpenMP workers",
                      "tail_ms", "residual_cores", "runs"], key_cells=3)
    by = groups(rows, lambda r: (results.workload_label(r), r.text("OMP_NUM_THREADS"), setting(r)))
    for (workload, threads, label), rs in sorted(by.items(), key=lambda kv: (kv[0][0], med(kv[1], "step_ms") or 0)):
        t.add([workload, threads, label, num(med(rs, "step_ms")), num(med(rs, "residual_cpu_ms")),
               num(med(rs, "residual_omp_ms")), num(med(rs, "tail_ms"), 1), num(med(rs, "residual_cores")), len(rs)])
    return t


def runtime_table(rows):
    """Region time, wake-up cost and burn per kernel and setting (n = 1 Mi
    floats); region times are the per-run medians over steps."""
    rows = [r for r in rows if r.text("n") == "1048576"]
    gaps = sorted({int(r.text("gap_ms")) for r in rows if r.text("gap_ms")})
    us = lambda v: num(v * 1000 if v is not None else None, 0)
    header = ["kernel", "setting", "region µs (back-to-back)", "serial µs"]
    header += [f"wake-up µs after {g} ms" for g in gaps[1:]]
    header += [f"residual_cpu_ms after {gaps[-1]} ms", "of it OpenMP workers", "of it TBB workers", "tail_ms"]
    t = Table("Runtimes side by side (runtime.csv, n = 1 Mi floats, OMP_NUM_THREADS=2; medians over steps, "
              "then over runs)", header, key_cells=2)
    for (kernel, label), rs in sorted(groups(rows, lambda r: (r.text("kernel"), setting(r))).items()):
        at = {g: [r for r in rs if r.text("gap_ms") == str(g)] for g in gaps}
        line = [kernel, label, us(med(at[gaps[0]], "step_ms_median")), us(med(at[gaps[0]], "serial_ms"))]
        for g in gaps[1:]:
            region, b2b = med(at[g], "step_ms_median"), med(at[g], "backtoback_ms")
            line.append(us(region - b2b if region is not None and b2b is not None else None))
        big = at[gaps[-1]]
        line += [num(med(big, "residual_cpu_ms_median")), num(med(big, "residual_omp_ms")),
                 num(med(big, "residual_tbb_ms")), num(med(big, "tail_ms_median"), 1)]
        t.add(line)
    return t


def loader_table(rows):
    t = Table("Loader contention (loader.csv: cifar_sgd, batch 64, augmentation on, gap 0)",
              ["OMP_NUM_THREADS", "setting", "loader", "workers", "samples/s", "step_ms", "data_ms", "cores_busy",
               "loader CPU ms", "OpenMP CPU ms", "threads", "invol_ctxsw/step"], key_cells=4)
    by = groups(rows, lambda r: (r.text("OMP_NUM_THREADS"), setting(r), r.text("loader"), r.integer("workers", 0)))
    for (threads, label, loader, workers), rs in sorted(by.items()):
        t.add([threads, label, loader, workers, num(med(rs, "samples_per_s"), 0), num(med(rs, "step_ms")),
               num(med(rs, "data_ms")), num(med(rs, "cores_busy")), num(med(rs, "step_cpu_loader_ms")),
               num(med(rs, "step_cpu_omp_ms")), num(med(rs, "threads"), 0), num(med(rs, "invol_ctxsw"), 1)])
    return t


def onednn_table(rows):
    t = Table("oneDNN on/off (onednn.csv)", ["model", "OMP_NUM_THREADS", "setting", "mkldnn", "step_ms", "forward_ms",
                                             "backward_ms", "cores_busy", "residual_cpu_ms"], key_cells=4)
    by = groups(rows, lambda r: (r.text("model"), r.text("OMP_NUM_THREADS"), setting(r), r.text("mkldnn")))
    for (model, threads, label, mk), rs in sorted(by.items()):
        t.add([model, threads, label, mk, num(med(rs, "step_ms")), num(med(rs, "forward_ms")),
               num(med(rs, "backward_ms")), num(med(rs, "cores_busy")), num(med(rs, "residual_cpu_ms"))])
    return t


def oversub_table(rows):
    t = Table("Oversubscription (oversubscription.csv; medians over runs whose copies overlapped >= 90 %)",
              ["workload", "setting", "processes", "step_ms per copy", "slowdown", "throughput", "unit",
               "CPU ms (all copies)", "invol_ctxsw", "runs"], key_cells=3)
    for e in results.oversubscription(rows):
        t.add([e["workload"], e["setting"], e["processes"], num(e["step_ms"]),
               "–" if e["slowdown"] is None else f"x{e['slowdown']:.2f}", num(e["throughput"], 0), e["unit"],
               num(e["cpu_ms"]), num(e["invol_ctxsw"], 1), e["runs"]])
    return t


def sampler_table(rows):
    """step_ms with the sampler on and off, per workload and thread count."""
    from ..lib import stats
    t = Table("The sampler's cost (sampler.csv: the same steps with the sampler on and off, interleaved runs)",
              ["workload", "OMP_NUM_THREADS", "step_ms on", "step_ms off", "change", "p (Mann-Whitney)",
               "sampler CPU share", "runs on/off"], key_cells=2)
    by = groups(rows, lambda r: (results.workload_label(r.copy(sampler="")), r.text("OMP_NUM_THREADS")))
    for (workload, threads), rs in sorted(by.items()):
        on = records.metric_values([r for r in rs if r.text("sampler") == "on"], "step_ms")
        off = records.metric_values([r for r in rs if r.text("sampler") == "off"], "step_ms")
        if not on or not off:
            continue
        share = [r.number("sampler_cpu_ms") / (r.number("step_ms") + r.number("gap_ms"))
                 for r in rs if r.text("sampler") == "on" and r.number("sampler_cpu_ms") is not None]
        _, p, _ = stats.mann_whitney_u(on, off)
        m_on, m_off = statistics.median(on), statistics.median(off)
        t.add([workload, threads, num(m_on, 3), num(m_off, 3), f"{m_on / m_off - 1:+.1%}", f"{p:.2f}",
               f"{statistics.median(share):.2%}" if share else "–", f"{len(on)}/{len(off)}"])
    return t


def ddp_table(rows):
    """Data-parallel worlds by size (results.world_scaling)."""
    t = Table("Data-parallel steps by world size (ddp.csv; medians over runs; a world's step is its slowest "
              "rank's, its CPU all ranks')",
              ["workload", "setting", "world_size", "OMP_NUM_THREADS", "samples/s", "scaling", "step_ms",
               "allreduce_ms", "CPU ms/step", "residual_cpu_ms", "gloo CPU ms/step", "runs"], key_cells=3)
    for e in results.world_scaling(rows):
        t.add([e["workload"], e["setting"], e["world_size"], e["threads"], num(e["samples_per_s"], 0),
               "–" if e["scaling"] is None else f"x{e['scaling']:.2f}", num(e["step_ms"]), num(e["allreduce_ms"]),
               num(e["cpu_ms"]), num(e["residual_cpu_ms"]), num(e["step_cpu_gloo_ms"]), e["runs"]])
    return t


def tune_table(rows, title):
    """One `threadburn tune` CSV (its race, not the confirmation): per
    setting the runs, the median and 95 % CI of the time figure (the
    --metric column when the tune had one, else the wall time) and of the
    CPU, the workers' CPU between regions; ordered by the time figure."""
    from ..lib import stats
    from ..analysis import verdicts
    dropped = {name for by_name in verdicts.duplicates(records.run_records(rows, paths.LIBOMP)).values()
               for name in by_name}
    rows = [r for r in rows if r.phase == "race" and r.study not in dropped]
    has_metric = any(r.number("metric") is not None for r in rows)
    higher = has_metric and any(r.metric_higher for r in rows)
    key = "metric" if has_metric else "wall_ms"
    what = "figure" if has_metric else "wall ms"
    t = Table(title, ["setting", "runs", f"{what} median", f"{what} 95% CI", "CPU ms median", "CPU ms 95% CI",
                      "between regions ms"])
    by = groups(rows, lambda r: r.study)
    series = {name: (records.metric_values(rs, key), records.metric_values(rs, "cpu_ms")) for name, rs in by.items()}

    def ci(values):
        lo, hi, cov = stats.median_ci(values)
        return f"{num(lo)}..{num(hi)}" + ("" if cov >= 0.95 else f" ({cov:.0%})")

    ranked = sorted((n for n in series if series[n][0]), key=lambda n: statistics.median(series[n][0]), reverse=higher)
    for name in ranked:  # best first
        times, cpus = series[name]
        t.add([name, len(times), num(statistics.median(times)), ci(times), num(statistics.median(cpus)), ci(cpus),
               num(med(by[name], "omp_between_regions_ms"))])
    return t


def verdict_table(rows, path, title):
    """The verdict per workload of a sweep's or tune's CSV, as `threadburn
    verdict` computes it (by the rule its rows or its verdict.json recorded)."""
    from ..analysis import verdicts
    from ..lib import files
    v = verdicts.decide_rows(rows, os.path.basename(path), None, files.recorded_rule(path), paths.LIBOMP)
    t = Table(title, ["workload", "verdict", "setting", "baseline", "time (figure) vs baseline", "CPU vs baseline",
                      "gain from", "runs"])

    def ratio(r, invert=False):
        if r is None:
            return "–"
        if invert:  # a higher-is-better figure: its own change
            return f"{1 / r.est - 1:+.1%} [{1 / r.hi - 1:+.1%}, {1 / r.lo - 1:+.1%}]"
        return f"{r.est - 1:+.1%} [{r.lo - 1:+.1%}, {r.hi - 1:+.1%}]"
    for e in v.entries:
        d, c = e.decision, e.confirmation
        race = d.vs_baseline.get(d.chosen) if d.chosen and d.chosen != d.baseline else None
        if c is not None and c.time is not None:
            time_r, cpu_r, source = c.time, c.cpu, f"{c.runs[0]} + {c.runs[1]} fresh runs"
        else:
            time_r, cpu_r, source = (race.time, race.cpu, "the race, as selected") if race else (None, None, "–")
        t.add([e.label, e.verdict, d.chosen or "–", d.baseline or "–", ratio(time_r, e.higher_is_better),
               ratio(cpu_r), source, e.runs])
    return t


def host_table(rows, title):
    """A host tune (--copies): per copy count and plan, the race's runs, the
    medians of the host's throughput (copies/s), of each copy's own time and
    of the CPU of all copies per run."""
    from ..analysis import verdicts
    t = Table(title, ["copies", "plan", "runs", "copies/s median", "ms per copy median", "CPU ms median"], 2)
    recs = [r for r in records.run_records(rows, paths.LIBOMP) if r.phase == "race" and r.status == "ok"
            and r.time is not None]
    dropped = verdicts.duplicates(recs)
    by = {}
    for r in recs:
        if r.name not in dropped.get(r.workload, {}):
            by.setdefault((r.copies, r.name), []).append(r)
    for (copies, name), rs in sorted(by.items(), key=lambda kv: (kv[0][0], -statistics.median(r.time for r in kv[1]))):
        t.add([copies, name, len(rs), num(statistics.median(r.time for r in rs)),
               num(statistics.median(r.per_copy for r in rs if r.per_copy is not None)),
               num(statistics.median(r.cpu for r in rs if r.cpu is not None))])
    return t


def fit_table(rows, path, title):
    """How many copies fit (a host tune of several copy counts): each step,
    from fresh runs (analysis/hostplan.py), and what it says."""
    from ..analysis import verdicts
    from ..lib import files
    v = verdicts.decide_rows(rows, os.path.basename(path), None, files.recorded_rule(path), paths.LIBOMP)
    t = Table(title, ["copies", "plans", "host throughput", "against the margin"])
    f = v.fit
    for s in f.steps if f else []:
        r = s.ratio
        gain = "–" if r is None else f"{1 / r.est - 1:+.1%} [{1 / r.hi - 1:+.1%}, {1 / r.lo - 1:+.1%}]"
        t.add([f"{s.fewer} -> {s.more}", f"{s.fewer_plan} -> {s.more_plan}", gain,
               {"adds": "adds more", "adds less": "adds less", "open": "open"}[s.word]])
    if f:
        t.add(["fits", "", str(f.fits) if f.settled else f"at least {f.fits}", f"margin {f.margin:.0%}"])
    return t


OVERHEAD_MEANING = {
    "probe_region_ns": "the preload probe's cost per parallel region (an empty 2-thread region, with minus without)",
    "probe_sampler_share_regions_child": "the probe's sampler, on a C++ program of regions and 150 ms sleeps",
    "probe_sampler_share_training": "the probe's sampler, on examples/sleep_step_sleep.py",
    "monitor_share_training": "threadburn_monitor at its default period, recording that training",
    "monitor_exact_share_training": "threadburn_monitor's exact mode (the scheduler's records), recording that training",
    "monitor_exact_share_mnist_no_gap": "threadburn_monitor's exact mode, recording the MNIST training without a sleep "
                                        "(many short regions)",
    "monitor_exact_events_per_s_training": "the records per second the exact mode read, on that training",
    "monitor_exact_step_cost_mnist_no_gap": "the exact mode's cost to the MNIST training without a sleep: its step "
                                            "time with the monitor over without, less 1",
    "monitor_exact_events_per_s_mnist_no_gap": "the records per second the exact mode read, on the MNIST training "
                                               "without a sleep",
    "probe_sampler_share_gaps_20ms_llvm": "the probe's sampler, on regions 20 ms apart under LLVM's default blocktime",
    "probe_sampler_share_gaps_3ms_llvm": "the probe's sampler, on regions 3 ms apart under LLVM's default blocktime",
    "probe_sampler_share_dataloader_workers": "the probe's sampler, on a training with DataLoader(num_workers=2)",
}
# Per entry point: the same cost as probe_region_ns, through that entry point.
ENTRY_PREFIX = "probe_region_ns_"


def overhead_meaning(figure):
    if figure in OVERHEAD_MEANING:
        return OVERHEAD_MEANING[figure]
    if figure.startswith(ENTRY_PREFIX):
        return f"the probe's cost per region started through {figure[len(ENTRY_PREFIX):]}"
    return ""


def overheads_table(rows):
    """bench/overheads.py's figures: what measuring costs."""
    t = Table("What measuring costs (overheads.csv, bench/overheads.py)",
              ["figure", "what", "median", "min", "max", "unit", "runs"])
    for r in rows:
        unit = r.text("unit")
        counted = unit in ("ns", "1/s")  # counts and times, not shares of a core
        if counted:
            show = lambda v: f"{schema.to_float(v):.0f}"  # noqa: E731
        elif unit == "step":  # a change of the step time
            show = lambda v: f"{schema.to_float(v):+.2%}"  # noqa: E731
        else:
            show = lambda v: f"{schema.to_float(v):.2%}"  # noqa: E731
        label = unit if counted else "of the step time" if unit == "step" else "of a core"
        t.add([r.text("figure"), overhead_meaning(r.text("figure")), show(r.text("median")), show(r.text("min")), show(r.text("max")),
               label, r.text("runs")])
    return t


def fleet_table(rows):
    """The two-node sweep (configs/fleet.toml through sweep --slurm on
    scripts/local_fleet.sh): per node and setting, the runs it got."""
    t = Table("Two nodes through Slurm (fleet.csv: configs/fleet.toml on the two namespace nodes of "
              "scripts/local_fleet.sh; medians over runs)",
              ["node", "workload", "OMP_NUM_THREADS", "runs", "tasks", "step_ms", "residual_cpu_ms"], key_cells=3)
    by = groups(rows, lambda r: (r.text("host_name"), results.workload_label(r), r.text("OMP_NUM_THREADS")))
    for (node, workload, threads), rs in sorted(by.items()):
        t.add([node, workload, threads, len({r.text("run_key") for r in rs}), len({r.text("slurm_job") for r in rs}),
               num(med(rs, "step_ms")), num(med(rs, "residual_cpu_ms"))])
    return t


def fleet_ddp_table(rows):
    """fleet_ddp.csv (tests/python/test_fleet_ddp.py): two ranks over the veth
    link between two namespace hosts against the same pair over loopback."""
    t = Table("Two ranks across hosts (fleet_ddp.csv: ddp_step mnist_adadelta, batch 64, one 25 MB bucket, "
              "OMP_NUM_THREADS=1; medians over ranks and runs)",
              ["link", "launcher", "allreduce_ms", "allreduce_ms min", "allreduce_ms max", "step_ms",
               "gloo CPU ms/step", "ranks x runs"],
              key_cells=2)
    by = {}
    for r in rows:
        by.setdefault((r.text("link"), r.text("launcher")), []).append(r)
    for (link, launcher), rs in sorted(by.items(), key=lambda kv: (kv[0][0] != "loopback", kv[0])):
        values = records.metric_values(rs, "allreduce_ms")
        t.add([link, launcher, num(med(rs, "allreduce_ms")), num(min(values)), num(max(values)),
               num(med(rs, "step_ms")), num(med(rs, "step_cpu_gloo_ms")), len(rs)])
    return t


def decisions_table(rows, title):
    """bench/decisions.py's operating characteristics of the decision rule:
    the shares of verdicts, the runs spent, the printed gain's bias and its
    interval's coverage (against the 90 % claimed; a file from before the
    coverage was measured has none)."""
    t = Table(title, ["scenario", "objective", "right change", "false change", "keep", "undecided",
                      "runs (median / p90)", "gain printed: bias pp (cases)", "as selected: bias pp (cases)",
                      "interval covers (90 % claimed)", "target", "met"], key_cells=1)
    pct = lambda v: f"{float(v):.1%}"

    def bias(r, column):  # over the cases the fresh runs measured, and how many
        return f"{r.text(column)} ({r.text('bias_cases')})" if r.has(column) else "–"
    for r in rows:
        t.add([r.text("scenario"), r.text("objective"), pct(r.text("change_right")), pct(r.text("change_false")),
               pct(r.text("keep")), pct(r.text("undecided")), f"{r.text('runs_median')} / {r.text('runs_p90')}",
               bias(r, "bias_reported_pp"), bias(r, "bias_as_selected_pp"),
               pct(r.text("coverage")) if r.has("coverage") else "–", r.text("target", "–"),
               r.text("meets", "–")])
    return t


# name -> (CSV in results/, how to tabulate it)
# name -> (CSV in results/, how to tabulate its rows and path)
TABLES = {
    "seed000": ("seed000", lambda r, p: burn_table(r, "An SGD step, then 2 s idle (seed000.csv)")),
    "default": ("default", lambda r, p: burn_table(r, "The default study (default.csv)")),
    "blocktime": ("blocktime", lambda r, p: burn_table(r, "Blocktime / spin count / wait policy (blocktime.csv)")),
    "launcher": ("launcher", lambda r, p: burn_table(r, "PyTorch's launcher preset against the others (launcher.csv)")),
    "runtime": ("runtime", lambda r, p: runtime_table(r)),
    "loader": ("loader", lambda r, p: loader_table(r)),
    "oversubscription": ("oversubscription", lambda r, p: oversub_table(r)),
    "onednn": ("onednn", lambda r, p: onednn_table(r)),
    "batch_workers": ("batch_workers", lambda r, p: burn_table(r, "Batch x workers (batch_workers.csv)")),
    "sampler": ("sampler", lambda r, p: sampler_table(r)),
    "ddp": ("ddp", lambda r, p: ddp_table(r)),
    "overheads": ("overheads", lambda r, p: overheads_table(r)),
    "decisions": ("decisions", lambda r, p: decisions_table(
        r, "The decision rule, version 3, on synthetic tunes whose truth is known (decisions.csv, bench/decisions.py; "
        "shares of the cases, tune's default budget)")),
    "decisions_v2": ("decisions_v2", lambda r, p: decisions_table(
        r, "The same scenarios and seeds under rule version 2, before issue 32 (decisions_v2.csv)")),
    "fleet": ("fleet", lambda r, p: fleet_table(r)),
    "fleet_ddp": ("fleet_ddp", lambda r, p: fleet_ddp_table(r)),
    "verdict_default": ("default", lambda r, p: verdict_table(r, p, "Verdicts of the default study (default.csv)")),
    "verdict_tune_sleep": ("tune-sleep_step_sleep",
                           lambda r, p: verdict_table(r, p, "Verdict of the tune on sleep_step_sleep.py")),
    "verdict_tune_mnist": ("tune-mnist_adadelta",
                           lambda r, p: verdict_table(r, p, "Verdict of the tune on mnist_adadelta.py")),
    "verdict_host_mnist": ("tune-host-mnist",
                           lambda r, p: verdict_table(r, p, "Verdicts of the host tune on the MNIST training "
                                                      "(tune-host-mnist.csv; time: host throughput)")),
    "host_mnist": ("tune-host-mnist", lambda r, p: host_table(r, "Host plans for the MNIST training, the race's runs "
                                                              "(tune-host-mnist.csv)")),
    "fit_host_mnist": ("tune-host-mnist", lambda r, p: fit_table(r, p, "How many MNIST trainings fit this host "
                                                                 "(fresh runs)")),
    "tune_sleep": ("tune-sleep_step_sleep",
                   lambda r, p: tune_table(r, "tune on examples/sleep_step_sleep.py (tune-sleep_step_sleep.csv; wall ms)")),
    "tune_mnist": ("tune-mnist_adadelta",
                   lambda r, p: tune_table(r, "tune on examples/mnist_adadelta.py (tune-mnist_adadelta.csv; "
                                           "figure: its samples/s)")),
}


def build_tables(results_dir, names):
    out = {}
    for name in names:
        if name not in TABLES:
            raise ThreadburnError(f"the template names table {name!r}; known: {', '.join(TABLES)}")
        csv_name, make = TABLES[name]
        path = os.path.join(results_dir, csv_name + ".csv")
        if not os.path.exists(path):
            raise ThreadburnError(f"{path}: missing (table {name!r} of the template)")
        rows = records.read_rows(path)
        out[name] = make(rows, path)
    return out


PLACEHOLDER = re.compile(r"\{\{(table ([\w-]+)|([\w-]+)\|([^|}]+)\|([^|}]+))\}\}")


def render(template_text, results_dir):
    names = {m.group(2) or m.group(3) for m in PLACEHOLDER.finditer(template_text)}
    tables = build_tables(results_dir, sorted(names))

    def fill(m):
        if m.group(2):
            return tables[m.group(2)].markdown()
        return tables[m.group(3)].cell(m.group(4), m.group(5))
    return ("<!-- Generated by `threadburn findings --write` from docs/findings.template.md and the CSVs\n"
            "     in this folder. Edit the template, not this file. -->\n" + PLACEHOLDER.sub(fill, template_text))


def main(args):
    try:
        with open(args.template) as f:
            template = f.read()
    except OSError as e:
        raise ThreadburnError(f"{args.template}: cannot read: {e.strerror}") from None
    text = render(template, args.results)
    target = os.path.join(args.results, "FINDINGS.md")
    if args.write:
        with open(target, "w") as f:
            f.write(text)
        print(f"findings: wrote {target}")
        return 0
    if args.check:
        try:
            with open(target) as f:
                current = f.read()
        except OSError:
            current = ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), target, "regenerated", lineterm="", n=1)
            print("\n".join(list(diff)[:60]))
            print(f"findings: {target} differs from what the template and the CSVs give; "
                  "run `threadburn findings --write` (and check the prose still holds)")
            return 1
        print(f"findings: {target} matches the template and the CSVs")
        return 0
    print(text)
    return 0
