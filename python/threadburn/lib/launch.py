"""The one process launcher: a command run to its end (or its timeout) in a
session of its own, killed with us, with what it cost and what else ran
meanwhile.

Every run reports the CPU of its process tree (its waited-for descendants
included, from the kernel's child accounting) and, from /proc/stat, the CPU
the rest of the machine used during it and the time the hypervisor stole:
the run's own evidence of being disturbed (analysis/verdicts.py sets such
runs aside, and says so).
"""
import math
import os
import resource
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from .procs import Children, Interrupt, die_with_parent

TICK_MS = 1000.0 / os.sysconf("SC_CLK_TCK")


def _host_ticks():
    """(busy ticks of all CPUs but steal, steal ticks) from /proc/stat's cpu
    line, or from the file THREADBURN_HOST_STAT names: a test whose
    programs' figures are made up points it at a fixed copy, so that what
    else ran on the machine meanwhile cannot set its runs aside."""
    try:
        with open(os.environ.get("THREADBURN_HOST_STAT") or "/proc/stat") as f:
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


# --- copies started together -----------------------------------------------------------

# The gate every copy passes before it becomes the command: a small Python
# program (the interpreter running threadburn, started with -I -S) that
# pins itself to its core set (when the plan gives one), says it is ready,
# waits until the launcher closes the release pipe (every copy sees the end
# of that pipe at once), notes the moment it was let go (CLOCK_MONOTONIC, the
# launcher's own clock, on a pipe of its own) and execs the command, the same process: its pid,
# its session and its rusage are the copy's. The probe must not load into
# the gate itself: the copy's LD_PRELOAD travels in THREADBURN_GATE_PRELOAD
# and is put back just before the exec.
GATE = r"""
import os, sys, time
ready, go, stamps, index, cpus = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
if cpus:
    os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
time.sleep(int(index) * float(os.environ.pop("THREADBURN_GATE_DELAY_MS", "") or 0) / 1000)
os.write(ready, b"r")
os.read(go, 1)
os.write(stamps, ("%s %r\n" % (index, time.monotonic())).encode())
os.close(ready)
os.close(go)
os.close(stamps)
env = dict(os.environ)
preload = env.pop("THREADBURN_GATE_PRELOAD", None)
if preload is not None:
    env["LD_PRELOAD"] = preload
try:
    os.execvpe(sys.argv[6], sys.argv[6:], env)
except OSError as e:
    sys.stderr.write("%s: cannot execute: %s\n" % (sys.argv[6], e.strerror))
    sys.exit(127)
"""
# How long the copies may take to reach the gate (start the interpreter).
READY_TIMEOUT_S = 60.0
# Fault injection for the tests: with THREADBURN_GATE_DELAY_MS=d in the
# environment, copy i reaches its gate i x d ms late (as a copy slow to start
# would): the release must make it irrelevant to when the copies start.


@dataclass
class CopyEnd:
    """One copy of a run started together with the others."""
    index: int
    code: int            # exit code; None when the timeout (or a failed start) ended it
    stdout: str
    last_err: str        # the last non-empty line it wrote to stderr (or why it ended)
    start_s: float       # when it was let go (exec'd the command), s after the release; None: never
    end_s: float         # when it ended, s after the release
    cpu_ms: float        # its process tree's CPU (its own rusage, its waited-for descendants included)
    cpus: tuple = ()     # the CPUs it was pinned to (none: not pinned)

    @property
    def wall_s(self):
        return None if self.start_s is None else self.end_s - self.start_s


@dataclass
class Together:
    """N copies started together: each copy's end, and the run's."""
    copies: list         # [CopyEnd] by index
    wall_s: float        # from the release to the last copy's end
    cpu_ms: float        # every copy's process tree
    other_cpu_ms: float  # other processes' CPU on this machine meanwhile (None: unknown)
    steal_ms: float

    def evidence(self):
        return Finished.evidence(self)

    def overlap(self, index):
        """The share of copy `index`'s time (its start to its end) that every
        other copy was running too (1.0 for a copy alone); None unknown."""
        mine = self.copies[index]
        if mine.start_s is None or not mine.end_s > mine.start_s:
            return None
        others = [c for c in self.copies if c is not mine]
        if not others:
            return 1.0
        if any(c.start_s is None for c in others):
            return 0.0
        lo = max([mine.start_s] + [c.start_s for c in others])
        hi = min([mine.end_s] + [c.end_s for c in others])
        return max(0.0, hi - lo) / (mine.end_s - mine.start_s)


def _read_text(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError:
        return ""


def _last_line(text):
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _alive(proc):
    """Is proc still running? (Asked without reaping it: its rusage is read when it is.)"""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:
        return False


def _reap(proc, flags=0):
    """(exit code, CPU ms of its tree) once proc has ended; None while it runs."""
    pid, status, usage = os.wait4(proc.pid, flags)
    if pid == 0:
        return None
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code  # reaped here (for its rusage): Popen must not wait for it again
    return code, (usage.ru_utime + usage.ru_stime) * 1000


def _wait_all(procs, deadline):
    """{index: (when it ended, code, cpu ms)} for every copy, each reaped at
    its end (pidfds in a poll: no polling interval; else every 5 ms); at the
    deadline the ones still running are killed: (when, None, cpu ms)."""
    ended = {}
    fds = {}
    try:
        try:
            for i, p in enumerate(procs):
                fds[os.pidfd_open(p.pid)] = i
        except (AttributeError, OSError):
            for fd in fds:
                os.close(fd)
            fds = None
        poller = select.poll() if fds is not None else None
        for fd in fds or ():
            poller.register(fd, select.POLLIN)
        while len(ended) < len(procs):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if poller is not None:
                events = poller.poll(min(left, 1.0) * 1000)
                now = time.monotonic()
                for fd, _ in events:
                    i = fds.pop(fd)
                    poller.unregister(fd)
                    os.close(fd)
                    code, cpu = _reap(procs[i])
                    ended[i] = (now, code, cpu)
            else:
                time.sleep(min(left, 0.005))
                now = time.monotonic()
                for i, p in enumerate(procs):
                    if i not in ended:
                        got = _reap(p, os.WNOHANG)
                        if got is not None:
                            ended[i] = (now,) + got
    finally:
        for fd in (fds or {}):
            os.close(fd)
    if len(ended) < len(procs):
        now = time.monotonic()
        for i, p in enumerate(procs):
            if i not in ended:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                _, cpu = _reap(p)
                ended[i] = (now, None, cpu)
    return ended


def run_together(cmd, envs, work, timeout_s=None, cpus=None):
    """Runs len(envs) copies of cmd, copy i with envs[i] (and pinned to the
    CPUs cpus[i] when given), all spawned first, each waiting at the gate,
    then released at once; each in a session of its own (Ctrl-C or the
    timeout kill them all: Children.kill_all). Their output goes to files
    in work (c<i>.out, c<i>.err). Returns Together."""
    n = len(envs)
    cpus = list(cpus) if cpus else [()] * n
    load = None
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    stamps_r, stamps_w = os.pipe()  # each line: a copy's index and when it was let go
    procs, outs = [], []
    try:
        for i, env in enumerate(envs):
            child = {k: v for k, v in env.items() if k != "LD_PRELOAD"}
            if "LD_PRELOAD" in env:
                child["THREADBURN_GATE_PRELOAD"] = env["LD_PRELOAD"]
            out, err = os.path.join(work, f"c{i}.out"), os.path.join(work, f"c{i}.err")
            outs.append((out, err))
            argv = [sys.executable, "-I", "-S", "-c", GATE, str(ready_w), str(go_r), str(stamps_w), str(i),
                    ",".join(str(c) for c in cpus[i])] + list(cmd)
            with open(out, "wb") as fo, open(err, "wb") as fe:
                p = subprocess.Popen(argv, env=child, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe,
                                     pass_fds=(ready_w, go_r, stamps_w), start_new_session=True,
                                     preexec_fn=die_with_parent)
            procs.append(p)
            Children.procs.append(p)
        os.close(ready_w)
        os.close(stamps_w)
        ready_w = stamps_w = None
        # Every copy at the gate (or one of them gone: it cannot start), then the release.
        got, limit = 0, time.monotonic() + READY_TIMEOUT_S
        while got < n and time.monotonic() < limit and all(_alive(p) for p in procs):
            r, _, _ = select.select([ready_r], [], [], 0.05)
            if r:
                chunk = os.read(ready_r, n - got)
                if not chunk:
                    break
                got += len(chunk)
        load = HostLoad()  # what else ran: from the release on (the copies' own time), not while they started
        released = time.monotonic()
        if got < n:  # none is let go: a copy that cannot start fails the run
            deadline = released
        else:
            deadline = released + timeout_s if timeout_s else math.inf
        os.close(go_w)
        go_w = None
        ended = _wait_all(procs, deadline)
        starts = {}
        for line in _drain(stamps_r).splitlines():
            index, _, at = line.partition(" ")
            starts[int(index)] = float(at) - released
    finally:  # (interrupted, the copies stay in Children.procs: the caller's stop() kills them all)
        for fd in (ready_w, go_w, go_r, ready_r, stamps_r, stamps_w):
            if fd is not None:
                os.close(fd)
    Children.procs = [p for p in Children.procs if p not in procs]
    # (The copies' CPU before the release, their gates' start-up, is in our own CPU from now on: the
    # other processes' CPU is, if anything, under-counted by it.)
    _, other, steal, _ = load.end()
    copies = []
    for i in range(n):
        at, code, cpu = ended[i]
        stdout, stderr = _read_text(outs[i][0]), _read_text(outs[i][1])
        if code is None:
            why = (f"timeout after {timeout_s} s" if got == n else
                   "the copies did not all start (" + (_last_line(stderr) or "no word from this one") + ")")
        else:
            why = None
        copies.append(CopyEnd(i, code, stdout, why or _last_line(stderr), starts.get(i), at - released, cpu,
                              tuple(cpus[i])))
    wall = max(c.end_s for c in copies) if copies else 0.0
    return Together(copies, wall, sum(c.cpu_ms for c in copies), other, steal)


def _drain(fd):
    """What is left in a pipe whose writers are all gone."""
    chunks = []
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks).decode(errors="replace")
        chunks.append(chunk)
