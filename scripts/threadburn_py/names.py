"""Benchmark names: the programs' naming contract, both ways.

The sweep needs the names before a process runs (a process that dies before
reporting still gets one failed row per benchmark it should have run, under
the name the program would have used) and reads the in-process knobs back
from the names the program reported. Both directions live here, next to each
other, so they cannot drift apart; results/README.md documents the format:

  train_step[_cuda]/<model>/batch:B/workers:W/gap_ms:G/preload:P/tbb_loader:T/mkldnn:M
      [/pin_memory:0/non_blocking:0/item_sync:0  (CUDA only)]/iterations:S/manual_time
  optimizer_step[_cuda]/<optimizer>/params:N/gap_ms:G/iterations:S/manual_time
  runtime_region/<kernel>/n:N/gap_ms:G/iterations:S/manual_time

"iterations:S" is Google Benchmark's own component (the programs fix the
iteration count to --steps).
"""
import itertools

from . import schema

# Family (first name component, without _cuda) -> the knob its second component holds.
FAMILY_KNOB = {"train_step": "model", "optimizer_step": "optimizer", "runtime_region": "kernel"}
BENCH_FAMILY = {"train_step": "train_step", "optimizer_step": "optimizer_step",
                "runtime": "runtime_region"}
# Name components that are knobs under another spelling.
_RENAMED = {"tbb_loader": ("loader", {"0": "torch", "1": "tbb"})}

# In-process knobs in the order each program loops over them (outermost
# first), which is the order it registers, and reports, its benchmarks.
LOOP_ORDER = {
    "train_step": ("model", "preload", "batch", "workers", "loader", "mkldnn",
                   "pin_memory", "non_blocking", "item_sync", "gap_ms"),
    "optimizer_step": ("optimizer", "params", "gap_ms"),
    "runtime": ("kernel", "n", "gap_ms"),
}


def train_combo_runs(knobs):
    """Whether train_step_bench registers this combination: preloaded data
    has no loader workers, and the TBB loader needs workers and no preload
    (train_step_bench.cc skips the others without a row)."""
    workers, preload = knobs.get("workers", "0"), knobs.get("preload", "0")
    if preload == "1" and workers != "0":
        return False
    return not (knobs.get("loader") == "tbb" and (preload == "1" or workers == "0"))


def benchmark_name(bench, device, knobs, steps):
    """The name the program reports for one combination of in-process knobs."""
    suffix = "_cuda" if device == "cuda" else ""
    if bench == "train_step":
        name = (f"train_step{suffix}/{knobs['model']}/batch:{knobs['batch']}"
                f"/workers:{knobs['workers']}/gap_ms:{knobs['gap_ms']}"
                f"/preload:{knobs['preload']}"
                f"/tbb_loader:{1 if knobs['loader'] == 'tbb' else 0}/mkldnn:{knobs['mkldnn']}")
        if device == "cuda":
            name += (f"/pin_memory:{knobs['pin_memory']}/non_blocking:{knobs['non_blocking']}"
                     f"/item_sync:{knobs['item_sync']}")
    elif bench == "optimizer_step":
        name = (f"optimizer_step{suffix}/{knobs['optimizer']}/params:{knobs['params']}"
                f"/gap_ms:{knobs['gap_ms']}")
    else:
        name = f"runtime_region/{knobs['kernel']}/n:{knobs['n']}/gap_ms:{knobs['gap_ms']}"
    return f"{name}/iterations:{steps}/manual_time"


def expected_benchmarks(bench, device, inproc, steps):
    """[(name, knobs)] of every benchmark the program runs for these axes,
    in the program's own order."""
    order = [k for k in LOOP_ORDER[bench] if k in inproc]
    out = []
    for combo in itertools.product(*(inproc[k] for k in order)):
        knobs = dict(zip(order, combo))
        if bench == "train_step" and not train_combo_runs(knobs):
            continue
        out.append((benchmark_name(bench, device, knobs, steps), knobs))
    return out


def parse_benchmark_name(name):
    """In-process knobs encoded in a benchmark name, e.g.
    train_step/mnist_adadelta/batch:64/workers:2/gap_ms:100/preload:0/tbb_loader:1
    /mkldnn:1/iterations:5/manual_time -> model, batch, workers, gap_ms,
    preload, loader = tbb, mkldnn. Components that are no knob (GB's
    iterations:N, anything a newer program adds) are ignored."""
    parts = name.split("/")
    knobs = {}
    family = parts[0].removesuffix("_cuda")
    if len(parts) > 1 and ":" not in parts[1] and family in FAMILY_KNOB:
        knobs[FAMILY_KNOB[family]] = parts[1]
    for part in parts[1:]:
        key, sep, value = part.partition(":")
        if not sep:
            continue
        if key in _RENAMED:
            column, values = _RENAMED[key]
            if value in values:
                knobs[column] = values[value]
        elif key in schema.INPROC_KNOBS:
            knobs[key] = value
    return knobs
