#!/usr/bin/python3
"""threadburn (the package of this checkout) with a sanitizer's runtime put first in
the LD_PRELOAD of every command it probes, for the live tests of a sanitized probe
(check_sanitize.py; tests/bench/check_inrun.py starts tune through this when
THREADBURN_TEST_PRELOAD is set):

    preload_first.py RUNTIME OMP_TOOL threadburn-arguments...

A probed program that is not itself sanitized needs the runtime loaded before the
probe, which the package never does (it puts the probe first and the command's own
LD_PRELOAD after it); preloading the runtime into threadburn's own processes instead
is no way round: ThreadSanitizer's runtime crashes the shells it would start. OMP_TOOL
(may be empty) becomes the program's OMP_TOOL_LIBRARIES (the tool that tells
ThreadSanitizer of LLVM's OpenMP runtime's barriers). Only probe.environment is
wrapped: everything else is the package as it is.
"""
import os
import runpy
import sys

runtime, omp_tool = sys.argv[1], sys.argv[2]
sys.argv = ["threadburn", *sys.argv[3:]]
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

from threadburn.lib import probe  # noqa: E402 (after the path)

_environment = probe.environment


def environment(*args, **kwargs):
    env = _environment(*args, **kwargs)
    if env.get("LD_PRELOAD") and env.get("THREADBURN_PROBE_DIR"):
        env["LD_PRELOAD"] = f"{runtime} {env['LD_PRELOAD']}"
        if omp_tool:
            env["OMP_TOOL_LIBRARIES"] = omp_tool
    return env


probe.environment = environment
runpy.run_module("threadburn", run_name="__main__", alter_sys=True)
