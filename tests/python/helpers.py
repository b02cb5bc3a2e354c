"""Shared by the Python tests: a fake build dir, running the scripts, reading CSVs."""
import csv
import os
import stat
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPTS = os.path.join(REPO, "scripts")
FIXTURES = os.path.join(HERE, "fixtures")
FAKE_BENCH = os.path.join(HERE, "fake_bench.py")
sys.path.insert(0, SCRIPTS)


def make_build_dir(root, cache=None):
    """root/bench/<program>_bench wrappers around fake_bench.py; with cache
    (e.g. {"THREADBURN_WITH_TBB": "OFF"}), a CMakeCache.txt holding those
    variables as a configured build would."""
    bench = os.path.join(root, "bench")
    os.makedirs(bench, exist_ok=True)
    if cache is not None:
        lines = ["# This is the CMakeCache file.", "CMAKE_BUILD_TYPE:STRING=Release"]
        lines += [f"//Build the parts\n{k}:BOOL={v}" for k, v in cache.items()]
        write_file(os.path.join(root, "CMakeCache.txt"), "\n".join(lines) + "\n")
    for program in ("train_step", "optimizer_step", "runtime"):
        path = os.path.join(bench, f"{program}_bench")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE_BENCH}' {program} \"$@\"\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return root


def preloadable_lib():
    """A shared library LD_PRELOAD can load harmlessly: the real libomp if
    installed, else the libc this interpreter already runs on."""
    if os.path.exists("/usr/lib/x86_64-linux-gnu/libomp.so.5"):
        return "/usr/lib/x86_64-linux-gnu/libomp.so.5"
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if "/libc.so" in path or "/libc-" in path:
                return path
    raise RuntimeError("no preloadable library found")


def clean_env(**extra):
    """The environment without OpenMP knobs or fake-bench switches, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "KMP_", "GOMP_", "FAKE_BENCH_")) and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def script_cmd(script, *args):
    return [sys.executable, os.path.join(SCRIPTS, script)] + [str(a) for a in args]


def run_script(script, *args, env=None, timeout=60):
    return subprocess.run(script_cmd(script, *args), capture_output=True, text=True,
                          env=env or clean_env(), timeout=timeout)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def assert_one_line_grid_error(test, load, text, key_text, words, grid_error):
    """load(text) must raise grid_error whose one-line message starts with the
    grid's path and contains key_text and words."""
    with test.assertRaises(grid_error) as caught:
        load(text)
    message = str(caught.exception)
    test.assertRegex(message, r"^/\S+/g\.toml: ")
    test.assertIn(key_text, message)
    test.assertIn(words, message)
    test.assertNotIn("\n", message)
