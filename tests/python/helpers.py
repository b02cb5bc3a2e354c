"""Shared by the Python tests: the package on sys.path, a fake build dir of
fake_program.py wrappers, running bin/threadburn, reading CSVs, the real build."""
import csv
import glob
import json
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "python")
FIXTURES = os.path.join(HERE, "fixtures")
PROGRAM_FIXTURES = os.path.join(REPO, "tests", "fixtures", "programs")
FAKE = os.path.join(HERE, "fake_program.py")
THREADBURN = os.path.join(REPO, "bin", "threadburn")
# The programs recorded in tests/fixtures/programs (<bench>.cpu.json): a fake build has them all.
BENCHES = tuple(sorted(n[:-len(".cpu.json")] for n in os.listdir(PROGRAM_FIXTURES) if n.endswith(".cpu.json")))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)


def make_fake_build(root):
    """root/bench/<bench>_bench: wrappers running fake_program.py BENCH."""
    bench = os.path.join(root, "bench")
    os.makedirs(bench, exist_ok=True)
    for name in BENCHES:
        path = os.path.join(bench, f"{name}_bench")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nexec '{sys.executable}' '{FAKE}' {name} \"$@\"\n")
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return root


def fake_libomp(directory):
    """A preloadable library named libomp.so.5 (a link to the C library every
    process has loaded anyway): the fake reports llvm-libomp for it."""
    libc = None
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libc.so") or os.path.basename(path).startswith("libc-"):
                libc = path
                break
    if libc is None:
        raise RuntimeError("no C library in /proc/self/maps")
    link = os.path.join(directory, "libomp.so.5")
    if not os.path.lexists(link):
        os.symlink(libc, link)
    return link


def clean_env(**extra):
    """This environment without OpenMP knobs, LD_PRELOAD, the fake's switches
    or threadburn's own variables (the build dir ctest passes), plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OMP_", "KMP_", "GOMP_", "FAKE_", "THREADBURN_")) and k != "LD_PRELOAD"}
    env.update({k: str(v) for k, v in extra.items()})
    return env


def still_host(path):
    """A host's CPU counters that never move, for THREADBURN_HOST_STAT: the
    harness then sees no other load during any run, so a test whose
    programs' figures are made up follows the same course however busy the
    machine running it is (a co-running test's CPU set a run aside once)."""
    return write_file(path, "cpu  1000 0 1000 100000 0 0 0 0 0 0\n")


def threadburn_cmd(*args):
    return [THREADBURN] + [str(a) for a in args]


def threadburn(*args, env=None, timeout=120, cwd=None):
    """bin/threadburn ARGS as a user runs it."""
    return subprocess.run(threadburn_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          env=clean_env() if env is None else env, cwd=cwd, stdin=subprocess.DEVNULL)


def write_file(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def read_header(path):
    with open(path, newline="") as f:
        return next(csv.reader(f))


def recording(bench, device="cpu"):
    with open(os.path.join(PROGRAM_FIXTURES, f"{bench}.{device}.json")) as f:
        return json.load(f)


def recorded_descriptions():
    """programs.Description of each recorded program with its defaults (what a
    fake build's programs describe), in the order the sweep sees them."""
    from threadburn.lib import programs
    return [programs.Description.from_json(recording(b)) for b in BENCHES]


def real_build_dir():
    """The CMake build holding the real programs ($THREADBURN_BUILD_DIR, else
    build/), or None when there is none (the drift and documentation tests skip)."""
    root = os.environ.get("THREADBURN_BUILD_DIR") or os.path.join(REPO, "build")
    paths = [p for p in glob.glob(os.path.join(root, "bench", "*_bench")) if os.access(p, os.X_OK)]
    if not paths:
        return None
    with open(paths[0], "rb") as f:
        if f.read(2) == b"#!":  # a fake build's wrapper script
            return None
    return root


class TempDir:
    """A temporary directory for a TestCase (self.tmp), removed afterwards."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory(prefix="tb-test-")
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def path(self, *parts):
        return os.path.join(self.tmp, *parts)


def private_cluster(script, cluster, started_by, needs_build=False):
    """(running, why not) of a private Slurm cluster that a test driver
    started in the folder `cluster` with scripts/<script> (its `status`
    answers); `started_by` names the driver for the skip reason."""
    if not cluster:
        return False, f"the cluster's folder is not set ({started_by} starts one)"
    if needs_build and not real_build_dir():
        return False, "needs the real build (scripts/build.sh)"
    status = subprocess.run(["bash", os.path.join(REPO, "scripts", script), "status", cluster],
                            capture_output=True, text=True, timeout=60)
    return status.returncode == 0, f"no {script} cluster runs in {cluster}"


def assert_one_line_error(test, result, *fragments, code=2):
    """A command that failed with exit code `code`, one line on stderr, holding fragments."""
    test.assertEqual(result.returncode, code, result.stdout + result.stderr)
    test.assertEqual(result.stderr.count("\n"), 1, result.stderr)
    for fragment in fragments:
        test.assertIn(fragment, result.stderr)


def glob_one(pattern):
    found = glob.glob(pattern)
    if len(found) != 1:
        raise AssertionError(f"{pattern}: {len(found)} matches")
    return found[0]


def typed(rows):
    """Rows read as dicts (read_rows) as the package takes them (records.Row)."""
    from threadburn.lib.records import Row
    return [Row(r) for r in rows]
