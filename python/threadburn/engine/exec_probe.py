"""Executors of a user's command (tune): under the preload probe (each run's
wall time, CPU of every thread by class, the settings in force, the user's
--metric), and without it (the confirmation: wall time and --metric only,
what the user's program does when nobody watches)."""
import os
import shlex
import shutil

from . import campaign
from ..lib import launch, probe, schema, usercmd
from ..lib.errors import ThreadburnError
from ..lib.procs import Children, describe_exit, utc_now
from ..lib.records import Row


class TunePoint:
    """A setting of a tune: a name, the OpenMP runtime and its environment."""

    def __init__(self, name, runtime, env, phase="race", builtin=False):
        self.name, self.runtime, self.env, self.phase = name, runtime, dict(env), phase
        self.builtin = builtin  # one of tune's default settings (pruned of duplicates), not the user's

    @property
    def key(self):
        return self.name if self.phase == "race" else f"{self.phase}-{self.name}"

    def for_phase(self, phase):
        return TunePoint(self.name, self.runtime, self.env, phase, self.builtin)

    @property
    def label(self):
        return self.name

    def env_line(self, libomp):
        parts = [f"{k}={shlex.quote(v)}" for k, v in self.env.items() if v != schema.UNSET]
        if self.runtime == "llvm":
            parts.append(f"LD_PRELOAD={libomp}")
        return " ".join(parts) or "(no change)"


class ProbeExecutor(campaign.Executor):
    def __init__(self, args, cmd, columns, work, seed, phase="race"):
        self.args, self.cmd, self.columns, self.work, self.seed, self.phase = args, cmd, columns, work, seed, phase
        self.lib = probe.library(args.build_dir) if phase == "race" else None

    def execute(self, specs):
        for spec in specs:
            yield spec, [self.run_once(spec)]

    def stop(self):
        Children.kill_all()
        shutil.rmtree(self.work, ignore_errors=True)

    def row_base(self, spec, env):
        point = spec.item
        row = Row(schema_version=schema.SCHEMA_VERSION, run_key=spec.key, grid="tune", study=point.name,
                  preset="default" if point.builtin else "", benchmark=os.path.basename(self.cmd[0]),
                  bench="command", runtime=point.runtime, processes=1, command=" ".join(self.cmd),
                  metric_better=self.args.metric_better if self.args.metric else "", repetition=spec.rep,
                  proc_index=0, seed=self.seed, order_index=spec.order_index, round=spec.round, phase=self.phase,
                  run_rows=1, point_key=point.name)
        # What the process got: the point's value, or the user's own for a knob the point leaves alone.
        row.update({k: env.get(k, schema.UNSET) for k in self.columns.env_knobs})
        row.set("repro", (point.env_line(self.args.libomp).replace("(no change)", "") + " " +
                          " ".join(shlex.quote(c) for c in self.cmd)).strip())
        return row

    def environment(self, point, out):
        return probe.environment(os.environ, self.lib, out, point.runtime, point.env, self.args.libomp,
                                 usercmd.probe_extra(self.args))

    def run_once(self, spec):
        point = spec.item
        out = os.path.join(self.work, spec.key)
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out, exist_ok=True)
        env = self.environment(point, out)
        row = self.row_base(spec, env)
        row.set("started_at", utc_now())
        done = launch.run(self.cmd, env, self.args.timeout)
        row.update(finished_at=utc_now(), wall_s=round(done.wall_s, 3), exit_code=done.code, **done.evidence())
        if done.code != 0:
            row.update(status="failed", reason=(f"{describe_exit(done.code)}: {done.last_err}" if done.code is not None
                                                else done.last_err))
            return row
        if self.lib:
            try:
                report = probe.main_report(out, self.cmd, require_regions=False)
            except ThreadburnError as e:
                row.update(status="failed", reason=str(e))
                return row
            row = usercmd.row_for(report, self.columns, row)
            row.update(status="ok", reason="" if report.regions else "note: no OpenMP region (one thread)")
        else:  # no probe: the wall time, and the CPU of the process tree from the kernel's accounting
            row.update(status="ok", reason="", wall_ms=round(done.wall_s * 1000, 3), cpu_ms=round(done.cpu_ms, 3))
        if self.args.metric:
            value = usercmd.parse_metric(self.args.metric, done.stdout)
            if value is None:
                raise ThreadburnError(f"--metric {self.args.metric!r}: no match (with a number in its first group) "
                                      f"in the output of {point.name} run {spec.rep}; nothing after this run was "
                                      "measured")
            row.set("metric", value)
        shutil.rmtree(out, ignore_errors=True)  # the summary is in the row; keep the disk small
        return row
