"""threadburn monitor / monitor-plot: watch another process's threads.

`threadburn monitor` runs the threadburn_monitor program (every flag passes
through: --pid N to attach, or -- CMD ARGS to launch; --mode exact|proc|auto;
see its --help and docs/monitor.md). `threadburn monitor-plot CSV` draws a recording: per-thread
CPU (cores) over time, one band per thread (the top N by CPU, the rest summed
as "others"). With --marks LOG (lines "YYYY-MM-DD HH:MM:SS,mmm - name - event",
local time, as Python's logging writes them) the events are drawn as vertical
lines, so the burn after, say, update_end is visible at a glance; the log is
parsed by the monitor program itself (--print_marks), the one parser of it.
"""
import argparse
import csv
import io
import os
import subprocess

from ..export import figures
from ..lib import paths, timeline
from ..lib.errors import ThreadburnError


def add_parsers(sub):
    sub.add_parser("monitor", help="record the per-thread CPU, run-queue waits and who held the CPU of another "
                   "process (--pid N, or -- CMD ARGS); flags: threadburn monitor --help", add_help=False)
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


def read_marks(path, events, build_dir=None):
    """[(unix_ms, event)] of the log, as the monitor program parses it."""
    program = paths.find_program("threadburn_monitor", build_dir)
    p = subprocess.run([program, f"--marks={path}", "--print_marks"], capture_output=True, text=True)
    if p.returncode != 0:
        die(p.stderr.strip().splitlines()[-1].split(": error: ", 1)[-1] if p.stderr.strip() else f"--marks {path}")
    return [(int(r["unix_ms"]), r["event"]) for r in csv.DictReader(io.StringIO(p.stdout))
            if not events or r["event"] in events]


def plot(a):
    plt = figures.pyplot()
    tl = timeline.read(a.csv)
    if "process" not in tl:
        die(f"{a.csv}: not a threadburn_monitor recording (no process series)")
    xlim = None
    if a.xlim:
        try:
            xlim = tuple(float(v) for v in a.xlim.split(","))
            assert len(xlim) == 2 and xlim[0] < xlim[1]
        except (ValueError, AssertionError):
            die(f"--xlim: expected A,B in seconds with A < B, got '{a.xlim}'")
    events = []
    if a.marks:
        unix0 = float(tl.meta.get("t0_unix_ms", 0))  # unix ms at t_ms == 0
        span_ms = tl["process"][0][-1]
        lo, hi = xlim if xlim else (0, span_ms / 1000)
        for unix_ms, event in read_marks(a.marks, [e for e in a.events.split(",") if e], a.build_dir):
            if lo - 0.001 <= (unix_ms - unix0) / 1000 <= hi + 0.001:
                events.append((unix_ms - unix0, event))
    out = a.out or os.path.splitext(a.csv)[0] + ".png"
    # The recording says how it was made: bins of the scheduler's intervals, or of /proc reads.
    how = "exact: the scheduler's intervals" if tl.meta.get("source") == "sched_events" else "/proc schedstat bins"
    title = a.title or f"per-thread CPU of {os.path.basename(a.csv)} ({how})"
    try:
        figures.timeline_figure(plt, [("", a.csv)], title, out, threads=a.top, style=a.style, bin_ms=a.bin_ms,
                                xlim=xlim, events=events)
    except OSError as e:
        die(f"cannot write {out}: {e.strerror}")
    print(f"monitor-plot: wrote {out} ({len(tl.threads())} threads, {tl['process'][0][-1] / 1000:.2f} s)")
    return 0
