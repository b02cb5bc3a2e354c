#!/usr/bin/python3
"""The CUDA wait policy steered per context under an in-run tune, live, on the
stand-in driver (src/probe/inrun.cc, before_wait; tests/cpp/fake_cuda):

    check_cuda_context.py --build-dir DIR [--repo DIR]

The program (device_training --launcher=both) waits in one context from two
threads each step: the main thread after its half of the kernels (as a loss's
.item() does), then the autograd thread after the rest. The context's flags
belong to the context, not to a thread. This script is threadburn's side of
the control block, by hand: one setting, cuda-blocking_sync (flags 4); it asks
the program's own, then blocking_sync for 1 s, then the program's own again
for 1 s. Known answer, from the driver's own log of cuCtxSetFlags
(FAKE_CUDA_LOG): the context was set to 4 in the blocking_sync block and
restored to its own flags (0) once back, and no later call set anything else:
a second waiting thread must not take the tune's flags for its own (the probe
that kept them per thread restored 4 after the main thread restored 0: the
program's own blocks ran under the tune's policy). The setting applied in the
process's slot both times. Standard library only (and the package's
lib/probe.py).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_inrun import check, env_clean  # noqa: E402
from check_promise import Block  # noqa: E402

BLOCKING_SYNC = 4


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.repo, "python"))
    from threadburn.lib import probe
    fakes = os.path.join(a.build_dir, "tests", "fake_cuda")
    program = [os.path.join(fakes, "device_training"), "--launcher=both", "--startup-ms=100", "--steps=100000",
               "--step-ms=10"]
    layout = probe.describe(a.build_dir)["inrun"]
    with tempfile.TemporaryDirectory() as tmp:
        block = Block(os.path.join(tmp, "control"), layout, settings=[(-1, -1, BLOCKING_SYNC)], ceiling=0)
        log = os.path.join(tmp, "driver.log")
        env = probe.environment(env_clean(LD_LIBRARY_PATH=fakes, FAKE_CUDA_LOG=log), probe.library(a.build_dir),
                                os.path.join(tmp, "probe"), "gomp")
        env["THREADBURN_INRUN"] = os.path.join(tmp, "control")
        os.makedirs(os.path.join(tmp, "probe"), exist_ok=True)
        p = subprocess.Popen(program, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            t0 = time.monotonic()
            while not block.get("owner_pid") and p.poll() is None and time.monotonic() - t0 < 30:
                time.sleep(0.01)
            check(block.get("owner_pid"), "the program never took the control block")
            applied = []
            for want in (0, -1):
                block.put(block.f["request"], want)
                t = time.monotonic()
                while time.monotonic() - t < 1.0 and p.poll() is None:
                    if block.proc(0, "applied") == want and (not applied or applied[-1] != want):
                        applied.append(want)
                    time.sleep(0.002)
            time.sleep(0.3)  # a few more steps under the program's own
        finally:
            p.terminate()
            p.wait()
        with open(log) as f:  # pid, tid, call, arguments, result (fake_libcuda.c)
            sets = [line.rstrip("\n").split("\t") for line in f if line.split("\t")[2:3] == ["cuCtxSetFlags"]]
    flags = [int(s[3].split("=")[1]) for s in sets if s[4] == "0"]
    print(f"cuCtxSetFlags calls: {flags}; applied in the process: {applied}")
    check(applied == [0, -1], f"applied {applied}: expected blocking_sync, then the program's own")
    check(BLOCKING_SYNC in [f & 7 for f in flags], "the context was never set to blocking_sync")
    check(flags and flags[-1] == 0, f"the context's last flags {flags[-1] if flags else None}: expected its own (0)"
          " restored, and nothing after")
    check(flags.count(0) == 1, f"its own flags restored {flags.count(0)} times: once is the context's")
    print("PASS")


if __name__ == "__main__":
    main()
