#!/usr/bin/python3
"""The analysis time of one look of a tune's race on a 2,000-run file:
re-reading the results CSV at every look (how tune worked before its runs
were kept in memory) against the runs in memory (analysis/runlog.py,
RunLog: the run just appended made a record, the rest already are).
Writes results/look_time.csv.

    bench/look_time.py [--runs 2000] [--settings 8] [--repetitions 7] [--out results/look_time.csv]

The file: a tune's header (the preload probe's counters and context, as
tests/python/fixtures/gpu_probe/describe.json describes them) and --runs
runs of --settings synthetic settings of known truth (bench/decisions.py's
Synthetic executor: setting i takes 1 - 0.01 i of the baseline's time, 2 %
run noise, seed 1), written by the run engine (engine/campaign.py) as a
tune writes them. Its rows carry the figures the rule reads, not the
probe's counters a real tune's rows fill too: a real 2,000-run file is
larger and slower to read, so the old way's figure here is a lower bound.
A look is what the run engine asks the race at each of
its looks (analysis/race.py, Race()): the verdicts on the runs so far and
the settings the next round needs.

  old  read the CSV (records.read_rows), make every run's record
       (records.run_records), decide (the race's look on those records)
  new  append one run to the log (its record made), decide on the log's
       records (the log holds the other runs already)

Each repetition times the parts of one look; the CSV has the median over
the repetitions of each part and of the whole look, and its min and max.
The decision is the same work both ways (the same records): the gain is
the read and the records."""
import argparse
import csv
import json
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "python"))
sys.path.insert(0, HERE)

import decisions  # noqa: E402  (its synthetic settings and executor)
from threadburn.analysis import race as races, runfigures, runlog  # noqa: E402
from threadburn.engine import campaign  # noqa: E402
from threadburn.lib import probe, records, rule as rules  # noqa: E402

DESCRIBE = os.path.join(REPO, "tests", "python", "fixtures", "gpu_probe", "describe.json")
LIBOMP = "libomp.so.5"
FIELDS = ("way", "runs", "settings", "file_mb", "repetitions", "read_ms", "records_ms", "decide_ms", "look_ms",
          "look_min_ms", "look_max_ms")


def write_file(path, n_runs, n_settings):
    """A tune's results file of n_runs runs of n_settings settings; (items by key, rule)."""
    with open(DESCRIBE) as f:
        columns = probe.columns(json.load(f), ["OMP_NUM_THREADS"])
    rule = rules.Rule()
    results_file = records.ResultsFile(path, columns, rule)
    results_file.create()
    truths = [decisions.Truth("plain", 1.0)] + [decisions.Truth(f"s{i}", 1 - 0.01 * i) for i in range(1, n_settings)]
    items = {t.name: decisions.Item(t) for t in truths}
    ex = decisions.Synthetic(random.Random(1), 0.02, 0.0, 0.0, n_runs)
    c = campaign.Campaign(ex, results_file, 1, say=lambda *a, **k: None)
    each = -(-n_runs // n_settings)
    c.run(items.values(), {k: each for k in items})
    return items, rule


def timed(f):
    t0 = time.perf_counter()
    value = f()
    return value, (time.perf_counter() - t0) * 1000


def old_look(path, items, rule):
    """(read, records, decide) ms of a look that reads the file."""
    rows, read_ms = timed(lambda: records.read_rows(path))
    recs, records_ms = timed(lambda: records.run_records(rows, LIBOMP, runfigures.of_run))
    _, decide_ms = timed(races.Race(lambda: recs, items, rule, path))
    return read_ms, records_ms, decide_ms


def new_looks(path, items, rule, repetitions):
    """[(0, records, decide) ms] of looks on the runs in memory, each after
    appending one run: the log holds the file's runs but the last
    `repetitions`, the look i appends run i of those (the last look sees
    every run)."""
    rows = records.read_rows(path)
    runs = list(dict.fromkeys(r.run_key for r in rows))
    later = set(runs[-repetitions:])
    log = runlog.RunLog(LIBOMP, [r for r in rows if r.run_key not in later])
    race = races.Race(log.records, items, rule, path)
    out = []
    for key in runs[-repetitions:]:
        run = [r for r in rows if r.run_key == key]
        _, records_ms = timed(lambda: log.append(run))
        _, decide_ms = timed(race)
        out.append((0.0, records_ms, decide_ms))
    return out


def summary(way, parts, n_runs, n_settings, size):
    looks = [sum(p) for p in parts]
    return {"way": way, "runs": n_runs, "settings": n_settings, "file_mb": round(size / 1e6, 2),
            "repetitions": len(parts),
            **{k: round(statistics.median(p[i] for p in parts), 2)
               for i, k in enumerate(("read_ms", "records_ms", "decide_ms"))},
            "look_ms": round(statistics.median(looks), 2), "look_min_ms": round(min(looks), 2),
            "look_max_ms": round(max(looks), 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--settings", type=int, default=8)
    ap.add_argument("--repetitions", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(REPO, "results", "look_time.csv"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tune.csv")
        items, rule = write_file(path, a.runs, a.settings)
        size = os.path.getsize(path)
        n_runs = len({r.run_key for r in records.read_rows(path)})
        old = [old_look(path, items, rule) for _ in range(a.repetitions)]
        new = new_looks(path, items, rule, a.repetitions)
    rows = [summary("old", old, n_runs, a.settings, size), summary("new", new, n_runs, a.settings, size)]
    with open(a.out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    for r in rows:
        print(f"{r['way']}: a look on {r['runs']} runs ({r['file_mb']} MB): {r['look_ms']} ms (median of "
              f"{r['repetitions']}; {r['look_min_ms']} to {r['look_max_ms']}): read {r['read_ms']}, records "
              f"{r['records_ms']}, decide {r['decide_ms']}")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
