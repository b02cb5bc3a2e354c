"""threadburn verdict CSV: the decision for every workload of a results file
(a sweep's or a tune's), recomputed from its rows by the rule of decide.py:
change / keep / undecided against the baseline (the default environment in
a sweep, plain in a tune), with the evidence; <stem>.verdict.json beside
the CSV unless --no-write; --export-markdown FILE and --export-json FILE
add the verdict and a row per setting to paste into an issue. Exit status:
0 when every workload is decided, 3 when one is undecided
(--require-decision makes CI gate on it), 2 on bad input.
"""
import argparse

from . import options
from ..analysis import decide, results, verdicts

UNDECIDED_EXIT = 3


def add_parser(sub):
    p = sub.add_parser("verdict", help="the decision for each workload of a results CSV, recomputed",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", help="a results CSV of threadburn sweep or tune")
    p.add_argument("--margin", type=options.margin,
                   help="practical margin on time and CPU (default: the one the file's verdict.json records, "
                   f"else {decide.MARGIN:.2f}, i.e. {decide.MARGIN * 100:.0f} %%)")
    p.add_argument("--objective", choices=decide.OBJECTIVES,
                   help="time, cpu, or balanced: the least CPU among the fastest (default: as recorded, else "
                   "balanced)")
    p.add_argument("--looks", type=options.positive, default=None,
                   help="looks the race took (default: the file's verdict.json says, else 1)")
    p.add_argument("--no-write", action="store_true", help="print only; write no .verdict.json")
    p.add_argument("--require-decision", action="store_true",
                   help=f"exit {UNDECIDED_EXIT} when a workload is undecided (for CI)")
    verdicts.add_export_options(p)
    p.set_defaults(run=main)
    return p


def main(args):
    rows = results.read_rows(args.csv, required=("status", "run_key"))
    objective, margin, looks, recorded = verdicts.rule_of(args.csv, args.objective, args.margin, args.looks)
    entries = verdicts.decide_all(rows, objective, margin, looks=looks)
    print("\n".join(verdicts.text(entries)))
    extra = {k: v for k, v in recorded.get("file", {}).items() if k == "confirmation"}
    data = verdicts.to_json(entries, args.csv, extra=extra)
    if not args.no_write:
        print(f"verdict: {verdicts.write_json(args.csv, data)}")
    for path in verdicts.write_exports(args, entries, data):
        print(f"verdict: {path}")
    undecided = [e for e in entries if not e.decision.decided]
    return UNDECIDED_EXIT if undecided and args.require_decision else 0
