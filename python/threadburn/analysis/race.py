"""The race of one workload's settings, as the run engine asks it
(engine/campaign.py: race() -> the items the next round needs, none when
decided), and the confirmation it asks for after a change. Used by tune
(its settings) and by the decision rule's benchmark (synthetic settings);
a sweep races many workloads at once (commands/sweep.py, GridRace).
"""
import os

from . import confirmation, verdicts
from ..lib import records


class Race:
    """rows(): the results so far (records.Row); items: {setting name: the
    campaign item that runs it}; rule: the campaign's."""

    def __init__(self, rows, items, rule, libomp, source=""):
        self.rows, self.items, self.rule, self.libomp, self.source = rows, dict(items), rule, libomp, source

    def verdict(self):
        """The one workload's Verdict on the rows so far (None without rows)."""
        v = verdicts.decide_records(records.run_records(self.rows(), self.libomp), self.rule,
                                    os.path.basename(self.source), rule_from="the rows")
        return v.entries[0] if v.entries else None

    def __call__(self):
        e = self.verdict()
        return [self.items[n] for n in e.decision.needs if n in self.items] if e else []

    def confirmation_plan(self, available):
        """After the race: ([baseline, candidate] names, runs each) when the
        race selected a candidate not yet confirmed, the runs each side
        needs within `available` runs per side (confirmation.runs_for);
        None otherwise."""
        e = self.verdict()
        if e is None or e.decision.candidate is None or e.confirmation is not None:
            return None
        d = e.decision
        return [d.baseline, d.candidate], confirmation.runs_for(d, self.rule, available)
