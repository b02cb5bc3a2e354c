"""The preload probe (src/probe/probe.cc) from the Python side: how a command
is started under it, and what it wrote.

The probe is a shared library put in front with LD_PRELOAD; it writes
probe-<pid>.json (+ .timeline.csv, .gaps.csv) into
THREADBURN_PROBE_DIR for every process of the command that loaded it (a
forked child that does not exec is measured by its parent, as its
cpu_children_ms; a child that execs writes its own files). For
the llvm runtime, LLVM's libomp is preloaded right after it, so the probe's
GOMP_parallel forwards to libomp.

The CUDA host wait policy (docs/cuda.md): the probe reads THREADBURN_CUDA_SYNC
and sets it on the driver before the program's first CUDA call, and reports
what was in force (context cuda_sync_*, cuda_used); without the probe (tune's
fresh runs) libthreadburn_cuda_sync.so, preloaded, does the same.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field

from . import knobs, paths, schema
from .errors import ThreadburnError
# The CUDA wait policy's variable (the probe reads it too) and its library: paths.py's.
from .paths import CUDA_SYNC, CUDA_SYNC_LIBRARY, cuda_sync_library  # noqa: F401

PROBE_LIBRARY = "libthreadburn_probe.so"
# The value that leaves the driver's own policy alone (what the probe reports when unset).
CUDA_SYNC_AUTO = "auto"


def library(build=None):
    return paths.find_library(PROBE_LIBRARY, build)


def sets_cuda_sync(env):
    """Does this environment ask for a CUDA wait policy (THREADBURN_CUDA_SYNC
    set, and not to auto)?"""
    return env.get(CUDA_SYNC, CUDA_SYNC_AUTO) not in ("", CUDA_SYNC_AUTO, schema.UNSET)


def used_cuda(row):
    """Did the probed process of this row load the CUDA driver (its context
    cuda_used: libcuda.so.1 was loaded)?"""
    return row.cuda_used == "1"


def check_command(cmd):
    """Refuses a command that cannot start, before anything runs."""
    if not cmd:
        raise ThreadburnError("no command: give it after --, e.g. -- python3 train.py")
    exe = cmd[0]
    path = exe if "/" in exe else shutil.which(exe)
    if not path or not os.path.exists(path):
        raise ThreadburnError(f"{exe}: command not found")
    if not os.access(path, os.X_OK) or os.path.isdir(path):
        raise ThreadburnError(f"{exe}: not an executable file")
    return path


def environment(base, probe_lib, out_dir, runtime="gomp", env=None, libomp=paths.LIBOMP, extra=None, cuda_lib=None,
                phase_lib=None):
    """The command's environment: base, minus the knobs the point leaves unset,
    plus the point's knobs, the probe (and libomp for llvm) in front. With
    probe_lib None: the same setting without the probe (tune's confirmation);
    a CUDA wait policy then needs cuda_lib (libthreadburn_cuda_sync.so)
    preloaded, which sets it as the probe would; phase_lib
    (libthreadburn_phase.so), when given, marks the run's phases into out_dir
    (phase_of)."""
    out = dict(base)
    for k, v in (env or {}).items():
        if v == schema.UNSET:
            out.pop(k, None)
        else:
            out[k] = v
    preload = ([probe_lib] if probe_lib else [phase_lib] if phase_lib else []) + knobs.preloads(runtime, libomp)
    if not probe_lib and sets_cuda_sync(out):
        if not cuda_lib:
            raise ThreadburnError(f"{CUDA_SYNC}={out[CUDA_SYNC]} without the probe needs {CUDA_SYNC_LIBRARY} "
                                  "preloaded: build it (scripts/build.sh) or pass --build-dir")
        preload.append(cuda_lib)
    # Absolute (paths.for_child): the command may change directory before it execs what it runs.
    preload = [paths.for_child(p) for p in preload]
    # The user's own preload after ours: the environment's, or the setting's (run --env LD_PRELOAD=...), which
    # replaces it as any variable the setting gives does (a setting that unsets it: none).
    if out.get("LD_PRELOAD"):
        preload.append(out["LD_PRELOAD"])
    if preload:
        out["LD_PRELOAD"] = " ".join(preload)
    if probe_lib:
        out["THREADBURN_PROBE_DIR"] = paths.for_child(out_dir)
        out.update(extra or {})
    elif phase_lib:
        out[PHASE_DIR] = paths.for_child(out_dir)
    return out


# The phase mark of a run without the probe (src/probe/phase_mark.cc).
PHASE_LIBRARY = "libthreadburn_phase.so"
PHASE_DIR = "THREADBURN_PHASE_DIR"
# Its figures, each the probe's counter of the same name (and startup_ends, its context key).
PHASE_FIGURES = ("startup_ms", "startup_cpu_ms", "steady_ms", "steady_cpu_ms", "sync_wait_ms", "sync_cpu_ms", "syncs",
                 "launches", "launch_ms", "launch_cpu_ms")


def phase_library(build=None):
    return paths.find_library(PHASE_LIBRARY, build)


def phase_of(out_dir):
    """The phases the mark wrote in out_dir, as cells of a row (its figures,
    startup_ends and steady_from): the process that did device work (the first one, by
    pid, in a command of several), else the first; {} when none wrote."""
    found = []
    for path in sorted(glob.glob(os.path.join(out_dir, "phase-*.json"))):
        try:
            with open(path) as f:
                found.append(json.load(f))
        except (OSError, ValueError) as e:
            raise ThreadburnError(f"{path}: unreadable phase mark ({e})") from None
    if not found:
        return {}
    mark = next((m for m in found if m.get("startup_ends") == "device"), found[0])
    return {"startup_ends": mark.get("startup_ends", "none"), "steady_from": mark.get("steady_from", "none"),
            **{k: mark.get(k) for k in PHASE_FIGURES}}


@dataclass
class Report:
    """One probed process."""
    pid: int
    path: str
    summary: dict
    # The command's other probed processes (exec'd children, a wrapper such as
    # `sh -c` or /usr/bin/time): main_report folds their CPU into this one's.
    others: list = field(default_factory=list)

    @property
    def counters(self):
        return self.summary["counters"]

    @property
    def regions(self):
        return int(self.counters.get("regions", 0))

    def file(self, suffix):
        return self.path.removesuffix(".json") + suffix


def field_at(text, pos):
    """The key of the JSON field around character pos of text (the last
    '"key":' that begins before it), or "?" where none does."""
    start = text.rfind('":', 0, pos + 1)
    while start > 0:
        begin = text.rfind('"', 0, start)
        key = text[begin + 1:start]
        if begin >= 0 and '"' not in key and "\\" not in key:
            return key
        start = text.rfind('":', 0, begin)
    return "?"


def replaced_fields(value, where=""):
    """The dotted paths of the strings (keys included) of a parsed summary
    that hold U+FFFD: bytes that were not UTF-8, replaced by the probe's JSON
    writer or by load_summary."""
    if isinstance(value, str):
        return [where or "?"] if "\ufffd" in value else []
    found = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        path = f"{where}.{k}" if where else str(k)
        if isinstance(k, str) and "\ufffd" in k:
            found.append(path)
        found += replaced_fields(v, path)
    return found


def load_summary(path, warn=None):
    """One probe summary. A field whose bytes are not UTF-8 (a probe older
    than its writer's replacement of them, a damaged file) does not make the
    summary unreadable: its bytes are replaced by U+FFFD and warn (default:
    a line on stderr) names the field, so that the rest is read; a raw
    control character inside a string is taken as it is. A file that is not
    JSON at all (cut short, not a summary) is a ThreadburnError that says
    where, and in which field, reading stopped."""
    if warn is None:
        def warn(msg):
            print(f"threadburn: warning: {msg}", file=sys.stderr)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise ThreadburnError(f"{path}: unreadable probe summary ({e})") from None
    text = raw.decode("utf-8", errors="replace")
    try:
        summary = json.loads(text, strict=False)
    except json.JSONDecodeError as e:
        raise ThreadburnError(f"{path}: unreadable probe summary ({e.msg} at line {e.lineno} column {e.colno}, "
                              f"in or after the field {field_at(text, e.pos)!r})") from None
    if not isinstance(summary, dict):
        raise ThreadburnError(f"{path}: unreadable probe summary (a JSON {type(summary).__name__}, not an object)")
    bad = replaced_fields(summary)
    if bad:
        warn(f"{path}: bytes that are not UTF-8 in {', '.join(bad)}: shown as U+FFFD; the rest of the summary is read")
    return summary


def reports(out_dir, warn=None):
    """Every probe-<pid>.json in out_dir, most regions first."""
    found = []
    for path in glob.glob(os.path.join(out_dir, "probe-*.json")):
        summary = load_summary(path, warn)
        found.append(Report(int(summary.get("pid", 0)), path, summary))
    return sorted(found, key=lambda r: (-r.regions, r.pid))


def main_report(out_dir, cmd):
    """The process of the command that ran OpenMP regions (the most; without
    any, as in a single-threaded program or a GPU training that starts no
    OpenMP team, the one that used the most CPU), or a one-line reason why
    there is none (the probe did not load)."""
    found = reports(out_dir)
    if not found:
        raise ThreadburnError(f"the probe did not load into {cmd[0]}: a statically linked or setuid "
                              "program cannot be probed (LD_PRELOAD is ignored)")
    if found[0].regions == 0:
        return with_others(max(found, key=lambda r: r.counters.get("cpu_ms", 0)), found)
    return with_others(found[0], found)


def with_others(main, found):
    """The main process's report, its cpu_ms and cpu_children_ms grown by the
    CPU of the command's other probed processes: cpu_ms is then the whole
    command's CPU (what tune's CPU objective compares)."""
    main.others = [r for r in found if r is not main]
    extra = sum(r.counters.get("cpu_ms", 0) for r in main.others)
    if extra:
        c = main.summary["counters"]
        c["cpu_ms"] = c.get("cpu_ms", 0) + extra
        c["cpu_children_ms"] = c.get("cpu_children_ms", 0) + extra
    return main


def command_totals(report):
    """{command line: (processes, CPU ms)} over the probed processes of a
    main_report (each process with its forked workers), the main one first."""
    others_ms = sum(o.counters.get("cpu_ms", 0) for o in report.others)
    rows = [(report.summary.get("command", "?"), report.counters.get("cpu_ms", 0) - others_ms)]
    rows += [(o.summary.get("command", "?"), o.counters.get("cpu_ms", 0)) for o in report.others]
    totals = {}
    for command, cpu in rows:
        n, total = totals.get(command, (0, 0.0))
        totals[command] = (n + 1, total + cpu)
    return totals


def workers_ms(report):
    """The CPU of the main process's own forked worker processes (cpu_children_ms
    without the other probed processes main_report added to it)."""
    return report.counters.get("cpu_children_ms", 0) - sum(o.counters.get("cpu_ms", 0) for o in report.others)


def describe(build=None):
    """The probe's counters and context keys, from the library itself."""
    lib = library(build)
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, LD_PRELOAD=lib, THREADBURN_PROBE_DIR=tmp, THREADBURN_PROBE_DESCRIBE="1")
        subprocess.run(["true"], env=env, check=False)
        try:
            with open(os.path.join(tmp, "describe.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            raise ThreadburnError(f"{lib}: wrote no description; is it a threadburn probe of this version?") from None


def result_column(name):
    """The results column that records the variable `name` a setting sets:
    the knob table's (Knob.column: an environment knob's own name, cuda_sync
    for the CUDA wait policy, none for LD_PRELOAD); a variable outside the
    table (the user's own) has a column of its own name."""
    knob = knobs.get(name)
    if knob is None:
        return name
    column = getattr(knob, "column", knob.name if knob.is_column else None)  # (a table without Knob.column)
    return None if column in (None, "", knobs.NONE) else column


def cuda_sync_column(description):
    """The column of the CUDA wait policy a setting asks for (the knob
    table's), when the probe reports the policy in force; else None."""
    knob = knobs.get(CUDA_SYNC)
    if knob is None or knob.in_force not in description["context"]:
        return None
    return result_column(CUDA_SYNC)


def columns(description, variables, params=()):
    """The CSV header of runs of a command under the probe: the sweep's
    layout with one knob flag, `command`, the probe's counters plus `metric`
    (the user's figure), and the probe's context; the environment knob
    columns of the variables the settings set; the CUDA wait policy's column
    (cuda_sync) when the probe can set it; with a tune's --param names, a
    column param_<NAME> each."""
    counters = [c["name"] for c in description["counters"]] + ["metric"]
    env = [v for v in variables if result_column(v) == v]
    cuda = cuda_sync_column(description)
    flags = ("command", "metric_better") + ((cuda,) if cuda else ())
    return schema.Columns.from_parts(env or ["OMP_NUM_THREADS"], flags, counters, list(description["context"]), params)


# The columns of an in-run tune's blocks beyond a tune's (engine/exec_inrun.py).
INRUN_FLAGS = ("progress",)
INRUN_FIGURES = ("settle_ms", "block_ms", "units", "unit_ms", "unit_cpu_ms")


def inrun_columns(description, variables):
    """The CSV header of an in-run tune: a tune's (columns) with what a block adds."""
    counters = [c["name"] for c in description["counters"]] + ["metric"] + list(INRUN_FIGURES)
    env = [v for v in variables if result_column(v) == v]
    cuda = cuda_sync_column(description)
    flags = ("command", "metric_better") + ((cuda,) if cuda else ()) + INRUN_FLAGS
    return schema.Columns.from_parts(env or ["OMP_NUM_THREADS"], flags, counters, list(description["context"]), ())


def setting_cells(columns, env):
    """The knob cells of a row: what the process got (results/README.md):
    each environment knob's value or unset, and the CUDA wait policy it
    asked for (auto: threadburn left the driver's own)."""
    cells = {k: env.get(k, schema.UNSET) for k in columns.env_knobs}
    cuda = result_column(CUDA_SYNC)
    if cuda in columns.flags:
        cells[cuda] = env[CUDA_SYNC] if sets_cuda_sync(env) else CUDA_SYNC_AUTO
    return cells
