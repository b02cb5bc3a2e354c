#!/usr/bin/python3
"""Plots a threadburn_monitor CSV: per-thread CPU (cores) over time.

Like seed 000's cpu_usage.log, but one band per thread: the top-N threads by
total CPU, the rest summed as "others". With --marks LOG (seed 000's ckpt.log
format, "YYYY-MM-DD HH:MM:SS,mmm - name - event", local time) the events are
drawn as vertical lines, so the burn after update_end is visible at a glance.

usage: plot_monitor.py CSV [--out PNG] [--marks LOG] [--events a,b] [--top N]
                           [--style stacked|lines] [--bin_ms MS] [--xlim A,B]
"""
import argparse
import csv
import datetime
import math
import os
import re
import sys

PROG = "plot_monitor.py"
PROCESS_TID = "0"
MIN_AUTO_BIN_MS = 10
LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) - (.+?) - (.+?)\s*$")


def die(msg):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def read_csv(path):
    """Returns (process rows, {tid: thread rows}, {tid: latest name})."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            missing = {"unix_ms", "t_ms", "dt_ms", "tid", "name", "cpu_ms"} - set(reader.fieldnames or [])
            if missing:
                die(f"{path}: not a threadburn_monitor CSV (missing columns: {', '.join(sorted(missing))})")
            process, threads, names = [], {}, {}
            for r in reader:
                row = (float(r["t_ms"]), float(r["dt_ms"]), float(r["cpu_ms"]), int(r["unix_ms"]))
                if r["tid"] == PROCESS_TID:
                    process.append(row)
                else:
                    threads.setdefault(r["tid"], []).append(row)
                    names[r["tid"]] = r["name"]
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    except (ValueError, TypeError) as e:
        die(f"{path}: malformed row ({e})")
    if not process:
        die(f"{path}: no samples")
    return process, threads, names


def read_marks(path, events):
    """[(unix_ms, event)]; the timestamps are local time, as Python logging writes them."""
    marks = []
    try:
        with open(path) as f:
            for line in f:
                m = LOG_LINE.match(line)
                if not m or (events and m.group(4) not in events):
                    continue
                t = datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
                marks.append((int(t) * 1000 + int(m.group(2)), m.group(4)))
    except OSError as e:
        die(f"cannot read {path}: {e.strerror}")
    return marks


def nice_bin(raw_ms):
    """The smallest of 1, 2, 5 x 10^k ms that is >= raw_ms."""
    for k in range(0, 7):
        for m in (1, 2, 5):
            if m * 10 ** k >= raw_ms:
                return float(m * 10 ** k)
    return 1e7


def binned(rows, bin_ms, nbins):
    """Cores per bin. Each interval (t - dt, t] is spread over the bins it
    overlaps: a starved monitor can take one 30 ms interval, whose CPU does
    not all belong to the bin holding its end."""
    out = [0.0] * nbins
    for t_ms, dt_ms, cpu_ms, _u in rows:
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


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="threadburn_monitor --out file")
    ap.add_argument("--out", help="PNG to write (default: CSV name with .png)")
    ap.add_argument("--marks", help="log with event lines (seed 000's ckpt.log format)")
    ap.add_argument("--events", default="", help="comma list of events to draw (default: all)")
    ap.add_argument("--top", type=int, default=6, help="threads drawn on their own (default 6)")
    ap.add_argument("--style", choices=("stacked", "lines"), default="stacked")
    ap.add_argument("--bin_ms", type=float, default=0, help="time bin (default: ~1500 bins, >= 10 ms)")
    ap.add_argument("--xlim", default="", help="A,B: seconds since monitor start to show")
    ap.add_argument("--title", default="")
    a = ap.parse_args()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        die("matplotlib is not installed (Debian: apt install python3-matplotlib; run with /usr/bin/python3)")

    process, threads, names = read_csv(a.csv)
    xlim = None
    if a.xlim:
        try:
            xlim = tuple(float(v) for v in a.xlim.split(","))
            assert len(xlim) == 2 and xlim[0] < xlim[1]
        except (ValueError, AssertionError):
            die(f"--xlim: expected A,B in seconds with A < B, got '{a.xlim}'")
    span_ms = process[-1][0]
    period_ms = sorted(r[1] for r in process)[len(process) // 2]
    shown_ms = (xlim[1] - xlim[0]) * 1000 if xlim else span_ms
    # >= 10 ms by default: schedstat advances at scheduler ticks (4 ms at HZ=250),
    # so finer bins show tick lumps (1 thread at "4 cores" for 1 ms), not rates.
    bin_ms = a.bin_ms if a.bin_ms > 0 else nice_bin(max(period_ms, shown_ms / 1500, MIN_AUTO_BIN_MS))
    nbins = max(1, int(math.ceil(span_ms / bin_ms)))
    x = [i * bin_ms / 1000 for i in range(nbins)]

    totals = sorted(((sum(r[2] for r in rows), tid) for tid, rows in threads.items()), reverse=True)
    top = [tid for cpu, tid in totals[: a.top] if cpu > 0]
    rest = [tid for cpu, tid in totals if tid not in top and cpu > 0]
    series, labels = [], []
    for tid in top:
        series.append(binned(threads[tid], bin_ms, nbins))
        labels.append(f"{names[tid]} ({tid}): {sum(r[2] for r in threads[tid]):.0f} ms")
    if rest:
        rows = [r for tid in rest for r in threads[tid]]
        series.append(binned(rows, bin_ms, nbins))
        labels.append(f"{len(rest)} others: {sum(r[2] for r in rows):.0f} ms")

    total = binned(process, bin_ms, nbins)
    fig, ax = plt.subplots(figsize=(12, 5), dpi=110)
    colors = plt.get_cmap("tab10").colors
    if a.style == "stacked" and series:
        ax.stackplot(x, *series, labels=labels, step="post", colors=colors[: len(series)], alpha=0.85)
    else:
        for i, (s, label) in enumerate(zip(series, labels)):
            ax.step(x, s, where="post", label=label, color=colors[i % len(colors)], linewidth=1)
        ax.step(x, total, where="post", color="black", linewidth=0.8,
                label="whole process")

    if a.marks:
        unix0 = process[0][3] - process[0][0]  # unix ms at t_ms == 0 (+-1 ms)
        events = [e for e in a.events.split(",") if e]
        styles = {}
        for unix_ms, event in read_marks(a.marks, events):
            t = (unix_ms - unix0) / 1000
            lo, hi = xlim if xlim else (0, span_ms / 1000)
            if lo - 0.001 <= t <= hi + 0.001:
                if event not in styles:
                    styles[event] = (["crimson", "navy", "darkorange", "green", "purple", "gray"][len(styles) % 6],
                                     ["--", ":", "-.", (0, (5, 1))][len(styles) % 4])
                c, ls = styles[event]
                ax.axvline(t, color=c, linestyle=ls, linewidth=1.2,
                           label=f"mark: {event}" if not any(l.get_label() == f"mark: {event}" for l in ax.lines)
                           else "_nolegend_")

    ax.set_xlabel("time since monitor start (s)")
    ax.set_ylabel("CPU (cores; 1.0 = one core fully busy)")
    ax.set_xlim(*(xlim if xlim else (0, span_ms / 1000)))
    # Scale to what is shown: bins outside --xlim (start-up) can be taller.
    lo, hi = xlim if xlim else (0, span_ms / 1000)
    shown = [i for i, t in enumerate(x) if lo - bin_ms / 1000 <= t <= hi]
    ax.set_ylim(0, 1.08 * max([1.0] + [total[i] for i in shown]))  # the process: the top of the stack
    ax.grid(True, alpha=0.3)
    title = a.title or f"per-thread CPU of {os.path.basename(a.csv)}"
    ax.set_title(f"{title}\n(bins of {bin_ms:g} ms; sample period {period_ms:g} ms; legend: name (tid): total CPU)",
                 fontsize=10)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    fig.tight_layout()
    out = a.out or os.path.splitext(a.csv)[0] + ".png"
    try:
        fig.savefig(out)
    except OSError as e:
        die(f"cannot write {out}: {e.strerror}")
    print(f"{PROG}: wrote {out} ({len(threads)} threads, {span_ms / 1000:.2f} s, bins of {bin_ms:g} ms)")


if __name__ == "__main__":
    main()
