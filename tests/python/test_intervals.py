"""The exact monitor's intervals file as run reads it (python/threadburn/
intervals.py): the waits by class of thread and by who held the CPU, the
waits caused in other processes, and the command that runs a command beside
the monitor, against a file whose sums are known."""
import os
import tempfile
import unittest

import helpers  # noqa: F401  (puts the package on the path)
from threadburn.lib import intervals
from threadburn.lib.errors import ThreadburnError

FILE = """# threadburn intervals 1; origin=monitor_start; source=sched_events; t0_unix_ms=1.000; t0_mono_ms=2.000; pid=100; monitor_pid=9
kind,tid,pid,name,cpu,start_us,end_us,holder_tid,holder_pid,holder_name,holder
known,100,100,python3,,0.000,0.000,,,,
run,101,100,python3,1,0.000,5000.000,,,,
wait,101,100,python3,1,5000.000,7500.000,7,7,cc1plus,other
wait,101,100,python3,1,7500.000,8000.000,100,100,python3,same_process
wait,100,100,python3,0,1000.000,1250.000,0,0,idle,idle
wait,102,100,tb-sampler,0,2000.000,2100.000,100,100,python3,same_process
caused,7,7,cc1plus,1,9000.000,12000.000,101,100,python3,tree
caused,8,8,"a,b",1,12000.000,12500.500,101,100,python3,tree
sleep,100,100,python3,,1250.000,9000.000,,,,
"""


class Figures(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.path = os.path.join(self.tmp.name, "m.intervals.csv")
        with open(self.path, "w") as f:
            f.write(FILE)

    def tearDown(self):
        self.tmp.cleanup()

    def test_waits_by_class_and_holder_and_what_was_caused(self):
        fig = intervals.figures(self.path, {100: "main", 101: "omp", 102: "sampler"})
        self.assertAlmostEqual(fig["wait"]["omp"]["other"], 2.5)
        self.assertAlmostEqual(fig["wait"]["omp"]["same_process"], 0.5)
        self.assertAlmostEqual(fig["wait"]["main"]["idle"], 0.25)
        self.assertAlmostEqual(fig["caused"], 3.5005)
        self.assertAlmostEqual(fig["caused_by"]["cc1plus (7)"], 3.0)
        self.assertAlmostEqual(fig["caused_by"]["a,b (8)"], 0.5005)
        c = intervals.counters(fig)
        # The probe's sampler is counted apart, as the probe's wait_ms leaves it out.
        self.assertEqual(c["exact_wait_ms"], 3.25)
        self.assertEqual(c["exact_wait_sampler_ms"], 0.1)
        self.assertEqual(c["exact_wait_behind_other_ms"], 2.5)
        self.assertEqual(c["exact_wait_behind_same_process_ms"], 0.5)
        self.assertEqual(c["exact_wait_omp_ms"], 3.0)
        self.assertEqual(c["caused_wait_ms"], round(3.5005, 3))

    def test_a_thread_without_a_class_is_other(self):
        fig = intervals.figures(self.path, {})
        self.assertAlmostEqual(sum(fig["wait"]["other"].values()), 3.35)

    def test_the_monitor_runs_without_the_probe_the_command_with_it(self):
        env = {"PATH": "/usr/bin", "LD_PRELOAD": "/x/probe.so", "THREADBURN_PROBE_DIR": "/out",
               "THREADBURN_PROBE_GAP_MIN_US": "1000", "OMP_NUM_THREADS": "2"}
        try:
            cmd, own = intervals.beside(["python3", "train.py"], env, "/out/monitor")
        except ThreadburnError as e:  # no build: the monitor program is not there
            self.skipTest(str(e))
        self.assertEqual(own, {"PATH": "/usr/bin", "OMP_NUM_THREADS": "2"})
        at = cmd.index("/usr/bin/env")
        self.assertEqual(cmd[at + 1:], ["LD_PRELOAD=/x/probe.so", "THREADBURN_PROBE_DIR=/out",
                                        "THREADBURN_PROBE_GAP_MIN_US=1000", "python3", "train.py"])
        self.assertIn("--mode=exact", cmd)
        self.assertIn("--summary_file=/out/monitor.txt", cmd)


if __name__ == "__main__":
    unittest.main()
