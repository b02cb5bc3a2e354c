"""The start of an in-run tune (`threadburn tune --in-run`, docs/design.md,
"In-run trials"): everything its one executor needs before the first block,
from the options the command built once (exec_inrun.InRunOptions, never its
argparse namespace).

    start    the work folder beside the results file (emptied; the probe's
             files in probe/), the control block with its ceiling (the
             usable CPUs, written before the program starts: OpenMP's
             promise, src/probe/inrun.h), the probe's environment with the
             control block's variable, the program's log (<stem>.program.log),
             and the program started under them (exec_inrun.InRunExecutor)
    warm_up  until the program's steady phase, then its own setting
             watched: what a block counts and how long a unit takes; a job
             with more steered processes than the probe's slots refused
    offer    the settings the program can be given while it runs
             (exec_inrun.observed_points), written into the control block
             and the executor's index of them; the settle time for them
"""
import os
import shutil

from . import exec_inrun
from ..lib import machine, paths, probe
from ..lib.errors import ThreadburnError


def work_folder(out):
    """The in-run tune's work folder beside its results file `out`, emptied, with probe/ in it."""
    work = paths.work_dir(out)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.join(work, "probe"))
    return work


def start(cmd, options, layout, columns, out, seed):
    """The program started under the probe with an in-run control block
    (layout: the probe's describe.json "inrun"): its InRunExecutor, whose
    work, cpus and log_path say where its files are and the ceiling given."""
    work = work_folder(out)
    # The ceiling (the largest team a setting may give) goes in before the program starts: no
    # answer of the probe's to omp_get_max_threads() exceeds it (src/probe/inrun.h).
    cpus = machine.usable_cpus()
    control = os.path.join(work, "inrun.bin")
    ctl = exec_inrun.Control(control, layout, ceiling=cpus)
    env = probe.environment(os.environ, probe.library(options.build_dir), os.path.join(work, "probe"),
                            options.runtime, dict(options.user_env), options.libomp, dict(options.probe_env))
    env[layout["variable"]] = control
    log = os.path.splitext(out)[0] + ".program.log"
    return exec_inrun.InRunExecutor(cmd, env, ctl, columns, options, seed, log, work=work, cpus=cpus)


def warm_up(ex):
    """Until the program reaches its steady phase (within options.timeout),
    then its warm-up under its own setting (at least a second, or the block
    time); refuses a job with processes beyond the probe's slots. Returns
    the seconds a unit of work took."""
    ex.wait_steady(ex.options.timeout)
    unit_s = ex.warm_up(max(1.0, ex.options.block))
    ex.check_refused()
    return unit_s


def offer(ex):
    """(the points, what was left out and why, the settle time's note or
    None): the settings the program can be given while it runs, plain (its
    own) first, in the control block and the executor's index; an error
    when there is nothing to change."""
    points, settings, left_out = exec_inrun.observed_points(ex.ctl, dict(ex.options.user_env), ex.options.runtime,
                                                            ex.cpus, machine.physical_cores(), ex.kind, ex.env)
    if len(points) < 2:
        raise ThreadburnError("--in-run: nothing your program does can be changed while it runs: "
                              + "; ".join(left_out))
    ex.ctl.set_settings([s for s in settings if s])
    ex.set_points(points, settings)
    settle_note = ex.set_settle([s for s in settings if s])
    return points, left_out, settle_note
