"""The toy model of fake_program.py: what a fake run measures and reports,
from this process's environment and the benchmark's axis values, so that
tests can check exact values. The settings in force follow the runtimes'
rules as the programs report them (the recording says which knobs each
runtime reads and what it is called).

The context of a run: the recorded one with the settings of this process
(omp_runtime the llvm runtime's library when LD_PRELOAD names libomp, the
wait settings and LLVM's mode in force, oneDNN's ISA, env_*, ignored_knobs,
overridden_knobs, ...; any other OpenMP knob's read-back: its value as set). Its counters (T = OMP_NUM_THREADS, else FAKE_CPUS,
else the CPU count; gap = the benchmark's gap_ms):
  spin after a step   LLVM: min(KMP_BLOCKTIME ("infinite": gap), gap); without it
                      KMP_LIBRARY=throughput: 0, another KMP_LIBRARY: 200, else
                      OMP_WAIT_POLICY passive: 0, active: gap, unset: 200;
                      libgomp: OMP_WAIT_POLICY=passive: 0, active: gap, else
                      min(gap, 3 ms * GOMP_SPINCOUNT / 300000) (default: 3 ms)
  residual_cpu_ms     (T - 1) * spin (= residual_omp_ms); tail_ms = spin (0 if T = 1)
  optimizer_step      step_ms = 2 + 4 * params / 1e6 / T
  train_step          step_ms = 1 + {mnist_adadelta: 30, cifar_sgd: 60} * batch / 64 / T
                      + 0.5 per loader worker + 4 with mkldnn 0; samples_per_s = batch / step
  runtime             serial_ms = 2 * n / 2^20; k = 1 (serial) else T;
                      backtoback_ms = serial / k + 0.25 * (k - 1); wakeup_ms = 0.5 when
                      k > 1, gap > 0 and the spin ended before the gap did; step = both
  everywhere          step_cpu_ms = T * step_ms, cores_busy = T, threads = T + 1 + workers,
                      vol_ctxsw 12, invol_ctxsw 3, sampler_cpu_ms 0.5, gap_slept_ms = gap,
                      timed_start_s/timed_end_s: CLOCK_MONOTONIC at the start, + steps *
                      (step_ms + gap) / 1000 (not slept)
Which knobs a runtime ignores and what it is called come from the
recording's "runtimes"; FAKE_CUDA=1 makes a CUDA device available,
FAKE_REPORT_RUNTIME, FAKE_SYNC_IN_FORCE and FAKE_JITTER bend the
answers (fake_program.py lists them).
"""
import os
import random
import re


class Refused(Exception):
    """What the program would refuse; str() is the text after "<program>: error: "."""



def luck_seed():
    """This process's luck: its pid, or with FAKE_JITTER_SEQ (a file) the
    number of processes that drew before it, so that a test's runs, in the
    order its seed fixes, draw the same luck every time."""
    path = os.environ.get("FAKE_JITTER_SEQ")
    if not path:
        return os.getpid()
    n = int(open(path).read() or 0) if os.path.exists(path) else 0
    with open(path, "w") as f:
        f.write(str(n + 1))
    return n

def cpus():
    return int(os.environ.get("FAKE_CPUS") or os.cpu_count() or 1)


def is_llvm():
    return any(os.path.basename(p).startswith(("libomp", "libiomp"))
               for p in re.split(r"[ :]", os.environ.get("LD_PRELOAD", "")) if p)


def threads():
    text = os.environ.get("OMP_NUM_THREADS", "")
    return int(text) if text.isdigit() and int(text) > 0 else cpus()


def wait_settings():
    """(LLVM's blocktime, libgomp's spin count) in force: an explicit
    KMP_BLOCKTIME / GOMP_SPINCOUNT, else LLVM's KMP_LIBRARY (throughput set
    explicitly: 0 ms; it makes LLVM ignore the wait policy), else the policy."""
    policy = os.environ.get("OMP_WAIT_POLICY", "").lower()
    library = os.environ.get("KMP_LIBRARY")
    blocktime = os.environ.get("KMP_BLOCKTIME") or (
        ("0" if library == "throughput" else "200") if library else
        {"passive": "0", "active": "infinite"}.get(policy, "200"))
    spincount = os.environ.get("GOMP_SPINCOUNT") or {"passive": "0", "active": "infinite"}.get(policy, "300000")
    return blocktime, spincount


def spin_ms(gap):
    blocktime, count = wait_settings()
    if is_llvm():
        spin = gap if blocktime == "infinite" else float(blocktime)
    else:
        spin = gap if count == "infinite" else 3.0 * int(count) / 300000
    return min(spin, float(gap))


def knob_names(recording):
    return [k["name"] for k in recording["knobs"]]


def runtime_entry(recording, name):
    return next(r for r in recording["runtimes"] if r["name"] == name)


def knob_report(recording):
    """(ignored, overridden) knobs: the knobs the recording says only the
    other runtime reads are ignored."""
    ignored, overridden = [], []
    llvm = is_llvm()
    for knob in runtime_entry(recording, "gomp" if llvm else "llvm")["own_knobs"]:
        if os.environ.get(knob):
            ignored.append(knob)
    if os.environ.get("OMP_WAIT_POLICY") and llvm and os.environ.get("KMP_LIBRARY"):
        ignored.append("OMP_WAIT_POLICY")  # LLVM reads KMP_LIBRARY instead
    elif os.environ.get("OMP_WAIT_POLICY") and os.environ.get("KMP_BLOCKTIME" if llvm else "GOMP_SPINCOUNT"):
        overridden.append("OMP_WAIT_POLICY")
    return ",".join(ignored) or "none", ",".join(overridden) or "none"


def context(recording, flags, device):
    ctx = dict(recording["context"])
    llvm = is_llvm()
    runtime = os.environ.get("FAKE_REPORT_RUNTIME") or runtime_entry(recording, "llvm" if llvm else "gomp")["library"]
    policy = os.environ.get("OMP_WAIT_POLICY", "")
    blocktime, spincount = wait_settings()
    ignored, overridden = knob_report(recording)
    settings = {
        "omp_runtime": runtime,
        "omp_library": os.environ["LD_PRELOAD"] if llvm else "/lib/x86_64-linux-gnu/libgomp.so.1",
        "omp_max_threads": str(threads()),
        "available_cpus": str(cpus()),
        "omp_wait_policy": policy.lower() or "default",
        "kmp_blocktime_ms": blocktime if llvm else "n/a",
        "kmp_library": (os.environ.get("KMP_LIBRARY") or "throughput") if llvm else "n/a",
        # oneDNN's cap in force: the variable's ISA (the fake's CPU has them all), else the recorded one.
        "dnnl_cpu_isa": (os.environ.get("ONEDNN_MAX_CPU_ISA") or ctx.get("dnnl_cpu_isa", "n/a")).lower(),
        "gomp_spincount": "n/a" if llvm else spincount,
        "gomp_spincount_in_force": "n/a" if llvm else spincount,
        "ignored_knobs": ignored,
        "overridden_knobs": overridden,
        "cuda_available": "1" if device == "cuda" and os.environ.get("FAKE_CUDA") == "1" else "0",
    }
    if device == "cuda" and "cuda_sync" in flags.values:
        settings["cuda_sync_requested"] = flags.values["cuda_sync"]
        settings["cuda_sync_in_force"] = (os.environ.get("FAKE_SYNC_IN_FORCE") or flags.values["cuda_sync"]
                                          if settings["cuda_available"] == "1" else "n/a")
    settings.update({f"env_{k}": os.environ.get(k) or "unset" for k in knob_names(recording)})
    # The read-backs the model does not work out (omp_proc_bind, omp_places,
    # ...): an OpenMP knob's value as set, in lower case as the
    # runtimes report it, else the recorded default.
    for knob in recording["knobs"]:
        if knob["reader"] in ("openmp", "gomp", "llvm") and knob["in_force"] not in settings and os.environ.get(knob["name"]):
            settings[knob["in_force"]] = os.environ[knob["name"]].lower()
    for key, value in settings.items():
        if key in ctx:  # only what the programs report
            ctx[key] = value
    return ctx


def rank_and_world():
    """torchrun's variables, as src/core/rendezvous.h reads them first; none: a world of 1."""
    rank, world = os.environ.get("RANK"), os.environ.get("WORLD_SIZE")
    if rank is None and world is None:
        return 0, 1
    if rank is None or world is None:
        raise Refused("RANK and WORLD_SIZE: set both or neither")
    if int(rank) >= int(world):
        raise Refused(f"RANK={rank} but WORLD_SIZE={world}")
    return int(rank), int(world)


def counters(bench, args, flags):
    t = threads()
    gap = int(args.get("gap_ms", "0"))
    spin = spin_ms(gap)
    workers = int(args.get("workers", "0"))
    out = {}
    if bench == "optimizer_step":
        step = 2.0 + 4.0 * int(args["params"]) / 1e6 / t
    elif bench == "train_step":
        base = {"mnist_adadelta": 30.0, "cifar_sgd": 60.0}.get(args.get("model"), 45.0)
        batch = int(args["batch"])
        step = 1.0 + base * batch / 64 / t + 0.5 * workers + (4.0 if args.get("mkldnn") == "0" else 0.0)
        out["samples_per_s"] = batch / step * 1000.0
        out["data_ms"] = 0.5
        if args.get("loader"):
            out["step_cpu_loader_ms"] = 0.25 * workers
    elif bench == "runtime":
        k = 1 if args["kernel"] == "serial" else t
        serial = 2.0 * int(args["n"]) / 2 ** 20
        b2b = serial / k + 0.25 * (k - 1)
        wakeup = 0.5 if k > 1 and gap > 0 and spin < gap else 0.0
        step = b2b + wakeup
        if args["kernel"] == "serial":
            spin = 0.0
        out.update(serial_ms=serial, backtoback_ms=b2b, wakeup_ms=wakeup, kernel_threads=float(k),
                   overhead_ms=step - serial / k, speedup=serial / step)
    elif bench == "ddp_step":
        # Rank r computes 10 % more slowly per rank above 0 and waits in the
        # all-reduce (2 ms) for the slowest; after it, its optimizer step takes
        # 0.5 ms x r more. So step_ms = base x (1 + 0.1 (W - 1)) + 2 + 0.5 r,
        # and compute (step - all-reduce) = base x (1 + 0.1 r) + 0.5 r.
        rank, world = rank_and_world()
        batch = int(args["batch"])
        base = {"mnist_adadelta": 30.0, "cifar_sgd": 60.0}.get(args.get("model"), 45.0) * batch / 64 / t
        allreduce = base * 0.1 * (world - 1 - rank) + 2.0
        step = base * (1 + 0.1 * (world - 1)) + 2.0 + 0.5 * rank
        out.update(allreduce_ms=allreduce, samples_per_s=batch / step * 1000.0, world_size=float(world),
                   rank=float(rank), buckets=1.0)
    else:
        step = 10.0
    residual = (t - 1) * spin
    jitter = float(os.environ.get("FAKE_JITTER", "0"))
    if jitter and os.environ.get("FAKE_JITTER_GAP_MS", str(gap)) == str(gap):  # this process's luck: one factor for all its steps, as a run's placement would be
        step *= 1 + jitter * random.Random(luck_seed()).uniform(-1, 1)
    out.update(step_ms=step, step_ms_median=step, step_ms_cv=0.0, step_cpu_ms=t * step, cores_busy=float(t),
               residual_cpu_ms=residual, residual_cpu_ms_median=residual, residual_omp_ms=residual,
               residual_cores=residual / gap if gap else 0.0, tail_ms=spin if t > 1 else 0.0,
               tail_ms_median=spin if t > 1 else 0.0, gap_slept_ms=float(gap), threads=float(t + 1 + workers),
               vol_ctxsw=12.0, invol_ctxsw=3.0, sampler_cpu_ms=0.5,
               sampler_period_us=float(flags.values.get("sampler_us", "1000")))
    if os.environ.get("FAKE_MEASURED"):
        # As a measurement: a float with all its digits, not a round figure (the
        # decision rule floors the spread of round figures by their resolution).
        for k in ("step_ms", "step_ms_median", "step_cpu_ms", "residual_cpu_ms", "residual_cpu_ms_median",
                  "residual_omp_ms", "gap_slept_ms"):
            out[k] *= 1 + 1e-9
    return out


def write_timeline(directory, file, values, gap):
    step, spin, others = values["step_ms"], values["tail_ms"], values["cores_busy"] - 1
    lines = ["# threadburn timeline 1; origin=step_end", "t_ms,series,cores", f"{-step:g},step_start,0",
             "0,step_end,0"]
    for t in range(-int(step) - 5, gap + 1):
        during = -step <= t < 0
        lines.append(f"{t},others,{others if during or 0 <= t < spin else 0}")
        lines.append(f"{t},main,{1 if during else 0}")
    with open(os.path.join(directory, file), "w") as f:
        f.write("\n".join(lines) + "\n")
