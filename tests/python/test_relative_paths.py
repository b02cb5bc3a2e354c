"""A relative --build-dir (and --libomp, --out) given from one folder, and a
command that changes directory before it runs the program
(`sh -c 'cd elsewhere && python3 ...'`): every path threadburn hands to another
process (the probe and libomp in LD_PRELOAD, the probe's folder,
libthreadburn_cuda_sync.so, the monitor) must still name the file it named in
the folder threadburn was started in (lib/paths.py, for_child). A relative
LD_PRELOAD entry is looked up from the process's own folder: "cannot be
preloaded", the program unprobed.

The live cases need the real build's probe (THREADBURN_BUILD_DIR, as ctest
passes it) and LLVM's libomp; the program under test says itself what its
process had mapped, the truth the rows and the output are checked against.
"""
import os
import sys
import unittest

import helpers

from threadburn.engine import exec_probe, points
from threadburn.lib import paths, probe

LIBOMP = paths.LIBOMP
# What the program under test reports about its own process: its folder, its
# LD_PRELOAD, and whether the probe and LLVM's runtime are mapped into it.
SELF_REPORT = r'''
import os
maps = open("/proc/self/maps").read()
print("cwd:", os.getcwd())
print("preload:", os.environ.get("LD_PRELOAD", ""))
probed, libomp = int("libthreadburn_probe.so" in maps), int("libomp.so" in maps)
print("probed:", probed)
print("libomp:", libomp)
print("state:", 10 * probed + libomp)
'''


def reported(stdout, key):
    """The values the program printed for key (one per run)."""
    return [line.split(": ", 1)[1] for line in stdout.splitlines() if line.startswith(key + ": ")]


class FindsAbsolute(helpers.TempDir, unittest.TestCase):
    """Without a real build: what paths.py returns from a relative build dir."""

    def setUp(self):
        super().setUp()
        os.makedirs(self.path("b", "src", "probe"))
        for name in ("libthreadburn_probe.so", paths.CUDA_SYNC_LIBRARY):
            helpers.write_file(self.path("b", "src", "probe", name), "")
        os.makedirs(self.path("here"))
        self.cwd = os.getcwd()
        os.chdir(self.path("here"))

    def tearDown(self):
        os.chdir(self.cwd)
        super().tearDown()

    def test_libraries_of_a_relative_build_dir_are_absolute(self):
        for found in (probe.library("../b"), paths.cuda_sync_library("../b")):
            self.assertTrue(os.path.isabs(found), found)
            self.assertTrue(os.path.samefile(found, self.path("b", "src", "probe", os.path.basename(found))))

    def test_relative_build_dir_from_the_environment(self):
        old = os.environ.get("THREADBURN_BUILD_DIR")
        os.environ["THREADBURN_BUILD_DIR"] = "../b"
        try:
            self.assertEqual(paths.build_dir(), self.path("b"))
        finally:
            if old is None:
                del os.environ["THREADBURN_BUILD_DIR"]
            else:
                os.environ["THREADBURN_BUILD_DIR"] = old

    def test_fresh_runs_preload_the_cuda_library_by_its_absolute_path(self):
        # tune's fresh runs without the probe: a CUDA wait policy comes from libthreadburn_cuda_sync.so.
        options = exec_probe.ProbeOptions(build_dir="../b", libomp="../omp/libomp.so.5",
                                          probe_env=(("THREADBURN_PROBE_GAP_MIN_US", "1000"),))
        ex = exec_probe.ProbeExecutor(options, ["true"], None, "work", 1)
        point = points.TunePoint("cuda-blocking_sync", "llvm", {paths.CUDA_SYNC: "blocking_sync"}, phase="confirm")
        env = ex.environment(point, "out")
        preload = env["LD_PRELOAD"].split()
        self.assertEqual(preload[:2], [os.path.abspath("../omp/libomp.so.5"),
                                       self.path("b", "src", "probe", paths.CUDA_SYNC_LIBRARY)])
        race = ex.environment(point.for_phase("race"), "out")
        self.assertEqual(race["LD_PRELOAD"].split()[0], self.path("b", "src", "probe", "libthreadburn_probe.so"))
        self.assertEqual(race["THREADBURN_PROBE_DIR"], self.path("here", "out"))


@unittest.skipUnless(helpers.real_build_dir(), "needs the real build's probe (THREADBURN_BUILD_DIR)")
@unittest.skipUnless(os.path.exists(LIBOMP), f"needs LLVM's OpenMP runtime ({LIBOMP})")
class LiveRelative(helpers.TempDir, unittest.TestCase):
    """run and tune started in one folder with relative paths; the command cd's to another."""

    def setUp(self):
        super().setUp()
        self.here = self.path("here")
        os.makedirs(self.here)
        self.build = os.path.relpath(os.path.abspath(helpers.real_build_dir()), self.here)
        self.libomp = os.path.relpath(LIBOMP, self.here)
        script = helpers.write_file(self.path("self_report.py"), SELF_REPORT)
        # python3 starts from a folder deeper than here, where the relative paths name nothing
        # (from /, ../../../work/x would still be /work/x).
        self.there = self.path("there", "a", "b")
        os.makedirs(self.there)
        self.cmd = ["sh", "-c", f"cd {self.there} && {sys.executable} {script}; true"]

    def threadburn(self, *args):
        return helpers.threadburn(*args, env=helpers.clean_env(THREADBURN_RUNS=self.path("runs")), cwd=self.here,
                                  timeout=300)

    def check_preload(self, stdout, runs):
        self.assertEqual(reported(stdout, "cwd"), [self.there] * runs)
        for line in reported(stdout, "preload"):
            for entry in line.split():
                self.assertTrue(os.path.isabs(entry) and os.path.exists(entry), f"LD_PRELOAD entry {entry!r}")

    def test_run(self):
        p = self.threadburn("run", "--build-dir", self.build, "--runtime", "llvm", "--libomp", self.libomp,
                            "--exact", "off", "--no-plot", "--out", "out", "--", *self.cmd)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("cannot be preloaded", p.stderr)
        self.check_preload(p.stdout, 1)
        self.assertEqual(reported(p.stdout, "probed"), ["1"])
        self.assertEqual(reported(p.stdout, "libomp"), ["1"])
        # python3's probe files in here/out (the folder run was given), not in there/out.
        commands = [r.summary.get("command", "") for r in probe.reports(os.path.join(self.here, "out"))]
        self.assertIn(f"{sys.executable} {self.path('self_report.py')}", commands)
        self.assertTrue(os.path.exists(os.path.join(self.here, "out", "run.csv")))

    def test_tune(self):
        pts = helpers.write_file(self.path("points.toml"), '[[point]]\nname = "plain"\nruntime = "gomp"\n\n'
                                 '[[point]]\nname = "bt0"\nruntime = "llvm"\n'
                                 'env = {KMP_BLOCKTIME = "0"}\n')
        p = self.threadburn("tune", "--build-dir", self.build, "--libomp", self.libomp, "--points", pts,
                            "--repetitions", "2", "--confirm", "0", "--seed", "1", "--out", "tune.csv",
                            "--metric", "state: ([0-9]+)", "--metric-better", "higher", "--", *self.cmd)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertNotIn("cannot be preloaded", p.stderr)
        rows = [r for r in helpers.read_rows(os.path.join(self.here, "tune.csv")) if r["phase"] == "race"]
        # Each run's python3, started from there, had the probe mapped (10), and LLVM's runtime under llvm (11).
        got = sorted((r["runtime"], r["status"], float(r["metric"] or "nan")) for r in rows)
        self.assertEqual(got, [("gomp", "ok", 10.0)] * 2 + [("llvm", "ok", 11.0)] * 2, [r["reason"] for r in rows])


if __name__ == "__main__":
    unittest.main()
