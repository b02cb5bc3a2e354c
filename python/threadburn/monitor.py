"""threadburn monitor / monitor-plot: watch another process's threads.

`threadburn monitor` runs the threadburn_monitor program (every flag passes
through: --pid N to attach, or -- CMD ARGS to launch; see its --help and
docs/monitor.md). `threadburn monitor-plot CSV` draws a recording: per-thread
CPU (cores) over time, one band per thread (the top N by CPU, the rest summed
as "others"). With --marks LOG (lines "YYYY-MM-DD HH:MM:SS,mmm - name - event",
local time, as Python's logging writes them) the events are drawn as vertical
lines, so the burn after, say, update_end is visible at a glance; the log is
parsed by the monitor program itself (--print-marks), the one parser of it.
"""
import argparse
import csv
import io
import math
import os
import subprocess

from . import paths
from .errors import ThreadburnError
from .figures import pyplot

PROCESS_TID = "0"
MIN_AUTO_BIN_MS = 10


def add_parsers(sub):
    sub.add_parser("monitor", help="record the per-thread CPU of another process (--pid N, or -- CMD ARGS); "
                   "flags: threadburn monitor --help", add_help=False)
    q = sub.add_parser("monitor-plot", help="plot a monitor recording (per-thread CPU over time)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    q.add_argument("csv", help="threadburn monitor --out file")
    q.add_argument("--out", help="PNG to write (default: CSV name with .png)")
    q.add_argument("--marks", help="log with event lines (see above)")
    q.add_argument("--events", default="", help="comma list of events to draw (default: all)")
    q.add_argument("--top", type=int, default=6, help="threads drawn on their own (default 6)")
    q.add_argument("--style", choices=("stacked", "lines"), default="stacked")
    q.add_argument("--bin_ms", type=float, default=0, help="time bin (default: ~1500 bins, >= 10 ms)")
    q.add_argument("--xlim", default="", help="A,B: seconds since monitor start to show")
    q.add_argument("--title", default="")
    q.add_argument("--build-dir", help="build holding threadburn_monitor (to parse --marks)")
    q.set_defaults(run=plot)


def record(argv, build_dir=None):
    """The C++ monitor with the user's flags, untouched; its exit code is ours.
    (cli.py hands the arguments over before parsing: they are the program's.)"""
    program = paths.find_program("threadburn_monitor", build_dir)
    os.execv(program, [program] + list(argv))


def die(msg):
    raise ThreadburnError(msg)


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


def read_marks(path, events, build_dir=None):
    """[(unix_ms, event)] of the log, as the monitor program parses it."""
    program = paths.find_program("threadburn_monitor", build_dir)
    p = subprocess.run([program, f"--marks={path}", "--print-marks"], capture_output=True, text=True)
    if p.returncode != 0:
        die(p.stderr.strip().splitlines()[-1].split(": error: ", 1)[-1] if p.stderr.strip() else f"--marks {path}")
    return [(int(r["unix_ms"]), r["event"]) for r in csv.DictReader(io.StringIO(p.stdout))
            if not events or r["event"] in events]


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


def plot(a):
    plt = pyplot()
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
        for unix_ms, event in read_marks(a.marks, events, a.build_dir):
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
    print(f"monitor-plot: wrote {out} ({len(threads)} threads, {span_ms / 1000:.2f} s, bins of {bin_ms:g} ms)")
    return 0
