"""What a row measured (Workload) and under which setting (Setting): explicit
keys built from named columns.

A results file says which of its columns are environment knobs and which
are program flags in its `knob_layout` column ("env=A B;flags=x y", written
by records.ResultsFile from schema.Columns). Files of schema 3 and
older lack it: their layout is the one those versions wrote (knobs between
`runtime` and `repetition`, environment knobs in capitals), read here and
nowhere else (legacy_layout).

Setting: the OpenMP runtime, its environment, the CUDA host wait policy
and the preset label: what a user picks. Workload: everything else that was
asked for (the benchmark, every program flag, the processes or world size):
what was measured. Two rows compare only within one workload.
"""
from dataclasses import dataclass

from . import knobs

from .knobs import NOT_A_KNOB, UNSET  # noqa: F401  (keys.UNSET: the words rows carry)

# Program flags that are part of the setting (the CUDA host wait policy), not of the workload.
SETTING_FLAGS = ("cuda_sync",)


@dataclass(frozen=True)
class Layout:
    env: tuple
    flags: tuple
    params: tuple = ()    # a tune's --param names (columns param_<NAME>): part of the setting

    def text(self):
        text = f"env={' '.join(self.env)};flags={' '.join(self.flags)}"
        return text + (f";params={' '.join(self.params)}" if self.params else "")


def parse_layout(text):
    parts = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
    return Layout(tuple(parts.get("env", "").split()), tuple(parts.get("flags", "").split()),
                  tuple(parts.get("params", "").split()))


def legacy_layout(header):
    """Schema <= 3: knob columns sit between runtime and repetition; the
    environment knobs are the upper-case ones."""
    header = list(header)
    if "runtime" not in header or "repetition" not in header:
        return Layout((), ())
    knobs = header[header.index("runtime") + 1:header.index("repetition")]
    return Layout(tuple(k for k in knobs if k.isupper() and k not in NOT_A_KNOB),
                  tuple(k for k in knobs if not k.isupper() and k != "processes"))


def throughput(row):
    """(counter, unit) of a row's throughput, as the program that wrote it
    says: its throughput_counter/throughput_unit context (schema 5; counter
    "none": steps/s = 1000 / step_ms). Older rows carry no rule: then a filled
    samples_per_s is the counter (the programs that had one filled it)."""
    counter, unit = row.text("throughput_counter"), row.text("throughput_unit")
    if counter and unit:
        return (None if counter == "none" else counter), unit
    if row.has("samples_per_s"):
        return "samples_per_s", "samples/s"
    return None, "steps/s"


_cache = {}


def layout(row):
    """The layout of the file a row came from."""
    text = row.text("knob_layout")
    if text:
        if text not in _cache:
            _cache[text] = parse_layout(text)
        return _cache[text]
    names = row.columns()
    if names not in _cache:
        _cache[names] = legacy_layout(names)
    return _cache[names]


def env_knobs(row):
    return layout(row).env


def knob_columns(row):
    """Everything that was asked for: bench, runtime, env knobs, a tune's params, processes, flags."""
    lay = layout(row)
    return ("bench", "runtime") + lay.env + tuple(knobs.param_column(p) for p in lay.params) + ("processes",) + lay.flags


def _set(value):
    return value not in (UNSET, "", None)


@dataclass(frozen=True, order=True)
class Setting:
    runtime: str
    env: tuple            # ((knob, value), ...) for every knob column, "unset" included
    preset: str = ""
    cuda_sync: str = ""
    params: tuple = ()    # ((name, value), ...): a tune's --param values (the command's own knobs)

    @property
    def label(self):
        parts = [self.runtime or "?"] + [f"{k}={v}" for k, v in self.env if _set(v)]
        if len(parts) == 1:
            parts.append("(no env)")
        parts += [f"{{{k}}}={v}" for k, v in self.params]
        if self.cuda_sync not in ("", "auto"):
            parts.append(f"cuda_sync={self.cuda_sync}")
        if self.preset:
            parts.append(f"[{self.preset}]")
        return " ".join(parts)

    @property
    def is_default(self):
        """What a user gets without touching anything: libgomp, no OpenMP
        environment, the driver's own CUDA wait policy, no preset."""
        return (self.runtime == "gomp" and self.cuda_sync in ("", "auto") and self.preset in ("", "default")
                and not any(_set(v) for _, v in self.env))


@dataclass(frozen=True, order=True)
class Workload:
    benchmark: str
    flags: tuple          # ((flag, value), ...) except the setting's flags
    processes: str = "1"
    world_size: str = ""

    def label(self, varying=()):
        """The benchmark's name plus the flags named in `varying` (those
        that differ between workloads of one benchmark: launch axes such as
        sampler=on/off are not in the benchmark's name)."""
        import re
        name = re.sub(r"(/iterations:\d+)?/manual_time$", "", self.benchmark)
        extra = [f"{k}={v}" for k, v in self.flags if k in varying]
        if self.world_size:
            extra.append(f"world_size {self.world_size}")
        elif self.processes not in ("1", ""):
            extra.append(f"{self.processes} processes")
        return name + (f" ({', '.join(extra)})" if extra else "")


def setting_of(row):
    """The setting a row asked for. A tune's settings are named by the user
    (or tune): the name is the label's preset."""
    lay = layout(row)
    preset = row.study if row.is_tune else row.preset
    return Setting(row.runtime, tuple((k, row.text(k, UNSET)) for k in lay.env), preset,
                   row.text("cuda_sync"), tuple((p, row.text(knobs.param_column(p))) for p in lay.params))


def in_force(row):
    """What a run really ran, as the program or the probe reports it (the
    knob table's in-force keys, lib/knobs.py; the asked value of a knob the
    runtime does not report). With no OpenMP region run (one thread, or no
    OpenMP at all) nothing of an OpenMP runtime mattered: only the knobs
    other readers take (oneDNN's) count; with a team of one, the runtime
    too; with a team of 2 or more, the team and every knob's value in force.
    A runtime the process could not name is the one it was asked for."""
    # (with the knobs whose value lands in another column but whose read-back is reported:
    # THREADBURN_CUDA_SYNC's cuda_sync_in_force tells a tune's wait policies apart)
    table = [k for k in knobs.table() if k.is_column or k.in_force != knobs.NONE]
    own = tuple(row.text(k.in_force) if k.in_force != knobs.NONE else row.text(k.name) for k in table
                if k.reader not in ("openmp", "gomp", "llvm"))
    if row.has("regions") and (row.number("regions") or 0) == 0:
        return ("no region",) + own
    team = row.integer("max_team", 1) if row.has("max_team") else row.integer("omp_max_threads", 1)
    runtime = row.text("omp_runtime")
    if runtime in ("", "unknown"):  # the probe could not tell (a program exporting its own GOMP_parallel):
        # what it was asked for stands, runtime and knobs: two settings are never merged on a guess
        return (f"asked {row.runtime}", max(team, 1)) + tuple(row.text(k.name) for k in table)
    if team <= 1:
        return (runtime, 1) + own
    return (runtime, team) + tuple(
        row.text(k.in_force) if k.in_force != knobs.NONE else row.text(k.name) for k in table)


@dataclass(frozen=True)
class SettingId:
    """One setting's identity: what was asked (its runtime and variables,
    which compare and label it) with what the runtime reported in force
    attached (which tells duplicates apart)."""
    asked: Setting
    effective: tuple
    label = property(lambda self: self.asked.label)
    is_default = property(lambda self: self.asked.is_default)


def setting_id(row):
    """A row's SettingId. What a run ran also counts its command's own
    parameters (a tune's --param) and whether its copies were pinned to
    core sets: neither is an OpenMP setting the runtime reports."""
    asked = setting_of(row)
    return SettingId(asked, in_force(row) + (("pinned", row.has("pinned_cpus")),) + asked.params)


def workload_of(row, with_processes=True):
    lay = layout(row)
    flags = tuple((k, row.text(k)) for k in lay.flags if k not in SETTING_FLAGS)
    world = row.text("world_size")
    return Workload(row.benchmark, flags, row.text("processes", "1") if with_processes else "1", world)


def varying_flags(workloads):
    """Per benchmark name, the flags whose values differ among its workloads."""
    values = {}
    for w in workloads:
        for k, v in w.flags:
            values.setdefault((w.benchmark, k), set()).add(v)
    return {(b, k) for (b, k), vs in values.items() if len(vs) > 1}


def labels(workloads):
    """{Workload: label}, each label naming every flag that tells it from
    another workload of the same benchmark."""
    vary = varying_flags(workloads)
    return {w: w.label({k for b, k in vary if b == w.benchmark}) for w in workloads}


def env_label(row):
    """A row's setting as people read it, with its processes or world size."""
    label = setting_of(row).label
    if row.world_size is not None:
        label += f" world_size={row.world_size}"
    elif row.processes != 1:
        label += f" x{row.processes} procs"
    return label


def is_default_env(row):
    return setting_of(row).is_default


def phase_key(phase, key):
    """A campaign item's key in a phase: a race's point key as it is; a
    confirmation's (confirm) and a copy alone's (alone) prefixed, so that
    each phase's runs are runs of their own. The rows of every phase carry
    the race's point key (point_key): what ties them to their setting."""
    return key if phase == "race" else f"{phase}-{key}"
