#!/usr/bin/env python3
"""A stand-in for the benchmark programs (build/bench/<bench>_bench) that knows
none of their rules: it serves their recorded self-descriptions.

    fake_program.py BENCH [the program's flags] [--describe]

tests/fixtures/programs/<bench>.<device>.json holds what the real program
printed for `--describe` (tests/python/record_programs.py records them; the
drift test test_fake_matches_programs.py checks they are current). From the
recorded flag declarations this checks the flags as the C++ FlagParser does
(src/core/cli.cc: kinds, bounds, choices, the same one-line errors, exit 2),
picks the recording of the --device in force, and computes the benchmarks
generically: the cross product of the axis flags' values in the recorded axes
order, minus the recorded skip rules, named "<prefix>/<first value>/<axis>:<value>...".
The rules the programs enforce in their own code (a CUDA-only flag on cpu, a
batch larger than the dataset, a kernel missing from the build) are not
repeated here.

--describe prints the recording with those flag values, axes and benchmarks.
A run writes Google Benchmark 1.7.1 JSON (--benchmark_out=FILE, and stdout with
--benchmark_format=json): the recorded context with the settings of this
process (omp_runtime the llvm runtime's library when LD_PRELOAD names libomp, env_*,
ignored_knobs, overridden_knobs, ...), one entry per benchmark named
"<benchmark>/iterations:<steps>/manual_time", with toy counters from a small
model so that tests can check exact values (T = OMP_NUM_THREADS, else
FAKE_CPUS, else the CPU count; gap = the benchmark's gap_ms):
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
CUDA benchmarks report "<the recorded skipped_prefix> no CUDA device" unless
FAKE_CUDA=1. Which knobs a runtime ignores and what it is called come from
the recording's "runtimes".

Faults, only on request (a FAKE_*_IF holds "1", or "VAR=VALUE[;VAR=VALUE...]"
tested against this process's environment):
  FAKE_CRASH_IF        write half the JSON, then die of SIGSEGV
  FAKE_EXIT_IF         one line on stderr, exit 3, no JSON
  FAKE_EXIT_AFTER_IF   the whole JSON, then one line on stderr and exit 4
  FAKE_HANG_IF         sleep for an hour first
  FAKE_ERROR_IF        every benchmark reports an error (not a skip)
  FAKE_SLEEP_S         sleep this long before running (a slow start)
  FAKE_LATE_S          with --barrier: the first copy to reach the barrier sleeps this
                       long after it, before each of its timed windows
  FAKE_REPORT_RUNTIME  report this omp_runtime, whatever was preloaded
  FAKE_SYNC_IN_FORCE   with FAKE_CUDA=1: report this cuda_sync_in_force
  FAKE_EXTRA=1         also report a counter and a context key the programs do not
                       declare (fake_counter = 1.5, fake_extra_key = x)
  FAKE_LOG             append one JSON line per invocation: argv and the knobs' values
  FAKE_JITTER          a run's step_ms times 1 + this x U(-1, 1), drawn once per process
                       (only for benchmarks with gap_ms = FAKE_JITTER_GAP_MS, if given)
  FAKE_PROGRAMS_DIR    read the recordings from here instead
--timeline_dir gets one toy timeline file per benchmark, named in the entry's
label as the recording's timeline_label_prefix says, --threads_csv gets rows appended, --barrier=PATH:P is
honoured: the copies count their arrivals in the 4-byte file (under flock) and
poll it until all P arrived.
"""
import fcntl
import json
import os
import random
import re
import signal
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDINGS = os.path.join(os.path.dirname(HERE), "fixtures", "programs")
INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
BARRIER_TIMEOUT_S = 60.0


class Refused(Exception):
    """A flag the program would refuse; str() is the text after "<program>: error: "."""


# --- FlagParser, from the declarations (src/core/cli.cc) ---------------------------

def trim(text):
    return text.strip(" \t")


def split_list(text):
    return [] if text == "" else [trim(item) for item in text.split(",")]


def range_text(lo, hi):
    return f"an integer >= {lo}" if hi == INT64_MAX else f"an integer in [{lo}, {hi}]"


def parse_int(flag, text, lo, hi):
    t = trim(text)
    m = re.fullmatch(r"[ \t\n\v\f\r]*([+-]?[0-9]+)", t)
    value = int(m.group(1)) if m else None
    if value is None or not INT64_MIN <= value <= INT64_MAX:  # strtoll: no number, or ERANGE
        raise Refused(f"--{flag}: expected {range_text(lo, hi)}, got '{text}'")
    if value < lo or value > hi:
        raise Refused(f"--{flag}: expected {range_text(lo, hi)}, got {t}")
    return value


def parse_int_list(flag, text, lo, hi):
    if not trim(text):
        raise Refused(f"--{flag}: expected a comma-separated list, got nothing")
    return [parse_int(flag, item, lo, hi) for item in split_list(text)]


_FLOAT = re.compile(r"[ \t\n\v\f\r]*[+-]?(([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?"
                    r"|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)([pP][+-]?[0-9]+)?"
                    r"|inf|infinity|nan)", re.IGNORECASE)


def parse_double(flag, text, lo, hi):
    t = trim(text)
    value = None
    if _FLOAT.fullmatch(t):
        body = t.strip()
        value = float.fromhex(body) if "x" in body.lower() else float(body)
    if value is None or value != value or value in (float("inf"), float("-inf")) or value < lo or value > hi:
        raise Refused(f"--{flag}: expected a number in [{'%g' % lo}, {'%g' % hi}], got '{text}'")
    return value


def parse_choice_list(flag, text, choices):
    if not trim(text):
        raise Refused(f"--{flag}: expected a comma-separated list, got nothing")
    out = []
    for item in split_list(text):
        if item not in choices:
            raise Refused(f"--{flag}: unknown value '{item}' (expected one of: {', '.join(choices)})")
        out.append(item)
    return out


def check(spec, value):
    kind, name = spec["kind"], spec["name"]
    lo, hi = spec.get("min", 0), spec.get("max", INT64_MAX)
    if kind == "int":
        parse_int(name, value, lo, hi)
    elif kind == "int_list":
        parse_int_list(name, value, lo, hi)
    elif kind == "double":
        parse_double(name, value, spec.get("min", 0.0), spec.get("max", 0.0))
    elif kind == "choice":
        if len(split_list(value)) != 1:
            raise Refused(f"--{name}: expected one value, got '{value}'")
        parse_choice_list(name, value, spec["choices"])
    elif kind == "choice_list":
        parse_choice_list(name, value, spec["choices"])
    elif kind == "switch":
        parse_int(name, value, 0, 1)
    elif kind != "string":
        raise RuntimeError(f"fake_program.py: flag kind {kind!r} of --{name} is new to the fake")


class Flags:
    """FlagParser::parse over the recorded declarations."""

    def __init__(self, specs, argv):
        self.specs = {s["name"]: s for s in specs}
        self.values = {s["name"]: s["default"] for s in specs}
        self.help = self.describe = False
        self.gb = []
        i = 0
        while i < len(argv):
            arg = argv[i]
            i += 1
            if arg in ("--help", "-h"):
                self.help = True
                continue
            if arg == "--describe":
                self.describe = True
                continue
            if arg.startswith("--benchmark_") or arg.startswith("--v="):
                self.gb.append(arg)
                continue
            if not arg.startswith("--"):
                raise Refused(f"unexpected argument '{arg}' (flags look like --name=value; see --help)")
            name, eq, value = arg[2:].partition("=")
            name = name.replace("-", "_")  # the programs' one spelling; '-' an alias
            if name not in self.specs:
                raise Refused(f"--{name}: unknown flag (see --help)")
            if not eq:
                if self.specs[name]["kind"] == "switch":
                    value = "1"
                elif i >= len(argv):
                    raise Refused(f"--{name}: missing value")
                else:
                    value = argv[i]
                    i += 1
            self.values[name] = value
        if not self.help:
            for spec in specs:
                check(spec, self.values[spec["name"]])

    def items(self, name):
        """An axis flag's values as the programs turn them into names."""
        spec = self.specs[name]
        value = self.values[name]
        if spec["kind"] in ("int_list", "int"):
            return [str(v) for v in parse_int_list(name, value, spec.get("min", 0), spec.get("max", INT64_MAX))]
        if spec.get("choices"):
            return parse_choice_list(name, value, spec["choices"])
        return split_list(value)

    def gb_flag(self, name):
        for arg in self.gb:
            if arg.startswith(f"--{name}="):
                return arg.split("=", 1)[1]
        return None


# --- the recordings -----------------------------------------------------------------

def recordings_dir():
    return os.environ.get("FAKE_PROGRAMS_DIR") or RECORDINGS


def load_recordings(bench):
    """{device: recorded description} of one program."""
    out = {}
    prefix = bench + "."
    for name in sorted(os.listdir(recordings_dir())):
        if name.startswith(prefix) and name.endswith(".json"):
            with open(os.path.join(recordings_dir(), name)) as f:
                out[name[len(prefix):-len(".json")]] = json.load(f)
    if not out:
        raise RuntimeError(f"fake_program.py: no recording {recordings_dir()}/{bench}.*.json")
    return out


def device_kind(text):
    if text == "cpu":
        return "cpu"
    if text == "cuda" or re.fullmatch(r"cuda:[0-9]{1,3}", text):
        return "cuda"
    return text


def benchmarks(recording, flags):
    """[(name, {axis: value})] in run order; Refused when the skip rules leave none."""
    prefix = recording["benchmarks"][0]["name"].split("/")[0]
    axes = []
    for axis in recording["axes"]:
        if axis["name"] not in flags.specs:
            raise RuntimeError(f"fake_program.py: axis {axis['name']!r} is not a flag of the recording")
        axes.append((axis["name"], flags.items(axis["name"])))
    combos = [[]]
    for name, values in axes:  # the last axis turns fastest
        combos = [c + [(name, v)] for c in combos for v in values]
    out, why = [], set()
    for combo in combos:
        args = dict(combo)
        rule = next((r for r in recording["skip_rules"] if skipped(r, args)), None)
        if rule is not None:
            why.add(rule["why"])
            continue
        name = prefix + "".join(f"/{v}" if i == 0 else f"/{a}:{v}" for i, (a, v) in enumerate(combo))
        out.append((name, args))
    if not out:
        raise Refused("no benchmark to run: every combination of these flags is skipped ("
                      + "; ".join(sorted(why)) + ")")
    return out


def skipped(rule, args):
    if not rule["all"]:
        return False
    for cond in rule["all"]:
        if cond["axis"] not in args:
            return False
        inside = args[cond["axis"]] in cond.get("in", cond.get("not_in", []))
        if inside != ("in" in cond):
            return False
    return True


# --- the toy model --------------------------------------------------------------------

def condition(var):
    text = os.environ.get(var, "")
    if text == "1":
        return True
    for cond in filter(None, text.split(";")):
        name, _, value = cond.partition("=")
        if os.environ.get(name) == value:
            return True
    return False


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
        step *= 1 + jitter * random.Random(os.getpid()).uniform(-1, 1)
    out.update(step_ms=step, step_ms_median=step, step_ms_cv=0.0, step_cpu_ms=t * step, cores_busy=float(t),
               residual_cpu_ms=residual, residual_cpu_ms_median=residual, residual_omp_ms=residual,
               residual_cores=residual / gap if gap else 0.0, tail_ms=spin if t > 1 else 0.0,
               tail_ms_median=spin if t > 1 else 0.0, gap_slept_ms=float(gap), threads=float(t + 1 + workers),
               vol_ctxsw=12.0, invol_ctxsw=3.0, sampler_cpu_ms=0.5,
               sampler_period_us=float(flags.values.get("sampler_us", "1000")))
    return out


# --- running ----------------------------------------------------------------------------

class Barrier:
    """--barrier=PATH:P: arrivals counted in the file's 4 bytes, under flock."""

    def __init__(self, text):
        path, colon, parties = text.rpartition(":")
        if not colon or not path:
            raise Refused(f"--barrier: expected PATH:PARTIES, got '{text}'")
        if not re.fullmatch(r"[ \t\n\v\f\r]*[+-]?[0-9]+", parties) or not 1 <= int(parties) <= 4096:
            raise Refused(f"--barrier: expected a party count in [1, 4096] after the ':', got '{parties}'")
        try:
            self.fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except OSError as e:
            raise Refused(f"--barrier: {path}: {e.strerror}") from None
        self.parties, self.round, self.first = int(parties), 0, False

    def _add(self, n):
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        try:
            value = struct.unpack("<I", os.pread(self.fd, 4, 0))[0] + n
            if n:
                os.pwrite(self.fd, struct.pack("<I", value), 0)
            return value
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)

    def wait(self):
        self.round += 1
        target = self.round * self.parties
        arrived = self._add(1)
        if self.round == 1:
            self.first = arrived == 1
        deadline = time.monotonic() + BARRIER_TIMEOUT_S
        while arrived < target:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.002)
            arrived = self._add(0)
        return True


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


def kv(key, value):
    return f"{json.dumps(key)}: {json.dumps(value)}"


def entry_json(name, index, steps, unit, values, error, label=None):
    """One entry as GB 1.7.1 writes it: its own "threads" first, counters
    (sorted) after, so a "threads" counter repeats the key."""
    full = f"{name}/iterations:{steps}/manual_time"
    scale = 1000.0 if unit == "us" else 1.0
    fields = [("name", full), ("family_index", index), ("per_family_instance_index", 0), ("run_name", full),
              ("run_type", "iteration"), ("repetitions", 1), ("repetition_index", 0), ("threads", 1)]
    if label:
        fields.append(("label", label))
    if error:
        fields += [("error_occurred", True), ("error_message", error), ("iterations", 0),
                   ("real_time", 0.0), ("cpu_time", 0.0), ("time_unit", unit)]
    else:
        fields += [("iterations", steps), ("real_time", values["step_ms"] * scale),
                   ("cpu_time", values["step_cpu_ms"] * scale), ("time_unit", unit)]
        fields += sorted(values.items())
    return "    {\n" + ",\n".join("      " + kv(k, v) for k, v in fields) + "\n    }"


def gb_filter(flags):
    text = flags.gb_flag("benchmark_filter")
    if not text or text == "all":
        return lambda name: True
    negative = text.startswith("-")
    rx = re.compile(text[1:] if negative else text)
    return lambda name: bool(rx.search(name)) != negative


def run(bench, program, recording, flags, device):
    if condition("FAKE_HANG_IF"):
        time.sleep(3600)
    if condition("FAKE_EXIT_IF"):
        print(f"{program}: error: fake failure: could not load the dataset", file=sys.stderr)
        sys.exit(3)
    time.sleep(float(os.environ.get("FAKE_SLEEP_S") or 0))
    barrier = Barrier(flags.values["barrier"]) if flags.values.get("barrier") else None
    late = float(os.environ.get("FAKE_LATE_S") or 0)
    steps = int(flags.values.get("steps", "10"))
    unit = "us" if bench == "runtime" else "ms"
    declared = {c["name"] for c in recording["counters"]}
    cuda_missing = device == "cuda" and os.environ.get("FAKE_CUDA") != "1"
    keep = gb_filter(flags)
    entries = []
    for name, args in benchmarks(recording, flags):
        if not keep(f"{name}/iterations:{steps}/manual_time"):
            continue
        error, values, label = None, {}, None
        if cuda_missing:
            error = recording["rules"]["skipped_prefix"] + " no CUDA device"
        elif condition("FAKE_ERROR_IF"):
            error = "fake error: out of memory"
        else:
            ok = barrier.wait() if barrier else True
            if barrier and barrier.first and late:
                time.sleep(late)
            values = counters(bench, args, flags)
            if device == "cuda":
                values["gpu_ms"] = values["step_ms"] * 0.5
            start = time.clock_gettime(time.CLOCK_MONOTONIC)
            values["timed_start_s"] = start
            values["timed_end_s"] = start + steps * (values["step_ms"] + int(args.get("gap_ms", 0))) / 1000
            if barrier:
                values["barrier_ok"] = 1.0 if ok else 0.0
            values = {k: v for k, v in values.items() if k in declared}
            if os.environ.get("FAKE_EXTRA") == "1":
                values["fake_counter"] = 1.5
            if flags.values.get("timeline_dir") and flags.values.get("sampler", "on") == "on":
                # Any file name: the sweep reads it from the entry's label.
                file = f"fake-{len(entries)}.timeline.csv"
                write_timeline(flags.values["timeline_dir"], file, values, int(args.get("gap_ms", 0)))
                label = recording["timeline_label_prefix"] + file
            if flags.values.get("threads_csv"):
                path = flags.values["threads_csv"]
                fresh = not os.path.exists(path) or os.path.getsize(path) == 0
                with open(path, "a") as f:
                    if fresh:
                        f.write("benchmark,tid,name,class,step_cpu_ms,gap_cpu_ms\n")
                    f.write(f"{name},{os.getpid()},{bench}_bench,main,{values.get('step_ms', 0):g},0\n")
        entries.append(entry_json(name, len(entries), steps, unit, values, error, label))
    ctx = context(recording, flags, device)
    if os.environ.get("FAKE_EXTRA") == "1":
        ctx["fake_extra_key"] = "x"
    gb_ctx = [("date", "2026-01-01T00:00:00+00:00"), ("host_name", "fakehost"),
              ("executable", sys.argv[0]), ("num_cpus", cpus()), ("mhz_per_cpu", 2500),
              ("cpu_scaling_enabled", False), ("caches", []), ("load_avg", [0.5, 0.25, 0.125]),
              ("library_build_type", "release")]
    pairs = gb_ctx + sorted(ctx.items())
    text = ("{\n  \"context\": {\n" + ",\n".join("    " + kv(k, v) for k, v in pairs) + "\n  },\n"
            "  \"benchmarks\": [\n" + ",\n".join(entries) + "\n  ]\n}\n")
    out = flags.gb_flag("benchmark_out")
    if condition("FAKE_CRASH_IF"):
        if out:
            with open(out, "w") as f:
                f.write(text[:len(text) // 2])
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGSEGV)
    if out:
        with open(out, "w") as f:
            f.write(text)
    if flags.gb_flag("benchmark_format") == "json":
        sys.stdout.write(text)
    else:
        for e in entries:
            print(json.loads(e)["name"])
    if condition("FAKE_EXIT_AFTER_IF"):
        print(f"{program}: fake: crashed in a destructor", file=sys.stderr)
        sys.exit(4)
    return 0


def help_text(program, recording):
    lines = [f"usage: {program} [flags] [--benchmark_* flags]", "", "(fake_program.py: recorded flags)", "", "flags:"]
    for f in recording["flags"]:
        lines.append(f"  --{f['name']}={f['default'] or chr(34) * 2}  {f['help']}")
    return "\n".join(lines) + "\n"


def main(argv):
    bench, args = argv[0], argv[1:]
    recs = load_recordings(bench)
    first = recs.get("cpu") or next(iter(recs.values()))
    program = first["program"]
    if os.environ.get("FAKE_LOG"):
        with open(os.environ["FAKE_LOG"], "a") as f:
            f.write(json.dumps({"argv": args, "env": {k: os.environ.get(k) for k in knob_names(first) + list(RANK_VARIABLES)}}) + "\n")
    try:
        flags = Flags(first["flags"], args)
        if flags.help:
            sys.stdout.write(help_text(program, first))
            return 0
        if flags.values.get("barrier"):
            Barrier(flags.values["barrier"])  # refused before anything runs, as the programs do
        if first.get("launch") == "ranks" and not flags.describe:
            rank_and_world()
        tl = flags.values.get("timeline_dir")
        if tl and not os.path.isdir(tl):
            raise Refused(f"--timeline_dir: {tl}: no such directory")
        device = device_kind(flags.values.get("device", "cpu"))
        if device not in recs:
            raise Refused(f"--device: {flags.values.get('device')}: fake_program.py has no recording of "
                          f"{program} for it ({', '.join(recs)} in {recordings_dir()})")
        recording = recs[device]
        found = benchmarks(recording, flags)
    except Refused as e:
        print(f"{program}: error: {e}", file=sys.stderr)
        return 2
    if flags.describe:
        doc = dict(recording)
        doc["flags"] = [dict(f, value=flags.values[f["name"]]) for f in recording["flags"]]
        doc["axes"] = [{"name": a["name"], "values": flags.items(a["name"])} for a in recording["axes"]]
        doc["benchmarks"] = [{"name": n, "args": a} for n, a in found]
        doc["context"] = context(recording, flags, device)
        sys.stdout.write(json.dumps(doc) + "\n")
        return 0
    return run(bench, program, recording, flags, device)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
