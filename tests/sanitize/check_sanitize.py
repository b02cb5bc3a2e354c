#!/usr/bin/python3
"""The probe, omptap, the sampler and the in-run path under a sanitizer, live:

    check_sanitize.py NAME --sanitize address,undefined|thread --source DIR --build-dir DIR
                      --generator G [--build-type T] --targets T1,T2 --ctest REGEX
                      [--reports-only REGEX] [--omp-tool LIB] -- CMAKE_OPTION...

Configures the source into BUILD_DIR/variants/NAME with -DTHREADBURN_SANITIZE (torch,
TBB and oneDNN off: the probe links none of them), builds only TARGETS (the probe, the
sampler's live tests, the programs the live tests probe), then runs that build's own
live tests matching REGEX (ctest in that folder: the same tests as this build's, of the
sanitized binaries), and those matching --reports-only for what the sanitizers see
alone (the sampler's live gtests: their bounds are of time and CPU, which sanitized
code and, under ThreadSanitizer, its own thread in the process change; they are judged
unsanitized in the unit label), with the sanitizer's runtime preloaded first into every probed
program (THREADBURN_TEST_PRELOAD, which tests/bench/check_probe.py and check_inrun.py
put in front of the probe) and every report written to BUILD_DIR/variants/NAME/
sanitizer-logs. Fails when a test fails or when any process wrote a report (a
sanitized process that is killed, as tune --in-run ends its program, has no exit
status to fail on: its report still lands there). docs/probe.md, "Sanitizers".
Standard library only.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time


def stage(title, cmd, cwd=None, env=None, quiet=False):
    t0 = time.monotonic()
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    if p.returncode != 0 or not quiet:
        sys.stdout.write(p.stdout[-20000:] if p.returncode != 0 else p.stdout)
    print(f"{title}: {took:.1f} s" + ("" if p.returncode == 0 else f" (exit {p.returncode})"), flush=True)
    return p.returncode, p.stdout


def cache_value(build, name):
    with open(os.path.join(build, "CMakeCache.txt")) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split("=", 1)[1].strip()
    return ""


def environment(a, runtime, logs):
    """The sanitizers' options for every process of the tests; only a process that loads a
    runtime reads them. Leaks are not checked: the probed programs are others' (Python's
    interpreter, the tune's helpers) and the probe's few objects of the process's life are
    freed by the process's end by design."""
    env = dict(os.environ, THREADBURN_TEST_PRELOAD=runtime)
    # The runtime is preloaded first into every probed program (check_probe.py,
    # preload_first.py), but threadburn also loads the probe alone into `true` to read its
    # description: there the runtime comes after the C library, which ASan refuses unless
    # told (that process allocates nothing of interest).
    env["ASAN_OPTIONS"] = (f"log_path={logs}/asan:verify_asan_link_order=0:detect_leaks=0:"
                           "detect_stack_use_after_return=0:strict_string_checks=1:check_initialization_order=1")
    env["UBSAN_OPTIONS"] = f"log_path={logs}/ubsan:print_stacktrace=1:halt_on_error=1"
    # ignore_noninstrumented_modules: accesses made by code not built with ThreadSanitizer
    # (the OpenMP runtime's own, through the interceptors: pthread_mutex_*, memcpy) are not
    # checked; every access of this project's code is (it is all instrumented).
    tsan = [f"log_path={logs}/tsan", "second_deadlock_stack=1", "history_size=4", "ignore_noninstrumented_modules=1"]
    env["TSAN_OPTIONS"] = ":".join(tsan)
    if a.omp_tool:
        # LLVM's OpenMP runtime tells ThreadSanitizer of its forks, barriers and joins
        # through this tool (its OMPT interface), for the tests that run on it.
        env["OMP_TOOL_LIBRARIES"] = a.omp_tool
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--sanitize", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build-dir", required=True, help="the build this one lies under")
    ap.add_argument("--generator", required=True)
    ap.add_argument("--build-type", default="Release")
    ap.add_argument("--targets", required=True)
    ap.add_argument("--ctest", required=True, help="regex of the sanitized build's tests to run")
    ap.add_argument("--reports-only", default="", help="regex of tests run for the sanitizers' reports alone")
    ap.add_argument("--omp-tool", default="")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    options = argv[cut + 1:]
    out = os.path.join(a.build_dir, "variants", a.name)
    t0 = time.monotonic()
    rc, _ = stage("configure", ["cmake", "-S", a.source, "-B", out, "-G", a.generator,
                                f"-DCMAKE_BUILD_TYPE={a.build_type}", f"-DTHREADBURN_SANITIZE={a.sanitize}",
                                "-DTHREADBURN_WITH_TORCH=OFF", "-DTHREADBURN_WITH_TBB=OFF",
                                "-DTHREADBURN_WITH_DNNL=OFF", *options], quiet=True)
    if rc:
        sys.exit(1)
    rc, _ = stage("build " + a.targets, ["cmake", "--build", out, "-j", str(os.cpu_count() or 2),
                                         "--target", *a.targets.split(",")], quiet=True)
    if rc:
        sys.exit(1)
    runtime = cache_value(out, "THREADBURN_SANITIZER_RUNTIME")
    if not os.path.isfile(runtime):
        print(f"FAIL: no sanitizer runtime for {a.sanitize} ({runtime!r}: the compiler's, -print-file-name)")
        sys.exit(1)
    logs = os.path.join(out, "sanitizer-logs")
    shutil.rmtree(logs, ignore_errors=True)
    os.makedirs(logs)
    env = environment(a, runtime, logs)
    rc, listed = stage("ctest " + a.ctest, ["ctest", "-R", a.ctest, "--output-on-failure"], cwd=out, env=env)
    if "No tests were found" in listed:
        print(f"FAIL: no test of the sanitized build matches {a.ctest}")
        sys.exit(1)
    if a.reports_only:
        bounds, listed = stage("ctest (for the sanitizers' reports) " + a.reports_only,
                               ["ctest", "-R", a.reports_only, "--output-on-failure"], cwd=out, env=env, quiet=True)
        if "No tests were found" in listed:
            print(f"FAIL: no test of the sanitized build matches {a.reports_only}")
            sys.exit(1)
        if bounds:
            print("(a bound of time or CPU above did not hold sanitized: judged unsanitized in the unit label; "
                  "only a sanitizer's report fails this test)")
    reports = sorted(glob.glob(os.path.join(logs, "*")))
    for path in reports:
        with open(path, errors="replace") as f:
            print(f"==== {path}\n{f.read()[-12000:]}")
    if reports:
        print(f"FAIL: {len(reports)} sanitizer report(s) (above)")
    if rc or reports:
        sys.exit(1)
    print(f"sanitize {a.name} ({a.sanitize}): configured, built and its tests clean in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
