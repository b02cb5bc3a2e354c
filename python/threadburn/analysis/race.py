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


class Race:
    """records(): the run records so far (lib/records.RunRecord: a tune's
    runlog.RunLog.records, its runs in memory); items: {point key: the campaign
    item that runs it (the race's)}; rule: the campaign's."""

    def __init__(self, records, items, rule, source=""):
        self.records, self.items, self.rule, self.source = records, dict(items), rule, source

    def verdicts(self, final=False):
        """The verdicts on the runs so far; final: the race is over (its last
        look is keep's last test), else a look that decides what runs next."""
        return verdicts.decide_records(self.records(), self.rule, os.path.basename(self.source),
                                       rule_from="the rows", final=final)

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
        (analysis/hostplan.py). The looks after it: next_look."""
        v = self.verdicts(final=True)
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
        look = confirmation.next_look_of(self.records(), self.rule)
        n = max((confirmation.runs_for(d, self.rule, per_item, look) for d in sizing),
                default=confirmation.CONFIRM_MIN)
        return wanted, n

    def refuted(self):
        """{(workload label, setting)}: the candidates fresh runs have
        contradicted so far, ruled out by the rule (version 5). A campaign
        that sees a new one goes back to the race with what the budget has
        left (then the fresh runs of the candidate it finds)."""
        return {(e.label, c.chosen) for e in self.verdicts(final=True).entries for c in e.refuted}

    def next_look(self, available):
        """([(point key, "confirm")], runs each) of the next look of every
        confirmation that cannot yet tell and that more runs would settle
        (confirmation.next_look), within `available` runs of each pair's
        side; None when there is none."""
        v = self.verdicts(final=True)
        looks = [(e, confirmation.next_look(e.confirmation, self.rule, available)) for e in v.entries]
        looks = [(e, n) for e, n in looks if n > 0]
        if not looks:
            return None
        per_pair = max(1, available // len(looks))
        wanted = [(self.key_of(e, name), "confirm") for e, _ in looks
                  for name in (e.decision.baseline, e.confirmation.chosen)]
        n = min(per_pair, max(n for _, n in looks))
        return [w for w in dict.fromkeys(wanted) if w[0] is not None], n

    def last_look(self, available):
        """(items, runs each) of a last race look when the race ended with
        its budget spent, no candidate and keep not shown: `available` runs
        shared evenly over the settings still open and the baseline; None
        without room for a round of them (or by a rule before version 3, or
        with several workloads). last_looks says how much is available."""
        v = self.verdicts()
        if self.rule.version < 3 or len(v.entries) != 1:
            return None
        e = v.entries[0]
        d = e.decision
        if d.candidate is not None or d.decided or not d.settings:
            return None
        names = sorted({n for n, _ in d.open} | set(d.needs) | {d.baseline})
        keys = [k for k in (self.key_of(e, n) for n in names) if k is not None]
        each = available // max(1, len(keys))
        if not keys or each < 1:
            return None
        return [self.items[k] for k in keys], each

    def key_of(self, e, name):
        """The race's point key of a setting of entry e."""
        keys = sorted(k for k in e.points.get(name, ()) if k in self.items)
        return keys[0] if keys else None


def last_looks(race, left, reserve):
    """The last looks of a race that ended with its budget spent, no
    candidate and keep not shown, as (items, runs each), to be run in turn:
    race() is the race as its runs now stand, left() the runs the budget has
    left, reserve the fresh runs' room for a candidate (CONFIRM_MIN runs of
    each fresh item). The first look leaves that room, so that a candidate
    it finds can still be confirmed (before, it took everything and such a
    candidate ended undecided, "no budget left for fresh runs": seen in the
    live known answer with invisible slowdowns); when it finds none and
    keep is still not shown, a second gives the room to keep's last test
    (Rule.alpha_keep, final), which so sees every run the budget allows."""
    for room in (reserve, 0) if reserve else (0,):
        plan = race().last_look(max(0, left() - room))
        if plan:
            yield plan
