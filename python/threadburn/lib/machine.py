"""Facts of this machine the commands share."""
import glob
import os


def physical_cores():
    """Distinct (package, core) pairs in sysfs: what PyTorch's launcher calls cores."""
    seen = set()
    for cpu in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/topology"):
        try:
            with open(os.path.join(cpu, "physical_package_id")) as f:
                package = f.read().strip()
            with open(os.path.join(cpu, "core_id")) as f:
                core = f.read().strip()
        except OSError:
            continue
        seen.add((package, core))
    return len(seen) or None


def usable_cpus():
    return len(os.sched_getaffinity(0))
