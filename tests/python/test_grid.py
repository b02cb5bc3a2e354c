"""Grid loading, validation and expansion (scripts/threadburn_py/grid.py)."""
import glob
import os
import tempfile
import textwrap
import unittest

import helpers
from threadburn_py import grid, schema


def load(text):
    with tempfile.TemporaryDirectory() as tmp:
        path = helpers.write_file(os.path.join(tmp, "g.toml"), textwrap.dedent(text))
        return grid.load_grid(path)


OPT = 'bench = "optimizer_step"\n'


class ShippedGrids(unittest.TestCase):
    def test_every_config_validates(self):
        paths = sorted(glob.glob(os.path.join(helpers.REPO, "configs", "*.toml")))
        # The grids the suite promises must ship; any other grid must validate too.
        required = {"batch_workers.toml", "blocktime.toml", "default.toml",
                    "launcher.toml", "seed000.toml", "cuda.toml", "runtime.toml",
                    "loader.toml", "oversubscription.toml", "onednn.toml"}
        self.assertLessEqual(required, {os.path.basename(p) for p in paths})
        for path in paths:
            with self.subTest(path=path):
                settings, points = grid.load_grid(path)
                self.assertTrue(points)
                for p in points:  # the runtime-only knobs never cross runtimes
                    if p.runtime == "gomp":
                        self.assertEqual(p.env["KMP_BLOCKTIME"], "unset")
                        self.assertEqual(p.env["KMP_AFFINITY"], "unset")
                    else:
                        self.assertEqual(p.env["GOMP_SPINCOUNT"], "unset")

    def test_default_grid_shape(self):
        settings, points = grid.load_grid(os.path.join(helpers.REPO, "configs", "default.toml"))
        self.assertEqual(settings["name"], "default")
        self.assertEqual(len(points), 16)
        self.assertEqual(sum(p.repetitions for p in points), 12 * 5 + 4 * 3)
        defaults = [p for p in points if schema.is_default_env(dict(p.env, runtime=p.runtime))]
        self.assertEqual([p.bench for p in defaults], ["optimizer_step", "train_step"])
        launcher = [p for p in points if p.preset == "launcher"]
        self.assertEqual(len(launcher), 1)
        self.assertEqual(launcher[0].env["KMP_BLOCKTIME"], "1")
        self.assertEqual(launcher[0].env["KMP_AFFINITY"], "granularity=fine,compact,1,0")
        self.assertEqual(launcher[0].env["OMP_NUM_THREADS"], str(os.cpu_count()))

    def test_seed000_saves_timelines(self):
        _, points = grid.load_grid(os.path.join(helpers.REPO, "configs", "seed000.toml"))
        self.assertTrue(all(p.timeline for p in points))
        self.assertEqual({p.inproc["gap_ms"][0] for p in points}, {"2000"})


class Documentation(unittest.TestCase):
    def test_every_csv_column_is_documented(self):
        with open(os.path.join(helpers.REPO, "results", "README.md")) as f:
            text = f.read()
        missing = [c for c in schema.COLUMNS if f"`{c}`" not in text
                   and not (c.startswith("env_") and "`env_OMP_NUM_THREADS` ... " in text)]
        self.assertEqual(missing, [])
        self.assertIn("## Reference results", text)


class Expansion(unittest.TestCase):
    def test_runtime_knobs_are_not_crossed(self):
        _, points = load("""
            [[study]]
            bench = "optimizer_step"
            [study.env]
            OMP_NUM_THREADS = [1, 2]
            [[study.runtimes]]
            name = "gomp"
            GOMP_SPINCOUNT = [0, 1000]
            [[study.runtimes]]
            name = "llvm"
            KMP_BLOCKTIME = [0, 50, 200]
        """)
        # 2 threads x (2 spin counts + 3 blocktimes), not 2 x 2 x 3 x 2 runtimes.
        self.assertEqual(len(points), 10)
        gomp = sorted((p.env["OMP_NUM_THREADS"], p.env["GOMP_SPINCOUNT"], p.env["KMP_BLOCKTIME"])
                      for p in points if p.runtime == "gomp")
        self.assertEqual(gomp, [("1", "0", "unset"), ("1", "1000", "unset"),
                                ("2", "0", "unset"), ("2", "1000", "unset")])
        llvm = sorted((p.env["OMP_NUM_THREADS"], p.env["KMP_BLOCKTIME"], p.env["GOMP_SPINCOUNT"])
                      for p in points if p.runtime == "llvm")
        self.assertEqual(llvm, [("1", "0", "unset"), ("1", "200", "unset"), ("1", "50", "unset"),
                                ("2", "0", "unset"), ("2", "200", "unset"), ("2", "50", "unset")])

    def test_entry_list_replaces_study_list(self):
        _, points = load("""
            [[study]]
            bench = "optimizer_step"
            env = {OMP_NUM_THREADS = [1, 2]}
            runtimes = [{name = "gomp", OMP_NUM_THREADS = "unset"}, {name = "gomp"}]
        """)
        self.assertEqual([p.env["OMP_NUM_THREADS"] for p in points], ["unset", "1", "2"])

    def test_default_runtime_is_gomp_and_defaults_are_explicit(self):
        settings, points = load('[[study]]\nbench = "train_step"\n')
        self.assertEqual(len(points), 1)
        p = points[0]
        self.assertEqual((p.runtime, p.device, p.processes, p.steps, p.warmup), ("gomp", "cpu", 1, 10, 2))
        self.assertEqual((settings["repetitions"], settings["timeout_s"], settings["seed"]), (3, 300, None))
        self.assertEqual(p.bench_args(), ["--model=mnist_adadelta", "--batch=64", "--workers=0",
                                          "--gap_ms=0", "--preload=0", "--loader=torch",
                                          "--mkldnn=1", "--device=cpu", "--steps=10",
                                          "--warmup=2"])
        self.assertEqual(p.cuda_sync, "")

    def test_cores_resolves_and_dedupes(self):
        _, points = load(f"""
            [[study]]
            bench = "optimizer_step"
            env = {{OMP_NUM_THREADS = ["cores", {os.cpu_count()}, "unset"]}}
        """)
        self.assertEqual([p.env["OMP_NUM_THREADS"] for p in points], [str(os.cpu_count()), "unset"])

    def test_launch_axes_cross_and_inproc_axes_stay_lists(self):
        _, points = load("""
            seed = 5
            [[study]]
            bench = "train_step"
            model = ["mnist_adadelta", "cifar_sgd"]
            batch = [16, 64]
            preload = true
            device = ["cpu", "cuda"]
            processes = [1, 2]
            runtimes = [{name = "llvm", KMP_BLOCKTIME = 0}]
        """)
        self.assertEqual(len(points), 4)
        self.assertEqual(sorted((p.device, p.processes) for p in points),
                         [("cpu", 1), ("cpu", 2), ("cuda", 1), ("cuda", 2)])
        p = points[0]
        self.assertEqual(p.inproc["model"], ["mnist_adadelta", "cifar_sgd"])
        self.assertEqual(p.inproc["preload"], ["1"])
        self.assertEqual(p.knobs()["model"], "")  # two values: known only per row
        self.assertEqual(p.knobs()["batch"], "")
        self.assertEqual(p.knobs()["workers"], "0")
        cuda = next(q for q in points if q.device == "cuda")
        self.assertEqual([n for n, _ in cuda.expected_benchmarks()][:2], [
            "train_step_cuda/mnist_adadelta/batch:16/workers:0/gap_ms:0/preload:1/tbb_loader:0"
            "/mkldnn:1/pin_memory:0/non_blocking:0/item_sync:0/iterations:10/manual_time",
            "train_step_cuda/mnist_adadelta/batch:64/workers:0/gap_ms:0/preload:1/tbb_loader:0"
            "/mkldnn:1/pin_memory:0/non_blocking:0/item_sync:0/iterations:10/manual_time"])
        self.assertEqual(len(cuda.expected_benchmarks()), 4)
        self.assertEqual(cuda.cuda_sync, "auto")
        cpu = next(q for q in points if q.device == "cpu")
        self.assertEqual(cpu.expected_benchmarks()[0][0],
                         "train_step/mnist_adadelta/batch:16/workers:0/gap_ms:0/preload:1"
                         "/tbb_loader:0/mkldnn:1/iterations:10/manual_time")

    def test_child_env_and_point_keys(self):
        _, points = load("""
            [[study]]
            bench = "optimizer_step"
            runtimes = [{name = "gomp"}, {name = "llvm", KMP_BLOCKTIME = 0, OMP_NUM_THREADS = 2}]
        """)
        gomp, llvm = points
        self.assertEqual(gomp.child_env("/x/libomp.so.5"), ({}, list(schema.CONTROLLED_ENV)))
        setenv, unset = llvm.child_env("/x/libomp.so.5")
        self.assertEqual(setenv, {"OMP_NUM_THREADS": "2", "KMP_BLOCKTIME": "0",
                                  "LD_PRELOAD": "/x/libomp.so.5"})
        self.assertEqual(unset, ["GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "OMP_PROC_BIND",
                                 "OMP_PLACES", "KMP_AFFINITY"])
        self.assertNotEqual(gomp.key, llvm.key)
        self.assertEqual(len(gomp.key), 12)
        _, again = load("""
            [[study]]
            name = "renamed"
            bench = "optimizer_step"
            runtimes = [{name = "gomp"}]
        """)
        self.assertEqual(again[0].key, gomp.key)  # labels do not change identity

    def test_extra_args_pass_through_and_change_the_key(self):
        _, (plain,) = load('[[study]]\nbench = "train_step"\n')
        _, (point,) = load('[[study]]\nbench = "train_step"\n'
                           'extra_args = {augment = 0, sampler_us = 250, x = true}\n')
        self.assertEqual(point.bench_args()[-3:], ["--augment=0", "--sampler_us=250", "--x=1"])
        self.assertEqual(point.knobs()["extra_args"], "augment=0;sampler_us=250;x=1")
        self.assertEqual(plain.knobs()["extra_args"], "")
        self.assertNotEqual(point.key, plain.key)

    def test_parse_benchmark_name(self):
        self.assertEqual(grid.parse_benchmark_name(
            "train_step/mnist_adadelta/batch:64/workers:2/gap_ms:100/preload:0/manual_time"),
            {"model": "mnist_adadelta", "batch": "64", "workers": "2", "gap_ms": "100",
             "preload": "0"})
        self.assertEqual(grid.parse_benchmark_name(
            "optimizer_step/sgd/params:4000000/gap_ms:300/manual_time"),
            {"optimizer": "sgd", "params": "4000000", "gap_ms": "300"})
        # components the contract does not list (GB's iterations:N, new axes) are ignored
        self.assertEqual(grid.parse_benchmark_name(
            "train_step/cifar_sgd/batch:16/workers:0/gap_ms:0/preload:1/future:3"
            "/iterations:10/manual_time"),
            {"model": "cifar_sgd", "batch": "16", "workers": "0", "gap_ms": "0", "preload": "1"})


class Validation(unittest.TestCase):
    CASES = [
        # (grid text, key path in the message, words of the message)
        ('colour = "red"\n[[study]]\n' + OPT, "(top level).colour", "unknown key"),
        ('[[study]]\n' + OPT + 'batch = [64]\n', "study[0].batch", "unknown key"),
        ('[[study]]\nbench = "train_step"\nbatch = "big"\n', "study[0].batch",
         "expected an integer >= 1, got 'big'"),
        ('repetitions = 1.5\n[[study]]\n' + OPT, "repetitions", "expected an integer >= 1, got 1.5"),
        ('timeline = "yes"\n[[study]]\n' + OPT, "timeline", "expected true or false"),
        ('[[study]]\nbench = "train_step"\nbatch = []\n', "study[0].batch", "empty axis"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "llvm", KMP_BLOCKTIME = -3}]\n',
         "study[0].runtimes[0].KMP_BLOCKTIME", "expected an integer >= 0 (ms)"),
        ('[[study]]\n' + OPT + 'env = {OMP_NUM_THREADS = [2, 0]}\n',
         "study[0].env.OMP_NUM_THREADS[1]", "expected an integer >= 1"),
        ('[[study]]\n' + OPT + f'processes = {4 * (os.cpu_count() or 1) + 1}\n',
         "study[0].processes", f"expected an integer in 1..{4 * (os.cpu_count() or 1)}"),
        ('[[study]]\nbench = "train_step"\nmodel = ["resnet50"]\n', "study[0].model[0]",
         'one of "mnist_adadelta", "cifar_sgd"'),
        ('[[study]]\n' + OPT + 'optimizer = "adam"\n', "study[0].optimizer",
         'one of "sgd", "adadelta"'),
        ('[[study]]\n' + OPT + 'env = {KMP_BLOCKTIME = [0]}\n', "study[0].env.KMP_BLOCKTIME",
         'read only by the llvm runtime'),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp", KMP_BLOCKTIME = 0}]\n',
         "study[0].runtimes[0].KMP_BLOCKTIME", "not varied under gomp"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "llvm", GOMP_SPINCOUNT = 0}]\n',
         "study[0].runtimes[0].GOMP_SPINCOUNT", "read only by the gomp runtime"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "iomp"}]\n', "study[0].runtimes[0].name",
         'one of "gomp", "llvm"'),
        ('[[study]]\n' + OPT + 'runtimes = []\n', "study[0].runtimes", "non-empty array"),
        ('[[study]]\nsteps = 3\n', "study[0].bench", "missing"),
        ('[[study]]\nbench = "inference"\n', "study[0].bench", 'one of "train_step"'),
        ('[[study]]\nbench = "train_step"\nworkers = [0, 2]\npreload = 1\n', "study[0].preload",
         "needs workers = [0]"),
        ('[[study]]\n' + OPT + 'env = {OMP_WAIT_POLICY = "sometimes"}\n',
         "study[0].env.OMP_WAIT_POLICY", 'one of "active", "passive", "unset"'),
        ('[[study]]\n' + OPT + 'OMP_NUM_THREADS = 2\n', "study[0].OMP_NUM_THREADS",
         "environment variables go in"),
        ('repetitions = 3\n', "study", "missing"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp"}, {name = "gomp"}]\n',
         "study[0].runtimes[1]", "duplicate point"),
        ('[[study]]\n' + OPT + 'env = {KMP_AFFINITY = "x"}\n', "study[0].env.KMP_AFFINITY",
         "read only by the llvm runtime"),
        ('[[study]]\nbench = "optimizer_step"\nsteps = 0\n', "study[0].steps",
         "expected an integer >= 1"),
        ('[[study]\n', "", "not valid TOML"),
        ('[[study]]\n' + OPT + 'extra_args = {steps = 3}\n', "study[0].extra_args.steps",
         "a program flag the sweep does not set itself"),
        ('[[study]]\n' + OPT + 'extra_args = {benchmark_filter = "x"}\n',
         "study[0].extra_args.benchmark_filter", "a program flag the sweep does not set"),
        ('[[study]]\n' + OPT + 'extra_args = {augment = "a b"}\n', "study[0].extra_args.augment",
         "expected an integer or a string without spaces"),
        ('[[study]]\n' + OPT + 'extra_args = {augment = 1.5}\n', "study[0].extra_args.augment",
         "expected an integer or a string without spaces"),
    ]

    def test_each_bad_grid_names_file_key_and_expectation(self):
        for text, key, words in self.CASES:
            with self.subTest(text=text):
                helpers.assert_one_line_grid_error(
                    self, load, text, f"g.toml: {key}" if key else "g.toml:", words, grid.GridError)

    def test_cli_exits_2_with_one_line_before_running(self):
        with tempfile.TemporaryDirectory() as tmp:
            bad = helpers.write_file(os.path.join(tmp, "bad.toml"),
                                     '[[study]]\nbench = "optimizer_step"\n'
                                     'runtimes = [{name = "llvm", KMP_BLOCKTIME = -3}]\n')
            build = helpers.make_build_dir(os.path.join(tmp, "build"))
            log = os.path.join(tmp, "log")
            out = os.path.join(tmp, "r.csv")
            result = helpers.run_script("sweep.py", bad, "--build-dir", build, "--out", out,
                                        env=helpers.clean_env(FAKE_BENCH_LOG=log))
            self.assertEqual(result.returncode, 2)
            self.assertEqual(result.stdout, "")
            self.assertEqual(result.stderr, f"sweep: {bad}: study[0].runtimes[0].KMP_BLOCKTIME: "
                             "expected an integer >= 0 (ms), \"infinite\", \"unset\", got -3\n")
            self.assertFalse(os.path.exists(out))
            self.assertFalse(os.path.exists(log))

    def test_cli_unknown_grid_name(self):
        result = helpers.run_script("sweep.py", "no_such_grid", "--dry-run")
        self.assertEqual(result.returncode, 2)
        self.assertIn("no_such_grid.toml: cannot read", result.stderr)


if __name__ == "__main__":
    unittest.main()
