"""scripts/plot.py on tests/python/fixtures/plot_results.csv (12 optimizer_step
settings x 2 repetitions, 3 of them with timeline files; no processes > 1, so
no oversubscription.png) and oversub_results.csv (processes 1, 2, 4)."""
import importlib.util
import os
import shutil
import tempfile
import unittest

import helpers
import plot

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

RESULTS = os.path.join(helpers.FIXTURES, "plot_results.csv")
TIMELINE = os.path.join(helpers.FIXTURES, "plot_timelines", "llvm_t2_bt200.timeline.csv")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class PureParts(unittest.TestCase):
    def test_pareto_front(self):
        points = [(10, 200, "a"), (10, 7, "b"), (12, 0, "c"), (18, 0, "d"), (11, 50, "e")]
        self.assertEqual([p[2] for p in plot.pareto_front(points)], ["b", "c"])

    def test_sort_key_orders_unset_numbers_words(self):
        self.assertEqual(sorted(["infinite", "200", "unset", "50", "0"], key=plot.sort_key),
                         ["unset", "0", "50", "200", "infinite"])

    def test_timeline_reading_and_window(self):
        series, markers = plot.read_timeline(TIMELINE)
        self.assertEqual(markers, {"step_start": -10.0, "step_end": 0.0})
        self.assertEqual(sorted(series), ["main", "others"])
        self.assertEqual(plot.last_busy(series["others"]), 199.0)  # busy 0..200 ms, 1 ms samples
        low, high = plot.timeline_limits([(series, markers, "x")])
        self.assertAlmostEqual(low, -10 - 0.15 * 209, places=9)
        self.assertAlmostEqual(high, 199 + 0.3 * 209, places=9)


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed for this interpreter")
class Pictures(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tb-plot-")

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def assert_png(self, path):
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), PNG_MAGIC)
        self.assertGreater(os.path.getsize(path), 5000)

    def test_results_csv_gives_heatmaps_pareto_timeline(self):
        result = helpers.run_script("plot.py", RESULTS, "--out-dir", self.tmp,
                                    "--timeline", TIMELINE)
        self.assertEqual(result.returncode, 0, result.stderr)
        names = sorted(os.listdir(self.tmp))
        self.assertEqual(names, [
            "heatmap_residual_cpu_ms_optimizer_step_sgd_params_4000000_gap_ms_300.png",
            "heatmap_step_ms_optimizer_step_sgd_params_4000000_gap_ms_300.png",
            "pareto.png",
            "timeline_llvm_t2_bt200.png",  # the --timeline file, on its own
            "timeline_optimizer_step_sgd_params_4000000_gap_ms_300.png"])
        for name in names:
            self.assert_png(os.path.join(self.tmp, name))
        self.assertEqual(sorted(result.stdout.split()), [os.path.join(self.tmp, n) for n in names])

    def test_default_out_dir_is_next_to_the_csv(self):
        csv_path = os.path.join(self.tmp, "r.csv")
        shutil.copy(RESULTS, csv_path)
        shutil.copytree(os.path.join(helpers.FIXTURES, "plot_timelines"),
                        os.path.join(self.tmp, "plot_timelines"))
        result = helpers.run_script("plot.py", csv_path)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(len(os.listdir(os.path.join(self.tmp, "r.plots"))), 4)

    def test_oversubscription_figure_when_processes_exceed_one(self):
        fixture = os.path.join(helpers.FIXTURES, "oversub_results.csv")
        result = helpers.run_script("plot.py", fixture, "--out-dir", self.tmp)
        self.assertEqual(result.returncode, 0, result.stderr)
        path = os.path.join(self.tmp, "oversubscription.png")
        self.assertIn(path, result.stdout.split())
        self.assert_png(path)
        self.assertEqual([n for n in os.listdir(self.tmp) if n.startswith("oversub")],
                         ["oversubscription.png"])

    def test_bad_csv_exits_2(self):
        bad = helpers.write_file(os.path.join(self.tmp, "bad.csv"), "a,b\n1,2\n")
        result = helpers.run_script("plot.py", bad, "--out-dir", self.tmp)
        self.assertEqual(result.returncode, 2)
        self.assertIn("missing columns: status, benchmark", result.stderr)


class WithoutMatplotlib(unittest.TestCase):
    def test_one_line_error(self):
        with tempfile.TemporaryDirectory() as tmp:
            os.makedirs(os.path.join(tmp, "matplotlib"))
            helpers.write_file(os.path.join(tmp, "matplotlib", "__init__.py"),
                               "raise ImportError('hidden for the test')\n")
            env = helpers.clean_env(PYTHONPATH=tmp)
            result = helpers.run_script("plot.py", RESULTS, "--out-dir", tmp, env=env)
        self.assertEqual(result.returncode, 2)
        self.assertEqual(result.stderr.count("\n"), 1)
        self.assertTrue(result.stderr.startswith("plot: matplotlib is missing for "))


if __name__ == "__main__":
    unittest.main()
