"""The executor of an in-run tune (`threadburn tune --in-run`): ONE process of
the user's command under the preload probe, whose in-run settings the probe
switches while it runs (src/probe/inrun.h); a campaign's "run" is a block of
that process under one setting (docs/design.md, "In-run trials").

A block: ask the probe for the setting (the control block's request), wait
until it took effect (the first region or device wait under it), let the
last setting's spin pass (the settle time, left out), then measure: the
work done (the progress the probe counts: outermost OpenMP regions, the
CUDA driver's waits or launches; or the lines of the program's own --metric,
timed as they arrive) and the process's CPU, read from the probe's
snapshots. Its figures: the time per unit of work (from the first to the
last unit's end in the block, so no unit is cut in two) and the CPU per
unit (the block's CPU rate times that time). Blocks of a round are a cycle
of every setting in a shuffled order: the campaign's rounds, paired by the
rule as any tune's.

The settings that can change while a program runs (points): the team of
an outermost region (both runtimes; not where the program starts no region
or names its team itself), LLVM's blocktime (LLVM in force), the CUDA wait
policy (the program uses the driver). The others are fixed at start:
tune without --in-run covers them.
"""
import math
import mmap
import os
import re
import statistics
import struct
import subprocess
import threading
import time
from dataclasses import dataclass

from . import campaign
from .points import TunePoint
from ..lib import launch, probe, schema
from ..lib.errors import ThreadburnError
from ..lib.procs import Children, die_with_parent, utc_now
from ..lib.records import Row

# The progress a block counts, and the probe's snapshot fields of each (count, when the last ended).
PROGRESS = {"regions": ("regions", "region_end_ns"), "waits": ("waits", "wait_end_ns"),
            "launches": ("launches", "launch_end_ns")}
SNAPSHOT = ("sample_ns", "cpu_ns") + tuple(f for pair in PROGRESS.values() for f in pair)
# A block measures at least this many units of work (it runs on until it has them, up to
# LONGEST_BLOCK_S); the time of fewer would be a few units' luck.
MIN_UNITS = 5
LONGEST_BLOCK_S = 10.0
# The settle time after a switch: at least this, two units of work, and the longest spin a
# setting may leave behind (LLVM's blocktime in force or asked, and 10 % more).
MIN_SETTLE_S = 0.1
# The CUDA host wait policies as their context flags (CU_CTX_SCHED_*).
CUDA_FLAGS = {"spin": 1, "yield": 2, "blocking_sync": 4}
# LLVM's blocktimes tried in-run (ms), the default's among them (200: LLVM's own).
BLOCKTIMES = (0, 1, 200)
LLVM_DEFAULT_BLOCKTIME = 200


# A unit's time that moves more than this between blocks of one setting (the median deviation
# from the setting's own median, over every block) says the units differ in size: the count of
# them measures the program's phases as well as the settings (the note of unit_spread).
UNIT_SPREAD_NOTE = 0.15


def unit_spread(records):
    """How much a unit's time moved between blocks of one setting: the median, over every
    block measured by its unit count, of |log(its unit time / its setting's median)|, as a
    ratio less 1 (0.1: a block's unit typically 10 % off its setting's). None with fewer
    than 2 such blocks of any setting."""
    by = {}
    for r in records:
        if r.time_kind == "unit_ms" and r.time and r.time > 0:
            by.setdefault(r.name, []).append(math.log(r.time))
    devs = []
    for logs in by.values():
        if len(logs) >= 2:
            mid = statistics.median(logs)
            devs += [abs(x - mid) for x in logs]
    return math.exp(statistics.median(devs)) - 1 if devs else None


def unit_spread_note(records, kind):
    """A line for the verdict where the units counted differ in size (UNIT_SPREAD_NOTE), else None."""
    spread = unit_spread(records)
    if spread is None or spread <= UNIT_SPREAD_NOTE:
        return None
    return (f"tune --in-run: a unit of work ({kind}) took {spread:.0%} more or less from block to block under one "
            "setting (the median deviation): the units differ in size, so their count measures the program's "
            "phases as well as the settings; its own figure would judge it better (--metric on a line it prints "
            "per step)")


class Ended(Exception):
    """The program ended before the tune did."""


class Control:
    """The control block shared with the probe: a file mapped by both, laid
    out as the probe's describe.json says ("inrun")."""

    def __init__(self, path, layout):
        self.layout, self.fields = layout, layout["fields"]
        with open(path, "wb") as f:
            f.write(b"\0" * layout["size"])
        self.fd = os.open(path, os.O_RDWR)
        self.mm = mmap.mmap(self.fd, layout["size"])
        self.put("magic", layout["magic"])
        self.put("version", layout["version"])
        self.put("request", -1)

    def put(self, name, value, offset=None):
        struct.pack_into("<q", self.mm, self.fields[name] if offset is None else offset, int(value))

    def get(self, name):
        return struct.unpack_from("<q", self.mm, self.fields[name])[0]

    def set_settings(self, settings):
        """settings: [(team, blocktime_ms, cuda_flags)], -1 for a knob left alone."""
        if len(settings) > self.layout["max_settings"]:
            raise ThreadburnError(f"{len(settings)} in-run settings: the probe takes {self.layout['max_settings']}")
        where = self.layout["setting_fields"]
        for i, s in enumerate(settings):
            base = self.fields["settings"] + i * self.layout["setting_size"]
            for name, value in zip(("team", "blocktime_ms", "cuda_flags"), s):
                self.put(None, value, base + where[name])
        self.put("n_settings", len(settings))

    def snapshot(self):
        """The probe's last snapshot, whole (its seqlock)."""
        for _ in range(1000):
            seq = self.get("seq")
            if seq % 2 == 0:
                values = {f: self.get(f) for f in SNAPSHOT}
                if self.get("seq") == seq:
                    return values
            time.sleep(0.0002)
        raise ThreadburnError("the probe's in-run snapshot kept changing (its sampler stuck mid-write?)")

    def close(self):
        self.mm.close()
        os.close(self.fd)


@dataclass(frozen=True)
class Mark:
    """Where a block starts or ends: the work done so far (units, and when
    the last one ended, ns), the process's CPU so far and when it was read."""
    units: int
    last_ns: int
    cpu_ns: int
    sample_ns: int
    host: object  # launch.HostLoad at that point


def observed_points(ctl, user_env, runtime, cpus, physical):
    """(the in-run points, each one's probe setting, what was left out and
    why) from what the probe saw since the steady phase began: regions and
    their team, the runtime, waits or launches. plain (the program's own) is
    first, with no setting (-1)."""
    plain = TunePoint("plain", runtime, user_env)
    points, settings, left_out = [plain], [None], []
    team = ctl.get("team_seen")
    if ctl.get("free_regions") > 0:
        for n in sorted({1, physical or cpus, cpus} - {team}):
            points.append(TunePoint(f"T{n}", runtime, dict(user_env, OMP_NUM_THREADS=str(n)), builtin=True))
            settings.append((n, -1, -1))
    elif ctl.get("regions") > 0:
        left_out.append("the team size (every region names its own team: num_threads)")
    else:
        left_out.append("the team size (no OpenMP region ran: a program that runs its work on one thread without "
                        "asking the runtime, as PyTorch does at one thread, cannot be given a team while it runs)")
    if ctl.get("runtime") == 2:
        own = int(user_env.get("KMP_BLOCKTIME", LLVM_DEFAULT_BLOCKTIME)) if str(
            user_env.get("KMP_BLOCKTIME", "")).isdigit() or "KMP_BLOCKTIME" not in user_env else None
        for b in BLOCKTIMES:
            if b != own:
                points.append(TunePoint(f"llvm-bt{b}", "llvm", dict(user_env, KMP_BLOCKTIME=str(b)), builtin=True))
                settings.append((-1, b, -1))
    elif ctl.get("regions") > 0:
        left_out.append("LLVM's blocktime (the runtime in force is not LLVM's)")
    if ctl.get("waits") > 0 or ctl.get("launches") > 0:
        own = user_env.get(probe.CUDA_SYNC, probe.CUDA_SYNC_AUTO)
        for policy, flags in CUDA_FLAGS.items():
            if policy != own:
                points.append(TunePoint(f"cuda-{policy}", runtime, dict(user_env, **{probe.CUDA_SYNC: policy}),
                                        builtin=True))
                settings.append((-1, -1, flags))
    left_out.append("the runtime itself, libgomp's wait policy and spin count, placement and your program's own "
                    "knobs: fixed at start (tune without --in-run covers them)")
    return points, settings, left_out


class InRunExecutor(campaign.Executor):
    """Runs a campaign's specs as blocks of one process (module docstring)."""

    def __init__(self, cmd, env, control, columns, options, seed, log_path):
        self.cmd, self.ctl, self.columns, self.options, self.seed = cmd, control, columns, options, seed
        self.index = {}            # point base key -> its setting's index (-1: the program's own)
        self.kind = None           # the progress counted: regions | waits | launches | lines
        self.block_s = self.settle_s = None
        self.lines, self.metric = [], re.compile(options.metric) if options.metric else None
        self.t0 = time.monotonic()
        self.log = open(log_path, "w")
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                  preexec_fn=die_with_parent)
        Children.procs = [self.p]
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        """The program's output into its log, each --metric line with the time it came (CLOCK_MONOTONIC ns)."""
        for line in self.p.stdout:
            t = time.monotonic_ns()
            self.log.write(line)
            m = self.metric.search(line) if self.metric else None
            if m:
                try:
                    self.lines.append((t, float(m.group(1))))
                except (IndexError, ValueError):
                    pass
        self.log.flush()

    def alive(self):
        return self.p.poll() is None and not self.ctl.get("ended")

    def wait_steady(self, timeout_s):
        """Until the probe of the process that does the work takes the control block (its steady phase)."""
        deadline = time.monotonic() + timeout_s
        while not self.ctl.get("owner_pid"):
            if not self.alive():
                raise Ended()
            if time.monotonic() > deadline:
                raise ThreadburnError(f"no steady phase in {timeout_s:g} s: the program ran no OpenMP region and did "
                                      "no device work (the in-run settings act there)")
            time.sleep(0.01)

    def mark(self):
        snap = self.ctl.snapshot()
        if self.kind == "lines":
            units, last = len(self.lines), (self.lines[-1][0] if self.lines else 0)
        else:
            count, end = PROGRESS[self.kind]
            units, last = snap[count], snap[end]
        return Mark(units, last, snap["cpu_ns"], snap["sample_ns"], launch.HostLoad())

    def warm_up(self, seconds):
        """Watches the program under its own setting: what progresses (the
        kind counted unless --progress said), and the time a unit of it
        takes; sets the block and settle times. Returns the seconds a unit took."""
        a = self.ctl.snapshot()
        lines0 = len(self.lines)
        time.sleep(seconds)
        b = self.ctl.snapshot()
        if not self.alive():
            raise Ended()
        seen = {k: b[c] - a[c] for k, (c, _) in PROGRESS.items()}
        if self.options.metric:
            self.kind = "lines"
            units = len(self.lines) - lines0
        else:
            self.kind = self.options.progress if self.options.progress != "auto" else next(
                (k for k in ("waits", "regions", "launches") if seen[k] > 0), None)
            units = seen.get(self.kind, 0) if self.kind else 0
        if not self.kind or units <= 0:
            raise ThreadburnError(f"no progress in {seconds:g} s of the steady phase (regions {seen['regions']}, device "
                                  f"waits {seen['waits']}, launches {seen['launches']}"
                                  + (f", lines matching --metric {len(self.lines) - lines0}" if self.metric else "")
                                  + "): nothing to measure a block by")
        unit_s = seconds / units
        longest_spin = (LLVM_DEFAULT_BLOCKTIME / 1000 * 1.1) if self.ctl.get("runtime") == 2 else 0.0
        self.settle_s = max(MIN_SETTLE_S, 2 * unit_s, longest_spin)
        self.block_s = max(self.options.block, MIN_UNITS * 2 * unit_s)
        return unit_s

    def execute(self, specs):
        for spec in specs:
            yield spec, [self.block(spec)]

    def block(self, spec):
        point = spec.item
        index = self.index[point.base_key]
        self.ctl.put("request", index)
        started, t_ask = utc_now(), time.monotonic()
        while self.ctl.get("applied") != index and time.monotonic() - t_ask < max(1.0, self.block_s):
            if not self.alive():
                raise Ended()
            time.sleep(0.001)
        time.sleep(self.settle_s)
        a = self.mark()
        time.sleep(self.block_s)
        b = self.mark()
        while b.units - a.units < MIN_UNITS and time.monotonic() - t_ask < LONGEST_BLOCK_S:
            if not self.alive():
                raise Ended()
            time.sleep(self.block_s / 2)
            b = self.mark()
        if not self.alive():
            raise Ended()
        return self.row(spec, a, b, started, time.monotonic() - t_ask)

    def row(self, spec, a, b, started, wall_s):
        point = spec.item
        row = Row(schema_version=schema.SCHEMA_VERSION, run_key=spec.key, grid="tune", study=point.name, preset="",
                  benchmark=os.path.basename(self.cmd[0]), bench="inrun", runtime=point.runtime, processes=1,
                  command=" ".join(self.cmd), metric_better=self.options.metric_better if self.metric else "",
                  repetition=spec.rep, proc_index=0, seed=self.seed, order_index=spec.order_index, round=spec.round,
                  phase=point.phase, run_rows=1, point_key=point.base_key, started_at=started, finished_at=utc_now(),
                  wall_s=round(wall_s, 3), exit_code=0, progress=self.kind, settle_ms=round(self.settle_s * 1000, 3))
        row.update(probe.setting_cells(self.columns, dict(os.environ, **point.env)))
        units = b.units - a.units
        block_ms = (b.sample_ns - a.sample_ns) / 1e6
        cpu_ms = (b.cpu_ns - a.cpu_ns) / 1e6
        _, other, steal, _ = a.host.end()  # the host's CPU since a (and the harness's own)
        row.update(block_ms=round(block_ms, 3), cpu_ms=round(cpu_ms, 3), wall_ms=round(block_ms, 3), units=units)
        if other is not None:  # the host's CPU since a, less the program's own: what else ran in the block
            row.update(host_other_cpu_ms=round(max(0.0, other - cpu_ms), 1), host_steal_ms=round(steal or 0.0, 1))
        if units < 1 or block_ms <= 0:
            row.update(status="failed", reason=f"no {self.kind} ended in {wall_s:.1f} s under {point.name}")
            return row
        unit_ms = (b.last_ns - a.last_ns) / 1e6 / units if a.last_ns > 0 else block_ms / units
        rate = cpu_ms / block_ms  # cores
        row.update(status="ok", reason="", unit_ms=round(unit_ms, 4))
        if self.kind == "lines":
            values = [v for t, v in self.lines if a.last_ns < t <= b.last_ns]
            row.metric = sum(values) / len(values)
            # CPU per unit of the user's figure: a rate (higher better) or a time a unit (lower better).
            per = 1.0 / row.metric if self.options.metric_better == "higher" else row.metric
            row.update(unit_cpu_ms=round(rate * per * 1000, 4))
        else:
            row.update(unit_cpu_ms=round(rate * unit_ms, 4))
        return row

    def finish(self, index):
        """The tune is over: the setting for the rest of the run (-1: the program's own)."""
        self.ctl.put("request", index)

    def wait(self, timeout_s=None):
        """Until the program ends: its exit code (None: still running at the timeout)."""
        try:
            code = self.p.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        self.reader.join(timeout=5)
        return code

    def stop(self):
        Children.kill_all()

    def close(self):
        self.log.close()
        self.ctl.close()
