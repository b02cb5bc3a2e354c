"""The executor of an in-run tune (`threadburn tune --in-run`): ONE process of
the user's command under the preload probe, whose in-run settings the probe
switches while it runs (src/probe/inrun.h); a campaign's "run" is a block of
that process under one setting (docs/design.md, "In-run trials").

The processes steered: every process of the job that reaches its steady
phase (its first OpenMP region or device work) takes a slot of the control
block (procs: its own seqlock, CPU, regions and the setting in force in
it) and follows the same request; a wrapper (sh -c, a launcher that runs
no region) never does. A block: ask the probe for the setting (the control
block's request), wait until it took effect in EVERY steered process (each
knob at its own point: a team at the next omp_get_max_threads() answered or
region forked, a blocktime at the forking thread's next region, a CUDA
policy at the next wait once the flags were set and read back; a block
whose setting did not take effect in time is dropped and named), let the
last setting's spin pass (the settle time, left out: the longest spin in
force or asked), then measure: the work done (the progress the probe
counts: the first steered process's outermost OpenMP regions, the CUDA
driver's waits or launches; or the lines of the program's own --metric,
timed as they arrive: the program's output is made line-buffered, see
LINE_BUFFERED) and the CPU of every steered process, read from the
probe's snapshots. Its figures: the time per unit of work (from the first to the
last unit's end in the block, so no unit is cut in two) and the CPU per
unit (the block's CPU rate times that time). Blocks of a round are a cycle
of every setting in a shuffled order: the campaign's rounds, paired by the
rule as any tune's.

The settings that can change while a program runs (points): the team of
an outermost region (both runtimes; where the program leaves a region's
team to the runtime or asks omp_get_max_threads(); not where it names its
team itself), LLVM's blocktime (LLVM in force), the CUDA wait policy (the
program uses the driver). The others are fixed at start: tune without
--in-run covers them. The team asked never exceeds the ceiling threadburn
writes before the program starts (the usable CPUs): OpenMP's promise, that
a region gets exactly what omp_get_max_threads() told its thread, is the
probe's to keep (src/probe/inrun.h).
"""
import collections
import math
import mmap
import os
import re
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
# A steered process's slot (procs[i]: its own seqlock), as one reading gives it.
PROC_SNAPSHOT = ("pid", "sample_ns", "cpu_ns", "regions", "applied", "applied_ns", "why")
# What began a steered process's steady phase (src/probe/inrun.h, Why).
WHY = {1: "OpenMP region", 2: "device work", 3: "omp_get_max_threads() asked outside a region"}
# A slot's applied before any setting took effect in its process.
NONE_APPLIED = -2
# The control block's fields this side needs (version 2: every process of a job, OpenMP's promise).
NEEDED_FIELDS = ("ceiling", "asks", "own_team", "held_back", "n_procs", "refused", "procs")
# The warm-up with --metric: until this many lines came, up to LONGEST_WARM_UP_S.
WARM_LINES = 3
LONGEST_WARM_UP_S = 60.0
# A block measures at least this many units of work (it runs on until it has them, up to
# LONGEST_BLOCK_S); the time of fewer would be a few units' luck.
MIN_UNITS = 5
LONGEST_BLOCK_S = 10.0
# The settle time after a switch: at least this, two units of work, and the longest spin a
# setting may leave behind (the program's own, from the environment it runs with, or one asked:
# own_spin_s), and SPIN_MARGIN more.
MIN_SETTLE_S = 0.1
SPIN_MARGIN = 1.1
# The CUDA host wait policies as their context flags (CU_CTX_SCHED_*).
CUDA_FLAGS = {"spin": 1, "yield": 2, "blocking_sync": 4}
# LLVM's blocktimes tried in-run (ms), the default's among them (200: LLVM's own).
BLOCKTIMES = (0, 1, 200)
LLVM_DEFAULT_BLOCKTIME = 200
# libgomp's idle spin: GOMP_SPINCOUNT pauses (300000 by default) of up to ~140 cycles each at
# ~3 GHz (the pause instruction's cost on recent x86: an upper estimate of the spin's length).
GOMP_DEFAULT_SPINCOUNT = 300000
GOMP_PAUSE_S = 5e-8

# With --metric the program's lines are timed as they arrive, so its output must reach
# threadburn line by line, without a change to the program: a pipe makes C's stdio and
# Python's sys.stdout block-buffered (4-8 KiB: a line printed in one block read in a later
# one). PYTHONUNBUFFERED=1 makes a Python program's stdout and stderr write each line as it
# is printed; coreutils' libstdbuf.so preloaded with _STDBUF_O=L/_STDBUF_E=L (what `stdbuf -oL`
# does, without a wrapper process) makes C stdio line-buffered. Neither changes what the
# program sees: a pseudo-terminal would also make stdout a terminal (isatty: progress bars
# redrawn with \r, colours, \r\n line ends), which changes the program's output and can
# change its behaviour. A variable the user set is kept. Output the program buffers itself
# is found by its lines' arrival (BURST_*) and refused with a line that says what to do.
STDBUF_LIBRARIES = ("/usr/libexec/coreutils/libstdbuf.so", "/usr/lib/coreutils/libstdbuf.so",
                    "/usr/lib/x86_64-linux-gnu/coreutils/libstdbuf.so")
# Lines that came in a burst: one within BURST_GAP_S of the one before and under 5 % of the
# time a line takes on average over the span watched; a block (or the warm-up) whose lines came so for BURST_SHARE
# of their gaps was read from a buffer, not as printed (two ranks printing at once make half).
BURST_GAP_S = 0.001
BURST_SHARE = 0.9
BURST_MIN_LINES = 5


@dataclass(frozen=True)
class InRunOptions:
    """What an in-run tune's executor and its start (engine/inrun_setup.py)
    take of tune's flags, built once by the command (commands/tune.py,
    inrun_options), never read from its namespace."""
    build_dir: str = None           # the build whose probe it preloads (None: found)
    libomp: str = ""                # LLVM's runtime, preloaded when the runtime is llvm
    runtime: str = "gomp"           # the runtime the program starts with (the runtime column)
    timeout: float = 3600           # s the program may take to reach its steady phase
    block: float = 0.5              # the least seconds a block measures
    progress: str = "auto"          # the work a block counts: auto | regions | waits | launches | lines
    metric: str = None              # the regex of the user's figure (None: no figure of theirs)
    metric_better: str = "higher"   # which way that figure is better
    probe_env: tuple = ()           # (variable, value) the probe reads (usercmd.probe_extra)
    user_env: tuple = ()            # (variable, value) of --env: the program's own settings


def line_buffered(env):
    """env (the program's) with its output made line-buffered (STDBUF_LIBRARIES' comment);
    the variables set, as a list of text for the output."""
    out, said = dict(env), []
    if "PYTHONUNBUFFERED" not in out:
        out["PYTHONUNBUFFERED"] = "1"
        said.append("PYTHONUNBUFFERED=1")
    lib = next((p for p in STDBUF_LIBRARIES if os.path.exists(p)), None)
    if lib and "_STDBUF_O" not in out:
        out["LD_PRELOAD"] = " ".join(x for x in (out.get("LD_PRELOAD", ""), lib) if x)
        out["_STDBUF_O"] = "L"
        out.setdefault("_STDBUF_E", "L")
        said.append(f"{os.path.basename(lib)} preloaded with _STDBUF_O=L (stdbuf -oL)")
    return out, said


def bursty(times, span_s):
    """Whether line arrival times (ns, in order) over span_s seconds (the block's, the warm-up's)
    came in bursts (BURST_*): read from a buffer, not as printed."""
    if len(times) < BURST_MIN_LINES:
        return False
    gaps = [(b - a) / 1e9 for a, b in zip(times, times[1:])]
    tiny = sum(1 for g in gaps if g < min(BURST_GAP_S, 0.05 * span_s / len(times)))
    return tiny >= BURST_SHARE * len(gaps)


def duration_s(text):
    """KMP_BLOCKTIME's value in seconds (N: ms; Nus, Nms, Ns; infinite: math.inf), None unreadable."""
    t = str(text).strip().lower()
    if t in ("infinite", "infinity"):
        return math.inf
    m = re.fullmatch(r"([0-9]+)\s*(us|ms|s)?", t)
    return int(m.group(1)) * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[m.group(2) or "ms"] if m else None


def own_spin_s(env, runtime):
    """How long the program's own idle workers spin after a region (s; math.inf: without end),
    from the environment it runs with (os.environ and --env) and the runtime in force (the
    probe's code: 1 libgomp, 2 LLVM). LLVM: KMP_BLOCKTIME, else OMP_WAIT_POLICY (active: no
    end, passive: none), else its 200 ms. libgomp: GOMP_SPINCOUNT, else OMP_WAIT_POLICY, else
    its 300000 pauses (GOMP_PAUSE_S each)."""
    policy = str(env.get("OMP_WAIT_POLICY", "")).strip().lower()
    if runtime == 2:
        own = duration_s(env["KMP_BLOCKTIME"]) if "KMP_BLOCKTIME" in env else None
        if own is not None:
            return own
        return math.inf if policy == "active" else 0.0 if policy == "passive" else LLVM_DEFAULT_BLOCKTIME / 1000
    if runtime == 1:
        count = str(env.get("GOMP_SPINCOUNT", "")).strip().lower()
        if count in ("infinite", "infinity"):
            return math.inf
        m = re.fullmatch(r"([0-9]+)\s*([kmgt]?)", count)
        if m:
            return int(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}[m.group(2)] * GOMP_PAUSE_S
        return math.inf if policy == "active" else 0.0 if policy == "passive" else GOMP_DEFAULT_SPINCOUNT * GOMP_PAUSE_S
    return 0.0


def spin_text(spin):
    """A spin's length for the output."""
    if spin is None:
        return "spin unknown"
    if spin == math.inf:
        return "spin without end"
    return f"spin {spin * 1000:.4g} ms" if spin > 0 else "no spin"


def settle_time(unit_s, own_spin, settings):
    """(the settle time after a switch in s, a note or None): at least MIN_SETTLE_S, two units
    of work, and the longest spin a setting may leave behind: the program's own (own_spin) or
    a blocktime asked (settings: (team, blocktime_ms, cuda_flags)), and SPIN_MARGIN more. A
    spin without end (the program's own active wait) cannot be waited out: the note says so."""
    spins = [b / 1000 for _, b, _ in settings if b is not None and b >= 0]
    if own_spin is not None and math.isfinite(own_spin):
        spins.append(own_spin)
    settle = max([MIN_SETTLE_S, 2 * unit_s] + [SPIN_MARGIN * s for s in spins])
    note = None
    if own_spin == math.inf:
        note = ("tune --in-run: your program's own wait policy spins its idle workers without end "
                "(OMP_WAIT_POLICY=active, KMP_BLOCKTIME or GOMP_SPINCOUNT infinite): a block after a larger team's "
                "carries the spin of the workers it left idle, which no settle time waits out (tune without --in-run "
                "compares the teams without it)")
    return settle, note


def knob_text(setting):
    """What a setting (team, blocktime_ms, cuda_flags; None: the program's own) changes, and
    where in a process it takes effect."""
    if setting is None:
        return "the program's own settings back (each knob at its own point)"
    team, blocktime, cuda = setting
    parts = []
    if team is not None and team > 0:
        parts.append(f"a team of {team} (at the next omp_get_max_threads() answered or region forked)")
    if blocktime is not None and blocktime >= 0:
        parts.append(f"LLVM's blocktime {blocktime} ms (set on a forking thread before its next region)")
    if cuda is not None and cuda >= 0:
        parts.append("the CUDA wait policy (the context's flags set and read back at its next wait)")
    return " and ".join(parts) or "nothing"


def process_alive(pid):
    """Whether process pid runs (not ended, not a zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][:1] not in ("Z", "X", "")


def command_line(pid, width=120):
    """Process pid's command line (/proc/<pid>/cmdline), cut to width; '?' once it ended."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read()
    except OSError:
        return "?"
    text = " ".join(x.decode(errors="replace") for x in raw.split(b"\0") if x) or "?"
    return text if len(text) <= width else text[:width - 3] + "..."


class Ended(Exception):
    """The program ended before the tune did."""


class Control:
    """The control block shared with the probe: a file mapped by both, laid
    out as the probe's describe.json says ("inrun"). ceiling: the largest
    team a setting may ask (the usable CPUs), written before the program
    starts (the probe answers omp_get_max_threads() with it until the first
    block: OpenMP's promise, src/probe/inrun.h)."""

    def __init__(self, path, layout, ceiling=0):
        self.layout, self.fields = layout, layout["fields"]
        missing = [f for f in NEEDED_FIELDS if f not in self.fields] + [
            k for k in ("max_procs", "proc_size", "proc_fields") if k not in layout]
        if missing:
            raise ThreadburnError(f"the probe's in-run control block (version {layout.get('version')}) has no "
                                  f"{', '.join(missing)}: a probe older than this threadburn; rebuild it "
                                  "(scripts/build.sh)")
        self.proc_fields = layout["proc_fields"]
        with open(path, "wb") as f:
            f.write(b"\0" * layout["size"])
        self.fd = os.open(path, os.O_RDWR)
        self.mm = mmap.mmap(self.fd, layout["size"])
        self.put("magic", layout["magic"])
        self.put("version", layout["version"])
        self.put("request", -1)
        self.put("ceiling", ceiling)

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
        """The owner's last snapshot, whole (its seqlock)."""
        for _ in range(1000):
            seq = self.get("seq")
            if seq % 2 == 0:
                values = {f: self.get(f) for f in SNAPSHOT}
                if self.get("seq") == seq:
                    return values
            time.sleep(0.0002)
        raise ThreadburnError("the probe's in-run snapshot kept changing (its sampler stuck mid-write?)")

    def _proc_get(self, i, name):
        at = self.fields["procs"] + i * self.layout["proc_size"] + self.proc_fields[name]
        return struct.unpack_from("<q", self.mm, at)[0]

    def proc(self, i):
        """Slot i's figures, whole (the slot's own seqlock); None while it is free."""
        for _ in range(1000):
            seq = self._proc_get(i, "seq")
            if seq % 2 == 0:
                values = {f: self._proc_get(i, f) for f in PROC_SNAPSHOT}
                if self._proc_get(i, "seq") == seq:
                    return values if values["pid"] > 0 else None
            time.sleep(0.0002)
        raise ThreadburnError(f"the probe's in-run slot {i} kept changing (its sampler stuck mid-write?)")

    def procs(self):
        """The steered processes, {pid: their slot's figures}, the owner first. A probe that
        took no slot though a process owns the block: the owner alone, from the owner's fields."""
        n = max(0, min(self.get("n_procs"), self.layout["max_procs"]))
        out = {}
        for i in range(n):
            p = self.proc(i)
            if p:
                out[p["pid"]] = p
        owner = self.get("owner_pid")
        if not out and owner > 0:
            snap = self.snapshot()
            out[owner] = dict(pid=owner, sample_ns=snap["sample_ns"], cpu_ns=snap["cpu_ns"], regions=snap["regions"],
                              applied=self.get("applied"), applied_ns=self.get("applied_ns"))
        return out

    def close(self):
        self.mm.close()
        os.close(self.fd)


@dataclass(frozen=True)
class Mark:
    """Where a block starts or ends: the work done so far (units, and when
    the last one ended, ns, from one snapshot), the CPU so far and when it
    was read (the owner's; procs: every steered process's (pid, CPU ns,
    its sample's ns), whose sum is the block's CPU when given)."""
    units: int
    last_ns: int
    cpu_ns: int
    sample_ns: int
    host: object  # launch.HostLoad at that point
    procs: tuple = ()


def observed_points(ctl, user_env, runtime, cpus, physical, kind="regions", program_env=None):
    """(the in-run points, each one's probe setting, what was left out and
    why) from what the probe saw since the steady phase began: regions and
    their team, omp_get_max_threads() asked, the runtime, waits or
    launches. plain (the program's own) is first, with no setting (-1).
    kind: the progress a block counts (InRunExecutor.kind); program_env:
    the environment the program runs with (os.environ and --env; default
    user_env), where its own blocktime and CUDA policy are read.

    A team is offered where the program leaves a region's team to the
    runtime or asks omp_get_max_threads() (the probe answers it with the
    block's team, so a program at one thread that asks before it forks, as
    PyTorch does, forks under a larger one). Such a program runs no region
    at all under one thread: its regions are no unit of progress across
    teams, so with kind "regions" the teams are left out, and the line
    says what to give instead (--metric)."""
    program_env = user_env if program_env is None else program_env
    plain = TunePoint("plain", runtime, user_env)
    points, settings, left_out = [plain], [None], []
    own = ctl.get("own_team") or ctl.get("team_seen")
    asks = ctl.get("asks")
    if ctl.get("free_regions") > 0 or asks > 0:
        if asks > 0 and kind == "regions":
            left_out.append("the team size (your program asks omp_get_max_threads() before it forks, as PyTorch does: "
                            "at one thread it runs no region at all, so its regions are no unit of progress across "
                            "teams; give --metric REGEX on a line it prints per step or per log interval, its first "
                            "group your figure, or with --progress lines each line it matches counted as a unit)")
        else:
            for n in sorted({1, physical or cpus, cpus} - {own}):
                points.append(TunePoint(f"T{n}", runtime, dict(user_env, OMP_NUM_THREADS=str(n)), builtin=True))
                settings.append((n, -1, -1))
    elif ctl.get("regions") > 0:
        left_out.append("the team size (every region names its own team: num_threads)")
    else:
        left_out.append("the team size (no OpenMP region ran and omp_get_max_threads() was never asked: a program that "
                        "runs its work on threads of its own cannot be given a team while it runs)")
    if ctl.get("runtime") == 2:
        spin = own_spin_s(program_env, 2)
        own_bt = round(spin * 1000) if math.isfinite(spin) else None
        for b in BLOCKTIMES:
            if b != own_bt:
                points.append(TunePoint(f"llvm-bt{b}", "llvm", dict(user_env, KMP_BLOCKTIME=str(b)), builtin=True))
                settings.append((-1, b, -1))
    elif ctl.get("regions") > 0:
        left_out.append("LLVM's blocktime (the runtime in force is not LLVM's)")
    if ctl.get("waits") > 0 or ctl.get("launches") > 0:
        own_policy = program_env.get(probe.CUDA_SYNC, probe.CUDA_SYNC_AUTO)
        for policy, flags in CUDA_FLAGS.items():
            if policy != own_policy:
                points.append(TunePoint(f"cuda-{policy}", runtime, dict(user_env, **{probe.CUDA_SYNC: policy}),
                                        builtin=True))
                settings.append((-1, -1, flags))
    left_out.append("the runtime itself, libgomp's wait policy and spin count, placement and your program's own "
                    "knobs: fixed at start (tune without --in-run covers them)")
    return points, settings, left_out


class InRunExecutor(campaign.Executor):
    """Runs a campaign's specs as blocks of one run of the command (module docstring)."""

    def __init__(self, cmd, env, control, columns, options, seed, log_path, work=None, cpus=None):
        """options: InRunOptions; work: the tune's work folder (the control block's, the
        probe's files); cpus: the ceiling written into the control block (the usable CPUs)."""
        self.cmd, self.ctl, self.columns, self.options, self.seed = cmd, control, columns, options, seed
        self.work, self.cpus, self.log_path = work, cpus, log_path
        self.index = {}            # point base key -> its setting's index (-1: the program's own)
        self.settings = {}         # a setting's index -> (team, blocktime_ms, cuda_flags); -1: None
        self.names = {-1: "plain"}  # a setting's index -> its point's name
        self.kind = None           # the progress counted: regions | waits | launches | lines
        self.block_s = self.settle_s = None
        self.lines, self.metric = [], re.compile(options.metric) if options.metric else None
        # --metric's figure (the first group of each line) is the block's figure, unless
        # --progress lines: then each line is a unit of work, timed as it arrives.
        self.figure = self.metric is not None and getattr(options, "progress", None) != "lines"
        self.commands = {}         # pid -> its command line (kept once the process ends)
        self.dropped = collections.Counter()  # (setting name, why) -> blocks dropped
        self.buffering = []        # the variables set to make the output line-buffered
        if self.metric is not None:
            env, self.buffering = line_buffered(env)
        self.env = env
        self.t0 = time.monotonic()
        self.log = open(log_path, "w", buffering=1)  # line by line: readable (tail -f) while it runs
        self.p = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, start_new_session=True,
                                  preexec_fn=die_with_parent)
        Children.procs = [self.p]
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        """The program's output into its log, each --metric match with the time it came (CLOCK_MONOTONIC
        ns). Every match of a line counts: processes that print at once (ranks) can run their lines
        together, as an unbuffered Python writes a print's text and its newline apart."""
        for line in self.p.stdout:
            t = time.monotonic_ns()
            self.log.write(line)
            for m in (self.metric.finditer(line) if self.metric else ()):
                if not self.figure:
                    self.lines.append((t, 1.0))
                    continue
                try:
                    self.lines.append((t, float(m.group(1))))
                except (IndexError, ValueError):
                    pass
        self.log.flush()

    def alive(self):
        return self.p.poll() is None and not self.ctl.get("ended")

    def wait_steady(self, timeout_s):
        """Until the probe of a process that does the work takes the control block (its steady phase)."""
        deadline = time.monotonic() + timeout_s
        while not self.ctl.get("owner_pid"):
            if not self.alive():
                raise Ended()
            if time.monotonic() > deadline:
                raise ThreadburnError(f"no steady phase in {timeout_s:g} s: the program ran no OpenMP region and did "
                                      "no device work (the in-run settings act there)")
            time.sleep(0.01)

    def command_of(self, pid):
        if pid not in self.commands or self.commands[pid] == "?":
            self.commands[pid] = command_line(pid)
        return self.commands[pid]

    def process_text(self, pid, p):
        return f"pid {pid} ({self.command_of(pid)}; from its first {WHY.get(p.get('why'), 'OpenMP region or device work')})"

    def steered_text(self):
        """Which processes are steered, and why (a line for the output)."""
        procs = self.ctl.procs()
        self.told = set(procs)
        return (f"tune --in-run: steering {len(procs)} process{'es' if len(procs) != 1 else ''} (those of the command "
                "that reached their first OpenMP region, device work or omp_get_max_threads() asked outside a region; "
                "each follows every block's setting, a block's "
                "CPU is their sum): " + ", ".join(self.process_text(pid, p) for pid, p in procs.items()))

    def joined_text(self):
        """A line for processes steered since the output last said (None: none): a worker or rank
        that reached its steady phase later."""
        procs = self.ctl.procs()
        new = [pid for pid in procs if pid not in getattr(self, "told", set())]
        if not new:
            return None
        self.told = set(procs)
        return (f"tune --in-run: steering {len(procs)} processes from now on: "
                + ", ".join(self.process_text(pid, procs[pid]) for pid in new) + " joined")

    def check_refused(self):
        """Refuses the tune where processes of the job reached their steady phase with every slot taken."""
        refused = self.ctl.get("refused")
        if refused > 0:
            procs = self.ctl.procs()
            raise ThreadburnError(
                f"--in-run: {refused} process{'es' if refused != 1 else ''} of your job reached the steady phase "
                f"beyond the probe's {self.ctl.layout['max_procs']} steered processes (pids "
                f"{', '.join(map(str, procs))} are): {'they' if refused != 1 else 'it'} would run on under "
                "their own settings while the others switch (ranks that wait for each other would measure "
                "the unsteered ones), so no block would hold what it says; tune with fewer processes in the run "
                "(ranks, workers, copies), or without --in-run")

    def pending(self, index):
        """The steered processes, alive, where setting `index` is not in effect yet: {pid: what is}."""
        return {pid: p["applied"] for pid, p in self.ctl.procs().items()
                if p["applied"] != index and process_alive(pid)}

    def mark(self):
        snap = self.ctl.snapshot()
        if self.kind == "lines":
            lines = self.lines
            n = len(lines)  # append-only: lines[n - 1] is the last one counted
            units, last = n, (lines[n - 1][0] if n else 0)
        else:
            count, end = PROGRESS[self.kind]
            units, last = snap[count], snap[end]
        procs = tuple((pid, p["cpu_ns"], p["sample_ns"]) for pid, p in self.ctl.procs().items())
        return Mark(units, last, snap["cpu_ns"], snap["sample_ns"], launch.HostLoad(), procs)

    def warm_up(self, seconds):
        """Watches the program under its own setting: what progresses (the
        kind counted unless --progress said), and the time a unit of it
        takes; sets the block time (and a first settle time: set_settle).
        Returns the seconds a unit took. With --metric it watches until
        WARM_LINES lines came (a training logs every few seconds, not every
        step), up to LONGEST_WARM_UP_S."""
        a = self.ctl.snapshot()
        lines0 = len(self.lines)
        t0 = time.monotonic()
        time.sleep(seconds)
        while self.metric and len(self.lines) - lines0 < WARM_LINES and time.monotonic() - t0 < LONGEST_WARM_UP_S:
            if not self.alive():
                raise Ended()
            time.sleep(0.05)
        seconds = time.monotonic() - t0
        b = self.ctl.snapshot()
        if not self.alive():
            raise Ended()
        seen = {k: b[c] - a[c] for k, (c, _) in PROGRESS.items()}
        if self.options.metric:
            self.kind = "lines"
            units = len(self.lines) - lines0
            if bursty([t for t, _ in self.lines[lines0:]], seconds):
                raise ThreadburnError(
                    f"--metric: the lines it matches came in bursts ({units} in {seconds:.3g} s, most within "
                    f"{BURST_GAP_S * 1000:g} ms of the one before): your program's output reaches threadburn from a "
                    "buffer, not as it prints it, so a line could not be timed to its block (threadburn set "
                    f"{', '.join(self.buffering) or 'nothing: they were set already'}); flush after each line "
                    "(Python: print(..., flush=True); C: fflush(stdout) or setvbuf(stdout, NULL, _IOLBF, 0))")
        else:
            self.kind = self.options.progress if self.options.progress not in (None, "auto") else next(
                (k for k in ("waits", "regions", "launches") if seen[k] > 0), None)
            units = seen.get(self.kind, 0) if self.kind else 0
        if not self.kind or units <= 0:
            raise ThreadburnError(f"no progress in {seconds:.3g} s of the steady phase (regions {seen['regions']}, device "
                                  f"waits {seen['waits']}, launches {seen['launches']}"
                                  + (f", lines matching --metric {len(self.lines) - lines0}" if self.metric else "")
                                  + "): nothing to measure a block by"
                                  + ("; a program that buffers its own output shows no line for a long while: flush "
                                     "after each line (Python: print(..., flush=True))"
                                     if self.metric and len(self.lines) == lines0 else ""))
        unit_s = seconds / units
        self.unit_s = unit_s
        self.set_settle([])
        self.block_s = max(self.options.block, MIN_UNITS * 2 * unit_s)
        return unit_s

    def set_points(self, points, settings):
        """The points a block may run (observed_points: plain first, no setting) and each
        one's probe setting: the index the control block's request names them by."""
        self.index = {p.base_key: i - 1 for i, p in enumerate(points)}
        self.settings = {i - 1: s for i, s in enumerate(settings)}
        self.names = {i - 1: p.name for i, p in enumerate(points)}

    def set_settle(self, settings):
        """The settle time for the settings tried (settle_time: the program's own spin read from
        the environment it runs with); returns settle_time's note."""
        self.own_spin = own_spin_s(self.env, self.ctl.get("runtime"))
        self.settle_s, note = settle_time(self.unit_s, self.own_spin, settings)
        return note

    def execute(self, specs):
        for spec in specs:
            yield spec, [self.block(spec)]

    def block(self, spec):
        point = spec.item
        index = self.index[point.base_key]
        self.ctl.put("request", index)
        started, t_ask = utc_now(), time.monotonic()
        self.check_refused()
        joined = self.joined_text()
        if joined:
            print(joined, flush=True)
        timeout = max(1.0, self.block_s)
        while True:
            pending = self.pending(index)
            if not pending:
                break
            if not self.alive():
                raise Ended()
            if time.monotonic() - t_ask >= timeout:
                return self.not_applied(spec, index, pending, started, time.monotonic() - t_ask)
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

    def not_applied(self, spec, index, pending, started, wall_s):
        """A block whose setting did not take effect in every steered process in time: dropped and named."""
        what = knob_text(self.settings.get(index))
        where = "; ".join(f"pid {pid} ({self.command_of(pid)}): "
                          + ("none yet" if was == NONE_APPLIED else f"still {self.names.get(was, f'setting {was}')}")
                          for pid, was in pending.items())
        row = self.base_row(spec, started, wall_s)
        row.update(status="skipped", reason=f"dropped: {spec.item.name} not in effect after {wall_s:.1f} s "
                   f"({what}) in {where}")
        self.dropped[(spec.item.name, "its setting not in effect in time in every steered process")] += 1
        return row

    def skip(self, row, name, why, reason):
        row.update(status="skipped", reason=f"dropped: {reason}")
        self.dropped[(name, why)] += 1
        return row

    def base_row(self, spec, started, wall_s):
        point = spec.item
        row = Row(schema_version=schema.SCHEMA_VERSION, run_key=spec.key, grid="tune", study=point.name, preset="",
                  benchmark=os.path.basename(self.cmd[0]), bench="inrun", runtime=point.runtime, processes=1,
                  command=" ".join(self.cmd), metric_better=self.options.metric_better if self.figure else "",
                  repetition=spec.rep, proc_index=0, seed=self.seed, order_index=spec.order_index, round=spec.round,
                  phase=point.phase, run_rows=1, point_key=point.base_key, started_at=started, finished_at=utc_now(),
                  wall_s=round(wall_s, 3), exit_code=0, progress=self.kind,
                  settle_ms=round(self.settle_s * 1000, 3) if self.settle_s is not None else None)
        row.update(probe.setting_cells(self.columns, dict(os.environ, **point.env)))
        return row

    def cpu_rate(self, a, b, block_ms):
        """The steered processes' CPU in the block, in cores (each one's CPU over its own samples'
        interval, summed), and why not (None, reason) where a process joined during the block."""
        if not b.procs:
            return (b.cpu_ns - a.cpu_ns) / 1e6 / block_ms, None
        was = {pid: (cpu, t) for pid, cpu, t in a.procs}
        rate = 0.0
        for pid, cpu, t in b.procs:
            if pid not in was or was[pid][1] <= 0:
                return None, (f"pid {pid} ({self.command_of(pid)}) joined the steered processes during the block: "
                              "its CPU before it is not the block's")
            if t > was[pid][1]:
                rate += (cpu - was[pid][0]) / (t - was[pid][1])
        return rate, None

    def row(self, spec, a, b, started, wall_s):
        point = spec.item
        row = self.base_row(spec, started, wall_s)
        units = b.units - a.units
        block_ms = (b.sample_ns - a.sample_ns) / 1e6
        if units < 1 or block_ms <= 0:
            row.update(units=units, status="failed", reason=f"no {self.kind} ended in {wall_s:.1f} s under {point.name}")
            return row
        rate, joined = self.cpu_rate(a, b, block_ms)
        if joined:
            return self.skip(row, point.name, "a process joined the steered ones during it", joined)
        cpu_ms = rate * block_ms
        _, other, steal, _ = a.host.end()  # the host's CPU since a (and the harness's own)
        row.update(block_ms=round(block_ms, 3), cpu_ms=round(cpu_ms, 3), wall_ms=round(block_ms, 3), units=units)
        if other is not None:  # the host's CPU since a, less the program's own: what else ran in the block
            row.update(host_other_cpu_ms=round(max(0.0, other - cpu_ms), 1), host_steal_ms=round(steal or 0.0, 1))
        # The time a unit took: from the last unit before the block to the block's last (both from
        # one snapshot each, count and time together); none yet before it: the block's time.
        unit_ms = (b.last_ns - a.last_ns) / 1e6 / units if a.last_ns > 0 else block_ms / units
        if not unit_ms > 0:
            return self.skip(row, point.name, "no positive unit time",
                             f"no positive time a unit under {point.name} ({units} {self.kind} ended, the last at "
                             f"{b.last_ns} ns, the one before the block at {a.last_ns} ns): its count and time "
                             "do not agree")
        row.update(unit_ms=round(unit_ms, 4))
        if self.kind == "lines":
            times = [t for t, _ in self.lines if a.last_ns < t <= b.last_ns]
            if bursty(times, block_ms / 1000):
                return self.skip(row, point.name, "its lines came in a burst",
                                 f"the {len(times)} lines of the block came in a burst, from a buffer: not "
                                 "timed to the block")
        row.update(status="ok", reason="")
        if self.figure:
            values = [v for t, v in self.lines if a.last_ns < t <= b.last_ns]
            row.metric = sum(values) / len(values)
            # CPU per unit of the user's figure: a rate (higher better) or a time a unit (lower better).
            per = 1.0 / row.metric if self.options.metric_better == "higher" else row.metric
            row.update(unit_cpu_ms=round(rate * per * 1000, 4))
        else:
            row.update(unit_cpu_ms=round(rate * unit_ms, 4))
        return row

    def dropped_text(self):
        """A line for the verdict: the blocks dropped and why (None: none)."""
        if not self.dropped:
            return None
        n = sum(self.dropped.values())
        parts = [f"{name} {k} ({why})" for (name, why), k in sorted(self.dropped.items())]
        return (f"tune --in-run: {n} block{'s' if n != 1 else ''} dropped, not counted in the verdict: "
                + ", ".join(parts) + " (their reasons in the results' reason column)")

    def held_back_text(self):
        """A line for the verdict where regions kept another team than their block's (None: none)."""
        n = self.ctl.get("held_back")
        if n <= 0:
            return None
        return (f"tune --in-run: {n} region{'s' if n != 1 else ''} kept another team than their block's: the thread "
                "that forked each had been told that team by omp_get_max_threads() and had not asked since "
                "(OpenMP's promise: a region gets exactly what its thread was told; a program that sized once at "
                "start keeps its team), so those regions ran as under that team")

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
