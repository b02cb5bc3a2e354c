#!/usr/bin/python3
"""A host-bound GPU training's known answer (scripts/gpu_check.sh, step waits):

    launch_bound.py [--seconds 8] [--ops 2000] [--glue-us 20]

Each step runs --ops tiny operations on a one-element tensor on the GPU, one
kernel each of a microsecond or two, every one followed by --glue-us of the
host's own Python work (the per-layer logic of a small model's step), then
one `.item()`: the thread that launches the work sets the pace, the GPU
idles almost all the time (its kernels take a few % of each step, far below
half whatever NVML's sample period), and the wait at the step's end finds
the work done. `threadburn run` of it should say host-bound, and nothing
else: the main thread works near a core outside its waits on the device
while the GPU is busy less than half the steady phase; a wait policy cannot
help it.

Prints one line, `launch_bound: steps=.. ops_per_step=.. loop_wall_s=..
loop_cpu_s=.. cpu_per_wall=.. host_us_per_op=..`: the loop's wall
(time.perf_counter) and the process's CPU (time.process_time) around the
loop only, and the host's time per operation.

Exit 77 (a skip) without a CUDA device.
"""
import argparse
import sys
import time


def glue(seconds):
    """The host's own work between two operations: Python, on the main thread."""
    until = time.perf_counter() + seconds
    while time.perf_counter() < until:
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0, help="the loop's wall time (default 8)")
    ap.add_argument("--ops", type=int, default=2000, help="tiny operations a step (default 2000)")
    ap.add_argument("--glue-us", type=float, default=20.0,
                    help="the host's own work after each operation, in us (default 20)")
    a = ap.parse_args()
    import torch
    if not torch.cuda.is_available():
        print(f"launch_bound: SKIP: CUDA is not available to this PyTorch ({torch.__version__})")
        sys.exit(77)
    x = torch.ones(1, device="cuda")
    x.mul_(1.0)
    x.item()  # the context and the first kernel: not in the loop
    pause = a.glue_us / 1e6

    def step():
        for i in range(a.ops):
            if i % 2:
                x.mul_(0.5)
            else:
                x.add_(1.0)  # x stays near 1: add 1, halve, ...
            glue(pause)
        return x.item()  # the step's one wait: the GPU finished long ago

    steps = 0
    t0, c0 = time.perf_counter(), time.process_time()
    while time.perf_counter() - t0 < a.seconds:
        step()
        steps += 1
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"launch_bound: steps={steps} ops_per_step={a.ops} loop_wall_s={wall:.4f} loop_cpu_s={cpu:.4f} "
          f"cpu_per_wall={cpu / wall:.4f} host_us_per_op={wall / max(1, steps * a.ops) * 1e6:.2f}", flush=True)


if __name__ == "__main__":
    main()
