"""The decision rule as one value (Rule): what a campaign is judged by,
made once when the campaign starts, used by its race and its verdict, and
written into every row it produces (the `rule` column) and into the verdict
file, so that a results file alone reproduces its verdict (docs/design.md,
Decisions). Also the race's fixed schedule: the runs at which it looks.

The engine plans rounds by the schedule; analysis decides by the Rule.
"""
from dataclasses import dataclass, field, fields, replace

ALPHA = 0.05
MARGIN = 0.05
OBJECTIVES = ("time", "cpu", "balanced")
# How runs are compared. The runs of two settings in the same round (a
# shuffled block of every setting still racing) are compared pair by pair,
# so drift shared by a round cancels. "ranks" (rule version 3): the median
# of the rounds' log ratios; the bound a setting is
# shown better on (a change) the sign test's, on the median, which a run in
# ten slowed 2x by what no evidence shows moves by one rank; the bound it is
# shown no better or slower on (a keep, an elimination) the signed-rank
# test's (Walsh averages), nearly the t's power at normal noise; each exact,
# and the paired t's where too few pairs reach the level (with n pairs
# neither rejects below 2^-n). "paired" (version 2): the paired t on the
# logs. "welch": all runs of each side, for files that record no rounds
# (schema 3).
METHODS = ("ranks", "paired", "welch")
DESIGNS = ("race", "fixed")
METHOD_TEXT = {"ranks": "log per-run ratios paired by round: their median, better shown by the sign test, no "
                        "better by the signed-rank test (paired t where too few rounds reach the level)",
               "paired": "paired t on log per-run values, rounds as blocks",
               "welch": "Welch t on log per-run values"}
# The first look of a race, and the runs a setting needs before any
# comparison: 2 give a variance; 3 is where a race starts.
MIN_RUNS = 2
START_RUNS = 3
# Runs per setting at which a race looks at its data: about x1.5 apart,
# so that looks stay few (each costs alpha).
LOOK_SCHEDULE = (3, 5, 8, 12, 18, 27, 40, 60, 90, 135, 200, 300, 450, 675, 1000, 1500, 2250, 3375, 5000)
# A race spends alpha over its looks: the k-th look (k = 1, 2, ..., at the
# k-th entry of LOOK_SCHEDULE it reached) gets SPENDING[k-1] of it, and the
# looks past the table halve what is left, so the shares sum to 1 over any
# number of looks: the false-change rate holds whatever the budget and
# wherever the race stops, and the rule is known before the first run. Most
# of alpha goes where races end (8 to 60 runs a setting); the first looks,
# with 3 and 5 runs, can settle only gross differences anyway.
SPENDING = (0.01, 0.04, 0.15, 0.20, 0.20, 0.14, 0.10, 0.06, 0.05)
# Keep (version 3) spends its alpha apart: KEEP_FINAL of it at the race's
# last look (the budget spent: the one test a keep at the default budget can
# pass, at 3 % noise about 10 runs a setting), the rest at the looks before
# by KEEP_SPENDING (past the table what is left halves), so that a keep at
# low noise need not wait for the budget's end. Nothing at the first look
# (3 runs settle no 5 % margin) and little at the second.
KEEP_FINAL = 0.8
KEEP_SPENDING = (0.0, 0.02, 0.08, 0.04, 0.03, 0.02)
# The confirmation (version 3) is sequential: its k-th look at the fresh
# runs gets CONFIRM_SPENDING[k-1] of confirm_alpha (past the table what is
# left halves), so a confirmation that cannot yet tell goes on with more
# fresh runs while the budget allows, its false-change rate held over its
# looks. Most of it at the first look, which is sized to settle the claim.
CONFIRM_SPENDING = (0.6, 0.2, 0.1, 0.05)
# Version 3: the level at which a race selects its candidate, one-sided,
# uncorrected: no claim (the fresh runs make it), so loose enough that the
# sign test's bound reaches it at the first look (3 rounds of 3 better by
# the margin: 1/8) and a setting is picked while the budget can still
# confirm it.
SELECT_ALPHA = 0.2
# Version 3: a race with a candidate races on while a setting might still
# beat it (on the sign test's bounds, at SELECT_ALPHA) and no setting has
# this many runs (the second look): a setting a hidden slowdown hit in its
# first runs gets one more look, and the fresh runs keep the rest of the
# budget (at 8, a 12 % winner among seven settings with a run in ten
# slowed 2x was confirmed in 85 % of tunes; at 5, 87 %; with none, 81 %).
CONTEND_RUNS = 5
# A race stops running a setting shown behind its leader at this level,
# uncorrected: that is racing, not a claim (a wrong call costs runs, never a
# false change; analysis/decide.py, Decider.behind). Version 3: 20 %, on the
# sign test's bounds, which a hidden slowdown in a few runs does not hold up.
RACE_ALPHA = 0.05
RACE_ALPHA_V3 = 0.2
# Values are clamped to this before their log is taken: a CPU of 0 ms
# compares as equal to another 0, not as minus infinity.
FLOOR = 1e-6
# A run is disturbed (set aside, and said) when other processes and the
# hypervisor (steal) took this many cores more, over its wall time, than the
# median run of the same setting did: the run's own evidence that something
# else ran (analysis/verdicts.py, disturbed).
DISTURBED_CORES = 0.25
# ... and by at least this much CPU in all: /proc/stat counts in ticks of
# 10 ms per CPU, whose rounding alone must not make a run disturbed.
DISTURBED_MIN_MS = 50.0
# CPU below this share of a core over the loop's time is no cost worth a
# change: a CPU difference counts against the margin or against this floor,
# whichever is larger (the programs' burn threshold, src/core/rules.h).
CPU_FLOOR_CORES = 0.05
# The confirmation (fresh runs of the chosen setting and the baseline) is
# one planned comparison: each claim one-sided at this level, so its
# interval is the two-sided 1 - 2 x CONFIRM_ALPHA one.
CONFIRM_ALPHA = 0.05
# The version of this rule's text; a file whose rule says another is read by
# the rule it names if this code knows it. 7: a balanced candidate whose
# race showed both claims (faster; cheaper at no loss of time) is confirmed
# on the one further past its margin in units of its spread, not on time
# whenever time showed (decide.Decider.claim_of). 6: a tune's run of a program that
# did device work is judged on its steady phase (its time and CPU from its
# first wait or launch through the CUDA driver to its end; the startup, a
# fixed cost of import and initialisation, reported beside it): a 13 s
# startup at a core drowned a wait policy's saving in whole runs. 5: a candidate its fresh runs
# contradict (shown not better by the margin) is ruled out, and the race
# goes on for another while the budget allows; the confirmation's looks are
# counted over the whole campaign (a later candidate's first look gets the
# share of confirm_alpha the earlier ones left, so all the candidates'
# confirmations together spend confirm_alpha at most), and a candidate is
# compared with the baseline's fresh runs of its own rounds only. 4: the sign test's bounds
# interpolated to their level (lib/stats.sign_bound): with the few rounds a
# confirmation has, the exact bound's level is often far below alpha (11
# rounds at 3 %: 0.6 %), power thrown away. 3: the "ranks" method, keep's
# own spending with its last look, the sequential confirmation, look
# brackets (a look past a schedule entry is the next look). 2: paired t,
# keep at the look's share, one confirmation look.
RULE_VERSION = 7


@dataclass(frozen=True)
class Rule:
    objective: str = "balanced"
    margin: float = MARGIN
    alpha: float = ALPHA
    design: str = "race"           # race: alpha spent over looks; fixed: one look, all of alpha
    method: str = "ranks"
    confirm: bool = True           # a race's candidate is confirmed in fresh runs (the claim); False: the race claims
    disturbed_cores: float = DISTURBED_CORES
    cpu_floor_cores: float = CPU_FLOOR_CORES
    confirm_alpha: float = CONFIRM_ALPHA
    version: int = RULE_VERSION
    # Not a part of the text: a rule text without `confirm` was written before that part
    # existed (version 2, by code that also judged a run disturbed against the campaign's
    # median run; its setting's median since): such a rule judges so, and its text and JSON
    # read back as written (analysis/verdicts.py, disturbed; results/README.md).
    legacy_disturbed: bool = field(default=False, metadata={"recorded": False})

    def __post_init__(self):
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective {self.objective!r}: expected one of {', '.join(OBJECTIVES)}")
        if not 0 < self.margin < 1:
            raise ValueError("margin must be in (0, 1): with none, no difference can be shown not to matter")
        if not 0 < self.alpha < 0.5 or not 0 < self.confirm_alpha < 0.5:
            raise ValueError("alpha must be in (0, 0.5)")
        if self.method not in METHODS:
            raise ValueError(f"method {self.method!r}: expected one of {', '.join(METHODS)}")
        if self.design not in DESIGNS:
            raise ValueError(f"design {self.design!r}: expected one of {', '.join(DESIGNS)}")

    @property
    def claims(self):
        """The metrics a change may be claimed on: balanced claims on time
        (faster) or on CPU (as fast and cheaper), so its alpha is split in
        two; time and cpu claim on one."""
        return 2 if self.objective == "balanced" else 1

    def look_share(self, look):
        """The share of alpha the look-th look (1, 2, ...) gets."""
        if self.design == "fixed":
            return 1.0
        return _share(SPENDING, look)

    def look_of(self, runs):
        """The index of the race's look when its settings have at most
        `runs` runs each. Version 3: the bracket of the schedule it falls in
        (4 or 5 runs: look 2), so a last look short of the next entry (the
        budget's end) is a look of its own; version 2: the entries reached."""
        if self.version < 3:
            return look_of(runs)
        return max(1, 1 + sum(1 for n in LOOK_SCHEDULE if n < runs))

    def alpha_per_test(self, n_settings, look=1):
        """Bonferroni over the family behind a verdict: the settings compared
        with the baseline x the metrics claimed on, at this look's share of
        alpha; one-sided."""
        return self.alpha * self.look_share(look) / (max(1, n_settings - 1) * self.claims)

    def alpha_keep(self, look=1, final=False):
        """The level of each one-sided test behind a keep: "every setting is
        shown unable to beat the baseline" is false only if one of its tests
        is, so each takes the look's share of alpha whole (an intersection of
        tests needs no split over settings or claims; the looks still do).
        Version 3: keep's own shares, KEEP_SPENDING at the looks a race
        takes and KEEP_FINAL at its last (final: the file's last look, the
        race over)."""
        if self.design == "fixed" or self.version < 3:
            return self.alpha * self.look_share(look)
        return self.alpha * (KEEP_FINAL + _share(KEEP_SPENDING, look, 1 - KEEP_FINAL) if final
                             else _share(KEEP_SPENDING, look, 1 - KEEP_FINAL))

    def alpha_confirm(self, look=1):
        """The level of each side of the confirmation at its look-th look
        (version 3: CONFIRM_SPENDING of confirm_alpha; version 2: one look,
        all of it)."""
        if self.version < 3:
            return self.confirm_alpha
        return self.confirm_alpha * _share(CONFIRM_SPENDING, look)

    def alpha_select(self, n_settings):
        """The level at which a race selects its candidate (the setting fresh
        runs then confirm), one-sided per comparison, uncorrected: version
        3 SELECT_ALPHA, version 2 alpha. A selection is no claim: the
        confirmation, on runs the race did not see, is; a wrong selection
        costs runs, never a false change. (n_settings: the same signature
        as alpha_per_test.)"""
        return SELECT_ALPHA if self.version >= 3 else self.alpha

    @property
    def claims_clearer(self):
        """Is a balanced candidate confirmed on the claim its race showed
        further past its margin (version 7)? Before: on time whenever the
        race showed it better."""
        return self.version >= 7

    @property
    def steady_phase(self):
        """Is a tune's run that did device work judged on its steady phase
        (version 6)? Before: on the whole run, its startup included."""
        return self.version >= 6

    @property
    def rules_out_refuted(self):
        """Is a candidate its fresh runs contradict ruled out, the race going
        on for another, and are the confirmation's looks counted over the
        campaign (version 5)? Before: such a candidate ended the verdict
        undecided, whatever budget was left."""
        return self.version >= 5

    @property
    def interpolates(self):
        """Are the sign test's bounds (method ranks) interpolated to their
        level (version 4), or the exact order statistic at or below it?"""
        return self.version >= 4

    @property
    def race_alpha(self):
        """The level of the race's eliminations (Decider.behind)."""
        return RACE_ALPHA_V3 if self.version >= 3 else RACE_ALPHA

    @property
    def method_text(self):
        return METHOD_TEXT[self.method]

    def recorded(self):
        """The parts a row and a verdict file record, in order (a legacy rule's as it was written)."""
        return [f.name for f in fields(self) if f.metadata.get("recorded", True)
                and not (self.legacy_disturbed and f.name == "confirm")]

    def text(self):
        """The rule as one CSV cell: key=value pairs joined by ';'."""
        return ";".join(f"{k}={getattr(self, k):g}" if isinstance(getattr(self, k), float) else f"{k}={getattr(self, k)}"
                        for k in self.recorded())

    def to_json(self):
        return {k: getattr(self, k) for k in self.recorded()}

    def with_(self, **changes):
        """The same rule with some parts asked for (None: keep this rule's)."""
        return replace(self, **{k: v for k, v in changes.items() if v is not None})


def parse(text):
    """A Rule from its text (Rule.text) or JSON dict; ValueError naming what is wrong."""
    if isinstance(text, dict):
        parts = {k: str(v) for k, v in text.items()}
    else:
        parts = {}
        for item in str(text).split(";"):
            key, sep, value = item.partition("=")
            if not sep:
                raise ValueError(f"rule {text!r}: expected key=value pairs joined by ';'")
            parts[key.strip()] = value.strip()
    known = {f.name: f.type for f in fields(Rule) if f.metadata.get("recorded", True)}
    unknown = set(parts) - set(known)
    if unknown:
        raise ValueError(f"rule {text!r}: unknown part(s) {', '.join(sorted(unknown))}")
    kinds = {"objective": str, "method": str, "design": str, "version": int, "confirm": lambda v: v in ("True", "1")}
    values = {k: kinds.get(k, float)(v) for k, v in parts.items()}
    if values.get("version", RULE_VERSION) > RULE_VERSION:
        raise ValueError(f"rule version {values['version']}: newer than this threadburn knows ({RULE_VERSION})")
    if values.get("version", RULE_VERSION) < 3:
        values.setdefault("method", "paired")  # before the ranks, the paired t was the method
    return Rule(**values, legacy_disturbed="confirm" not in parts)


def _share(table, look, whole=1.0):
    """The look-th share of a spending table whose shares sum to `whole`:
    its entries, then what is left halving at each look past it."""
    if look <= len(table):
        return table[look - 1]
    return (whole - sum(table)) * 0.5 ** (look - len(table))


def look_of(runs):
    """The index of the look a race takes when its settings have at most
    `runs` runs each: the schedule's entries up to it (at least 1)."""
    return max(1, sum(1 for n in LOOK_SCHEDULE if n <= runs))
