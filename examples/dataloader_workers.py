#!/usr/bin/python3
"""A small PyTorch training whose batches come from DataLoader worker
processes (forked: num_workers=2), each item costing the worker a known CPU
time: what `threadburn run` must count as "worker processes".

    /usr/bin/python3 examples/dataloader_workers.py [--batches 24] [--batch 16] [--item-cpu-ms 2] [--workers 2]

Prints the CPU the workers spent on items, as measured by themselves
(time.process_time around each item), summed in the main process:
"worker item CPU: N ms", and "samples/s: N".
"""
import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Burning(Dataset):
    """Each item spins its worker's own CPU clock for item_cpu_ms, then returns
    a random sample and the CPU it measured."""

    def __init__(self, n, item_cpu_ms):
        self.n, self.item_s = n, item_cpu_ms / 1000.0

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        t0 = time.process_time()
        x = 0
        while time.process_time() - t0 < self.item_s:
            x += 1
        g = torch.Generator().manual_seed(i)
        return torch.randn(32, generator=g), torch.randint(0, 4, (1,), generator=g)[0], time.process_time() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--item-cpu-ms", type=float, default=2.0)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(Burning(a.batches * a.batch, a.item_cpu_ms), batch_size=a.batch, num_workers=a.workers)
    worker_cpu_s = 0.0
    t0 = time.monotonic()
    for x, y, cpu in loader:
        worker_cpu_s += float(cpu.sum())
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
    elapsed = time.monotonic() - t0
    del loader  # the workers are joined (and reaped) here, before the program ends
    print(f"worker item CPU: {worker_cpu_s * 1000:.1f} ms")
    print(f"samples/s: {a.batches * a.batch / elapsed:.1f}")


if __name__ == "__main__":
    main()
