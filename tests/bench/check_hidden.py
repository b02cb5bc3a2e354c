#!/usr/bin/python3
"""`threadburn tune` live on what a machine hides (docs/design.md, Decisions:
rule version 3):

    check_hidden.py tune_hidden --repo DIR --build-dir DIR

A known-answer program does a fixed amount of work (a Python loop of HW_N
steps); under the setting `fast` it does 12 % less (HW_WORK=0.88), under
`same` exactly as much as plain; and in about one run of ten, drawn from its
own random source (os.urandom: nothing /proc/stat or threadburn can see), it
does all of it twice. The tune must change to `fast`, confirmed in fresh
runs, with no evidence to set the doubled runs aside: the rule's ranks, not
a disturbance filter, carry it (the harness reads host counters that never
move, THREADBURN_HOST_STAT, so no run of it carries evidence of other
load). The loop's length is set first so that a run
does ~0.25 s of work; then, as a user on a noisy machine raises --budget, the
test measures the run noise (10 pairs of plain runs) and gives the tune the
runs a setting that noise needs (SIZES: 90 or 110 a setting, from the rule's
benchmark on this very design). The run noise the tune met is printed
(of the rounds' paired runs, as the rule compares them: a drift a round
shares cancels); over its budget's noise limit an undecided verdict is right
and the round is a skip (exit 77), not a pass: this 2-vCPU VM has phases
where the same loop's user CPU moves 0.24-0.46 s from run to run with no
steal reported. scripts/soak.sh -n 10 -R tune_hidden runs it ten times quiet
and ten times with a core kept busy.
Standard library only.
"""
import math
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_tune import (PY, Skip, check, check_verdict, env_clean, read_csv, run_main, threadburn,  # noqa: E402
                        verdict_of, write_points)

HIDDEN = r'''
import os
n = int(float(os.environ["HW_N"]) * float(os.environ.get("HW_WORK", "1")))
times = 2 if os.urandom(1)[0] < 26 else 1   # 26 of 256: about one run in ten, from nothing /proc/stat sees
x = 0
for _ in range(times):
    for i in range(n):
        x += i
'''
# A run's work (s). 0.5 s until the test command had to fit 15 minutes: the run noise at 0.25 s
# and at 0.5 s measured alike here (noise_first, 3 x 10 pairs each: 3.3-9.8 % against 9.9-17.1 %
# in a noisy phase of this VM), and the power is in the runs a setting (SIZES), not their length.
TARGET_S = 0.25
# (measured noise up to, runs a setting, noise limit): the tune's budget for the run noise
# measured first, and the noise (of the tune's own runs) up to which its undecided verdict
# fails the test; above it an undecided verdict is right and the round is skipped
# (check_tune.Skip, exit 77), never passed; a wrong change or a keep fails at any noise.
# From bench/decisions.py's synthetic tune (run_case) of this design: plain, a 12 % winner
# and a setting alike, one run in ten doubled, rule version 5 with its looks capped
# (confirmation.LOOK_MAX_GROWTH), 200 tunes a cell (seeds 5000-5199), right change in:
#     noise    35 a setting    50      70      90      110
#     4.5 %       99 %        99 %    99 %    99 %
#     6 %         95 %        98 %    98.5 %  99 %
#     6.5 %                                   98.5 %  99.5 %
#     7 %         90 %        95 %    98.5 %  98.5 %
#     7.5 %                                   98.5 %  99 %
#     8 %         77.5 %      90.5 %  96 %    97.5 %
#     8.5 %                                   97.5 %  98 %
#     9 %         67.5 %      83 %    92.5 %  96.5 %
# The noise measured first (back-to-back plain runs without the probe) runs below the
# tune's own (its rounds interleave settings under the probe): 3.9 % first, 6.4 % in the
# tune, in one soak round. So 90 a setting up to 4 % first, 110 above, each with a limit
# where the synthetic tune decides at least 97 tunes in 100: a round under its limit
# fails for the rule, not for the machine's luck. The live runs are rougher than the
# model (that round: 19 of 149 runs doubled, the race took 107 runs), hence the room.
# (The sizes were 35 / 50 with limits 8 / 9 %, where one tune in five ends undecided: a
# soak round at 7.4 % noise ended -9.8 % [-16.4 %, -4.0 %] after 48 + 48 fresh runs; then
# 50 / 90 with 6.5 / 8.5 %: the round above, 50 a setting, left 21 + 21 fresh runs,
# -12.4 % [-18.0 %, +6.0 %], and failed.)
SIZES = ((0.04, 90, 0.07), (math.inf, 110, 0.085))
CALIBRATION_PAIRS = 10


def program(tmp):
    path = os.path.join(tmp, "hidden.py")
    with open(path, "w") as f:
        f.write(HIDDEN)
    return path


def loop_steps(path):
    """HW_N for a run of about TARGET_S of work on this machine now: the
    median of 3 timed runs at 10^6 steps (of the runs that were not doubled:
    the shortest 3 of 5)."""
    walls = []
    for _ in range(5):
        t0 = time.monotonic()
        subprocess.run([PY, path], env=env_clean(HW_N="1000000"), check=True)
        walls.append(time.monotonic() - t0)
    per_step = statistics.median(sorted(walls)[:3]) / 1e6
    return int(TARGET_S / per_step)


def noise_first(path, n):
    """The run noise before the tune: CALIBRATION_PAIRS pairs of plain runs,
    each pair's log ratio (a pair with a doubled run left out: one over 1.6 x
    the other); 1.4826 median absolute deviations over sqrt 2, as paired_noise."""
    logs = []
    for _ in range(CALIBRATION_PAIRS):
        walls = []
        for _ in range(2):
            t0 = time.monotonic()
            subprocess.run([PY, path], env=env_clean(HW_N=str(n)), check=True)
            walls.append(time.monotonic() - t0)
        if max(walls) < 1.6 * min(walls):
            logs.append(math.log(walls[0] / walls[1]))
    if len(logs) < 3:
        return math.inf
    m = statistics.median(logs)
    return statistics.median(abs(x - m) for x in logs) * 1.4826 / math.sqrt(2)


def paired_noise(rows, doubled):
    """The run noise the rule meets: it compares two settings' runs of one
    round, so a drift the round shares cancels (this VM's slow phases move
    every run of a round alike). 1.4826 median absolute deviations of the
    rounds' log ratios (each setting against plain, runs not doubled), over
    sqrt 2: one run's share of a pair's spread."""
    rounds = {}
    for r in rows:
        if r["run_key"] not in doubled:
            rounds.setdefault((r["phase"], r["round"]), {})[r["study"]] = float(r["wall_ms"])
    ratios = {}
    for runs in rounds.values():
        for name, v in runs.items():
            if name != "plain" and "plain" in runs:
                ratios.setdefault(name, []).append(math.log(v / runs["plain"]))
    dev = [abs(x - statistics.median(xs)) for xs in ratios.values() for x in xs]
    return statistics.median(dev) * 1.4826 / math.sqrt(2) if len(dev) >= 3 else math.inf


def case_tune_hidden(a, tmp):
    path = program(tmp)
    n = loop_steps(path)
    first = noise_first(path, n)
    _, per_setting, limit = next(size for size in SIZES if first <= size[0])
    budget = 3 * per_setting
    print(f"tune_hidden: {n} loop steps a run (~{TARGET_S} s); run noise first {first:.1%} "
          f"({CALIBRATION_PAIRS} pairs of plain runs): --budget {budget} ({per_setting} a setting), "
          f"undecided fails up to {limit:.0%} noise", flush=True)
    points = [("plain", "gomp", {"HW_N": n}), ("fast", "gomp", {"HW_N": n, "HW_WORK": 0.88}),
              ("same", "gomp", {"HW_N": n, "HW_SAME": 1})]
    out = os.path.join(tmp, "hidden.csv")
    # What the test is for is that the ranks carry the verdict, not the filter that sets aside
    # a run with evidence of other load: the tune reads host counters that never move
    # (THREADBURN_HOST_STAT), so no run has any. (Before, the test re-decided the rows with
    # the evidence erased; where a whole first round had been set aside that re-decision
    # could pick another candidate, one without fresh runs, and fail a right verdict.)
    still = os.path.join(tmp, "host-stat")
    with open(still, "w") as f:
        f.write("cpu  1000 0 1000 100000 0 0 0 0 0 0\n")
    p = threadburn(a, ["tune", "--build-dir", a.build_dir, "--points", write_points(tmp, points), "--budget", str(budget),
                       "--out", out, "--", PY, path], timeout=900, env=env_clean(THREADBURN_HOST_STAT=still))
    _, rows = read_csv(out)
    # The program's own doubling, seen from its rows: a run over 1.6 x its setting's median.
    by = {}
    for r in rows:
        by.setdefault((r["study"], r["phase"]), []).append(r)
    doubled = {r["run_key"] for rs in by.values() for r in rs
               if float(r["wall_ms"]) > 1.6 * statistics.median(float(x["wall_ms"]) for x in rs)}
    spread = paired_noise(rows, doubled)
    print(f"tune_hidden: {len(rows)} runs, {len(doubled)} doubled ({', '.join(sorted(doubled))}); the others' run "
          f"noise {spread:.1%} (of the log ratios of two settings' runs in one round, over sqrt 2)", flush=True)
    check(p.returncode == 0, f"tune exited {p.returncode}")
    w = verdict_of(out)
    if w["verdict"] == "undecided" and spread > limit:
        # Not a pass: the rule is rightly undecided where the runs differ this much for
        # the budget the test gave (SIZES), and nothing here can make the machine quieter.
        raise Skip(f"the runs' own noise was {spread:.1%} (over {limit:.0%} for {per_setting} runs a setting: "
                   f"this machine is hiding more than the test is for), and the tune said undecided, "
                   f"which is right at that noise")
    w = check_verdict(a, p, out, "change", "fast")
    check(w["gain_from"] == "confirmation" and w["confirmation"]["holds"] == "yes",
          f"the gain is not the fresh runs' or does not hold: {w['confirmation']}")
    check(len(rows) <= budget, f"{len(rows)} runs for a budget of {budget}")
    # No run could be set aside: the harness read still counters for other load.
    check(not w["set_aside"], f"runs set aside on evidence the tune could not have: {w['set_aside']}")


PROBE_ONLY = r'''
import os
work = float(os.environ.get("HW_WORK", "1"))
if "THREADBURN_PROBE_DIR" in os.environ:  # under the probe (the race's runs), not in the fresh runs
    work *= float(os.environ.get("HW_PROBED", "1"))
x = 0
for i in range(int(float(os.environ["HW_N"]) * work)):
    x += i
'''
# tune_refuted: runs a setting (a first look of fresh runs may take 30 pairs to contradict
# `probed`, and `fast` needs its own after the race goes on), and the run noise over which an
# undecided verdict is a skip. From bench/decisions.py's synthetic tune of this design
# (plain, probed 0.75 under the probe and 1.0 without, fast 0.85 in time and CPU; 300 tunes a
# cell, seeds 7000-7299), fast confirmed in:
#     noise    50 a setting   70      90
#     4.5 %      98.7 %      100 %
#     5.5 %      89.7 %      98.0 %  99.3 %
#     6.5 %      79.7 %      91.3 %  97.7 %
# 50 a setting failed a fresh-clone CI at 5.1 % noise (probed contradicted after 47 + 47
# fresh runs, 18 + 18 left for fast: -11.1 % [-15.4 %, -3.6 %], undecided); 90 decides at
# least 97 % of the rounds up to the limit.
REFUTED_PER_SETTING = 90
REFUTED_NOISE_LIMIT = 0.06


def case_tune_refuted(a, tmp):
    """A setting 25 % faster only under the probe (HW_PROBED=0.75: the race
    sees it, the fresh runs without the probe do not) beside `fast`, 15 %
    faster everywhere: the race picks `probed`, its fresh runs contradict
    it, the rule (version 5) rules it out and the tune goes back to the race
    with the budget left; `fast` is confirmed. Rule version 4 ended such a
    tune undecided with its budget unspent (bench/decisions.py's synthetic
    tune of this design: 0 of 40 changed; version 5, 97 of 100 at 3 %
    noise)."""
    path = os.path.join(tmp, "probe_only.py")
    with open(path, "w") as f:
        f.write(PROBE_ONLY)
    n = loop_steps(path) * 3 // 5   # ~0.15 s a run
    budget = 3 * REFUTED_PER_SETTING
    points = [("plain", "gomp", {"HW_N": n}), ("probed", "gomp", {"HW_N": n, "HW_PROBED": 0.75}),
              ("fast", "gomp", {"HW_N": n, "HW_WORK": 0.85})]
    out = os.path.join(tmp, "refuted.csv")
    p = threadburn(a, ["tune", "--build-dir", a.build_dir, "--points", write_points(tmp, points), "--budget",
                       str(budget), "--seed", "11", "--out", out, "--", PY, path], timeout=900)
    check(p.returncode == 0, f"tune exited {p.returncode}")
    _, rows = read_csv(out)
    spread = paired_noise(rows, set())
    print(f"tune_refuted: {n} loop steps a run, {len(rows)} runs of a budget of {budget}; run noise {spread:.1%}",
          flush=True)
    w = verdict_of(out)
    refuted = [(c["chosen"], c["holds"]) for c in w.get("refuted", [])]
    probed_fresh = [r for r in rows if r["study"] == "probed" and r["phase"] == "confirm"]
    if w["verdict"] == "undecided" and spread > REFUTED_NOISE_LIMIT:
        # (a soak round at 7.1 %: 70 + 70 fresh runs of probed, -1.2 % [-7.3 %, +1.8 %], could not
        # show it not better by the margin: right, and nothing here makes the machine quieter)
        raise Skip(f"the runs' own noise was {spread:.1%} (over {REFUTED_NOISE_LIMIT:.0%} for "
                   f"{REFUTED_PER_SETTING} runs a setting), and the tune said undecided, which is right at that noise")
    if probed_fresh:  # the race picked it (as it should, but luck may pick fast first): contradicted, ruled out
        # The verdict decides from the whole race: where the runs the race made after ruling probed out
        # put fast ahead of it, fast is the race's pick and probed's fresh runs are never asked
        # (a soak round, a core busy: probed ruled out after 30 + 30, fast confirmed, nothing under
        # "ruled out"); where probed is still the race's pick, its fresh runs rule it out again.
        check(refuted in ([], [("probed", "no")]), f"probed had fresh runs; the verdict's ruled out: {refuted}")
        check("the fresh runs contradict probed: ruled out" in p.stdout, "the tune did not say it ruled probed out")
    w = check_verdict(a, p, out, "change", "fast")
    check(w["confirmation"]["holds"] == "yes" and w["gain_from"] == "confirmation",
          f"fast's gain is not the fresh runs' or does not hold: {w['confirmation']}")
    if probed_fresh:  # its looks come after probed's: the shares probed's left
        probed_look = max(int(r["round"]) // 1000 for r in probed_fresh)
        check(w["confirmation"]["look"] > probed_look,
              f"fast's look {w['confirmation']['look']} does not follow probed's {probed_look}")
    check(len(rows) <= budget, f"{len(rows)} runs for a budget of {budget}")


def main():
    return run_main(__doc__, globals())


if __name__ == "__main__":
    sys.exit(main())
