"""threadburn verdict CSV: the decision for every workload of a results file
(a sweep's or a tune's), recomputed from its rows alone by the rule they
recorded (the `rule` column; older files: their <stem>.verdict.json's, else
the defaults, said): change / keep / undecided against the baseline (the
default environment in a sweep, plain in a tune), the evidence, and a
change's confirmation by the fresh runs in the file; <stem>.verdict.json
beside the CSV unless --no-write; --export-markdown FILE and --export-json
FILE add the verdict and a row per setting to paste into an issue.
--baseline FLAG=VALUE,... judges a sweep's settings against another baseline
than the default: the setting with those setting flags (the rest at their
defaults), for a file whose grid ran no default feed, or to ask "I already
preload: which wait policy?". Exit
status: 0 when every workload is decided, 3 when one is undecided
(--require-decision makes CI gate on it), 2 on bad input.
"""
import argparse
import os

from . import options
from ..analysis import verdicts
from ..export import jsonfile, text
from ..lib import files, keys, paths, records, rule as rules
from ..lib.errors import ThreadburnError

UNDECIDED_EXIT = 3


def add_parser(sub):
    p = sub.add_parser("verdict", help="the decision for each workload of a results CSV, recomputed",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", help="a results CSV of threadburn sweep or tune")
    options.add_rule_options(p, recorded=True)
    p.add_argument("--baseline", metavar="FLAG=VALUE,...", type=baseline_arg,
                   help="a sweep: compare with the setting whose setting flags have these values (the others at "
                        "their baseline) instead of the default; with it no .verdict.json is written unless --write")
    p.add_argument("--write", action="store_true", help="with --baseline: write the .verdict.json all the same")
    p.add_argument("--no-write", action="store_true", help="print only; write no .verdict.json")
    p.add_argument("--require-decision", action="store_true",
                   help=f"exit {UNDECIDED_EXIT} when a workload is undecided (for CI)")
    options.add_export_options(p)
    p.set_defaults(run=main)
    return p


def baseline_arg(text):
    """--baseline preload=1,workers=0 as {flag: value}."""
    out = {}
    for item in text.split(","):
        flag, sep, value = item.partition("=")
        if not sep or not flag or not value:
            raise argparse.ArgumentTypeError(f"expected FLAG=VALUE[,FLAG=VALUE...], got {text!r}")
        out[flag] = value
    return out


def check_baseline(path, rows, baseline):
    """Every flag of --baseline is a setting flag of the file's rows (keys.Layout.setting_flags)."""
    known = {k for r in rows for k, _ in keys.layout(r).setting_flags}
    for flag in baseline:
        if flag not in known:
            raise ThreadburnError(f"--baseline {flag}: not a setting flag of {path} (its setting flags: "
                                  f"{', '.join(sorted(known)) or 'none'})")


def of_file(path, args):
    """The Verdicts of a results CSV, by its recorded rule and what args ask."""
    rows = records.read_rows(path, required=("status", "run_key"))
    asked = {"objective": args.objective, "margin": args.margin, "looks": args.looks}
    baseline = getattr(args, "baseline", None)
    if baseline:
        check_baseline(path, rows, baseline)
    return verdicts.decide_rows(rows, os.path.basename(path), asked, files.recorded_rule(path), paths.LIBOMP,
                                baseline=baseline)


def rule_notes(v, recorded_file):
    """Lines that say plainly when the rule applied is not this threadburn's
    own, or not the one the file was made by (its rows, or its verdict file)."""
    out = []
    r = v.rule
    asked = " with --" in v.rule_from
    if r.version != rules.RULE_VERSION and v.rule_from.startswith(("the rows", "its verdict file")) and not asked:
        out.append(f"verdict: judged by rule version {r.version}, as {v.rule_from} recorded it, the rule the file was "
                   f"made by (this threadburn's own is version {rules.RULE_VERSION}; docs/design.md, Decisions)"
                   + ("; its text predates `confirm`: disturbed runs judged against the whole file's median run, "
                      "as its code did" if r.legacy_disturbed else ""))
    if asked:
        out.append(f"verdict: not the rule the file was made by: {v.rule_from} ({r.text()})")
    elif recorded_file is not None and v.rule_from.startswith("the rows") and recorded_file.text() != r.text():
        out.append(f"verdict: its verdict file recorded another rule ({recorded_file.text()}) than its rows "
                   f"({r.text()}): the rows' is applied")
    return out


def main(args):
    v = of_file(args.csv, args)
    print("\n".join(text.lines(v) + rule_notes(v, files.recorded_rule(args.csv))))
    if not args.no_write and (args.write or not args.baseline):
        print(f"verdict: {files.write_text(files.verdict_path(args.csv), jsonfile.verdict_text(v))}")
    for path in options.write_exports(args, v):
        print(f"verdict: {path}")
    return UNDECIDED_EXIT if v.undecided and args.require_decision else 0

