"""The race of a tune's settings, as the run engine asks it
(engine/campaign.py: race() -> the items the next round needs, none when
decided), and the fresh runs it asks for after the race. Used by tune (its
settings; with --copies, one workload per copy count, each with its own
baseline, raced side by side) and by the decision rule's benchmark
(synthetic settings). A sweep races many workloads at once (GridRace,
below: its policy; commands/sweep.py makes the campaign's items): a
workload whose race the budget cannot settle stops, and its fresh runs
go on in looks.
"""
import os

from . import confirmation, runfigures, verdicts
from ..lib import records, rule as rules

# A workload's race stops (GridRace.stop_futile) only once its racing settings have this many
# runs (the race's third look) and its nearest comparison needs over FUTILE_FACTOR times the
# runs the budget left could reach: the runs needed come from the spread seen, and with 8
# pairs a spread is within about 0.6-1.4 of its truth (chi-square, 90 %), the runs needed
# within about 0.4-2x. In scripts/run.sh a stop at the first look (3 runs: 37 needed, 18
# reachable; 28 against 27) ended both CIFAR workloads undecided that more runs might settle.
FUTILE_MIN_RUNS = 8
FUTILE_FACTOR = 2


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


class GridRace:
    """The race of a sweep: per workload the decision of analysis/verdicts.py
    by the campaign's rule, on the rows of its results file `out`; the next
    round runs the points behind the settings still needed, each for only
    the benchmarks of those settings (a point whose axis holds a setting
    flag runs several settings). keys: the grid's point keys; item(key,
    [(verdict, setting)], phase): the campaign item that runs point `key`
    for those settings in that phase (race | confirm), the command's
    (commands/sweep.py, race_item); runs_left(): the runs the race's budget
    has left (None: unknown); say: where a workload's stop is said."""

    def __init__(self, out, keys, rule, libomp, item, runs_left=None, say=print):
        self.out, self.keys, self.rule, self.libomp, self.item = out, set(keys), rule, libomp, item
        self.runs_left = runs_left or (lambda: None)   # runs the race's budget has left (None: unknown)
        self.say = say
        self.futile = {}                               # workload -> (runs a setting it needs, runs it could get)

    def verdicts(self):
        recs = records.run_records(records.read_rows(self.out), self.libomp, runfigures.of_run)
        return verdicts.decide_records(recs, self.rule, os.path.basename(self.out), rule_from="the rows")

    def __call__(self):
        wanted = {}
        left = self.runs_left()
        for e in self.verdicts().entries:
            if self.stop_futile(e, left):
                continue
            for name in e.decision.needs:
                for key in e.points.get(name, set()):
                    if key in self.keys:
                        wanted.setdefault(key, []).append((e, name))
        return [self.item(k, wanted[k], "race") for k in sorted(wanted)]

    def stop_futile(self, e, left):
        """Is workload e's race futile: undecided with no candidate, its
        settings at FUTILE_MIN_RUNS runs at least, and even the whole budget
        left, spent on its settings alone, takes them to a look short of the
        runs its nearest open comparison still racing needs to settle by FUTILE_FACTOR
        (ratios.runs_needed; None: on the margin, no number settles it)? Its runs then go to the
        workloads the budget can decide (their races, their confirmations);
        its verdict says undecided with the runs it would need. Said once."""
        d = e.decision
        if left is None or d.verdict != "undecided" or d.candidate is not None or not d.open:
            return False
        have = min(d.settings[n].n for n in d.needs if n in d.settings) if d.needs else 0   # the racing settings'
        if have < FUTILE_MIN_RUNS:
            return False
        # the runs a setting could reach: the last look (rules.LOOK_SCHEDULE) whose stretch fits in what is left
        could = max((t for t in rules.LOOK_SCHEDULE if t > have and (t - have) * max(1, len(d.needs)) <= left),
                    default=have)
        # the comparisons the race is still running (an open setting shown behind the leader runs no more)
        racing = [n for name, n in d.open if name in d.needs] or [n for _, n in d.open]
        need = min((n for n in racing if n is not None), default=None)
        if need is not None and need <= FUTILE_FACTOR * could:
            return False
        if e.label not in self.futile:
            said = f"about {need}" if need is not None else "more than any budget (a gain on the margin)"
            self.say(f"sweep: {e.label}: stops racing: its nearest comparison needs {said} runs a setting, the "
                     f"budget left could give it {could}")
        self.futile[e.label] = (need, could)
        return True

    def next_looks(self, available):
        """The next confirmation look of every workload whose fresh runs
        cannot yet tell and that more runs would settle
        (confirmation.next_look), within `available` runs in all:
        ([items], runs each), or None."""
        v = self.verdicts()
        looks = [(e, confirmation.next_look(e.confirmation, self.rule, available // max(1, 2 * len(v.entries))))
                 for e in v.entries]
        looks = [(e, n) for e, n in looks if n > 0]
        if not looks:
            return None
        items = self.confirm_items((e, e.confirmation.chosen) for e, _ in looks)
        return items, min(max(n for _, n in looks), available // max(1, len(items)))

    def confirm_items(self, pairs):
        """The confirm-phase items of (verdict, chosen setting) pairs: each
        pair's baseline and chosen points, for that workload's benchmarks."""
        wanted = {}
        for e, chosen in pairs:
            for name in (e.decision.baseline, chosen):
                key = min(k for k in e.points.get(name, set()) if k in self.keys)
                wanted.setdefault(key, []).append((e, name))
        return [self.item(k, wanted[k], "confirm") for k in sorted(wanted)]

    def confirmations(self, available):
        """The confirmation rounds after the race: for each workload whose
        race selected a candidate not yet confirmed, its baseline's and the
        candidate's points (for that workload's benchmarks), and the runs each
        needs (analysis/confirmation.runs_for); ([items], runs each)."""
        changed = [e for e in self.verdicts().entries if e.decision.candidate and e.confirmation is None]
        n = max((confirmation.runs_for(e.decision, self.rule, available // max(1, 2 * len(changed)))
                 for e in changed), default=0)
        return self.confirm_items((e, e.decision.candidate) for e in changed), n
