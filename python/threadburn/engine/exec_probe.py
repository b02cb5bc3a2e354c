"""Executors of a user's command (tune): under the preload probe (each run's
wall time, CPU of every thread by class, the settings in force, the user's
--metric), and without it (the confirmation: wall time and --metric only,
what the user's program does when nobody watches).

A tune with --copies runs each setting as N copies of the command started
together (lib/launch.run_together: all spawned, released at once), each
copy under its own probe (its own files), with the setting's environment
and, for a pinned plan, its own core set (lib/machine.core_sets): one row
per copy, one run (records.run_records makes it the host's figure). On a
host with at least N GPUs each copy sees its own (the plan's gpus: copy i
gets CUDA_VISIBLE_DEVICES=i), recorded in its row's extra_context.

A setting with a CUDA wait policy (THREADBURN_CUDA_SYNC) gets it from the
probe in the race, and from libthreadburn_cuda_sync.so preloaded in the
fresh runs without the probe: the same policy either way. Once a tune knows
its program does device work (steady), the fresh runs also preload
libthreadburn_phase.so, which marks where their startup ends, so that they
are judged on their steady phase as the race's runs are (rule version 6).
"""
import os
import re
import shlex
import shutil
from dataclasses import dataclass

from . import campaign
from ..lib import launch, probe, schema, usercmd
from ..lib.errors import ThreadburnError
from ..lib.procs import Children, describe_exit, utc_now
from ..lib.records import Row

# The extra_context key of a copy's own GPU (its CUDA_VISIBLE_DEVICES).
GPU_KEY = "cuda_visible_devices"


@dataclass(frozen=True)
class ProbeOptions:
    """What the executor takes of tune's flags, built once by the command
    (commands/tune.py, probe_options), never read from its namespace."""
    build_dir: str = None           # the build whose probe and CUDA library it preloads (None: found)
    libomp: str = ""                # LLVM's runtime, preloaded for a setting whose runtime is llvm
    timeout: float = None           # per run, in s
    metric: str = None              # the regex of the user's figure (None: no figure of theirs)
    metric_better: str = "higher"   # which way that figure is better
    probe_env: tuple = ()           # (variable, value) the probe reads (usercmd.probe_extra)


class ProbeExecutor(campaign.Executor):
    """Runs tune points: a race's under the probe, the others' (confirm,
    alone) without it."""

    def __init__(self, options, cmd, columns, work, seed, steady=False):
        self.options, self.cmd, self.columns, self.work, self.seed = options, cmd, columns, work, seed
        self.lib = probe.library(options.build_dir)
        self._cuda_lib = None
        # The program does device work: fresh runs mark their phases (libthreadburn_phase.so).
        self.phase_lib = probe.phase_library(options.build_dir) if steady else None

    @property
    def cuda_lib(self):
        """libthreadburn_cuda_sync.so, found when a setting first needs it
        (a tune of a program that does not use CUDA never does)."""
        if self._cuda_lib is None:
            self._cuda_lib = probe.cuda_sync_library(self.options.build_dir)
        return self._cuda_lib

    def execute(self, specs):
        for spec in specs:
            yield spec, (self.run_copies(spec) if spec.item.copies else [self.run_once(spec)])

    def stop(self):
        Children.kill_all()
        shutil.rmtree(self.work, ignore_errors=True)

    def folder(self, spec):
        """The run's scratch folder (the probe's files, the copies' output),
        named after its key (a --param value may hold any character)."""
        return os.path.join(self.work, re.sub(r"[^A-Za-z0-9_.=+-]", "_", spec.key))

    def row_base(self, spec, env, cmd):
        point = spec.item
        row = Row(schema_version=schema.SCHEMA_VERSION, run_key=spec.key, grid="tune", study=point.name,
                  preset="default" if point.builtin else "", benchmark=os.path.basename(self.cmd[0]),
                  bench="command", runtime=point.runtime, processes=point.copies or 1, command=" ".join(self.cmd),
                  metric_better=self.options.metric_better if self.options.metric else "", repetition=spec.rep,
                  proc_index=0, seed=self.seed, order_index=spec.order_index, round=spec.round, phase=point.phase,
                  run_rows=point.copies or 1, point_key=point.base_key)
        # What the process got: the point's value, or the user's own for a knob the point leaves alone.
        row.update(probe.setting_cells(self.columns, env))
        row.update({schema.param_column(k): v for k, v in point.params.items()})
        cuda_lib = self.cuda_lib if probe.sets_cuda_sync(point.env) else None
        row.repro = (point.env_line(self.options.libomp, cuda_lib).replace("(no change)", "") + " " +
                     " ".join(shlex.quote(c) for c in cmd)).strip()
        return row

    def environment(self, point, out, index=0):
        lib = self.lib if point.phase == "race" else None
        env = point.copy_env(index)
        cuda_lib = self.cuda_lib if lib is None and probe.sets_cuda_sync(dict(os.environ, **env)) else None
        return probe.environment(os.environ, lib, out, point.runtime, env, self.options.libomp,
                                 dict(self.options.probe_env), cuda_lib, self.phase_lib)

    def run_once(self, spec):
        point = spec.item
        out = self.folder(spec)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out, exist_ok=True)
        env = self.environment(point, out)
        cmd = point.command(self.cmd)
        row = self.row_base(spec, env, cmd)
        row.started_at = utc_now()
        done = launch.run(cmd, env, self.options.timeout)
        row.update(finished_at=utc_now(), wall_s=round(done.wall_s, 3), exit_code=done.code, **done.evidence())
        if done.code != 0:
            row.update(status="failed", reason=(f"{describe_exit(done.code)}: {done.last_err}" if done.code is not None
                                                else done.last_err))
            return row
        row = self.measured(spec, row, out, done.stdout, done.wall_s, done.cpu_ms)
        shutil.rmtree(out, ignore_errors=True)  # the summary is in the row; keep the disk small
        return row

    def measured(self, spec, row, out, stdout, wall_s, cpu_ms, who=""):
        """An ended process's row, filled: the probe's report (race), else
        its wall time and the kernel's CPU of its tree; the user's figure."""
        point = spec.item
        if point.phase == "race":
            try:
                report = probe.main_report(out, self.cmd)
            except ThreadburnError as e:
                row.update(status="failed", reason=who + str(e))
                return row
            row = usercmd.row_for(report, self.columns, row)
            row.update(status="ok", reason="" if report.regions else "note: no OpenMP region")
        else:  # no probe: the wall time, and the CPU of the process tree from the kernel's accounting
            row.update(status="ok", reason="", wall_ms=round(wall_s * 1000, 3), cpu_ms=round(cpu_ms, 3))
            if self.phase_lib:  # and the phases the mark saw
                row.update({k: v for k, v in probe.phase_of(out).items() if k in self.columns.all})
        if self.options.metric:
            value = usercmd.parse_metric(self.options.metric, stdout)
            if value is None:
                raise ThreadburnError(f"--metric {self.options.metric!r}: no match (with a number in its first group) "
                                      f"in the output of {point.name} run {spec.rep}{' ' + who.strip(': ') if who else ''}; "
                                      "nothing after this run was measured")
            row.metric = value
        return row

    def run_copies(self, spec):
        """One run of N copies started together: a row per copy (rows of a
        failed copy say why, with its last line); the run's wall time (from
        the release to the last end), each copy's start and end, their
        overlap and the host's evidence."""
        point = spec.item
        n = point.copies
        base = self.folder(spec)
        shutil.rmtree(base, ignore_errors=True)
        outs = [os.path.join(base, f"probe{i}") for i in range(n)]
        for d in outs:
            os.makedirs(d)
        envs = [self.environment(point, outs[i], i) for i in range(n)]
        cmd = point.command(self.cmd)
        started = utc_now()
        done = launch.run_together(cmd, envs, base, self.options.timeout, point.core_sets)
        finished = utc_now()
        rows = []
        for c in done.copies:
            row = self.row_base(spec, envs[c.index], cmd)
            gpu = point.gpu_of(c.index)
            overlap = done.overlap(c.index) if n > 1 else None
            row.update(proc_index=c.index, started_at=started, finished_at=finished, wall_s=round(done.wall_s, 3),
                       exit_code=c.code, copy_start_ms=None if c.start_s is None else round(c.start_s * 1000, 3),
                       pinned_cpus=",".join(map(str, c.cpus)), overlap=None if overlap is None else round(overlap, 4),
                       **done.evidence())
            who = f"copy {c.index} of {n}: " if n > 1 else ""
            if c.code != 0:
                row.update(status="failed", reason=who + (f"{describe_exit(c.code)}: {c.last_err}"
                                                          if c.code is not None else c.last_err))
            else:
                row = self.measured(spec, row, outs[c.index], c.stdout, c.wall_s, c.cpu_ms, who)
                if row.ok and overlap is not None and overlap < schema.OVERLAP_MIN:
                    row.reason = ((row.reason + "; " if row.reason else "note: ") +
                                  f"the other copies ran during only {overlap:.0%} of its time")
            if gpu is not None:  # its own GPU (results/README.md: extra_context)
                row.extra_context = ";".join(x for x in (row.extra_context, f"{GPU_KEY}={gpu}") if x)
            rows.append(row)
        shutil.rmtree(base, ignore_errors=True)
        return rows
