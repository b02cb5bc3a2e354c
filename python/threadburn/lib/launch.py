"""The one process launcher: a command run to its end (or its timeout) in a
session of its own, killed with us, with what it cost and what else ran
meanwhile.

Every run reports the CPU of its process tree (its waited-for descendants
included, from the kernel's child accounting) and, from /proc/stat, the CPU
the rest of the machine used during it and the time the hypervisor stole:
the run's own evidence of being disturbed (analysis/verdicts.py sets such
runs aside, and says so).
"""
import os
import resource
import subprocess
import time
from dataclasses import dataclass

from .procs import Children, Interrupt, die_with_parent

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def _host_ticks():
    """(busy ticks of all CPUs but steal, steal ticks) from /proc/stat's cpu line."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    steal = fields[7] if len(fields) > 7 else 0
    return user + nice + system + irq + softirq, steal


def _own_ms():
    """CPU of this process and its reaped children, in ms."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        u = resource.getrusage(who)
        total += (u.ru_utime + u.ru_stime) * 1000
    return total


def _children_ms():
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (u.ru_utime + u.ru_stime) * 1000


class HostLoad:
    """What the machine did between begin (construction) and end(): the CPU
    of our reaped children, and the CPU of everything else and the steal."""

    def __init__(self):
        self.t0 = time.monotonic()
        self.host0, self.own0, self.children0 = _host_ticks(), _own_ms(), _children_ms()

    def end(self):
        """(children's CPU ms, other processes' CPU ms, steal ms, wall s);
        the host figures None where /proc/stat cannot be read."""
        wall = time.monotonic() - self.t0
        children = _children_ms() - self.children0
        host = _host_ticks()
        if host is None or self.host0 is None:
            return children, None, None, wall
        busy = (host[0] - self.host0[0]) * TICK_MS
        steal = (host[1] - self.host0[1]) * TICK_MS
        other = max(0.0, busy - (_own_ms() - self.own0))
        return children, other, steal, wall


@dataclass
class Finished:
    code: int            # exit code; None when the timeout ended it
    stdout: str
    last_err: str        # the last non-empty line it wrote to stderr (or why it ended)
    wall_s: float
    cpu_ms: float        # its process tree's CPU
    other_cpu_ms: float  # other processes' CPU on this machine meanwhile (None: unknown)
    steal_ms: float      # time the hypervisor stole meanwhile (None: unknown)

    def evidence(self):
        """The columns a run's rows carry of it."""
        return {"host_other_cpu_ms": None if self.other_cpu_ms is None else round(self.other_cpu_ms, 1),
                "host_steal_ms": None if self.steal_ms is None else round(self.steal_ms, 1)}


def run(cmd, env, timeout_s=None, capture=True):
    """Runs cmd to its end in a session of its own (killed with us, and with
    its whole group on a timeout or Ctrl-C: Children.kill_all)."""
    Interrupt.check()
    load = HostLoad()
    pipe = subprocess.PIPE if capture else None
    with subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=pipe, stderr=pipe, text=True,
                          start_new_session=True, preexec_fn=die_with_parent) as p:
        Children.procs = [p]
        try:
            out, err = p.communicate(timeout=timeout_s)
            code, why = p.returncode, None
        except subprocess.TimeoutExpired:
            Children.kill_all()
            out, err = p.communicate()
            code, why = None, f"timeout after {timeout_s} s"
        finally:
            Children.procs = []
    Interrupt.check()  # a Ctrl-C dropped in the fork's hooks
    cpu, other, steal, wall = load.end()
    lines = [ln for ln in (err or "").splitlines() if ln.strip()]
    last = why or (lines[-1][:300] if lines else "")
    return Finished(code, out or "", last, wall, cpu, other, steal)
