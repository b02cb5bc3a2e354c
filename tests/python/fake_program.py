#!/usr/bin/env python3
"""A stand-in for the benchmark programs (build/bench/<bench>_bench) that knows
none of their rules: it serves their recorded self-descriptions.

    fake_program.py BENCH [the program's flags] [--describe]

tests/fixtures/programs/<bench>.<device>.json holds what the real program
printed for `--describe` (tests/python/record_programs.py records them; the
drift test test_fake_matches_programs.py checks they are current and that
this fake answers as the programs do). It checks the flags with the
recording's declarations (kinds, defaults, bounds, choices) and the rules
the C++ parser publishes with them (flag_syntax: what an integer is and
the template of every refusal, src/core/cli.cc), so a refusal is the
program's own line, exit 2; it picks the recording of the --device in
force, and computes the benchmarks
generically: the cross product of the axis flags' values in the recorded axes
order, minus the recorded skip rules, named "<prefix>/<first value>/<axis>:<value>...".
The rules the programs enforce in their own code (a CUDA-only flag on cpu, a
batch larger than the dataset, a kernel missing from the build) are not
repeated here.

--describe prints the recording with those flag values, axes and benchmarks.
A run writes Google Benchmark 1.7.1 JSON (--benchmark_out=FILE, and stdout with
--benchmark_format=json): the recorded context with the settings of this
process, one entry per benchmark named "<benchmark>/iterations:<steps>/manual_time",
with the toy counters of fake_model.py (exact values tests can check). CUDA
benchmarks report "<the recorded skipped_prefix> no CUDA device" unless
FAKE_CUDA=1.

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
                       (only for benchmarks with gap_ms = FAKE_JITTER_GAP_MS, if given);
  FAKE_JITTER_SEQ      a file: the luck drawn from the count of processes before (else the pid)
  FAKE_MEASURED=1      the time and CPU figures with all their digits, as measured, not as
                       round figures (x (1 + 1e-9)): what the decision tests compare
  FAKE_PROGRAMS_DIR    read the recordings from here instead
--timeline_dir gets one toy timeline file per benchmark, named in the entry's
label as the recording's timeline_label_prefix says, --threads_csv gets rows appended, --barrier=PATH:P is
honoured: the copies count their arrivals in the 4-byte file (under flock) and
poll it until all P arrived.
"""
import fcntl
import json
import os
import re
import signal
import struct
import sys
import time

from fake_model import Refused, context, counters, cpus, knob_names, rank_and_world, write_timeline

HERE = os.path.dirname(os.path.abspath(__file__))
RECORDINGS = os.path.join(os.path.dirname(HERE), "fixtures", "programs")
INT64_MAX = 2 ** 63 - 1
INT64_MIN = -2 ** 63
RANK_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
BARRIER_TIMEOUT_S = 60.0


# --- FlagParser, from the recorded declarations and the parser's own rules ----------
# A recording holds every flag (kind, default, bounds or choices, the words
# "expected" its refusals use) and the parser's syntax as data ("flag_syntax":
# what an integer is, the template of every refusal), src/core/cli.cc's own.
# What is left here is the grammar of a command line and of comma lists.

class Flags:
    """FlagParser::parse over a recording's declarations and syntax."""

    def __init__(self, recording, argv):
        self.syntax = recording["flag_syntax"]
        self.specs = {s["name"]: s for s in recording["flags"]}
        self.values = {s["name"]: s["default"] for s in recording["flags"]}
        self.help = self.describe = False
        self.gb = []
        i = 0
        while i < len(argv):
            arg = argv[i]
            i += 1
            if arg in ("--help", "-h"):
                self.help = True
            elif arg == "--describe":
                self.describe = True
            elif arg.startswith("--benchmark_") or arg.startswith("--v="):
                self.gb.append(arg)
            elif not arg.startswith("--"):
                self.refuse("positional", text=arg)
            else:
                name, eq, value = arg[2:].partition("=")
                name = name.replace("-", "_")  # the programs' one spelling; '-' an alias
                if name not in self.specs:
                    self.refuse("unknown_flag", flag=name)
                if not eq and self.specs[name]["kind"] == "switch":
                    value = "1"
                elif not eq and i >= len(argv):
                    self.refuse("missing_value", flag=name)
                elif not eq:
                    value, i = argv[i], i + 1
                self.values[name] = value
        if not self.help:
            for name, value in self.values.items():
                self.parse(self.specs[name], value)

    def refuse(self, key, **values):
        text = self.syntax["messages"][key]
        for slot, value in values.items():
            text = text.replace("{" + slot + "}", value)
        raise Refused(text)

    def parse(self, spec, value):
        """The value's items as the program reads them (a refusal for a bad one)."""
        kind, name = spec["kind"], spec["name"]
        if kind in ("int", "switch"):
            return [self.integer(spec, value)]
        if kind == "string":
            return split_list(value)
        if kind not in ("int_list", "choice", "choice_list"):
            raise RuntimeError(f"fake_program.py: flag kind {kind!r} of --{name} is new to the fake")
        if not trim(value):
            self.refuse("empty_list", flag=name)
        if kind == "choice" and len(split_list(value)) != 1:
            self.refuse("one_value", flag=name, text=value)
        if kind == "int_list":
            return [self.integer(spec, item) for item in split_list(value)]
        for item in split_list(value):
            if item not in spec["choices"]:
                self.refuse("unknown_value", flag=name, item=item, choices=", ".join(spec["choices"]))
        return split_list(value)

    def integer(self, spec, text):
        lo, hi = (0, 1) if spec["kind"] == "switch" else (spec["min"], spec.get("max", INT64_MAX))
        t = trim(text)
        if not re.fullmatch(self.syntax["integer"], t) or not INT64_MIN <= int(t) <= INT64_MAX:
            self.refuse("bad_value", flag=spec["name"], expected=spec["expected"], text=text)
        if not lo <= int(t) <= hi:
            self.refuse("out_of_range", flag=spec["name"], expected=spec["expected"], text=t)
        return str(int(t))

    def items(self, name):
        """An axis flag's values as the programs turn them into names."""
        return self.parse(self.specs[name], self.values[name])

    def gb_flag(self, name):
        for arg in self.gb:
            if arg.startswith(f"--{name}="):
                return arg.split("=", 1)[1]
        return None


# --- the recordings -----------------------------------------------------------------

def trim(text):
    return text.strip(" \t")


def split_list(text):
    return [] if text == "" else [trim(item) for item in text.split(",")]


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


# --- faults on request -------------------------------------------------------------

def condition(var):
    text = os.environ.get(var, "")
    if text == "1":
        return True
    for cond in filter(None, text.split(";")):
        name, _, value = cond.partition("=")
        if os.environ.get(name) == value:
            return True
    return False


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


def cuda_figures(step_ms):
    """A CUDA step's GPU figures: work half the step, in a span of 0.9 of it (the GPU waited half)."""
    return {"gpu_span_ms": step_ms * 0.9, "gpu_busy_ms": step_ms * 0.5, "gpu_idle_share": 0.5}


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
                values.update(cuda_figures(values["step_ms"]))
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
        flags = Flags(first, args)
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
