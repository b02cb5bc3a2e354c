"""The figures of threadburn (library): every plot of a results file
(make_all: heatmaps, Pareto, oversubscription, world sizes, timelines), the
runs of a command per setting (tune_settings), and the one timeline figure
(timeline_figure) that `threadburn plot`, `run` and `monitor-plot` draw.
Needs matplotlib (Debian's python3-matplotlib, for /usr/bin/python3).
"""
import os
import re

from ..lib import keys, fmt, knobs, schema, stats
from ..analysis import results, slotsizes
from ..analysis.runfigures import HOST_KINDS, of_run
from ..lib.records import Row, run_records, world_rows
from .drawing import pyplot, save_figure, timeline_figure
from ..lib.errors import ThreadburnError

MAX_PANELS_PER_FIGURE = 9
MAX_LABELLED_POINTS = 30
# The heatmaps' metrics: (column, title, colour bar's label).
HEATMAP_METRICS = ((Row.step_ms, "Median step time", "step time (ms)"),
                   (Row.residual_cpu_ms, "Median CPU burned after the step", "residual CPU (ms per step)"))
# What the figures of a sweep's file, and of runs of a command, read.
SWEEP_NEEDS = tuple(c.name for c in (Row.status, Row.benchmark, Row.runtime, Row.step_ms, Row.residual_cpu_ms,
                                     Row.OMP_NUM_THREADS))
RUNS_NEEDS = tuple(c.name for c in (Row.status, Row.bench, Row.command, Row.wall_ms, Row.cpu_ms))
# A heatmap's layout, the knob table's heatmap column: cells of the rows'
# knob (OMP_NUM_THREADS) x the runtime's wait knob (its columns), panels per
# value of the panels' knob (OMP_WAIT_POLICY). Every other setting knob of
# the table is not laid out: each of its values gets its own figure.
HEATMAP_KNOBS = knobs.heatmap_knobs()
FIXED_KNOBS = tuple(k.name for k in knobs.table() if k.is_column and k.name not in HEATMAP_KNOBS) + (
    Row.cuda_sync.name, Row.preset.name)
ROWS, PANELS = knobs.heatmap_knob("rows").name, knobs.heatmap_knob("panels").name
MAX_OVERSUB_WORKLOADS = 4


def slug(text):
    return re.sub(r"[^A-Za-z0-9]+", "_", text.removesuffix("/manual_time")).strip("_")


def sort_key(value):
    """unset first, then numbers in order, then words (infinite, passive...)."""
    if value in (schema.UNSET, ""):
        return (0, 0, "")
    try:
        return (1, float(value), "")
    except ValueError:
        return (2, 0, value)


def wait_knob(runtime):
    """The runtime's own wait knob, a heatmap's columns (the knob table's heatmap column)."""
    return knobs.heatmap_knob("columns", runtime)


def heatmaps(rows, plt, out_dir):
    """One figure per (metric, workload, fixed knobs); one panel per
    (OMP_WAIT_POLICY, runtime); cells: OMP_NUM_THREADS x the runtime's own
    wait knob (KMP_BLOCKTIME under llvm, GOMP_SPINCOUNT under gomp): the knob
    table's heatmap column says which."""
    figures = {}
    for workload, by_env in results.group_points(rows).items():
        for env_rows in by_env.values():
            row = env_rows[0]
            fixed = tuple(row.text(k) for k in FIXED_KNOBS)
            panel = (row.text(PANELS, schema.UNSET), row.runtime)
            cell = (row.text(ROWS), row.text(wait_knob(row.runtime).name, schema.UNSET))
            fig_data = figures.setdefault((workload, fixed), {"row": row, "panels": {}})
            fig_data["panels"].setdefault(panel, {})[cell] = results.point_medians(env_rows)
    written = []
    for (workload, fixed), fig_data in sorted(figures.items()):
        if sum(len(p) for p in fig_data["panels"].values()) < 2:
            continue
        for metric in HEATMAP_METRICS:
            path = heatmap_figure(plt, fig_data, metric, fixed, out_dir)
            if path:
                written.append(path)
    return written


def heatmap_figure(plt, fig_data, heatmap_metric, fixed, out_dir):
    column, title, bar_label = heatmap_metric
    metric = column.name  # the key of results.point_medians
    panels = fig_data["panels"]
    values = [m[metric] for p in panels.values() for m in p.values() if m[metric] is not None]
    if not values:
        return None
    vmin, vmax = min(values), max(values)
    vmax = vmax if vmax > vmin else vmin + 1
    policies = sorted({k[0] for k in panels}, key=sort_key)
    runtimes = [r for r in schema.RUNTIMES if any(k[1] == r for k in panels)]
    axes_x = {r: sorted({c[1] for k, p in panels.items() if k[1] == r for c in p}, key=sort_key)
              for r in runtimes}
    threads = sorted({c[0] for p in panels.values() for c in p}, key=sort_key)
    widths = [max(2, len(axes_x[r])) for r in runtimes]
    fig, axes = plt.subplots(len(policies), len(runtimes), squeeze=False, layout="constrained",
                             figsize=(2.4 + 0.95 * sum(widths),
                                      0.9 + len(policies) * (1.0 + 0.45 * len(threads))),
                             gridspec_kw={"width_ratios": widths})
    image = None
    for row_i, policy in enumerate(policies):
        for col_i, runtime in enumerate(runtimes):
            ax = axes[row_i][col_i]
            cells = panels.get((policy, runtime))
            if not cells:
                ax.set_visible(False)
                continue
            lowest = max(i for i, p in enumerate(policies) if (p, runtime) in panels)
            xs = axes_x[runtime]
            grid = [[cells[(t, x)][metric] if (t, x) in cells else None for x in xs]
                    for t in threads]
            image = ax.imshow([[float("nan") if v is None else v for v in r] for r in grid],
                              cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto")
            # Panels of a column share their x categories: label the lowest only.
            ax.set_xticks(range(len(xs)), ["default" if x == schema.UNSET else x for x in xs]
                          if row_i == lowest else [])
            ax.set_yticks(range(len(threads)), threads)
            if col_i == 0:
                ax.set_ylabel(ROWS)
            if row_i == lowest:
                ax.set_xlabel(wait_knob(runtime).heatmap_label)
            wait = f"{PANELS} " + ("unset" if policy == schema.UNSET else policy)
            ax.set_title(f"{runtime}, {wait}", fontsize=9)
            for y, cells_row in enumerate(grid):
                for x, value in enumerate(cells_row):
                    if value is None:
                        ax.text(x, y, "not run", ha="center", va="center", fontsize=7,
                                color="grey")
                    else:
                        bright = (value - vmin) / (vmax - vmin) > 0.6
                        ax.text(x, y, fmt.number(value), ha="center", va="center",
                                fontsize=8.5,
                                color="black" if bright else "white")
    row = fig_data["row"]
    # cuda_sync=auto is the default (train_step rows on cpu carry it too): no label.
    extra = ", ".join(f"{k}={v}" for k, v in zip(FIXED_KNOBS, fixed)
                      if v not in ("", schema.UNSET) and not (k == Row.cuda_sync.name and v == "auto"))
    label = results.workload_label(row)
    fig.suptitle(f"{title}: {label}{' (' + extra + ')' if extra else ''}",
                 fontsize=10)
    bar = fig.colorbar(image, ax=[a for a in axes.flat if a.get_visible()], shrink=0.9)
    bar.set_label(bar_label)
    name = f"heatmap_{metric}_{slug(label)}" + (f"_{slug(extra)}" if extra else "")
    return save_figure(plt, fig, os.path.join(out_dir, name + ".png"))


def numbered_path(out_dir, stem, start, per_figure):
    """stem.png for the first figure of a series, stem_2.png, ... after it."""
    suffix = "" if start == 0 else f"_{start // per_figure + 1}"
    return os.path.join(out_dir, f"{stem}{suffix}.png")


def pareto_front(points):
    """Points no other point beats on both step time and burn."""
    front = []
    for p in sorted(points, key=lambda p: (p[0], p[1])):
        if not front or p[1] < front[-1][1]:
            front.append(p)
    return front


def pareto(rows, plt, out_dir):
    workloads = []
    for workload, by_env in results.group_points(rows).items():
        points = []
        for env_rows in by_env.values():
            m = results.point_medians(env_rows)
            step, burn = m[Row.step_ms.name], m[Row.residual_cpu_ms.name]
            if step is not None and burn is not None:
                points.append((step, burn, env_rows[0]))
        if points:
            workloads.append((results.workload_label(points[0][2]), points))
    workloads.sort(key=lambda w: w[0])
    written = []
    for start in range(0, len(workloads), MAX_PANELS_PER_FIGURE):
        chunk = workloads[start:start + MAX_PANELS_PER_FIGURE]
        cols = min(2, len(chunk))
        nrows = (len(chunk) + cols - 1) // cols
        fig, axes = plt.subplots(nrows, cols, squeeze=False, figsize=(9.5 * cols, 4.2 * nrows))
        for ax, (label, points) in zip(axes.flat, chunk):
            pareto_panel(ax, label, points)
        for ax in list(axes.flat)[len(chunk):]:
            ax.set_visible(False)
        handles, labels = axes.flat[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=len(labels),
                   bbox_to_anchor=(0.5, -0.02 / nrows), frameon=False)
        fig.suptitle("Step time vs CPU burned after the step (median per setting; "
                     "lower left is better)", fontsize=11)
        fig.tight_layout(rect=(0, 0.05 / nrows, 1, 1))
        written.append(save_figure(
            plt, fig, numbered_path(out_dir, "pareto", start, MAX_PANELS_PER_FIGURE)))
    return written


def pareto_panel(ax, label, points):
    colors = {"gomp": "tab:blue", "llvm": "tab:orange"}
    for runtime, color in colors.items():
        xs = [p[0] for p in points if p[2].runtime == runtime]
        ys = [p[1] for p in points if p[2].runtime == runtime]
        ax.scatter(xs, ys, s=30, color=color, label=f"runtime {runtime}", zorder=3)
    front = pareto_front(points)
    ax.plot([p[0] for p in front], [p[1] for p in front], color="grey", lw=1, ls="--",
            zorder=2, label="Pareto front")
    marked = [(p, "launcher", "*", "red", 220) for p in points if p[2].preset == "launcher"]
    marked += [(p, "default (gomp, no env)", "s", "black", 90) for p in points
               if keys.is_default_env(p[2])]
    for p, name, marker, color, size in marked:
        ax.scatter([p[0]], [p[1]], marker=marker, s=size, facecolors="none" if marker == "s"
                   else color, edgecolors=color, linewidths=1.5, zorder=4, label=name)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x_span = max(max(xs) - min(xs), 0.05 * max(xs), 1e-9)
    y_top = max(max(ys), 1.0)
    if len(points) <= MAX_LABELLED_POINTS:
        # Numbers beside the markers, names in a key to the right: full names
        # next to the markers collide as soon as settings tie. Settings that
        # land on (nearly) the same spot share one label such as "3,4,5".
        ordered = sorted(points, key=lambda p: (p[0], p[1]))
        clusters = []
        for number, (x, y, row) in enumerate(ordered, 1):
            for c in clusters:
                if abs(c["x"] - x) < 0.04 * x_span and abs(c["y"] - y) < 0.04 * y_top:
                    c["numbers"].append(str(number))
                    break
            else:
                clusters.append({"x": x, "y": y, "numbers": [str(number)]})
        for c in clusters:
            ax.annotate(",".join(c["numbers"]), (c["x"], c["y"]), fontsize=7.5,
                        xytext=(7, 4), textcoords="offset points", color="dimgray")
        key = "\n".join(f"{n:>2} {short_label(row)}: {fmt.number(x)} ms, "
                        f"{fmt.number(y)} ms"
                        for n, (x, y, row) in enumerate(ordered, 1))
        ax.text(1.03, 1.0, "setting: step, burn\n" + key, transform=ax.transAxes, va="top",
                fontsize=7, family="monospace")
    ax.set_title(label, fontsize=9)
    ax.set_xlabel("step time (ms, median)")
    ax.set_ylabel("residual CPU after the step (ms, median)")
    ax.grid(alpha=0.3)
    ax.set_xlim(min(xs) - 0.3 * x_span, max(xs) + 0.6 * x_span)
    ax.set_ylim(-0.08 * y_top, 1.2 * y_top)


def short_label(row):
    """A row's setting with each knob in its short form (the table's label: T=2, bt=1, passive, aff)."""
    return knobs.shorten(keys.env_label(row))


def lines_by_workload(entries, plt, out_dir, name, x, panels, xlabel, label_of, suptitle, size):
    """One row of panels per workload, one panel per (metric, y label) of
    panels: the metric against the key x, one line per setting; pages of
    MAX_OVERSUB_WORKLOADS rows, saved as <name>.png, <name>_2.png, ... A y
    label may name {unit}: the entries' unit. size: (width, height of a row)."""
    by_workload = {}
    for e in entries:
        by_workload.setdefault(e["workload"], {}).setdefault(e["setting"], []).append(e)
    workloads = sorted(by_workload)
    written = []
    for start in range(0, len(workloads), MAX_OVERSUB_WORKLOADS):
        chunk = workloads[start:start + MAX_OVERSUB_WORKLOADS]
        fig, axes = plt.subplots(len(chunk), len(panels), squeeze=False,
                                 figsize=(size[0], 0.6 + size[1] * len(chunk)))
        for row_axes, workload in zip(axes, chunk):
            settings = by_workload[workload]
            xs = sorted({e[x] for lines in settings.values() for e in lines})
            for _, lines in sorted(settings.items()):
                lines.sort(key=lambda e: e[x])
                label = label_of(lines)
                for ax, (metric, _) in zip(row_axes, panels):
                    pts = [(e[x], e[metric]) for e in lines if e[metric] is not None]
                    if pts:
                        ax.plot(*zip(*pts), marker="o", label=label)
            unit = next(iter(settings.values()))[0].get("unit", "")
            for ax, (_, ylabel) in zip(row_axes, panels):
                ax.set_xlabel(xlabel)
                ax.set_ylabel(ylabel.format(unit=unit), fontsize=8)
                ax.set_xticks(xs)
                ax.set_ylim(bottom=0)
                ax.grid(alpha=0.3)
                ax.set_title(workload, fontsize=8)
            row_axes[-1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.suptitle(suptitle, fontsize=10)
        fig.tight_layout()
        written.append(save_figure(plt, fig, numbered_path(out_dir, name, start, MAX_OVERSUB_WORKLOADS)))
    return written


def oversubscription(rows, plt, out_dir):
    """Per workload: throughput summed over the copies, and mean step time
    per copy, against the number of copies; one line per setting. Medians
    over runs (results.oversubscription)."""
    return lines_by_workload(
        results.oversubscription(rows), plt, out_dir, "oversubscription", "processes",
        (("throughput", "aggregate throughput ({unit}, all copies)"),
         ("step_ms", "step time per process (ms, mean of copies)")),
        "processes (copies running at once)", lambda lines: short_label(lines[0]["row"].copy(processes="1")),
        "Oversubscription: independent copies of one training at once (median over runs)", (13, 3.6))


WORLD_PANELS = (("samples_per_s", "world samples/s"), ("step_ms", "step time (ms, slowest rank)"),
                ("allreduce_ms", "all-reduce (ms, mean of ranks)"), ("cpu_ms", "CPU per step (ms, all ranks)"))


def world_size(rows, plt, out_dir):
    """Per workload: the world's samples/s, step, all-reduce and CPU per step
    against world size; one line per setting. Medians over runs
    (results.world_scaling)."""
    def label_of(lines):
        threads = "/".join(dict.fromkeys(e["threads"] for e in lines))
        return short_label(lines[0]["row"].copy(world_size="", processes="1", OMP_NUM_THREADS=threads))
    return lines_by_workload(
        results.world_scaling(rows), plt, out_dir, "world_size", "world_size", WORLD_PANELS,
        "world size (ranks on this host)", label_of,
        "Data-parallel worlds: gloo all-reduce, ranks on one host (median over runs)", (17, 3.4))


def host_entries(rows):
    """A host tune's (--copies) race runs as the figure's points: per plan
    and copy count, the median host throughput and per-copy figure (the
    plans dropped as duplicates left out)."""
    from ..analysis.verdicts import duplicates
    groups, kinds = {}, {}
    recs = run_records(rows, "", of_run)
    dropped = duplicates(recs)  # raced once only: no line of their own
    for r in recs:
        if r.phase == "race" and r.status == "ok" and r.time_kind in HOST_KINDS and r.time is not None \
                and r.name not in dropped.get(r.workload, {}):
            groups.setdefault((r.command, r.name, r.copies), []).append(r)
            kinds[r.command] = (r.time_kind, r.per_copy_higher)
    out = []
    for (command, name, copies), recs in groups.items():
        kind, higher = kinds[command]
        per = [r.per_copy for r in recs if r.per_copy is not None]
        out.append({"workload": command if len(command) <= 70 else command[:67] + "...", "setting": name,
                    "copies": copies,
                    "throughput": stats.median([r.time for r in recs]), "per_copy": stats.median(per) if per else None,
                    "unit": "copies/s" if kind == "host" else "your figure summed",
                    "per_unit": ("your figure" if higher else "your figure (lower is better)") if kind != "host"
                    else "wall time, ms"})
    return out


def host_plans(rows, plt, out_dir):
    """A host tune of several copy counts: the host's throughput and each
    copy's own figure against the copies, one line per plan (medians of
    the race's runs)."""
    entries = host_entries(rows)
    if len({e["copies"] for e in entries}) < 2:
        return []
    per_unit = entries[0]["per_unit"]
    return lines_by_workload(
        entries, plt, out_dir, "host", "copies",
        (("throughput", "host throughput ({unit}, all copies)"), ("per_copy", f"per copy: {per_unit}")),
        "copies started together", lambda lines: lines[0]["setting"],
        "Host plans: N copies of your command at once (median over the race's runs)", (12, 3.8))


def slot_sizes(rows, plt, out_dir):
    """slots.png: a tune of several slot sizes (tune --cpus 1,2; its <stem>.csv): throughput and
    CPUs busy against the slot size, a line for each size's plan and one for plain (medians of
    the fresh runs, each in a slot of its size: analysis/slotsizes.py); none otherwise."""
    points = slotsizes.figure_points(rows)
    if len({e["cpus"] for e in points}) < 2:
        return []
    return lines_by_workload(
        points, plt, out_dir, "slots", "cpus",
        (("throughput", "throughput ({unit}, median)"), ("cpus_busy", "CPUs busy (CPU / wall time, median)")),
        "slot size (CPUs of quota)", lambda ls: ls[0]["setting"],
        "Slot sizes: each size's plan and plain, fresh runs each in a slot of its size", (12, 3.8))


def timelines(rows, csv_dir, plt, out_dir, max_lines):
    written = []
    for workload, by_env in results.group_points(rows).items():
        entries = []
        for env_rows in by_env.values():
            with_file = sorted((r for r in env_rows if r.timeline_file),
                               key=lambda r: (r.repetition or 0, r.proc_index))
            if with_file:
                path = os.path.join(csv_dir, with_file[0].timeline_file)
                if os.path.exists(path):
                    entries.append((keys.env_label(with_file[0]), path))
        if not entries:
            continue
        label = results.workload_label(next(iter(by_env.values()))[0])
        entries.sort()
        path = os.path.join(out_dir, f"timeline_{slug(label)}.png")
        written.append(timeline_figure(plt, entries[:max_lines],
                                       f"Burn around one step: {label}", path))
    return written


def tune_settings(rows, plt, out_dir):
    """Runs of a command under the probe (bench = command): one panel per
    command, a median marker per setting (the tune point, or the runtime and
    environment of a `run` row) over the dots of its ok runs."""
    commands = {}
    for row in rows:
        if row.ok and row.bench == "command" and row.phase == "race":
            setting = (row.study or keys.env_label(row)) + (f" x{row.processes}" if row.host_run else "")
            commands.setdefault(row.command, {}).setdefault(setting, []).append(row)
    if not commands:
        return []
    fig, axes = plt.subplots(len(commands), 1, squeeze=False, figsize=(10, 4.5 * len(commands)))
    for ax, (command, settings) in zip(axes.flat, sorted(commands.items())):
        all_rows = [r for rs in settings.values() for r in rs]
        figure = Row.metric if all(r.metric is not None for r in all_rows) else Row.wall_ms
        for number, (setting, rs) in enumerate(sorted(settings.items()), 1):
            xs = [figure(r) for r in rs]
            ys = [r.cpu_ms for r in rs]
            dots = ax.scatter(xs, ys, s=12, alpha=0.45)
            mx, my = stats.median(xs), stats.median(ys)
            ax.scatter([mx], [my], s=70, marker="D", color=dots.get_facecolor()[0], edgecolors="black",
                       label=f"{setting}: {fmt.number(mx)}, {fmt.number(my)} ms ({len(rs)} runs)", zorder=3)
        ax.set_xlabel("your figure (--metric)" if figure is Row.metric else "wall time of a run (ms)")
        ax.set_ylabel("CPU of a run (ms)")
        ax.set_title(command[:110], fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.suptitle("Time vs CPU per setting (diamonds: medians; dots: runs)", fontsize=10)
    fig.tight_layout()
    return [save_figure(plt, fig, os.path.join(out_dir, "tune.png"))]


def make_all(rows, csv_dir, out_dir, max_timelines=12):
    """Every plot of a results file's rows; returns the paths written."""
    plt = pyplot()
    os.makedirs(out_dir, exist_ok=True)
    try:
        worlds = world_rows(rows)
        return (heatmaps(worlds, plt, out_dir) + pareto(worlds, plt, out_dir) + oversubscription(rows, plt, out_dir)
                + world_size(rows, plt, out_dir) + timelines(rows, csv_dir, plt, out_dir, max_timelines))
    except (OSError, KeyError, ValueError) as e:
        raise ThreadburnError(f"plot: {e}") from None


