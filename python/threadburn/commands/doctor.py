"""threadburn doctor: what this machine offers the measurements, and what is
missing: CPUs (logical and physical), the OpenMP runtimes, the build and its
programs, the preload probe of run/tune, the settings in force by default, packages, perf events, GPU,
Python modules, Slurm. Each line says what was found and, when something is
missing, what to do."""
import argparse
import glob
import os
import shutil
import subprocess

from ..lib.machine import effective_cpus, physical_cores, slot_line
from ..lib import cgroup
from ..lib import interpreter
from ..lib import knobs, paths, probe
from ..lib.errors import ThreadburnError
from ..lib.programs import programs as build_programs


def add_parser(sub):
    p = sub.add_parser("doctor", help="what this machine has: CPUs, runtimes, build, perf, GPU, packages",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build-dir", help="CMake build dir holding the programs (default: build)")
    p.set_defaults(run=main)
    return p


def perf_events():
    try:
        with open("/proc/sys/kernel/perf_event_paranoid") as f:
            paranoid = int(f.read().strip())
    except (OSError, ValueError):
        return "unknown (no /proc/sys/kernel/perf_event_paranoid)"
    perf = shutil.which("perf")
    if not perf:
        return f"perf_event_paranoid={paranoid}; no perf tool (apt install linux-perf)"
    p = subprocess.run([perf, "stat", "-x,", "-e", "instructions", "true"], capture_output=True, text=True)
    counted = p.returncode == 0 and "not supported" not in p.stderr and "<not" not in p.stderr
    return (f"perf_event_paranoid={paranoid}; hardware counters "
            + ("available" if counted else "not available here (a VM without a PMU?)"))


def gpu():
    if shutil.which("nvidia-smi"):
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip():
            return p.stdout.strip().replace("\n", "; ")
    return "none (CUDA benchmarks report 'skipped')" if not glob.glob("/dev/nvidia[0-9]*") else "device nodes, no nvidia-smi"


def python_modules():
    out = []
    for name in ("matplotlib", "numpy", "torch"):
        try:
            __import__(name)
            out.append(f"{name} yes")
        except ImportError:
            out.append(f"{name} no")
    return ", ".join(out)


def read_here():
    """The slot as the Python side reads it (lib/cgroup.py), where no program tells it."""
    version, _ = cgroup.own_cpu_cgroup()
    quota = cgroup.quota_cpus()
    return (f"{effective_cpus()} effective CPUs (the affinity mask's {len(os.sched_getaffinity(0))}"
            + (f", the quota rounded up: the smaller); cgroup {version}, CPU quota {quota:g} CPUs" if quota
               else f": the smaller); cgroup {version}, no CPU quota") + " (read here: no program reported it)")


def main(args):
    lines = []

    def say(what, text):
        lines.append(f"{what:<22} {text}")
    logical = os.cpu_count()
    say("CPUs", f"{logical} logical, {physical_cores() or '?'} physical cores, "
        f"{len(os.sched_getaffinity(0))} in this process's affinity mask")
    say("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))
    say("libgomp", next(iter(glob.glob("/usr/lib/x86_64-linux-gnu/libgomp.so.1")), "missing (apt install libgomp1)"))
    say("LLVM libomp", paths.LIBOMP if os.path.exists(paths.LIBOMP) else "missing (apt install libomp-dev): no llvm runtime axis")
    try:
        progs = build_programs(args.build_dir)
        say("programs", ", ".join(f"{b} ({p.path})" for b, p in progs.items()))
        ctx = next(iter(progs.values())).describe().context
        say("slot", slot_line(ctx) or read_here())
        say("default settings", f"{knobs.in_force_line(ctx)}; ATen intra-op threads {ctx.get('aten_intra_op_threads')}")
        say("libraries", f"torch {ctx.get('torch_version')}, oneDNN {ctx.get('dnnl_version')} "
            f"({ctx.get('dnnl_cpu_runtime')}), TBB {ctx.get('tbb_version')}, BLAS {ctx.get('blas_library')}")
    except ThreadburnError as e:
        say("programs", str(e))
        say("slot", read_here())
    try:
        say("monitor", paths.find_program("threadburn_monitor", args.build_dir))
    except ThreadburnError as e:
        say("monitor", str(e))
    try:
        say("probe", probe.library(args.build_dir))
    except ThreadburnError as e:
        say("probe", str(e))
    setup = os.path.join(paths.REPO, "scripts", "setup.sh")
    if os.path.exists(setup):
        p = subprocess.run(["bash", setup, "--check"], capture_output=True, text=True)
        say("packages", (p.stdout.strip() or p.stderr.strip()).removeprefix("setup: "))
    say("perf events", perf_events())
    say("GPU", gpu())
    say("python", f"{interpreter.describe()}: {python_modules()}")
    say("Slurm", shutil.which("sbatch") or "no sbatch (apt install slurm-wlm; scripts/local_slurm.sh starts one here)")
    print("\n".join(lines))
    return 0
