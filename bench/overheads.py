#!/usr/bin/python3
"""What measuring costs, on this machine: writes results/overheads.csv.

    bench/overheads.py [--build-dir build] [--runs 9] [--out results/overheads.csv]

  probe_region_ns     the preload probe's cost per parallel region: the mean
                      wall time of an empty 2-thread region with the probe
                      minus without it (regions_child, 200000 regions per
                      run, runs alternating with and without).
  probe_region_ns_<entry>
                      the same per entry point, on tests/cpp/omp_entry_points.c
                      (--bench=KIND: GCC's GOMP_* kinds, clang's __kmpc_fork_*).
  probe_sampler_share the probe sampler's CPU / wall time, on regions_child
                      (steps of regions and 150 ms sleeps, LLVM blocktime 30;
                      and steps 20 ms and 3 ms apart under LLVM's default
                      200 ms blocktime, whose workers then burn through every
                      gap: the sampler's worst case), on a PyTorch training in
                      the sleep/step/sleep pattern (examples/sleep_step_sleep.py)
                      and on one with DataLoader worker processes
                      (examples/dataloader_workers.py).
  monitor_share       threadburn_monitor's own CPU / wall time at its default
                      period, recording that training (--mode=proc: /proc bins).
  monitor_exact_share the same in the exact mode (the scheduler's records of the
                      whole machine, read every period), recording that training,
                      and train_step_bench's MNIST training without a sleep (many
                      short regions: libgomp's workers wake and sleep around each).
  monitor_exact_events_per_s
                      the records per second the exact mode read there: the
                      machine's switches, wakeups, forks, exits, renames.
  monitor_exact_step_cost_mnist_no_gap
                      what the exact mode costs the traced program: its mean
                      step time with the monitor over the one of the run
                      before without it, less 1 (the kernel writes a record at
                      every switch of every CPU).
  probe_launch_ns, probe_wait_ns
                      what the probe's wrappers of the CUDA driver's calls add to
                      a kernel launch and to a wait (src/cuda/driver_calls.h):
                      the stand-in driver's calls that do nothing
                      (tests/cpp/fake_cuda/device_training --kind=calls, launches
                      of no work and waits with nothing queued, 200000 each),
                      with the probe minus without it; phase_launch_ns,
                      phase_wait_ns the same with libthreadburn_phase.so (tune's
                      fresh runs of a GPU training).
  inrun_settle_ms_llvm_team2_to_1, inrun_settle_ms_llvm_bt200_to_bt0
                      how long the last setting's spin outlasts an in-run switch
                      (src/probe/inrun.h): regions_child under LLVM (2 threads,
                      blocktime 200 ms) switched through the probe's control
                      block, from the moment the probe applies the switch (at a
                      region's fork) until no thread but the main one stays busy
                      (its next 50 ms hold under 5 ms of its CPU), read every
                      millisecond from /proc; median of 5 switches a run.
                      team2_to_1: regions 5 ms apart, the team cut to 1: the
                      worker left out spins out its blocktime (engine/
                      exec_inrun.py's settle time, 220 ms under LLVM, must
                      cover it); bt200_to_bt0: regions 300 ms apart, the
                      blocktime cut to 0: the new blocktime reaches the workers
                      at the fork, so nothing should outlast it.
Each figure: the median over the runs, with the min and max. The sampler's
cost inside the benchmark programs (sampler_cpu_ms per step, and step_ms with
the sampler on and off) comes from configs/sampler.toml instead.
--only PREFIX[,PREFIX] measures the figures whose names start with one and keeps the
file's other rows as they were (each row says its own runs).
"""
import argparse
import csv
import glob
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBOMP = "/usr/lib/x86_64-linux-gnu/libomp.so.5"


def region_ns(child, env, cmd=None):
    p = subprocess.run(cmd or [child, "--steps=1", "--regions=200000", "--gap_ms=0", "--work_us=0"],
                       env=env, capture_output=True, text=True, check=True)
    return float(re.search(r"([0-9.]+) ns per region", p.stdout)[1])


# omp_entry_points --bench kinds: (program, kind, the entry point it goes through).
ENTRY_KINDS = [("omp_entry_points_gcc", "sections", "GOMP_parallel_sections"),
               ("omp_entry_points_gcc", "dynamic", "GOMP_parallel_loop_nonmonotonic_dynamic"),
               ("omp_entry_points_gcc", "abi_loop_static", "GOMP_parallel_loop_static"),
               ("omp_entry_points_gcc", "reductions", "GOMP_parallel_reductions"),
               ("omp_entry_points_gcc", "abi_start", "GOMP_parallel_start"),
               ("omp_entry_points_gcc", "teams", "GOMP_teams_reg"),
               ("omp_entry_points_clang", "parallel", "__kmpc_fork_call"),
               ("omp_entry_points_clang", "teams", "__kmpc_fork_teams")]


def probe_share(cmd, env, probe):
    with tempfile.TemporaryDirectory() as out:
        full = dict(env, LD_PRELOAD=probe, THREADBURN_PROBE_DIR=out)
        subprocess.run(cmd, env=full, capture_output=True, check=True)
        summaries = [json.load(open(p)) for p in glob.glob(os.path.join(out, "probe-*.json"))]
    # The process with the most regions (a wrapper such as /usr/bin/time has none).
    return max(summaries, key=lambda s: s["counters"]["regions"])["counters"]["sampler_share"]


def monitor_run(monitor, cmd, env, mode):
    """(own CPU share, records per second, the command's stdout) of the monitor launching cmd in mode."""
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([monitor, f"--mode={mode}", f"--out={out}/m.csv", "--", *cmd], env=env,
                           capture_output=True, text=True)
    m = re.search(r"own CPU ([0-9.]+) ms \(([0-9.]+) % of a core\)", p.stderr)
    e = re.search(r" events \(([0-9.]+)/s\)", p.stderr)
    return float(m[2]) / 100, float(e[1]) if e else 0.0, p.stdout


def call_ns(program, env):
    """(launch ns, wait ns) a call of device_training --kind=calls."""
    p = subprocess.run([program, "--kind=calls", "--startup-ms=0", "--steps=200000"], env=env,
                       capture_output=True, text=True, check=True)
    return float(re.search(r"launch_ns=([0-9.]+)", p.stdout)[1]), float(re.search(r"wait_ns=([0-9.]+)", p.stdout)[1])


def driver_call_costs(b, samples):
    """The wrappers' cost per launch and per wait, with the probe and with the phase mark."""
    fakes = os.path.join(b, "tests", "fake_cuda")
    program = os.path.join(fakes, "device_training")
    base = dict(os.environ, LD_LIBRARY_PATH=fakes, FAKE_CUDA_LAUNCH_US="0")
    with tempfile.TemporaryDirectory() as out:
        plain = call_ns(program, base)
        probed = call_ns(program, dict(base, LD_PRELOAD=os.path.join(b, "src", "probe", "libthreadburn_probe.so"),
                                       THREADBURN_PROBE_DIR=out))
        marked = call_ns(program, dict(base, LD_PRELOAD=os.path.join(b, "src", "probe", "libthreadburn_phase.so"),
                                       THREADBURN_PHASE_DIR=out))
    for who, got in (("probe", probed), ("phase", marked)):
        samples[f"{who}_launch_ns"].append(got[0] - plain[0])
        samples[f"{who}_wait_ns"].append(got[1] - plain[1])


def thread_cpu_ns(pid):
    """Each thread's CPU time so far (ns; /proc/PID/task/TID/schedstat's first field), but the main thread's."""
    cpu = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        if int(tid) != pid:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    cpu[tid] = int(f.read().split()[0])
            except (FileNotFoundError, ProcessLookupError):
                pass
    return cpu


def settle_ms(b, child, settings, args):
    """How long a helper thread stays busy after an in-run switch applies (the docstring):
    the program runs under settings[0] for a second, is switched to settings[1], and
    each thread but the main one is read every millisecond from the moment the probe
    says the switch applied; a thread's busy time ends where its next 50 ms hold less
    than 5 ms of its CPU. The figure: the longest of them, median of 5 switches."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    from threadburn.engine import exec_inrun
    from threadburn.lib import probe
    lib = os.path.join(b, "src", "probe", "libthreadburn_probe.so")
    quiet_s, quiet_ns = 0.05, 5e6
    with tempfile.TemporaryDirectory() as out:
        ctl = exec_inrun.Control(os.path.join(out, "c.bin"), probe.describe(b)["inrun"])
        ctl.set_settings(settings)
        env = dict(os.environ, OMP_NUM_THREADS="2", LD_PRELOAD=f"{lib} {LIBOMP}", THREADBURN_PROBE_DIR=out,
                   THREADBURN_INRUN=os.path.join(out, "c.bin"))
        p = subprocess.Popen([child, "--body=split", "--work_us=2000", "--regions=5", "--seconds=30"] + args,
                             env=env, stdout=subprocess.DEVNULL)
        try:
            while not ctl.get("owner_pid"):
                time.sleep(0.01)
            found = []
            for _ in range(5):
                ctl.put("request", 0)
                time.sleep(1.0)
                ctl.put("request", 1)
                while ctl.get("applied") != 1:
                    time.sleep(0.0002)
                t0, trace = time.monotonic(), []
                while time.monotonic() - t0 < 1.0:
                    trace.append((time.monotonic() - t0, thread_cpu_ns(p.pid)))
                    time.sleep(0.001)
                busy_until = 0.0
                for tid in trace[0][1]:
                    points = [(t, cpu[tid]) for t, cpu in trace if tid in cpu]
                    for i, (t, c) in enumerate(points):
                        later = next((c2 for t2, c2 in points[i:] if t2 >= t + quiet_s), None)
                        if later is None or later - c < quiet_ns:
                            busy_until = max(busy_until, t)
                            break
                found.append(1000 * busy_until)
        finally:
            p.kill()
            p.wait()
    return statistics.median(found)


def the_others(samples, b, child, probe, monitor, base, training, workers, regions, kinds):
    """The probe's cost per region, the sampler's share, the monitor's: one run of each."""
    with tempfile.TemporaryDirectory() as out:
        without = region_ns(child, base)
        with_probe = region_ns(child, dict(base, LD_PRELOAD=probe, THREADBURN_PROBE_DIR=out))
        samples["probe_region_ns"].append(with_probe - without)
        for program, kind, entry in kinds:
            cmd = [os.path.join(b, "tests", "cpp", program), f"--bench={kind}", "--regions=100000"]
            without = region_ns(None, base, cmd)
            with_probe = region_ns(None, dict(base, LD_PRELOAD=probe, THREADBURN_PROBE_DIR=out), cmd)
            samples[f"probe_region_ns_{entry}"].append(with_probe - without)
    for gap in (20, 3):
        samples[f"probe_sampler_share_gaps_{gap}ms_llvm"].append(probe_share(
            [child, f"--steps={2000 // (gap + 2)}", "--regions=5", f"--gap_ms={gap}"], base, probe + " " + LIBOMP))
    samples["probe_sampler_share_dataloader_workers"].append(probe_share(workers, base, probe))
    samples["probe_sampler_share_regions_child"].append(probe_share(
        [child, "--steps=10", "--regions=20", "--gap_ms=150"], dict(base, KMP_BLOCKTIME="30"),
        probe + " " + LIBOMP))
    samples["probe_sampler_share_training"].append(probe_share(training, base, probe))
    samples["monitor_share_training"].append(monitor_run(monitor, training, base, "proc")[0])
    alone = step_ms(subprocess.run(regions, env=base, capture_output=True, text=True, check=True).stdout)
    for name, cmd in (("training", training), ("mnist_no_gap", regions)):
        share, per_s, out = monitor_run(monitor, cmd, base, "exact")
        samples[f"monitor_exact_share_{name}"].append(share)
        samples[f"monitor_exact_events_per_s_{name}"].append(per_s)
    samples["monitor_exact_step_cost_mnist_no_gap"].append(step_ms(out) / alone - 1)


def step_ms(stdout):
    return json.loads(stdout)["benchmarks"][0]["step_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--out", default=os.path.join(REPO, "results", "overheads.csv"))
    ap.add_argument("--only", help="measure only the figures whose names start with these (comma-separated); "
                    "keep the file's others")
    a = ap.parse_args()
    b = a.build_dir
    child = os.path.join(b, "tests", "cpp", "regions_child")
    probe = os.path.join(b, "src", "probe", "libthreadburn_probe.so")
    monitor = os.path.join(b, "src", "monitor", "threadburn_monitor")
    base = dict(os.environ, OMP_NUM_THREADS="2")
    training = ["/usr/bin/python3", os.path.join(REPO, "examples", "sleep_step_sleep.py"), "--steps=3",
                "--sleep_s=0.5", "--threads=2", "--log=/dev/null"]
    workers = ["/usr/bin/python3", os.path.join(REPO, "examples", "dataloader_workers.py"), "--workers=2"]
    regions = [os.path.join(b, "bench", "train_step_bench"), "--model=mnist_adadelta", "--batch=64", "--workers=0",
               "--gap_ms=0", "--steps=30", "--warmup=2", "--benchmark_format=json"]
    kinds = [k for k in ENTRY_KINDS if os.path.exists(os.path.join(b, "tests", "cpp", k[0]))]
    samples = {"probe_region_ns": []}
    samples.update({f"probe_region_ns_{entry}": [] for _, _, entry in kinds})
    samples.update({"probe_sampler_share_regions_child": [], "probe_sampler_share_gaps_20ms_llvm": [],
                    "probe_sampler_share_gaps_3ms_llvm": [], "probe_sampler_share_training": [],
                    "probe_sampler_share_dataloader_workers": [], "monitor_share_training": [],
                    "monitor_exact_share_training": [], "monitor_exact_share_mnist_no_gap": [],
                    "monitor_exact_events_per_s_training": [], "monitor_exact_events_per_s_mnist_no_gap": [],
                    "monitor_exact_step_cost_mnist_no_gap": [], "probe_launch_ns": [], "probe_wait_ns": [],
                    "phase_launch_ns": [], "phase_wait_ns": [], "inrun_settle_ms_llvm_team2_to_1": [],
                    "inrun_settle_ms_llvm_bt200_to_bt0": []})
    driver = ("probe_launch_ns", "probe_wait_ns", "phase_launch_ns", "phase_wait_ns")
    # In-run switches (team, blocktime ms, CUDA flags; -1 left alone) and the program each is tried on.
    settles = {"inrun_settle_ms_llvm_team2_to_1": ([(2, -1, -1), (1, -1, -1)], ["--gap_ms=5"]),
               "inrun_settle_ms_llvm_bt200_to_bt0": ([(-1, 200, -1), (-1, 0, -1)], ["--team=2", "--gap_ms=300"])}
    prefixes = a.only.split(",") if a.only else [""]
    wanted = lambda names: any(n.startswith(p) for n in names for p in prefixes)  # noqa: E731
    for i in range(a.runs):
        if wanted(driver):
            driver_call_costs(b, samples)
        for name, (settings, args) in settles.items():
            if wanted([name]):
                samples[name].append(settle_ms(b, child, settings, args))
        if wanted([k for k in samples if k not in driver and k not in settles]):
            the_others(samples, b, child, probe, monitor, base, training, workers, regions, kinds)
        print(f"run {i + 1}/{a.runs}: " + ", ".join(f"{k} {v[-1]:.4g}" for k, v in samples.items() if v), flush=True)
    kept = {}
    if a.only and os.path.exists(a.out):  # the file's other rows, as they were
        with open(a.out, newline="") as f:
            kept = {r["figure"]: r for r in csv.DictReader(f)}
    header = ["figure", "median", "min", "max", "runs", "unit"]
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for k, v in samples.items():
            if not v:
                if k in kept:
                    w.writerow([kept[k][h] for h in header])
                continue
            w.writerow([k, f"{statistics.median(v):.4g}", f"{min(v):.4g}", f"{max(v):.4g}", len(v),
                        "ns" if "_ns" in k else "ms" if "_ms" in k else "1/s" if "_per_s" in k
                        else "step" if "_step_cost" in k else "cores"])
    print(f"overheads: wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
