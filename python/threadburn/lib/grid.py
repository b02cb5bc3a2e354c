"""Sweep grids: a TOML file of studies, checked whole before anything runs and
expanded into points.

A point is one benchmark program under one environment: the OpenMP runtime
and its OMP_* / KMP_* / GOMP_* variables (read once at start-up, so each
point is a fresh process), one value of each launch axis, and the program's
axis flags as comma lists (one process runs all their combinations). What a
study may name and what each value may be comes from the program itself
(programs.py): any flag it declares; an axis flag takes a list that one
process runs, any other flag given a list becomes a launch axis (one process
per value: device, cuda_sync, sampler, ...). A flag the study does not name
keeps the program's own default, so a sweep and a hand-run program run the
same benchmarks. The format is documented at the top of configs/default.toml.

A study also says which of its program's flags are settings (`settings`,
keys.FEED_FLAGS: how the same iteration is fed and waited for), each with
its baseline, the program's default: the rows record them (knob_layout's
settings field, Point.layout_text), and the verdict compares the settings
within one workload (docs/design.md, Setting and workload).
"""
import hashlib
import itertools
import json
import os
from dataclasses import dataclass, field

try:
    import tomllib
except ImportError:  # Python < 3.11
    tomllib = None

from . import keys, knobs, schema
from .records import Row
from .errors import ThreadburnError


class GridError(ThreadburnError):
    """A grid problem; str() is the one line the user sees (file: key: why)."""


def max_processes():
    # Four copies per CPU already means heavy oversubscription; more is
    # almost certainly a typo (and would fork-bomb a small machine).
    return 4 * (os.cpu_count() or 1)


def check_env_value(knob, value, where):
    """A knob's value as the table (knobs.tsv) accepts it, or "unset".
    Checked here because the process that would reject it starts only
    later, one point at a time."""
    if value == schema.UNSET:
        return value
    try:
        return knobs.check(knob, value, extra=(schema.UNSET,))
    except knobs.KnobError as e:
        raise GridError(f"{where}: {e}") from None


def flag_value(value, where):
    """A TOML value as the program flag's text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)) and not (isinstance(value, str) and (not value or " " in value)):
        return str(value)
    raise GridError(f"{where}: expected a number, true/false or a string without spaces, got {value!r}")


def as_list(raw, where, check):
    """A value or a non-empty list of values, each checked; duplicates dropped."""
    values = raw if isinstance(raw, list) else [raw]
    if not values:
        raise GridError(f"{where}: empty list: give at least one value")
    out = []
    for i, v in enumerate(values):
        canon = check(v, f"{where}[{i}]" if isinstance(raw, list) else where)
        if canon not in out:
            out.append(canon)
    return out


def resolve_threads(value, processes=1):
    """OMP_NUM_THREADS words: "cores" is the CPU count, "cores_per_process"
    the CPUs split over the point's processes (at least 1), as PyTorch's CPU
    launcher gives each of its instances or ranks."""
    cores = os.cpu_count() or 1
    if value == "cores":
        return str(cores)
    if value == "cores_per_process":
        return str(max(1, cores // processes))
    return value


@dataclass
class Point:
    grid: str
    study: str
    where: str        # e.g. study[0].runtimes[2], for messages
    bench: str
    program: object   # programs.Program
    preset: str
    runtime: str
    env: dict         # env knob -> value or "unset"
    processes: int
    args: dict        # flag -> value as passed ("a,b" for an axis list)
    repetitions: int = 1
    timeout_s: int = 300
    timeline: bool = False
    threads_csv: bool = False
    launch: tuple = ()  # the flags that are launch axes of its study (shown in the label)
    ranks: bool = False  # its processes are the ranks of one world (the program's launch: "ranks")
    settings: tuple = keys.LEGACY_SETTINGS  # ((flag, baseline), ...): its study's setting flags
    key: str = field(default="", init=False)

    def __post_init__(self):
        ident = {"bench": self.bench, "preset": self.preset, "runtime": self.runtime, "env": self.env,
                 "processes": self.processes, "args": self.args}
        self.key = hashlib.sha1(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:12]

    @property
    def label(self):
        """Its program, device, setting and launch axes. A setting flag that
        is an axis has one value per benchmark, not per point: the label
        names only the settings the whole process runs under."""
        own = tuple((k, b) for k, b in self.settings if k in self.args and "," not in self.args[k])
        row = Row(self.env, runtime=self.runtime, processes=str(self.processes), preset=self.preset,
                   world_size=str(self.processes) if self.ranks else "",
                   knob_layout=keys.Layout(tuple(self.env), (), (), own).text(), **{k: self.args[k] for k, _ in own})
        device = f" {self.args['device']}" if self.args.get("device", "cpu") != "cpu" else ""
        launch = "".join(f" {k}={self.args[k]}" for k in self.launch if k != "device" and k not in dict(own))
        return f"{self.bench}{device} {keys.env_label(row)}{launch}"

    def layout_text(self, columns):
        """The knob_layout cell of its rows: the file's columns (schema.Columns)
        and its study's setting flags with their baselines."""
        return keys.Layout(columns.env_knobs, columns.flags, columns.params, self.settings).text()

    def program_args(self):
        return [f"--{k}={v}" for k, v in self.args.items()]

    def child_env(self, libomp):
        """(variables to set, knobs to remove) for this point's process."""
        setenv = {k: v for k, v in self.env.items() if v != schema.UNSET}
        if preload := knobs.preloads(self.runtime, libomp):
            setenv["LD_PRELOAD"] = " ".join(preload)
        unset = [k for k in list(self.env) + list(schema.NOT_A_KNOB) if k not in setenv]
        return setenv, unset

    def description(self):
        """The program's description for this point's flags (cached)."""
        return self.program.describe(self.program_args())


class Grid:
    def __init__(self, settings, points, programs=None):
        self.settings = settings
        self.points = points
        self.programs = programs or {}  # {bench: Program} it was loaded against

    @property
    def name(self):
        return self.settings["name"]


TOP_KEYS = {"name", "description", "repetitions", "timeout_s", "seed", "timeline", "settings", "study"}
STUDY_KEYS = {"bench", "name", "preset", "repetitions", "timeout_s", "timeline", "threads_csv",
              "env", "runtimes", "processes", "world_size", "settings"}
RUNTIME_KEYS = {"name", "preset", "timeline"}


def _int(value, where, low=0, unit=""):
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise GridError(f"{where}: expected an integer >= {low}{unit}, got {value!r}")
    return value


def _bool(value, where):
    if not isinstance(value, bool):
        raise GridError(f"{where}: expected true or false, got {value!r}")
    return value


def _str(value, where):
    if not isinstance(value, str) or not value:
        raise GridError(f"{where}: expected a non-empty string, got {value!r}")
    return value


def _names(value, where):
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise GridError(f"{where}: expected a list of flag names such as [\"preload\", \"workers\"], got {value!r}")
    return list(dict.fromkeys(value))


def setting_flags(names, description, where, bench, inherited=False):
    """((flag, baseline), ...) of a study's setting flags: the ones it names
    (inherited: the grid's, for every study whose program has them), else
    keys.DEFAULT_SETTINGS; the baseline is the program's default (its first
    value, for a default list such as train_step's workers 0,2). A setting
    must be a feed flag (keys.FEED_FLAGS) and not the program's first axis
    (its value stands bare in the benchmark names: keys.strip_settings could
    not take it out)."""
    flags = description.flags
    if names is None:
        names, inherited = list(keys.DEFAULT_SETTINGS), True
    first = description.axes[0]["name"] if description.axes else None
    out = []
    for name in names:
        if name not in flags or name in schema.SWEEP_FLAGS:
            if inherited:
                continue
            raise GridError(f"{where}: {name!r} is not a flag of {bench}")
        if name not in keys.FEED_FLAGS:
            raise GridError(f"{where}: {name} changes the work an iteration does, not how it is fed: a setting is "
                            f"one of {', '.join(keys.FEED_FLAGS)} (the rest are the workload)")
        if name == first:
            raise GridError(f"{where}: {name} is {bench}'s first axis (its value stands bare in the benchmark "
                            "names): it cannot be a setting")
        out.append((name, flags[name].default.split(",")[0]))
    return tuple(out)


def _table(raw, where):
    if not isinstance(raw, dict):
        raise GridError(f"{where}: expected a table, got {type(raw).__name__}")
    return raw


def read_toml(path, error=GridError):
    """A TOML file as a dict; error (a ThreadburnError) names the file when
    it cannot be read or parsed."""
    if tomllib is None:
        raise error(f"{path}: reading TOML needs Python >= 3.11 (tomllib)")
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as e:
        raise error(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise error(f"{path}: not valid TOML: {e}") from None


def load(path, programs):
    """Read, check and expand a grid file against the build's programs
    ({bench: Program}). Raises GridError naming the file."""
    data = read_toml(path)
    try:
        return expand(data, os.path.splitext(os.path.basename(path))[0], programs)
    except GridError as e:
        raise GridError(f"{path}: {e}") from None


def expand(data, default_name, programs):
    for key in data:
        if key not in TOP_KEYS:
            raise GridError(f"{key}: unknown key at the top level; expected one of: {', '.join(sorted(TOP_KEYS))}")
    settings = {"name": _str(data.get("name", default_name), "name"),
                "description": data.get("description", ""),
                "repetitions": _int(data.get("repetitions", 3), "repetitions", 1),
                "timeout_s": _int(data.get("timeout_s", 300), "timeout_s", 1, " (s)"),
                "seed": _int(data["seed"], "seed") if "seed" in data else None,
                "timeline": _bool(data.get("timeline", False), "timeline"),
                "settings": _names(data["settings"], "settings") if "settings" in data else None}
    studies = data.get("study")
    if not isinstance(studies, list) or not studies:
        raise GridError("study: expected at least one [[study]] table")
    points, seen = [], {}
    for index, raw in enumerate(studies):
        for point in expand_study(_table(raw, f"study[{index}]"), index, settings, programs):
            if point.key in seen:
                raise GridError(f"{point.where}: duplicate point ({point.label}); it is already "
                                f"produced by {seen[point.key]}")
            seen[point.key] = point.where
            points.append(point)
    check_points(points)
    return Grid(settings, points, programs)


class Study:
    """One [[study]] table, checked: the program, its flags, the sweep's own keys."""

    def __init__(self, raw, index, settings, programs):
        self.where = f"study[{index}]"
        self.raw = raw
        if "bench" not in raw:
            raise GridError(f"{self.where}.bench: missing: expected one of {', '.join(sorted(programs))}")
        self.bench = raw["bench"]
        if self.bench not in programs:
            raise GridError(f"{self.where}.bench: {self.bench!r} is not a program of this build; "
                            f"expected one of {', '.join(sorted(programs))}")
        self.program = programs[self.bench]
        base = self.program.describe()  # its defaults: flags and knobs
        self.env_knobs = schema.env_knob_names(base)
        self.own_knobs = schema.runtime_only_knobs(base)
        flags = {name: f for name, f in base.flags.items() if name not in schema.SWEEP_FLAGS}
        self.name = _str(raw.get("name", f"{self.bench}{index}"), f"{self.where}.name")
        self.preset = _str(raw["preset"], f"{self.where}.preset") if "preset" in raw else ""
        self.repetitions = _int(raw.get("repetitions", settings["repetitions"]), f"{self.where}.repetitions", 1)
        self.timeout_s = _int(raw.get("timeout_s", settings["timeout_s"]), f"{self.where}.timeout_s", 1)
        self.timeline = _bool(raw.get("timeline", settings["timeline"]), f"{self.where}.timeline")
        self.threads_csv = _bool(raw.get("threads_csv", False), f"{self.where}.threads_csv")
        # P processes at once: independent copies (processes), or the ranks
        # of one data-parallel world for a program that says so (world_size).
        self.ranks = base.launch == "ranks"
        count_key, wrong_key = ("world_size", "processes") if self.ranks else ("processes", "world_size")
        if wrong_key in raw:
            ranked = sorted(b for b, p in programs.items() if p.describe().launch == "ranks")
            raise GridError(f"{self.where}.{wrong_key}: " + (
                f"{self.bench} starts the ranks of one data-parallel world: give world_size" if self.ranks else
                f"only for programs whose processes are the ranks of one world ({', '.join(ranked) or 'none'}); "
                f"{self.bench} starts independent copies: give processes"))
        self.processes = as_list(raw.get(count_key, 1), f"{self.where}.{count_key}", _processes)
        if "settings" in raw:
            self.settings = setting_flags(_names(raw["settings"], f"{self.where}.settings"), base,
                                          f"{self.where}.settings", self.bench)
        else:
            self.settings = setting_flags(settings["settings"], base, "settings", self.bench, inherited=True)
        self.axis_args, self.launch = {}, {}
        for key, value in raw.items():
            if key in STUDY_KEYS:
                continue
            if key in self.env_knobs:
                raise GridError(f"{self.where}.{key}: environment variables go in the study's env table "
                                "or in a runtimes entry")
            if key not in flags:
                allowed = sorted(STUDY_KEYS | set(flags))
                raise GridError(f"{self.where}.{key}: not a key of a study nor a flag of {self.bench}; "
                                f"expected one of: {', '.join(allowed)}")
            values = as_list(value, f"{self.where}.{key}", flag_value)
            if flags[key].axis:
                self.axis_args[key] = ",".join(values)
            else:
                self.launch[key] = values  # one process per value
        self.common_env = {}
        for key, value in _table(raw.get("env", {}), f"{self.where}.env").items():
            if key not in self.env_knobs or key in self.own_knobs:
                common = [k for k in self.env_knobs if k not in self.own_knobs]
                raise GridError(f"{self.where}.env.{key}: not a knob every runtime reads" + _runtime_hint(self.own_knobs, key)
                                + f"; expected one of: {', '.join(common)}")
            self.common_env[key] = as_list(value, f"{self.where}.env.{key}",
                                           lambda v, w, k=key: check_env_value(k, v, w))


def _processes(value, where):
    n = _int(value, where, 1)
    if n > max_processes():
        raise GridError(f"{where}: {n} processes: at most {max_processes()} (4 per CPU)")
    return n


def _runtime_hint(own_knobs, key, runtime=None):
    owner = own_knobs.get(key)
    if owner is None:
        return ""
    if runtime is None:
        return f' ({key} is read only by the {owner} runtime: set it in a runtimes entry with name = "{owner}")'
    return f" ({key} is read only by the {owner} runtime, so it is not varied under {runtime})"


def expand_study(raw, index, settings, programs):
    s = Study(raw, index, settings, programs)
    runtimes = raw.get("runtimes", [{"name": "gomp"}])
    if not isinstance(runtimes, list) or not runtimes:
        raise GridError(f'{s.where}.runtimes: expected a non-empty array of tables such as '
                        '[{name = "gomp"}, {name = "llvm", KMP_BLOCKTIME = [0, 200]}]')
    for r_index, raw_rt in enumerate(runtimes):
        where = f"{s.where}.runtimes[{r_index}]"
        entry = _table(raw_rt, where)
        if entry.get("name") not in schema.RUNTIMES:
            raise GridError(f"{where}.name: expected one of {', '.join(schema.RUNTIMES)}, got {entry.get('name')!r}")
        runtime = entry["name"]
        own = [k for k, rt in s.own_knobs.items() if rt == runtime and k in s.env_knobs]
        env_axes = dict(s.common_env)  # an entry's own list replaces the study's
        for key, value in entry.items():
            if key in RUNTIME_KEYS:
                continue
            if key in s.env_knobs and (key not in s.own_knobs or key in own):
                env_axes[key] = as_list(value, f"{where}.{key}", lambda v, w, k=key: check_env_value(k, v, w))
            else:
                allowed = sorted(RUNTIME_KEYS | {k for k in s.env_knobs if k not in s.own_knobs} | set(own))
                raise GridError(f"{where}.{key}: not a key of a {runtime} entry{_runtime_hint(s.own_knobs, key, runtime)}; "
                                f"expected one of: {', '.join(allowed)}")
        preset = _str(entry["preset"], f"{where}.preset") if "preset" in entry else s.preset
        timeline = _bool(entry.get("timeline", s.timeline), f"{where}.timeline")
        knobs = list(s.env_knobs)
        env_lists = [env_axes.get(k, [schema.UNSET]) for k in knobs]
        launch_names = list(s.launch)
        made = set()  # "cores" may equal a number also listed: each point once
        for combo in itertools.product(*env_lists, *(s.launch[n] for n in launch_names), s.processes):
            env = dict(zip(knobs, combo[:len(knobs)]))
            if "OMP_NUM_THREADS" in env:
                env["OMP_NUM_THREADS"] = resolve_threads(env["OMP_NUM_THREADS"], combo[-1])
            launch = dict(zip(launch_names, combo[len(knobs):-1]))
            point = Point(grid=settings["name"], study=s.name, where=where, bench=s.bench, program=s.program,
                          preset=preset, runtime=runtime, env=env, processes=combo[-1],
                          args=dict(s.axis_args, **launch), repetitions=s.repetitions, timeout_s=s.timeout_s,
                          timeline=timeline, threads_csv=s.threads_csv,
                          launch=tuple(n for n in launch_names if len(s.launch[n]) > 1), ranks=s.ranks,
                          settings=s.settings)
            if point.key not in made:
                made.add(point.key)
                yield point


def check_points(points):
    """Every point's flags, as the program itself judges them (--describe):
    bounds, choices, combinations that leave nothing to run. Asked once per
    distinct set of flags."""
    for point in points:
        try:
            point.description()
        except ThreadburnError as e:
            raise GridError(f"{point.where}: {e}") from None
