"""Drawing basics (matplotlib on the Agg backend, saving a figure) and the
one timeline figure (timeline_figure) that `threadburn plot`, `run` and
`monitor-plot` draw from files read by timeline.py. A library: figures.py
builds every other plot on it."""
import math

from ..lib import timeline
from ..lib.errors import ThreadburnError

# Timelines also get a moving mean over this window: the CPU time of a thread
# running on another CPU may only advance at scheduler ticks (4 ms at HZ=250),
# so single sub-tick samples alias into spikes of several "cores".
SMOOTH_MS = 4.0
# The shortest automatic bin of a per-thread timeline (draw_threads).
MIN_AUTO_BIN_MS = 10


def pyplot():
    """matplotlib's pyplot on the Agg backend; ThreadburnError without it."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ThreadburnError("matplotlib is missing for this interpreter; threadburn runs Debian's "
                              "/usr/bin/python3 (apt install python3-matplotlib)") from None
    return plt


def save_figure(plt, fig, path):
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def moving_mean(points, window_ms):
    """Centred mean of the per-sample rates over about window_ms (count
    weighted: the sampler's period is regular)."""
    if len(points) < 2:
        return list(points)
    ts = [t for t, _ in points]
    # The median of the len(ts) - 1 intervals (a short run has 2 samples, 1 interval).
    period = sorted(b - a for a, b in zip(ts, ts[1:]))[(len(ts) - 1) // 2] or 1.0
    half = max(0, int(round(window_ms / period / 2)))
    prefix = [0.0]
    for _, c in points:
        prefix.append(prefix[-1] + c)
    out = []
    for i, t in enumerate(ts):
        lo, hi = max(0, i - half), min(len(ts), i + half + 1)
        out.append((t, (prefix[hi] - prefix[lo]) / (hi - lo)))
    return out


def points(tl, name):
    return list(zip(*tl[name])) if name in tl else []


def last_busy(tl, name="others"):
    """The last time after the origin at which the series burned, by the
    timeline's own threshold (the one behind tail_ms)."""
    threshold = tl.burn_threshold()
    return max((t for t, c in points(tl, name) if c > threshold and t > 0), default=0.0)


def timeline_limits(loaded):
    """Around a step: show the step and the burn after it, not seconds of idle
    gap: the window ends after the last series that goes idle; a series busy
    to the end of the gap just runs off the right edge (its legend entry says
    so). Otherwise the whole recording."""
    end = max(t for tl in loaded for ts, _ in tl.values() for t in ts)
    if not any(tl.marks() for tl in loaded):
        return min(ts[0] for tl in loaded for ts, _ in tl.values() if ts), end
    start = min(tl.marks().get("step_start", 0.0) for tl in loaded)
    stops = [last_busy(tl) for tl in loaded if "others" in tl]
    idle_stops = [t for t in stops if t < 0.95 * end]
    stop = max(idle_stops) if idle_stops else end
    span = max(stop - start, 20.0)
    return start - 0.15 * span, min(end, stop + 0.3 * span)


def nice_bin(raw_ms):
    """The smallest of 1, 2, 5 x 10^k ms that is >= raw_ms."""
    for k in range(0, 7):
        for m in (1, 2, 5):
            if m * 10 ** k >= raw_ms:
                return float(m * 10 ** k)
    return 1e7


def binned(rows, bin_ms, nbins):
    """Cores per bin of rows [(t_ms, dt_ms, cpu_ms)]. Each interval (t - dt, t]
    is spread over the bins it overlaps: a starved monitor can take one 30 ms
    interval, whose CPU does not all belong to the bin holding its end."""
    out = [0.0] * nbins
    for t_ms, dt_ms, cpu_ms in rows:
        start = max(0.0, t_ms - dt_ms)
        last = min(nbins - 1, max(0, int(math.ceil(t_ms / bin_ms - 1e-9)) - 1))
        first = min(last, int(start / bin_ms + 1e-9))
        for i in range(first, last + 1):
            if t_ms > start:
                share = max(0.0, min(t_ms, (i + 1) * bin_ms) - max(start, i * bin_ms)) / (t_ms - start)
            else:
                share = 1.0 if i == last else 0.0
            out[i] += cpu_ms * share / bin_ms
    return out


def interval_rows(tl, name, clock):
    """[(t_ms, dt_ms, cpu_ms)] of one series; dt from the sample clock (the
    times of the process series, every sample)."""
    out, j = [], 0
    for t, c in points(tl, name):
        while j + 1 < len(clock) and clock[j + 1] <= t:
            j += 1
        dt = clock[j] - clock[j - 1] if j > 0 else (clock[0] if clock else 0.0)
        out.append((t, dt, c * dt))
    return out


def draw_threads(ax, plt, tl, top, style, bin_ms, xlim):
    """The per-thread series binned: the top `top` by CPU on their own, the
    rest summed; the whole process as the outline. Returns (bin_ms, ymax)."""
    clock = tl["process"][0] if "process" in tl else sorted({t for ts, _ in tl.values() for t in ts})
    span_ms = clock[-1]
    period_ms = sorted(b - a for a, b in zip([0.0] + clock, clock))[len(clock) // 2]
    shown_ms = (xlim[1] - xlim[0]) * 1000 if xlim else span_ms
    # >= 10 ms by default: schedstat advances at scheduler ticks (4 ms at HZ=250),
    # so finer bins show tick lumps (1 thread at "4 cores" for 1 ms), not rates.
    bin_ms = bin_ms if bin_ms > 0 else nice_bin(max(period_ms, shown_ms / 1500, MIN_AUTO_BIN_MS))
    nbins = max(1, int(math.ceil(span_ms / bin_ms)))
    x = [i * bin_ms / 1000 for i in range(nbins)]
    rows = {name: interval_rows(tl, name, clock) for name in tl.threads()}
    totals = sorted(((sum(r[2] for r in rs), name) for name, rs in rows.items()), reverse=True)
    chosen = [name for cpu, name in totals[:top] if cpu > 0]
    rest = [name for cpu, name in totals if name not in chosen and cpu > 0]
    series, labels = [], []
    for name in chosen:
        tid, label = tl.threads()[name]
        series.append(binned(rows[name], bin_ms, nbins))
        labels.append(f"{label} ({tid}): {sum(r[2] for r in rows[name]):.0f} ms")
    if rest:
        merged = [r for name in rest for r in rows[name]]
        series.append(binned(merged, bin_ms, nbins))
        labels.append(f"{len(rest)} others: {sum(r[2] for r in merged):.0f} ms")
    total = binned(interval_rows(tl, "process", clock), bin_ms, nbins) if "process" in tl else [
        sum(v) for v in zip(*series)] if series else [0.0] * nbins
    colors = plt.get_cmap("tab10").colors
    if style == "stacked" and series:
        ax.stackplot(x, *series, labels=labels, step="post", colors=colors[: len(series)], alpha=0.85)
    else:
        for i, (s, label) in enumerate(zip(series, labels)):
            ax.step(x, s, where="post", label=label, color=colors[i % len(colors)], linewidth=1)
        ax.step(x, total, where="post", color="black", linewidth=0.8, label="whole process")
    lo, hi = xlim if xlim else (0, span_ms / 1000)
    shown = [i for i, t in enumerate(x) if lo - bin_ms / 1000 <= t <= hi]
    return bin_ms, period_ms, 1.08 * max([1.0] + [total[i] for i in shown])


def draw_classes(ax, tl, scale):
    """The series by class of a probe's timeline (a whole command)."""
    if "in_region" in tl:
        t, c = tl["in_region"]
        ax.fill_between([v / scale for v in t], c, step="pre", color="0.85", label="a region running (share)")
    if "class:omp" in tl:
        t, c = tl["class:omp"]
        ax.step([v / scale for v in t], c, where="pre", label="OpenMP workers", linewidth=1)
    if "main" in tl:
        t, c = tl["main"]
        ax.step([v / scale for v in t], c, where="pre", label="main thread", linewidth=0.8, alpha=0.7)
    if "others" in tl and "class:omp" in tl:
        t, c = tl["others"]
        omp = dict(zip(*tl["class:omp"]))
        ax.step([v / scale for v in t], [x - omp.get(v, 0.0) for v, x in zip(t, c)], where="pre",
                label="other threads", linewidth=0.8, alpha=0.7)
    if "children" in tl and any(c > 0 for c in tl["children"][1]):
        t, c = tl["children"]
        ax.step([v / scale for v in t], c, where="pre", label="worker processes (read every 50 ms)", linewidth=0.8)


def draw_step(ax, tl, smooth):
    """A benchmark's last step: 'others' filled with its moving mean, the
    main thread dotted, the step shaded between its marks."""
    marks = tl.marks()
    start, end = marks.get("step_start"), marks.get("step_end")
    if start is not None and end is not None:
        ax.axvspan(start, end, color="gold", alpha=0.35, lw=0, label="step")
    for name, t in marks.items():
        ax.axvline(t, color="black", lw=0.7, ls="--" if name == "step_start" else "-")
    if "others" in tl:
        ts, cs = tl["others"]
        ax.fill_between(ts, cs, step="post", color="tab:red", alpha=0.35, lw=0,
                        label="other threads (OpenMP workers, loaders, ...), per sample")
        mts, mcs = zip(*smooth["others"])
        ax.plot(mts, mcs, color="darkred", lw=1.3, label=f"other threads, {SMOOTH_MS:g} ms moving mean")
        if last_busy(tl) >= 0.95 * ts[-1]:
            ax.text(0.99, 0.85, "busy to the gap's end", transform=ax.transAxes, ha="right", fontsize=8,
                    color="tab:red")
    if "main" in tl:
        ts, cs = tl["main"]
        ax.step(ts, cs, where="post", lw=1, color="black", ls=":", label="main thread")


def timeline_figure(plt, entries, title, path, threads=0, style="stacked", bin_ms=0, xlim=None, events=()):
    """The one timeline figure: entries [(label, timeline file)], one panel
    each, sharing the time axis. What a panel shows follows its series
    (timeline.py): around a step (marks step_start/step_end; ms since the
    step ended) the other threads per sample and smoothed, the main thread,
    the step shaded; a whole command (probe: in_region, class:omp, main,
    others, children; seconds); with threads > 0, the per-thread series
    binned, the top `threads` by CPU on their own (the monitor: its process
    series the outline). xlim: (a, b) in the panel's unit; events: [(t_ms,
    name)] drawn as vertical lines."""
    loaded = [(timeline.read(p), label) for label, p in entries]
    stepwise = all(tl.marks() for tl, _ in loaded)
    scale = 1.0 if stepwise else 1000.0
    fig, axes = plt.subplots(len(loaded), 1, sharex=True, squeeze=False,
                             figsize=(9, 1.2 + 1.5 * len(loaded)) if stepwise else (12, 0.5 + 4.5 * len(loaded)),
                             dpi=None if stepwise else 110)
    smooth = [{k: moving_mean(points(tl, k), SMOOTH_MS) for k in ("others", "main") if k in tl}
              for tl, _ in loaded]
    # Scale to the smoothed curves; raw aliasing spikes may run off the top.
    top = max([c for sm in smooth for pts in sm.values() for _, c in pts] + [0.8]) * 1.25
    raw_top = max([c for tl, _ in loaded for k, (_, cs) in tl.items() if k not in ("in_region",) for c in cs]
                  + [0.0])
    notes = []
    for ax, (tl, label), sm in zip(axes[:, 0], loaded, smooth):
        if threads > 0 and tl.threads():
            used_bin, period, ymax = draw_threads(ax, plt, tl, threads, style, bin_ms, xlim)
            ax.set_ylim(0, ymax)
            notes.append(f"bins of {used_bin:g} ms; sample period {period:g} ms; legend: name (tid): total CPU")
        elif stepwise:
            draw_step(ax, tl, sm)
            ax.set_ylim(0, top)
        else:
            draw_classes(ax, tl, scale)
        styles = {}
        for t_ms, event in events:
            if event not in styles:
                styles[event] = (["crimson", "navy", "darkorange", "green", "purple", "gray"][len(styles) % 6],
                                 ["--", ":", "-.", (0, (5, 1))][len(styles) % 4])
                ax.axvline(t_ms / scale, color=styles[event][0], linestyle=styles[event][1], linewidth=1.2,
                           label=f"mark: {event}")
            else:
                ax.axvline(t_ms / scale, color=styles[event][0], linestyle=styles[event][1], linewidth=1.2)
        ax.set_ylabel("cores" if stepwise else "CPU (cores; 1.0 = one core fully busy)")
        ax.set_title(label, fontsize=8.5, loc="left")
        ax.grid(alpha=0.3)
    if stepwise:
        axes[-1, 0].set_xlim(*timeline_limits([tl for tl, _ in loaded]))
        clipped = f"; per-sample spikes up to {raw_top:.3g} cores clipped" if raw_top > top else ""
        axes[-1, 0].set_xlabel(f"time since the step ended (ms); samples at the sampler's resolution{clipped}")
        height = fig.get_figheight()  # keep ~0.5 inch on top for the title and legend
        handles, labels = axes[0, 0].get_legend_handles_labels()
        fig.tight_layout(rect=(0, 0, 1, 1 - 0.6 / height))
        fig.suptitle(title, fontsize=10, y=1 - 0.05 / height, va="top")
        fig.legend(handles, labels, loc="upper center", ncol=2, fontsize=8, frameon=False,
                   bbox_to_anchor=(0.5, 1 - 0.22 / height))
    else:
        lo, hi = timeline_limits([tl for tl, _ in loaded])
        axes[-1, 0].set_xlim(*(xlim if xlim else (min(0.0, lo) / scale, hi / scale)))
        origin = loaded[0][0].meta.get("origin", "")
        axes[-1, 0].set_xlabel({"monitor_start": "time since monitor start (s)"}.get(
            origin, "time since the program started (s)"))
        fig.suptitle(title + (f"\n({notes[0]})" if notes else ""), fontsize=9)
        for ax in axes[:, 0]:
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
        fig.tight_layout()
    return save_figure(plt, fig, path)
