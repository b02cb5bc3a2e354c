"""Sweep grids: load a TOML file, check all of it, expand it into points.

A point is one environment setting of one benchmark program: everything that
needs a fresh process (OpenMP runtime, OMP_*/KMP_*/GOMP_* variables, device,
number of concurrent processes, CUDA wait policy). The in-process axes
(model, batch, gap, kernel, ...) stay lists: one process runs all their
combinations. configs/default.toml explains the format to users; the rules
are enforced here, before anything runs, so a typo costs one line of output
instead of a half-finished sweep. With a build directory, the grid is also
checked against what that build has (threadburn_py/build.py).
"""
import hashlib
import itertools
import json
import os
import re
from dataclasses import dataclass, field

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

from . import names, schema
from .build import BuildInfo, read_build

# Re-exported: sweep.py and the tests read names through this module.
parse_benchmark_name = names.parse_benchmark_name


class GridError(Exception):
    """A grid problem; str() is the one line the user sees (file: key: why)."""


class _Bad(Exception):
    pass


@dataclass(frozen=True)
class Spec:
    expected: str
    check: object  # value -> canonical string, raises _Bad


def _int_spec(lo, hi=None, words=(), unit=""):
    words_text = "".join(f', "{w}"' for w in words)
    bound = f" in {lo}..{hi}" if hi is not None else f" >= {lo}"
    expected = f"an integer{bound}{unit}{words_text}"

    def check(value):
        if isinstance(value, str) and value in words:
            return value
        if isinstance(value, bool) or not isinstance(value, int):
            raise _Bad
        if value < lo or (hi is not None and value > hi):
            raise _Bad
        return str(value)
    return Spec(expected, check)


def _choice_spec(choices):
    def check(value):
        if not isinstance(value, str) or value not in choices:
            raise _Bad
        return value
    return Spec("one of " + ", ".join(f'"{c}"' for c in choices), check)


def _regex_spec(expected, pattern):
    rx = re.compile(pattern)

    def check(value):
        if not isinstance(value, str) or not (value == schema.UNSET or rx.fullmatch(value)):
            raise _Bad
        return value
    return Spec(expected, check)


def _bool_spec():
    def check(value):
        if not isinstance(value, bool):
            raise _Bad
        return value
    return Spec("true or false", check)


def _preload_check(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int) and value in (0, 1):
        return str(value)
    raise _Bad


def _zero_one_spec():
    return Spec("0 or 1 (or true/false)", _preload_check)


def _str_spec():
    def check(value):
        if not isinstance(value, str) or not value:
            raise _Bad
        return value
    return Spec("a non-empty string", check)


def max_processes():
    # Four copies per CPU already means heavy oversubscription; more is
    # almost certainly a typo (and would fork-bomb a small machine).
    return 4 * (os.cpu_count() or 1)


_PLACES = r"(threads|cores|sockets|ll_caches|numa_domains)(\(\d+\))?|\{.+\}.*"
_BIND = r"(true|false|master|primary|close|spread)(,(master|primary|close|spread))*"
ENV_SPECS = {
    "OMP_NUM_THREADS": _int_spec(1, words=("cores", schema.UNSET)),
    "KMP_BLOCKTIME": _int_spec(0, unit=" (ms)", words=("infinite", schema.UNSET)),
    "GOMP_SPINCOUNT": _int_spec(0, unit=" (spins)", words=("infinite", schema.UNSET)),
    "OMP_WAIT_POLICY": _choice_spec(("active", "passive", schema.UNSET)),
    "OMP_PROC_BIND": _regex_spec('true, false, close, spread, primary (comma list) or "unset"',
                                 _BIND),
    "OMP_PLACES": _regex_spec('threads, cores, sockets, ll_caches, numa_domains, an explicit '
                              '"{...}" place list, or "unset"', _PLACES),
    "KMP_AFFINITY": _regex_spec('a KMP_AFFINITY string without spaces such as '
                                '"granularity=fine,compact,1,0", or "unset"',
                                r"[A-Za-z0-9_=,.\[\]\-]+"),
}

# The order of each table is the order of the program's flags in repro lines.
INPROC_SPECS = {
    "train_step": {
        "model": _choice_spec(schema.MODELS), "batch": _int_spec(1),
        "workers": _int_spec(0), "gap_ms": _int_spec(0, unit=" (ms)"),
        "preload": _zero_one_spec(), "loader": _choice_spec(schema.LOADERS),
        "mkldnn": _zero_one_spec(),
        # CUDA only (schema.CUDA_ONLY_INPROC): passed to cuda processes only.
        "pin_memory": _zero_one_spec(), "non_blocking": _zero_one_spec(),
        "item_sync": _zero_one_spec(),
    },
    "optimizer_step": {
        "optimizer": _choice_spec(schema.OPTIMIZERS), "params": _int_spec(1),
        "gap_ms": _int_spec(0, unit=" (ms)"),
    },
    "runtime": {
        "kernel": _choice_spec(schema.KERNELS),
        # runtime_bench's own bound: 2^30 floats (three arrays of 4 GiB).
        "n": _int_spec(1, 1 << 30, unit=" (floats)"),
        "gap_ms": _int_spec(0, unit=" (ms)"),
    },
}
# What a study gets for an in-process axis it does not name: stated here so a
# row never depends on a default compiled into the benchmark. (kernel: every
# kernel the build has; see _check_build.)
INPROC_DEFAULTS = {"model": ["mnist_adadelta"], "batch": ["64"], "workers": ["0"],
                   "gap_ms": ["0"], "preload": ["0"], "optimizer": ["sgd"],
                   "params": ["4000000"], "loader": ["torch"], "mkldnn": ["1"],
                   "pin_memory": ["0"], "non_blocking": ["0"], "item_sync": ["0"],
                   "kernel": list(schema.KERNELS), "n": ["1048576"]}
# Which build feature (threadburn_py/build.py) an axis value needs.
NEEDS_FEATURE = {("loader", "tbb"): "TBB", ("kernel", "tbb"): "TBB",
                 ("kernel", "onednn"): "DNNL"}
FEATURE_NAME = {"TBB": "TBB", "DNNL": "oneDNN"}

TOP_SPECS = {"name": _str_spec(), "description": Spec("a string", lambda v: _str_or_bad(v)),
             "repetitions": _int_spec(1), "timeout_s": _int_spec(1, unit=" (s)"),
             "seed": _int_spec(0), "timeline": _bool_spec()}
# Flags the sweep sets itself: extra_args may not name them.
RESERVED_FLAGS = set(schema.INPROC_KNOBS) | {
    "device", "cuda_sync", "steps", "warmup", "data-dir", "data_dir", "timeline-dir",
    "threads-csv", "help"}
STUDY_SCALARS = {"name": _str_spec(), "preset": _str_spec(), "repetitions": _int_spec(1),
                 "timeout_s": _int_spec(1, unit=" (s)"), "timeline": _bool_spec(),
                 "steps": _int_spec(1), "warmup": _int_spec(0), "threads_csv": _bool_spec()}
TRAIN_SCALARS = {"data_dir": _str_spec()}
COMMON_ENV = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "OMP_PROC_BIND", "OMP_PLACES")
RUNTIME_SCALARS = {"name": _choice_spec(schema.RUNTIMES), "preset": _str_spec(),
                   "timeline": _bool_spec()}


def _str_or_bad(value):
    if not isinstance(value, str):
        raise _Bad
    return value


@dataclass
class Point:
    grid: str
    study: str
    where: str  # e.g. study[0].runtimes[2], for messages
    bench: str
    preset: str
    runtime: str
    env: dict  # ENV_KNOBS -> value or "unset"
    device: str
    processes: int
    inproc: dict  # in-process knob -> list of values (strings)
    steps: int
    warmup: int
    cuda_sync: str = ""  # CUDA host wait policy; "" on cpu (not applicable)
    data_dir: str = ""
    extra_args: dict = field(default_factory=dict)  # flag -> value, passed verbatim
    timeline: bool = False
    threads_csv: bool = False
    repetitions: int = 1
    timeout_s: int = 300
    key: str = field(default="", init=False)

    def __post_init__(self):
        ident = {"bench": self.bench, "preset": self.preset, "runtime": self.runtime,
                 "env": self.env, "device": self.device, "processes": self.processes,
                 "inproc": self.inproc, "steps": self.steps, "warmup": self.warmup,
                 "data_dir": self.data_dir}
        if self.extra_args:  # absent from the hash when unused: keys stay stable
            ident["extra_args"] = self.extra_args
        if self.cuda_sync:
            ident["cuda_sync"] = self.cuda_sync
        digest = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()
        self.key = digest[:12]

    @property
    def label(self):
        row = dict(self.env, runtime=self.runtime, processes=str(self.processes),
                   preset=self.preset, cuda_sync=self.cuda_sync)
        device = " cuda" if self.device == "cuda" else ""
        return f"{self.bench}{device} {schema.env_label(row)}"

    def knobs(self):
        """Knob columns shared by every row of this point."""
        row = {"bench": self.bench, "runtime": self.runtime, "processes": str(self.processes),
               "device": self.device, "cuda_sync": self.cuda_sync,
               "steps": str(self.steps), "warmup": str(self.warmup),
               "extra_args": ";".join(f"{k}={v}" for k, v in self.extra_args.items())}
        row.update(self.env)
        for knob in schema.INPROC_KNOBS:
            values = self.inproc.get(knob)
            # A single value is known even when the process dies before reporting.
            row[knob] = values[0] if values and len(values) == 1 else ""
        return row

    def bench_args(self, timeline_dir=None, threads_csv=None):
        """The program's own flags (comma lists for the in-process axes)."""
        args = [f"--{knob}={','.join(values)}" for knob, values in self.inproc.items()]
        args.append(f"--device={self.device}")
        if self.cuda_sync:
            args.append(f"--cuda_sync={self.cuda_sync}")
        args += [f"--steps={self.steps}", f"--warmup={self.warmup}"]
        if self.data_dir:
            args.append(f"--data-dir={self.data_dir}")
        args += [f"--{k}={v}" for k, v in self.extra_args.items()]
        if timeline_dir:
            args.append(f"--timeline-dir={timeline_dir}")
        if threads_csv:
            args.append(f"--threads-csv={threads_csv}")
        return args

    def child_env(self, libomp):
        """(variables to set, controlled variables to remove) for this point."""
        setenv = {k: v for k, v in self.env.items() if v != schema.UNSET}
        if self.runtime == "llvm":
            # libomp implements the GOMP ABI, so preloading it puts a
            # libgomp-built libtorch on the LLVM runtime (DESIGN.md).
            setenv["LD_PRELOAD"] = libomp
        unset = [k for k in schema.CONTROLLED_ENV if k not in setenv]
        return setenv, unset

    def expected_benchmarks(self):
        """(name, in-process knobs) of each benchmark the program should run;
        used to record failed rows when a process dies before reporting."""
        return names.expected_benchmarks(self.bench, self.device, self.inproc, self.steps)


def _check(spec, value, where):
    try:
        return spec.check(value)
    except _Bad:
        raise GridError(f"{where}: expected {spec.expected}, got {value!r}") from None


def _axis(raw, spec, where):
    """An axis: one value or a non-empty list of values; duplicates dropped."""
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise GridError(f"{where}: empty axis: expected a non-empty list of {spec.expected}")
    out = []
    for i, value in enumerate(values):
        canon = _check(spec, value, f"{where}[{i}]" if isinstance(raw, list) else where)
        if canon not in out:
            out.append(canon)
    return out


def _table(raw, where):
    if not isinstance(raw, dict):
        raise GridError(f"{where}: expected a table, got {type(raw).__name__}")
    return raw


def _unknown(key, where, allowed, hint=""):
    allowed_text = ", ".join(sorted(allowed))
    return GridError(f"{where}.{key}: unknown key{hint}; expected one of: {allowed_text}")


def _runtime_hint(key, runtime=None):
    owner = schema.RUNTIME_ONLY_KNOBS.get(key)
    if owner is None:
        return ""
    if runtime is None:
        return (f" here ({key} is read only by the {owner} runtime: set it inside a "
                f'runtimes entry with name = "{owner}")')
    return (f" for runtime {runtime} ({key} is read only by the {owner} runtime, "
            f"so it is not varied under {runtime})")


def _extra_args(raw, where):
    """Program flags the sweep does not model (e.g. train_step's --loader,
    --mkldnn, --sampler_us): passed verbatim, so the grid can use a flag the
    day it exists; the program itself rejects a bad value (one-line error,
    recorded as failed rows)."""
    out = {}
    for key, value in _table(raw, where).items():
        if not re.fullmatch(r"[a-z][a-z0-9_-]*", key) or key in RESERVED_FLAGS \
                or key.startswith("benchmark"):
            raise GridError(f"{where}.{key}: expected a program flag the sweep does not set "
                            "itself (the study's own keys cover model, batch, gap_ms, ...)")
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, (str, int)) or isinstance(value, str) and (
                not value or any(c.isspace() for c in value)):
            raise GridError(f"{where}.{key}: expected an integer or a string without spaces "
                            f"(comma lists allowed), got {value!r}")
        out[key] = str(value)
    return out


def _resolve_threads(value):
    return str(os.cpu_count() or 1) if value == "cores" else value


def load_grid(path, build_dir=None):
    """Read, check and expand a grid file; with build_dir, also against what
    that build has. Raises GridError naming the file."""
    if tomllib is None:
        raise GridError(f"{path}: reading TOML needs Python >= 3.11 (tomllib)")
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise GridError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise GridError(f"{path}: not valid TOML: {e}") from None
    default_name = os.path.splitext(os.path.basename(path))[0]
    try:
        return expand(data, default_name, read_build(build_dir))
    except GridError as e:
        raise GridError(f"{path}: {e}") from None


def expand(data, default_name="grid", build=None):
    """Expand parsed TOML into (grid settings dict, list of Point)."""
    build = build or BuildInfo()
    top = {}
    for key, value in data.items():
        if key == "study":
            continue
        if key not in TOP_SPECS:
            raise _unknown(key, "(top level)", list(TOP_SPECS) + ["study"])
        top[key] = _check(TOP_SPECS[key], value, key)
    studies = data.get("study")
    if studies is None:
        raise GridError("study: missing: expected at least one [[study]] table")
    if not isinstance(studies, list) or not studies:
        raise GridError("study: expected a non-empty array of [[study]] tables")
    settings = {"name": top.get("name", default_name), "description": top.get("description", ""),
                "repetitions": int(top.get("repetitions", 3)),
                "timeout_s": int(top.get("timeout_s", 300)),
                "seed": int(top["seed"]) if "seed" in top else None,
                "timeline": top.get("timeline", False)}
    points, seen = [], {}
    for index, raw in enumerate(studies):
        for point in _expand_study(_table(raw, f"study[{index}]"), index, settings, build):
            if point.key in seen:
                raise GridError(f"{point.where}: duplicate point ({point.label}); it is "
                                f"already produced by {seen[point.key]}")
            seen[point.key] = point.where
            points.append(point)
    return settings, points


def _launch_specs(bench):
    specs = {"processes": _int_spec(1, max_processes())}
    if bench == "runtime":
        specs["device"] = Spec('"cpu" (runtime_bench runs on cpu only)',
                               _choice_spec(("cpu",)).check)
    else:
        specs["device"] = _choice_spec(schema.DEVICES)
    if bench == "train_step":
        # The wait policy is set before the CUDA context exists: one process each.
        specs["cuda_sync"] = _choice_spec(schema.CUDA_SYNC)
    return specs


def _values_text(values):
    return "[" + ", ".join(values) + "]"


def _check_axes(bench, study, inproc, launch, where):
    """Rules across axes, each mirroring what the program itself would do."""
    if bench != "train_step":
        return
    if "1" in inproc["preload"] and inproc["workers"] != ["0"]:
        raise GridError(f"{where}.preload: preload = 1 needs workers = [0] (a preloaded "
                        "dataset has no loader); put preload = 1 in its own [[study]]")
    # train_step_bench silently skips the TBB loader without workers or with
    # preload: asking for it where it never runs would only drop rows.
    if "tbb" in inproc["loader"] and not ("0" in inproc["preload"]
                                          and any(w != "0" for w in inproc["workers"])):
        raise GridError(f"{where}.loader: tbb needs workers >= 1 and preload = 0 (the "
                        "program skips the TBB loader otherwise), but this study has "
                        f"workers = {_values_text(inproc['workers'])}, preload = "
                        f"{_values_text(inproc['preload'])}")
    if "cuda" not in launch.get("device", ["cpu"]):
        for key in schema.CUDA_ONLY_INPROC + schema.CUDA_ONLY_LAUNCH:
            if key in study:
                raise GridError(f"{where}.{key}: a CUDA-only axis, but this study's device "
                                'list is only cpu (add device = ["cuda"] or drop the key)')


def _check_build(inproc, named, build, where):
    """Reject what the build lacks; an unnamed kernel axis means 'every
    kernel this build has'."""
    if "kernel" in inproc and "kernel" not in named:
        inproc["kernel"] = [k for k in inproc["kernel"] if ("kernel", k) not in NEEDS_FEATURE
                            or build.has(NEEDS_FEATURE[("kernel", k)])]
    for (knob, value), feature in NEEDS_FEATURE.items():
        if value in inproc.get(knob, ()) and not build.has(feature):
            raise GridError(f"{where}.{knob}: {value} needs a build with "
                            f"{FEATURE_NAME[feature]} {build.why_missing(feature)}")


def _expand_study(study, index, settings, build):
    where = f"study[{index}]"
    if "bench" not in study:
        raise GridError(f"{where}.bench: missing: expected one of "
                        + ", ".join(f'"{b}"' for b in schema.BENCHES))
    bench = _check(_choice_spec(schema.BENCHES), study["bench"], f"{where}.bench")
    inproc_specs = INPROC_SPECS[bench]
    scalars = dict(STUDY_SCALARS, **(TRAIN_SCALARS if bench == "train_step" else {}))
    launch_specs = _launch_specs(bench)
    allowed = (["bench", "env", "runtimes", "extra_args"] + list(scalars) + list(inproc_specs)
               + list(launch_specs))

    opts, inproc, launch = {}, {}, {}
    for key, value in study.items():
        if key in ("bench", "env", "runtimes", "extra_args"):
            continue
        if key in scalars:
            opts[key] = _check(scalars[key], value, f"{where}.{key}")
        elif key in inproc_specs:
            inproc[key] = _axis(value, inproc_specs[key], f"{where}.{key}")
        elif key in launch_specs:
            launch[key] = _axis(value, launch_specs[key], f"{where}.{key}")
        elif key in schema.ENV_KNOBS:
            raise _unknown(key, where, allowed, " (environment variables go in the study's "
                           "env table or in a runtimes entry)")
        else:
            raise _unknown(key, where, allowed)
    named = set(inproc)
    for knob in inproc_specs:
        inproc.setdefault(knob, list(INPROC_DEFAULTS[knob]))
    _check_axes(bench, study, inproc, launch, where)
    _check_build(inproc, named, build, where)

    extra_args = _extra_args(study.get("extra_args", {}), f"{where}.extra_args")
    common_env = {}
    for key, value in _table(study.get("env", {}), f"{where}.env").items():
        if key not in COMMON_ENV:
            raise _unknown(key, f"{where}.env", COMMON_ENV, _runtime_hint(key))
        common_env[key] = _axis(value, ENV_SPECS[key], f"{where}.env.{key}")
    runtimes = study.get("runtimes", [{"name": "gomp"}])
    if not isinstance(runtimes, list) or not runtimes:
        raise GridError(f"{where}.runtimes: expected a non-empty array of tables such as "
                        '[{name = "gomp"}, {name = "llvm", KMP_BLOCKTIME = [0, 200]}]')
    name = opts.get("name", f"{bench}{index}")
    for r_index, raw_rt in enumerate(runtimes):
        r_where = f"{where}.runtimes[{r_index}]"
        entry = _table(raw_rt, r_where)
        if "name" not in entry:
            raise GridError(f'{r_where}.name: missing: expected "gomp" or "llvm"')
        runtime = _check(RUNTIME_SCALARS["name"], entry["name"], f"{r_where}.name")
        own_knobs = [k for k, rt in schema.RUNTIME_ONLY_KNOBS.items() if rt == runtime]
        r_allowed = list(RUNTIME_SCALARS) + list(COMMON_ENV) + own_knobs
        env_axes = dict(common_env)  # an entry's own list replaces the study's
        r_opts = {}
        for key, value in entry.items():
            if key in RUNTIME_SCALARS:
                r_opts[key] = _check(RUNTIME_SCALARS[key], value, f"{r_where}.{key}")
            elif key in COMMON_ENV or key in own_knobs:
                env_axes[key] = _axis(value, ENV_SPECS[key], f"{r_where}.{key}")
            else:
                raise _unknown(key, r_where, r_allowed, _runtime_hint(key, runtime))
        knobs = list(schema.ENV_KNOBS)
        axes = [env_axes.get(k, [schema.UNSET]) for k in knobs]
        # "cores" may equal a number also listed: keep each thread count once.
        axes[0] = list(dict.fromkeys(_resolve_threads(v) for v in axes[0]))
        # (device, CUDA wait policy): the policy and the CUDA-only in-process
        # axes exist only for cuda processes.
        devices = [(d, s) for d in launch.get("device", ["cpu"])
                   for s in (launch.get("cuda_sync", ["auto"])
                             if d == "cuda" and bench == "train_step" else [""])]
        axes.append(devices)
        axes.append(launch.get("processes", ["1"]))
        for combo in itertools.product(*axes):
            env = dict(zip(knobs, combo[:len(knobs)]))
            device, cuda_sync = combo[-2]
            yield Point(
                grid=settings["name"], study=name, where=r_where, bench=bench,
                preset=r_opts.get("preset", opts.get("preset", "")), runtime=runtime,
                env=env, device=device, processes=int(combo[-1]), cuda_sync=cuda_sync,
                inproc={k: inproc[k] for k in inproc_specs
                        if device == "cuda" or k not in schema.CUDA_ONLY_INPROC},
                steps=int(opts.get("steps", 10)), warmup=int(opts.get("warmup", 2)),
                data_dir=opts.get("data_dir", ""), extra_args=extra_args,
                timeline=bool(r_opts.get("timeline", opts.get("timeline", settings["timeline"]))),
                threads_csv=bool(opts.get("threads_csv", False)),
                repetitions=int(opts.get("repetitions", settings["repetitions"])),
                timeout_s=int(opts.get("timeout_s", settings["timeout_s"])))
