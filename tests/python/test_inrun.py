"""The pieces of an in-run tune (engine/exec_inrun.py) on made-up inputs:
the control block's layout as the probe describes it (the build's own
describe.json when there is a build), its seqlock, the settings an in-run
tune tries for what the probe saw, and a block's figures from two marks
of known work and CPU, and the note where the units counted differ in size."""
import collections
import sys
import threading
import unittest

import helpers
from threadburn.engine import exec_inrun
from threadburn.engine.campaign import RunSpec
from threadburn.engine.points import TunePoint
from threadburn.lib import probe

# A layout as the probe's describe.json gives it (src/probe/inrun.h): the test's own, so that
# it runs without a build; the build's is checked against the same fields below.
FIELDS = ("magic version owner_pid n_settings settings request seq sample_ns cpu_ns regions region_end_ns waits "
          "wait_end_ns launches launch_end_ns applied applied_ns steady_ns runtime team_seen free_regions cuda_rc "
          "ended").split()


def layout(max_settings=4):
    fields, at = {}, 0
    for name in FIELDS:
        fields[name] = at
        at += 8 * 3 * max_settings if name == "settings" else 8
    return {"variable": "THREADBURN_INRUN", "magic": 7, "version": 1, "size": at, "max_settings": max_settings,
            "setting_size": 24, "setting_fields": {"team": 0, "blocktime_ms": 8, "cuda_flags": 16}, "fields": fields}


class Fake:
    """What the probe saw, as Control.get answers it."""

    def __init__(self, **values):
        self.values = values

    def get(self, name):
        return self.values.get(name, 0)


class ControlBlock(helpers.TempDir, unittest.TestCase):
    def test_settings_and_request_land_where_the_probe_reads_them(self):
        c = exec_inrun.Control(self.path("c.bin"), layout())
        self.assertEqual((c.get("magic"), c.get("version"), c.get("request")), (7, 1, -1))
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

    @unittest.skipUnless(helpers.real_build_dir(), "needs the build's probe")
    def test_the_probes_layout_has_these_fields(self):
        desc = probe.describe(helpers.real_build_dir())["inrun"]
        self.assertEqual(set(desc["fields"]), set(FIELDS))
        self.assertEqual(desc["setting_size"], 24)
        c = exec_inrun.Control(self.path("real.bin"), desc)
        c.set_settings([(2, -1, -1)])
        self.assertEqual(c.get("n_settings"), 1)
        c.close()


class Points(unittest.TestCase):
    def names(self, **seen):
        points, settings, left = exec_inrun.observed_points(Fake(**seen), {}, "gomp", cpus=4, physical=2)
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

    def test_blocktimes_under_llvm_only(self):
        names, settings, _ = self.names(regions=5, free_regions=0, runtime=2)
        self.assertEqual(names, ["plain", "llvm-bt0", "llvm-bt1"])  # 200, LLVM's own, not tried again
        self.assertEqual(settings[1:], [(-1, 0, -1), (-1, 1, -1)])
        names, _, left = self.names(regions=5, free_regions=0, runtime=1)
        self.assertNotIn("llvm-bt0", names)
        self.assertIn("LLVM's blocktime", left)

    def test_wait_policies_for_a_program_that_uses_the_driver(self):
        names, settings, _ = self.names(waits=3)
        self.assertEqual(names, ["plain", "cuda-spin", "cuda-yield", "cuda-blocking_sync"])
        self.assertEqual(settings[1:], [(-1, -1, 1), (-1, -1, 2), (-1, -1, 4)])
        points, _, _ = exec_inrun.observed_points(Fake(waits=3), {probe.CUDA_SYNC: "spin"}, "gomp", 2, 2)
        self.assertNotIn("cuda-spin", [p.name for p in points])  # the user's own policy is plain's


class BlockFigures(unittest.TestCase):
    """A block's figures from two marks: 40 units ended between them, the
    first 2 ms after a's last one and the last at b's; 2 cores of CPU."""

    def executor(self, kind, metric=None, better="higher"):
        ex = object.__new__(exec_inrun.InRunExecutor)
        ex.cmd, ex.columns, ex.seed, ex.kind, ex.settle_s = ["prog"], probe.inrun_columns(
            {"counters": [], "context": {}}, ["OMP_NUM_THREADS"]), 1, kind, 0.2
        ex.options = type("O", (), {"metric_better": better})()
        ex.metric = metric
        ex.lines = []
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

    def test_no_work_is_a_failed_block(self):
        a, _ = self.marks()
        row = self.executor("waits").row(self.spec(), a, a, "now", 10.0)
        self.assertEqual(row.status, "failed")
        self.assertIn("no waits ended", row.reason)


Block = collections.namedtuple("Block", "name time time_kind")


class UnitSpread(unittest.TestCase):
    """A unit's time from block to block of one setting, on blocks of known spread."""

    def blocks(self, name, times, kind="unit_ms"):
        return [Block(name, t, kind) for t in times]

    def test_units_of_one_size_give_no_note(self):
        # Two settings 2x apart, each block within 2 % of its setting's 1.0 or 0.5 ms.
        blocks = self.blocks("plain", [1.0, 1.02, 0.98, 1.01, 0.99, 1.0]) + \
            self.blocks("T2", [0.5, 0.51, 0.49, 0.505, 0.495, 0.5])
        self.assertAlmostEqual(exec_inrun.unit_spread(blocks), 0.01, delta=0.005)
        self.assertIsNone(exec_inrun.unit_spread_note(blocks, "regions"))

    def test_units_of_two_sizes_by_phase_give_the_note(self):
        # A program that alternates phases of small and 3x larger regions: a block's unit is
        # 1 or 3 ms under either setting, whatever the setting does: sqrt(3) - 1 off its median.
        blocks = self.blocks("plain", [1.0, 3.0, 1.0, 3.0, 1.0, 3.0]) + \
            self.blocks("T2", [0.5, 1.5, 0.5, 1.5, 0.5, 1.5])
        self.assertAlmostEqual(exec_inrun.unit_spread(blocks), 3 ** 0.5 - 1, places=6)
        note = exec_inrun.unit_spread_note(blocks, "regions")
        self.assertIn("73% more or less", note)
        self.assertIn("--metric", note)

    def test_no_note_for_the_users_figure_or_too_few_blocks(self):
        self.assertIsNone(exec_inrun.unit_spread(self.blocks("plain", [1.0, 3.0, 1.0, 3.0], kind="metric")))
        self.assertIsNone(exec_inrun.unit_spread(self.blocks("plain", [1.0]) + self.blocks("T2", [3.0])))


if __name__ == "__main__":
    unittest.main()
