"""threadburn plot: PNG plots of a results CSV (needs matplotlib: Debian's
python3-matplotlib, for /usr/bin/python3).

    threadburn plot runs/default-host-20240101-120000.csv
    threadburn plot --timeline some.timeline.csv --out-dir /tmp/p

Writes into --out-dir (default: <csv without .csv>.plots/):
  heatmap_<metric>_<workload>.png  median step_ms / residual_cpu_ms over
      OMP_NUM_THREADS x wait setting, one panel per runtime (the wait setting
      is KMP_BLOCKTIME under llvm, OMP_WAIT_POLICY/GOMP_SPINCOUNT under gomp)
  pareto.png  median step time vs residual burn of every setting, one panel
      per workload; the launcher preset (star) and the default (libgomp, no
      environment; square) are marked, the Pareto front is drawn
  timeline_<workload>.png  cores busy vs time around the step, one line per
      setting whose run saved a timeline (first repetition), step shaded
  oversubscription.png  when the CSV has processes > 1: aggregate throughput
      (summed over the copies) and per-process step time vs processes, one
      row of panels per workload, one line per setting (results.oversubscription)
  world_size.png  when the CSV has data-parallel worlds (ddp_step): the world's
      samples/s, step time, all-reduce time and CPU per step (all ranks) vs
      world size, one row of panels per workload, one line per setting
      (results.world_scaling)
A data-parallel world counts as one point per run in the heatmaps and the
Pareto plot (records.world_rows: the slowest rank's step, all ranks' CPU).
The runs of a command that `threadburn tune` (and `run`) write have no steps:
  tune.png  per command, each setting's median time (the --metric figure
      where the runs have one, else the run's wall time) against its median
      CPU, each run as a dot (a host tune's, each copy)
  host.png  a host tune of several copy counts (tune --copies 1,2,4): host
      throughput and each copy's figure against the copies, a line per plan
  slots.png  a tune of several slot sizes (tune --cpus 1,2, its <stem>.csv):
      throughput and the CPUs busy against the slot size, a line for each
      size's plan and one for plain (export/figures.py, slot_sizes)
"""
import argparse
import os

from ..export import figures
from ..lib import records
from ..lib.errors import ThreadburnError


def add_parser(sub):
    p = sub.add_parser("plot", help="PNG plots of a results CSV: heatmaps, Pareto, timelines",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("csv", nargs="?", help="results CSV written by threadburn sweep")
    p.add_argument("--out-dir", help="where the PNGs go (default: <csv stem>.plots)")
    p.add_argument("--timeline", action="append", default=[], metavar="FILE",
                   help="also plot this timeline CSV on its own (repeatable)")
    p.add_argument("--max-timelines", type=int, default=12,
                   help="at most this many settings per timeline figure (default 12)")
    p.set_defaults(run=main)
    return p


def main(args):
    if not args.csv and not args.timeline:
        raise ThreadburnError("give a results CSV and/or --timeline FILE")
    if not args.out_dir:
        if not args.csv:
            raise ThreadburnError("--out-dir is needed without a results CSV")
        args.out_dir = os.path.splitext(args.csv)[0] + ".plots"
    written, runs_file = [], False
    if args.csv:
        header, rows = records.read_table(args.csv)
        runs_file = records.is_runs_file(header)
        if runs_file:  # tune's or run's runs of a command
            records.check_columns(args.csv, header, figures.RUNS_NEEDS)
            os.makedirs(args.out_dir, exist_ok=True)
            written += figures.tune_settings(rows, figures.pyplot(), args.out_dir)
            written += figures.host_plans(rows, figures.pyplot(), args.out_dir)
            written += figures.slot_sizes(rows, figures.pyplot(), args.out_dir)
        else:
            records.check_columns(args.csv, header, figures.SWEEP_NEEDS)
            written += figures.make_all(rows, os.path.dirname(os.path.abspath(args.csv)), args.out_dir, args.max_timelines)
    plt = figures.pyplot()
    os.makedirs(args.out_dir, exist_ok=True)
    for path in args.timeline:
        name = os.path.basename(path).removesuffix(".timeline.csv")
        out = os.path.join(args.out_dir, f"timeline_{figures.slug(name)}.png")
        try:
            written.append(figures.timeline_figure(plt, [(name, path)], f"Burn around one step: {name}", out))
        except (OSError, KeyError, ValueError) as e:
            raise ThreadburnError(f"{path}: {e}") from None
    for path in written:
        print(path)
    if not written:
        print("plot: nothing to plot (no ok runs)" if runs_file else "plot: nothing to plot (no ok rows with step_ms)")
    return 0
