"""The results CSV: its columns, their order, and how values are written.

One row per benchmark run (per copy, with processes > 1). The columns come
from the programs' own description where they can: one per program flag, one
per counter, one per context key the programs report; the rest are the
sweep's (labels, the environment point, status, timing, the repro line).
results/README.md documents them all; tests/python checks it does.
SCHEMA_VERSION is python/threadburn/schema_version.txt, the one number the
programs report too: bump it when a column is added, removed or changes
meaning, and compare refuses to mix versions.
"""
import math
import os

from .errors import ThreadburnError
from . import knobs as _knobs
from .knobs import NOT_A_KNOB, UNSET, param_column  # noqa: F401  (the CSV's words for them)

with open(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schema_version.txt")) as _f:
    SCHEMA_VERSION = _f.read().strip()

# Versions whose files are still read: 3 lacks only the columns 4 added
# (round, phase, knob_layout, metric_better); keys.legacy_layout reads its layout.
# 4 lacks the rules 5's rows carry (noise_cv, burn_threshold_cores,
# throughput_counter, throughput_unit: schema.rule_of, keys.throughput) and
# spells the flag column data-dir (5: data_dir, the programs' one spelling).
# 5 lacks what 6 added: the knob columns KMP_LIBRARY and ONEDNN_MAX_CPU_ISA and
# their context (env_*, kmp_library, dnnl_cpu_isa), the decision rule of the campaign (rule), the
# evidence of disturbance (host_other_cpu_ms, host_steal_ms) and the
# programs' loop rule (loop_counters); its verdicts are recomputed by the
# rule its verdict file recorded, or the defaults (analysis/verdicts.rule_for).
READABLE_VERSIONS = ("3", "4", "5", SCHEMA_VERSION)

RUNTIMES = ("gomp", "llvm")


def runtime_only_knobs(description):
    """{knob: the runtime that alone reads it}, as the program describes it.
    Such a knob is only varied under its runtime: crossed with the other one
    it would only add duplicate measurements labelled with a setting nobody
    read. (The programs report what the live runtime really read:
    ignored_knobs, overridden_knobs.)"""
    return description.runtime_only_knobs()
# Program flags the sweep sets itself (files, the barrier): no knob columns.
SWEEP_FLAGS = ("timeline_dir", "timeline_threads", "threads_csv", "barrier")

LEAD_COLUMNS = ("schema_version", "run_key", "status", "reason", "grid", "study", "preset",
                "benchmark", "bench", "runtime")
# Google Benchmark's own context keys worth a column (its JSON reporter's).
GB_CONTEXT = ("host_name", "num_cpus", "mhz_per_cpu", "cpu_scaling_enabled", "load_avg",
              "library_build_type", "date", "executable")
# The context columns that say which machine and which libraries a row ran on, with the
# words compare uses for them (it puts them first, and says which differ between two
# files): google/benchmark's host_name and num_cpus, the programs' and the probe's
# cpu_model, available_cpus (the CPUs of the process's affinity), the slot (the cgroup's
# CPU quota and cpuset, the effective CPUs, Slurm's CPUs per task: src/core/slot.h) and
# library versions. No column records the operating system's kernel. (column, label)
MACHINE_CONTEXT = (("host_name", "host"), ("cpu_model", "CPU model"), ("num_cpus", "CPUs"),
                   ("available_cpus", "CPUs available"), ("cpu_quota", "CPU quota"), ("cpuset", "cpuset"),
                   ("effective_cpus", "CPUs effective"), ("slurm_cpus_per_task", "Slurm CPUs per task"),
                   ("omp_library", "OpenMP library"),
                   ("torch_version", "torch"), ("dnnl_version", "oneDNN"), ("tbb_version", "TBB"),
                   ("blas_library", "BLAS"), ("cuda_runtime_version", "CUDA runtime"),
                   ("schema_version", "schema"))
RUN_COLUMNS = ("point_key", "run_rows", "seed", "order_index", "round", "phase", "iterations", "real_time", "cpu_time",
               "time_unit", "started_at", "finished_at", "wall_s", "exit_code", "overlap",
               "timeline_file", "threads_file", "slurm_job", "world_samples_per_s", "rank_spread", "host_other_cpu_ms",
               "host_steal_ms", "copy_start_ms", "pinned_cpus", "rule", "knob_layout")
STATUSES = ("ok", "skipped", "failed")
# Copies started together whose timed windows overlapped less than this
# share are flagged (exec_bench.mark_overlap) and left out of the
# oversubscription aggregate (results.oversubscription).
OVERLAP_MIN = 0.9
# Metrics compare and the summaries talk about, and which way is better.
LOWER_IS_BETTER = {"step_ms": True, "residual_cpu_ms": True, "samples_per_s": False}

# --- how a cell is read -------------------------------------------------------------
# Every column the Python side names, and how its cells read: records.Row has one
# attribute per column here, made from this table when it is imported (row.step_ms: the
# cell as a float; Row.step_ms: the column, its name and its reader). The kinds: text (a
# str, "" when empty), number (a float, None when empty or not a number), integer (an int,
# None when empty); a default stands in for an empty cell. A column read only by a name
# that comes from data (a program's loop_counters, its throughput counter, a file's knob
# layout) needs no line: Row.text / number / integer read any column by name.
TEXT, NUMBER, INTEGER = "text", "number", "integer"


def _kind(kind, names, default=None):
    return {name: (kind, default) for name in names.split()}


# The sweep's own columns (LEAD_COLUMNS, RUN_COLUMNS and the rest of Columns.all);
# tests/python/test_columns.py checks that every one has its kind.
SWEEP_KINDS = {
    **_kind(TEXT, "schema_version run_key status reason grid study preset benchmark bench runtime point_key "
                  "time_unit started_at finished_at timeline_file threads_file slurm_job pinned_cpus rule "
                  "knob_layout extra_counters extra_context repro"),
    **_kind(TEXT, "phase", "race"),  # files older than schema 4 name no phase: all race
    **_kind(INTEGER, "run_rows seed order_index round exit_code repetition iterations"),
    **_kind(INTEGER, "processes", 1),
    **_kind(INTEGER, "proc_index", 0),
    **_kind(NUMBER, "real_time cpu_time wall_s overlap world_samples_per_s rank_spread host_other_cpu_ms "
                    "host_steal_ms copy_start_ms"),
    # an in-run tune's block (engine/exec_inrun.py): its settle time left out, its measured time,
    # the units of work done in it and the time and CPU a unit took; what a unit is
    **_kind(NUMBER, "settle_ms block_ms unit_ms unit_cpu_ms"),
    **_kind(INTEGER, "units"),
    **_kind(TEXT, "progress"),
}
# The programs' and the probe's columns the Python side reads by name: theirs (--describe,
# results/README.md), named here once; test_columns checks each is a counter, flag or
# context key of the recorded programs or the probe, or a column of a committed results
# file (gpu_ms: cuda-h200.csv's, written before the programs called it gpu_span_ms).
PROGRAM_KINDS = {
    # counters
    **_kind(NUMBER, "step_ms step_ms_median step_cpu_ms step_cpu_main_ms step_cpu_omp_ms step_cpu_loader_ms "
                    "step_cpu_gloo_ms residual_cpu_ms residual_cpu_ms_median residual_cores residual_omp_ms "
                    "residual_tbb_ms residual_gloo_ms tail_ms tail_ms_median gap_slept_ms cores_busy threads "
                    "invol_ctxsw samples_per_s sampler_cpu_ms timed_start_s timed_end_s data_ms forward_ms "
                    "backward_ms sync_ms sync_cpu_ms allreduce_ms serial_ms backtoback_ms gpu_ms"),
    **_kind(INTEGER, "world_size"),  # a data-parallel rank's; None for copies
    **_kind(INTEGER, "rank", 0),
    # the probe's counters, and the user's figure (tune --metric)
    **_kind(NUMBER, "wall_ms cpu_ms cpu_omp_ms omp_between_regions_ms regions gaps gap_tail_ms_median metric "
                    "startup_ms startup_cpu_ms steady_ms steady_cpu_ms"),
    **_kind(INTEGER, "max_team"),
    # flags (the probe's: command, metric_better)
    **_kind(TEXT, "kernel model loader mkldnn sampler item_sync preload cuda_sync device command metric_better"),
    **_kind(INTEGER, "n gap_ms workers"),
    # context
    **_kind(TEXT, "omp_runtime omp_library ignored_knobs overridden_knobs knob_notes cuda_sync_in_force cuda_used "
                  "startup_ends "
                  "throughput_counter throughput_unit loop_counters host_name cpu_model num_cpus available_cpus "
                  "mhz_per_cpu blas_library library_build_type date"),
    # the slot (src/core/slot.h): cpu_quota in CPUs or "none"
    **_kind(TEXT, "cgroup_version cpu_quota cpu_period_us cpuset slurm_cpus_per_task"),
    **_kind(INTEGER, "omp_max_threads effective_cpus"),
    **_kind(NUMBER, "noise_cv burn_threshold_cores"),
}
# The other CSVs threadburn writes beside the results and `threadburn findings` reads:
# bench/overheads.py's (overheads.csv) and tests/python/test_fleet_ddp.py's (fleet_ddp.csv,
# with the programs' counters besides).
OTHER_KINDS = {
    **_kind(TEXT, "figure unit runs link launcher"),
    **_kind(NUMBER, "median min max"),
}


def column_kinds():
    """{column: (kind, default)} of every column the Python side names: the
    tables above, each knob column of the knob table and each knob's
    read-back (its in-force context key) not typed above, as text."""
    knob_columns = {k.name: (TEXT, None) for k in _knobs.table() if k.is_column}
    in_force = {key: (TEXT, None) for key, _ in _knobs.in_force_columns()}
    return {**in_force, **SWEEP_KINDS, **PROGRAM_KINDS, **OTHER_KINDS, **knob_columns}


def env_knob_names(description):
    return [k for k in description.env_knobs if k not in NOT_A_KNOB]


def knob_flags(descriptions):
    """Program flags that are knobs, in first-seen order over the programs."""
    out = []
    for d in descriptions:
        for name in d.flags:
            if name not in SWEEP_FLAGS and name not in out:
                out.append(name)
    return out


def knob_columns(env_knobs, params, flags):
    """Everything a row asked for, in the file's order: bench, runtime, the
    environment knobs, a tune's --param columns, processes, the program flags."""
    return ("bench", "runtime") + tuple(env_knobs) + tuple(param_column(p) for p in params) + ("processes",) + tuple(flags)


def legacy_knob_columns(header):
    """The knob columns of a header of schema 3 or older (no knob_layout):
    those between runtime and repetition, processes left out; () for a
    header without them."""
    header = list(header)
    if "runtime" not in header or "repetition" not in header:
        return ()
    return tuple(k for k in header[header.index("runtime") + 1:header.index("repetition")] if k != "processes")


class Columns:
    """The header of a results CSV: for these programs' descriptions, or
    (from_parts) for rows of another source, such as `threadburn tune`'s
    runs of a user's command under the preload probe."""

    def __init__(self, descriptions):
        descriptions = list(descriptions)
        counters, context = [], list(GB_CONTEXT)
        for d in descriptions:
            counters += [c for c in d.counter_names() if c not in counters]
            context += [k for k in d.context if k not in context]
        self._lay_out(env_knob_names(descriptions[0]), knob_flags(descriptions), counters, context)

    @classmethod
    def from_parts(cls, env_knobs, flags, counters, context, params=()):
        self = cls.__new__(cls)
        self._lay_out(env_knobs, flags, counters, context, params)
        return self

    def _lay_out(self, env_knobs, flags, counters, context, params=()):
        self.env_knobs = tuple(k for k in env_knobs if k not in NOT_A_KNOB)
        self.params = tuple(params)  # a tune's --param names: one column each, param_<NAME>
        self.flags = tuple(flags)
        self.counters = tuple(counters)
        self.context = tuple(context)
        self.param_columns = tuple(param_column(p) for p in self.params)
        self.knobs = knob_columns(self.env_knobs, self.params, self.flags)
        self.all = (LEAD_COLUMNS + self.env_knobs + self.param_columns + ("processes",) + self.flags
                    + ("repetition", "proc_index") + self.counters + ("extra_counters",)
                    + self.context + ("extra_context",) + RUN_COLUMNS + ("repro",))
        clash = {c for c in self.all if self.all.count(c) > 1}
        if clash:  # the programs contradict each other: one line, as every error (errors.py)
            raise ThreadburnError(f"column names used twice: {', '.join(sorted(clash))} (a flag, counter or "
                                  "context key of the programs shares a name with another)")

    def layout_text(self):
        """The knob_layout cell of every row: which columns are environment
        knobs, which program flags, and (a tune with --param) which of the
        command's own parameters (keys.py reads it)."""
        text = f"env={' '.join(self.env_knobs)};flags={' '.join(self.flags)}"
        return text + (f";params={' '.join(self.params)}" if self.params else "")

    def header(self):
        return ",".join(self.all) + "\n"  # column names never need quoting


def fmt_value(value):
    """One cell: integral floats lose their '.0', text loses line breaks
    (a row must stay one physical line: resume relies on it)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
            return str(int(value))
        return repr(value)
    if isinstance(value, (list, tuple)):
        return " ".join(fmt_value(v) for v in value)
    return str(value).replace("\r", " ").replace("\n", " | ")


def to_float(text):
    """A numeric cell, or None when empty or not a number."""
    if text is None or text == "":
        return None
    try:
        return float(text)
    except ValueError:
        return None


def rule_of(rows, column):
    """A rule the rows carry as a context column (records.Row.noise_cv,
    burn_threshold_cores: the programs' and the probe's own, src/core/rules.h),
    as a float; None when the rows predate it (schema 4 and older)."""
    for row in rows:
        value = column(row)
        if value is not None:
            return value
    return None
