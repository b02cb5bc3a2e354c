"""argparse types the commands share: each checks one kind of value and
says what it expected (one line, as every error)."""
import argparse

from ..engine import campaign


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def seconds(text):
    """A positive number of seconds (0.3, 2)."""
    try:
        value = float(text)
    except ValueError:
        value = 0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def budget(text):
    try:
        return campaign.parse_budget(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def copies(text):
    """2, 1,2,4 or auto: the copy counts of a host tune."""
    from ..lib import machine
    try:
        return machine.parse_copies(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def margin(text):
    """0.05 or 5%: a fraction in (0, 1)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = 0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1) such as 0.05, or 5%, got {text!r}")
    return value


def add_export_options(p):
    g = p.add_argument_group("exports (to paste into an issue; results/README.md, Exports)")
    g.add_argument("--export-markdown", metavar="FILE", help="also write the verdict and the evidence per setting "
                   "as a Markdown table")
    g.add_argument("--export-json", metavar="FILE", help="also write them as JSON (the verdict file's data, "
                   "with the headline and the rows per setting)")


def write_exports(args, verdicts):
    """The exports args asks for (--export-markdown, --export-json); the paths written."""
    from ..export import jsonfile, markdown
    from ..lib import files
    written = []
    if getattr(args, "export_markdown", None):
        written.append(files.write_text(args.export_markdown, markdown.document(verdicts)))
    if getattr(args, "export_json", None):
        written.append(files.write_text(args.export_json, jsonfile.export_text(verdicts)))
    return written


def add_rule_options(p, recorded=False, objective_default=None):
    """--margin, --objective (and with recorded, --looks): the decision rule's
    parts a command takes; recorded: defaults are what the file recorded;
    objective_default: the command decides the objective itself (None
    unless given), and this says how."""
    from ..lib import rule
    g = p.add_argument_group("the decision rule (docs/design.md, Decisions)")
    default = "the file's recorded rule" if recorded else None
    g.add_argument("--margin", type=margin, default=None if recorded else rule.MARGIN,
                   help=f"practical margin on time and CPU, 0.05 or 5%% (default: {default or f'{rule.MARGIN:g}'})")
    g.add_argument("--objective", choices=rule.OBJECTIVES,
                   default=None if recorded or objective_default else "balanced",
                   help="time (the fastest), cpu (the least CPU), or balanced: the least CPU among the settings not "
                   f"slower than the fastest by the margin (default: {default or objective_default or 'balanced'})")
    if recorded:
        g.add_argument("--looks", type=positive, default=None,
                       help=f"looks the race took (default: {default})")
