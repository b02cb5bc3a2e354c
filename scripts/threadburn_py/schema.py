"""The results CSV: its columns, their order, and how values are written.

results/README.md documents every column; keep the two in step and bump
SCHEMA_VERSION whenever a column is added, removed or changes meaning, so that
compare.py refuses to mix files it cannot match.
"""
import math

SCHEMA_VERSION = "2"

# bench -> program <build>/bench/<bench>_bench ("runtime" is runtime_bench).
BENCHES = ("train_step", "optimizer_step", "runtime")
RUNTIMES = ("gomp", "llvm")
MODELS = ("mnist_adadelta", "cifar_sgd")
OPTIMIZERS = ("sgd", "adadelta")
DEVICES = ("cpu", "cuda")
KERNELS = ("serial", "omp", "aten", "tbb", "onednn")  # runtime_bench --kernel
LOADERS = ("torch", "tbb")                             # train_step_bench --loader
CUDA_SYNC = ("auto", "spin", "yield", "blocking_sync")  # train_step_bench --cuda_sync

# Environment knobs, in the order they appear in rows and repro lines.
ENV_KNOBS = ("OMP_NUM_THREADS", "KMP_BLOCKTIME", "GOMP_SPINCOUNT", "OMP_WAIT_POLICY",
             "OMP_PROC_BIND", "OMP_PLACES", "KMP_AFFINITY")
# Which runtime reads which runtime-specific knob. A knob listed here is only
# ever varied under that runtime: crossing it with the other one would only
# produce duplicate measurements labelled with a setting nobody read.
RUNTIME_ONLY_KNOBS = {"KMP_BLOCKTIME": "llvm", "KMP_AFFINITY": "llvm",
                      "GOMP_SPINCOUNT": "gomp"}
# Variables the sweep controls: removed from the inherited environment so a
# stray `export OMP_NUM_THREADS=...` in the user's shell cannot leak in.
CONTROLLED_ENV = ENV_KNOBS + ("LD_PRELOAD",)
UNSET = "unset"

# In-process knobs: benchmark arguments, one process runs all combinations.
# The first seven are schema 1's; the rest came with schema 2.
INPROC_KNOBS = ("model", "optimizer", "batch", "workers", "gap_ms", "preload", "params",
                "loader", "mkldnn", "pin_memory", "non_blocking", "item_sync", "kernel", "n")
# Knobs only a CUDA process reads: train_step_bench refuses them with
# --device=cpu, so they are passed to cuda processes only, and their columns
# stay empty in cpu rows.
CUDA_ONLY_INPROC = ("pin_memory", "non_blocking", "item_sync")
CUDA_ONLY_LAUNCH = ("cuda_sync",)

# The match key of compare.py: everything that was asked for.
KNOB_COLUMNS = (("bench", "runtime") + ENV_KNOBS + ("processes", "device", "cuda_sync")
                + INPROC_KNOBS + ("steps", "warmup", "extra_args"))
LABEL_COLUMNS = ("grid", "study", "preset")

# Counters the benchmarks report (numeric top-level keys of a GB JSON entry).
COUNTER_COLUMNS = ("step_ms", "step_ms_median", "step_ms_cv",
                   "data_ms", "forward_ms", "backward_ms", "optim_ms",
                   "sync_ms", "sync_cpu_ms", "gpu_ms",
                   "step_cpu_ms", "cores_busy", "residual_cpu_ms", "residual_cpu_ms_median",
                   "residual_cores", "tail_ms", "tail_ms_median",
                   "threads", "vol_ctxsw", "invol_ctxsw", "samples_per_s",
                   "sampler_cpu_ms", "sampler_period_us",
                   # runtime_bench only
                   "serial_ms", "backtoback_ms", "wakeup_ms", "kernel_threads",
                   "overhead_ms", "speedup")
# Counters that are also knobs: they fill the knob column when the name lacks it.
KNOB_COUNTERS = ("gap_ms", "batch", "workers", "params", "n")

# JSON context key -> CSV column (effective settings, then machine/libraries).
CONTEXT_COLUMNS = (
    ("threadburn_schema_version", "bench_schema_version"),
    ("omp_runtime", "omp_runtime"), ("omp_library", "omp_library"),
    ("omp_max_threads", "omp_max_threads"), ("omp_wait_policy", "omp_wait_policy"),
    ("gomp_spincount", "gomp_spincount"), ("kmp_blocktime_ms", "kmp_blocktime_ms"),
    ("aten_intra_op_threads", "aten_intra_op_threads"),
    ("aten_inter_op_threads", "aten_inter_op_threads"),
    ("ignored_knobs", "ignored_knobs"), ("device", "effective_device"),
    ("cuda_available", "cuda_available"),
) + tuple(("env_" + v, "env_" + v) for v in CONTROLLED_ENV) + (
    ("host_name", "host_name"), ("num_cpus", "num_cpus"),
    ("mhz_per_cpu", "mhz_per_cpu"), ("load_avg", "load_avg"),
    ("library_build_type", "library_build_type"), ("torch_version", "torch_version"),
    ("dnnl_version", "dnnl_version"), ("dnnl_cpu_runtime", "dnnl_cpu_runtime"),
    ("blas_library", "blas_library"), ("mkldnn_enabled", "mkldnn_enabled"),
    ("tbb_version", "tbb_version"), ("tbb_default_concurrency", "tbb_default_concurrency"),
    ("cuda_toolkit_compiled", "cuda_toolkit_compiled"),
    ("cuda_runtime_version", "cuda_runtime_version"),
    ("cuda_sync_requested", "cuda_sync_requested"),
    ("cuda_sync_in_force", "cuda_sync_in_force"),
    ("date", "bench_date"), ("executable", "executable"),
)
# Context keys GB always writes that carry nothing a row needs.
IGNORED_CONTEXT = {"caches", "cpu_scaling_enabled", "json_schema_version"}

RUN_COLUMNS = ("point_key", "run_rows", "seed", "order_index", "iterations",
               "real_time", "cpu_time", "time_unit", "started_at", "finished_at",
               "wall_s", "exit_code", "timeline_file", "threads_file")

COLUMNS = (("schema_version", "run_key", "status", "reason") + LABEL_COLUMNS
           + ("benchmark",) + KNOB_COLUMNS + ("repetition", "proc_index")
           + COUNTER_COLUMNS + ("extra_counters",)
           + tuple(col for _, col in CONTEXT_COLUMNS) + ("extra_context",)
           + RUN_COLUMNS + ("repro",))

STATUSES = ("ok", "skipped", "failed")

# Metrics compare.py and the summary talk about, and which way is better.
LOWER_IS_BETTER = {"step_ms": True, "residual_cpu_ms": True, "samples_per_s": False}


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


def is_default_env(row):
    """The point a user gets without touching anything: libgomp, no OpenMP env
    (and, on CUDA, the driver's own wait policy)."""
    return (row.get("runtime") == "gomp" and row.get("cuda_sync", "") in ("", "auto")
            and all(row.get(k, UNSET) == UNSET for k in ENV_KNOBS))


def env_label(row):
    """Short human name of a row's runtime + environment point."""
    parts = [row.get("runtime", "?")]
    for knob in ENV_KNOBS:
        value = row.get(knob, UNSET)
        if value not in (UNSET, ""):
            parts.append(f"{knob}={value}")
    if len(parts) == 1:
        parts.append("(no env)")
    if row.get("cuda_sync", "") not in ("", "auto"):
        parts.append(f"cuda_sync={row['cuda_sync']}")
    if row.get("processes", "1") not in ("1", ""):
        parts.append(f"x{row['processes']} procs")
    if row.get("preset"):
        parts.append(f"[{row['preset']}]")
    return " ".join(parts)
