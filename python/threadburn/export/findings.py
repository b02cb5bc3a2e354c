"""results/FINDINGS.md as Markdown: each table laid out from the lines
analysis/findings.py computes (or analysis/results.py's aggregates), one
function per table, and the template's placeholders filled.

In the template (docs/findings.template.md)
  {{table NAME}}            is replaced by the table NAME, and
  {{NAME|ROW|COLUMN}}       by one cell of it: ROW is the row's key (its label
                            cells joined by " / "), COLUMN the header text.
So prose numbers come from the tables too. Which table is made of which
file, and how, is the command's (commands/findings.py)."""
import re

from ..lib import fmt
from ..lib.errors import ThreadburnError


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


# --- how a value is written --------------------------------------------------------

def num(value, digits=2):
    """A figure: whole from 100 up, else `digits` decimals; – for none."""
    if value is None:
        return "–"
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.{digits}f}"


def gain(r, invert=False):
    """A ratio of decide's (est, lo, hi) as a change with its interval;
    invert: a higher-is-better figure, as its own change."""
    if r is None:
        return "–"
    if invert:
        return f"{1 / r.est - 1:+.1%} [{1 / r.hi - 1:+.1%}, {1 / r.lo - 1:+.1%}]"
    return f"{r.est - 1:+.1%} [{r.lo - 1:+.1%}, {r.hi - 1:+.1%}]"


def times(value):
    """A factor (a slowdown, a scaling) as x1.23; – for none."""
    return "–" if value is None else f"x{value:.2f}"


def ci(interval):
    """stats.median_ci's (lo, hi, coverage), the coverage said when under 95 %."""
    lo, hi, cov = interval
    return f"{num(lo)}..{num(hi)}" + ("" if cov >= 0.95 else f" ({cov:.0%})")


# --- the tables ----------------------------------------------------------------------

def burn_table(lines, title):
    """findings.burn's lines."""
    t = Table(title, ["workload", "OMP_NUM_THREADS", "setting", "step_ms", "residual_cpu_ms", "of it OpenMP workers",
                      "tail_ms", "residual_cores", "runs"], key_cells=3)
    for workload, threads, label, step, burn, omp, tail, cores, runs in lines:
        t.add([workload, threads, label, num(step), num(burn), num(omp), num(tail, 1), num(cores), runs])
    return t


def runtime_table(runtime):
    """findings.runtime's (gaps, lines)."""
    gaps, lines = runtime
    header = ["kernel", "setting", "region µs (back-to-back)", "serial µs"]
    header += [f"wake-up µs after {g} ms" for g in gaps[1:]]
    header += [f"residual_cpu_ms after {gaps[-1]} ms", "of it OpenMP workers", "of it TBB workers", "tail_ms"]
    t = Table("Runtimes side by side (runtime.csv, n = 1 Mi floats, OMP_NUM_THREADS=2; medians over steps, "
              "then over runs)", header, key_cells=2)
    for kernel, label, region, serial, wakes, burn, omp, tbb, tail in lines:
        t.add([kernel, label, num(region, 0), num(serial, 0)] + [num(w, 0) for w in wakes]
              + [num(burn), num(omp), num(tbb), num(tail, 1)])
    return t


def loader_table(lines):
    t = Table("Loader contention (loader.csv: cifar_sgd, batch 64, augmentation on, gap 0)",
              ["OMP_NUM_THREADS", "setting", "loader", "workers", "samples/s", "step_ms", "data_ms", "cores_busy",
               "loader CPU ms", "OpenMP CPU ms", "threads", "invol_ctxsw/step"], key_cells=4)
    for *key, rate, step, data, cores, loader_cpu, omp_cpu, threads, invol in lines:
        t.add(key + [num(rate, 0), num(step), num(data), num(cores), num(loader_cpu), num(omp_cpu), num(threads, 0),
                     num(invol, 1)])
    return t


def onednn_table(lines):
    t = Table("oneDNN on/off (onednn.csv)", ["model", "OMP_NUM_THREADS", "setting", "mkldnn", "step_ms", "forward_ms",
                                             "backward_ms", "cores_busy", "residual_cpu_ms"], key_cells=4)
    for *key, step, forward, backward, cores, burn in lines:
        t.add(key + [num(step), num(forward), num(backward), num(cores), num(burn)])
    return t


def oversub_table(entries):
    """results.oversubscription's entries."""
    t = Table("Oversubscription (oversubscription.csv; medians over runs whose copies overlapped >= 90 %)",
              ["workload", "setting", "processes", "step_ms per copy", "slowdown", "throughput", "unit",
               "CPU ms (all copies)", "invol_ctxsw", "runs"], key_cells=3)
    for e in entries:
        t.add([e["workload"], e["setting"], e["processes"], num(e["step_ms"]), times(e["slowdown"]),
               num(e["throughput"], 0), e["unit"], num(e["cpu_ms"]), num(e["invol_ctxsw"], 1), e["runs"]])
    return t


def sampler_table(lines):
    t = Table("The sampler's cost (sampler.csv: the same steps with the sampler on and off, interleaved runs)",
              ["workload", "OMP_NUM_THREADS", "step_ms on", "step_ms off", "change", "p (Mann-Whitney)",
               "sampler CPU share", "runs on/off"], key_cells=2)
    for workload, threads, on, off, change, p, share, n_on, n_off in lines:
        t.add([workload, threads, num(on, 3), num(off, 3), f"{change:+.1%}", f"{p:.2f}",
               "–" if share is None else f"{share:.2%}", f"{n_on}/{n_off}"])
    return t


def ddp_table(entries):
    """results.world_scaling's entries."""
    t = Table("Data-parallel steps by world size (ddp.csv; medians over runs; a world's step is its slowest "
              "rank's, its CPU all ranks')",
              ["workload", "setting", "world_size", "OMP_NUM_THREADS", "samples/s", "scaling", "step_ms",
               "allreduce_ms", "CPU ms/step", "residual_cpu_ms", "gloo CPU ms/step", "runs"], key_cells=3)
    for e in entries:
        t.add([e["workload"], e["setting"], e["world_size"], e["threads"], num(e["samples_per_s"], 0),
               times(e["scaling"]), num(e["step_ms"]), num(e["allreduce_ms"]), num(e["cpu_ms"]),
               num(e["residual_cpu_ms"]), num(e["step_cpu_gloo_ms"]), e["runs"]])
    return t


def tune_table(tune, title):
    """A tune's race per setting, best figure first: findings.tune's (has a figure, lines)."""
    has_metric, lines = tune
    what = "figure" if has_metric else "wall ms"
    t = Table(title, ["setting", "runs", f"{what} median", f"{what} 95% CI", "CPU ms median", "CPU ms 95% CI",
                      "between regions ms"])
    for name, runs, time, time_ci, cpu, cpu_ci, between in lines:
        t.add([name, runs, num(time), ci(time_ci), num(cpu), ci(cpu_ci), num(between)])
    return t


def verdict_table(lines, title):
    """The verdict per workload: findings.verdict's lines."""
    t = Table(title, ["workload", "verdict", "setting", "baseline", "time (figure) vs baseline", "CPU vs baseline",
                      "gain from", "runs"])
    for label, verdict, chosen, base, time_r, cpu_r, gain_from, higher, runs in lines:
        source_words = ("–" if gain_from is None else "the race, as selected" if gain_from == "race"
                        else f"{gain_from[0]} + {gain_from[1]} fresh runs")
        t.add([label, verdict, chosen or "–", base or "–", gain(time_r, higher), gain(cpu_r), source_words, runs])
    return t


def cuda_step_table(lines):
    t = Table("The host's side of a preloaded CUDA step (cuda-h200.csv, batch 1000; medians over runs; gpu_ms as "
              "measured: the span between two events on the stream)",
              ["model", "setting", "item_sync", "gap_ms", "step_ms", "step_cpu_ms", "of it main", "cores busy",
               "sync_ms", "sync_cpu_ms", "gpu_ms", "runs"], key_cells=4)
    for *key, step, cpu, main, cores, sync, sync_cpu, gpu, runs in lines:
        t.add(key + [num(step, 3), num(cpu, 3), num(main, 3), num(cores), num(sync, 3), num(sync_cpu, 3),
                     num(gpu, 3), runs])
    return t


def cuda_gap_table(lines, stall_ms):
    """The stall against back to back (findings.cuda_gap's lines); the last
    row: the range of the change."""
    t = Table(f"A {stall_ms} ms stall before each step (cuda-h200.csv; medians over runs)",
              ["model", "setting", "item_sync", "step_ms back to back", f"step_ms after {stall_ms} ms",
               "change"], key_cells=3)
    for model, label, item, before, later, change in lines:
        t.add([model, label, item, num(before, 3), num(later, 3), f"{change:+.0%}"])
    if lines:
        changes = [line[-1] for line in lines]
        t.add(["all", "", "", "", "", f"{min(changes):+.0%} .. {max(changes):+.0%}"])
    return t


def cuda_feed_table(lines):
    t = Table("Feeding the GPU (cuda-h200.csv: batch 1000, gap 0, item_sync 0; medians over runs)",
              ["model", "setting", "step_ms", "samples/s", "data_ms", "CPU ms/step", "of it loader",
               "of it OpenMP", "threads"], key_cells=2)
    for *key, step, rate, data, cpu, loader_cpu, omp_cpu, threads in lines:
        t.add(key + [num(step), num(rate, 0), num(data), num(cpu), num(loader_cpu), num(omp_cpu), num(threads, 0)])
    return t


def gb_sync_table(lines, names):
    """findings.gb_sync's lines; names: {policy: the JSON file's name}, for the title."""
    t = Table("The end-of-step synchronisation under each host wait policy (train_step_bench --device=cuda by hand: "
              "MNIST, batch 1000, 2 loader workers; " + ", ".join(names.values()) + ")",
              ["cuda_sync", "item_sync", "gap_ms", "step_ms", "sync_ms", "sync_cpu_ms", "step_cpu_main_ms"], key_cells=3)
    for policy, item, gap, *figures in lines:
        t.add([policy, item, gap] + [num(v, 3) for v in figures])
    return t


def host_table(lines, title):
    t = Table(title, ["copies", "plan", "runs", "copies/s median", "ms per copy median", "CPU ms median"], 2)
    for copies, name, runs, rate, per_copy, cpu in lines:
        t.add([copies, name, runs, num(rate), num(per_copy), num(cpu)])
    return t


FIT_WORDS = {"adds": "adds more", "adds less": "adds less", "open": "open"}


def fit_table(f, title):
    """findings.fit's Fit (None: no table rows)."""
    t = Table(title, ["copies", "plans", "host throughput", "against the margin"])
    for s in f.steps if f else []:
        t.add([f"{s.fewer} -> {s.more}", f"{s.fewer_plan} -> {s.more_plan}", gain(s.ratio, invert=True),
               FIT_WORDS[s.word]])
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
    "probe_launch_ns": "the probe's cost per CUDA kernel launch (the stand-in driver's, of no work; with minus without)",
    "probe_wait_ns": "the probe's cost per CUDA wait (the stand-in driver's, nothing queued; with minus without)",
    "phase_launch_ns": "the same per launch with tune's phase library alone (fresh runs of a GPU training)",
    "phase_wait_ns": "the same per wait with tune's phase library alone",
    "inrun_settle_ms_llvm_team2_to_1": "how long a worker spins on after an in-run switch cuts LLVM's team from 2 "
                                       "threads to 1 (blocktime 200 ms, regions 5 ms apart)",
    "inrun_settle_ms_llvm_bt200_to_bt0": "how long the workers stay busy after an in-run switch of LLVM's blocktime "
                                         "from 200 ms to 0 (regions 300 ms apart)",
}
# Per entry point: the same cost as probe_region_ns, through that entry point.
ENTRY_PREFIX = "probe_region_ns_"


def overhead_meaning(figure):
    if figure in OVERHEAD_MEANING:
        return OVERHEAD_MEANING[figure]
    if figure.startswith(ENTRY_PREFIX):
        return f"the probe's cost per region started through {figure[len(ENTRY_PREFIX):]}"
    return ""


def overheads_table(lines):
    """bench/overheads.py's figures: what measuring costs; counts and times
    (ns, 1/s) whole, times in ms to 3 digits, a step's change signed, a share of a core in percent."""
    t = Table("What measuring costs (overheads.csv, bench/overheads.py)",
              ["figure", "what", "median", "min", "max", "unit", "runs"])
    for figure, median, low, high, unit, runs in lines:
        counted = unit in ("ns", "1/s", "ms")
        if unit == "ms":
            show = lambda v: f"{v:.3g}"  # noqa: E731
        elif counted:
            show = lambda v: f"{v:.0f}"  # noqa: E731
        elif unit == "step":
            show = lambda v: f"{v:+.2%}"  # noqa: E731
        else:
            show = lambda v: f"{v:.2%}"  # noqa: E731
        label = unit if counted else "of the step time" if unit == "step" else "of a core"
        t.add([figure, overhead_meaning(figure), show(median), show(low), show(high), label, runs])
    return t


def fleet_table(lines):
    t = Table("Two nodes through Slurm (fleet.csv: configs/fleet.toml on the two namespace nodes of "
              "scripts/local_fleet.sh; medians over runs)",
              ["node", "workload", "OMP_NUM_THREADS", "runs", "tasks", "step_ms", "residual_cpu_ms"], key_cells=3)
    for *key, runs, tasks, step, burn in lines:
        t.add(key + [runs, tasks, num(step), num(burn)])
    return t


def fleet_ddp_table(lines):
    t = Table("Two ranks across hosts (fleet_ddp.csv: ddp_step mnist_adadelta, batch 64, one 25 MB bucket, "
              "OMP_NUM_THREADS=1; medians over ranks and runs)",
              ["link", "launcher", "allreduce_ms", "allreduce_ms min", "allreduce_ms max", "step_ms",
               "gloo CPU ms/step", "ranks x runs"],
              key_cells=2)
    for *key, allreduce, low, high, step, gloo, n in lines:
        t.add(key + [num(allreduce), num(low), num(high), num(step), num(gloo), n])
    return t


def decisions_table(rows, title):
    """bench/decisions.py's operating characteristics of the decision rule,
    as it wrote them (its own columns: decisions.csv is no results file):
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


# --- the template ----------------------------------------------------------------------

PLACEHOLDER = re.compile(r"\{\{(table ([\w-]+)|([\w-]+)\|([^|}]+)\|([^|}]+))\}\}")


def table_names(template_text):
    """The tables the template names, sorted."""
    return sorted({m.group(2) or m.group(3) for m in PLACEHOLDER.finditer(template_text)})


def render(template_text, tables):
    """The template with its placeholders filled from tables ({name: Table})."""
    def fill(m):
        if m.group(2):
            return tables[m.group(2)].markdown()
        return tables[m.group(3)].cell(m.group(4), m.group(5))
    return ("<!-- Generated by `threadburn findings --write` from docs/findings.template.md and the CSVs\n"
            "     in this folder. Edit the template, not this file. -->\n" + PLACEHOLDER.sub(fill, template_text))
