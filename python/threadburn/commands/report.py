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
from ..analysis import confirmation, decide, results, verdicts
from ..export import drawing, figures, reportpage
from ..lib import keys, probe
from ..lib.errors import ThreadburnError


def add_parser(sub):
    p = sub.add_parser("report", help="one self-contained HTML page of a sweep's, tune's or run's CSV: verdict first",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", help="a results CSV of threadburn sweep or tune, or a run's run.csv")
    p.add_argument("-o", "--out", help="the HTML file (default: <csv without .csv>.report.html)")
    p.add_argument("--margin", type=options.margin, help="as `threadburn verdict --margin` (default: as recorded)")
    p.add_argument("--objective", choices=decide.OBJECTIVES, help="as `threadburn verdict --objective`")
    p.add_argument("--looks", type=options.positive, help="as `threadburn verdict --looks`")
    p.set_defaults(run=main)
    return p


def verdict_of(e):
    d = e.decision
    note = (f"One value per run (a fresh process); geometric means of those; ratios are setting / {d.baseline} as a "
            f"change with the interval after the correction for {max(1, len(d.settings) - 1)} comparisons x "
            f"{d.looks} look(s) (alpha' {d.alpha_each:.2g} per side); margin {d.margin:.0%}, objective "
            f"{d.objective}.") if d.settings else ""
    return reportpage.Verdict(e.label, d.verdict, verdicts.headline(e), verdicts.evidence(e), note,
                              verdicts.table_columns(e), [verdicts.table_cells(e, r) for r in verdicts.setting_rows(e)])


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
        attempt("step time against CPU burned after the step", lambda: figures.pareto(
            results.world_rows(rows), figures.pyplot(), tmp))
        if not attempt("timeline", lambda: figures.timelines(rows, csv_dir, figures.pyplot(), tmp, 12)) \
                and not page.notes:
            page.notes.append("no timelines in this file: a sweep records them with --timeline (or timeline = true "
                              "in the grid)")
    else:
        attempt("time against CPU per setting", lambda: figures.tune_settings(rows, figures.pyplot(), tmp))
        if page.kind == "run":
            attempt("timeline of the run", lambda: run_timeline(rows[0], csv_dir, tmp))
        else:
            page.notes.append("a tune keeps no timelines (the probe's files of its runs are removed); "
                              "`threadburn run` with a setting's variables draws one")
    page.figures = drawn


def run_timeline(row, run_dir, out_dir):
    """The probe's timeline of a run's main process, from the files beside its run.csv."""
    report = probe.main_report(run_dir, shlex.split(row.get("command", "")) or ["the command"],
                               require_regions=False)
    path = report.file(".timeline.csv")
    if not os.path.exists(path):
        raise ThreadburnError(f"no {os.path.basename(path)} beside the CSV")
    return [drawing.timeline_figure(figures.pyplot(), [("", path)], row.get("command", "")[:100],
                                    os.path.join(out_dir, "timeline.png"))]


def build(args):
    header, rows = results.read_table(args.csv)
    kind = reportpage.kind_of(args.csv, header, rows)
    page = reportpage.Page(kind, args.csv, rows, verdicts.setting_name if kind != "run" else
                           (lambda r: keys.setting_of(r).label))
    if kind != "run":
        objective, margin, looks, recorded = verdicts.rule_of(args.csv, args.objective, args.margin, args.looks)
        page.rule = (objective, margin, looks)
        entries = verdicts.decide_all(rows, objective, margin, looks=looks)
        page.verdicts = [verdict_of(e) for e in entries]
        conf = recorded.get("file", {}).get("confirmation")
        page.confirmation = confirmation.text(conf) if conf else []
        if kind == "sweep":
            for e in entries:
                points = e.points.get(e.decision.chosen, set())
                line = next((r["repro"] for r in rows if r.get("point_key") in points and r.get("repro")), None)
                if line:
                    page.repro[e.label] = line
    with tempfile.TemporaryDirectory(prefix="threadburn-report-") as tmp:
        draw(page, tmp)
        return reportpage.html_page(page)


def main(args):
    text = build(args)
    out = args.out or os.path.splitext(args.csv)[0] + ".report.html"
    verdicts.write_text(out, text)
    print(f"report: {out}")
    return 0
