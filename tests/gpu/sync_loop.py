#!/usr/bin/python3
"""The CUDA host wait policy's known answer (scripts/gpu_check.sh, step policy):

    sync_loop.py [--seconds 2] [--size 4096] [--step-ms 10] [--stand-in]

A loop of matrix products with `.item()` every step, as a training that
prints its loss every step does: each step queues about --step-ms of GPU work
(the number of products per step is measured first), then the host waits
for it in `.item()`. How the host waits is the context's policy, which the
program never sets: under `spin` the waiting thread polls, so the process's
CPU over the loop's wall time is about 1; under `blocking_sync` it sleeps
until the GPU's interrupt, so that share is the launches' only (a few %).
Run it under `threadburn run --env THREADBURN_CUDA_SYNC=...` or with
`libthreadburn_cuda_sync.so` preloaded: the policy is set before the
program's first CUDA call, without a change to it.

Prints one line, `sync_loop: loop_wall_s=.. loop_cpu_s=.. cpu_per_wall=..
main_cpu_s=.. main_wait_s=.. runnable_per_wall=.. steps=.. matmuls_per_step=..
step_ms=.. policy_in_force=..`: the loop's wall (time.perf_counter) and the
process's CPU (time.process_time) around the loop only; the main thread's
own CPU and run-queue wait (schedstat) over the same loop, whose sum over the
wall (runnable_per_wall) says the thread wanted a core all the time even
where other processes took it (a shared host: there CPU/wall of a spinning
thread falls below 1, its runnable share does not); and the policy the
driver reports for device 0's primary context (cuDevicePrimaryCtxGetState,
read through libcuda.so.1 after PyTorch made the context: an independent
read-back of what was in force).

--stand-in: no GPU and no PyTorch. Against the stand-in driver
(build/tests/fake_cuda/libcuda.so.1, through LD_LIBRARY_PATH) it does what a
CUDA runtime does at first use (cuInit, device 0's primary context
retained), reads the flags back the same way, and stands in for the GPU's
wait by waiting as the driver does under those flags: polling the clock
under spin, yield and auto, sleeping under blocking_sync. That tests the
chain (the variable, the probe or the library, the driver's flags, the
figures, the check's bounds), not a real driver's wait.

Exit 77 (a skip) without a CUDA device.
"""
import argparse
import ctypes
import sys
import time

POLICIES = {0: "auto", 1: "spin", 2: "yield", 4: "blocking_sync"}  # CU_CTX_SCHED_* (cuda.h)
SCHED_MASK = 0x07


def policy_of_device0(cuda):
    """The scheduling policy of device 0's primary context, as the driver reports it."""
    dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
    if cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        return "unknown (cuDeviceGet failed)"
    if cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) != 0:
        return "unknown (cuDevicePrimaryCtxGetState failed)"
    return POLICIES.get(flags.value & SCHED_MASK, f"flags {flags.value}")


def run_queue_wait_s():
    """This thread's time runnable without a CPU so far (/proc/thread-self/schedstat's
    second field, ns); 0 where the kernel keeps no schedstat."""
    try:
        with open("/proc/thread-self/schedstat") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def loop(seconds, step):
    """Runs step() until `seconds` of wall time passed: the loop's wall, the
    process's CPU, this thread's CPU and run-queue wait (s), and the steps."""
    steps = 0
    t0, c0, m0, w0 = time.perf_counter(), time.process_time(), time.thread_time(), run_queue_wait_s()
    while time.perf_counter() - t0 < seconds:
        step()
        steps += 1
    return (time.perf_counter() - t0, time.process_time() - c0, time.thread_time() - m0, run_queue_wait_s() - w0,
            steps)


def on_gpu(a):
    import torch
    if not torch.cuda.is_available():
        print(f"sync_loop: SKIP: CUDA is not available to this PyTorch ({torch.__version__})")
        sys.exit(77)
    x = torch.randn(a.size, a.size, device="cuda") / a.size ** 0.5
    y = torch.empty_like(x)
    torch.matmul(x, x, out=y)
    y[0, 0].item()  # the context, cuBLAS and the first kernels: not in the loop
    t0, n = time.perf_counter(), 10
    for _ in range(n):
        torch.matmul(x, x, out=y)
    y[0, 0].item()
    per_ms = (time.perf_counter() - t0) * 1e3 / n
    k = max(1, round(a.step_ms / per_ms))

    def step():
        for _ in range(k):
            torch.matmul(x, x, out=y)
        y[0, 0].item()  # the host waits for the GPU here, as the context's policy says
    policy = policy_of_device0(ctypes.CDLL("libcuda.so.1"))
    return loop(a.seconds, step), k, per_ms * k, policy


def stand_in(a):
    cuda = ctypes.CDLL("libcuda.so.1")
    ctx = ctypes.c_void_p()
    dev = ctypes.c_int()
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGet(ctypes.byref(dev), 0) != 0:
        print("sync_loop: SKIP: the stand-in driver has no device")
        sys.exit(77)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)  # what cudart does at first use
    policy = policy_of_device0(cuda)
    wait_s = a.step_ms / 1e3

    def step():
        until = time.perf_counter() + wait_s
        if policy == "blocking_sync":
            time.sleep(wait_s)
        else:
            while time.perf_counter() < until:
                pass
    return loop(a.seconds, step), 1, a.step_ms, policy


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=2.0, help="the loop's wall time (default 2)")
    ap.add_argument("--size", type=int, default=4096, help="the square matrices' side (default 4096)")
    ap.add_argument("--step-ms", type=float, default=10.0, help="GPU work queued per step (default 10 ms)")
    ap.add_argument("--stand-in", action="store_true", help="the stand-in driver, no GPU (see above)")
    a = ap.parse_args()
    (wall, cpu, main_cpu, main_wait, steps), k, step_ms, policy = stand_in(a) if a.stand_in else on_gpu(a)
    print(f"sync_loop: loop_wall_s={wall:.4f} loop_cpu_s={cpu:.4f} cpu_per_wall={cpu / wall:.4f} "
          f"main_cpu_s={main_cpu:.4f} main_wait_s={main_wait:.4f} runnable_per_wall={(main_cpu + main_wait) / wall:.4f} "
          f"steps={steps} matmuls_per_step={k} step_ms={step_ms:.3f} policy_in_force={policy}", flush=True)


if __name__ == "__main__":
    main()
