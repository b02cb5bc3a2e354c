#!/usr/bin/env python3
"""Stand-in for bench/train_step_bench and bench/optimizer_step_bench.

    fake_bench.py train_step|optimizer_step [the real program's flags]

Speaks the real programs' contract (results/README.md): same flags, same
one-line errors with exit 2, Google Benchmark 1.7.1 JSON with the threadburn
context keys, timeline CSVs. Its numbers follow a toy model of the runtimes
(LLVM: each of the T-1 workers spins min(KMP_BLOCKTIME, gap) ms after a step;
libgomp: ~7 ms unless OMP_WAIT_POLICY/GOMP_SPINCOUNT say otherwise), so the
tests can check exact values. Misbehaviour on demand, each FAKE_BENCH_*_IF
holding "VAR=VALUE" tested against the environment:
  FAKE_BENCH_CRASH_IF       write half the JSON, then SIGSEGV
  FAKE_BENCH_EXIT_IF        print an error, exit 3, no JSON
  FAKE_BENCH_EXIT_AFTER_IF  write the full JSON, then exit 4
  FAKE_BENCH_HANG_IF        sleep forever
  FAKE_BENCH_ERROR_IF       report every benchmark with a (non-skip) error
  FAKE_BENCH_SLEEP_S        sleep this long before reporting
  FAKE_BENCH_LOG            append one JSON line per invocation (argv + env)
  FAKE_BENCH_CUDA=1         pretend a GPU is present
  FAKE_BENCH_CPUS=N         the machine's CPU count (default: os.cpu_count())
  FAKE_BENCH_REPORT_RUNTIME report this omp_runtime whatever was preloaded
  FAKE_BENCH_NAME_SUFFIX    extra name components before /manual_time
  FAKE_BENCH_TIMELINE_SHORT=1  name timeline files without /iterations:N/manual_time
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
           "device": ("cpu", "cuda")}
FLAGS = {
    "train_step": {"model": "mnist_adadelta", "batch": "64", "workers": "0", "gap_ms": "0",
                   "preload": "0", "device": "cpu", "data-dir": "", "steps": "10",
                   "warmup": "2", "timeline-dir": "", "threads-csv": "", "sampler_us": "500"},
    "optimizer_step": {"optimizer": "sgd", "params": "4000000", "gap_ms": "0",
                       "device": "cpu", "steps": "10", "warmup": "2", "timeline-dir": "",
                       "threads-csv": "", "sampler_us": "500"},
}
LISTS = ("model", "optimizer", "batch", "workers", "gap_ms", "preload", "params")
MINIMUM = {"batch": 1, "workers": 0, "gap_ms": 0, "preload": 0, "params": 1, "steps": 1,
           "warmup": 0, "sampler_us": 50}
ENV_VARS = ("OMP_NUM_THREADS", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY",
            "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY", "LD_PRELOAD")


def fail(program, flag, why):
    print(f"{program}_bench: --{flag}: {why}", file=sys.stderr)
    sys.exit(2)


def parse(program, argv):
    opts, gb = dict(FLAGS[program]), {}
    for arg in argv:
        name, sep, value = arg[2:].partition("=") if arg.startswith("--") else ("", "", "")
        if name.startswith("benchmark_"):
            gb[name] = value
        elif name in opts and sep:
            opts[name] = value
        else:
            print(f"{program}_bench: unknown argument {arg!r}", file=sys.stderr)
            sys.exit(2)
    for flag, value in opts.items():
        values = value.split(",") if flag in LISTS else [value]
        if flag in CHOICES and any(v not in CHOICES[flag] for v in values):
            fail(program, flag, f"unknown value {value!r}, expected one of "
                 + ",".join(CHOICES[flag]))
        if flag in MINIMUM:
            if not all(v.isdigit() and int(v) >= MINIMUM[flag] for v in values):
                fail(program, flag, f"expected integers >= {MINIMUM[flag]}, got {value!r}")
        opts[flag] = values if flag in LISTS else value
    if program == "train_step" and "1" in opts["preload"] and opts["workers"] != ["0"]:
        fail(program, "preload", "preload=1 needs workers=0")
    return opts, gb


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


def counters(program, knobs, sampler_us):
    gap = int(knobs["gap_ms"])
    _, _, threads, spin, _, _ = runtime_model(gap)
    if program == "optimizer_step":
        step = 2.0 + int(knobs["params"]) / 1e6 * 4.0 / threads
    else:
        base = {"mnist_adadelta": 30.0, "cifar_sgd": 60.0}[knobs["model"]]
        step = 1.0 + base * int(knobs["batch"]) / 64 / threads + 0.5 * int(knobs["workers"])
    residual = (threads - 1) * spin
    out = {"step_ms": step, "data_ms": 0.5, "forward_ms": step * 0.3,
           "backward_ms": step * 0.5, "optim_ms": step * 0.2 - 0.5,
           "step_cpu_ms": step * threads * 0.9, "cores_busy": threads * 0.9,
           "residual_cpu_ms": residual, "residual_cores": residual / gap if gap else 0.0,
           "tail_ms": spin, "threads": threads + 1 + int(knobs.get("workers", 0)),
           "vol_ctxsw": 12.0, "invol_ctxsw": 3.0, "sampler_cpu_ms": 0.5,
           "sampler_period_us": float(sampler_us), "gap_ms": gap}
    if program == "train_step":
        out.update(samples_per_s=int(knobs["batch"]) / step * 1000.0,
                   batch=int(knobs["batch"]), workers=int(knobs["workers"]))
    else:
        out["params"] = int(knobs["params"])
    return out


def bench_name(program, device, knobs):
    family = program + ("_cuda" if device == "cuda" else "")
    # FAKE_BENCH_NAME_SUFFIX adds components the contract does not list (as
    # Google Benchmark's own "iterations:N"), which readers must tolerate.
    extra = "".join("/" + s for s in filter(None, [os.environ.get("FAKE_BENCH_NAME_SUFFIX")]))
    if program == "train_step":
        return (f"{family}/{knobs['model']}/batch:{knobs['batch']}/workers:{knobs['workers']}"
                f"/gap_ms:{knobs['gap_ms']}/preload:{knobs['preload']}{extra}/manual_time")
    return (f"{family}/{knobs['optimizer']}/params:{knobs['params']}/gap_ms:{knobs['gap_ms']}"
            f"{extra}/manual_time")


def write_timeline(directory, name, values):
    step, spin = values["step_ms"], values["tail_ms"]
    others = values["cores_busy"] - 1
    lines = ["t_ms,series,cores", f"{-step:.3f},step_start,0", "0.000,step_end,0"]
    for t in range(-int(math.ceil(step)) - 5, int(values["gap_ms"]) + 1):
        during = -step <= t < 0
        lines.append(f"{t:.3f},main,{1.0 if during else 0.0}")
        lines.append(f"{t:.3f},others,{others if during or 0 <= t < spin else 0.0}")
    if os.environ.get("FAKE_BENCH_TIMELINE_SHORT") == "1":  # as bench/ does today
        name = re.sub(r"(/iterations:\d+)?/manual_time$", "", name)
    file_name = name.replace("/", "_").replace(":", "_") + ".timeline.csv"
    with open(os.path.join(directory, file_name), "w") as f:
        f.write("\n".join(lines) + "\n")


def to_json(pairs):
    # Hand-serialised so that, like GB 1.7.1, an entry carries both GB's own
    # "threads" field and the "threads" counter (a duplicate key; readers keep the last).
    return "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"


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
    runtime, lib, threads, _, eff, policy = runtime_model(0)
    context = [("date", "2024-01-01T00:00:00+00:00"), ("host_name", "fakehost"),
               ("executable", f"build/bench/{program}_bench"), ("num_cpus", cpus()),
               ("mhz_per_cpu", 2500), ("cpu_scaling_enabled", False), ("caches", []),
               ("load_avg", [0.5, 0.25, 0.125]), ("library_build_type", "release"),
               ("json_schema_version", 1), ("threadburn_schema_version", "1"),
               ("omp_runtime", runtime), ("omp_library", lib),
               ("omp_max_threads", str(threads)), ("omp_wait_policy", policy),
               ("gomp_spincount", eff["gomp_spincount"]),
               ("kmp_blocktime_ms", eff["kmp_blocktime_ms"]), ("aten_intra_op_threads", "1"),
               ("aten_inter_op_threads", "1"), ("torch_version", "1.13.1"),
               ("dnnl_version", "2.6.3"), ("dnnl_cpu_runtime", "OMP"),
               ("tbb_version", "2021.8"), ("tbb_default_concurrency", "2"),
               ("ignored_knobs", eff["ignored_knobs"]), ("device", device),
               ("cuda_available", os.environ.get("FAKE_BENCH_CUDA", "0"))]
    context += [(f"env_{k}", os.environ.get(k, "unset")) for k in ENV_VARS]
    context.append(("fake_extra_key", "x"))
    lists = [k for k in LISTS if k in opts]
    entries = []
    for combo in itertools.product(*(opts[k] for k in lists)):
        knobs = dict(zip(lists, combo))
        name = bench_name(program, device, knobs)
        entry = [("name", name), ("family_index", 0), ("per_family_instance_index", len(entries)),
                 ("run_name", name), ("run_type", "iteration"), ("repetitions", 1),
                 ("repetition_index", 0), ("threads", 1)]
        if device == "cuda" and os.environ.get("FAKE_BENCH_CUDA") != "1":
            entry += [("error_occurred", True),
                      ("error_message", "skipped: no CUDA device (cudaGetDeviceCount failed)")]
        elif condition("FAKE_BENCH_ERROR_IF"):
            entry += [("error_occurred", True), ("error_message", "CUDA error: out of memory")]
        values = counters(program, knobs, opts["sampler_us"])
        entry += [("iterations", int(opts["steps"])), ("real_time", values["step_ms"]),
                  ("cpu_time", values["step_cpu_ms"]), ("time_unit", "ms")]
        if not any(k == "error_occurred" for k, _ in entry):
            entry += sorted(values.items()) + [("fake_counter", 1.5)]
            if opts.get("timeline-dir"):
                write_timeline(opts["timeline-dir"], name, values)
        entries.append(to_json(entry))
    text = ("{\n\"context\": " + to_json(context) + ",\n\"benchmarks\": [\n"
            + ",\n".join(entries) + "\n]\n}\n")
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
