"""threadburn list: the programs of this build, as they describe themselves:
their flags (benchmark axes marked), the benchmarks their defaults run, and
every counter they report with its unit and meaning."""
import argparse
import json
import textwrap

from .programs import programs as build_programs


def add_parser(sub):
    p = sub.add_parser("list", help="the programs, their flags, benchmarks and counters",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("program", nargs="?", help="only this program (e.g. train_step)")
    p.add_argument("--counters", action="store_true", help="the counters and what they mean")
    p.add_argument("--json", action="store_true", help="the programs' own descriptions, as JSON")
    p.add_argument("--build-dir", help="CMake build dir holding the programs (default: build)")
    p.set_defaults(run=main)
    return p


def main(args):
    progs = build_programs(args.build_dir)
    if args.program:
        if args.program not in progs:
            from .errors import ThreadburnError
            raise ThreadburnError(f"{args.program}: not a program of this build; expected one of {', '.join(progs)}")
        progs = {args.program: progs[args.program]}
    descriptions = {bench: p.describe() for bench, p in progs.items()}
    if args.json:
        print(json.dumps({b: {"path": progs[b].path, "program": d.program, "family": d.family,
                              "flags": [vars(f) for f in d.flags.values()],
                              "benchmarks": [vars(x) for x in d.benchmarks], "counters": d.counters,
                              "env_knobs": d.env_knobs} for b, d in descriptions.items()}, indent=1))
        return 0
    if args.counters:
        first = next(iter(descriptions.values()))
        width = max(len(c["name"]) for c in first.counters)
        for c in first.counters:
            print(f"{c['name']:<{width}}  {c['unit']:>5}  {c['help']}")
        return 0
    for bench, d in descriptions.items():
        print(f"{bench}  ({progs[bench].path})")
        print("  flags (* = benchmark axis: one benchmark per value; a sweep grid may list any flag):")
        for f in d.flags.values():
            help_text = textwrap.shorten(f.help, 70)
            default = f.default or '""'
            print(f"    {'*' if f.axis else ' '} --{f.name}={default}".ljust(44) + help_text)
        print(f"  benchmarks with the defaults ({len(d.benchmarks)}):")
        for b in d.benchmarks:
            print(f"    {b.name}")
        print()
    print("Counters: threadburn list --counters. Environment knobs read at start-up: "
          + ", ".join(next(iter(descriptions.values())).env_knobs) + ".")
    return 0
