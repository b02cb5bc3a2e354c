"""Feed flags as settings (docs/design.md, Setting and workload): a grid's
`settings` makes program flags (preload, workers, pin_memory, cuda_sync, ...)
settings compared within one workload, against the program's defaults.

Known answers: rows chosen so that the grouping and the verdict are known
(a workers value 30 % faster in every round is the change; the same rows
without the layout's settings field are one workload per workers value, as
before the field), the grid's refusals, the CUDA grid's workloads and
settings counted from its own studies, and a sweep of the test double
(fake_model.py: each loader worker adds 0.5 ms to a 16 ms step, so workers
2 is 6 % slower than the default, workers 0)."""
import json
import os
import types
import unittest

import helpers
from threadburn.analysis import verdicts
from threadburn.commands import sweep as sweepcmd
from threadburn.lib import grid, keys, programs, rule as rules
from threadburn.lib.records import Row

NAME = "train_step/mnist_adadelta/preload:{p}/batch:64/workers:{w}/loader:torch/mkldnn:1/gap_ms:0"
FLAGS = "gap_ms steps model batch workers preload loader mkldnn cuda_sync"
WITH = f"env=OMP_NUM_THREADS;flags={FLAGS};settings=preload:0 workers:0 cuda_sync:auto"
WITHOUT = f"env=OMP_NUM_THREADS;flags={FLAGS}"
FIXED = rules.Rule(design="fixed").text()


def row(workers="0", preload="0", layout=WITH, run="a-r0", rnd=0, step=20.0, cpu=20.0, **more):
    """One ok row of a CUDA-less train_step run: loop = step_ms + gap_slept_ms (0)."""
    cells = dict(status="ok", run_key=run, point_key=run.split("-")[0], round=str(rnd), phase="race", grid="g",
                 study="s", bench="train_step", runtime="gomp", OMP_NUM_THREADS="unset", processes="1",
                 benchmark=NAME.format(p=preload, w=workers) + "/iterations:5/manual_time", gap_ms="0", steps="5",
                 model="mnist_adadelta", batch="64", workers=workers, preload=preload, loader="torch", mkldnn="1",
                 cuda_sync="auto", step_ms=repr(step), step_cpu_ms=repr(cpu), residual_cpu_ms="0",
                 gap_slept_ms="0", loop_counters="step_ms gap_slept_ms", knob_layout=layout, rule=FIXED)
    cells.update(more)
    return Row(cells)


class Keys(unittest.TestCase):
    def test_a_setting_flags_component_leaves_the_workload(self):
        base, two, pre = row(), row(workers="2"), row(preload="1")
        self.assertEqual(keys.workload_of(base).benchmark,
                         "train_step/mnist_adadelta/batch:64/loader:torch/mkldnn:1/gap_ms:0/iterations:5/manual_time")
        self.assertEqual(keys.workload_of(base), keys.workload_of(two))
        self.assertEqual(keys.workload_of(base), keys.workload_of(pre))
        self.assertEqual([keys.setting_of(r).label for r in (base, two, pre)],
                         ["gomp (no env)", "gomp (no env) workers=2", "gomp (no env) preload=1"])
        self.assertEqual([keys.setting_of(r).is_default for r in (base, two, pre)], [True, False, False])
        # --baseline preload=1: the preloaded setting is the baseline; the default then sets preload=0
        self.assertEqual([keys.setting_of(r).is_baseline({"preload": "1"}) for r in (base, two, pre)],
                         [False, False, True])
        self.assertEqual(keys.setting_of(base).flags_to_set({"preload": "1"}), (("preload", "0"),))
        self.assertEqual(keys.setting_of(two).flags_to_set(), (("workers", "2"),))
        # A flag not in the settings stays in the workload: another batch is another workload.
        self.assertNotEqual(keys.workload_of(base), keys.workload_of(row(batch="16")))

    def test_files_without_the_field_keep_one_workload_per_value(self):
        base, two = row(layout=WITHOUT), row(workers="2", layout=WITHOUT)
        self.assertNotEqual(keys.workload_of(base), keys.workload_of(two))
        self.assertEqual(keys.setting_of(base), keys.setting_of(two))
        spin = row(layout=WITHOUT, cuda_sync="spin")  # cuda_sync: the one setting flag they had
        self.assertEqual(keys.workload_of(spin), keys.workload_of(base))
        self.assertEqual(keys.setting_of(spin).label, "gomp (no env) cuda_sync=spin")

    def test_the_layout_says_which_flags_are_settings_and_their_baselines(self):
        lay = keys.Layout(("OMP_NUM_THREADS",), ("workers", "batch"), (), (("workers", "0"),))
        self.assertEqual(lay.text(), "env=OMP_NUM_THREADS;flags=workers batch;settings=workers:0")
        self.assertEqual(keys.parse_layout(lay.text()), lay)
        self.assertEqual(keys.parse_layout("env=A;flags=x;settings=").settings, ())  # none: every flag a workload's
        self.assertIsNone(keys.parse_layout("env=A;flags=x").settings)
        self.assertEqual(keys.parse_layout("env=A;flags=x").setting_flags, keys.LEGACY_SETTINGS)


def rounds(times, layout=WITH, cpu=None):
    """One process per round running every setting ({workers: [time per round]})."""
    out = []
    for rnd in range(len(next(iter(times.values())))):
        for workers, series in times.items():
            c = series[rnd] if cpu is None else cpu[workers][rnd]
            out.append(row(workers=workers, run=f"p-r{rnd}", rnd=rnd, step=series[rnd], cpu=c, layout=layout))
    return out


class Verdicts(unittest.TestCase):
    # workers 2 is 30 % faster than workers 0 in every round, at the same CPU; workers 1 as workers 0
    TIMES = {"0": [20.1, 19.8, 20.3, 20.0, 19.9], "1": [20.0, 20.2, 19.9, 20.1, 20.0],
             "2": [14.0, 13.9, 14.2, 14.1, 13.8]}

    def test_a_faster_workers_value_is_the_change(self):
        cpu = {w: [20.0 + 0.1 * i for i in range(5)] for w in self.TIMES}
        v = verdicts.decide_rows(rounds(self.TIMES, cpu=cpu))
        (e,) = v.entries
        self.assertEqual(e.label, "train_step/mnist_adadelta/batch:64/loader:torch/mkldnn:1/gap_ms:0")
        self.assertEqual((e.verdict, e.chosen, e.baseline), ("change", "gomp (no env) workers=2", "gomp (no env)"))
        self.assertEqual(e.runs, 15)  # one record per setting per process
        self.assertEqual(e.flags["gomp (no env) workers=2"], {"workers": "2"})
        self.assertEqual(e.benchmarks["gomp (no env) workers=2"], {NAME.format(p=0, w=2) + "/iterations:5/manual_time"})
        from threadburn.export import views
        self.assertIn("Set: (no variables); flags --workers=2", views.headline(e))

    def test_without_the_field_each_workers_value_is_its_own_workload(self):
        v = verdicts.decide_rows(rounds(self.TIMES, layout=WITHOUT))
        self.assertEqual(len(v.entries), 3)
        self.assertEqual({e.decision.why for e in v.entries}, {"one setting only: nothing to compare it with"})

    def test_a_workload_without_its_baseline_says_so_and_another_baseline_decides(self):
        # Preloaded rows against loader workers 2, never the default (workers 0, no preload):
        # the H200 grid's shape. Preloaded is 3 times faster.
        rows = []
        for rnd in range(5):
            rows.append(row(preload="1", run=f"p-r{rnd}", rnd=rnd, step=5.0 + 0.01 * rnd, cpu=5.0))
            rows.append(row(workers="2", run=f"q-r{rnd}", rnd=rnd, step=15.0 - 0.01 * rnd, cpu=30.0))
        (e,) = verdicts.decide_rows(rows).entries
        self.assertEqual(e.verdict, "undecided")
        self.assertEqual(e.decision.why, "the baseline (the default setting: gomp, no env, preload=0, workers=0, "
                                         "cuda_sync=auto) has no complete run in this file (`threadburn verdict "
                                         "--baseline FLAG=VALUE` compares with another)")
        (e,) = verdicts.decide_rows(rows, baseline={"preload": "1"}).entries
        self.assertEqual((e.verdict, e.baseline), ("keep", "gomp (no env) preload=1"))
        (e,) = verdicts.decide_rows(rows, baseline={"preload": "0", "workers": "2"}).entries
        self.assertEqual((e.verdict, e.chosen), ("change", "gomp (no env) preload=1"))
        self.assertEqual(e.flags["gomp (no env) preload=1"], {"preload": "1", "workers": "0"})


class Grids(helpers.TempDir, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.progs = programs.programs(helpers.make_fake_build(self.path("build")))

    def load(self, text):
        return grid.load(helpers.write_file(self.path("g.toml"), text), self.progs)

    TRAIN = '[[study]]\nbench = "train_step"\nmodel = "mnist_adadelta"\nworkers = [0, 2]\n'
    OPT = '[[study]]\nbench = "optimizer_step"\n'

    def test_settings_and_their_baselines(self):
        g = self.load('settings = ["preload", "workers"]\n' + self.TRAIN + self.OPT)
        train, opt = g.points
        self.assertEqual(train.settings, (("preload", "0"), ("workers", "0")))  # workers' default 0,2: its first
        self.assertEqual(opt.settings, ())  # the grid's list, for the programs that have those flags
        self.assertTrue(train.layout_text(types.SimpleNamespace(env_knobs=("A",), flags=("workers",), params=()))
                        .endswith(";settings=preload:0 workers:0"))
        (train,) = self.load(self.TRAIN).points
        self.assertEqual(train.settings, (("cuda_sync", "auto"),))  # no list: cuda_sync, as before
        (train,) = self.load(self.TRAIN + "settings = []\n").points
        self.assertEqual(train.settings, ())

    def test_refusals(self):
        cases = [
            (self.TRAIN + 'settings = ["batch"]\n', "study[0].settings: batch changes the work an iteration does, "
             "not how it is fed"),
            (self.OPT + 'settings = ["preload"]\n', "study[0].settings: 'preload' is not a flag of optimizer_step"),
            ('settings = "workers"\n' + self.TRAIN, "settings: expected a list of flag names"),
        ]
        for text, words in cases:
            with self.subTest(text=text):
                with self.assertRaises(grid.GridError) as caught:
                    self.load(text)
                self.assertIn(words, str(caught.exception))
        # A feed flag that is the program's first axis stands bare in the names: refused.
        doc = helpers.recording("train_step")
        doc["axes"] = sorted(doc["axes"], key=lambda a: a["name"] != "workers")
        desc = programs.Description.from_json(doc)
        with self.assertRaises(grid.GridError) as caught:
            grid.setting_flags(["workers"], desc, "study[0].settings", "train_step")
        self.assertIn("workers is train_step's first axis", str(caught.exception))

    def test_the_race_runs_each_settings_own_benchmarks(self):
        (point,) = self.load('settings = ["workers"]\n' + self.TRAIN + "gap_ms = 0\n").points
        two = "train_step/mnist_adadelta/preload:0/batch:64/workers:2/loader:torch/mkldnn:1/gap_ms:0"
        e = types.SimpleNamespace(benchmarks={"w2": {two + "/iterations:10/manual_time"}}, benchmark="")
        self.assertEqual(sweepcmd.registered(point, e, "w2"), {two})
        # the race's item for that setting (analysis/race.GridRace asks sweep.race_item): those benchmarks alone
        item = sweepcmd.race_item({point.key: point})(point.key, [(e, "w2")], "confirm")
        self.assertEqual((item.benchmarks, item.phase, item.key), ((two,), "confirm", "confirm-" + point.key))


class Sweeps(helpers.TempDir, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.build = helpers.make_fake_build(self.path("build"))

    def run_sweep(self, text, *args):
        path = helpers.write_file(self.path("g.toml"), text)
        still = helpers.still_host(os.path.join(self.build, "host-stat"))  # made-up figures: nothing set aside
        result = helpers.threadburn("sweep", path, "--build-dir", self.build, "--out", self.path("out.csv"),
                                    "--no-plot", "--seed", "3", *args,
                                    env=helpers.clean_env(FAKE_CPUS=2, FAKE_MEASURED=1, THREADBURN_HOST_STAT=still))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return result.stdout

    GRID = """repetitions = 3
{settings}
[[study]]
bench = "train_step"
model = "mnist_adadelta"
batch = 64
workers = [0, 2]
gap_ms = 0
steps = 3
warmup = 0
"""

    def test_workers_compared_within_one_workload(self):
        self.run_sweep(self.GRID.format(settings='settings = ["workers"]'))
        rows = helpers.read_rows(self.path("out.csv"))
        self.assertEqual(len(rows), 6)
        self.assertTrue(all(r["knob_layout"].endswith(";settings=workers:0") for r in rows))
        with open(self.path("out.verdict.json")) as f:
            (w,) = json.load(f)["workloads"]
        # fake_model: step 1 + 30 / 2 threads = 16 ms, + 0.5 ms a worker: workers 2 is 6.25 % slower, CPU too
        self.assertEqual(w["workload"], "train_step/mnist_adadelta/preload:0/batch:64/loader:torch/mkldnn:1/gap_ms:0")
        self.assertEqual((w["verdict"], w["setting"]), ("keep", "gomp (no env)"))
        self.assertEqual(sorted(w["runs_per_setting"]), ["gomp (no env)", "gomp (no env) workers=2"])

    def test_without_settings_each_workers_value_is_a_workload(self):
        self.run_sweep(self.GRID.format(settings=""))
        with open(self.path("out.verdict.json")) as f:
            workloads = json.load(f)["workloads"]
        self.assertEqual(len(workloads), 2)
        self.assertEqual({w["verdict"] for w in workloads}, {"undecided"})

    def test_the_cuda_grids_dry_run_lists_its_settings_per_workload(self):
        result = helpers.threadburn("sweep", "cuda", "--build-dir", self.build, "--dry-run")
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        self.assertIn("8 workloads; each compares its settings with its baseline (the default setting):", out)
        # model x item_sync x gap; MNIST back to back: 3 workers x 2 pin_memory x 2 non_blocking loader
        # feeds + preloaded under 4 wait policies; after the stall: the default and the 4 preloaded
        mnist = "  train_step_cuda/mnist_adadelta/batch:1000/loader:torch/mkldnn:1/item_sync:{}/gap_ms:{}: {} settings"
        base = " (baseline: gomp, no env, preload=0, workers=0, pin_memory=0, non_blocking=0, cuda_sync=auto)"
        for item in ("0", "1"):
            self.assertIn(mnist.format(item, 0, 16) + base, out)
            self.assertIn(mnist.format(item, 100, 5) + base, out)
        self.assertIn("    gomp (no env) preload=1 cuda_sync=blocking_sync  <- point ", out)
        self.assertEqual(out.count("    gomp (no env)  [baseline]  <- point "), 8)


class H200(helpers.TempDir, unittest.TestCase):
    """results/cuda-h200.csv: its rows carry the settings field; `threadburn
    verdict` reproduces its committed verdict file; compare and report read it."""
    CSV = os.path.join(helpers.REPO, "results", "cuda-h200.csv")

    def test_verdict_reproduces_the_committed_file_and_names_the_missing_baseline(self):
        result = helpers.threadburn("verdict", self.CSV, "--no-write", "--export-json", self.path("v.json"))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(self.path("v.json")) as f, open(self.CSV.replace(".csv", ".verdict.json")) as g:
            exported, committed = json.load(f), json.load(g)
        exported.pop("export_schema")
        exported["workloads"] = [{k: v for k, v in w.items() if k not in ("headline", "settings")}
                                 for w in exported["workloads"]]
        self.assertEqual(exported, committed)
        # model x item_sync x gap: 8 workloads, none with the default feed (the grid never ran it)
        self.assertEqual(len(committed["workloads"]), 8)
        self.assertEqual({w["verdict"] for w in committed["workloads"]}, {"undecided"})
        result = helpers.threadburn("verdict", self.CSV, "--baseline", "preload=1", "--require-decision")
        self.assertEqual(result.returncode, 3, result.stderr)  # two workloads still undecided
        self.assertIn("KEEP gomp (no env) preload=1: every setting tried", result.stdout)
        result = helpers.threadburn("verdict", self.CSV, "--baseline", "batch=64")
        helpers.assert_one_line_error(self, result, f"--baseline batch: not a setting flag of {self.CSV} (its "
                                      "setting flags: cuda_sync, non_blocking, pin_memory, preload, workers)")

    def test_compare_and_report_read_it(self):
        result = helpers.threadburn("compare", self.CSV, self.CSV)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("geomean (52 groups)", result.stdout)
        result = helpers.threadburn("report", self.CSV, "-o", self.path("r.html"))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(self.path("r.html")) as f:
            page = f.read()
        self.assertEqual(page.count('<div class="verdict undecided"'), 8)


if __name__ == "__main__":
    unittest.main()
