"""What a row measured (Workload) and under which setting (Setting): explicit
keys built from named columns.

A results file says which of its columns are environment knobs and which
are program flags in its `knob_layout` column ("env=A B;flags=x y", written
by records.ResultsFile from schema.Columns), and which of the flags are
settings, each with its baseline (";settings=preload:0 workers:0", written
per study by the sweep: grid.Point.layout_text). Files of schema 3 and
older lack the column: their layout is the one those versions wrote (knobs
between `runtime` and `repetition`, environment knobs in capitals), read
here and nowhere else (legacy_layout, from the columns Row.legacy_knob_columns
finds where those versions put them). Files without the settings field
have one setting flag, the CUDA host wait policy (LEGACY_SETTINGS).

Setting: the OpenMP runtime, its environment, the setting flags (how the
same iteration is fed and waited for: preload, loader workers, pinned
memory, the CUDA host wait policy, ...) and the preset label: what a user
picks. Workload: everything else that was asked for (the benchmark with its
setting flags' components taken out of its name, every other program flag,
the processes or world size): what was measured. Two rows compare only
within one workload (docs/design.md, Setting and workload).
"""
from dataclasses import dataclass, field, replace

from . import knobs

from .knobs import NOT_A_KNOB, UNSET  # noqa: F401  (keys.UNSET: the words rows carry)

# The program flags a grid may make settings: each changes how the same
# iteration is fed or waited for, not the work it does (a batch size, a
# model or a gap would change what an iteration's time and CPU mean).
FEED_FLAGS = ("preload", "workers", "loader", "pin_memory", "non_blocking", "cuda_sync", "mkldnn")
# The setting flags of a grid that names none (and of files that record
# none): the CUDA host wait policy, the driver's "auto" its baseline.
DEFAULT_SETTINGS = ("cuda_sync",)
LEGACY_SETTINGS = (("cuda_sync", "auto"),)


@dataclass(frozen=True)
class Layout:
    env: tuple
    flags: tuple
    params: tuple = ()    # a tune's --param names (columns param_<NAME>): part of the setting
    settings: tuple = None  # ((flag, baseline), ...): the flags that are settings; None: not recorded

    def text(self):
        text = f"env={' '.join(self.env)};flags={' '.join(self.flags)}"
        text += f";params={' '.join(self.params)}" if self.params else ""
        if self.settings is not None:
            text += ";settings=" + " ".join(f"{k}:{v}" for k, v in self.settings)
        return text

    @property
    def setting_flags(self):
        """((flag, baseline), ...) of the flags that are settings: as
        recorded, else the one every older file had (LEGACY_SETTINGS)."""
        return LEGACY_SETTINGS if self.settings is None else self.settings


def parse_layout(text):
    parts = dict(p.split("=", 1) for p in text.split(";") if "=" in p)
    settings = None
    if "settings" in parts:
        settings = tuple(tuple(item.split(":", 1)) for item in parts["settings"].split() if ":" in item)
    return Layout(tuple(parts.get("env", "").split()), tuple(parts.get("flags", "").split()),
                  tuple(parts.get("params", "").split()), settings)


def legacy_layout(knobs):
    """Schema <= 3: of the knob columns (records.Row.legacy_knob_columns),
    the environment knobs are the upper-case ones."""
    return Layout(tuple(k for k in knobs if k.isupper() and k not in NOT_A_KNOB),
                  tuple(k for k in knobs if not k.isupper()))


_cache = {}


def layout(row):
    """The layout of the file a row came from."""
    text = row.knob_layout
    if text:
        if text not in _cache:
            _cache[text] = parse_layout(text)
        return _cache[text]
    names = row.columns()
    if names not in _cache:
        _cache[names] = legacy_layout(row.legacy_knob_columns())
    return _cache[names]


def env_knobs(row):
    return layout(row).env


def _set(value):
    return value not in (UNSET, "", None)


@dataclass(frozen=True, order=True)
class Setting:
    runtime: str
    env: tuple            # ((knob, value), ...) for every knob column, "unset" included
    preset: str = ""
    flags: tuple = ()     # ((flag, value), ...): the setting flags' values (Layout.setting_flags)
    params: tuple = ()    # ((name, value), ...): a tune's --param values (the command's own knobs)
    baselines: tuple = field(default=(), compare=False)  # ((flag, baseline), ...) of those flags

    def flags_to_set(self, overrides=None):
        """((flag, value), ...) of the setting flags away from their baseline
        (the program's default, or overrides' {flag: value}): what a user of
        the baseline sets. A row without a flag's column ran the program's
        default."""
        defaults = dict(self.baselines)
        base = dict(defaults, **(overrides or {}))
        values = ((k, v or defaults.get(k, "")) for k, v in self.flags)
        return tuple((k, v) for k, v in values if v and v != base.get(k, ""))

    changed_flags = property(flags_to_set)

    @property
    def label(self):
        parts = [self.runtime or "?"] + [f"{k}={v}" for k, v in self.env if _set(v)]
        if len(parts) == 1:
            parts.append("(no env)")
        parts += [f"{{{k}}}={v}" for k, v in self.params]
        parts += [f"{k}={v}" for k, v in self.changed_flags]
        if self.preset:
            parts.append(f"[{self.preset}]")
        return " ".join(parts)

    def is_baseline(self, overrides=None):
        """What a user gets without touching anything: libgomp, no OpenMP
        environment, every setting flag at its baseline (the program's
        default: the driver's own CUDA wait policy, no preloading, ...), no
        preset. overrides ({flag: value}) moves a flag's baseline (threadburn
        verdict --baseline)."""
        return (self.runtime == "gomp" and self.preset in ("", "default") and not any(_set(v) for _, v in self.env)
                and not self.flags_to_set(overrides))

    is_default = property(is_baseline)

    def baseline_text(self, overrides=None):
        """The baseline this setting is compared with, in words."""
        base = dict(self.baselines, **(overrides or {}))
        return ", ".join(["gomp", "no env"] + [f"{k}={base[k]}" for k, _ in self.flags if k in base])


@dataclass(frozen=True, order=True)
class Workload:
    benchmark: str        # the benchmark's name without its setting flags' components
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
    pairs = lay.setting_flags
    return Setting(row.runtime, tuple((k, row.text(k, UNSET)) for k in lay.env), preset,
                   tuple((k, row.text(k)) for k, _ in pairs),
                   tuple((p, row.text(knobs.param_column(p))) for p in lay.params), pairs)


def _knob_in_force(row, knob):
    """A knob's value in force: its read-back where the row has one, else the
    value asked (a knob the runtime does not report, or a file written before
    its read-back was added: OMP_PROC_BIND and OMP_PLACES until omp_proc_bind
    and omp_places)."""
    return row.text(knob.in_force) if knob.in_force != knobs.NONE and row.has(knob.in_force) else row.text(knob.name)


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
    own = tuple(_knob_in_force(row, k) for k in table if k.reader not in knobs.OPENMP_READERS)
    if row.regions == 0:
        return ("no region",) + own
    team = row.max_team if row.max_team is not None else row.omp_max_threads
    team = 1 if team is None else team
    runtime = row.omp_runtime
    if runtime in ("", "unknown"):  # the probe could not tell (a program exporting its own GOMP_parallel):
        # what it was asked for stands, runtime and knobs: two settings are never merged on a guess
        return (f"asked {row.runtime}", max(team, 1)) + tuple(row.text(k.name) for k in table)
    if team <= 1:
        return (runtime, 1) + own
    return (runtime, team) + tuple(_knob_in_force(row, k) for k in table)


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
    return SettingId(asked, in_force(row) + (("pinned", bool(row.pinned_cpus)),) + asked.params)


def strip_settings(benchmark, values):
    """A benchmark's name without the components of its setting flags
    (`workers:2` in train_step/mnist_adadelta/preload:0/batch:64/workers:2/...):
    the one place a setting's part of a name is taken out, so that the
    settings of one workload share its name. values: ((flag, value), ...)."""
    drop = {f"{k}:{v}" for k, v in values if v != ""}
    return "/".join(part for part in benchmark.split("/") if part not in drop)


def workload_of(row, with_processes=True):
    lay = layout(row)
    setting_flags = {k for k, _ in lay.setting_flags}
    flags = tuple((k, row.text(k)) for k in lay.flags if k not in setting_flags)
    world = "" if row.world_size is None else str(row.world_size)
    name = strip_settings(row.benchmark, tuple((k, row.text(k)) for k in setting_flags))
    return Workload(name, flags, str(row.processes) if with_processes else "1", world)


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


def env_label(row, flags=True):
    """A row's setting as people read it, with its processes or world size;
    flags=False leaves out its setting flags (a table with their own columns)."""
    s = setting_of(row)
    label = (s if flags else replace(s, flags=())).label
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
