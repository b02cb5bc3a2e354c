"""The one command line: `threadburn <command> [options]`; `threadburn
<command> --help` for each. Errors are one line on stderr and exit code 2
(errors.ThreadburnError); a run interrupted with Ctrl-C keeps what it wrote.
"""
import argparse
import sys

from .commands import compare, doctor, findings, listing, monitor, plot, report, run, slurm_task, sweep, tune, verdict
from .lib.interpreter import describe as interpreter
from .lib.errors import ThreadburnError
from .lib.schema import SCHEMA_VERSION as SCHEMA
from .lib.procs import Interrupt

DESCRIPTION = """threadburn measures how OpenMP, TBB and oneDNN worker threads behave around
training steps: step time, and the CPU threads keep burning after a step returned.

Start with `threadburn doctor` (what this machine has), `threadburn list` (the
programs, their benchmarks and counters), then `threadburn sweep default`."""


class Parser(argparse.ArgumentParser):
    """argparse with the one error convention: a bad command or flag is one
    line on stderr and exit code 2 (argparse alone prints the usage too).
    Subcommand parsers are of this class as well (add_subparsers)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


class Version(argparse.Action):
    """--version, its line made when asked (it imports scipy for its version: most of a start's cost)."""

    def __call__(self, parser, namespace, values, option_string=None):
        print(f"threadburn (results schema {SCHEMA}) under {interpreter()}")
        parser.exit(0)


def parser():
    p = Parser(prog="threadburn", description=DESCRIPTION,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=Version, nargs=0,
                   help="the results' schema and the python that runs the command (with its scipy)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sweep.add_parser(sub)
    run.add_parser(sub)
    tune.add_parser(sub)
    compare.add_parser(sub)
    plot.add_parser(sub)
    monitor.add_parsers(sub)
    findings.add_parser(sub)
    listing.add_parser(sub)
    doctor.add_parser(sub)
    verdict.add_parser(sub)
    report.add_parser(sub)
    slurm_task.add_parser(sub)
    return p


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    command = argv[0] if argv else ""
    Interrupt.install()
    try:
        if command == "monitor":  # the monitor program's own flags: handed over as they are
            return monitor.record(argv[1:])
        p = parser()
        args = p.parse_args(argv)
        if not getattr(args, "run", None):
            p.print_help()
            return 0 if not argv else 2
        return args.run(args)
    except ThreadburnError as e:
        print(f"threadburn {command}: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `threadburn sweep default --dry-run | head`
        sys.stderr.close()
        return 0
