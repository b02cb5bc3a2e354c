"""Schema 2's axes in grids: runtime_bench, loader/mkldnn, the CUDA-only
axes, the build check (CMakeCache.txt), and benchmark names both ways."""
import os
import tempfile
import textwrap
import unittest

import helpers
from threadburn_py import build, grid, names

TRAIN = 'bench = "train_step"\n'
RUNTIME = 'bench = "runtime"\n'
ALL_KERNELS = ["serial", "omp", "aten", "tbb", "onednn"]


def load(text, cache=None):
    """Load a grid text; with cache, against a build dir whose CMakeCache.txt
    holds those variables (None: a build dir without a cache file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = helpers.write_file(os.path.join(tmp, "g.toml"), textwrap.dedent(text))
        build_dir = helpers.make_build_dir(os.path.join(tmp, "build"), cache)
        return grid.load_grid(path, build_dir)


class RuntimeBench(unittest.TestCase):
    def test_defaults_are_explicit_and_every_kernel(self):
        _, (p,) = load("[[study]]\n" + RUNTIME)
        self.assertEqual(p.bench_args(), ["--kernel=serial,omp,aten,tbb,onednn", "--n=1048576",
                                          "--gap_ms=0", "--device=cpu", "--steps=10",
                                          "--warmup=2"])
        knobs = p.knobs()
        self.assertEqual((knobs["kernel"], knobs["n"], knobs["gap_ms"], knobs["model"]),
                         ("", "1048576", "0", ""))
        self.assertEqual([n for n, _ in p.expected_benchmarks()],
                         [f"runtime_region/{k}/n:1048576/gap_ms:0/iterations:10/manual_time"
                          for k in ALL_KERNELS])

    def test_axes_stay_in_process_in_the_programs_order(self):
        _, (p,) = load("[[study]]\n" + RUNTIME + 'kernel = ["omp", "tbb"]\nn = [32768, 16777216]\n'
                       "gap_ms = [0, 100]\nsteps = 5\n")
        self.assertEqual([n for n, _ in p.expected_benchmarks()], [
            f"runtime_region/{k}/n:{n}/gap_ms:{g}/iterations:5/manual_time"
            for k in ("omp", "tbb") for n in (32768, 16777216) for g in (0, 100)])
        self.assertEqual(p.expected_benchmarks()[0][1], {"kernel": "omp", "n": "32768",
                                                         "gap_ms": "0"})


class TrainAxes(unittest.TestCase):
    def test_loader_and_mkldnn_with_the_programs_skips(self):
        _, (p,) = load("[[study]]\n" + TRAIN + 'workers = [0, 2]\nloader = ["torch", "tbb"]\n'
                       "mkldnn = [0, 1]\n")
        self.assertIn("--loader=torch,tbb", p.bench_args())
        self.assertIn("--mkldnn=0,1", p.bench_args())
        got = [(k["workers"], k["loader"], k["mkldnn"]) for _, k in p.expected_benchmarks()]
        # the TBB loader needs workers: (0, tbb) is not a benchmark of the program
        self.assertEqual(got, [("0", "torch", "0"), ("0", "torch", "1"), ("2", "torch", "0"),
                               ("2", "torch", "1"), ("2", "tbb", "0"), ("2", "tbb", "1")])
        self.assertEqual(p.expected_benchmarks()[4][0],
                         "train_step/mnist_adadelta/batch:64/workers:2/gap_ms:0/preload:0"
                         "/tbb_loader:1/mkldnn:0/iterations:10/manual_time")

    def test_tbb_alone_is_fine_when_some_combination_has_workers(self):
        _, (p,) = load("[[study]]\n" + TRAIN + 'workers = [0, 1]\nloader = "tbb"\n')
        self.assertEqual([(k["workers"], k["loader"]) for _, k in p.expected_benchmarks()],
                         [("1", "tbb")])

    def test_cuda_only_axes_reach_cuda_processes_only(self):
        _, points = load("[[study]]\n" + TRAIN + 'device = ["cpu", "cuda"]\nitem_sync = [0, 1]\n'
                         'pin_memory = 1\ncuda_sync = ["spin", "blocking_sync"]\n')
        self.assertEqual([(p.device, p.cuda_sync) for p in points],
                         [("cpu", ""), ("cuda", "spin"), ("cuda", "blocking_sync")])
        cpu, spin, _ = points
        self.assertEqual(cpu.bench_args(), ["--model=mnist_adadelta", "--batch=64", "--workers=0",
                                            "--gap_ms=0", "--preload=0", "--loader=torch",
                                            "--mkldnn=1", "--device=cpu", "--steps=10",
                                            "--warmup=2"])
        self.assertEqual(spin.bench_args()[5:], [
            "--loader=torch", "--mkldnn=1", "--pin_memory=1", "--non_blocking=0",
            "--item_sync=0,1", "--device=cuda", "--cuda_sync=spin", "--steps=10", "--warmup=2"])
        self.assertEqual({k: cpu.knobs()[k] for k in ("cuda_sync", "pin_memory", "item_sync")},
                         {"cuda_sync": "", "pin_memory": "", "item_sync": ""})
        self.assertEqual({k: spin.knobs()[k] for k in ("cuda_sync", "pin_memory", "item_sync")},
                         {"cuda_sync": "spin", "pin_memory": "1", "item_sync": ""})
        self.assertEqual(spin.label, "train_step cuda gomp (no env) cuda_sync=spin")
        self.assertEqual(len({p.key for p in points}), 3)
        self.assertEqual([n for n, _ in spin.expected_benchmarks()], [
            "train_step_cuda/mnist_adadelta/batch:64/workers:0/gap_ms:0/preload:0/tbb_loader:0"
            f"/mkldnn:1/pin_memory:1/non_blocking:0/item_sync:{i}/iterations:10/manual_time"
            for i in (0, 1)])

    def test_cuda_without_cuda_sync_gets_auto(self):
        _, (p,) = load("[[study]]\n" + TRAIN + 'device = "cuda"\n')
        self.assertEqual(p.cuda_sync, "auto")
        self.assertIn("--cuda_sync=auto", p.bench_args())
        _, (opt,) = load('[[study]]\nbench = "optimizer_step"\ndevice = "cuda"\n')
        self.assertEqual(opt.cuda_sync, "")  # optimizer_step_bench has no such flag
        self.assertFalse(any("cuda_sync" in a for a in opt.bench_args()))


class Validation(unittest.TestCase):
    CASES = [
        ("[[study]]\n" + RUNTIME + 'kernel = ["omp", "cuda"]\n', "study[0].kernel[1]",
         'expected one of "serial", "omp", "aten", "tbb", "onednn", got \'cuda\''),
        ("[[study]]\n" + RUNTIME + "n = 0\n", "study[0].n",
         "expected an integer in 1..1073741824 (floats), got 0"),
        ("[[study]]\n" + RUNTIME + f"n = {2 ** 30 + 1}\n", "study[0].n", "in 1..1073741824"),
        ("[[study]]\n" + RUNTIME + 'n = "big"\n', "study[0].n", "expected an integer"),
        ("[[study]]\n" + RUNTIME + 'device = "cuda"\n', "study[0].device",
         "runtime_bench runs on cpu only"),
        ("[[study]]\n" + RUNTIME + 'model = "cifar_sgd"\n', "study[0].model", "unknown key"),
        ("[[study]]\n" + RUNTIME + 'cuda_sync = "spin"\n', "study[0].cuda_sync", "unknown key"),
        ("[[study]]\n" + TRAIN + 'loader = "dali"\n', "study[0].loader",
         'one of "torch", "tbb"'),
        ("[[study]]\n" + TRAIN + "mkldnn = [1, 2]\n", "study[0].mkldnn[1]", "0 or 1"),
        ("[[study]]\n" + TRAIN + 'loader = "tbb"\n', "study[0].loader",
         "tbb needs workers >= 1 and preload = 0 (the program skips the TBB loader otherwise), "
         "but this study has workers = [0], preload = [0]"),
        ("[[study]]\n" + TRAIN + 'loader = ["torch", "tbb"]\npreload = 1\n', "study[0].loader",
         "but this study has workers = [0], preload = [1]"),
        ("[[study]]\n" + TRAIN + "item_sync = [0, 1]\n", "study[0].item_sync",
         "a CUDA-only axis, but this study's device list is only cpu"),
        ("[[study]]\n" + TRAIN + 'device = "cpu"\npin_memory = 1\n', "study[0].pin_memory",
         "CUDA-only axis"),
        ("[[study]]\n" + TRAIN + "non_blocking = 0\n", "study[0].non_blocking", "CUDA-only axis"),
        ("[[study]]\n" + TRAIN + 'cuda_sync = "spin"\n', "study[0].cuda_sync", "CUDA-only axis"),
        ("[[study]]\n" + TRAIN + 'device = "cuda"\ncuda_sync = "busy"\n', "study[0].cuda_sync",
         'one of "auto", "spin", "yield", "blocking_sync"'),
        ("[[study]]\n" + TRAIN + 'device = "cuda"\nitem_sync = 2\n', "study[0].item_sync",
         "0 or 1"),
        ('[[study]]\nbench = "optimizer_step"\nitem_sync = 1\ndevice = "cuda"\n',
         "study[0].item_sync", "unknown key"),
        ("[[study]]\n" + TRAIN + 'extra_args = {loader = "tbb"}\n', "study[0].extra_args.loader",
         "a program flag the sweep does not set itself"),
        ("[[study]]\n" + TRAIN + 'extra_args = {cuda_sync = "spin"}\n',
         "study[0].extra_args.cuda_sync", "a program flag the sweep does not set itself"),
        ("[[study]]\n" + RUNTIME + "extra_args = {n = 5}\n", "study[0].extra_args.n",
         "a program flag the sweep does not set itself"),
    ]

    def test_each_bad_value_names_file_and_key(self):
        for text, key, words in self.CASES:
            with self.subTest(text=text):
                helpers.assert_one_line_grid_error(
                    self, load, text, f"g.toml: {key}: ", words, grid.GridError)


class BuildCheck(unittest.TestCase):
    NO_TBB = {"THREADBURN_WITH_TBB": "OFF", "THREADBURN_WITH_DNNL": "ON"}
    NO_DNNL = {"THREADBURN_WITH_TBB": "ON", "THREADBURN_WITH_DNNL": "OFF"}

    def assert_rejected(self, text, cache, key, value, variable):
        """variable: (what the message calls the part, its cache variable)."""
        with tempfile.TemporaryDirectory() as tmp:
            path = helpers.write_file(os.path.join(tmp, "g.toml"), textwrap.dedent(text))
            build_dir = helpers.make_build_dir(os.path.join(tmp, "build"), cache)
            with self.assertRaises(grid.GridError) as caught:
                grid.load_grid(path, build_dir)
            self.assertEqual(str(caught.exception), f"{path}: {key}: {value} needs a build "
                             f"with {variable[0]} ({build_dir}/CMakeCache.txt has "
                             f"{variable[1]}=OFF)")
            grid.load_grid(path)  # without a build dir: not checked

    def test_tbb_and_onednn_need_their_build_parts(self):
        self.assert_rejected("[[study]]\n" + RUNTIME + 'kernel = ["omp", "tbb"]\n', self.NO_TBB,
                             "study[0].kernel", "tbb", ("TBB", "THREADBURN_WITH_TBB"))
        self.assert_rejected("[[study]]\n" + TRAIN + 'workers = 2\nloader = ["torch", "tbb"]\n',
                             self.NO_TBB, "study[0].loader", "tbb",
                             ("TBB", "THREADBURN_WITH_TBB"))
        self.assert_rejected("[[study]]\n" + OPT_STUDY + "[[study]]\n" + RUNTIME
                             + 'kernel = "onednn"\n', self.NO_DNNL, "study[1].kernel", "onednn",
                             ("oneDNN", "THREADBURN_WITH_DNNL"))

    def test_what_the_build_has_passes(self):
        _, (p,) = load("[[study]]\n" + RUNTIME + 'kernel = ["tbb", "serial"]\n', self.NO_DNNL)
        self.assertEqual(p.inproc["kernel"], ["tbb", "serial"])
        _, (p,) = load("[[study]]\n" + TRAIN + 'workers = 2\nloader = "tbb"\n', self.NO_DNNL)
        self.assertEqual(p.inproc["loader"], ["tbb"])
        for cache in (None, {"THREADBURN_WITH_TBB": "ON", "THREADBURN_WITH_DNNL": "1"}, {}):
            with self.subTest(cache=cache):  # no cache file / both on / variables absent
                _, (p,) = load("[[study]]\n" + RUNTIME + 'kernel = ["tbb", "onednn"]\n', cache)
                self.assertEqual(p.inproc["kernel"], ["tbb", "onednn"])

    def test_unnamed_kernel_axis_means_what_the_build_has(self):
        _, (p,) = load("[[study]]\n" + RUNTIME, {"THREADBURN_WITH_TBB": "OFF",
                                                 "THREADBURN_WITH_DNNL": "NO"})
        self.assertEqual(p.inproc["kernel"], ["serial", "omp", "aten"])
        _, (p,) = load("[[study]]\n" + RUNTIME, self.NO_DNNL)
        self.assertEqual(p.inproc["kernel"], ["serial", "omp", "aten", "tbb"])

    def test_cmake_truth_values(self):
        for text in ("OFF", "off", "0", "FALSE", "No", "N", "IGNORE", "NOTFOUND", "TBB-NOTFOUND",
                     ""):
            self.assertFalse(build.cmake_bool(text), text)
        for text in ("ON", "1", "YES", "true", "Y", "2"):
            self.assertTrue(build.cmake_bool(text), text)

    def test_cli_rejects_before_running_with_one_line(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = helpers.write_file(os.path.join(tmp, "x.toml"),
                                      "[[study]]\n" + RUNTIME + 'kernel = ["omp", "tbb"]\n')
            build_dir = helpers.make_build_dir(os.path.join(tmp, "build"), self.NO_TBB)
            log, out = os.path.join(tmp, "log"), os.path.join(tmp, "r.csv")
            for extra in ([], ["--dry-run"]):
                with self.subTest(extra=extra):
                    result = helpers.run_script("sweep.py", path, "--build-dir", build_dir,
                                                "--out", out, *extra,
                                                env=helpers.clean_env(FAKE_BENCH_LOG=log))
                    self.assertEqual(result.returncode, 2)
                    self.assertEqual(result.stdout, "")
                    self.assertEqual(result.stderr, f"sweep: {path}: study[0].kernel: tbb needs "
                                     f"a build with TBB ({build_dir}/CMakeCache.txt has "
                                     "THREADBURN_WITH_TBB=OFF)\n")
                    self.assertFalse(os.path.exists(out))
                    self.assertFalse(os.path.exists(log))


OPT_STUDY = 'bench = "optimizer_step"\n'


class Names(unittest.TestCase):
    def test_parse_new_names(self):
        self.assertEqual(grid.parse_benchmark_name(
            "train_step/cifar_sgd/batch:64/workers:2/gap_ms:0/preload:0/tbb_loader:1/mkldnn:1"
            "/iterations:5/manual_time"),
            {"model": "cifar_sgd", "batch": "64", "workers": "2", "gap_ms": "0", "preload": "0",
             "loader": "tbb", "mkldnn": "1"})
        self.assertEqual(grid.parse_benchmark_name(
            "train_step_cuda/mnist_adadelta/batch:1000/workers:0/gap_ms:100/preload:1"
            "/tbb_loader:0/mkldnn:1/pin_memory:0/non_blocking:1/item_sync:1/iterations:20"
            "/manual_time"),
            {"model": "mnist_adadelta", "batch": "1000", "workers": "0", "gap_ms": "100",
             "preload": "1", "loader": "torch", "mkldnn": "1", "pin_memory": "0",
             "non_blocking": "1", "item_sync": "1"})
        self.assertEqual(grid.parse_benchmark_name(
            "runtime_region/onednn/n:16777216/gap_ms:300/iterations:8/manual_time"),
            {"kernel": "onednn", "n": "16777216", "gap_ms": "300"})
        self.assertEqual(grid.parse_benchmark_name(
            "optimizer_step_cuda/adadelta/params:100/gap_ms:0/iterations:3/manual_time"),
            {"optimizer": "adadelta", "params": "100", "gap_ms": "0"})
        # an unknown family or tbb_loader value says nothing
        self.assertEqual(grid.parse_benchmark_name("other/x/tbb_loader:7/batch:3"), {"batch": "3"})

    def test_expected_names_parse_back_to_their_knobs(self):
        _, points = load("[[study]]\n" + TRAIN + 'model = ["mnist_adadelta", "cifar_sgd"]\n'
                         'workers = [0, 3]\nloader = ["torch", "tbb"]\nmkldnn = [0, 1]\n'
                         'device = ["cpu", "cuda"]\nitem_sync = [0, 1]\ngap_ms = [0, 7]\n'
                         "[[study]]\n" + RUNTIME + "n = [5, 9]\ngap_ms = [1, 2]\n"
                         '[[study]]\nbench = "optimizer_step"\noptimizer = ["sgd", "adadelta"]\n')
        count = 0
        for p in points:
            for name, knobs in p.expected_benchmarks():
                self.assertEqual(names.parse_benchmark_name(name), knobs, name)
                count += 1
        # cpu: 2 models x (w0: torch; w3: torch, tbb) x 2 mkldnn x 2 gaps = 24; cuda x2 item_sync
        self.assertEqual(count, 24 + 48 + 5 * 2 * 2 + 2)


if __name__ == "__main__":
    unittest.main()
