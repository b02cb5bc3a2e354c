"""The verdicts as the console prints them: per workload its label, the
headline a user acts on, the evidence, the confirmation."""
from . import views
from ..lib import fmt


def lines(verdicts, labels=True):
    """The console's lines; labels=False (a tune: one workload, the command
    printed already): no label line, the headline first."""
    out = []
    for e in verdicts.entries:
        if labels:
            out.append(e.label)
        out.append(("  " if labels else "") + views.headline(e))
        out += views.evidence(e)
        out += ["    " + ln for ln in views.confirmation_lines(e)]
    out += views.fit_lines(verdicts)
    if verdicts.rule_from.startswith("the defaults"):
        out.append(f"note: rule from {verdicts.rule_from}: {verdicts.rule.text()}")
    return out


def settings_table(e):
    """The evidence per setting as a console table (views.setting_rows),
    with the OpenMP workers' CPU between regions where the probe saw it."""
    rows = views.setting_rows(e)
    header = views.table_columns(e) + (["between regions ms"] if e.between_regions else [])
    body = [views.table_cells(e, r) + ([fmt.number(e.between_regions.get(r["setting"]), 4)]
                                       if e.between_regions else []) for r in rows]
    return fmt.table(header, body, right_from=2)
