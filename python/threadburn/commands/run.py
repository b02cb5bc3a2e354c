"""threadburn run: one run of your own program under the preload probe.

    threadburn run [--runtime llvm] [--env KMP_BLOCKTIME=0 ...] -- python3 train.py --epochs 1

Runs the command with libthreadburn_probe.so preloaded (and LLVM's libomp
behind it with --runtime llvm), exactly as it would run otherwise, then
prints what its threads did: every OpenMP parallel region it started, the
CPU of its OpenMP workers inside regions and between them (the burn between
regions), each gap without a region (a sleep, a wait for data or a GPU) with
the burn and the tail in it, and the settings the runtime really used. Files
go to --out (default runs/run-<command>-<time>/): the probe's files per
process, run.csv (one tidy row, the schema of results/README.md) and
timeline.png.

On a GPU training (a process that loaded the CUDA driver) it adds each
sampled GPU's busy share (NVML's utilisation: the share of each driver
sample period in which a kernel ran), the CUDA host wait policy asked
(--env THREADBURN_CUDA_SYNC=spin|yield|blocking_sync) and in force, the CPU
of the CUDA driver's threads and of the pin-memory thread, the main
thread's share of a core, the time and CPU of every thread inside the
driver's waits for the device, its kernel launches, and advice from those
causes: sync-bound, host-bound, loader-bound (analysis/advice.py,
docs/cuda.md). The report leads with the steady phase (from the first
device work, or the first OpenMP region in a program without any, to the
end) and says the startup before it in one line. A program that starts no
OpenMP team gets the same report, its regions said to be none.

Where the kernel allows it (root: --exact auto), threadburn_monitor's exact
mode records the command too (monitor.csv, monitor.intervals.csv,
monitor.gaps.csv, its summary in monitor.txt): the run-queue wait of each
class of thread by who held the CPU meanwhile, and the waits the command's
threads caused in other processes (docs/monitor.md). The probe reports each
class's wait in any case (from schedstat).
"""
import argparse
import os
import shutil
import sys

from ..export import figures, run_report
from ..lib import intervals, launch, probe, schema
from ..lib.procs import describe_exit
from ..lib.records import ResultsFile, Row
from ..lib.usercmd import add_run_options, command_of, default_out, parse_env, probe_extra, row_for
from ..lib.errors import ThreadburnError


def add_parser(sub):
    p = sub.add_parser("run", help="run your own program under the probe: every OpenMP region, burn between them",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_run_options(p)
    p.add_argument("--out", help="folder for the files (default: runs/run-<command>-<time>/)")
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--no-plot", action="store_true", help="make no timeline plot")
    p.add_argument("--exact", choices=("auto", "on", "off"), default="auto",
                   help="also record the command with the monitor's exact mode (who held the CPU its threads "
                        "waited for, the waits they caused others): auto (where allowed), on (or an error), off")
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    p.set_defaults(run=main)
    return p


def plot_timeline(report, path):
    figures.timeline_figure(figures.pyplot(), [("", report.file(".timeline.csv"))],
                            f"{report.summary.get('command', '')[:100]}\n(sampled every 1 ms while a burn is "
                            "followed, within the probe's CPU budget; 10 ms otherwise)", path)


def main(args):
    cmd = command_of(args)
    env_point = parse_env(args.env)
    out = args.out or default_out("run", cmd)
    if os.path.exists(out) and os.listdir(out):
        if not args.force:
            raise ThreadburnError(f"{out}: exists; pass --force to replace it")
        shutil.rmtree(out)
    if args.runtime == "llvm" and not os.path.exists(args.libomp):
        raise ThreadburnError(f"--libomp {args.libomp}: not found (Debian: apt install libomp-dev)")
    lib = probe.library(args.build_dir)
    env = probe.environment(os.environ, lib, out, args.runtime, env_point, args.libomp, probe_extra(args))
    exact = False
    if args.exact != "off":
        exact, why = intervals.exact_available(args.build_dir)
        if not exact and args.exact == "on":
            raise ThreadburnError(f"--exact on: the monitor's exact mode is not available here: {why}")
        if not exact:
            print(f"run: without the exact monitor ({why}); the probe's waits by class follow")
    os.makedirs(out, exist_ok=True)
    stem = os.path.join(out, "monitor")
    run_cmd, run_env = intervals.beside(cmd, env, stem, args.build_dir) if exact else (cmd, env)
    done = launch.run(run_cmd, run_env, capture=False)
    code, last = done.code, done.last_err
    try:
        report = probe.main_report(out, cmd)
    except ThreadburnError as e:
        if code == 0:
            raise
        # The command's own failure comes first: "no region" would hide it.
        raise ThreadburnError(f"{cmd[0]} ended with {describe_exit(code)}; {e}") from None
    lines = run_report.describe_report(report, cmd)
    exact_counters = {}
    if exact and intervals.exists(stem):
        classes = {t["tid"]: t["class"] for r in [report] + report.others for t in r.summary.get("threads", [])}
        fig = intervals.figures(stem + ".intervals.csv", classes)
        lines += run_report.describe_exact(fig)
        exact_counters = intervals.counters(fig)
    print("\n".join(lines))
    desc = probe.describe(args.build_dir)
    columns = probe.columns(desc, [k for k in env_point if k.isupper()])
    base = Row(schema_version=schema.SCHEMA_VERSION, run_key="run", status="ok" if code == 0 else "failed",
               reason="" if code == 0 else describe_exit(code) + (f": {last}" if last else ""),
               benchmark="run", bench="command", runtime=args.runtime, processes=1, command=" ".join(cmd),
               repetition=0, proc_index=0, exit_code=code, **done.evidence())
    # The knob columns hold what the process got (results/README.md: unset when it did not).
    base.update(probe.setting_cells(columns, env))
    results_file = ResultsFile(os.path.join(out, "run.csv"), columns)
    results_file.create()
    row = row_for(report, columns, base)
    # The exact monitor's figures: no probe counter holds them (docs/monitor.md).
    row.extra_counters = ";".join(f"{k}={v}" for k, v in exact_counters.items())
    results_file.append([row])
    written = [results_file.path]
    if not args.no_plot:
        try:
            plot_timeline(report, os.path.join(out, "timeline.png"))
            written.append(os.path.join(out, "timeline.png"))
        except ThreadburnError as e:
            print(f"run: no plot: {e}")
    if exact:
        written += [stem + ext for ext in (".csv", ".intervals.csv", ".gaps.csv", ".txt")]
    print(f"  files: {out}/ (probe-<pid>.json, .timeline.csv, .gaps.csv per process; "
          + ", ".join(os.path.basename(w) for w in written) + ")")
    if code != 0:
        print(f"run: the command ended with {describe_exit(code)}", file=sys.stderr)
    return 0 if code == 0 else 1
