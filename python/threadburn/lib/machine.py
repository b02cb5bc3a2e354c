"""Facts of this machine the commands share."""
import glob
import os


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
