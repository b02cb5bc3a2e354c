"""Facts of this machine the commands share."""
import glob
import math
import os
import shutil
import subprocess


def _cores():
    """{(package, core): [its logical CPUs this process may use]} from sysfs."""
    usable = os.sched_getaffinity(0)
    cores = {}
    for cpu in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
        number = int(os.path.basename(os.path.dirname(cpu))[3:])
        try:
            with open(os.path.join(cpu, "physical_package_id")) as f:
                package = f.read().strip()
            with open(os.path.join(cpu, "core_id")) as f:
                core = f.read().strip()
        except OSError:
            continue
        cores.setdefault((package, core), [])
        if number in usable:
            cores[(package, core)].append(number)
    return cores


def physical_cores():
    """Distinct (package, core) pairs in sysfs: what PyTorch's launcher calls cores."""
    return len(_cores()) or None


def usable_cpus():
    return len(os.sched_getaffinity(0))


def effective_cpus():
    """The CPUs this process may really use: the affinity mask's, capped by
    its cgroup's tightest CPU quota rounded up (src/core/slot.h's rule, the
    rows' effective_cpus)."""
    from . import cgroup
    quota, cpus = cgroup.quota_cpus(), usable_cpus()
    return cpus if not quota else min(cpus, max(1, math.ceil(quota - 1e-9)))


def core_sets(copies):
    """Disjoint CPU sets for `copies` instances, as PyTorch's launcher's
    multi-instance mode pins them: the physical cores this process may use
    (one logical CPU each, the first of the core), in order, cut into
    `copies` equal runs of cores // copies (the rest left idle). None when
    there are fewer usable cores than copies. The one place core sets are made."""
    firsts = sorted(min(cpus) for cpus in _cores().values() if cpus)
    if not firsts:  # no topology in sysfs: every usable CPU counts as a core
        firsts = sorted(os.sched_getaffinity(0))
    per = len(firsts) // copies if copies > 0 else 0
    if per < 1:
        return None
    return [tuple(firsts[i * per:(i + 1) * per]) for i in range(copies)]


# A test hook: the number of GPUs this host has, instead of counting them (tests give a
# host N GPUs without having any; docs/cuda.md). Never needed on a real host.
GPU_COUNT_VAR = "THREADBURN_GPU_COUNT"
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"


def gpu_count():
    """The NVIDIA GPUs of this host, counted without CUDA (no driver library
    is loaded into threadburn): $THREADBURN_GPU_COUNT (the test hook), else
    the NVIDIA driver's entries in /proc/driver/nvidia/gpus, else the lines
    `nvidia-smi -L` lists, else 0."""
    hook = os.environ.get(GPU_COUNT_VAR, "")
    if hook:
        if not hook.isdigit():
            raise ValueError(f"{GPU_COUNT_VAR}={hook!r}: expected a number of GPUs (a test hook)")
        return int(hook)
    if os.path.isdir(NVIDIA_GPUS):
        return len(os.listdir(NVIDIA_GPUS))
    smi = shutil.which("nvidia-smi")
    if smi:
        try:
            out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30).stdout
        except (OSError, subprocess.SubprocessError):
            return 0
        return sum(1 for line in out.splitlines() if line.startswith("GPU "))
    return 0


def gpus(env=None):
    """The GPUs a command started from here may use, as CUDA_VISIBLE_DEVICES
    names them: that variable's entries when it is set (the user chose; CUDA
    reads them up to the first empty one), else 0 .. gpu_count() - 1."""
    env = os.environ if env is None else env
    if "CUDA_VISIBLE_DEVICES" in env:
        out = []
        for entry in env["CUDA_VISIBLE_DEVICES"].split(","):
            if not entry.strip():
                break
            out.append(entry.strip())
        return out
    return [str(i) for i in range(gpu_count())]


MAX_COPIES = 256


def parse_copies(text, cpus=None):
    """'2', '1,2,4' or 'auto' (1, 2, 4, ... up to the usable CPUs, and
    the CPUs): the sorted copy counts; ValueError saying what it expected."""
    cpus = cpus or usable_cpus()
    text = str(text).strip()
    if text == "auto":
        out, n = {cpus}, 1
        while n <= cpus:
            out.add(n)
            n *= 2
        return sorted(out)
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or any(not 1 <= v <= MAX_COPIES for v in values) or len(set(values)) != len(values):
        raise ValueError(f"expected a number of copies (1 to {MAX_COPIES}), a list of them (1,2,4) or auto, "
                         f"got {text!r}")
    return sorted(values)


def slot_line(ctx):
    """The slot a process ran in, from its context (src/core/slot.h's keys:
    the cgroup's CPU quota and cpuset, the effective CPUs, Slurm's
    variables), as one line; None for a context without them (older files)."""
    if "effective_cpus" not in ctx:
        return None
    quota = ctx.get("cpu_quota", "none")
    parts = [f"cgroup {ctx.get('cgroup_version', 'none')}",
             f"CPU quota {quota} CPUs a {int(ctx['cpu_period_us']) / 1000:g} ms period"
             if quota != "none" and str(ctx.get("cpu_period_us", "")).isdigit() else "no CPU quota",
             f"cpuset {ctx.get('cpuset', 'none')}"]
    slurm = [f"{k.upper()}={ctx[k]}"
             for k in ("slurm_cpus_per_task", "slurm_cpus_on_node", "slurm_job_cpus_per_node")
             if ctx.get(k, "unset") != "unset"]
    if slurm:
        parts.append(" ".join(slurm))
    return (f"{ctx['effective_cpus']} effective CPUs (the affinity mask's {ctx.get('available_cpus', '?')}"
            f"{', the quota rounded up' if quota != 'none' else ''}: the smaller); " + ", ".join(parts))


def slot_line_of_rows(rows):
    """slot_line of the first row that records the slot (a results file's
    rows: records.Row); None when none does."""
    for r in rows:
        if r.effective_cpus is not None:
            ctx = {"effective_cpus": str(r.effective_cpus), "available_cpus": r.available_cpus or "?",
                   "cgroup_version": r.cgroup_version or "none", "cpu_quota": r.cpu_quota or "none",
                   "cpu_period_us": r.cpu_period_us or "none", "cpuset": r.cpuset or "none",
                   "slurm_cpus_per_task": r.slurm_cpus_per_task or "unset"}
            return slot_line(ctx)
    return None
