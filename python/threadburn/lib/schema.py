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
# cpu_model, available_cpus (the CPUs of the process's affinity) and library versions.
# No column records the operating system's kernel. (column, label)
MACHINE_CONTEXT = (("host_name", "host"), ("cpu_model", "CPU model"), ("num_cpus", "CPUs"),
                   ("available_cpus", "CPUs available"), ("omp_library", "OpenMP library"),
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
        self.knobs = ("bench", "runtime") + self.env_knobs + self.param_columns + ("processes",) + self.flags
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


def rule_of(rows, name):
    """A rule the rows carry as a context column (noise_cv, burn_threshold_cores:
    the programs' and the probe's own, src/core/rules.h), as a float; None
    when the rows predate it (schema 4 and older)."""
    for row in rows:
        value = row.number(name)
        if value is not None:
            return value
    return None
