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
a disturbance filter, carry it. --budget 60 (20 runs a setting): on
synthetic runs of this design at 3 % noise (bench/decisions.py's generator)
the rule decides right in 97 % of tunes at 60 runs, 83 % at 45 and 57 % at
30. The loop's length is set first so that a run does ~0.5 s of work (the
interpreter's start-up jitter a few % of it); the run noise the tune met is
printed (of the rounds' paired runs, as the rule compares them: a
drift a round shares cancels); over NOISE_LIMIT (6 %) an undecided verdict is right (at 10 % the
rule's benchmark confirms such a winner in under a third of tunes) and the
round is a skip (exit 77), not a pass: this 2-vCPU VM has phases where the
same loop's user CPU moves 0.24-0.46 s from run to run with no steal
reported. scripts/soak.sh -n 10 -R
tune_hidden runs it ten times quiet and ten times with a core kept busy.
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
TARGET_S = 0.5
# The run noise (of the runs not doubled) up to which the test demands the change: the
# rule's benchmark decides a 10-12 % winner at 3 % noise with invisible slowdowns in 78-89 %
# of tunes, at 10 % in under a third. Above it an undecided verdict is right and the round
# is skipped (check_tune.Skip, exit 77), never passed; a wrong change or a keep fails at any noise.
NOISE_LIMIT = 0.06


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
    print(f"tune_hidden: {n} loop steps a run (~{TARGET_S} s)", flush=True)
    points = [("plain", "gomp", {"HW_N": n}), ("fast", "gomp", {"HW_N": n, "HW_WORK": 0.88}),
              ("same", "gomp", {"HW_N": n, "HW_SAME": 1})]
    out = os.path.join(tmp, "hidden.csv")
    p = threadburn(a, ["tune", "--build-dir", a.build_dir, "--points", write_points(tmp, points), "--budget", "60",
                       "--out", out, "--", PY, path], timeout=900)
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
    if w["verdict"] == "undecided" and spread > NOISE_LIMIT:
        # Not a pass: the rule is rightly undecided where the runs of one setting differ
        # this much (bench/decisions.py: a 10 % winner at 10 % noise is confirmed in 9 % of
        # tunes), and nothing here can make the machine quieter.
        raise Skip(f"the runs' own noise was {spread:.1%} (over {NOISE_LIMIT:.0%}: this machine is hiding "
                   f"more than the test is for), and the tune said undecided, which is right at that noise")
    w = check_verdict(a, p, out, "change", "fast")
    check(w["gain_from"] == "confirmation" and w["confirmation"]["holds"] == "yes",
          f"the gain is not the fresh runs' or does not hold: {w['confirmation']}")
    check(len(rows) <= 60, f"{len(rows)} runs for a budget of 60")
    aside = {s["run_key"] for s in w["set_aside"]}
    check(not doubled & aside, f"doubled runs set aside as disturbed ({sorted(doubled & aside)}): the program's "
          "doubling left evidence, the test no longer shows what it is for")


def main():
    return run_main(__doc__, globals())


if __name__ == "__main__":
    sys.exit(main())
