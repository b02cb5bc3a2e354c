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
Each figure: the median over the runs, with the min and max. The sampler's
cost inside the benchmark programs (sampler_cpu_ms per step, and step_ms with
the sampler on and off) comes from configs/sampler.toml instead.
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


def step_ms(stdout):
    return json.loads(stdout)["benchmarks"][0]["step_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--out", default=os.path.join(REPO, "results", "overheads.csv"))
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
                    "monitor_exact_step_cost_mnist_no_gap": []})
    for i in range(a.runs):
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
        print(f"run {i + 1}/{a.runs}: " + ", ".join(f"{k} {v[-1]:.4g}" for k, v in samples.items()), flush=True)
    with open(a.out, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["figure", "median", "min", "max", "runs", "unit"])
        for k, v in samples.items():
            w.writerow([k, f"{statistics.median(v):.4g}", f"{min(v):.4g}", f"{max(v):.4g}", len(v),
                        "ns" if "_ns" in k else "1/s" if "_per_s" in k else "step" if "_step_cost" in k else "cores"])
    print(f"overheads: wrote {a.out}")


if __name__ == "__main__":
    sys.exit(main())
