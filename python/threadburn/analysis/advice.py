"""What a run's measured causes call for (docs/cuda.md, "Advice"): pure
functions of one probed process's counters and context, each line carrying
the figures it rests on, no line where the figures cannot tell.

Every figure is the steady phase's (from the program's first device work,
or its first OpenMP region in a program without any, to its end): an
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
                  starved by other threads or processes)
    loader-bound  the main thread sits idle outside its waits while the
                  worker processes run near a core each

Thresholds are named below and documented in docs/cuda.md.
"""
import math
from dataclasses import dataclass

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
# The variable of the CUDA host wait policy (lib/paths.py's CUDA_SYNC).
CUDA_SYNC = "THREADBURN_CUDA_SYNC"


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
                  main_runq_ms=get("steady_wait_main_ms"))


def _s(ms):
    return f"{ms / 1000:.3g} s" if ms >= 1000 else f"{ms:.3g} ms"


def sync_bound(p, policy):
    if p.waits == 0 or p.wait_share < SYNC_SHARE:
        return None
    head = (f"sync-bound: the main thread waited for the GPU {p.wait_share:.0%} of the steady phase "
            f"({_s(p.main_wait_ms)} in {p.waits} waits)")
    if p.main_wait_cpu_ms >= SPIN_SHARE * p.main_wait_ms:
        saving = p.wait_cpu_ms
        return (f"{head} and burned {_s(p.main_wait_cpu_ms)} of CPU inside them under the policy in force "
                f"({policy}), which spins: blocking_sync would save about {_s(saving)} of CPU, "
                f"{saving / max(p.cpu_ms, 1e-9):.0%} of the steady phase's; `threadburn tune -- <command>` measures "
                f"whether it costs time (`threadburn run --env {CUDA_SYNC}=blocking_sync -- <command>` shows it once)")
    return (f"{head}, its waits sleeping under the policy in force ({policy}: {_s(p.main_wait_cpu_ms)} of CPU "
            "inside them): the GPU sets the pace, and the host's core is free meanwhile; a wait policy gains "
            "nothing more")


def host_bound(p):
    if p.gpu_busy is None or p.gpu_busy >= GPU_LOW or p.main_demand < NEAR_A_CORE:
        return None
    launches = f" ({p.launches} launches, {_s(p.launch_ms)} inside them)" if p.launches else ""
    head = (f"host-bound: the main thread worked {p.main_outside_waits:.2f} of a core outside its waits on the "
            f"device")
    if p.main_runq_share >= STARVED_SHARE:
        return (f"{head} and waited for a core {p.main_runq_share:.0%} of the steady phase ({_s(p.main_runq_ms)}: "
                f"other threads or processes held the cores) while the GPU was busy {p.gpu_busy:.0%} of it: the GPU "
                f"waits for the thread that launches its work{launches}, and that thread for a CPU. Give it one "
                "first: fewer threads beside it (OMP_NUM_THREADS, loader workers, other processes on its cores); "
                "then less host work per sample; a wait policy cannot help.")
    return (f"{head} while the GPU was busy {p.gpu_busy:.0%} of the steady phase: the GPU waits for the thread "
            f"that launches its work{launches}. Less host work per sample (a larger batch, fewer small kernels, "
            "CUDA graphs, data kept on the GPU) helps it; a wait policy cannot.")


def loader_bound(p):
    if not p.workers:
        return None
    each = p.children_ms / (p.workers * p.ms)
    if each < NEAR_A_CORE or p.main_idle_share < IDLE_SHARE:
        return None
    return (f"loader-bound: the main thread sat idle {p.main_idle_share:.0%} of the steady phase outside its waits "
            f"on the device while its {p.workers} worker processes ran {each:.2f} of a core each: it waits for "
            "their batches. More workers (where cores are free), cheaper transforms, or the data kept on the GPU; "
            "`threadburn tune --param workers=...` measures which.")


def device_advice(counters, context):
    """The lines of advice of a process's steady phase (each 'kind: ...');
    none without a steady phase."""
    p = steady_of(counters)
    if p is None:
        return []
    policy = context.get("cuda_sync_in_force", "n/a")
    return [line for line in (sync_bound(p, policy), host_bound(p), loader_bound(p)) if line]
