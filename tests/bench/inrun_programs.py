#!/usr/bin/python3
"""Python known-answer programs for `threadburn tune --in-run`
(tests/bench/check_inrun.py): the team_up family of regions_child (a
step's regions share a fixed nap: each thread of the team sleeps its part,
so two threads do a step's regions in about half the time however busy the
CPUs are), run from Python as a training runs its kernels, through the
OpenMP runtime: libgomp's GOMP_parallel called with ctypes from the
process's global scope, so the probe's interposer sees each region (no
num_threads: the team is the runtime's, an in-run tune may change it). The
program never asks omp_get_max_threads().

    inrun_programs.py nap     [--regions 10] [--work-us 4000] [--seconds 90]
    inrun_programs.py ranks   [--world 2] ...   torch.distributed (gloo on localhost) ranks
    inrun_programs.py forked  [--workers 2] [--worker-kind omp|python] [--start fork|spawn] ...
    inrun_programs.py mlp     [--seconds 90]   a PyTorch training as people write it

  nap     one process: each step --regions regions, then its line
          "step_ms=X cpu_ms=Y" (the step's wall time and this process's CPU
          in it, every thread), printed with print() and no flush: through a
          pipe Python buffers it unless told otherwise
  ranks   a launcher that starts --world ranks of this program as the DDP
          benchmarks run them (RANK, WORLD_SIZE, MASTER_ADDR=127.0.0.1,
          MASTER_PORT: a free one; tests/bench/check_ddp.py) and waits; it runs
          no region itself. Each rank: the nap step, --burn-ms of its main
          thread's CPU, an all_reduce of a small tensor (the ranks wait for
          each other at every step), then "rank=R step_ms=X cpu_ms=Y" (its
          first line: "rank=R pid=P"). A team
          of two halves the step only where EVERY rank gets it: the slower
          rank's step is both's
  forked  a parent that starts --workers workers (multiprocessing's fork, as
          DataLoader's workers, or with --start spawn a fresh interpreter
          each) BEFORE its first region, then runs the nap steps; its workers
          run regions of their own (--worker-kind omp: the nap, without end)
          or none (python: a busy loop of Python with sleeps). First line:
          "parent pid=P workers=W1,W2"
  mlp     a small PyTorch training (a two-layer perceptron, batch 256, SGD):
          PyTorch's own threads (at one: it asks omp_get_max_threads() before
          each parallel_for and forks only when told more; its matrix products
          go to the BLAS, Debian's OpenBLAS under OpenMP); "step_ms=X" every
          step
Every process ends with its parent (PR_SET_PDEATHSIG). Needs torch for ranks
and mlp: without it they print "SKIP: ..." and exit 77 (the test skips).
"""
import argparse
import ctypes
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time

FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def import_or_skip(name):
    """The module, or a line "SKIP: no NAME ..." and exit 77 (check_inrun.py skips on it)."""
    try:
        return __import__(name, fromlist=["_"])
    except ImportError as e:
        print(f"SKIP: no {name} in {sys.executable} ({e})", flush=True)
        sys.exit(77)


def die_with_parent(sig=signal.SIGTERM):
    try:
        ctypes.CDLL(None).prctl(1, int(sig))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class Regions:
    """OpenMP regions through the runtime in the process's global scope (the probe's interposer first)."""

    def __init__(self, work_us):
        ctypes.CDLL("libgomp.so.1", mode=ctypes.RTLD_GLOBAL)
        scope = ctypes.CDLL(None)
        self.parallel = scope.GOMP_parallel
        self.parallel.argtypes = [FN, ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint]
        self.parallel.restype = None
        team = scope.omp_get_num_threads
        work_s = work_us / 1e6
        self.fn = FN(lambda _: time.sleep(work_s / team()))  # the team shares the nap

    def run(self, n):
        for _ in range(n):
            self.parallel(self.fn, None, 0, 0)


def burn(ms):
    t0 = time.thread_time()
    x = 0
    while time.thread_time() - t0 < ms / 1000:
        x += 1


def steps(a, regions, after=None, prefix=""):
    """The nap steps for --seconds, each with its line; after(): the step's other work."""
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        t0, c0 = time.monotonic(), time.process_time()
        regions.run(a.regions)
        if after:
            after()
        print(f"{prefix}step_ms={(time.monotonic() - t0) * 1000:.4f} cpu_ms={(time.process_time() - c0) * 1000:.4f}")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ranks(a):
    if a.rank is None:  # the launcher: starts the ranks, runs no region
        env = dict(os.environ, WORLD_SIZE=str(a.world), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
        argv = [x for x in sys.argv[1:]]
        procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), *argv, f"--rank={r}"],
                                  env=dict(env, RANK=str(r)), preexec_fn=die_with_parent) for r in range(a.world)]
        codes = [p.wait() for p in procs]
        sys.exit(max(abs(c) for c in codes))
    die_with_parent()
    torch = import_or_skip("torch")
    dist = import_or_skip("torch.distributed")
    dist.init_process_group("gloo", rank=a.rank, world_size=a.world)
    print(f"rank={a.rank} pid={os.getpid()}", flush=True)  # the test's, not a figure: always on time
    regions = Regions(a.work_us)
    grad = torch.ones(256)

    def after():
        burn(a.burn_ms)
        dist.all_reduce(grad)
    steps(a, regions, after, prefix=f"rank={a.rank} ")
    dist.destroy_process_group()


def worker(kind, work_us, seconds):
    die_with_parent(signal.SIGKILL)
    t_end = time.monotonic() + seconds
    if kind == "omp":
        regions = Regions(work_us)
        while time.monotonic() < t_end:
            regions.run(1)
    else:
        while time.monotonic() < t_end:
            burn(1)
            time.sleep(0.02)


def forked(a):
    ctx = multiprocessing.get_context(a.start)
    workers = [ctx.Process(target=worker, args=(a.worker_kind, a.work_us, a.seconds + 5), daemon=True)
               for _ in range(a.workers)]
    for w in workers:
        w.start()
    print(f"parent pid={os.getpid()} workers={','.join(str(w.pid) for w in workers)}", flush=True)
    steps(a, Regions(a.work_us))
    for w in workers:
        w.terminate()


def mlp(a):
    torch = import_or_skip("torch")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(256, 512), torch.randint(0, 10, (256,))
    t_end = time.monotonic() + a.seconds
    while time.monotonic() < t_end:
        t0 = time.monotonic()
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
        print(f"step_ms={(time.monotonic() - t0) * 1000:.3f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("nap", "ranks", "forked", "mlp"))
    ap.add_argument("--regions", type=int, default=10)
    ap.add_argument("--work-us", type=int, default=4000)
    ap.add_argument("--seconds", type=float, default=90)
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--rank", type=int)
    ap.add_argument("--burn-ms", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-kind", choices=("omp", "python"), default="omp")
    ap.add_argument("--start", choices=("fork", "spawn"), default="fork")
    a = ap.parse_args()
    if a.mode == "nap":
        steps(a, Regions(a.work_us))
    elif a.mode == "ranks":
        ranks(a)
    elif a.mode == "mlp":
        mlp(a)
    else:
        forked(a)


if __name__ == "__main__":
    main()
