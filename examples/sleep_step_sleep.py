#!/usr/bin/python3
"""A CPU training with SGD that sleeps before and after each
optimizer.step() + zero_grad(), every phase logged to ckpt.log in Python's
logging format ("2022-11-23 14:47:19,534 - ckpt - update_start", local time):
the loop whose OpenMP workers keep burning after each step.

  threadburn run -- /usr/bin/python3 examples/sleep_step_sleep.py --threads 2
  threadburn monitor --out=run.csv --marks=ckpt.log -- /usr/bin/python3 examples/sleep_step_sleep.py
Needs PyTorch (Debian 12: python3-torch, PyTorch 1.13.1, libgomp). The
preload probe's known answers use it (tests/bench/check_probe.py).
"""
import argparse
import logging
import sys
import time

PROG = "sleep_step_sleep.py"


def build_model(nn, width):
    """A small CIFAR-shaped CNN (3x32x32 -> 10). With width 64 it has ~2.5 M
    parameters: enough for ATen to split the optimizer's element-wise loops
    across OpenMP threads (its grain size is 32768 elements)."""
    w = width
    return nn.Sequential(
        nn.Conv2d(3, w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(w, 2 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(2 * w, 4 * w, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(4 * w * 4 * 4, 512), nn.ReLU(), nn.Linear(512, 10))


def main():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=5, help="training steps (0: until Ctrl-C)")
    ap.add_argument("--sleep_s", type=float, default=2.0, help="sleep before and after each update")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--width", type=int, default=64, help="channels of the first conv (model size)")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--log", default="ckpt.log", help="event log, Python logging format (overwritten)")
    ap.add_argument("--work_ms", type=float, default=0,
                    help="the main thread's own CPU work (ms of its CPU clock: a checkpoint, a metric) at the end "
                         "of the sleep after each update, right before its sleep_end mark (0: none)")
    a = ap.parse_args()
    if a.steps < 0 or a.sleep_s < 0 or a.batch < 1 or a.width < 1 or a.threads < 0 or a.work_ms < 0:
        print(f"{PROG}: error: --steps, --sleep_s, --threads, --work_ms must be >= 0; --batch, --width >= 1",
              file=sys.stderr)
        sys.exit(2)
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print(f"{PROG}: error: PyTorch is not installed (Debian 12: apt install python3-torch)", file=sys.stderr)
        sys.exit(2)

    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = build_model(nn, a.width)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    # Synthetic data: the seed's question is about the update, not the loader.
    x = torch.randn(a.batch, 3, 32, 32)
    y = torch.randint(0, 10, (a.batch,))

    # The seed's logger: "%(asctime)s - %(name)s - %(message)s"; asctime is
    # local time with ms after a comma, which threadburn_monitor --marks reads.
    log = logging.getLogger("ckpt")
    log.setLevel(logging.INFO)
    handler = logging.FileHandler(a.log, mode="w")
    handler.setFormatter(logging.Formatter("%(asctime)s - %(name)s - %(message)s"))
    log.addHandler(handler)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"{PROG}: torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, "
          f"{nparams / 1e6:.2f} M parameters, batch {a.batch}, sleep {a.sleep_s} s, log {a.log}", flush=True)

    step = 0
    try:
        while a.steps == 0 or step < a.steps:
            loss = loss_fn(model(x), y)
            loss.backward()
            log.info("sleep_start")
            time.sleep(a.sleep_s)
            log.info("update_start")
            t0 = time.perf_counter()
            opt.step()
            opt.zero_grad()
            update_ms = (time.perf_counter() - t0) * 1000
            log.info("update_end")
            time.sleep(max(0.0, a.sleep_s - a.work_ms / 1000))
            if a.work_ms:
                # Python alone, no OpenMP: the program's next action, not burn.
                end = time.thread_time() + a.work_ms / 1000
                while time.thread_time() < end:
                    pass
            log.info("sleep_end")
            step += 1
            print(f"{PROG}: step {step}: loss {loss.item():.4f}, update {update_ms:.1f} ms", flush=True)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted after {step} steps", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
