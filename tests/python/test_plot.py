"""`threadburn plot` (python/threadburn/commands/plot.py, figures.py) and the one
timeline reader (timeline.py), on fixtures/plot_results.csv
(12 optimizer_step settings x 2 repetitions, 3 of them with timeline files; no
processes > 1, so no oversubscription.png) and oversub_results.csv
(processes 1, 2, 4): which PNGs, and one-line errors."""
import importlib.util
import os
import shutil
import tempfile
import unittest

import helpers
from threadburn.export import drawing, figures
from threadburn.lib import timeline
from threadburn.lib.errors import ThreadburnError

HAVE_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None
RESULTS = os.path.join(helpers.FIXTURES, "plot_results.csv")
OVERSUB = os.path.join(helpers.FIXTURES, "oversub_results.csv")
TIMELINE = os.path.join(helpers.FIXTURES, "plot_timelines", "llvm_t2_bt200.timeline.csv")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
OPT = "optimizer_step_sgd_params_4000000_gap_ms_300"
TRAIN = "train_step_mnist_adadelta_preload_0_batch_64_workers_0_loader_torch_mkldnn_1_gap_ms_0"


class PureParts(unittest.TestCase):
    def test_pareto_front(self):
        points = [(10, 200, "a"), (10, 7, "b"), (12, 0, "c"), (18, 0, "d"), (11, 50, "e")]
        self.assertEqual([p[2] for p in figures.pareto_front(points)], ["b", "c"])

    def test_sort_key_orders_unset_numbers_words(self):
        self.assertEqual(sorted(["infinite", "200", "unset", "50", "0"], key=figures.sort_key),
                         ["unset", "0", "50", "200", "infinite"])

    def test_slug(self):
        self.assertEqual(figures.slug("optimizer_step/sgd/params:4000000/gap_ms:300/manual_time"), OPT)

    def test_moving_mean_of_short_runs(self):
        # Two samples (a run shorter than a few sampler periods: `threadburn run`
        # of a 20 ms program, seen by the install test) have one interval.
        self.assertEqual(drawing.moving_mean([(0.0, 1.0), (5.0, 3.0)], 10), [(0.0, 2.0), (5.0, 2.0)])
        self.assertEqual(drawing.moving_mean([(0.0, 1.0), (5.0, 3.0), (10.0, 5.0)], 0), [(0.0, 1.0), (5.0, 3.0), (10.0, 5.0)])

    def test_timeline_reading_and_window(self):
        tl = timeline.read(TIMELINE)
        self.assertEqual(tl.meta, {"version": "1", "origin": "step_end"})
        self.assertEqual(tl.marks(), {"step_start": -10.0, "step_end": 0.0})
        self.assertEqual(sorted(tl), ["main", "others", "step_end", "step_start"])
        self.assertEqual(drawing.last_busy(tl), 199.0)  # busy 0..200 ms, 1 ms samples
        low, high = drawing.timeline_limits([tl])
        self.assertAlmostEqual(low, -10 - 0.15 * 209, places=9)
        self.assertAlmostEqual(high, 199 + 0.3 * 209, places=9)

    def test_the_window_follows_the_files_own_burn_threshold(self):
        # 1 core for 0..100 ms, then 0.3 core until 300 ms: a header threshold of
        # 0.5 ends the burn at 100 ms, 0.05 (the programs' rule) at 300 ms; a file
        # without the key (older writers) counts any CPU as burn.
        body = "t_ms,series,cores\n-10,step_start,0\n0,step_end,0\n"
        body += "".join(f"{t},others,{1.0 if t <= 100 else 0.3}\n" for t in range(1, 301))
        body += "".join(f"{t},others,0\n" for t in range(301, 1001))
        for header, last in (("; burn_threshold_cores=0.5", 100.0), ("; burn_threshold_cores=0.05", 300.0),
                             ("", 300.0)):
            with self.subTest(header=header):
                with tempfile.TemporaryDirectory() as d:
                    tl = timeline.read(helpers.write_file(os.path.join(d, "t.csv"), "# threadburn timeline 1; "
                                                          "origin=step_end" + header + "\n" + body))
                    self.assertEqual(drawing.last_busy(tl), last)
                    self.assertAlmostEqual(drawing.timeline_limits([tl])[1], last + 0.3 * (last + 10), places=9)


class TimelineFormat(helpers.TempDir, unittest.TestCase):
    def test_series_threads_quotes_and_meta(self):
        path = helpers.write_file(self.path("t.csv"), "# threadburn timeline 1; origin=monitor_start; "
                                  "t0_unix_ms=1000\nt_ms,series,cores\n2,process,1.5\n1,process,0.5\n"
                                  '2,"thread:7:a,b",1.0\n2,thread:8:tb-omp-1,0.5\n')
        tl = timeline.read(path)
        self.assertEqual(tl.meta["t0_unix_ms"], "1000")
        self.assertEqual(tl["process"], ([1.0, 2.0], [0.5, 1.5]))  # in time order
        self.assertEqual(tl.threads(), {"thread:7:a,b": ("7", "a,b"), "thread:8:tb-omp-1": ("8", "tb-omp-1")})
        self.assertEqual(tl.marks(), {})

    def test_legacy_monitor_recording(self):
        path = helpers.write_file(self.path("m.csv"), "unix_ms,t_ms,dt_ms,tid,name,cpu_ms,cores,threads,change\n"
                                  "1669214839551,60.000,2.000,0,[process],1.000,0.5,3,\n"
                                  "1669214839551,60.000,2.000,101,tb-omp-1,1.000,0.5,3,new\n")
        tl = timeline.read(path)
        self.assertEqual(tl["process"], ([60.0], [0.5]))
        self.assertEqual(tl.threads(), {"thread:101:tb-omp-1": ("101", "tb-omp-1")})
        self.assertEqual(tl.meta["t0_unix_ms"], str(1669214839551 - 60))

    def test_not_a_timeline(self):
        path = helpers.write_file(self.path("x.csv"), "a,b\n1,2\n")
        with self.assertRaisesRegex(ThreadburnError, "not a threadburn timeline"):
            timeline.read(path)
        path = helpers.write_file(self.path("y.csv"), "t_ms,series,cores\n1,others\n")
        with self.assertRaisesRegex(ThreadburnError, "malformed row"):
            timeline.read(path)

    def test_interval_rows_take_dt_from_the_sample_clock(self):
        tl = timeline.Timeline({"process": ([1.0, 3.0], [1.0, 1.0]), "thread:1:x": ([3.0], [0.5])}, {})
        self.assertEqual(drawing.interval_rows(tl, "thread:1:x", tl["process"][0]), [(3.0, 2.0, 1.0)])


@unittest.skipUnless(HAVE_MATPLOTLIB, "matplotlib is not installed for this interpreter")
class Pictures(helpers.TempDir, unittest.TestCase):
    def assert_png(self, path):
        with open(path, "rb") as f:
            self.assertEqual(f.read(8), PNG_MAGIC, path)
        self.assertGreater(os.path.getsize(path), 5000, path)

    def test_heatmaps_pareto_and_timelines(self):
        result = helpers.threadburn("plot", RESULTS, "--out-dir", self.tmp, "--timeline", TIMELINE)
        self.assertEqual(result.returncode, 0, result.stderr)
        names = sorted(os.listdir(self.tmp))
        self.assertEqual(names, [
            f"heatmap_residual_cpu_ms_{OPT}.png",
            f"heatmap_step_ms_{OPT}.png",
            "pareto.png",
            "timeline_llvm_t2_bt200.png",  # the --timeline file, on its own
            f"timeline_{OPT}.png"])
        for name in names:
            self.assert_png(self.path(name))
        self.assertEqual(sorted(result.stdout.split()), [self.path(n) for n in names])

    def test_default_out_dir_is_next_to_the_csv(self):
        csv_path = self.path("r.csv")
        shutil.copy(RESULTS, csv_path)
        shutil.copytree(os.path.join(helpers.FIXTURES, "plot_timelines"), self.path("plot_timelines"))
        result = helpers.threadburn("plot", csv_path)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(sorted(os.listdir(self.path("r.plots"))), [
            f"heatmap_residual_cpu_ms_{OPT}.png", f"heatmap_step_ms_{OPT}.png", "pareto.png", f"timeline_{OPT}.png"])

    def test_oversubscription_figure_when_processes_exceed_one(self):
        result = helpers.threadburn("plot", OVERSUB, "--out-dir", self.tmp)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assert_png(self.path("oversubscription.png"))
        self.assertIn(self.path("oversubscription.png"), result.stdout.split())
        # one heatmap pair per workload: the train_step settings alone and with 2 processes
        # (4 processes has a single setting: no heatmap); CPU runs carry no cuda_sync label
        self.assertEqual(sorted(os.listdir(self.tmp)), sorted([
            f"heatmap_residual_cpu_ms_{TRAIN}.png", f"heatmap_step_ms_{TRAIN}.png",
            f"heatmap_residual_cpu_ms_{TRAIN}_2_processes.png", f"heatmap_step_ms_{TRAIN}_2_processes.png",
            "oversubscription.png", "pareto.png"]))

    def test_tune_file(self):
        """Runs of a command (threadburn tune, run: no steps): tune.png, the
        time of each setting against its CPU; nothing else."""
        from threadburn.lib import schema
        columns = schema.Columns.from_parts(["OMP_WAIT_POLICY"], ("command",), ("wall_ms", "cpu_ms", "metric"), [])
        lines = [",".join(columns.all)]
        for point, policy, status in (("plain", "unset", "ok"), ("passive", "passive", "ok"),
                                      ("bad", "active", "failed")):
            for rep in range(3):
                row = {"schema_version": schema.SCHEMA_VERSION, "run_key": f"{point}-r{rep}", "status": status,
                       "study": point, "benchmark": "python3", "bench": "command", "runtime": "gomp",
                       "OMP_WAIT_POLICY": policy, "command": "python3 t.py", "repetition": rep,
                       "wall_ms": 1000 + rep, "cpu_ms": 900 + rep}
                lines.append(",".join(schema.fmt_value(row.get(c)) for c in columns.all))
        csv_path = helpers.write_file(self.path("tune.csv"), "\n".join(lines) + "\n")
        result = helpers.threadburn("plot", csv_path)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(os.listdir(self.path("tune.plots")), ["tune.png"])
        self.assert_png(self.path("tune.plots", "tune.png"))
        failed = helpers.write_file(self.path("failed.csv"), "\n".join(
            [lines[0]] + [ln.replace(",ok,", ",failed,", 1) for ln in lines[1:]]) + "\n")
        result = helpers.threadburn("plot", failed, "--out-dir", self.path("f"))
        self.assertEqual((result.returncode, result.stdout), (0, "plot: nothing to plot (no ok runs)\n"))

    def test_nothing_to_plot(self):
        csv_path = self.path("failed.csv")
        with open(RESULTS) as f:
            lines = f.read().splitlines()
        helpers.write_file(csv_path, "\n".join([lines[0]] + [ln.replace(",ok,", ",failed,", 1) for ln in lines[1:]])
                           + "\n")
        result = helpers.threadburn("plot", csv_path, "--out-dir", self.tmp)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout, "plot: nothing to plot (no ok rows with step_ms)\n")

    def test_bad_input_is_one_line(self):
        bad = helpers.write_file(self.path("bad.csv"), "a,b\n1,2\n")
        result = helpers.threadburn("plot", bad, "--out-dir", self.tmp)
        helpers.assert_one_line_error(self, result, f"threadburn plot: error: {bad}: missing columns: status, "
                                      "benchmark, runtime, step_ms, residual_cpu_ms, OMP_NUM_THREADS")
        result = helpers.threadburn("plot", self.path("none.csv"), "--out-dir", self.tmp)
        helpers.assert_one_line_error(self, result, "none.csv: cannot read: No such file or directory")
        result = helpers.threadburn("plot")
        helpers.assert_one_line_error(self, result, "give a results CSV and/or --timeline FILE")
        result = helpers.threadburn("plot", "--timeline", TIMELINE)
        helpers.assert_one_line_error(self, result, "--out-dir is needed without a results CSV")
        result = helpers.threadburn("plot", "--timeline", bad, "--out-dir", self.tmp)
        helpers.assert_one_line_error(self, result, f"threadburn plot: error: {bad}: ")


class WithoutMatplotlib(helpers.TempDir, unittest.TestCase):
    def test_one_line_error(self):
        os.makedirs(self.path("matplotlib"))
        helpers.write_file(self.path("matplotlib", "__init__.py"), "raise ImportError('hidden for the test')\n")
        result = helpers.threadburn("plot", RESULTS, "--out-dir", self.tmp, env=helpers.clean_env(PYTHONPATH=self.tmp),
                                    launcher=True)  # a new interpreter's imports
        helpers.assert_one_line_error(self, result, "threadburn plot: error: matplotlib is missing for this "
                                      "interpreter; threadburn runs Debian's /usr/bin/python3")


if __name__ == "__main__":
    unittest.main()
