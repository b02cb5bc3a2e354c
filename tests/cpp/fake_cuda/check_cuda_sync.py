"""THREADBURN_CUDA_SYNC against the stand-in driver (fake_libcuda.c): the
known-answer program cuda_user.c under the preload probe and under
libthreadburn_cuda_sync.so (the stand-ins tests/bench/check_gpu.py uses
too). The driver's call log says in which order the calls came and with
which flags each context was created; probe-<pid>.json says what the probe
read back. CMake passes the built files (ctest
cuda_sync.fake_driver):
  FAKE_CUDA_DIR            build/tests/fake_cuda (libcuda.so.1, cuda_user)
  THREADBURN_PROBE_LIB     libthreadburn_probe.so
  THREADBURN_CUDA_SYNC_LIB libthreadburn_cuda_sync.so
  THREADBURN_BUILD_DIR     the build (`threadburn run --build-dir`, for the
                           command-line case at the end)
"""
import csv
import glob
import json
import os
import subprocess
import tempfile
import unittest

FAKE = os.environ.get("FAKE_CUDA_DIR", "")
PROBE = os.environ.get("THREADBURN_PROBE_LIB", "")
SYNC_LIB = os.environ.get("THREADBURN_CUDA_SYNC_LIB", "")
BUILD = os.environ.get("THREADBURN_BUILD_DIR", "")
THREADBURN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "bin", "threadburn")
USER = os.path.join(FAKE, "cuda_user")
BLOCKING = 4  # CU_CTX_SCHED_BLOCKING_SYNC
PREFIX = "threadburn cuda_sync: "
# What the driver's variables of the test machine would change.
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("FAKE_CUDA_", "THREADBURN_", "CUDA_USER_")) and k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}


class Run:
    """One run of cuda_user: exit status, output, the driver's log, the probe's summary."""

    def __init__(self, tmp, preload, env, args, probe_dir=True):
        self.log_path = os.path.join(tmp, "driver.log")
        out = os.path.join(tmp, "out")
        os.makedirs(out, exist_ok=True)
        full = dict(CLEAN, LD_PRELOAD=preload, FAKE_CUDA_LOG=self.log_path, **env)
        if preload == PROBE and probe_dir:
            full["THREADBURN_PROBE_DIR"] = out
        p = subprocess.run([USER] + list(args), env=full, capture_output=True, text=True, timeout=60)
        self.code, self.stdout, self.stderr = p.returncode, p.stdout, p.stderr
        self.calls = []
        if os.path.exists(self.log_path):
            with open(self.log_path) as f:
                for line in f:
                    pid, tid, call, cargs, rc = line.rstrip("\n").split("\t")
                    kv = dict(a.split("=", 1) for a in cargs.split(",")) if cargs != "-" else {}
                    self.calls.append((int(pid), int(tid), call, kv, int(rc)))
        found = glob.glob(os.path.join(out, "probe-*.json"))
        self.summary = None
        if found:
            with open(found[0]) as f:
                self.summary = json.load(f)

    def names(self):
        return [c[2] for c in self.calls]

    def index(self, call, **args):
        """The position of the first call of that name with those arguments, or None."""
        for i, (_, _, name, kv, _) in enumerate(self.calls):
            if name == call and all(kv.get(k) == str(v) for k, v in args.items()):
                return i
        return None

    @property
    def context(self):
        return {k: v for k, v in self.summary["context"].items() if k.startswith("cuda")}


@unittest.skipUnless(os.path.exists(os.path.join(FAKE, "libcuda.so.1")) and PROBE and SYNC_LIB,
                     "run by ctest (cuda_sync.fake_driver), which passes the built files")
class FakeDriver(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self):
        self._tmp.cleanup()

    def run_user(self, preload, env=None, args=(), driver=True, probe_dir=True):
        env = dict(env or {})
        if driver:
            env["LD_LIBRARY_PATH"] = FAKE
        sub = tempfile.mkdtemp(dir=self.tmp)
        return Run(sub, preload, env, args, probe_dir)

    def assert_no_line(self, run):
        self.assertNotIn(PREFIX, run.stderr)

    def assert_one_line(self, run, start):
        lines = run.stderr.splitlines()
        self.assertEqual(len(lines), 1, run.stderr)
        self.assertTrue(lines[0].startswith(PREFIX + start), lines[0])

    def assert_set_before_first_use(self, run, devices):
        """Every device got the blocking flag before the program's first
        retain, and each context was created with it (the fake's own state)."""
        first_retain = run.index("cuDevicePrimaryCtxRetain")
        self.assertIsNotNone(first_retain, run.calls)
        for d in range(devices):
            with self.subTest(device=d):
                at = run.index("cuDevicePrimaryCtxSetFlags_v2", dev=d, flags=BLOCKING)
                self.assertIsNotNone(at, f"device {d} never got flags {BLOCKING}: {run.names()}")
                self.assertLess(at, first_retain, "set after the program's first retain")
                self.assertIsNotNone(run.index("cuDevicePrimaryCtxRetain", dev=d, flags=BLOCKING))

    def test_blocking_sync_under_the_preload_library(self):
        run = self.run_user(SYNC_LIB, {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_CUDA_DEVICES": "2"})
        self.assertEqual(run.code, 0)
        self.assertIn("cuda_user: 2 device(s) retained", run.stdout)
        self.assert_no_line(run)
        self.assert_set_before_first_use(run, 2)
        # the library reads nothing back: no call after the program's own
        self.assertEqual(run.names()[-1], "cuDevicePrimaryCtxRetain")

    def test_blocking_sync_under_the_probe_read_back_while_it_runs(self):
        # The program releases its contexts in an exit handler (as a CUDA
        # runtime's teardown does), before the probe's report: what was in
        # force is what the probe read while the program ran.
        run = self.run_user(PROBE, {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_CUDA_DEVICES": "2"},
                            ["--release-at-exit", "--sleep-ms=600"])
        self.assertEqual(run.code, 0)
        self.assert_no_line(run)
        self.assert_set_before_first_use(run, 2)
        last = [c for c in run.calls if c[2] == "cuDevicePrimaryCtxGetState"][-2:]
        self.assertEqual([c[3]["active"] for c in last], ["0", "0"], "the exit read sees released contexts")
        self.assertEqual(run.context, {"cuda_sync_requested": "blocking_sync", "cuda_sync_in_force": "blocking_sync",
                                       "cuda_used": "1", "cuda_devices": "2", "cuda_sync_note": "none"})
        self.assertEqual(run.summary["cuda"], {
            "requested": "blocking_sync", "in_force": "blocking_sync", "note": "none",
            "devices": [{"device": d, "active_before": False, "set_rc": 0, "flags_at_exit": "blocking_sync",
                         "seen_active": True} for d in (0, 1)]})

    def test_the_probe_without_its_directory_still_applies_the_policy(self):
        run = self.run_user(PROBE, {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_CUDA_DEVICES": "2"},
                            probe_dir=False)
        self.assertEqual((run.code, run.summary), (0, None))
        self.assert_no_line(run)
        self.assert_set_before_first_use(run, 2)

    def test_auto_makes_no_driver_call(self):
        for value in (None, "auto"):
            env = {"FAKE_CUDA_DEVICES": "2"} if value is None else {"FAKE_CUDA_DEVICES": "2", "THREADBURN_CUDA_SYNC": value}
            for lib in (SYNC_LIB, PROBE):
                with self.subTest(value=value, lib=os.path.basename(lib)):
                    run = self.run_user(lib, env, ["--no-cuda"])
                    self.assertEqual((run.code, run.calls, run.stderr), (0, [], ""))
                    if lib == PROBE:  # a CPU program: the probe never loaded the driver to read it
                        self.assertEqual(run.context, {"cuda_sync_requested": "auto", "cuda_sync_in_force": "n/a",
                                                       "cuda_used": "0", "cuda_devices": "n/a",
                                                       "cuda_sync_note": "none"})
                        self.assertEqual(run.summary["cuda"]["devices"], [])

    def test_auto_reads_back_what_the_program_got(self):
        run = self.run_user(PROBE, {"FAKE_CUDA_DEVICES": "2"})
        # before the program's first use only the program's own calls (the
        # probe's read-backs come from its sampler thread, once the driver is there)
        main = [c[2] for c in run.calls if c[1] == c[0]]
        self.assertEqual(main[:4], ["cuInit", "cuDeviceGetCount", "cuDeviceGet", "cuDevicePrimaryCtxRetain"])
        self.assertEqual(run.names()[0], "cuInit")
        self.assertNotIn("cuDevicePrimaryCtxSetFlags_v2", run.names())
        self.assertEqual(run.context, {"cuda_sync_requested": "auto", "cuda_sync_in_force": "auto",
                                       "cuda_used": "1", "cuda_devices": "2", "cuda_sync_note": "none"})
        self.assertEqual([(d["active_before"], d["set_rc"], d["seen_active"]) for d in run.summary["cuda"]["devices"]],
                         [(None, None, True)] * 2)

    def test_no_driver_is_one_line_and_the_exit_status_stays(self):
        env = {"THREADBURN_CUDA_SYNC": "blocking_sync"}
        alone = self.run_user("", env, ["--exit=3"], driver=False)
        self.assertEqual(alone.code, 3)
        if "cuda_user: no CUDA driver" not in alone.stdout:
            self.skipTest("this machine has a CUDA driver of its own (libcuda.so.1)")
        for lib in (SYNC_LIB, PROBE):
            with self.subTest(lib=os.path.basename(lib)):
                run = self.run_user(lib, env, ["--exit=3"], driver=False, probe_dir=False)
                self.assertEqual(run.code, 3)
                self.assertIn("cuda_user: no CUDA driver", run.stdout)
                self.assert_one_line(run, "no CUDA driver (libcuda.so.1: ")
        run = self.run_user(PROBE, env, ["--exit=3"], driver=False)
        self.assertEqual(run.code, 3)
        self.assertEqual(run.stderr, "")  # the probe with its directory says it in the summary
        context = run.context
        self.assertTrue(context.pop("cuda_sync_note").startswith("no CUDA driver (libcuda.so.1: "))
        self.assertEqual(context, {"cuda_sync_requested": "blocking_sync", "cuda_sync_in_force": "n/a",
                                       "cuda_used": "0", "cuda_devices": "n/a"})

    def test_no_device(self):
        env = {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_CUDA_DEVICES": "0"}
        run = self.run_user(SYNC_LIB, env, ["--exit=5"])
        self.assertEqual(run.code, 5)
        self.assert_one_line(run, "no CUDA device")
        self.assertEqual(run.stderr, PREFIX + "no CUDA device\n")
        run = self.run_user(PROBE, env)
        self.assertEqual(run.context, {"cuda_sync_requested": "blocking_sync", "cuda_sync_in_force": "n/a",
                                       "cuda_used": "0", "cuda_devices": "0", "cuda_sync_note": "no CUDA device"})

    def test_a_context_already_active_is_left_as_it_is(self):
        # device 0's context exists before the probe's constructor, with yield
        env = {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_CUDA_ACTIVE": "0", "FAKE_CUDA_ACTIVE_FLAGS": "2"}
        already = ("device 0: context already active before threadburn could set it (the program or a library "
                   "created it first); the policy in force is the program's: yield")
        run = self.run_user(PROBE, env)
        self.assertNotIn("cuDevicePrimaryCtxSetFlags_v2", run.names())
        self.assertEqual(run.context, {"cuda_sync_requested": "blocking_sync", "cuda_sync_in_force": "yield",
                                       "cuda_used": "1", "cuda_devices": "1", "cuda_sync_note": already})
        self.assertEqual(run.summary["cuda"]["devices"], [{"device": 0, "active_before": True, "set_rc": None,
                                                           "flags_at_exit": "yield", "seen_active": True}])
        run = self.run_user(SYNC_LIB, env)
        self.assertEqual(run.stderr, PREFIX + already + "\n")
        # two devices, the other one free: set there, and the two differ
        run = self.run_user(PROBE, dict(env, FAKE_CUDA_DEVICES="2"))
        self.assertIsNotNone(run.index("cuDevicePrimaryCtxSetFlags_v2", dev=1, flags=BLOCKING))
        self.assertIsNone(run.index("cuDevicePrimaryCtxSetFlags_v2", dev=0))
        self.assertEqual((run.context["cuda_sync_in_force"], run.context["cuda_sync_note"]), ("mixed", already))

    def test_a_library_that_creates_its_context_in_its_constructor(self):
        # a library the program links is initialised before any preloaded one
        run = self.run_user(PROBE, {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_CUDA_DEVICES": "2",
                                    "CUDA_USER_EARLY": "1"})
        self.assertLess(run.index("cuDevicePrimaryCtxRetain", dev=1), run.index("cuDevicePrimaryCtxGetState"))
        self.assertNotIn("cuDevicePrimaryCtxSetFlags_v2", run.names())
        self.assertEqual(run.context["cuda_sync_in_force"], "auto")
        self.assertTrue(run.context["cuda_sync_note"].startswith("devices 0, 1: context already active"),
                        run.context["cuda_sync_note"])

    def test_the_program_s_own_flags_win_and_are_said(self):
        run = self.run_user(PROBE, {"THREADBURN_CUDA_SYNC": "blocking_sync"}, ["--flags=spin"])
        self.assertLess(run.index("cuDevicePrimaryCtxSetFlags_v2", flags=BLOCKING),
                        run.index("cuDevicePrimaryCtxSetFlags_v2", flags=1))
        self.assertEqual((run.context["cuda_sync_in_force"], run.context["cuda_sync_note"]),
                         ("spin", "device 0: blocking_sync was set, spin is in force (the program set its own "
                                  "flags after)"))

    def test_a_word_it_does_not_know_is_one_line_and_nothing_applied(self):
        env = {"THREADBURN_CUDA_SYNC": "fast", "FAKE_CUDA_DEVICES": "2"}
        line = "THREADBURN_CUDA_SYNC=fast: expected auto, spin, yield or blocking_sync; nothing applied"
        run = self.run_user(SYNC_LIB, env, ["--exit=7"])
        self.assertEqual((run.code, run.stderr), (7, PREFIX + line + "\n"))
        self.assertIn("cuda_user: 2 device(s) retained", run.stdout)
        self.assertEqual(run.names()[0], "cuInit")  # the program's: nothing of the library's
        self.assertNotIn("cuDevicePrimaryCtxSetFlags_v2", run.names())
        run = self.run_user(PROBE, env)
        self.assertEqual(run.context, {"cuda_sync_requested": "fast", "cuda_sync_in_force": "auto",
                                       "cuda_used": "1", "cuda_devices": "2", "cuda_sync_note": line})

    def test_a_failing_call_is_one_line(self):
        run = self.run_user(SYNC_LIB, {"THREADBURN_CUDA_SYNC": "yield", "FAKE_CUDA_INIT_FAIL": "999"})
        self.assertEqual((run.code, run.stderr), (0, PREFIX + "cuInit failed: CUDA_ERROR_UNKNOWN (999): nothing applied\n"))

    def test_the_known_answers_the_thread_classes_use(self):
        # the driver's own thread (created from libcuda.so.1) and PyTorch's pin-memory thread
        run = self.run_user(PROBE, {"FAKE_CUDA_DRIVER_THREAD_MS": "40"}, ["--pin-ms=30", "--sleep-ms=300"])
        driver = [c for c in run.calls if c[2] == "driver_thread"]
        self.assertEqual([(c[3], c[0] != c[1]) for c in driver], [({"ms": "40"}, True)])
        self.assertIn("driver_thread_cpu_ms=", run.stdout)
        self.assertIn("pin_thread_cpu_ms=", run.stdout)
        threads = {t["tid"]: t for t in run.summary["threads"]}
        pin = [t for t in threads.values() if t["name"] == "pt_data_pin"]
        self.assertEqual(len(pin), 1, run.summary["threads"])
        self.assertGreaterEqual(pin[0]["cpu_ms"], 30)
        self.assertGreaterEqual(threads[driver[0][1]]["cpu_ms"], 40)


@unittest.skipUnless(os.path.exists(os.path.join(FAKE, "libcuda.so.1")) and BUILD,
                     "run by ctest (cuda_sync.fake_driver), which passes the built files")
class RunCommand(unittest.TestCase):
    """What a user types: `threadburn run --env THREADBURN_CUDA_SYNC=blocking_sync -- PROGRAM`
    on a host of two devices (the stand-in driver)."""

    def test_run_sets_both_devices_before_the_program_and_reports_it(self):
        with tempfile.TemporaryDirectory() as tmp:
            log, out = os.path.join(tmp, "driver.log"), os.path.join(tmp, "run")
            env = dict(CLEAN, LD_LIBRARY_PATH=FAKE, FAKE_CUDA_DEVICES="2", FAKE_CUDA_LOG=log)
            p = subprocess.run([THREADBURN, "run", "--build-dir", BUILD, "--exact", "off",
                                "--no-plot", "--out", out, "--env", "THREADBURN_CUDA_SYNC=blocking_sync", "--",
                                USER, "--sleep-ms=400"], env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertIn("asked blocking_sync, in force blocking_sync (2 device(s)", p.stdout)
            with open(log) as f:
                calls = [line.split("\t")[2:4] for line in f]
            first_retain = next(i for i, c in enumerate(calls) if c[0] == "cuDevicePrimaryCtxRetain")
            for d in (0, 1):
                with self.subTest(device=d):
                    at = calls.index(["cuDevicePrimaryCtxSetFlags_v2", f"dev={d},flags={BLOCKING}"])
                    self.assertLess(at, first_retain, "set after the program's first context")
                    self.assertIn(["cuDevicePrimaryCtxRetain", f"dev={d},flags={BLOCKING}"], calls)
            with open(os.path.join(out, "run.csv")) as f:
                row = next(csv.DictReader(f))
            self.assertEqual((row["cuda_sync"], row["cuda_sync_requested"], row["cuda_sync_in_force"],
                              row["cuda_devices"], row["cuda_used"]),
                             ("blocking_sync", "blocking_sync", "blocking_sync", "2", "1"))


if __name__ == "__main__":
    unittest.main()
