"""Grids (python/threadburn/lib/grid.py): checked whole against the programs'
own descriptions (here: fake_program.py serving the recorded ones), expanded
into points."""
import glob
import os
import shutil
import tempfile
import textwrap
import unittest

import helpers
from threadburn.lib import grid, programs, schema

OPT = 'bench = "optimizer_step"\n'
TRAIN = 'bench = "train_step"\n'
CPUS = os.cpu_count() or 1


def setUpModule():
    global BUILD_TMP, PROGS
    BUILD_TMP = tempfile.mkdtemp(prefix="tb-grid-")
    PROGS = programs.programs(helpers.make_fake_build(os.path.join(BUILD_TMP, "build")))


def tearDownModule():
    shutil.rmtree(BUILD_TMP, ignore_errors=True)


def load(text, name="g"):
    path = helpers.write_file(os.path.join(BUILD_TMP, f"{name}.toml"), textwrap.dedent(text))
    return grid.load(path, PROGS)


class Expansion(unittest.TestCase):
    def test_defaults(self):
        g = load("[[study]]\n" + TRAIN)
        self.assertEqual((g.name, g.settings["repetitions"], g.settings["timeout_s"], g.settings["seed"]),
                         ("g", 3, 300, None))
        (p,) = g.points
        self.assertEqual((p.bench, p.runtime, p.processes, p.preset, p.study, p.where),
                         ("train_step", "gomp", 1, "", "train_step0", "study[0].runtimes[0]"))
        # A flag the grid does not name is not passed: the program's default holds.
        self.assertEqual(p.args, {})
        self.assertEqual(p.program_args(), [])
        self.assertEqual(set(p.env), set(schema.env_knob_names(PROGS["train_step"].describe())))
        self.assertEqual(set(p.env.values()), {"unset"})
        self.assertEqual(p.label, "train_step gomp (no env)")
        self.assertEqual([b.name for b in p.description().benchmarks],
                         [b["name"] for b in helpers.recording("train_step")["benchmarks"]])

    def test_runtime_knobs_are_not_crossed(self):
        g = load("""
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
        self.assertEqual(len(g.points), 10)
        gomp = sorted((p.env["OMP_NUM_THREADS"], p.env["GOMP_SPINCOUNT"], p.env["KMP_BLOCKTIME"])
                      for p in g.points if p.runtime == "gomp")
        self.assertEqual(gomp, [("1", "0", "unset"), ("1", "1000", "unset"),
                                ("2", "0", "unset"), ("2", "1000", "unset")])
        llvm = sorted((p.env["OMP_NUM_THREADS"], p.env["KMP_BLOCKTIME"], p.env["GOMP_SPINCOUNT"])
                      for p in g.points if p.runtime == "llvm")
        self.assertEqual(llvm, [("1", "0", "unset"), ("1", "200", "unset"), ("1", "50", "unset"),
                                ("2", "0", "unset"), ("2", "200", "unset"), ("2", "50", "unset")])

    def test_kmp_library_is_an_llvm_axis(self):
        g = load("""
            [[study]]
            bench = "optimizer_step"
            runtimes = [{name = "gomp"}, {name = "llvm", KMP_LIBRARY = ["turnaround", "throughput"]}]
        """)
        self.assertEqual([(p.runtime, p.env["KMP_LIBRARY"]) for p in g.points],
                         [("gomp", "unset"), ("llvm", "turnaround"), ("llvm", "throughput")])
        self.assertEqual(g.points[1].child_env("/x/libomp.so.5")[0],
                         {"KMP_LIBRARY": "turnaround", "LD_PRELOAD": "/x/libomp.so.5"})

    def test_onednn_isa_is_crossed_with_every_runtime(self):
        g = load("""
            [[study]]
            bench = "runtime"
            env = {ONEDNN_MAX_CPU_ISA = ["unset", "SSE41"]}
            runtimes = [{name = "gomp"}, {name = "llvm"}]
        """)
        self.assertEqual([(p.runtime, p.env["ONEDNN_MAX_CPU_ISA"]) for p in g.points],
                         [("gomp", "unset"), ("gomp", "SSE41"), ("llvm", "unset"), ("llvm", "SSE41")])

    def test_entry_list_replaces_study_list(self):
        g = load("""
            [[study]]
            bench = "optimizer_step"
            env = {OMP_NUM_THREADS = [1, 2]}
            runtimes = [{name = "gomp", OMP_NUM_THREADS = "unset"}, {name = "gomp"}]
        """)
        self.assertEqual([p.env["OMP_NUM_THREADS"] for p in g.points], ["unset", "1", "2"])

    def test_cores_resolves_and_dedupes(self):
        g = load(f"""
            [[study]]
            bench = "optimizer_step"
            env = {{OMP_NUM_THREADS = ["cores", {CPUS}, "unset"]}}
        """)
        self.assertEqual([p.env["OMP_NUM_THREADS"] for p in g.points], [str(CPUS), "unset"])

    def test_world_size_and_cores_per_process(self):
        g = load(f"""
            [[study]]
            bench = "ddp_step"
            world_size = [1, 2, {2 * CPUS}]
            env = {{OMP_NUM_THREADS = ["cores_per_process", 1]}}
        """)
        got = [(p.processes, p.env["OMP_NUM_THREADS"], p.ranks) for p in g.points]
        want = []
        for world in (1, 2, 2 * CPUS):
            for threads in dict.fromkeys([str(max(1, CPUS // world)), "1"]):  # equal values: one point
                want.append((world, threads, True))
        self.assertEqual(sorted(got), sorted(want))
        self.assertIn("world_size=2", next(p for p in g.points if p.processes == 2).label)
        opt = load('[[study]]\nbench = "optimizer_step"\nprocesses = 2\n')
        self.assertEqual([(p.processes, p.ranks) for p in opt.points], [(2, False)])
        self.assertIn("x2 procs", opt.points[0].label)

    def test_axis_flags_stay_one_process_and_other_lists_are_launch_axes(self):
        g = load("""
            seed = 5
            [[study]]
            bench = "train_step"
            model = ["cifar_sgd", "mnist_adadelta"]
            batch = [16, 64, 16]
            sampler = ["on", "off"]
            steps = 4
            augment = false
            processes = [1, 2]
        """)
        self.assertEqual(g.settings["seed"], 5)
        self.assertEqual(len(g.points), 4)  # sampler x processes
        self.assertEqual(sorted((p.args["sampler"], p.processes) for p in g.points),
                         [("off", 1), ("off", 2), ("on", 1), ("on", 2)])
        p = g.points[0]
        # axis lists as one comma list (duplicates dropped), booleans as 0/1
        self.assertEqual(p.program_args(), ["--model=cifar_sgd,mnist_adadelta", "--batch=16,64",
                                            f"--sampler={p.args['sampler']}", "--steps=4", "--augment=0"])
        names = [b.name for b in p.description().benchmarks]
        self.assertEqual(len(names), 2 * 2 * 2 * 2)  # model x batch x workers (0, 2) x gap_ms (0, 100)
        self.assertEqual(names[0], "train_step/cifar_sgd/preload:0/batch:16/workers:0/loader:torch/mkldnn:1/gap_ms:0")
        self.assertEqual(len({q.key for q in g.points}), 4)

    def test_device_is_a_launch_axis_with_its_own_benchmarks(self):
        g = load('[[study]]\n' + TRAIN + 'device = ["cpu", "cuda"]\nworkers = 0\ngap_ms = 0\n')
        cpu, cuda = g.points
        self.assertEqual((cpu.args, cuda.args), ({"workers": "0", "gap_ms": "0", "device": "cpu"},
                                                 {"workers": "0", "gap_ms": "0", "device": "cuda"}))
        self.assertEqual(cuda.label, "train_step cuda gomp (no env)")
        self.assertEqual([b.name for b in cuda.description().benchmarks], [
            f"train_step_cuda/{m}/preload:0/batch:64/workers:0/loader:torch/mkldnn:1/pin_memory:0"
            "/non_blocking:0/item_sync:0/gap_ms:0" for m in ("mnist_adadelta", "cifar_sgd")])

    def test_skip_rules_come_from_the_program(self):
        (p,) = load('[[study]]\n' + TRAIN + 'model = "mnist_adadelta"\npreload = [0, 1]\nworkers = [0, 2]\n'
                    'loader = ["torch", "tbb"]\ngap_ms = 0\n').points
        self.assertEqual([(b.args["preload"], b.args["workers"], b.args["loader"])
                          for b in p.description().benchmarks],
                         [("0", "0", "torch"), ("0", "2", "torch"), ("0", "2", "tbb"), ("1", "0", "torch")])

    def test_child_env_and_point_keys(self):
        gomp, llvm = load("""
            [[study]]
            bench = "optimizer_step"
            runtimes = [{name = "gomp"}, {name = "llvm", KMP_BLOCKTIME = 0, OMP_NUM_THREADS = 2}]
        """).points
        knobs = schema.env_knob_names(PROGS["optimizer_step"].describe())
        # the variables without a knob column of their own are removed too (LD_PRELOAD, THREADBURN_CUDA_SYNC)
        self.assertEqual(gomp.child_env("/x/libomp.so.5"), ({}, knobs + list(schema.NOT_A_KNOB)))
        setenv, unset = llvm.child_env("/x/libomp.so.5")
        self.assertEqual(setenv, {"OMP_NUM_THREADS": "2", "KMP_BLOCKTIME": "0", "LD_PRELOAD": "/x/libomp.so.5"})
        self.assertEqual(unset, [k for k in knobs + list(schema.NOT_A_KNOB)
                                 if k not in ("OMP_NUM_THREADS", "KMP_BLOCKTIME", "LD_PRELOAD")])
        self.assertEqual(llvm.label, "optimizer_step llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=0")
        self.assertNotEqual(gomp.key, llvm.key)
        self.assertRegex(gomp.key, r"^[0-9a-f]{12}$")
        again = load('[[study]]\nname = "renamed"\n' + OPT + 'runtimes = [{name = "gomp"}]\n').points[0]
        self.assertEqual(again.key, gomp.key)  # labels do not change identity
        other = load('[[study]]\n' + OPT + 'steps = 3\n').points[0]
        self.assertNotEqual(other.key, gomp.key)

    def test_settings_reach_points(self):
        g = load('repetitions = 2\ntimeout_s = 9\ntimeline = true\n[[study]]\n' + OPT
                 + 'repetitions = 5\nthreads_csv = true\npreset = "mine"\n'
                 + 'runtimes = [{name = "gomp"}, {name = "llvm", preset = "other", timeline = false}]\n')
        gomp, llvm = g.points
        self.assertEqual((gomp.repetitions, gomp.timeout_s, gomp.timeline, gomp.threads_csv, gomp.preset),
                         (5, 9, True, True, "mine"))
        self.assertEqual((llvm.timeline, llvm.preset), (False, "other"))


class Validation(unittest.TestCase):
    """Each bad grid: one line naming the file, the key and what was expected."""
    ALLOWED_STUDY = ("bench, device, env, gap_ms, name, optimizer, params, preset, processes, repetitions, runtimes, "
                     "sampler, sampler_us, settings, steps, threads_csv, timeline, timeout_s, warmup, world_size")
    CASES = [
        # (grid text, key path, words of the message)
        ('colour = "red"\n[[study]]\n' + OPT, "colour",
         "unknown key at the top level; expected one of: description, name, repetitions, seed, settings, study, "
         "timeline, timeout_s"),
        ('[[study]]\n' + OPT + 'batch = [64]\n', "study[0].batch",
         "not a key of a study nor a flag of optimizer_step; expected one of: " + ALLOWED_STUDY),
        # the flags the sweep sets itself are not the grid's
        ('[[study]]\n' + OPT + 'barrier = "x:2"\n', "study[0].barrier", "not a key of a study nor a flag"),
        ('[[study]]\n' + OPT + 'timeline_dir = "/tmp"\n', "study[0].timeline_dir", "not a key of a study"),
        ('[[study]]\n' + OPT + 'OMP_NUM_THREADS = 2\n', "study[0].OMP_NUM_THREADS",
         "environment variables go in the study's env table or in a runtimes entry"),
        ('repetitions = 1.5\n[[study]]\n' + OPT, "repetitions", "expected an integer >= 1, got 1.5"),
        ('timeout_s = 0\n[[study]]\n' + OPT, "timeout_s", "expected an integer >= 1 (s), got 0"),
        ('timeline = "yes"\n[[study]]\n' + OPT, "timeline", "expected true or false, got 'yes'"),
        ('repetitions = 3\n', "study", "expected at least one [[study]] table"),
        ('[[study]]\nsteps = 3\n', "study[0].bench", f"missing: expected one of {', '.join(helpers.BENCHES)}"),
        ('[[study]]\nbench = "inference"\n', "study[0].bench",
         f"'inference' is not a program of this build; expected one of {', '.join(helpers.BENCHES)}"),
        ('[[study]]\n' + OPT + 'gap_ms = []\n', "study[0].gap_ms", "empty list: give at least one value"),
        ('[[study]]\n' + OPT + 'steps = "a lot"\n', "study[0].steps",
         "expected a number, true/false or a string without spaces, got 'a lot'"),
        ('[[study]]\n' + OPT + 'steps = {n = 1}\n', "study[0].steps", "expected a number, true/false"),
        # environment values
        ('[[study]]\n' + OPT + 'env = {OMP_NUM_THREADS = [2, 0]}\n', "study[0].env.OMP_NUM_THREADS[1]",
         'expected an integer >= 1, "cores", "cores_per_process" or "unset", got 0'),
        ('[[study]]\n' + OPT + 'env = {OMP_NUM_THREADS = "all"}\n', "study[0].env.OMP_NUM_THREADS",
         "got 'all'"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "llvm", KMP_BLOCKTIME = -3}]\n',
         "study[0].runtimes[0].KMP_BLOCKTIME", 'expected an integer >= 0, "infinite" or "unset", got -3'),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp", GOMP_SPINCOUNT = true}]\n',
         "study[0].runtimes[0].GOMP_SPINCOUNT", "expected an integer >= 0"),
        ('[[study]]\n' + OPT + 'env = {OMP_WAIT_POLICY = "sometimes"}\n', "study[0].env.OMP_WAIT_POLICY",
         """expected "active" or "passive", or "unset", got 'sometimes'"""),
        ('[[study]]\n' + OPT + 'env = {OMP_PROC_BIND = "tight"}\n', "study[0].env.OMP_PROC_BIND",
         "expected true, false, close, spread, primary (a comma list, any case)"),
        ('[[study]]\n' + OPT + 'env = {OMP_PLACES = "everywhere"}\n', "study[0].env.OMP_PLACES",
         "expected threads, cores, sockets"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "llvm", KMP_AFFINITY = "compact, 1"}]\n',
         "study[0].runtimes[0].KMP_AFFINITY", "a KMP_AFFINITY string without spaces"),
        ('[[study]]\n' + OPT + 'env = {NOT_A_KNOB = 1}\n', "study[0].env.NOT_A_KNOB",
         "not a knob every runtime reads; expected one of: OMP_NUM_THREADS, OMP_WAIT_POLICY, OMP_PROC_BIND, "
         "OMP_PLACES, OMP_SCHEDULE, ONEDNN_MAX_CPU_ISA"),
        ('[[study]]\n' + OPT + 'env = {ONEDNN_MAX_CPU_ISA = "avx2"}\n', "study[0].env.ONEDNN_MAX_CPU_ISA",
         """expected "ALL", "SSE41", "AVX", "AVX2", "AVX2_VNNI", "AVX512_CORE", "AVX512_CORE_VNNI", """
         """"AVX512_CORE_BF16" or "AVX512_CORE_AMX", or "unset", got 'avx2'"""),
        # runtime-only knobs only under their runtime
        ('[[study]]\n' + OPT + 'env = {KMP_BLOCKTIME = [0]}\n', "study[0].env.KMP_BLOCKTIME",
         'not a knob every runtime reads (KMP_BLOCKTIME is read only by the llvm runtime: set it in a '
         'runtimes entry with name = "llvm")'),
        ('[[study]]\n' + OPT + 'env = {GOMP_SPINCOUNT = 10}\n', "study[0].env.GOMP_SPINCOUNT",
         "read only by the gomp runtime"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp", KMP_BLOCKTIME = 0}]\n',
         "study[0].runtimes[0].KMP_BLOCKTIME",
         "not a key of a gomp entry (KMP_BLOCKTIME is read only by the llvm runtime, so it is not varied "
         "under gomp); expected one of: GOMP_SPINCOUNT, OMP_NUM_THREADS, OMP_PLACES, OMP_PROC_BIND, "
         "OMP_SCHEDULE, OMP_WAIT_POLICY, ONEDNN_MAX_CPU_ISA, name, preset, timeline"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "llvm", GOMP_SPINCOUNT = 0}]\n',
         "study[0].runtimes[0].GOMP_SPINCOUNT", "read only by the gomp runtime, so it is not varied under llvm"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp", KMP_AFFINITY = "compact"}]\n',
         "study[0].runtimes[0].KMP_AFFINITY", "not varied under gomp"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp", KMP_LIBRARY = "serial"}]\n',
         "study[0].runtimes[0].KMP_LIBRARY", "KMP_LIBRARY is read only by the llvm runtime, so it is not varied"),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "llvm", KMP_LIBRARY = ["turnaround", "fast"]}]\n',
         "study[0].runtimes[0].KMP_LIBRARY[1]",
         """expected "serial", "turnaround" or "throughput", or "unset", got 'fast'"""),
        ('[[study]]\n' + OPT + 'runtimes = [{name = "iomp"}]\n', "study[0].runtimes[0].name",
         "expected one of gomp, llvm, got 'iomp'"),
        ('[[study]]\n' + OPT + 'runtimes = []\n', "study[0].runtimes", "expected a non-empty array of tables"),
        ('[[study]]\n' + OPT + 'runtimes = ["gomp"]\n', "study[0].runtimes[0]", "expected a table, got str"),
        # processes
        ('[[study]]\n' + OPT + 'processes = 0\n', "study[0].processes", "expected an integer >= 1, got 0"),
        ('[[study]]\n' + OPT + f'processes = [1, {4 * CPUS + 1}]\n', "study[0].processes[1]",
         f"{4 * CPUS + 1} processes: at most {4 * CPUS} (4 per CPU)"),
        # a world's ranks against independent copies
        ('[[study]]\nbench = "ddp_step"\nprocesses = 2\n', "study[0].processes",
         "ddp_step starts the ranks of one data-parallel world: give world_size"),
        ('[[study]]\n' + OPT + 'world_size = 2\n', "study[0].world_size",
         "only for programs whose processes are the ranks of one world (ddp_step); optimizer_step starts "
         "independent copies: give processes"),
        ('[[study]]\nbench = "ddp_step"\nworld_size = [2, 0]\n', "study[0].world_size[1]",
         "expected an integer >= 1, got 0"),
        # duplicates
        ('[[study]]\n' + OPT + 'runtimes = [{name = "gomp"}, {name = "gomp"}]\n', "study[0].runtimes[1]",
         "duplicate point (optimizer_step gomp (no env)); it is already produced by study[0].runtimes[0]"),
        ('[[study]]\n' + OPT + '[[study]]\n' + OPT + 'name = "again"\n', "study[1].runtimes[0]",
         "duplicate point (optimizer_step gomp (no env)); it is already produced by study[0].runtimes[0]"),
        ('[[study]]\n' + OPT + 'env = {OMP_NUM_THREADS = ["cores", "unset"]}\n[[study]]\n' + OPT
         + f'env = {{OMP_NUM_THREADS = {CPUS}}}\n', "study[1].runtimes[0]", "duplicate point"),
        # the program itself refuses a point, in its own words
        ('[[study]]\n' + TRAIN + 'batch = [16, 0]\n', "study[0].runtimes[0]",
         "train_step_bench refuses --batch=16,0: --batch: expected an integer in [1, 65536], got 0"),
        ('[[study]]\n' + TRAIN + 'model = "resnet50"\n', "study[0].runtimes[0]",
         "train_step_bench refuses --model=resnet50: --model: unknown value 'resnet50' (expected one of: "
         "mnist_adadelta, cifar_sgd)"),
        ('[[study]]\n' + OPT + 'sampler = ["on", "sometimes"]\n', "study[0].runtimes[0]",
         "optimizer_step_bench refuses --sampler=sometimes: --sampler: unknown value 'sometimes'"),
        ('[[study]]\n' + OPT + 'steps = 0\n', "study[0].runtimes[0]",
         "--steps: expected an integer in [1, 1000000], got 0"),
        ('[[study]]\n' + TRAIN + 'preload = 1\nworkers = 2\n', "study[0].runtimes[0]",
         "train_step_bench refuses --preload=1 --workers=2: no benchmark to run: every combination of these "
         "flags is skipped (preloaded data has no loader workers)"),
        ('[[study]]\n' + TRAIN + 'device = ["cpu", "gpu"]\n', "study[0].runtimes[0]",
         "train_step_bench refuses --device=gpu: --device:"),
        ('[[study]\n', "", "not valid TOML"),
    ]

    def test_each_bad_grid_names_file_key_and_expectation(self):
        for text, key, words in self.CASES:
            with self.subTest(text=text):
                with self.assertRaises(grid.GridError) as caught:
                    load(text)
                message = str(caught.exception)
                self.assertTrue(message.startswith(os.path.join(BUILD_TMP, "g.toml") + ": " + key), message)
                self.assertIn(words, message)
                self.assertNotIn("\n", message)

    def test_a_missing_file(self):
        with self.assertRaises(grid.GridError) as caught:
            grid.load(os.path.join(BUILD_TMP, "none.toml"), PROGS)
        self.assertEqual(str(caught.exception), f"{BUILD_TMP}/none.toml: cannot read: No such file or directory")


class CommandLine(helpers.TempDir, unittest.TestCase):
    def test_bad_grid_exits_2_with_one_line_and_runs_nothing(self):
        bad = helpers.write_file(self.path("bad.toml"), '[[study]]\n' + TRAIN + 'batch = 0\n')
        build = helpers.make_fake_build(self.path("build"))
        log, out = self.path("log"), self.path("r.csv")
        for extra in ([], ["--dry-run"]):
            with self.subTest(extra=extra):
                result = helpers.threadburn("sweep", bad, "--build-dir", build, "--out", out, *extra,
                                            env=helpers.clean_env(FAKE_LOG=log))
                helpers.assert_one_line_error(self, result)
                self.assertEqual(result.stderr, f"threadburn sweep: error: {bad}: study[0].runtimes[0]: "
                                 "train_step_bench refuses --batch=0: --batch: expected an integer in "
                                 "[1, 65536], got 0\n")
                self.assertEqual(result.stdout, "")
                self.assertFalse(os.path.exists(out))
                with open(log) as f:  # asked to describe itself, never run
                    self.assertTrue(all('"--describe"' in line for line in f))

    def test_missing_programs(self):
        grid_path = helpers.write_file(self.path("g.toml"), '[[study]]\n' + OPT)
        result = helpers.threadburn("sweep", grid_path, "--build-dir", self.path("nobuild"), "--dry-run")
        helpers.assert_one_line_error(self, result, "no benchmark programs (*_bench) in ",
                                      "build first (scripts/build.sh) or pass --build-dir")


class ShippedGrids(unittest.TestCase):
    def test_every_config_validates(self):
        paths = sorted(glob.glob(os.path.join(helpers.REPO, "configs", "*.toml")))
        self.assertTrue(paths)
        for path in paths:
            with self.subTest(path=os.path.basename(path)):
                g = grid.load(path, PROGS)
                self.assertTrue(g.points)
                for p in g.points:  # the runtime-only knobs never cross runtimes
                    for knob, owner in schema.runtime_only_knobs(p.description()).items():
                        if p.runtime != owner:
                            self.assertEqual(p.env.get(knob, "unset"), "unset", (p.where, knob))


if __name__ == "__main__":
    unittest.main()
