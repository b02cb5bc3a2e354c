"""threadburn report CSV: one self-contained HTML page of a results file,
to read or to attach to an issue.

    threadburn report runs/default-host-20240101-120000.csv
    threadburn report runs/tune-train-20240101-120000.csv -o tune.html

Accepts the CSV of a sweep (runs/<grid>-<host>-<time>.csv), of a tune
(runs/tune-<command>-<time>.csv) or of a run (run.csv in the folder of
`threadburn run`, whose probe files beside it give the timeline); anything
else is an error (one line, exit 2, nothing written). The page: the verdict
first (recomputed as `threadburn verdict CSV` does, with the margin,
objective and looks the file's <stem>.verdict.json recorded), then the
evidence per setting (ratios to the baseline with their intervals), the
time-vs-CPU and timeline plots, the settings in force, the knobs a runtime
ignored or overrode, the machine, the commands that reproduce it, the
method. No network: the plots are embedded (data: URIs). Plots need
matplotlib (Debian's python3-matplotlib); without it the page says so.
"""
import argparse
import os

from . import argtypes, decide, reportpage
from .errors import ThreadburnError


def add_parser(sub):
    p = sub.add_parser("report", help="one self-contained HTML page of a sweep's, tune's or run's CSV: verdict first",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", help="a results CSV of threadburn sweep or tune, or a run's run.csv")
    p.add_argument("-o", "--out", help="the HTML file (default: <csv without .csv>.report.html)")
    p.add_argument("--margin", type=argtypes.margin, help="as `threadburn verdict --margin` (default: as recorded)")
    p.add_argument("--objective", choices=decide.OBJECTIVES, help="as `threadburn verdict --objective`")
    p.add_argument("--looks", type=argtypes.positive, help="as `threadburn verdict --looks`")
    p.set_defaults(run=main)
    return p


def main(args):
    text = reportpage.page(args.csv, args.objective, args.margin, args.looks)
    out = args.out or os.path.splitext(args.csv)[0] + ".report.html"
    tmp = out + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, out)
    except OSError as e:
        raise ThreadburnError(f"{out}: cannot write: {e.strerror}") from None
    print(f"report: {out}")
    return 0
