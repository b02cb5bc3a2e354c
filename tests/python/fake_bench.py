#!/usr/bin/env python3
"""Stand-in for bench/train_step_bench, optimizer_step_bench and runtime_bench.

    fake_bench.py train_step|optimizer_step|runtime [the real program's flags]

Speaks the real programs' contract (results/README.md): same flags, same
one-line errors with exit 2 ("<prog>_bench: error: --flag: why"), the same
benchmark names (including Google Benchmark's iterations:N) and the same
skipped combinations (the TBB loader without workers or with preload),
Google Benchmark 1.7.1 JSON with the threadburn context keys, timeline CSVs.
Its numbers follow a toy model of the runtimes (LLVM: each of the T-1 workers
spins min(KMP_BLOCKTIME, gap) ms after a step; libgomp: ~7 ms unless
OMP_WAIT_POLICY/GOMP_SPINCOUNT say otherwise), so the tests can check exact
values. Misbehaviour on demand, each FAKE_BENCH_*_IF holding "VAR=VALUE"
tested against the environment:
  FAKE_BENCH_CRASH_IF       write half the JSON, then SIGSEGV
  FAKE_BENCH_EXIT_IF        print an error, exit 3, no JSON
  FAKE_BENCH_EXIT_AFTER_IF  write the full JSON, then exit 4
  FAKE_BENCH_HANG_IF        sleep forever
  FAKE_BENCH_ERROR_IF       report every benchmark with a (non-skip) error
  FAKE_BENCH_SLEEP_S        sleep this long before reporting
  FAKE_BENCH_LOG            append one JSON line per invocation (argv + env)
  FAKE_BENCH_CUDA=1         pretend a GPU is present
  FAKE_BENCH_NO_TBB=1, FAKE_BENCH_NO_DNNL=1   a build without TBB / oneDNN
  FAKE_BENCH_NO_CUDA_TOOLKIT=1  a build without the CUDA toolkit (--cuda_sync refused)
  FAKE_BENCH_SYNC_IN_FORCE  report this cuda_sync_in_force (CUDA runs)
  FAKE_BENCH_CPUS=N         the machine's CPU count (default: os.cpu_count())
  FAKE_BENCH_REPORT_RUNTIME report this omp_runtime whatever was preloaded
  FAKE_BENCH_NAME_SUFFIX    extra name components before /iterations:N
  FAKE_BENCH_TIMELINE_FULL=1  name timeline files after the full benchmark name
                            (the real programs leave out /iterations:N/manual_time)
"""
import itertools
import json
import math
import os
import re
import signal
import sys
import time

CHOICES = {"model": ("mnist_adadelta", "cifar_sgd"), "optimizer": ("sgd", "adadelta"),
           "kernel": ("serial", "omp", "aten", "tbb", "onednn"), "loader": ("torch", "tbb"),
           "device": ("cpu", "cuda")}
COMMON = {"gap_ms": "0", "device": "cpu", "steps": "10", "warmup": "2", "timeline-dir": "",
          "timeline-threads": "0", "threads-csv": "", "sampler_us": "500"}
FLAGS = {
    "train_step": dict(COMMON, model="mnist_adadelta,cifar_sgd", batch="64", workers="0,2",
                       preload="0", loader="torch", mkldnn="1", cuda_sync="auto",
                       pin_memory="0", non_blocking="0", item_sync="0", augment="1",
                       synthetic_n="4096", gap_ms="0,100", **{"data-dir": ""}),
    "optimizer_step": dict(COMMON, optimizer="sgd,adadelta", params="4000000", gap_ms="0,300"),
    "runtime": dict(COMMON, kernel="serial,omp,aten,tbb,onednn", n="1048576", gap_ms="0,1,10,100"),
}
LISTS = ("model", "optimizer", "kernel", "batch", "workers", "gap_ms", "preload", "params", "n",
         "loader", "mkldnn", "pin_memory", "non_blocking", "item_sync")
RANGE = {"batch": (1, 65536), "workers": (0, 256), "gap_ms": (0, 60000), "preload": (0, 1),
         "params": (1, None), "n": (1, 1 << 30), "mkldnn": (0, 1), "pin_memory": (0, 1),
         "non_blocking": (0, 1), "item_sync": (0, 1), "augment": (0, 1), "steps": (1, 1000000),
         "warmup": (0, 1000), "sampler_us": (50, 1000), "synthetic_n": (1, 10000000),
         "timeline-threads": (0, 1)}
CUDA_SYNC = ("auto", "spin", "yield", "blocking_sync")
CUDA_ONLY = ("cuda_sync", "pin_memory", "non_blocking", "item_sync")
ENV_VARS = ("OMP_NUM_THREADS", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY",
            "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "LD_PRELOAD")


def fail(program, flag, why):
    print(f"{program}_bench: error: --{flag}: {why}", file=sys.stderr)
    sys.exit(2)


def parse(program, argv):
    opts, gb, given = dict(FLAGS[program]), {}, set()
    for arg in argv:
        name, sep, value = arg[2:].partition("=") if arg.startswith("--") else (arg, "", "")
        if name.startswith("benchmark_"):
            gb[name] = value
        elif name in opts and sep:
            opts[name] = value
            given.add(name)
        else:
            fail(program, name, "unknown flag (see --help)")
    for flag, value in opts.items():
        values = value.split(",") if flag in LISTS else [value]
        if flag in CHOICES and any(v not in CHOICES[flag] for v in values):
            fail(program, flag, f"unknown value {value!r} (expected one of: "
                 + ", ".join(CHOICES[flag]) + ")")
        if flag in RANGE:
            lo, hi = RANGE[flag]
            if not all(v.isdigit() and int(v) >= lo and (hi is None or int(v) <= hi)
                       for v in values):
                fail(program, flag, f"expected integers in [{lo}, {hi}], got {value!r}")
        opts[flag] = values if flag in LISTS else value
    check_build_and_device(program, opts, given)
    return opts, gb


def check_build_and_device(program, opts, given):
    if os.environ.get("FAKE_BENCH_NO_TBB") == "1":
        if "tbb" in opts.get("loader", ()):
            fail(program, "loader", "tbb: this build has no TBB (configure with "
                 "THREADBURN_WITH_TBB=ON)")
        if "tbb" in opts.get("kernel", ()):
            fail(program, "kernel", "tbb: this build has no TBB (configure with "
                 "THREADBURN_WITH_TBB=ON)")
    if os.environ.get("FAKE_BENCH_NO_DNNL") == "1" and "onednn" in opts.get("kernel", ()):
        fail(program, "kernel", "onednn: this build has no oneDNN (configure with "
             "THREADBURN_WITH_DNNL=ON)")
    if program == "runtime" and opts["device"] != "cpu":
        fail(program, "device", "runtime_bench runs on cpu only")
    if program != "train_step":
        return
    if opts["cuda_sync"] not in CUDA_SYNC:
        fail(program, "cuda_sync", f"unknown policy '{opts['cuda_sync']}' (auto, spin, "
             "yield, blocking_sync)")
    for flag in CUDA_ONLY:  # as train_step_bench: a set flag other than 0/auto
        value = ",".join(opts[flag]) if flag in LISTS else opts[flag]
        if opts["device"] != "cuda" and flag in given and value not in ("0", "auto"):
            fail(program, flag, "only with --device=cuda")
    if opts["cuda_sync"] != "auto" and os.environ.get("FAKE_BENCH_NO_CUDA_TOOLKIT") == "1":
        fail(program, "cuda_sync", "this build has no CUDA toolkit (configure where CMake "
             "finds CUDAToolkit)")
    if opts["device"] != "cuda":  # the program ignores the CUDA-only lists on cpu
        for flag in ("pin_memory", "non_blocking", "item_sync"):
            opts[flag] = ["0"]
    if opts["preload"] == ["1"] and len(opts["workers"]) == 1 and opts["workers"] != ["0"]:
        fail(program, "workers", "must be 0 with --preload=1 (no loader runs)")


def condition(name):
    for cond in filter(None, os.environ.get(name, "").split(";")):
        var, _, value = cond.partition("=")
        if os.environ.get(var) == value:
            return True
    return False


def runtime_model(gap_ms):
    """(runtime, library, T, spin ms after a step, effective settings)."""
    llvm = bool(os.environ.get("LD_PRELOAD"))
    threads = int(os.environ.get("OMP_NUM_THREADS", cpus()))
    policy = os.environ.get("OMP_WAIT_POLICY", "default")
    if llvm:
        blocktime = os.environ.get("KMP_BLOCKTIME", "200")
        if policy == "passive":
            blocktime = "0"
        spin = gap_ms if blocktime == "infinite" else float(blocktime)
        eff = {"gomp_spincount": "n/a", "kmp_blocktime_ms": blocktime}
        ignored = [k for k in ("GOMP_SPINCOUNT",) if k in os.environ]
        lib = os.environ["LD_PRELOAD"]
    else:
        default_count = {"active": "infinite", "passive": "0"}.get(policy, "300000")
        count = os.environ.get("GOMP_SPINCOUNT", default_count)
        spin = gap_ms if count == "infinite" else 7.0 * int(count) / 300000
        eff = {"gomp_spincount": count, "kmp_blocktime_ms": "n/a"}
        ignored = [k for k in ("KMP_BLOCKTIME", "KMP_AFFINITY") if k in os.environ]
        lib = "/usr/lib/x86_64-linux-gnu/libgomp.so.1"
    eff["ignored_knobs"] = ",".join(ignored) or "none"
    runtime = os.environ.get("FAKE_BENCH_REPORT_RUNTIME") or ("llvm-libomp" if llvm else "libgomp")
    return runtime, lib, threads, min(spin, gap_ms), eff, policy


def cpus():
    return int(os.environ.get("FAKE_BENCH_CPUS", os.cpu_count() or 1))


def common_counters(step, threads, spin, gap, sampler_us, workers=0, workers_cpu=None):
    residual = (threads - 1) * spin if workers_cpu is None else workers_cpu
    return {"step_ms": step, "step_ms_median": step, "step_ms_cv": 0.0,
            "step_cpu_ms": step * threads * 0.9, "cores_busy": threads * 0.9,
            "residual_cpu_ms": residual, "residual_cpu_ms_median": residual,
            "residual_cores": residual / gap if gap else 0.0,
            "tail_ms": spin, "tail_ms_median": spin, "threads": threads + 1 + workers,
            "vol_ctxsw": 12.0, "invol_ctxsw": 3.0, "sampler_cpu_ms": 0.5,
            "sampler_period_us": float(sampler_us), "gap_ms": gap}


def runtime_counters(knobs, sampler_us):
    """runtime_bench's toy: serial 2 ms per Mi floats; a region on k threads
    costs serial/k + 0.25 ms per extra thread, + 0.5 ms to wake workers that
    went to sleep during the gap (the OpenMP kernels' spin ended before it)."""
    gap, n, kernel = int(knobs["gap_ms"]), int(knobs["n"]), knobs["kernel"]
    _, _, threads, spin, _, _ = runtime_model(gap)
    k = {"serial": 1, "tbb": cpus()}.get(kernel, threads)
    omp_spin = spin if kernel in ("omp", "aten", "onednn") else 0.0
    serial = 2.0 * n / 1048576
    b2b = serial / k + 0.25 * (k - 1)
    wakeup = 0.5 if k > 1 and gap > 0 and omp_spin < gap else 0.0
    step = b2b + wakeup
    out = common_counters(step, k, omp_spin, gap, sampler_us, workers_cpu=(k - 1) * omp_spin)
    out.update(serial_ms=serial, backtoback_ms=b2b, wakeup_ms=wakeup, kernel_threads=k,
               overhead_ms=step - serial / k, speedup=serial / step, n=n)
    return out


def counters(program, knobs, sampler_us, device):
    if program == "runtime":
        return runtime_counters(knobs, sampler_us)
    gap = int(knobs["gap_ms"])
    _, _, threads, spin, _, _ = runtime_model(gap)
    if program == "optimizer_step":
        step = 2.0 + int(knobs["params"]) / 1e6 * 4.0 / threads
        return dict(common_counters(step, threads, spin, gap, sampler_us),
                    params=int(knobs["params"]))
    base = {"mnist_adadelta": 30.0, "cifar_sgd": 60.0}[knobs["model"]]
    workers = int(knobs["workers"])
    per_worker = 0.25 if knobs["loader"] == "tbb" else 0.5
    step = (1.0 + base * int(knobs["batch"]) / 64 / threads + per_worker * workers
            + (4.0 if knobs["mkldnn"] == "0" else 0.0))
    out = common_counters(step, threads, spin, gap, sampler_us, workers)
    sync = 2.0 if knobs["item_sync"] == "1" else 0.0
    out.update(data_ms=0.5, forward_ms=step * 0.3, backward_ms=step * 0.5,
               optim_ms=step * 0.2 - 0.5 - sync, sync_ms=sync, sync_cpu_ms=sync / 2,
               samples_per_s=int(knobs["batch"]) / step * 1000.0,
               batch=int(knobs["batch"]), workers=workers)
    if device == "cuda":
        out["gpu_ms"] = step * 0.8
    return out


def combos(program, opts):
    """The benchmarks the program registers, in its loop order."""
    order = {"train_step": ("model", "preload", "batch", "workers", "loader", "mkldnn",
                            "pin_memory", "non_blocking", "item_sync", "gap_ms"),
             "optimizer_step": ("optimizer", "params", "gap_ms"),
             "runtime": ("kernel", "n", "gap_ms")}[program]
    for combo in itertools.product(*(opts[k] for k in order)):
        knobs = dict(zip(order, combo))
        if program == "train_step":
            if knobs["preload"] == "1" and knobs["workers"] != "0":
                continue  # preloaded data has no loader workers
            if knobs["loader"] == "tbb" and (knobs["preload"] == "1" or knobs["workers"] == "0"):
                continue  # the TBB loader needs workers, no preload
        yield knobs


def bench_name(program, device, knobs):
    """The name run_steps gets (timelines are named after it); GB appends
    /iterations:N/manual_time for the reported name."""
    family = {"runtime": "runtime_region"}.get(program, program)
    family += "_cuda" if device == "cuda" and program != "runtime" else ""
    if program == "train_step":
        name = (f"{family}/{knobs['model']}/batch:{knobs['batch']}/workers:{knobs['workers']}"
                f"/gap_ms:{knobs['gap_ms']}/preload:{knobs['preload']}"
                f"/tbb_loader:{1 if knobs['loader'] == 'tbb' else 0}/mkldnn:{knobs['mkldnn']}")
        if device == "cuda":
            name += (f"/pin_memory:{knobs['pin_memory']}/non_blocking:{knobs['non_blocking']}"
                     f"/item_sync:{knobs['item_sync']}")
        return name
    if program == "optimizer_step":
        return f"{family}/{knobs['optimizer']}/params:{knobs['params']}/gap_ms:{knobs['gap_ms']}"
    return f"{family}/{knobs['kernel']}/n:{knobs['n']}/gap_ms:{knobs['gap_ms']}"


def write_timeline(directory, name, values):
    step, spin = values["step_ms"], values["tail_ms"]
    others = values["cores_busy"] - 1
    lines = ["t_ms,series,cores", f"{-step:.3f},step_start,0", "0.000,step_end,0"]
    for t in range(-int(math.ceil(step)) - 5, int(values["gap_ms"]) + 1):
        during = -step <= t < 0
        lines.append(f"{t:.3f},main,{1.0 if during else 0.0}")
        lines.append(f"{t:.3f},others,{others if during or 0 <= t < spin else 0.0}")
    file_name = re.sub(r"[/: ]", "_", name) + ".timeline.csv"
    with open(os.path.join(directory, file_name), "w") as f:
        f.write("\n".join(lines) + "\n")


def to_json(pairs):
    # Hand-serialised so that, like GB 1.7.1, an entry carries both GB's own
    # "threads" field and the "threads" counter (a duplicate key; readers keep the last).
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"


def context_pairs(program, opts, device):
    runtime, lib, threads, _, eff, policy = runtime_model(0)
    cuda = device == "cuda" and os.environ.get("FAKE_BENCH_CUDA") == "1"
    pairs = [("date", "2024-01-01T00:00:00+00:00"), ("host_name", "fakehost"),
             ("executable", f"build/bench/{program}_bench"), ("num_cpus", cpus()),
             ("mhz_per_cpu", 2500), ("cpu_scaling_enabled", False), ("caches", []),
             ("load_avg", [0.5, 0.25, 0.125]), ("library_build_type", "release"),
             ("json_schema_version", 1), ("threadburn_schema_version", "1"),
             ("omp_runtime", runtime), ("omp_library", lib),
             ("omp_max_threads", str(threads)), ("omp_wait_policy", policy),
             ("gomp_spincount", eff["gomp_spincount"]),
             ("kmp_blocktime_ms", eff["kmp_blocktime_ms"]), ("aten_intra_op_threads", "1"),
             ("aten_inter_op_threads", "1"), ("torch_version", "1.13.1"),
             ("blas_library", "openblas-openmp:/usr/lib/libblas.so.3"), ("mkldnn_enabled", "1"),
             ("dnnl_version", "2.6.3"), ("dnnl_cpu_runtime", "omp"),
             ("tbb_version", "2021.8"), ("tbb_default_concurrency", str(cpus())),
             ("ignored_knobs", eff["ignored_knobs"]), ("device", device),
             ("cuda_available", os.environ.get("FAKE_BENCH_CUDA", "0"))]
    pairs += [(f"env_{k}", os.environ.get(k, "unset")) for k in ENV_VARS]
    if program == "train_step":
        toolkit = os.environ.get("FAKE_BENCH_NO_CUDA_TOOLKIT") != "1"
        in_force = os.environ.get("FAKE_BENCH_SYNC_IN_FORCE", opts["cuda_sync"]) if cuda else "n/a"
        pairs += [("cuda_toolkit_compiled", "1" if toolkit else "0"),
                  ("cuda_runtime_version", "12.2" if toolkit else "n/a"),
                  ("cuda_sync_requested", opts["cuda_sync"]), ("cuda_sync_in_force", in_force)]
    pairs.append(("fake_extra_key", "x"))
    return pairs


def main():
    program = sys.argv[1]
    opts, gb = parse(program, sys.argv[2:])
    if os.environ.get("FAKE_BENCH_LOG"):
        with open(os.environ["FAKE_BENCH_LOG"], "a") as f:
            f.write(json.dumps({"argv": sys.argv[1:], "env": {k: os.environ.get(k)
                                                               for k in ENV_VARS}}) + "\n")
    if condition("FAKE_BENCH_HANG_IF"):
        time.sleep(3600)
    if condition("FAKE_BENCH_EXIT_IF"):
        print("fake failure: could not load the dataset", file=sys.stderr)
        sys.exit(3)
    time.sleep(float(os.environ.get("FAKE_BENCH_SLEEP_S", "0")))
    device = opts["device"]
    entries = []
    for knobs in combos(program, opts):
        short = bench_name(program, device, knobs)
        extra = "".join("/" + s for s in filter(None, [os.environ.get("FAKE_BENCH_NAME_SUFFIX")]))
        name = f"{short}{extra}/iterations:{opts['steps']}/manual_time"
        entry = [("name", name), ("family_index", 0), ("per_family_instance_index", len(entries)),
                 ("run_name", name), ("run_type", "iteration"), ("repetitions", 1),
                 ("repetition_index", 0), ("threads", 1)]
        if device == "cuda" and os.environ.get("FAKE_BENCH_CUDA") != "1":
            entry += [("error_occurred", True),
                      ("error_message", "skipped: no CUDA device (cudaGetDeviceCount failed)")]
        elif condition("FAKE_BENCH_ERROR_IF"):
            entry += [("error_occurred", True), ("error_message", "CUDA error: out of memory")]
        values = counters(program, knobs, opts["sampler_us"], device)
        entry += [("iterations", int(opts["steps"])), ("real_time", values["step_ms"]),
                  ("cpu_time", values["step_cpu_ms"]), ("time_unit", "ms")]
        if not any(k == "error_occurred" for k, _ in entry):
            entry += sorted(values.items()) + [("fake_counter", 1.5)]
            if opts.get("timeline-dir"):
                full = os.environ.get("FAKE_BENCH_TIMELINE_FULL") == "1"
                write_timeline(opts["timeline-dir"], name if full else short + extra, values)
        entries.append(to_json(entry))
    text = ("{\n\"context\": " + to_json(context_pairs(program, opts, device))
            + ",\n\"benchmarks\": [\n" + ",\n".join(entries) + "\n]\n}\n")
    if opts.get("threads-csv"):
        with open(opts["threads-csv"], "w") as f:
            f.write("benchmark,tid,name,role,step_cpu_ms,gap_cpu_ms\n")
    out = gb.get("benchmark_out")
    if condition("FAKE_BENCH_CRASH_IF"):
        if out:
            with open(out, "w") as f:
                f.write(text[:len(text) // 2])
        os.kill(os.getpid(), signal.SIGSEGV)
    if out:
        with open(out, "w") as f:
            f.write(text)
    print(text)
    if condition("FAKE_BENCH_EXIT_AFTER_IF"):
        print("fake: crashed in a destructor", file=sys.stderr)
        sys.exit(4)


if __name__ == "__main__":
    main()
