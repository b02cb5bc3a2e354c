"""What a run's measured causes call for (docs/cuda.md, "Advice"): pure
functions of one probed process's counters and context, each line carrying
the figures it rests on, no line where the figures cannot tell.

Every figure is the steady phase's (from the program's first training step
the probe recognises, else its first device work, or its first OpenMP region
in a program without any, to its end): an
import and initialisation of seconds at a core of CPU would otherwise
drown the steps, and the whole run's CPU shares cannot tell a spinning
wait for the GPU from the host's own work. The time and CPU inside the
CUDA driver's waits can (src/cuda/driver_calls.h).

    sync-bound    the main thread waits for the device a large share of the
                  steady phase; under a policy that spins, the CPU it burns
                  there is what blocking_sync saves
    host-bound    the GPU idles most of the steady phase while the main
                  thread works, outside its waits, near a core, or would
                  have but for the time it waited for a core (a main thread
                  starved by other threads or processes; in a throttled slot,
                  by its CPU quota: a thread waiting for its quota is not idle)
    (The thread judged is the one that carries the device work: the main
    thread where it launches the kernels and waits; else the threads that
    do, by their class (an autograd device thread: PyTorch runs a CUDA
    backward pass on one of its own), from the probe's device_calls:
    device_threads() below.)
    loader-bound  the main thread sits idle outside its waits while the
                  worker processes run near a core each (not said of a
                  throttled slot: a thread waiting for its quota is not idle)
    spinning      the OpenMP workers burned a large share of their CPU while
                  no region ran: the wait settings that stop it (the whole
                  run's figures, a CPU run's advice as much as a GPU run's:
                  between_regions)
    throttled     the slot's CPU quota (a container's --cpus, a Kubernetes
                  CPU limit, a Slurm cgroup: src/core/slot.h) ran out in a
                  large share of its periods; the line names the cause it
                  can see: OpenMP workers that spin between regions (the
                  quota charges the spin), a team larger than the slot's
                  CPUs, or else a program that needs more CPU than the slot

An in-run tune's blocks (tune --in-run) get one note of the same kind:
    unit spread   a unit of work's time moved much from block to block of
                  one setting: the units differ in size, and the user's own
                  figure would judge better (unit_spread_note)

Thresholds are named below and documented in docs/cuda.md (the unit
spread's in docs/design.md, "In-run trials").
"""
import math
import statistics
from dataclasses import dataclass, replace

from .runfigures import UNIT_KIND
from ..lib import fmt
from ..lib.paths import CUDA_SYNC

# The main thread waits "a large share" of the steady phase for the device.
SYNC_SHARE = 0.2
# A wait "spins" when the CPU inside it is at least this share of its time
# (a blocking wait costs a wake-up: 0.03 of it on an H200).
SPIN_SHARE = 0.5
# A thread "near a core" ran at least this share of one.
NEAR_A_CORE = 0.8
# The GPU "idles" below this busy share (NVML's: the share of its sample
# periods a kernel ran in).
GPU_LOW = 0.5
# The main thread "sits idle" (off the CPU, outside its waits on the device,
# and not waiting for a core) at least this share of the steady phase.
IDLE_SHARE = 0.3
# A main thread "starved" waited for a core (ready to run, none free) at
# least this share of the steady phase: the host-bound line names the cause.
STARVED_SHARE = 0.1
# A slot is "throttled" when its cgroup ran out of its CPU quota in at least this share of
# the quota's periods (cpu.stat nr_throttled / nr_periods; the steady phase's where it has one).
THROTTLED_SHARE = 0.1
# Under a throttled quota, the OpenMP workers' CPU between regions "matters" from this share
# of the CPU the run used: the quota charges their spin like any other work.
SPIN_OF_CPU = 0.1
# The OpenMP workers' CPU between regions calls for advice above this share of
# their CPU in all, and above BETWEEN_MIN_MS (a short run's few ms of spin say
# nothing worth a change).
BETWEEN_SHARE = 0.1
BETWEEN_MIN_MS = 50


def figure(counters, name):
    """A counter as a number; None when absent, empty or NaN."""
    try:
        value = float(counters.get(name))
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


@dataclass(frozen=True)
class Steady:
    """The steady phase's figures the advice rests on (ms unless said)."""
    ms: float
    cpu_ms: float
    main_cpu_ms: float
    children_ms: float
    workers: int
    gpu_busy: float          # None: no GPU sampled in the phase
    main_wait_ms: float      # the main thread inside the driver's waits
    main_wait_cpu_ms: float
    waits: int               # the main thread's
    wait_cpu_ms: float       # every thread's CPU inside the waits
    launches: int
    launch_ms: float
    main_runq_ms: float = 0.0  # the main thread's run-queue wait (0 in files from before it was counted)
    who: str = "the main thread"  # the thread(s) the main_* figures are of (device_threads())
    launchers: str = ""           # who launched the kernels, with shares, when not the main thread alone
    throttled_share: float = 0.0  # the quota's periods it ran out in (0 without a quota)
    gpus_said: str = ""           # each GPU's busy share, the busiest first, where the process used several

    @property
    def main_share(self):
        return self.main_cpu_ms / self.ms

    @property
    def wait_share(self):
        return self.main_wait_ms / self.ms

    @property
    def main_outside_waits(self):
        """Cores the main thread used outside its waits on the device."""
        return (self.main_cpu_ms - self.main_wait_cpu_ms) / self.ms

    @property
    def main_demand(self):
        """Cores the main thread used, or wanted and waited for, outside its waits on the device."""
        return (self.main_cpu_ms - self.main_wait_cpu_ms + self.main_runq_ms) / self.ms

    def runq_in_waits(self, policy):
        """What of the main thread's run-queue wait fell inside its waits on the device, at the
        least: a spinning wait is never asleep, its time is CPU or a wait for a core, so a
        spinning wait starved of a core shows as run-queue wait, not CPU (seen: 0.42 of a
        core inside the waits at a load of 5 on 2 cores, 2.5 s waiting for one). The least
        is the run-queue wait less all the time outside the waits it could have been in
        (the phase outside them less its CPU there), capped at the waits' time off the CPU;
        none under blocking_sync, whose waits sleep (their wake-up's wait for a core is no spin)."""
        if policy == "blocking_sync":
            return 0.0
        outside_off_cpu = self.ms - self.main_wait_ms - max(0.0, self.main_cpu_ms - self.main_wait_cpu_ms)
        least = self.main_runq_ms - max(0.0, outside_off_cpu)
        return max(0.0, min(least, self.main_wait_ms - self.main_wait_cpu_ms))

    @property
    def main_runq_share(self):
        """The share of the phase the main thread was ready to run and had no core."""
        return self.main_runq_ms / self.ms

    @property
    def main_idle_share(self):
        """The share of the phase the main thread was off the CPU outside its waits, not for want of a core."""
        off = self.main_wait_ms - self.main_wait_cpu_ms + self.main_runq_ms
        return max(0.0, (self.ms - self.main_cpu_ms - off) / self.ms)


def steady_of(counters):
    """The steady phase of a probe's counters, or None when there is none
    (the program did no device work and ran no OpenMP region)."""
    ms = figure(counters, "steady_ms")
    if not ms or ms <= 0:
        return None
    get = lambda name: figure(counters, name) or 0.0  # noqa: E731
    return Steady(ms=ms, cpu_ms=get("steady_cpu_ms"), main_cpu_ms=get("steady_cpu_main_ms"),
                  children_ms=get("steady_children_cpu_ms"), workers=int(get("child_processes")),
                  gpu_busy=figure(counters, "steady_gpu_busy_share"), main_wait_ms=get("main_sync_wait_ms"),
                  main_wait_cpu_ms=get("main_sync_cpu_ms"), waits=int(get("main_syncs")),
                  wait_cpu_ms=get("sync_cpu_ms"), launches=int(get("launches")), launch_ms=get("launch_ms"),
                  main_runq_ms=get("steady_wait_main_ms"), throttled_share=quota_of(counters).share)


def _s(ms):
    return f"{ms / 1000:.3g} s" if ms >= 1000 else f"{ms:.3g} ms"


def sync_bound(p, policy):
    if p.waits == 0 or p.wait_share < SYNC_SHARE:
        return None
    head = (f"sync-bound: {p.who} waited for the GPU {p.wait_share:.0%} of the steady phase "
            f"({_s(p.main_wait_ms)} in {p.waits} waits)")
    if p.main_wait_cpu_ms + p.runq_in_waits(policy) >= SPIN_SHARE * p.main_wait_ms:
        saving = p.wait_cpu_ms
        return (f"{head} and burned {_s(p.main_wait_cpu_ms)} of CPU inside them under the policy in force "
                f"({policy}), which spins: blocking_sync would save about {_s(saving)} of CPU, "
                f"{saving / max(p.cpu_ms, 1e-9):.0%} of the steady phase's; `threadburn tune -- <command>` measures "
                f"whether it costs time (`threadburn run --env {CUDA_SYNC}=blocking_sync -- <command>` shows it once)")
    return (f"{head}, its waits sleeping under the policy in force ({policy}: {_s(p.main_wait_cpu_ms)} of CPU "
            "inside them): the GPU sets the pace, and the host's core is free meanwhile; a wait policy gains "
            "nothing more")


def _busy(p):
    if p.gpus_said:
        return f"its GPUs were busy {p.gpus_said}"
    return f"the GPU was busy {p.gpu_busy:.0%}"


def process_gpus(p, gpus):
    """The steady phase's GPU figure judged per GPU of the process (the
    summary's steady_gpus, those it used): the host-bound rule asks whether
    the busiest of them idled, not their mean (one of two GPUs busy 90 % and
    the other 10 % is not half busy: the first sets the pace), and its line
    names each one's share. The visible GPUs the process did not use are in
    no figure. p as it is with one GPU or without per-GPU figures."""
    used = sorted((g for g in gpus or [] if g.get("used") and isinstance(g.get("busy_share"), (int, float))
                   and g.get("samples")), key=lambda g: -g["busy_share"])
    if len(used) < 2:
        return p
    said = " and ".join(f"{g['busy_share']:.0%} (GPU {g.get('index')}{', the busiest' if i == 0 else ''})"
                        for i, g in enumerate(used))
    return replace(p, gpu_busy=used[0]["busy_share"], gpus_said=said)


def host_bound(p):
    if p.gpu_busy is None or p.gpu_busy >= GPU_LOW or p.main_demand < NEAR_A_CORE:
        return None
    launches = f" ({p.launches} launches, {_s(p.launch_ms)} inside them)" if p.launches else ""
    several = " and " in p.who
    subject = p.who if not p.launchers else "together they" if several else "it"
    head = (f"host-bound: {p.launchers}{subject} worked {p.main_outside_waits:.2f} of a core outside "
            f"{'their' if several else 'its'} waits on the device")
    if p.main_runq_share >= STARVED_SHARE and p.throttled_share >= THROTTLED_SHARE:
        # A thread of a throttled cgroup waits to run while the quota is spent (the kernel counts it
        # as run-queue wait): not idle, and not the cores' fault but the quota's.
        return (f"{head} and waited to run {p.main_runq_share:.0%} of the steady phase ({_s(p.main_runq_ms)}) in a "
                f"slot whose CPU quota ran out in {p.throttled_share:.0%} of its periods, while {_busy(p)} "
                "of it: the GPU waits for the thread that launches its work{launches}, and that "
                "thread for the slot's quota, not for idle cores. A larger quota (docs/slot.md: tune --cpus measures "
                "how many CPUs it needs), or less CPU spent beside it in the slot (OMP_NUM_THREADS, spinning waits, "
                "loader workers); a wait policy cannot help.")
    if p.main_runq_share >= STARVED_SHARE:
        return (f"{head} and waited for a core {p.main_runq_share:.0%} of the steady phase ({_s(p.main_runq_ms)}: "
                f"other threads or processes held the cores) while {_busy(p)} of it: the GPU "
                f"waits for the thread that launches its work{launches}, and that thread for a CPU. Give it one "
                "first: fewer threads beside it (OMP_NUM_THREADS, loader workers, other processes on its cores); "
                "then less host work per sample; a wait policy cannot help.")
    return (f"{head} while {_busy(p)} of the steady phase: the GPU waits for the thread "
            f"that launches its work{launches}. Less host work per sample (a larger batch, fewer small kernels, "
            "CUDA graphs, data kept on the GPU) helps it; a wait policy cannot.")


def loader_bound(p):
    if not p.workers:
        return None
    each = p.children_ms / (p.workers * p.ms)
    if each < NEAR_A_CORE or p.main_idle_share < IDLE_SHARE or p.throttled_share >= THROTTLED_SHARE:
        return None
    return (f"loader-bound: {p.who} sat idle {p.main_idle_share:.0%} of the steady phase outside its waits "
            f"on the device while its {p.workers} worker processes ran {each:.2f} of a core each: it waits for "
            "their batches. More workers (where cores are free), cheaper transforms, or the data kept on the GPU; "
            "`threadburn tune --param workers=...` measures which.")


# How the advice names a thread of each class (the probe's classes, src/core/thread_class.h).
THREAD_OF_CLASS = {"main": "the main thread", "autograd": "the autograd thread", "pin": "the pin-memory thread",
                   "cuda": "a CUDA driver thread", "omp": "an OpenMP worker", "tbb": "a TBB worker",
                   "loader": "a loader thread", "gloo": "a gloo thread"}


def _thread(t, classes):
    """A device thread's words: by class, a thread of a class with several by its tid too."""
    word = THREAD_OF_CLASS.get(t.get("class"))
    if word is None or classes.count(t.get("class")) > 1:
        word = f"thread {t.get('tid')}" + (f" ({t['name']})" if t.get("name") else "") + \
            (f" of class {t.get('class')}" if t.get("class") not in (None, "other") else "")
    return word


def device_threads(p, calls, steady_classes):
    """The steady phase's figures re-read from the threads that carry the
    device work, where that is not the main thread alone: (for sync-bound)
    the waits of the thread that waited longest; (for host- and
    loader-bound) the CPU and waits of every thread that launched, with
    their classes' run-queue wait: launches from two threads in turn, a
    forward pass on the main thread and a backward on the autograd thread,
    add up. Each named by its class, the launchers with their share of the
    launches. (p, p) when the main thread made every launch and wait, or the
    summary has no per-thread figures (files from before them)."""
    threads = [t for t in calls or [] if (t.get("launches") or t.get("syncs"))
               and isinstance(t.get("steady_cpu_ms"), (int, float))]
    if not threads or all(t.get("class") == "main" for t in threads):
        return p, p
    classes = [t.get("class") for t in threads]
    waiter = max(threads, key=lambda t: t.get("sync_wait_ms") or 0)
    sync = replace(p, who=_thread(waiter, classes), main_wait_ms=waiter.get("sync_wait_ms") or 0.0,
                   main_wait_cpu_ms=waiter.get("sync_cpu_ms") or 0.0, waits=int(waiter.get("syncs") or 0))
    launchers = sorted((t for t in threads if t.get("launches")), key=lambda t: -t["launches"])
    if not launchers:
        return sync, p
    total = sum(t["launches"] for t in launchers)
    runq = sum(((steady_classes or {}).get(cls) or {}).get("wait_ms") or 0.0
               for cls in {t.get("class") for t in launchers})
    if len(launchers) == 1:
        said = f"{_thread(launchers[0], classes)} launched all {total} kernels; "
    else:
        said = ("the kernels were launched by " + ", ".join(f"{_thread(t, classes)} ({t['launches'] / total:.0%})"
                                                           for t in launchers) + "; ")
    host = replace(p, who=" and ".join(_thread(t, classes) for t in launchers),
                   launchers=said, main_cpu_ms=sum(t["steady_cpu_ms"] for t in launchers),
                   main_wait_ms=sum(t.get("sync_wait_ms") or 0.0 for t in launchers),
                   main_wait_cpu_ms=sum(t.get("sync_cpu_ms") or 0.0 for t in launchers), main_runq_ms=runq)
    return sync, host


def between_regions(counters):
    """The OpenMP workers' spin between regions: a line when they burned
    over BETWEEN_SHARE of their CPU and over BETWEEN_MIN_MS while no region
    ran, naming the settings that stop it; None otherwise."""
    burned = counters["omp_between_regions_ms"]
    if not (burned > BETWEEN_SHARE * max(counters["cpu_omp_ms"], 1e-9) and burned > BETWEEN_MIN_MS):
        return None
    return (f"the workers burned {fmt.ms(burned)} while no region ran (spin-waiting). KMP_BLOCKTIME=0 or "
            "OMP_WAIT_POLICY=passive stop that, at some cost to the next region; `threadburn tune -- <command>` "
            "measures which setting costs least here.")


def device_advice(counters, context, calls=None, steady_classes=None, gpus=None):
    """The lines of advice of a process's steady phase (each 'kind: ...');
    none without a steady phase. calls, steady_classes: the summary's
    device_calls and steady_classes (the threads that launch and wait);
    gpus: its steady_gpus (each GPU's busy share: process_gpus)."""
    p = steady_of(counters)
    if p is None:
        return []
    p = process_gpus(p, gpus)
    policy = context.get("cuda_sync_in_force", "n/a")
    sync, host = device_threads(p, calls, steady_classes)
    return [line for line in (sync_bound(sync, policy), host_bound(host), loader_bound(host)) if line]


@dataclass(frozen=True)
class Quota:
    """The throttling of the slot's CPU quota: the steady phase's figures
    where the run has one, else the whole run's; periods None without a
    quota (or in files from before it was read)."""
    periods: float = None
    throttled: float = 0.0
    throttled_ms: float = 0.0
    steady: bool = False

    @property
    def share(self):
        return self.throttled / self.periods if self.periods else 0.0


def quota_of(counters):
    steady = figure(counters, "steady_quota_periods") is not None and (figure(counters, "steady_ms") or 0) > 0
    prefix = "steady_" if steady else ""
    periods = figure(counters, prefix + "quota_periods")
    if periods is None:
        return Quota()
    return Quota(periods=periods, throttled=figure(counters, prefix + "throttled_periods") or 0.0,
                 throttled_ms=figure(counters, prefix + "throttled_ms") or 0.0, steady=steady)


def quota_line(counters, context):
    """The report's line on the quota's throttling; None without a quota."""
    q = quota_of(counters)
    if q.periods is None:
        return None
    where = "the steady phase" if q.steady else "the run"
    return (f"CPU quota ({context.get('cpu_quota', '?')} CPUs a {_period(context)} period): throttled in "
            f"{int(q.throttled)} of {int(q.periods)} periods of {where} ({q.share:.0%}), {_s(q.throttled_ms)} "
            "held back (the cgroup's cpu.stat: every process in it counts)")


def _period(context):
    try:
        return _s(int(context.get("cpu_period_us")) / 1000)
    except (TypeError, ValueError):
        return "?"


def throttled(counters, context):
    """'throttled: ...' when the slot's quota ran out in THROTTLED_SHARE of
    its periods or more, naming what spends it; None otherwise."""
    q = quota_of(counters)
    if q.periods is None or q.share < THROTTLED_SHARE:
        return None
    quota = context.get("cpu_quota", "?")
    head = (f"throttled: the cgroup ran out of its CPU quota in {q.share:.0%} of its {_period(context)} periods "
            f"({int(q.throttled)} of {int(q.periods)} in {'the steady phase' if q.steady else 'the run'}), "
            f"{_s(q.throttled_ms)} held back")
    team = int(figure(counters, "max_team") or 0)
    try:
        slot = int(context.get("effective_cpus"))
    except (TypeError, ValueError):
        slot = 0
    between, cpu = figure(counters, "omp_between_regions_ms") or 0.0, figure(counters, "cpu_ms") or 0.0
    fewer = f"OMP_NUM_THREADS={slot}" if 0 < slot < team else "fewer threads"
    if team > 1 and cpu > 0 and between >= SPIN_OF_CPU * cpu:
        workers = f"{team - 1} OpenMP workers spin" if team > 2 else "the OpenMP worker spins"
        return (f"{head}: {workers} between regions under a {quota}-CPU quota "
                f"({_s(between)} of CPU, {between / cpu:.0%} of the run's, charged to the quota like work): "
                f"{fewer}, or a passive wait (OMP_WAIT_POLICY=passive); `threadburn tune -- <command>` "
                "measures which costs least")
    if slot and team > slot:
        return (f"{head}: a team of {team} threads in a slot of {slot} CPUs ({quota}-CPU quota): "
                f"OMP_NUM_THREADS={slot}; `threadburn tune -- <command>` measures it")
    return (f"{head}: the program needs more CPU than the slot's {quota} CPUs; a larger quota (docs/slot.md), "
            "or less work per step")


# An in-run tune: a unit's time that moves more than this between blocks of one setting
# (the median deviation from the setting's own median, over every block) says the units
# differ in size: the count of them measures the program's phases as well as the settings
# (the note of unit_spread).
UNIT_SPREAD_NOTE = 0.15


def unit_spread(records):
    """How much a unit's time moved between blocks of one setting: the median, over every
    block measured by its unit count, of |log(its unit time / its setting's median)|, as a
    ratio less 1 (0.1: a block's unit typically 10 % off its setting's). None with fewer
    than 2 such blocks of any setting."""
    by = {}
    for r in records:
        if r.time_kind == UNIT_KIND and r.time and r.time > 0:
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
