"""The verdicts as one self-contained HTML page (`threadburn report`; no
network: its plots are data: URIs, its Content-Security-Policy allows
nothing else): the verdict first, then the evidence per setting (the rows
of views.setting_rows), the time-vs-CPU and timeline plots, the settings in
force, the knobs a runtime ignored or overrode, the machine, the command
that reproduces it, the method.

HTML only: the command (commands/report.py) decides and draws and hands
the results over as data (Page: the Verdicts, the rows, the figures). A
run's CSV (run.csv of `threadburn run`) is one run of one setting: no
verdict.
"""
import base64
import html
import os
import shlex
from dataclasses import dataclass, field

from . import views
from ..lib import fmt, knobs, paths, records, schema
from ..lib.errors import ThreadburnError
from ..lib.records import Row

# The verdict band's colours (background, border), by verdict: the browser
# test looks for the band's colour near the top of the page's screenshot.
VERDICT_COLORS = {"change": ("#e3f4e6", "#1e7b34"), "keep": ("#e6edf7", "#2c5aa0"),
                  "undecided": ("#fdf1dc", "#a86200"), "run": ("#ececec", "#555555")}
# The settings table: the runtime asked and in force, the largest team, then
# each knob of the settings in force line (the knob table's shown column),
# headed by its variable, with its read-back.
IN_FORCE = ((Row.runtime.name, "runtime asked"), (Row.omp_runtime.name, "runtime in force"),
            (Row.max_team.name, "largest team")) + tuple(knobs.in_force_columns())
KNOBS = ((Row.ignored_knobs.name, "ignored"), (Row.overridden_knobs.name, "overridden"),
         (Row.knob_notes.name, "notes"))
MACHINE = ((Row.host_name, "host"), (Row.cpu_model, "CPU"), (Row.num_cpus, "CPUs"), (Row.available_cpus, "CPUs usable"),
           (Row.cpu_quota, "CPU quota (CPUs)"), (Row.effective_cpus, "CPUs effective (the slot: docs/slot.md)"),
           (Row.mhz_per_cpu, "MHz"), (Row.omp_library, "OpenMP library"), (Row.blas_library, "BLAS"),
           (Row.library_build_type, "build"), (Row.slurm_job, "Slurm job"), (Row.schema_version, "schema"))
RUN_FIGURES = ((Row.wall_ms, "wall time (ms)"), (Row.cpu_ms, "CPU, all threads and workers (ms)"),
               (Row.cpu_omp_ms, "CPU of the OpenMP workers (ms)"), (Row.omp_between_regions_ms,
                                                                    "workers' CPU between regions (ms)"),
               (Row.regions, "OpenMP regions"), (Row.max_team, "largest team"), (Row.gaps, "gaps without a region"),
               (Row.gap_tail_ms_median, "burn after a gap began, median (ms)"),
               (Row.sampler_cpu_ms, "probe's sampler (ms)"))
SCRIPT = """window.addEventListener("load", function () {
  var imgs = Array.prototype.slice.call(document.images);
  var bad = imgs.filter(function (i) { return !(i.complete && i.naturalWidth > 0); });
  document.body.setAttribute("data-images", String(imgs.length));
  document.body.setAttribute("data-images-ok", bad.length ? "no: " + bad.map(function (i) { return i.alt; }).join("; ") : "yes");
});"""
CSS = """body { font: 15px/1.45 "DejaVu Sans", sans-serif; color: #1c1c1c; margin: 0 auto; max-width: 1100px; padding: 16px 24px; }
h1 { font-size: 22px; margin: 0 0 2px; } h2 { font-size: 18px; margin: 26px 0 8px; border-bottom: 1px solid #ccc; }
h3 { font-size: 15px; margin: 14px 0 4px; word-break: break-all; } .sub { color: #555; margin: 0 0 12px; }
.verdict { padding: 10px 14px; margin: 10px 0; border-left: 6px solid; border-radius: 3px; }
.headline { font-size: 17px; font-weight: bold; margin: 4px 0; word-break: break-word; }
.verdict ul { margin: 4px 0; padding-left: 20px; font-size: 13.5px; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 13px; }
th, td { border: 1px solid #d0d0d0; padding: 3px 7px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; } th { background: #f3f3f3; }
img { max-width: 100%; border: 1px solid #e0e0e0; margin: 4px 0; }
pre { background: #f6f6f6; padding: 8px; overflow-x: auto; font-size: 12.5px; white-space: pre-wrap; word-break: break-all; }
.note { color: #555; font-size: 13px; }"""
CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'unsafe-inline'"


@dataclass
class Page:
    kind: str                                      # sweep | tune | run
    csv_path: str
    rows: list                                     # records.Row
    verdicts: object = None                        # analysis.verdicts.Verdicts (None for a run)
    figures: list = field(default_factory=list)    # [(alt, png path)]
    notes: list = field(default_factory=list)      # why a figure is missing
    repro: dict = field(default_factory=dict)      # workload label -> a chosen setting's command line


def esc(value):
    return html.escape(str(value), quote=True)


def kind_of(path, header, rows):
    """sweep, tune or run: what wrote the file; ThreadburnError for anything else."""
    if Row.status.name not in header or Row.run_key.name not in header:
        raise ThreadburnError(f"{path}: not a results CSV of threadburn sweep, tune or run (no status and run_key "
                              "columns)")
    if not rows:
        raise ThreadburnError(f"{path}: no rows")
    if rows[0].is_tune:
        return "tune"
    if rows[0].bench == "command":
        return "run"
    if records.holds_steps(header):
        return "sweep"
    raise ThreadburnError(f"{path}: neither a sweep's (step_ms), a tune's (grid tune) nor a run's (bench command) rows")


def table(header, body, numeric_from=2):
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td{' class=n' if i >= numeric_from else ''}>{esc(c)}</td>"
                                    for i, c in enumerate(r)) + "</tr>" for r in body)
    return f"<table><tr>{head}</tr>{rows}</table>"


def image(path, alt):
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode("ascii")
    return f'<img alt="{esc(alt)}" src="data:image/png;base64,{data}">'


def doc_link(name, anchor="", text=None):
    """A link to a page of docs/ in this checkout (or its installed copy)."""
    path = os.path.join(paths.data_dir(), "docs", name)
    return f'<a href="file://{esc(path)}{esc(anchor)}">{esc(text or "docs/" + name + anchor)}</a>'


# --- the sections ------------------------------------------------------------------

def verdict_section(p):
    out = ['<section id="verdict">']
    if p.kind == "run":
        bg, border = VERDICT_COLORS["run"]
        row = p.rows[0]
        out.append(f'<div class="verdict run" style="background:{bg};border-color:{border}">'
                   f'<h3>{esc(row.command)}</h3><p class="headline">ONE RUN: no verdict. A verdict compares '
                   "settings: <code>threadburn tune -- COMMAND</code> races them against your plain environment.</p>"
                   f"<ul><li>status {esc(row.status)}"
                   f"{': ' + esc(row.reason) if row.reason else ''}"
                   f"; wall {esc(fmt.ms(row.wall_ms))}, CPU "
                   f"{esc(fmt.ms(row.cpu_ms))}; the OpenMP workers burned "
                   f"{esc(fmt.ms(row.omp_between_regions_ms))} between regions</li></ul></div>")
    elif not p.verdicts.entries:
        bg, border = VERDICT_COLORS["undecided"]
        out.append(f'<div class="verdict undecided" style="background:{bg};border-color:{border}"><p class="headline">'
                   "NO VERDICT: no workload with complete runs in this file.</p></div>")
    for e in (p.verdicts.entries if p.verdicts else []):
        bg, border = VERDICT_COLORS[e.verdict]
        evidence = "".join(f"<li>{esc(ln.strip())}</li>" for ln in views.evidence(e) + views.confirmation_lines(e))
        out.append(f'<div class="verdict {esc(e.verdict)}" style="background:{bg};border-color:{border}">'
                   f'<h3>{esc(e.label)}</h3><p class="headline">{esc(views.headline(e))}</p><ul>{evidence}</ul></div>')
    fit = views.fit_lines(p.verdicts) if p.verdicts else []
    if fit:
        out.append(f'<div class="fit"><p><b>{esc(fit[0])}</b></p><ul>'
                   + "".join(f"<li>{esc(ln.strip())}</li>" for ln in fit[1:]) + "</ul></div>")
    out.append("</section>")
    return "\n".join(out)


def evidence_section(p):
    out = ['<section id="evidence"><h2>Evidence per setting</h2>']
    if p.kind == "run":
        row = p.rows[0]
        body = [[label, fmt.number(c(row), 4)] for c, label in RUN_FIGURES if c(row) is not None]
        out.append(table(["figure", "value"], body, numeric_from=1))
    for e in (p.verdicts.entries if p.verdicts else []):
        rows = views.setting_rows(e)
        note = views.rule_note(e)
        out.append(f"<h3>{esc(e.label)}</h3>")
        out.append(f'<p class="note">{esc(note)}</p>' if note else "")
        out.append(table(views.table_columns(e), [views.table_cells(e, r) for r in rows]) if rows else
                   '<p class="note">no setting with complete runs</p>')
    out.append("</section>")
    return "\n".join(out)


def figures_section(p):
    out = ['<section id="figures"><h2>Time against CPU, and timelines</h2>']
    out += [image(path, alt) for alt, path in p.figures]
    out += [f'<p class="note">{esc(n)}</p>' for n in p.notes]
    out.append("</section>")
    return "\n".join(out)


def setting_name(row):
    """A setting's name as the verdicts call it (a tune's point, a sweep's label)."""
    return row.study if row.is_tune else row.setting.label


def by_setting(rows):
    """{setting name: its first ok row (else its first row)}, in the file's order."""
    out = {}
    for r in rows:
        if r.phase != "race":
            continue
        name = setting_name(r)
        if name not in out or (not out[name].ok and r.ok):
            out[name] = r
    return out


def _distinct(rows, column):
    return list(dict.fromkeys(r.text(column) for r in rows if r.has(column)))


def settings_section(p):
    rows = p.rows
    first = by_setting(rows)
    cols = [(k, label) for k, label in IN_FORCE if any(r.has(k) for r in first.values())]
    body = [[name] + [r.text(k) for k, _ in cols] for name, r in first.items()]
    out = ['<section id="settings"><h2>Settings in force</h2>',
           '<p class="note">What the OpenMP runtime reported it used (the first run of each setting): under each '
           'variable its value in force, as the runtime or library read it back.</p>',
           table(["setting"] + [label for _, label in cols], body, numeric_from=99)]
    knobs = []
    for name, r in first.items():
        for k, label in KNOBS:
            values = [v for v in _distinct([x for x in rows if x is r or setting_name(x) == name], k)
                      if v != "none"]
            if values:
                knobs.append([name, label, "; ".join(values)])
    out.append("<h3>Knobs ignored or overridden</h3>")
    out.append(table(["setting", "what", "knobs"], knobs, numeric_from=99) if knobs else
               '<p class="note">none reported in any run: every variable set was read and used as given.</p>')
    out.append("</section>")
    return "\n".join(out)


def machine_section(rows):
    body = [[label, ", ".join(v)] for c, label in MACHINE for v in [_distinct(rows, c.name)] if v]
    dates = sorted(_distinct(rows, Row.date.name) + _distinct(rows, Row.started_at.name))
    if dates:
        body.append(["measured", dates[0] if len(dates) == 1 else f"{dates[0]} .. {dates[-1]}"])
    return f'<section id="machine"><h2>Machine</h2>{table(["what", "value"], body, numeric_from=99)}</section>'


def reproduce_lines(kind, rows, csv_path, rule):
    row = rows[0]
    name = os.path.basename(csv_path)
    rule_flags = f"--margin {rule.margin:g} --objective {rule.objective}" if rule else ""
    if kind == "sweep":
        lines = [f"bin/threadburn sweep {shlex.quote(row.grid)} --seed {row.seed} "
                 + ("--decide " if rule and rule.design == "race" else "") + rule_flags]
    elif kind == "tune":
        extra = " --metric 'REGEX'" if row.metric is not None else ""
        extra += " --points FILE" if row.preset not in ("", "default") else ""
        lines = [f"bin/threadburn tune --seed {row.seed} {rule_flags}{extra} -- {row.command}"]
    else:
        env = " ".join(f"--env {shlex.quote(k + '=' + v)}" for k, v in row.setting.env
                       if v not in (schema.UNSET, ""))
        runtime = " --runtime llvm" if row.runtime == "llvm" else ""
        lines = [f"bin/threadburn run{runtime}{' ' + env if env else ''} -- {row.command}"]
    if kind != "run":
        lines.append(f"bin/threadburn verdict {shlex.quote(name)}     # the verdict, recomputed from the rows")
    lines.append(f"bin/threadburn report {shlex.quote(name)}      # this page")
    return lines


def reproduce_section(p):
    out = ['<section id="reproduce"><h2>Reproduce</h2>',
           f"<pre>{esc(chr(10).join(reproduce_lines(p.kind, p.rows, p.csv_path, p.verdicts.rule if p.verdicts else None)))}</pre>"]
    if p.repro:
        out.append('<p class="note">One run of each chosen setting (or the one the data lean to), as the sweep '
                   "started it:</p>")
        out.append("<pre>" + esc("\n".join(f"# {k}\n{v}" for k, v in p.repro.items())) + "</pre>")
    out.append("</section>")
    return "\n".join(out)


def method_section(kind):
    measure = ("Each run is a fresh process of a benchmark program (OpenMP reads its settings once, at start-up), "
               "the runs in shuffled rounds so that the machine's drift spreads over every setting. A run's time is "
               "the mean time of one iteration of the program's loop (the step and the gap after it); its CPU, the "
               "CPU of every thread during the step plus what threads other than the measuring one burned in the "
               "gap after it (the spin-wait of idle OpenMP workers), read from each thread's own CPU clock."
               if kind == "sweep" else
               "Each run is a fresh process of your command with the preload probe in front of it (LD_PRELOAD: no "
               "privileges, no change to the program), which sees every OpenMP region the runtime starts and "
               "samples every thread's CPU clock from inside, forked workers included. A run's time is its wall "
               "time (or your --metric figure); its CPU, the CPU of all its threads and worker processes.")
    return ('<section id="method"><h2>Method</h2>'
            f"<p>{esc(measure)} What the probe and the programs can and cannot see, and their cost: "
            f"{doc_link('probe.md')}; the measurement: {doc_link('design.md', '#measuring-cpu')}.</p>"
            "<p>The decision compares one value per run, never steps: for each setting the ratio of its values "
            "to the baseline's (the default environment in a sweep, your plain environment in a tune), run against "
            "run within each shuffled round, with a t interval on the logs, corrected (Bonferroni) for every "
            "setting compared, every look a race took and each metric a change may be claimed on. Against a "
            "practical margin the verdict is <b>change</b> (a setting beats the baseline by more than the margin: "
            "faster, or as fast and cheaper), <b>keep</b> (no setting can), or <b>undecided</b> (with the runs a "
            "decision would need). A change's gain is measured again in fresh runs the race did not use to choose. "
            f"The rule: {doc_link('design.md', '#decisions')}.</p></section>")


def html_page(p):
    """The report's HTML (Page: what the command decided and drew)."""
    name = os.path.basename(p.csv_path)
    what = {"sweep": f"a sweep of grid {p.rows[0].grid}", "tune": "a tune of your command",
            "run": "one run of your command"}[p.kind]
    body = [f"<h1>threadburn report: {esc(name)}</h1>",
            f'<p class="sub">{esc(what)}; {len(p.rows)} rows; {esc(os.path.abspath(p.csv_path))}</p>',
            verdict_section(p), evidence_section(p), figures_section(p), settings_section(p),
            machine_section(p.rows), reproduce_section(p), method_section(p.kind)]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
            f"<title>threadburn report: {esc(name)}</title><style>{CSS}</style></head>\n"
            f'<body data-kind="{p.kind}">\n' + "\n".join(body) + f"\n<script>{SCRIPT}</script>\n</body></html>\n")
