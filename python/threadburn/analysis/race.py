"""The race of a tune's settings, as the run engine asks it
(engine/campaign.py: race() -> the items the next round needs, none when
decided), and the fresh runs it asks for after the race. Used by tune (its
settings; with --copies, one workload per copy count, each with its own
baseline, raced side by side) and by the decision rule's benchmark
(synthetic settings); a sweep races many workloads at once
(commands/sweep.py, GridRace).
"""
import os

from . import confirmation, verdicts
from ..lib import records


class Race:
    """rows(): the results so far (records.Row); items: {point key: the
    campaign item that runs it (the race's)}; rule: the campaign's."""

    def __init__(self, rows, items, rule, libomp, source=""):
        self.rows, self.items, self.rule, self.libomp, self.source = rows, dict(items), rule, libomp, source

    def verdicts(self):
        return verdicts.decide_records(records.run_records(self.rows(), self.libomp), self.rule,
                                       os.path.basename(self.source), rule_from="the rows")

    def verdict(self):
        """The first workload's Verdict on the rows so far (None without rows)."""
        v = self.verdicts()
        return v.entries[0] if v.entries else None

    def __call__(self):
        wanted = []
        for e in self.verdicts().entries:
            for name in e.decision.needs:
                wanted += sorted(k for k in e.points.get(name, ()) if k in self.items)
        return [self.items[k] for k in dict.fromkeys(wanted)]

    def confirmation_plan(self, available, host=False):
        """After the race: ([(point key, phase)], runs each) of the fresh
        runs to make, or None when there are none. Each workload whose race
        selected a candidate not yet confirmed: its baseline and the
        candidate (phase confirm), as many runs as the spread needs
        (confirmation.runs_for) within `available` runs per item. A host
        tune (host) with several copy counts or more than one copy also
        runs every workload's baseline, and for N > 1 one copy of its best
        plan alone (phase alone): what each copy loses, how many fit
        (analysis/hostplan.py)."""
        v = self.verdicts()
        several = host and (len(v.entries) > 1 or any((e.copies or 1) > 1 for e in v.entries))
        wanted, sizing = [], []
        for e in v.entries:
            d = e.decision
            unconfirmed = d.candidate is not None and e.confirmation is None
            if not unconfirmed and not several:
                continue
            wanted += [(self.key_of(e, n), "confirm") for n in (d.baseline, d.candidate) if n]
            if several and (e.copies or 1) > 1:
                wanted.append((self.key_of(e, d.candidate or d.baseline), "alone"))
            if unconfirmed:
                sizing.append(d)
        wanted = [w for w in dict.fromkeys(wanted) if w[0] is not None]
        if not wanted:
            return None
        per_item = max(1, available * 2 // len(wanted))  # `available` counts the runs of one side of a pair
        n = max((confirmation.runs_for(d, self.rule, per_item) for d in sizing), default=confirmation.CONFIRM_MIN)
        return wanted, n

    def key_of(self, e, name):
        """The race's point key of a setting of entry e."""
        keys = sorted(k for k in e.points.get(name, ()) if k in self.items)
        return keys[0] if keys else None

