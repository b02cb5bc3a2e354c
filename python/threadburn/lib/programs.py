"""The benchmark programs as they describe themselves.

`<program> [flags] --describe` prints JSON: the program, its family (first
component of its benchmark names), the schema version, every flag (kind,
default, bounds or choices, whether it is a benchmark axis), the axes and
skip rules in force for those flags, the benchmarks it would run (name and
the value of every axis), every counter it reports (name, unit, meaning),
the environment knobs it reports (the knob table it was built with, every
column: knobs.py), and the context (settings in force). Bad
flags make it exit 2 with one line, as a real run would, before anything
runs. The Python side asks this instead of re-deriving names, loop order,
skipped combinations, defaults or bounds.
"""
import json
import os
import subprocess
from dataclasses import dataclass, field

from .errors import ThreadburnError
from .paths import benchmark_programs

DESCRIBE_TIMEOUT_S = 120


@dataclass
class Flag:
    name: str
    kind: str
    default: str
    value: str  # in force for the flags --describe was given
    help: str
    axis: bool
    min: object = None
    max: object = None
    choices: tuple = ()

    @property
    def is_list(self):
        return self.kind in ("int_list", "choice_list")


@dataclass
class Benchmark:
    name: str
    args: dict  # axis -> value (strings)


@dataclass
class Description:
    program: str
    family: str
    schema_version: str
    flags: dict                  # name -> Flag, in the program's order
    benchmarks: list             # [Benchmark] in run order
    counters: list               # [{"name", "unit", "help"}]
    knobs: list                  # the knob table as built in: [{column: cell}] (lib/knobs.py's COLUMNS)
    axes: list = field(default_factory=list)
    skip_rules: list = field(default_factory=list)
    context: dict = field(default_factory=dict)
    # How a sweep starts P processes of it: "copies" (independent, meeting at
    # --barrier) or "ranks" (one data-parallel world; bench/program.h).
    launch: str = "copies"
    # The rules the program's outputs are read by (src/core/rules.h): noise_cv,
    # burn_threshold_cores, tail_smooth_ms, skipped_prefix.
    rules: dict = field(default_factory=dict)
    # [{"name", "library", "own_knobs"}]: the runtimes, what the programs call
    # them (omp_runtime), the knobs only each reads (src/runtime/runtime.cc).
    runtimes: list = field(default_factory=list)
    # {"counter", "unit"}: the throughput counter ("" = 1000 / step_ms) and unit.
    throughput: dict = field(default_factory=dict)
    # A JSON entry's label "timeline=FILE" names its timeline file in --timeline_dir.
    timeline_label_prefix: str = "timeline="

    @property
    def env_knobs(self):
        """The environment variables it reports, in the table's order."""
        return [k["name"] for k in self.knobs]

    @classmethod
    def from_json(cls, doc):
        flags = {}
        for f in doc["flags"]:
            flags[f["name"]] = Flag(f["name"], f["kind"], f["default"], f.get("value", f["default"]), f["help"], f["axis"],
                                    f.get("min"), f.get("max"), tuple(f.get("choices", ())))
        return cls(doc["program"], doc["family"], str(doc["schema_version"]), flags,
                   [Benchmark(b["name"], dict(b["args"])) for b in doc["benchmarks"]],
                   list(doc["counters"]), list(doc["knobs"]), list(doc.get("axes", [])),
                   list(doc.get("skip_rules", [])), dict(doc.get("context", {})), doc.get("launch", "copies"),
                   dict(doc["rules"]), list(doc["runtimes"]), dict(doc["throughput"]), doc["timeline_label_prefix"])

    def counter_names(self):
        return [c["name"] for c in self.counters]

    def runtime_library(self, runtime):
        """What the program reports as omp_runtime under this runtime name."""
        return next(r["library"] for r in self.runtimes if r["name"] == runtime)

    def runtime_only_knobs(self):
        """{knob: the one runtime that reads it}."""
        return {k: r["name"] for r in self.runtimes for k in r["own_knobs"]}

    def is_skip(self, message):
        """Whether a benchmark's error message says it was skipped, not failed."""
        return message.startswith(self.rules["skipped_prefix"])

    def timeline_file(self, entry):
        """The timeline file an entry of its JSON names (its label), or None."""
        label = str(entry.get("label", ""))
        return label[len(self.timeline_label_prefix):] if label.startswith(self.timeline_label_prefix) else None


def last_line(text):
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


class Program:
    """One benchmark program of a build; describe() results are cached per
    (args, environment), since every point of a sweep asks."""

    def __init__(self, bench, path):
        self.bench = bench
        self.path = path
        self._cache = {}
        self._docs = {}  # key -> the JSON it printed, for answers()

    @staticmethod
    def _key(args, env):
        return (tuple(args), tuple(sorted((env or {}).items())))

    def describe(self, args=(), env=None):
        key = self._key(args, env)
        if key not in self._cache:
            self._cache[key] = self._describe(list(args), env, key)
        return self._cache[key]

    def answers(self):
        """[{"args", "env", "doc"}]: what it answered so far, for another process
        of the same build to start from (remember) instead of asking again: each
        --describe loads the program's libraries (libtorch: ~1 s of CPU)."""
        return [{"args": list(args), "env": dict(env), "doc": doc} for (args, env), doc in self._docs.items()]

    def remember(self, answers):
        for a in answers:
            key = self._key(a["args"], a["env"])
            self._docs[key] = a["doc"]
            self._cache[key] = Description.from_json(a["doc"])

    def _describe(self, args, env, key):
        try:
            p = subprocess.run([self.path, *args, "--describe"], capture_output=True, text=True,
                               timeout=DESCRIBE_TIMEOUT_S, env=env, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise ThreadburnError(f"{self.path}: cannot ask it to describe itself: {e}") from None
        if p.returncode != 0:
            # The program's own one-line reason, e.g. "--batch: expected ...".
            why = last_line(p.stderr).split(": error: ", 1)[-1] or f"exit code {p.returncode}"
            raise ThreadburnError(f"{os.path.basename(self.path)} refuses {' '.join(args) or 'its defaults'}: {why}")
        try:
            doc = json.loads(p.stdout)
            described = Description.from_json(doc)
            self._docs[key] = doc
            return described
        except (ValueError, KeyError, TypeError) as e:
            raise ThreadburnError(f"{self.path}: --describe printed no usable JSON ({e}); "
                                  "is this a threadburn program of this version?") from None


def programs(build=None, answers=None):
    """{bench name: Program} of the build; answers ({bench: Program.answers()},
    from another process of the same build) are taken as asked already."""
    progs = {bench: Program(bench, path) for bench, path in benchmark_programs(build).items()}
    for bench, given in (answers or {}).items():
        if bench in progs:
            progs[bench].remember(given)
    return progs
