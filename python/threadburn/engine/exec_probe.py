"""Executors of a user's command (tune): under the preload probe (each run's
wall time, CPU of every thread by class, the settings in force, the user's
--metric), and without it (the confirmation: wall time and --metric only,
what the user's program does when nobody watches)."""
import os
import shlex
import shutil
import subprocess
import time

from . import campaign
from ..lib import probe, schema, usercmd
from ..lib.errors import ThreadburnError
from ..lib.procs import Children, describe_exit, die_with_parent, utc_now


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
        base = {"schema_version": schema.SCHEMA_VERSION, "run_key": spec.key,
                "grid": "tune", "study": point.name, "preset": "default" if point.builtin else "", "benchmark": os.path.basename(self.cmd[0]),
                "bench": "command", "runtime": point.runtime, "processes": 1, "command": " ".join(self.cmd),
                "metric_better": self.args.metric_better if self.args.metric else "",
                "repetition": spec.rep, "proc_index": 0, "seed": self.seed, "order_index": spec.order_index,
                "round": spec.round, "phase": self.phase, "run_rows": 1, "point_key": point.name}
        # What the process got: the point's value, or the user's own for a knob the point leaves alone.
        base.update({k: env.get(k, schema.UNSET) for k in self.columns.env_knobs})
        base["repro"] = (point.env_line(self.args.libomp).replace("(no change)", "") + " " +
                         " ".join(shlex.quote(c) for c in self.cmd)).strip()
        return base

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
        row["started_at"] = utc_now()
        t0 = time.monotonic()
        code, stdout, last = run_command(self.cmd, env, self.args.timeout)
        wall_s = time.monotonic() - t0
        row.update(finished_at=utc_now(), wall_s=round(wall_s, 3), exit_code=code)
        if code != 0:
            row.update(status="failed", reason=(f"{describe_exit(code)}: {last}" if code is not None else last))
            return row
        if self.lib:
            try:
                report = probe.main_report(out, self.cmd, require_regions=False)
            except ThreadburnError as e:
                row.update(status="failed", reason=str(e))
                return row
            row = usercmd.row_for(report, self.columns, row)
            row.update(status="ok", reason="" if report.regions else "note: no OpenMP region (one thread)")
        else:
            row.update(status="ok", reason="", wall_ms=round(wall_s * 1000, 3))
        if self.args.metric:
            value = usercmd.parse_metric(self.args.metric, stdout)
            if value is None:
                raise ThreadburnError(f"--metric {self.args.metric!r}: no match (with a number in its first group) "
                                      f"in the output of {point.name} run {spec.rep}; nothing after this run was "
                                      "measured")
            row["metric"] = value
        shutil.rmtree(out, ignore_errors=True)  # the summary is in the row; keep the disk small
        return row


def run_command(cmd, env, timeout_s):
    """(exit code or None on timeout, stdout, last stderr line); the process
    in its own session, killed with us."""
    with subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, start_new_session=True, preexec_fn=die_with_parent) as p:
        Children.procs = [p]
        try:
            out, err = p.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            Children.kill_all()
            out, _ = p.communicate()
            return None, out or "", f"timeout after {timeout_s} s"
        finally:
            Children.procs = []
    lines = [ln for ln in (err or "").splitlines() if ln.strip()]
    return p.returncode, out or "", lines[-1][:300] if lines else ""
