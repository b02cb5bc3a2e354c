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
import shlex
import tempfile

from . import options
from ..analysis import verdicts
from ..export import drawing, figures, html
from ..lib import files, paths, probe, records
from ..lib.errors import ThreadburnError


def add_parser(sub):
    p = sub.add_parser("report", help="one self-contained HTML page of a sweep's, tune's or run's CSV: verdict first",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", help="a results CSV of threadburn sweep or tune, or a run's run.csv")
    p.add_argument("-o", "--out", help="the HTML file (default: <csv without .csv>.report.html)")
    options.add_rule_options(p, recorded=True)
    p.set_defaults(run=main)
    return p


def draw(page, tmp):
    """The figures into tmp: time against CPU (a sweep's Pareto plot, a tune's or
    run's runs per setting) and the timelines the file's runs kept."""
    rows, csv_dir = page.rows, os.path.dirname(os.path.abspath(page.csv_path))
    drawn = []

    def attempt(alt, make):
        try:
            found = make()
        except (ThreadburnError, OSError, KeyError, ValueError) as e:
            page.notes.append(f"{alt}: not drawn ({e})")
            return []
        drawn.extend((f"{alt} ({os.path.basename(p)})", p) for p in found)
        return found
    if page.kind == "sweep":
        attempt("time against CPU burned after the step", lambda: figures.pareto(
            records.world_rows(rows), figures.pyplot(), tmp))
        if not attempt("timeline", lambda: figures.timelines(rows, csv_dir, figures.pyplot(), tmp, 12)) \
                and not page.notes:
            page.notes.append("no timelines in this file: a sweep records them with --timeline (or timeline = true "
                              "in the grid)")
    else:
        attempt("time against CPU per setting", lambda: figures.tune_settings(rows, figures.pyplot(), tmp))
        attempt("host throughput and time per copy against the copies",
                lambda: figures.host_plans(rows, figures.pyplot(), tmp))
        attempt("throughput and CPUs busy against the slot size",
                lambda: figures.slot_sizes(rows, figures.pyplot(), tmp))
        if page.kind == "run":
            attempt("timeline of the run", lambda: run_timeline(rows[0], csv_dir, tmp))
        else:
            page.notes.append("a tune keeps no timelines (the probe's files of its runs are removed); "
                              "`threadburn run` with a setting's variables draws one")
    page.figures = drawn


def run_timeline(row, run_dir, out_dir):
    """The probe's timeline of a run's main process, from the files beside its run.csv."""
    report = probe.main_report(run_dir, shlex.split(row.command) or ["the command"])
    path = report.file(".timeline.csv")
    if not os.path.exists(path):
        raise ThreadburnError(f"no {os.path.basename(path)} beside the CSV")
    return [drawing.timeline_figure(figures.pyplot(), [("", path)], row.command[:100],
                                    os.path.join(out_dir, "timeline.png"))]


def build(args):
    header, rows = records.read_table(args.csv)
    kind = html.kind_of(args.csv, header, rows)
    page = html.Page(kind, args.csv, rows)
    if kind != "run":
        asked = {"objective": args.objective, "margin": args.margin}
        page.verdicts = verdicts.decide_rows(rows, os.path.basename(args.csv), asked, files.recorded_rule(args.csv),
                                             paths.LIBOMP)
        if kind == "sweep":
            for e in page.verdicts.entries:
                line = e.repro.get(e.decision.chosen)
                if line:
                    page.repro[e.label] = line
    with tempfile.TemporaryDirectory(prefix="threadburn-report-") as tmp:
        draw(page, tmp)
        return html.html_page(page)


def main(args):
    text = build(args)
    out = args.out or os.path.splitext(args.csv)[0] + ".report.html"
    files.write_text(out, text)
    print(f"report: {out}")
    return 0
