"""A cgroup of a given CPU quota, made under this process's own and removed
after: a slot to run a command in (docs/slot.md), as a container's --cpus
or a Kubernetes CPU limit makes one.

    with QuotaCgroup(1.0) as slot:          # one CPU's quota, 100 ms periods
        subprocess.run(slot.wrap(["python3", "train.py"]))

v1: a child of the process's cgroup in the cpu hierarchy, its
cpu.cfs_quota_us and cpu.cfs_period_us written. v2: a child of the
process's cgroup with the cpu controller enabled for its children and its
cpu.max written; v2 allows that only where the parent has no process of its
own (its root, or a delegated subtree threadburn was started in). Either
needs root or a subtree delegated to the user; anything else is one clear
line (ThreadburnError). Whatever is left in the child at the end (the
command's processes) is moved back to the parent before the child is
removed, on an error or an interrupt too: the user's own cgroup is never
changed."""
import contextlib
import os
import signal
import time

from .errors import ThreadburnError

PERIOD_US = 100000
# Below this share of a CPU a thread gets too little to run anything measurable.
MIN_CPUS = 0.01


def _read(path):
    with open(path) as f:
        return f.read()


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _cpu_cgroup(root=""):
    """(version, folder, mount point) of this process's cgroup in the
    hierarchy of the cpu controller: ("v1" | "v2", ...), or ("none", None,
    None). The rules of src/core/slot.cc: a v1 line naming cpu wins over the
    unified one; a path outside the mounted root (a cgroup namespace's) is
    taken under the mount point; a folder that is not there, the mount point."""
    try:
        lines = _read(root + "/proc/self/cgroup").splitlines()
        mounts = _read(root + "/proc/self/mountinfo").splitlines()
    except OSError:
        return "none", None, None
    v1 = v2 = None
    for line in lines:
        hier, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if hier == "0" and controllers == "":
            v2 = path
        elif "cpu" in controllers.split(","):
            v1 = path
    for version, path in (("v1", v1), ("v2", v2)):
        if path is None:
            continue
        for m in mounts:
            head, _, tail = m.partition(" - ")
            h, t = head.split(" "), tail.split(" ")
            if len(h) < 5 or len(t) < 3:
                continue
            if (version == "v2" and t[0] == "cgroup2") or (version == "v1" and t[0] == "cgroup"
                                                            and "cpu" in t[2].split(",")):
                mroot, point = h[3], root + h[4]
                rel = path[len(mroot):] if mroot != "/" and path.startswith(mroot) else path
                folder = point + ("" if rel == "/" else rel)
                return version, folder if os.path.isdir(folder) else point, point
    return "none", None, None


def own_cpu_cgroup(root=""):
    """(version, folder) of this process's cgroup in the hierarchy of the cpu
    controller: ("v1", ...), ("v2", ...), or ("none", None)."""
    return _cpu_cgroup(root)[:2]


def quota_cpus(root=""):
    """The tightest CFS quota on the path from this process's cgroup up to
    its hierarchy's root, in CPUs (quota / period); None without one. The
    rule of src/core/slot.cc (which the rows' cpu_quota comes from), for the
    commands that plan before any run."""
    version, folder, top = _cpu_cgroup(root)
    tightest = None
    while folder:
        try:
            if version == "v2":
                q, p = (_read(os.path.join(folder, "cpu.max")).split() + ["", ""])[:2]
            else:
                q = _read(os.path.join(folder, "cpu.cfs_quota_us")).strip()
                p = _read(os.path.join(folder, "cpu.cfs_period_us")).strip()
            if q.isdigit() and p.isdigit() and int(q) > 0 and int(p) > 0:
                tightest = min(tightest or float("inf"), int(q) / int(p))
        except OSError:
            pass
        if len(folder) <= len(top):
            break
        folder = os.path.dirname(folder)
    return tightest


def size_text(cpus):
    """A slot size as people write it: 1, 1.5."""
    return f"{cpus:g}"


def _one_size(text, host_cpus):
    try:
        cpus = float(text)
    except ValueError:
        raise ValueError(f"expected a number of CPUs (1, 1.5), a list of them (1,2) or auto, got {text!r}") from None
    if not cpus >= MIN_CPUS:
        raise ValueError(f"a quota of {text} CPUs is below what one thread needs (at least {MIN_CPUS})")
    if cpus > host_cpus:
        raise ValueError(f"a quota of {text} CPUs is above this host's {host_cpus} CPUs")
    return cpus


def parse_sizes(text, host_cpus=None):
    """Slot sizes, sorted: '1', '1.5' (CPUs of quota), a list '1,2,4', or
    'auto' (1, 2, 4, ... up to the host's CPUs, and the CPUs: as --copies
    auto counts copies); ValueError saying what it expected, a size below
    MIN_CPUS or above the host's CPUs, or one given twice."""
    host_cpus = host_cpus or os.cpu_count()
    text = str(text).strip()
    if text == "auto":
        out, n = {float(host_cpus)}, 1
        while n <= host_cpus:
            out.add(float(n))
            n *= 2
        return sorted(out)
    sizes = [_one_size(t.strip(), host_cpus) for t in text.split(",")]
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"a slot size given twice in {text!r}")
    return sorted(sizes)


def parse_cpus(text, host_cpus=None):
    """One slot size: '1', '1.5' (CPUs of quota); ValueError saying what it
    expected, below MIN_CPUS, or above the host's CPUs."""
    sizes = parse_sizes(text, host_cpus)
    if len(sizes) != 1:
        raise ValueError(f"one slot size (1, 1.5) expected, got {text!r}")
    return sizes[0]


class QuotaCgroup:
    """A child cgroup of `cpus` CPUs' quota (period_us periods) under this
    process's own; a context manager that removes it."""

    def __init__(self, cpus, period_us=PERIOD_US, name=None):
        self.cpus, self.period_us = cpus, period_us
        self.quota_us = max(1000, int(round(cpus * period_us)))  # the kernel's floor: 1 ms
        self.name = name or f"threadburn-slot-{os.getpid()}"
        self.version, self.parent = own_cpu_cgroup()
        self.path = None
        self._enabled_cpu = False

    def __enter__(self):
        if self.version == "none":
            raise ThreadburnError("no cgroup with the cpu controller found for this process (/proc/self/cgroup): "
                                  "cannot make a slot of a CPU quota here")
        path = os.path.join(self.parent, self.name)
        try:
            if self.version == "v2":
                self._enable_v2_cpu()
            self.path = path  # before mkdir: an interrupt right after it still finds the folder to remove
            os.mkdir(path)
            if self.version == "v1":
                _write(os.path.join(path, "cpu.cfs_period_us"), str(self.period_us))
                _write(os.path.join(path, "cpu.cfs_quota_us"), str(self.quota_us))
            else:
                _write(os.path.join(path, "cpu.max"), f"{self.quota_us} {self.period_us}")
        except BaseException as e:  # an interrupt too: nothing left behind
            self.close()
            if not isinstance(e, OSError):
                raise
            raise ThreadburnError(f"cannot make a cgroup of {self.cpus:g} CPUs' quota under {self.parent} "
                                  f"(cgroup {self.version}): {e.strerror or e}; it needs root or a cgroup "
                                  "subtree delegated to you") from None
        return self

    def _enable_v2_cpu(self):
        control = os.path.join(self.parent, "cgroup.subtree_control")
        if "cpu" in _read(control).split():
            return
        procs = _read(os.path.join(self.parent, "cgroup.procs")).split()
        if procs and os.path.realpath(self.parent) != os.path.realpath("/sys/fs/cgroup"):
            raise OSError(0, f"cgroup v2 keeps the cpu controller from a cgroup's children while it has "
                             f"processes of its own ({len(procs)} in {self.parent}); start threadburn in a "
                             "delegated subtree of its own (systemd-run --scope -p Delegate=yes)")
        _write(control, "+cpu")
        self._enabled_cpu = True

    @contextlib.contextmanager
    def joined(self):
        """This process inside the cgroup meanwhile (its children after it
        too), back in the parent after."""
        _write(os.path.join(self.path, "cgroup.procs"), str(os.getpid()))
        try:
            yield self
        finally:
            _write(os.path.join(self.parent, "cgroup.procs"), str(os.getpid()))

    def wrap(self, cmd):
        """cmd run inside the cgroup: a shell moves itself in, then execs it."""
        return ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', self.path] + list(cmd)

    def stat(self):
        """The cgroup's cpu.stat as {key: int}."""
        out = {}
        for line in _read(os.path.join(self.path, "cpu.stat")).splitlines():
            k, _, v = line.partition(" ")
            if v.strip().lstrip("-").isdigit():
                out[k] = int(v)
        return out

    def close(self):
        """Ends what is left in the cgroup (the processes of the command this
        slot ran: an interrupted run's), moves any survivor back to the
        parent, removes the cgroup (and undoes the +cpu this slot enabled in
        a v2 parent). Ctrl-C and SIGTERM are held meanwhile: a second one
        lands after the cgroup is gone, not halfway."""
        held = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
        try:
            self._close()
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)

    def _close(self):
        if self.path and os.path.isdir(self.path):
            for attempt in range(100):
                try:
                    pids = [int(p) for p in _read(os.path.join(self.path, "cgroup.procs")).split()]
                except (OSError, ValueError):
                    pids = []
                for pid in pids:
                    try:
                        if pid == os.getpid():  # never this process: back to the parent
                            _write(os.path.join(self.parent, "cgroup.procs"), str(pid))
                        elif attempt < 50:
                            os.kill(pid, signal.SIGKILL)  # started in this cgroup: the slot's own command
                        else:
                            _write(os.path.join(self.parent, "cgroup.procs"), str(pid))
                    except OSError:
                        pass  # it ended meanwhile
                try:
                    os.rmdir(self.path)
                    break
                except OSError:
                    time.sleep(0.02)
        self.path = None if self.path is None or not os.path.isdir(self.path) else self.path
        if self._enabled_cpu:
            try:
                _write(os.path.join(self.parent, "cgroup.subtree_control"), "-cpu")
            except OSError:
                pass
            self._enabled_cpu = False

    def __exit__(self, *exc):
        self.close()
        return False
