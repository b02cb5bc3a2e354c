#!/usr/bin/python3
"""The test command's own time, by label, from the logs of runs of it
(`bash .ci/run > LOG 2>&1` on fresh clones; each log's last lines are the
shell's `time` of it, `real XmY.Zs`, or /usr/bin/time's `M:SS.sselapsed`, and `rc=N`):

    bench/suite_times.py --build-dir BUILD LOG [LOG...] [--out results/suite-times.csv]

For each log, one row per label (the labels from BUILD's ctest listing: a
test of several labels counts in each): the tests run, passed and skipped,
the sum of their own times; then a row per pass of scripts/test.sh (its
"== <group>: N s" lines and the time of each ctest run in it), and one for
the whole command (`real`) with the time outside ctest (setup, configure,
compile) by difference. Standard library only."""
import argparse
import collections
import csv
import json
import os
import re
import subprocess
import sys

TEST_LINE = re.compile(r"Test +#\d+: (\S+) \.*\**\s*(Passed|Failed|\*\*\*Failed|Not Run|\*\*\*Skipped|Skipped)?"
                       r".*?([\d.]+) sec")
PASS_LINE = re.compile(r"^== ctest (.*)$")
TOTAL_LINE = re.compile(r"Total Test time \(real\) = +([\d.]+) sec")
GROUP_LINE = re.compile(r"^== (\S+): (\d+) s$")
REAL_LINE = re.compile(r"^real\s+(\d+)m([\d.]+)s$")
# /usr/bin/time's own line (a `time` run by sh, which has no such keyword): "... 14:41.52elapsed ...".
ELAPSED = re.compile(r"\b(?:(\d+):)?(\d+):([\d.]+)elapsed\b")


def labels_of(build_dir):
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=build_dir, capture_output=True, text=True,
                         check=True).stdout
    labels = {}
    for t in json.loads(out)["tests"]:
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        labels[t["name"]] = props.get("LABELS", []) or ["(none)"]
    return labels


def read_log(path):
    """(per test: (status, seconds), [(pass, seconds)], [(group, seconds)], real seconds or None, rc)."""
    tests, passes, groups, real, rc, current = {}, [], [], None, None, None
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = PASS_LINE.match(line)
            if m:
                current = m.group(1)
                continue
            m = TEST_LINE.search(line)
            if m:
                status = "skipped" if "Skipped" in line or "Not Run" in line else \
                    "failed" if "Failed" in line else "passed"
                tests[m.group(1)] = (status, float(m.group(3)))
                continue
            m = TOTAL_LINE.search(line)
            if m and current:
                passes.append((current, float(m.group(1))))
                current = None
                continue
            m = GROUP_LINE.match(line)
            if m:
                groups.append((m.group(1), float(m.group(2))))
                continue
            m = REAL_LINE.match(line)
            if m:
                real = 60 * int(m.group(1)) + float(m.group(2))
                continue
            m = ELAPSED.search(line)
            if m:
                real = 3600 * int(m.group(1) or 0) + 60 * int(m.group(2)) + float(m.group(3))
                continue
            if line.startswith("rc="):
                rc = int(line[3:])
    return tests, passes, groups, real, rc


def rows_of(run, path, labels):
    tests, passes, groups, real, rc = read_log(path)
    by = collections.defaultdict(lambda: collections.Counter())
    for name, (status, seconds) in tests.items():
        for label in labels.get(name, ["(unknown)"]):
            by[label][status] += 1
            by[label]["seconds"] += seconds
    out = []
    for label in sorted(by):
        c = by[label]
        out.append([run, "label", label, c["passed"] + c["failed"] + c["skipped"], c["passed"], c["failed"],
                    c["skipped"], round(c["seconds"], 1)])
    for what, seconds in passes:
        out.append([run, "ctest", what, "", "", "", "", round(seconds, 1)])
    for group, seconds in groups:
        out.append([run, "group", group, "", "", "", "", seconds])
    if real is not None:
        inside = sum(s for _, s in groups)
        out.append([run, "outside ctest", "setup, configure, compile", "", "", "", "", round(real - inside, 1)])
        out.append([run, "whole", f"bash .ci/run (exit {rc})", len(tests), "", "", "", round(real, 1)])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--build-dir", required=True, help="a build of the same tree (its ctest listing gives the labels)")
    ap.add_argument("--out", help="CSV to write (default: stdout)")
    a = ap.parse_args()
    labels = labels_of(a.build_dir)
    rows = []
    for i, path in enumerate(a.logs, start=1):
        rows += rows_of(f"run {i}", path, labels)
    f = open(a.out, "w", newline="") if a.out else sys.stdout
    w = csv.writer(f, lineterminator="\n")
    w.writerow(["run", "kind", "what", "tests", "passed", "failed", "skipped", "seconds"])
    w.writerows(rows)
    if a.out:
        f.close()
        print(f"suite_times: wrote {os.path.abspath(a.out)}")


if __name__ == "__main__":
    main()
