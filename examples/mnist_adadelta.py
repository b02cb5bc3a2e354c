#!/usr/bin/python3
"""MNIST training as in PyTorch's MNIST example (two convolutions, dropout,
two linear layers, log_softmax + nll_loss; Adadelta with lr 1.0 and StepLR
with gamma 0.7 after each pass over the data) on synthetic images: random
28x28 bytes normalised with MNIST's mean and standard deviation, from a fixed
seed, so it needs no download. Ends with one machine-readable line,
"samples/s: N", the training throughput after the warm-up steps.

  threadburn run -- /usr/bin/python3 examples/mnist_adadelta.py --steps 20
  threadburn tune --metric 'samples/s: ([0-9.]+)' -- /usr/bin/python3 examples/mnist_adadelta.py --steps 20
Needs PyTorch (Debian 12: python3-torch, PyTorch 1.13.1, libgomp). The tune
tests use it (tests/bench/check_tune.py).

On a GPU (--device cuda; without CUDA it says so in one line and trains on
the CPU), the two ways of feeding it that people compare (docs/cuda.md):
--feed gpu moves the whole dataset to the device once and takes each batch
there; --feed loader loads the batches with a DataLoader (--workers N
processes, --pin-memory for page-locked batches) and copies each to the
device. Both feeds train on the same batches in the same order, with the
same dropout (the losses they print agree). Which is faster
on your host, and at what CPU:

  threadburn tune --param feed=gpu,loader --param workers=0,2,4 --metric 'samples/s: ([0-9.]+)' -- \
      /usr/bin/python3 examples/mnist_adadelta.py --device cuda --feed '{feed}' --workers '{workers}'
"""
import argparse
import sys
import time

PROG = "mnist_adadelta.py"
MNIST_MEAN, MNIST_STD = 0.1307, 0.3081


def build_model(torch):
    nn, F = torch.nn, torch.nn.functional

    class Net(nn.Module):
        """The MNIST example's network: 1.2 M parameters, most in fc1."""

        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 32, 3, 1)
            self.conv2 = nn.Conv2d(32, 64, 3, 1)
            self.dropout1 = nn.Dropout(0.25)
            self.dropout2 = nn.Dropout(0.5)
            self.fc1 = nn.Linear(9216, 128)
            self.fc2 = nn.Linear(128, 10)

        def forward(self, x):
            x = F.relu(self.conv1(x))
            x = F.relu(self.conv2(x))
            x = F.max_pool2d(x, 2)
            x = self.dropout1(x)
            x = torch.flatten(x, 1)
            x = F.relu(self.fc1(x))
            x = self.dropout2(x)
            return F.log_softmax(self.fc2(x), dim=1)

    return Net()


def synthetic_mnist(torch, n, seed):
    """n images of random bytes, scaled to [0, 1] and normalised as the MNIST
    example's transform does, with random labels 0..9."""
    g = torch.Generator().manual_seed(seed)
    images = torch.randint(0, 256, (n, 1, 28, 28), generator=g, dtype=torch.uint8)
    x = (images.float() / 255 - MNIST_MEAN) / MNIST_STD
    y = torch.randint(0, 10, (n,), generator=g)
    return x, y


def parse_args():
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=50, help="training steps, warm-up included")
    ap.add_argument("--warmup", type=int, default=1, help="first steps left out of samples/s (default 1)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dataset", type=int, default=1024, help="synthetic images; a pass over them is an epoch")
    ap.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--log-interval", type=int, default=10, help="print the loss every N steps (0: never)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                    help="where to train (cuda without CUDA: the CPU, said in one line)")
    ap.add_argument("--feed", choices=("gpu", "loader"), default="gpu",
                    help="gpu (default): the dataset moved to the device once, batches taken there; loader: a "
                         "DataLoader loads each batch (--workers processes), copied to the device")
    ap.add_argument("--workers", type=int, default=0, help="--feed loader: DataLoader worker processes (0: the "
                                                            "main thread loads)")
    ap.add_argument("--pin-memory", action="store_true", help="--feed loader on CUDA: page-locked batches, copied "
                                                               "asynchronously")
    a = ap.parse_args()
    if a.warmup < 0 or a.steps <= a.warmup or a.batch < 1 or a.dataset < a.batch or a.threads < 0 \
            or a.log_interval < 0 or a.workers < 0:
        print(f"{PROG}: error: need --steps > --warmup >= 0, 1 <= --batch <= --dataset, --threads >= 0, "
              "--log-interval >= 0, --workers >= 0", file=sys.stderr)
        sys.exit(2)
    return a


def batches_of(torch, a, x, y, device):
    """The training batches, one pass over the data after another, on the
    device: sliced from the dataset moved there once (feed gpu), or loaded
    by a DataLoader and copied there (feed loader). The same batches in the
    same order either way."""
    n = a.dataset // a.batch
    if a.feed == "gpu":
        x, y = x.to(device), y.to(device)
        while True:
            for b in range(n):
                yield x[b * a.batch:(b + 1) * a.batch], y[b * a.batch:(b + 1) * a.batch]
    pin = pinned(a, device)
    # (its own generator: the loader's seeding then leaves the global one, dropout's, as feed gpu leaves it)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:n * a.batch], y[:n * a.batch]),
                                         batch_size=a.batch, shuffle=False, num_workers=a.workers,
                                         pin_memory=pin, persistent_workers=a.workers > 0,
                                         generator=torch.Generator().manual_seed(a.seed))
    while True:
        for data, target in loader:
            yield data.to(device, non_blocking=pin), target.to(device, non_blocking=pin)


def pinned(a, device):
    """Page-locked batches: asked for, and on a CUDA device (on the CPU they buy nothing)."""
    return a.pin_memory and a.feed == "loader" and device.type == "cuda"


def pick_device(torch, a):
    if a.device == "cuda" and not torch.cuda.is_available():
        print(f"{PROG}: CUDA is not available to this PyTorch ({torch.__version__}): training on the CPU",
              file=sys.stderr, flush=True)
        return torch.device("cpu")
    return torch.device(a.device)


def main():
    a = parse_args()
    try:
        import torch
    except ImportError:
        print(f"{PROG}: error: PyTorch is not installed (Debian 12: apt install python3-torch)", file=sys.stderr)
        sys.exit(2)

    if a.threads:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    device = pick_device(torch, a)
    x, y = synthetic_mnist(torch, a.dataset, a.seed)
    model = build_model(torch).to(device)
    opt = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.7)
    batches = a.dataset // a.batch
    feed = "" if (device.type, a.feed) == ("cpu", "gpu") else (
        f", {device.type}, feed {a.feed}" + (f" ({a.workers} workers{', pinned' if pinned(a, device) else ''})"
                                             if a.feed == "loader" else ""))
    print(f"{PROG}: torch {torch.__version__}, {torch.get_num_threads()} intra-op threads, batch {a.batch}, "
          f"{a.steps} steps ({a.warmup} warm-up), {batches} batches per epoch{feed}", flush=True)

    def sync():  # the GPU's queued work done: the clock then measures it
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    model.train()
    feed_batches = batches_of(torch, a, x, y, device)
    step, t0 = 0, None
    try:
        while step < a.steps:
            if step == a.warmup:
                sync()
                t0 = time.perf_counter()
            data, target = next(feed_batches)
            opt.zero_grad()
            loss = torch.nn.functional.nll_loss(model(data), target)
            loss.backward()
            opt.step()
            step += 1
            if step % batches == 0:
                scheduler.step()
            if a.log_interval and step % a.log_interval == 0:
                print(f"{PROG}: step {step}: loss {loss.item():.4f}", flush=True)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted after {step} steps", file=sys.stderr)
        sys.exit(130)
    sync()
    seconds = time.perf_counter() - t0
    timed = a.steps - a.warmup
    print(f"{PROG}: {timed} timed steps in {seconds:.3f} s, {seconds / timed * 1000:.2f} ms per step")
    print(f"samples/s: {timed * a.batch / seconds:.2f}", flush=True)


if __name__ == "__main__":
    main()
