#!/usr/bin/python3
"""What scripts/gpu_check.sh --stand-in runs in place of the GPU training
of its step classes (examples/mnist_adadelta.py --device cuda --feed loader
--workers 2 --pin-memory), with no GPU and no PyTorch:

    stand_in_training.py [--workers 2] [--worker-ms 150] [--pin-ms 100] [--run-ms 600]

The threads and processes a DataLoader training has, each burning a known
CPU time on its own clock: --workers forked worker processes (--worker-ms
each), a thread that names itself pt_data_pin as PyTorch's pin-memory thread
does (--pin-ms), and the CUDA driver loaded and initialised (through
LD_LIBRARY_PATH, the stand-in build/tests/fake_cuda/libcuda.so.1, whose
cuInit starts a thread of the driver's that burns FAKE_CUDA_DRIVER_THREAD_MS).
The main thread sleeps --run-ms meanwhile (NVML's samples, the stand-in's
FAKE_NVML_SAMPLES). The workers live until the main thread ends, as
persistent workers do. Prints what each burned.
"""
import argparse
import ctypes
import os
import threading
import time


def burn(seconds):
    """Burns `seconds` of this thread's own CPU."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def fork_worker(ms):
    """A worker process: burns ms of CPU, then waits for the main process to end."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        burn(ms / 1e3)
        os.read(r, 1)  # returns at the parent's close
        os._exit(0)
    os.close(r)
    return pid, w


def pin_thread(ms, done):
    libc = ctypes.CDLL(None)  # the process's scope: the probe's pthread_setname_np first
    libc.pthread_self.restype = ctypes.c_ulong
    libc.pthread_setname_np(ctypes.c_ulong(libc.pthread_self()), b"pt_data_pin")
    burn(ms / 1e3)
    done.set()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--worker-ms", type=float, default=150.0)
    ap.add_argument("--pin-ms", type=float, default=100.0)
    ap.add_argument("--run-ms", type=float, default=600.0)
    a = ap.parse_args()
    workers = [fork_worker(a.worker_ms) for _ in range(a.workers)]
    cuda = ctypes.CDLL("libcuda.so.1")
    print(f"stand_in_training: cuInit {cuda.cuInit(0)}", flush=True)
    done = threading.Event()
    threading.Thread(target=pin_thread, args=(a.pin_ms, done), daemon=True).start()
    time.sleep(a.run_ms / 1e3)
    done.wait()
    for _, w in workers:  # every write end first: each later worker holds the earlier ones' too
        os.close(w)
    for pid, _ in workers:
        os.waitpid(pid, 0)
    print(f"stand_in_training: workers={a.workers} worker_ms={a.worker_ms} pin_ms={a.pin_ms}", flush=True)


if __name__ == "__main__":
    main()
