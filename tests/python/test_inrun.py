"""The pieces of an in-run tune (engine/exec_inrun.py) on made-up inputs:
the control block's layout as the probe describes it (the build's own
describe.json when there is a build), its seqlock, the settings an in-run
tune tries for what the probe saw, and a block's figures from two marks
of known work and CPU, the options value the executor takes (never the
namespace), and the note where the units counted differ in size
(analysis/advice.py)."""
import collections
import contextlib
import io
import math
import os
import subprocess
import sys
import time
import threading
import unittest

import helpers
from threadburn.analysis import advice
from threadburn.engine import exec_inrun
from threadburn.engine.campaign import RunSpec
from threadburn.engine.points import TunePoint
from threadburn.lib import probe

# A layout as the probe's describe.json gives it (src/probe/inrun.h, version 2): the test's own,
# so that it runs without a build; the build's is checked against the same fields below.
FIELDS = ("magic version owner_pid n_settings settings request seq sample_ns cpu_ns regions region_end_ns waits "
          "wait_end_ns launches launch_end_ns applied applied_ns steady_ns runtime team_seen free_regions cuda_rc "
          "ended ceiling asks own_team held_back n_procs refused procs").split()
PROC_FIELDS = "pid seq sample_ns cpu_ns regions applied applied_ns why".split()


def layout(max_settings=4, max_procs=3):
    fields, at = {}, 0
    for name in FIELDS:
        fields[name] = at
        at += 8 * 3 * max_settings if name == "settings" else 8 * len(PROC_FIELDS) * max_procs if name == "procs" else 8
    return {"variable": "THREADBURN_INRUN", "magic": 7, "version": 2, "size": at, "max_settings": max_settings,
            "setting_size": 24, "setting_fields": {"team": 0, "blocktime_ms": 8, "cuda_flags": 16}, "fields": fields,
            "max_procs": max_procs, "proc_size": 8 * len(PROC_FIELDS),
            "proc_fields": {name: 8 * i for i, name in enumerate(PROC_FIELDS)}}


def put_proc(c, i, **values):
    """Writes slot i as a process's probe does: its seq odd while the fields change."""
    lay = c.layout
    base = lay["fields"]["procs"] + i * lay["proc_size"]
    seq = c._proc_get(i, "seq")
    c.put(None, seq + 1, base + lay["proc_fields"]["seq"])
    for name, value in values.items():
        c.put(None, value, base + lay["proc_fields"][name])
    c.put(None, seq + 2, base + lay["proc_fields"]["seq"])


class Fake:
    """What the probe saw, as Control.get answers it."""

    def __init__(self, **values):
        self.values = values

    def get(self, name):
        return self.values.get(name, 0)


class ControlBlock(helpers.TempDir, unittest.TestCase):
    def test_settings_and_request_land_where_the_probe_reads_them(self):
        c = exec_inrun.Control(self.path("c.bin"), layout(), ceiling=6)
        self.assertEqual((c.get("magic"), c.get("version"), c.get("request"), c.get("ceiling")), (7, 2, -1, 6))
        c.set_settings([(2, -1, -1), (-1, 0, -1), (-1, -1, 4)])
        self.assertEqual(c.get("n_settings"), 3)
        with open(self.path("c.bin"), "rb") as f:
            raw = f.read()
        at = layout()["fields"]["settings"]
        values = [int.from_bytes(raw[at + 8 * i:at + 8 * i + 8], "little", signed=True) for i in range(9)]
        self.assertEqual(values, [2, -1, -1, -1, 0, -1, -1, -1, 4])
        with self.assertRaises(Exception):
            c.set_settings([(1, -1, -1)] * 5)
        c.close()

    def test_a_snapshot_is_never_half_written(self):
        c = exec_inrun.Control(self.path("c.bin"), layout())
        stop = threading.Event()

        def writer():  # as the probe's sampler: odd seq while the fields change together
            n = 0
            while not stop.is_set():
                n += 1
                c.put("seq", 2 * n - 1)
                c.put("regions", n)
                c.put("cpu_ns", 10 * n)
                c.put("seq", 2 * n)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)  # the writer is preempted between its fields all the time
        t = threading.Thread(target=writer)
        t.start()
        try:
            for _ in range(3000):
                s = c.snapshot()
                self.assertEqual(s["cpu_ns"], 10 * s["regions"])
        finally:
            stop.set()
            t.join()
            sys.setswitchinterval(switch)
        c.close()

    def test_each_steered_process_is_read_from_its_own_slot(self):
        c = exec_inrun.Control(self.path("c.bin"), layout())
        self.assertEqual(c.procs(), {})  # nobody took the block yet
        c.put("n_procs", 2)
        put_proc(c, 0, pid=100, sample_ns=5, cpu_ns=50, regions=3, applied=-1, applied_ns=4)
        self.assertEqual(set(c.procs()), {100})  # slot 1 still free (its pid 0)
        put_proc(c, 1, pid=101, sample_ns=6, cpu_ns=60, regions=0, applied=-2)
        procs = c.procs()
        self.assertEqual(list(procs), [100, 101])  # the owner first
        self.assertEqual((procs[100]["cpu_ns"], procs[100]["applied"]), (50, -1))
        self.assertEqual((procs[101]["cpu_ns"], procs[101]["applied"]), (60, exec_inrun.NONE_APPLIED))
        c.put("n_procs", 99)  # never read past the slots
        self.assertEqual(list(c.procs()), [100, 101])
        c.close()

    def test_an_owner_without_a_slot_is_read_from_the_owners_fields(self):
        c = exec_inrun.Control(self.path("c.bin"), layout())
        c.put("owner_pid", 42)
        c.put("cpu_ns", 7)
        c.put("applied", 1)
        procs = c.procs()
        self.assertEqual((list(procs), procs[42]["cpu_ns"], procs[42]["applied"]), ([42], 7, 1))
        c.close()

    def test_a_slot_is_never_half_written(self):
        c = exec_inrun.Control(self.path("c.bin"), layout())
        c.put("n_procs", 2)
        put_proc(c, 0, pid=100)
        put_proc(c, 1, pid=101)
        stop = threading.Event()

        def writer():  # slot 1's probe: its own seq odd while its fields change together
            n = 0
            while not stop.is_set():
                n += 1
                put_proc(c, 1, pid=101, regions=n, cpu_ns=10 * n)
        switch = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        t = threading.Thread(target=writer)
        t.start()
        try:
            for _ in range(2000):
                p = c.proc(1)
                self.assertEqual(p["cpu_ns"], 10 * p["regions"])
        finally:
            stop.set()
            t.join()
            sys.setswitchinterval(switch)
        c.close()

    def test_a_probe_of_the_first_layout_is_refused(self):
        old = layout()
        for name in ("ceiling", "asks", "own_team", "held_back", "n_procs", "refused", "procs"):
            del old["fields"][name]
        with self.assertRaisesRegex(Exception, "rebuild"):
            exec_inrun.Control(self.path("old.bin"), old)

    @unittest.skipUnless(helpers.real_build_dir(), "needs the build's probe")
    def test_the_probes_layout_has_these_fields(self):
        desc = probe.describe(helpers.real_build_dir())["inrun"]
        self.assertEqual(set(desc["fields"]), set(FIELDS))
        self.assertEqual(desc["setting_size"], 24)
        self.assertEqual(set(desc["proc_fields"]), set(PROC_FIELDS))
        self.assertEqual(desc["proc_size"], 8 * len(PROC_FIELDS))
        c = exec_inrun.Control(self.path("real.bin"), desc)
        c.set_settings([(2, -1, -1)])
        self.assertEqual(c.get("n_settings"), 1)
        c.close()


class Points(unittest.TestCase):
    def names(self, kind="regions", program_env=None, **seen):
        points, settings, left = exec_inrun.observed_points(Fake(**seen), {}, "gomp", cpus=4, physical=2, kind=kind,
                                                            program_env=program_env)
        return [p.name for p in points], settings, " ".join(left)

    def test_a_team_for_a_program_that_leaves_it_to_the_runtime(self):
        names, settings, _ = self.names(regions=10, free_regions=10, team_seen=4, runtime=1)
        self.assertEqual(names, ["plain", "T1", "T2"])  # 4 (its own) not tried again
        self.assertEqual(settings, [None, (1, -1, -1), (2, -1, -1)])

    def test_no_team_where_the_program_names_it_or_runs_no_region(self):
        names, _, left = self.names(regions=10, free_regions=0, team_seen=0, runtime=1)
        self.assertEqual(names, ["plain"])
        self.assertIn("every region names its own team", left)
        names, _, left = self.names(regions=0)
        self.assertEqual(names, ["plain"])
        self.assertIn("no OpenMP region ran", left)
        self.assertIn("fixed at start", left)

    def test_a_team_for_a_program_that_asks_before_it_forks(self):
        # PyTorch at one thread: it asks omp_get_max_threads() (its own answer 1) and forks
        # only when told more; judged by its own lines, it is offered the teams but its own.
        names, settings, _ = self.names(kind="lines", asks=50, regions=0, free_regions=0, own_team=1, runtime=1)
        self.assertEqual(names, ["plain", "T2", "T4"])
        self.assertEqual(settings[1:], [(2, -1, -1), (4, -1, -1)])
        names, _, _ = self.names(kind="waits", asks=50, own_team=1)  # the device's waits: a unit too
        self.assertEqual(names, ["plain", "T2", "T4"])

    def test_no_team_by_regions_for_a_program_that_asks(self):
        # Under T1 such a program runs no region at all: regions are no unit across teams.
        names, _, left = self.names(kind="regions", asks=50, regions=40, free_regions=40, own_team=1, runtime=1)
        self.assertEqual(names, ["plain"])
        self.assertIn("asks omp_get_max_threads()", left)
        self.assertIn("--metric REGEX", left)

    def test_the_programs_own_team_is_the_runtimes_answer(self):
        names, _, _ = self.names(regions=10, free_regions=10, team_seen=4, own_team=2, runtime=1)
        self.assertEqual(names, ["plain", "T1", "T4"])

    def test_blocktimes_under_llvm_only(self):
        names, settings, _ = self.names(regions=5, free_regions=0, runtime=2)
        self.assertEqual(names, ["plain", "llvm-bt0", "llvm-bt1"])  # 200, LLVM's own, not tried again
        self.assertEqual(settings[1:], [(-1, 0, -1), (-1, 1, -1)])
        names, _, left = self.names(regions=5, free_regions=0, runtime=1)
        self.assertNotIn("llvm-bt0", names)
        self.assertIn("LLVM's blocktime", left)

    def test_the_programs_own_blocktime_from_the_environment_it_runs_with(self):
        names, _, _ = self.names(regions=5, runtime=2, program_env={"KMP_BLOCKTIME": "1"})
        self.assertEqual(names, ["plain", "llvm-bt0", "llvm-bt200"])
        names, _, _ = self.names(regions=5, runtime=2, program_env={"OMP_WAIT_POLICY": "passive"})
        self.assertEqual(names, ["plain", "llvm-bt1", "llvm-bt200"])  # passive: LLVM's blocktime 0
        names, _, _ = self.names(regions=5, runtime=2, program_env={"KMP_BLOCKTIME": "infinite"})
        self.assertEqual(names, ["plain", "llvm-bt0", "llvm-bt1", "llvm-bt200"])

    def test_wait_policies_for_a_program_that_uses_the_driver(self):
        names, settings, _ = self.names(waits=3)
        self.assertEqual(names, ["plain", "cuda-spin", "cuda-yield", "cuda-blocking_sync"])
        self.assertEqual(settings[1:], [(-1, -1, 1), (-1, -1, 2), (-1, -1, 4)])
        points, _, _ = exec_inrun.observed_points(Fake(waits=3), {probe.CUDA_SYNC: "spin"}, "gomp", 2, 2)
        self.assertNotIn("cuda-spin", [p.name for p in points])  # the user's own policy is plain's
        names, _, _ = self.names(waits=3, program_env={probe.CUDA_SYNC: "yield"})  # ... inherited too
        self.assertEqual(names, ["plain", "cuda-spin", "cuda-blocking_sync"])


class SettleTime(unittest.TestCase):
    """The settle time follows the longest spin a setting may leave behind: the program's own,
    read from the environment it runs with, or a blocktime asked."""

    def test_the_programs_own_blocktime(self):
        self.assertEqual(exec_inrun.own_spin_s({"KMP_BLOCKTIME": "1000"}, 2), 1.0)
        settle, note = exec_inrun.settle_time(0.004, 1.0, [(-1, 0, -1), (-1, 200, -1)])
        self.assertGreaterEqual(settle, 1.1)
        self.assertIsNone(note)
        self.assertAlmostEqual(exec_inrun.own_spin_s({"KMP_BLOCKTIME": "500ms"}, 2), 0.5)
        self.assertAlmostEqual(exec_inrun.own_spin_s({"KMP_BLOCKTIME": "2s"}, 2), 2.0)
        self.assertAlmostEqual(exec_inrun.own_spin_s({}, 2), 0.2)  # LLVM's default
        self.assertEqual(exec_inrun.own_spin_s({"OMP_WAIT_POLICY": "passive"}, 2), 0.0)
        self.assertEqual(exec_inrun.own_spin_s({"OMP_WAIT_POLICY": "active", "KMP_BLOCKTIME": "5"}, 2), 0.005)

    def test_a_blocktime_asked(self):
        settle, _ = exec_inrun.settle_time(0.004, 0.0, [(-1, 200, -1), (2, -1, -1)])
        self.assertAlmostEqual(settle, 0.22)
        settle, _ = exec_inrun.settle_time(0.004, 0.0, [(2, -1, -1)])
        self.assertEqual(settle, exec_inrun.MIN_SETTLE_S)
        settle, _ = exec_inrun.settle_time(0.3, 0.0, [])
        self.assertAlmostEqual(settle, 0.6)  # two units of work

    def test_a_spin_without_end_is_said(self):
        self.assertEqual(exec_inrun.own_spin_s({"OMP_WAIT_POLICY": "active"}, 2), math.inf)
        self.assertEqual(exec_inrun.own_spin_s({"OMP_WAIT_POLICY": "active"}, 1), math.inf)
        self.assertEqual(exec_inrun.own_spin_s({"KMP_BLOCKTIME": "infinite"}, 2), math.inf)
        settle, note = exec_inrun.settle_time(0.004, math.inf, [(-1, 200, -1)])
        self.assertAlmostEqual(settle, 0.22)
        self.assertIn("without end", note)

    def test_libgomp(self):
        self.assertEqual(exec_inrun.own_spin_s({"OMP_WAIT_POLICY": "passive"}, 1), 0.0)
        self.assertAlmostEqual(exec_inrun.own_spin_s({}, 1), 300000 * exec_inrun.GOMP_PAUSE_S)
        self.assertAlmostEqual(exec_inrun.own_spin_s({"GOMP_SPINCOUNT": "20M"}, 1), 20e6 * exec_inrun.GOMP_PAUSE_S)

    def test_the_environment_it_runs_with_not_only_env(self):
        # As tune --in-run builds it: the inherited KMP_BLOCKTIME=1000 (no --env) reaches the
        # executor's environment, and the settle time follows it.
        env = probe.environment({"PATH": "/bin", "KMP_BLOCKTIME": "1000"}, "/x/libthreadburn_probe.so", "/tmp/p",
                                "llvm", {}, "/x/libomp.so.5")
        ex = object.__new__(exec_inrun.InRunExecutor)
        ex.env, ex.unit_s, ex.ctl = env, 0.004, Fake(runtime=2)
        ex.set_settle([(-1, 0, -1)])
        self.assertGreaterEqual(ex.settle_s, 1.1)


class BlockFigures(unittest.TestCase):
    """A block's figures from two marks: 40 units ended between them, the
    first 2 ms after a's last one and the last at b's; 2 cores of CPU."""

    def executor(self, kind, metric=None, better="higher"):
        ex = object.__new__(exec_inrun.InRunExecutor)
        ex.cmd, ex.columns, ex.seed, ex.kind, ex.settle_s = ["prog"], probe.inrun_columns(
            {"counters": [], "context": {}}, ["OMP_NUM_THREADS"]), 1, kind, 0.2
        ex.options = type("O", (), {"metric_better": better})()
        ex.metric = metric
        ex.figure = bool(metric)
        ex.lines = []
        ex.commands, ex.dropped = {}, collections.Counter()
        return ex

    def spec(self):
        return RunSpec(TunePoint("T2", "gomp", {"OMP_NUM_THREADS": "2"}), 0, 0, 0)

    def marks(self):
        host = type("H", (), {"end": lambda self: (0.0, 1200.0, 0.0, 0.5)})()
        a = exec_inrun.Mark(units=100, last_ns=1_000_000_000, cpu_ns=0, sample_ns=1_000_000_000, host=host)
        b = exec_inrun.Mark(units=140, last_ns=1_400_000_000, cpu_ns=800_000_000, sample_ns=1_400_000_000, host=host)
        return a, b

    def test_the_time_and_cpu_a_unit_took(self):
        a, b = self.marks()
        row = self.executor("regions").row(self.spec(), a, b, "now", 0.6)
        self.assertEqual(row.status, "ok")
        self.assertEqual(row.units, 40)
        self.assertAlmostEqual(row.unit_ms, 10.0)      # 400 ms for 40 units
        self.assertAlmostEqual(row.unit_cpu_ms, 20.0)  # 2 cores x 10 ms
        self.assertAlmostEqual(row.block_ms, 400.0)
        self.assertEqual(row.text("OMP_NUM_THREADS"), "2")
        self.assertEqual((row.bench, row.grid, row.preset, row.phase), ("inrun", "tune", "", "race"))
        self.assertAlmostEqual(row.host_other_cpu_ms, 400.0)  # 1200 ms of the host's, 800 the program's

    def test_the_users_figure_and_its_cpu_per_unit(self):
        a, b = self.marks()
        ex = self.executor("lines", metric=True, better="higher")
        ex.lines = [(1_100_000_000, 90.0), (1_300_000_000, 110.0), (1_500_000_000, 5.0)]  # the last after b
        row = ex.row(self.spec(), exec_inrun.Mark(0, 1_000_000_000, 0, 1_000_000_000, a.host),
                     exec_inrun.Mark(2, 1_300_000_000, 800_000_000, 1_400_000_000, a.host), "now", 0.6)
        self.assertAlmostEqual(row.metric, 100.0)
        self.assertAlmostEqual(row.unit_cpu_ms, 2.0 / 100.0 * 1000)  # 2 cores over 100 units a second

    def test_the_cpu_of_every_steered_process(self):
        # Two processes, each read at its own samples: 400 ms of CPU in 400 ms (1 core) and
        # 100 ms in 200 ms (0.5 core): 1.5 cores over the block's 400 ms.
        a, b = self.marks()
        a = exec_inrun.Mark(a.units, a.last_ns, 0, a.sample_ns, a.host,
                            procs=((11, 0, 1_000_000_000), (12, 50_000_000, 1_000_000_000)))
        b = exec_inrun.Mark(b.units, b.last_ns, 400_000_000, b.sample_ns, b.host,
                            procs=((11, 400_000_000, 1_400_000_000), (12, 150_000_000, 1_200_000_000)))
        row = self.executor("regions").row(self.spec(), a, b, "now", 0.6)
        self.assertEqual(row.status, "ok")
        self.assertAlmostEqual(row.cpu_ms, 600.0)
        self.assertAlmostEqual(row.unit_cpu_ms, 15.0)  # 1.5 cores x 10 ms

    def test_a_process_that_joined_during_the_block_drops_it(self):
        a, b = self.marks()
        a = exec_inrun.Mark(a.units, a.last_ns, 0, a.sample_ns, a.host, procs=((11, 0, 1_000_000_000),))
        b = exec_inrun.Mark(b.units, b.last_ns, 0, b.sample_ns, b.host,
                            procs=((11, 400_000_000, 1_400_000_000), (13, 10_000_000, 1_400_000_000)))
        ex = self.executor("regions")
        row = ex.row(self.spec(), a, b, "now", 0.6)
        self.assertEqual(row.status, "skipped")
        self.assertIn("pid 13", row.reason)
        self.assertIn("joined", row.reason)
        self.assertIn("1 block dropped", ex.dropped_text())

    def test_no_positive_unit_time_drops_the_block(self):
        a, b = self.marks()
        for last in (a.last_ns, a.last_ns - 1000):  # the time of the last unit not after the one before
            ex = self.executor("waits")
            row = ex.row(self.spec(), a, exec_inrun.Mark(b.units, last, b.cpu_ns, b.sample_ns, b.host), "now", 0.6)
            self.assertEqual(row.status, "skipped")
            self.assertIn("no positive time a unit under T2", row.reason)
            self.assertIn("T2 1 (no positive unit time)", ex.dropped_text())

    def test_lines_that_came_in_a_burst_drop_the_block(self):
        a, b = self.marks()
        ex = self.executor("lines", metric=True, better="lower")
        ex.lines = [(1_300_000_000 + 2000 * i, 10.0) for i in range(20)]  # 20 lines within 40 us: a buffer
        row = ex.row(self.spec(), exec_inrun.Mark(0, 1_000_000_000, 0, 1_000_000_000, a.host),
                     exec_inrun.Mark(20, ex.lines[-1][0], 800_000_000, 1_400_000_000, a.host), "now", 0.6)
        self.assertEqual(row.status, "skipped")
        self.assertIn("burst", row.reason)

    def test_lines_as_units(self):
        # --progress lines: each line a unit of work, its figure the time between lines.
        a, _ = self.marks()
        ex = self.executor("lines")
        ex.lines = [(1_000_000_000 + 20_000_000 * i, 1.0) for i in range(1, 21)]
        row = ex.row(self.spec(), exec_inrun.Mark(0, 1_000_000_000, 0, 1_000_000_000, a.host),
                     exec_inrun.Mark(20, ex.lines[-1][0], 400_000_000, 1_400_000_000, a.host), "now", 0.6)
        self.assertEqual(row.status, "ok")
        self.assertIsNone(row.metric)
        self.assertAlmostEqual(row.unit_ms, 20.0)
        self.assertAlmostEqual(row.unit_cpu_ms, 20.0)  # 1 core x 20 ms

    def test_no_work_is_a_failed_block(self):
        a, _ = self.marks()
        row = self.executor("waits").row(self.spec(), a, a, "now", 10.0)
        self.assertEqual(row.status, "failed")
        self.assertIn("no waits ended", row.reason)


class Steering(unittest.TestCase):
    """A block waits until its setting is in effect in every steered process, alive: one that
    is not in time is dropped and named; processes beyond the probe's slots refuse the tune."""

    class Ctl:
        def __init__(self, procs, refused=0):
            self.procs_, self.refused, self.layout, self.request = procs, refused, {"max_procs": 16}, None

        def procs(self):
            return self.procs_

        def get(self, name):
            return {"refused": self.refused}.get(name, 0)

        def put(self, name, value):
            self.request = value

    def executor(self, procs, refused=0):
        ex = object.__new__(exec_inrun.InRunExecutor)
        ex.ctl = self.Ctl(procs, refused)
        ex.p = type("P", (), {"poll": lambda self: None})()
        ex.cmd, ex.columns, ex.seed, ex.kind, ex.settle_s, ex.block_s = ["prog"], probe.inrun_columns(
            {"counters": [], "context": {}}, ["OMP_NUM_THREADS"]), 1, "regions", 0.1, 0.2
        ex.options, ex.figure = type("O", (), {"metric_better": "higher"})(), False
        ex.index, ex.settings, ex.names = {"T2": 0}, {-1: None, 0: (2, -1, -1)}, {-1: "plain", 0: "T2"}
        ex.commands, ex.dropped = {}, collections.Counter()
        return ex

    def spec(self):
        point = TunePoint("T2", "gomp", {"OMP_NUM_THREADS": "2"})
        ex_key = point.base_key
        return RunSpec(point, 0, 0, 0), ex_key

    def test_a_setting_not_in_effect_everywhere_in_time_is_dropped_and_named(self):
        gone = subprocess.Popen(["true"])
        gone.wait()  # an ended process: its slot is not waited for
        me = os.getpid()
        procs = {me: {"pid": me, "applied": exec_inrun.NONE_APPLIED, "regions": 0},
                 gone.pid: {"pid": gone.pid, "applied": -1, "regions": 3}}
        ex = self.executor(procs)
        spec, key = self.spec()
        ex.index = {key: 0}
        t0 = time.monotonic()
        row = ex.block(spec)
        self.assertGreaterEqual(time.monotonic() - t0, 1.0)  # the timeout: max(1 s, a block)
        self.assertEqual(ex.ctl.request, 0)
        self.assertEqual(row.status, "skipped")
        self.assertIn(f"pid {me} (", row.reason)
        self.assertIn("none yet", row.reason)
        self.assertIn("a team of 2 (at the next omp_get_max_threads() answered or region forked)", row.reason)
        self.assertNotIn(f"pid {gone.pid}", row.reason)
        self.assertIn("T2 1 (its setting not in effect in time in every steered process)", ex.dropped_text())

    def test_a_process_still_under_another_setting_is_named_by_it(self):
        me = os.getpid()
        ex = self.executor({me: {"pid": me, "applied": -1, "regions": 1}})
        self.assertEqual(ex.pending(0), {me: -1})
        spec, key = self.spec()
        ex.index = {key: 0}
        ex.block_s = 0.01
        self.assertIn("still plain", ex.block(spec).reason)

    def test_every_process_is_named_with_its_command_line(self):
        me = os.getpid()
        ex = self.executor({me: {"pid": me, "applied": 0, "regions": 5, "why": 1}})
        text = ex.steered_text()
        self.assertIn("steering 1 process (", text)
        self.assertIn(f"pid {me} ({exec_inrun.command_line(me)}; from its first OpenMP region)", text)
        self.assertIn(os.path.basename(sys.executable), exec_inrun.command_line(me))

    def test_a_process_that_joins_later_is_named_once(self):
        me = os.getpid()
        ex = self.executor({me: {"pid": me, "applied": 0, "regions": 5, "why": 1}})
        ex.steered_text()
        self.assertIsNone(ex.joined_text())
        ex.ctl.procs_[1] = {"pid": 1, "applied": -2, "regions": 0, "why": 2}
        text = ex.joined_text()
        self.assertIn("steering 2 processes from now on: pid 1 (", text)
        self.assertIn("from its first device work) joined", text)
        self.assertIsNone(ex.joined_text())

    def test_regions_held_back_are_said(self):
        ex = self.executor({})
        self.assertIsNone(ex.held_back_text())
        ex.ctl.get = lambda name: {"held_back": 3}.get(name, 0)
        self.assertIn("3 regions kept another team than their block's", ex.held_back_text())

    def test_processes_beyond_the_slots_refuse_the_tune(self):
        ex = self.executor({1: {"pid": 1, "applied": 0, "regions": 5}}, refused=2)
        with self.assertRaisesRegex(Exception, "2 processes of your job reached the steady phase beyond"):
            ex.check_refused()
        self.executor({}, refused=0).check_refused()


class WarmUp(unittest.TestCase):
    """The warm-up with --metric waits for the program's lines: a training logs every few
    seconds, not every step."""

    def test_it_waits_for_three_lines(self):
        ex = object.__new__(exec_inrun.InRunExecutor)
        snap = {f: 0 for f in exec_inrun.SNAPSHOT}
        ex.ctl = type("C", (), {"snapshot": lambda self: snap, "get": lambda self, name: 0})()
        ex.p = type("P", (), {"poll": lambda self: None})()
        ex.options = type("O", (), {"metric": "x=(1)", "block": 0.3, "progress": None})()
        ex.metric, ex.lines, ex.env, ex.buffering = True, [], {}, []

        def log():  # three lines 0.4 s apart, the first 0.4 s in: after the 0.2 s asked
            for _ in range(3):
                time.sleep(0.4)
                ex.lines.append((time.monotonic_ns(), 1.0))
        t = threading.Thread(target=log)
        t.start()
        unit_s = ex.warm_up(0.2)
        t.join()
        self.assertEqual(ex.kind, "lines")
        self.assertAlmostEqual(unit_s, 0.4, delta=0.1)
        self.assertGreaterEqual(ex.block_s, exec_inrun.MIN_UNITS * 2 * unit_s)


class LineBuffered(unittest.TestCase):
    """The program's output made line-buffered for --metric, and lines read from a buffer found."""

    def test_the_variables_set_and_the_users_kept(self):
        env, said = exec_inrun.line_buffered({"LD_PRELOAD": "/x/probe.so"})
        self.assertEqual(env["PYTHONUNBUFFERED"], "1")
        if any(os.path.exists(p) for p in exec_inrun.STDBUF_LIBRARIES):
            self.assertEqual(env["_STDBUF_O"], "L")
            self.assertTrue(env["LD_PRELOAD"].startswith("/x/probe.so "))  # the probe stays first
            self.assertEqual(len(said), 2)
        env, said = exec_inrun.line_buffered({"PYTHONUNBUFFERED": "", "_STDBUF_O": "0"})
        self.assertEqual((env["PYTHONUNBUFFERED"], env["_STDBUF_O"], said), ("", "0", []))

    def test_lines_run_together_count_each(self):
        # Two ranks printing at once through an unbuffered Python: each print's text and its
        # newline are written apart, so their lines can run together.
        ex = object.__new__(exec_inrun.InRunExecutor)
        ex.p = type("P", (), {"stdout": io.StringIO("rank=0 step_ms=1.5rank=1 step_ms=2.5\n\nstep_ms=3\n")})()
        ex.log, ex.lines, ex.figure = io.StringIO(), [], True
        ex.metric = exec_inrun.re.compile(r"step_ms=([0-9.]+)")
        ex._read()
        self.assertEqual([v for _, v in ex.lines], [1.5, 2.5, 3.0])

    def test_bursts(self):
        self.assertFalse(exec_inrun.bursty([i * 10_000_000 for i in range(20)], 0.2))  # a line every 10 ms
        self.assertTrue(exec_inrun.bursty([i * 3_000 for i in range(20)], 0.2))  # 20 lines within 60 us of 0.2 s
        pairs = [(i // 2) * 10_000_000 + (i % 2) * 5_000 for i in range(20)]  # two ranks printing at once
        self.assertFalse(exec_inrun.bursty(pairs, 0.1))
        self.assertFalse(exec_inrun.bursty([i * 10_000 for i in range(20)], 0.0002))  # 20 lines in 0.2 ms: steps as short
        self.assertFalse(exec_inrun.bursty([0, 1, 2], 1.0))  # too few to tell

    def arrivals(self, env):
        """(the arrival times of a Python program's 12 lines printed 20 ms apart, the seconds it ran)."""
        code = "import time\nfor i in range(12):\n    print('step', i)\n    time.sleep(0.02)\n"
        t0 = time.monotonic()
        times = []
        with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env) as p:
            for _ in p.stdout:
                times.append(time.monotonic_ns())
        return times, time.monotonic() - t0

    def test_a_python_program_through_a_pipe(self):
        # Block-buffered as it is: its 12 lines come at its end, at once; line by line as set.
        plain = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "_STDBUF_O")}
        self.assertTrue(exec_inrun.bursty(*self.arrivals(plain)))
        env, _ = exec_inrun.line_buffered(plain)
        times, span = self.arrivals(env)
        self.assertFalse(exec_inrun.bursty(times, span))
        self.assertGreater((times[-1] - times[0]) / 1e9, 0.15)  # 11 gaps of 20 ms


class InRunFlags(unittest.TestCase):
    """--apply, --block and --progress mean something only with --in-run: an error without it."""

    def run_cli(self, *argv):
        from threadburn import cli
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            code = cli.main(["tune", *argv, "--", "true"])
        return code, err.getvalue()

    def test_the_executor_takes_a_frozen_value_not_the_namespace(self):
        # docs/design.md: an executor never gets the argparse namespace. --block and --progress
        # not given: their defaults in the value; given: theirs.
        from threadburn import cli
        from threadburn.commands import tune
        args = cli.parser().parse_args(["tune", "--in-run", "--env", "A=1", "--metric", "x=([0-9]+)", "--", "true"])
        o = tune.inrun_options(args, {"A": "1"})
        self.assertIsInstance(o, exec_inrun.InRunOptions)
        self.assertEqual((o.block, o.progress, o.metric, o.user_env), (tune.DEFAULT_BLOCK_S, "auto", "x=([0-9]+)",
                                                                        (("A", "1"),)))
        self.assertEqual((args.block, args.progress), (None, None))  # the namespace as parsed
        with self.assertRaises(AttributeError):  # dataclasses.FrozenInstanceError
            o.block = 2.0
        args = cli.parser().parse_args(["tune", "--in-run", "--block", "0.3", "--progress", "waits", "--", "true"])
        self.assertEqual((tune.inrun_options(args, {}).block, tune.inrun_options(args, {}).progress), (0.3, "waits"))

    def test_without_in_run(self):
        for flags, named in ((["--apply"], "--apply"), (["--block", "0.3"], "--block"),
                             (["--progress", "regions"], "--progress"), (["--apply", "--block", "1"], "--apply, --block")):
            code, err = self.run_cli(*flags)
            self.assertEqual(code, 2, flags)
            self.assertIn(f"{named}: only with --in-run", err)

    def test_lines_as_units_need_the_regex(self):
        code, err = self.run_cli("--in-run", "--progress", "lines")
        self.assertEqual(code, 2)
        self.assertIn("--progress lines", err)
        self.assertIn("--metric", err)


Block = collections.namedtuple("Block", "name time time_kind")


class UnitSpread(unittest.TestCase):
    """A unit's time from block to block of one setting, on blocks of known spread."""

    def blocks(self, name, times, kind="unit_ms"):
        return [Block(name, t, kind) for t in times]

    def test_units_of_one_size_give_no_note(self):
        # Two settings 2x apart, each block within 2 % of its setting's 1.0 or 0.5 ms.
        blocks = self.blocks("plain", [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]) + \
            self.blocks("T2", [0.5, 0.51, 0.49, 0.505, 0.495, 0.5])
        self.assertAlmostEqual(advice.unit_spread(blocks), 0.01, delta=0.005)
        self.assertIsNone(advice.unit_spread_note(blocks, "regions"))

    def test_units_of_two_sizes_by_phase_give_the_note(self):
        # A program that alternates phases of small and 3x larger regions: a block's unit is
        # 1 or 3 ms under either setting, whatever the setting does: sqrt(3) - 1 off its median.
        blocks = self.blocks("plain", [1.0, 3.0, 1.0, 3.0, 1.0, 3.0]) + \
            self.blocks("T2", [0.5, 1.5, 0.5, 1.5, 0.5, 1.5])
        self.assertAlmostEqual(advice.unit_spread(blocks), 3 ** 0.5 - 1, places=6)
        note = advice.unit_spread_note(blocks, "regions")
        self.assertIn("73% more or less", note)
        self.assertIn("--metric", note)

    def test_no_note_for_the_users_figure_or_too_few_blocks(self):
        self.assertIsNone(advice.unit_spread(self.blocks("plain", [1.0, 3.0, 1.0, 3.0], kind="metric")))
        self.assertIsNone(advice.unit_spread(self.blocks("plain", [1.0]) + self.blocks("T2", [3.0])))


if __name__ == "__main__":
    unittest.main()
