"""A CUDA training as users write it, for the device check's node step
(scripts/gpu_check.sh, tests/gpu/gpu_check.py's kind_node): a small MLP on
cuda:0, each step a forward pass, loss.backward() (PyTorch runs it on its
autograd engine's device thread, pt_autograd_0, which launches the backward's
kernels while the main thread sleeps on the engine), an optimizer step, and
the loss copied to the host with .cpu() into ordinary (pageable) memory: a
cuMemcpyDtoHAsync/cuMemcpyAsync that blocks inside the driver, the stream's
synchronisation after it returning at once. Run with CUDA_VISIBLE_DEVICES
unset: on a node of several GPUs the process uses one.

    backward_cpu.py [--seconds 8]

Prints "backward_cpu: steps=N seconds=S" (exit 77 and "backward_cpu: SKIP:
..." without torch or CUDA)."""
import argparse
import sys
import time


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=8.0)
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
    losses, steps = [], 0
    t0 = time.monotonic()
    while time.monotonic() - t0 < a.seconds:
        loss = model(x).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach().cpu())  # pageable: blocks inside the driver's copy
        steps += 1
    print(f"backward_cpu: steps={steps} seconds={time.monotonic() - t0:.3f} loss={float(losses[-1]):.4g}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
