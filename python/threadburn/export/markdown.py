"""The verdicts as Markdown to paste into an issue (--export-markdown FILE,
hyperfine's name): per workload the headline, the evidence and a table with
a row per setting."""
from . import views
from ..lib import fmt


def document(verdicts):
    lines = [f"### threadburn verdict: `{verdicts.source}`", "",
             f"Rule: `{verdicts.rule.text()}` (from {verdicts.rule_from}).", ""]
    for e in verdicts.entries:
        d = e.decision
        lines += [f"**{e.label}**", "", f"> {views.headline(e)}", ""]
        lines += [f"- {ln.strip()}" for ln in views.evidence(e) + views.confirmation_lines(e)]
        if d.settings:
            lines += ["", views.rule_note(e), ""]
            lines += fmt.table(views.table_columns(e), [views.table_cells(e, r) for r in views.setting_rows(e)],
                               fmt="md")
        lines.append("")
    fit = views.fit_lines(verdicts)
    if fit:
        lines += [f"**{fit[0]}**", ""] + [f"- {ln.strip()}" for ln in fit[1:]] + [""]
    return "\n".join(lines)
