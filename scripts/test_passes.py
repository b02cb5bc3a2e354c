#!/usr/bin/python3
"""Splits the tests whose labels match a regex into the two passes
scripts/test.sh runs: those that may share the machine (every test that is
not RUN_SERIAL: their checks are of function, or hold under load) and those
that measure time or CPU (RUN_SERIAL). Prints each as a ctest -I list of
test numbers on a line of its own ("0,0,0,3,5,7", or "none").

    ctest --show-only=json-v1 | scripts/test_passes.py '^(unit|bench)$'

ctest numbers the tests in the order of that listing (all tests, no filter).
Standard library only."""
import json
import re
import sys


def passes(doc, label_regex):
    """([test numbers that may share], [test numbers to run alone]) of the tests a label of which matches."""
    pattern = re.compile(label_regex)
    shared, alone = [], []
    for number, test in enumerate(doc.get("tests", []), start=1):
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        if not any(pattern.search(label) for label in props.get("LABELS", [])):
            continue
        (alone if props.get("RUN_SERIAL") else shared).append(number)
    return shared, alone


def ids(numbers):
    return "0,0,0," + ",".join(str(n) for n in numbers) if numbers else "none"


def main():
    shared, alone = passes(json.load(sys.stdin), sys.argv[1])
    print(ids(shared))
    print(ids(alone))


if __name__ == "__main__":
    main()
