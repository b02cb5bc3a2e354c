#!/usr/bin/python3
"""NVML's busy share's known answer (scripts/gpu_check.sh, step nvml):

    half_busy.py [--seconds 5] [--busy-ms 200] [--idle-ms 200] [--size 4096] [--stand-in --samples-out FILE]

Keeps the GPU busy about half of a window and idle the other half: phases
of --busy-ms of back-to-back matrix products (as many as the measured time
of one says fit, then a synchronize) and --idle-ms of time.sleep on the
host, for --seconds. Prints the program's own account, on its own clocks:

    half_busy: window_start_mono_ms=.. window_end_mono_ms=.. window_ms=.. busy_ms=..
               phases=.. first_cuda_mono_ms=..

busy_ms is the sum of the busy phases' wall times (each from its first
launch to the synchronize after its last kernel: the GPU ran a kernel all
that time but the first launch's latency); the window's times are
CLOCK_MONOTONIC (time.monotonic), the probe's clock, so a check can place
NVML's samples in it; first_cuda_mono_ms is the time of the first CUDA call
(before it the GPU had nothing of this program's to run).

--stand-in: no GPU, no PyTorch. The phases are sleeps on planned times, and
the program writes what a GPU would have shown into --samples-out, NVML
samples every 100 ms from the process's start (the busy share of each
period, from the planned phases), in the format of the stand-in NVML
(tests/cpp/fake_cuda/fake_nvml.c), sets FAKE_NVML_SAMPLES to it, then loads
the stand-in driver (libcuda.so.1 through LD_LIBRARY_PATH): the probe then
starts NVML and reads those samples. That tests the check's placing of
samples on the program's clock, not a GPU.
"""
import argparse
import ctypes
import os
import sys
import time

STAND_IN_PERIOD_MS = 100


def mono_ms():
    return time.monotonic() * 1e3


def on_gpu(a):
    import torch
    if not torch.cuda.is_available():
        print(f"half_busy: SKIP: CUDA is not available to this PyTorch ({torch.__version__})")
        sys.exit(77)
    first_cuda = mono_ms()
    x = torch.randn(a.size, a.size, device="cuda") / a.size ** 0.5
    y = torch.empty_like(x)
    torch.matmul(x, x, out=y)
    torch.cuda.synchronize()
    t0, n = time.perf_counter(), 10
    for _ in range(n):
        torch.matmul(x, x, out=y)
    torch.cuda.synchronize()
    k = max(1, round(a.busy_ms / ((time.perf_counter() - t0) * 1e3 / n)))
    time.sleep(a.idle_ms / 1e3)  # the calibration's work out of the window's first sample period
    busy, phases, start = 0.0, 0, mono_ms()
    while mono_ms() - start < a.seconds * 1e3:
        p0 = time.perf_counter()
        for _ in range(k):
            torch.matmul(x, x, out=y)
        torch.cuda.synchronize()
        busy += (time.perf_counter() - p0) * 1e3
        phases += 1
        time.sleep(a.idle_ms / 1e3)
    return start, mono_ms(), busy, phases, first_cuda


def process_start_mono_ms():
    """The process's start on CLOCK_MONOTONIC (/proc/self/stat counts clock
    ticks since boot, CLOCK_BOOTTIME: the stand-in NVML's origin)."""
    with open("/proc/self/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    start_boot_ms = int(fields[19]) * 1e3 / os.sysconf("SC_CLK_TCK")
    return mono_ms() - (time.clock_gettime(time.CLOCK_BOOTTIME) * 1e3 - start_boot_ms)


def write_samples(path, busy_spans, origin, until):
    """Samples every STAND_IN_PERIOD_MS from the process's start: each period's
    share of the busy spans (monotonic ms), as percent."""
    with open(path, "w") as f:
        f.write("# device,t_ms,gpu%,memory%: what the GPU would have shown (half_busy.py --stand-in)\n")
        t = STAND_IN_PERIOD_MS
        while origin + t <= until:
            lo, hi = origin + t - STAND_IN_PERIOD_MS, origin + t
            inside = sum(max(0.0, min(hi, e) - max(lo, s)) for s, e in busy_spans)
            f.write(f"0,{t},{round(100 * inside / STAND_IN_PERIOD_MS)},0\n")
            t += STAND_IN_PERIOD_MS


def stand_in(a):
    if not a.samples_out:
        sys.exit("half_busy: --stand-in needs --samples-out FILE")
    origin = process_start_mono_ms()
    start = mono_ms() + 300  # room to load the driver and for the probe to start NVML
    spans, t = [], start
    while t - start < a.seconds * 1e3:
        spans.append((t, t + a.busy_ms))
        t += a.busy_ms + a.idle_ms
    write_samples(a.samples_out, spans, origin, t + 1000)
    os.environ["FAKE_NVML_SAMPLES"] = os.path.abspath(a.samples_out)  # read at nvmlInit, after this
    first_cuda = mono_ms()
    cuda = ctypes.CDLL("libcuda.so.1")
    if cuda.cuInit(0) != 0:
        print("half_busy: SKIP: the stand-in driver has no device")
        sys.exit(77)
    for s, e in spans:
        for until in (e, e + a.idle_ms):  # the busy phase, then the idle one, on planned times
            time.sleep(max(0.0, until - mono_ms()) / 1e3)
    return start, t, sum(e - s for s, e in spans), len(spans), first_cuda


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="the alternating window (default 5 s)")
    ap.add_argument("--busy-ms", type=float, default=200.0)
    ap.add_argument("--idle-ms", type=float, default=200.0)
    ap.add_argument("--size", type=int, default=4096, help="the square matrices' side (default 4096)")
    ap.add_argument("--stand-in", action="store_true", help="the stand-in driver and NVML, no GPU (see above)")
    ap.add_argument("--samples-out", help="--stand-in: the samples file to write")
    a = ap.parse_args()
    start, end, busy, phases, first_cuda = stand_in(a) if a.stand_in else on_gpu(a)
    print(f"half_busy: window_start_mono_ms={start:.3f} window_end_mono_ms={end:.3f} window_ms={end - start:.3f} "
          f"busy_ms={busy:.3f} phases={phases} first_cuda_mono_ms={first_cuda:.3f}", flush=True)


if __name__ == "__main__":
    main()
