"""A user's command as the subject of a measurement (run, tune): its
options, its environment point, where its files go, and its row."""
import os
import re
from datetime import datetime

from . import paths, probe, schema
from .errors import ThreadburnError


def add_run_options(p):
    p.add_argument("--runtime", choices=schema.RUNTIMES, default="gomp",
                   help="gomp: as the program is built; llvm: LLVM's libomp preloaded in front")
    p.add_argument("--env", action="append", default=[], metavar="VAR=VALUE",
                   help="set a variable for the command (repeatable), e.g. KMP_BLOCKTIME=0; LD_PRELOAD=X puts X after "
                   "the probe, in place of the environment's")
    p.add_argument("--gap-min-ms", type=float, default=1.0,
                   help="a stretch without a region at least this long is a gap (default 1 ms)")
    p.add_argument("--build-dir", help="CMake build dir holding the probe (default: build; a relative one is "
                   "taken from the current folder)")
    p.add_argument("--libomp", default=paths.LIBOMP, type=paths.for_child,
                   help=f"LLVM's OpenMP runtime (default: {paths.LIBOMP})")


def parse_env(items):
    env = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ThreadburnError(f"--env {item!r}: expected VAR=VALUE")
        env[name] = value
    return env


def command_of(args):
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    probe.check_command(cmd)
    return cmd


def probe_extra(args):
    return {"THREADBURN_PROBE_GAP_MIN_US": str(int(args.gap_min_ms * 1000))}


def default_out(kind, cmd):
    """runs/<kind>-<name>-<time>: name is the script an interpreter runs (its
    first argument ending in .py, without it), else the program."""
    script = next((a for a in cmd[1:] if a.endswith(".py")), None) if os.path.basename(cmd[0]).startswith("python") \
        else None
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", os.path.basename(script or cmd[0]).removesuffix(".py"))
    return os.path.join(paths.runs_dir(), f"{kind}-{name}-{datetime.now().strftime('%Y%m%d-%H%M%S')}")


def row_for(report, columns, base):
    """The row of a probed run: base (a records.Row) with the probe's
    counters and context added."""
    row = base.copy()
    row.update({k: v for k, v in report.counters.items() if k in columns.counters})
    context = report.summary.get("context", {})
    row.update({k: v for k, v in context.items() if k in columns.context})
    row.extra_context = ";".join(f"{k}={v}" for k, v in context.items() if k not in columns.context)
    return row


def parse_metric(pattern, text):
    """The user's figure: the last match of pattern in text, its first group
    (or the whole match) as a number; None without one."""
    found = re.findall(pattern, text)
    if not found:
        return None
    last = found[-1]
    try:
        return float(last[0] if isinstance(last, tuple) else last)
    except ValueError:
        return None
