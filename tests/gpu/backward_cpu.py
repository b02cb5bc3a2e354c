"""A CUDA training as users write it, for the device check's node step
(scripts/gpu_check.sh, tests/gpu/gpu_check.py's kind_node): a small MLP on
cuda:0, each step a forward pass, loss.backward() (PyTorch runs it on its
autograd engine's device thread, pt_autograd_0, which launches the backward's
kernels while the main thread sleeps on the engine), an optimizer step, and
the loss copied to the host with .cpu() into ordinary (pageable) memory: a
cuMemcpyDtoHAsync/cuMemcpyAsync that blocks inside the driver, the stream's
synchronisation after it returning at once. Run with CUDA_VISIBLE_DEVICES
unset: on a node of several GPUs the process uses one.

    backward_cpu.py [--seconds 8] [--prep]

--prep: a startup of device work between model.cuda() and the steps, as a
training prepares its data: a dataset made and normalised on the GPU in five
pieces of uneven size, each waited for (torch.cuda.synchronize()), with
0.1 s of the host's own work after each (a compile's): none of it a step.

Prints "backward_cpu: steps=N seconds=S prep_syncs=P steps_mono_ms=M" (the
preparation's waits; when the first step began, CLOCK_MONOTONIC in ms, the
probe's clock) (exit 77 and "backward_cpu: SKIP: ..." without torch or CUDA)."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--prep", action="store_true")
    a = ap.parse_args()
    try:
        import torch
    except ImportError:
        print("backward_cpu: SKIP: torch is not importable")
        return 77
    if not torch.cuda.is_available():
        print("backward_cpu: SKIP: CUDA is not available")
        return 77
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device="cuda")
    prep_syncs = 0
    if a.prep:
        for rows in (20000, 80000, 5000, 40000, 10000):  # uneven pieces of a dataset made on the GPU
            piece = torch.randn(rows, 1024, device="cuda")
            piece = (piece - piece.mean(0)) / piece.std(0)
            for _ in range(4):
                piece = piece @ torch.eye(1024, device="cuda")
            torch.cuda.synchronize()
            prep_syncs += 1
            busy = time.process_time() + 0.1  # the host's own work (a compile's)
            while time.process_time() < busy:
                pass
        del piece
    losses, steps = [], 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.seconds:
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())  # pageable: blocks inside the driver's copy
        steps += 1
    print(f"backward_cpu: steps={steps} seconds={time.monotonic() - t0:.3f} loss={float(losses[-1]):.4g} "
          f"prep_syncs={prep_syncs} steps_mono_ms={t0 * 1000:.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
