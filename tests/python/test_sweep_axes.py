"""sweep.py with schema 2's programs and axes, against fake_bench.py: the
runtime bench, loader/mkldnn, CUDA-only axes, and the fake's own fidelity
(it must refuse what the real programs refuse)."""
import json
import os
import subprocess
import sys
import unittest

import helpers
from test_sweep import LIB, SweepTest

RUNTIME_GRID = """
    repetitions = 1
    [[study]]
    bench = "runtime"
    kernel = ["serial", "omp", "tbb"]
    gap_ms = [0, 300]
    steps = 4
    runtimes = [{name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = 50}]
"""

TRAIN_GRID = """
    repetitions = 1
    [[study]]
    bench = "train_step"
    workers = [0, 2]
    loader = ["torch", "tbb"]
    mkldnn = [0, 1]
"""

CUDA_GRID = """
    repetitions = 1
    [[study]]
    bench = "train_step"
    device = ["cpu", "cuda"]
    item_sync = [0, 1]
    cuda_sync = ["auto", "spin"]
"""


def fake(program, *args, **env):
    return subprocess.run([sys.executable, helpers.FAKE_BENCH, program] + list(args),
                          capture_output=True, text=True, env=helpers.clean_env(**env))


class RuntimeBench(SweepTest):
    def test_rows_hold_kernel_size_gap_and_the_runtime_counters(self):
        result = self.sweep(self.grid(RUNTIME_GRID))
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = {(r["kernel"], r["gap_ms"]): r for r in helpers.read_rows(self.out)}
        self.assertEqual(sorted(rows), [("omp", "0"), ("omp", "300"), ("serial", "0"),
                                        ("serial", "300"), ("tbb", "0"), ("tbb", "300")])
        r = rows[("omp", "300")]
        self.assertEqual(r["benchmark"], "runtime_region/omp/n:1048576/gap_ms:300/iterations:4"
                                         "/manual_time")
        self.assertEqual((r["bench"], r["status"], r["n"], r["steps"], r["device"]),
                         ("runtime", "ok", "1048576", "4", "cpu"))
        # the fake: serial 2 ms; 2 threads: 1 + 0.25 back to back; workers that
        # slept (blocktime 50 < gap 300) cost 0.5 ms to wake; (T-1) * 50 burnt.
        self.assertEqual([r[c] for c in ("serial_ms", "backtoback_ms", "wakeup_ms", "step_ms",
                                         "kernel_threads", "overhead_ms", "residual_cpu_ms",
                                         "residual_cpu_ms_median", "tail_ms_median")],
                         ["2", "1.25", "0.5", "1.75", "2", "0.75", "50", "50", "50"])
        self.assertAlmostEqual(float(r["speedup"]), 2 / 1.75, places=12)
        self.assertEqual((r["extra_counters"], r["samples_per_s"], r["model"], r["cuda_sync"]),
                         ("fake_counter=1.5", "", "", ""))
        self.assertEqual([rows[("omp", "0")][c] for c in ("wakeup_ms", "residual_cpu_ms")],
                         ["0", "0"])
        self.assertEqual([rows[("serial", "300")][c] for c in ("kernel_threads", "residual_cpu_ms",
                                                               "speedup")], ["1", "0", "1"])
        self.assertIn(f"LD_PRELOAD={LIB} {self.build}/bench/runtime_bench --kernel=serial,omp,tbb "
                      "--n=1048576 --gap_ms=0,300 --device=cpu --steps=4 --warmup=2 "
                      "'--benchmark_filter=^runtime_region/omp/n:1048576/gap_ms:300/"
                      "iterations:4/manual_time$'", r["repro"])
        self.assertIn("runtime_region/serial/n:1048576/gap_ms:300", result.stdout)  # summary


class TrainAxes(SweepTest):
    def test_loader_mkldnn_and_new_counters_and_context(self):
        result = self.sweep(self.grid(TRAIN_GRID))
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = helpers.read_rows(self.out)
        got = sorted((r["workers"], r["loader"], r["mkldnn"], r["step_ms"]) for r in rows)
        # fake: 1 + 30/2 + per worker 0.5 (torch) or 0.25 (tbb) + 4 without oneDNN
        self.assertEqual(got, [("0", "torch", "0", "20"), ("0", "torch", "1", "16"),
                               ("2", "tbb", "0", "20.5"), ("2", "tbb", "1", "16.5"),
                               ("2", "torch", "0", "21"), ("2", "torch", "1", "17")])
        r = next(r for r in rows if r["loader"] == "tbb" and r["mkldnn"] == "1")
        self.assertIn("/preload:0/tbb_loader:1/mkldnn:1/iterations:10/manual_time", r["benchmark"])
        self.assertEqual([r[c] for c in ("sync_ms", "sync_cpu_ms", "gpu_ms", "tail_ms_median",
                                         "cuda_toolkit_compiled", "cuda_runtime_version",
                                         "cuda_sync_requested", "cuda_sync_in_force",
                                         "mkldnn_enabled", "pin_memory", "cuda_sync")],
                         ["0", "0", "", "0", "1", "12.2", "auto", "n/a", "1", "", ""])
        self.assertEqual(r["blas_library"], "openblas-openmp:/usr/lib/libblas.so.3")
        self.assertEqual(r["extra_counters"], "fake_counter=1.5")

    def test_failed_rows_carry_the_names_ok_rows_would(self):
        # The names the sweep predicts for a process that dies must be the
        # names the program reports: same skips, same components.
        grids = {"train": TRAIN_GRID, "runtime": RUNTIME_GRID,
                 "cuda": CUDA_GRID.replace('"cpu", "cuda"', '"cuda"')}
        for name, text in grids.items():
            with self.subTest(grid=name):
                env = self.env(FAKE_BENCH_CUDA=1)
                self.assertEqual(self.sweep(self.grid(text), "--force", env=env).returncode, 0)
                ok = sorted((r["run_key"], r["benchmark"]) for r in helpers.read_rows(self.out))
                self.sweep(self.grid(text), "--force",
                           env=self.env(FAKE_BENCH_CUDA=1, FAKE_BENCH_EXIT_IF="FAKE_BENCH_CUDA=1"))
                rows = helpers.read_rows(self.out)
                self.assertEqual({r["status"] for r in rows}, {"failed"})
                self.assertEqual(sorted((r["run_key"], r["benchmark"]) for r in rows), ok)

    def test_a_build_without_tbb_and_no_cache_fails_per_row(self):
        # No CMakeCache.txt: the sweep cannot know; the program refuses the flag.
        result = self.sweep(self.grid(TRAIN_GRID), env=self.env(FAKE_BENCH_NO_TBB=1))
        self.assertEqual(result.returncode, 0, result.stderr)
        rows = helpers.read_rows(self.out)
        self.assertEqual(len(rows), 6)
        self.assertEqual({(r["status"], r["reason"]) for r in rows}, {
            ("failed", "exit code 2: train_step_bench: error: --loader: tbb: this build has no "
             "TBB (configure with THREADBURN_WITH_TBB=ON)")})


class CudaAxes(SweepTest):
    def test_cuda_only_flags_reach_cuda_processes_only(self):
        log = os.path.join(self.tmp, "log")
        result = self.sweep(self.grid(CUDA_GRID), env=self.env(FAKE_BENCH_LOG=log))
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(log) as f:
            calls = sorted(json.loads(line)["argv"] for line in f)
        cpu = [a for a in calls if "--device=cpu" in a]
        cuda = [a for a in calls if "--device=cuda" in a]
        self.assertEqual((len(cpu), len(cuda)), (1, 2))
        self.assertFalse([a for a in cpu[0] if a.startswith(("--item_sync", "--pin_memory",
                                                             "--non_blocking", "--cuda_sync"))])
        self.assertEqual(sorted(a for c in cuda for a in c if a.startswith("--cuda_sync")),
                         ["--cuda_sync=auto", "--cuda_sync=spin"])
        for argv in cuda:
            self.assertIn("--item_sync=0,1", argv)
            self.assertIn("--pin_memory=0", argv)
        rows = helpers.read_rows(self.out)
        got = sorted((r["device"], r["cuda_sync"], r["item_sync"], r["status"]) for r in rows)
        self.assertEqual(got, [("cpu", "", "", "ok"),
                               ("cuda", "auto", "0", "skipped"), ("cuda", "auto", "1", "skipped"),
                               ("cuda", "spin", "0", "skipped"), ("cuda", "spin", "1", "skipped")])

    def test_cuda_rows_with_a_gpu_and_a_refused_policy(self):
        env = self.env(FAKE_BENCH_CUDA=1, FAKE_BENCH_SYNC_IN_FORCE="yield")
        result = self.sweep(self.grid(CUDA_GRID), env=env)
        self.assertEqual(result.returncode, 0, result.stderr)
        cuda = [r for r in helpers.read_rows(self.out) if r["device"] == "cuda"]
        self.assertEqual({r["status"] for r in cuda}, {"ok"})
        spin = sorted((r for r in cuda if r["cuda_sync"] == "spin"), key=lambda r: r["item_sync"])
        self.assertEqual([(r["item_sync"], r["pin_memory"], r["non_blocking"], r["sync_ms"],
                           r["gpu_ms"], r["cuda_sync_requested"], r["cuda_sync_in_force"])
                          for r in spin],
                         [("0", "0", "0", "0", "12.8", "spin", "yield"),
                          ("1", "0", "0", "2", "12.8", "spin", "yield")])
        self.assertEqual({r["reason"] for r in spin},
                         {"note: asked for cuda_sync spin but yield is in force"})
        self.assertEqual({r["reason"] for r in cuda if r["cuda_sync"] == "auto"}, {""})
        self.assertTrue(spin[0]["benchmark"].startswith("train_step_cuda/mnist_adadelta/"))
        self.assertIn("/mkldnn:1/pin_memory:0/non_blocking:0/item_sync:0/iterations:10/",
                      spin[0]["benchmark"])


class FakeFidelity(unittest.TestCase):
    """The fake refuses what the real programs refuse (bench/test_cli.py and
    the programs' --help are the reference), with their one-line errors."""
    REFUSED = [
        (("train_step", "--item_sync=1"), {}, "train_step_bench: error: --item_sync: only with "
         "--device=cuda"),
        (("train_step", "--pin_memory=0,1"), {}, "--pin_memory: only with --device=cuda"),
        (("train_step", "--cuda_sync=spin"), {}, "--cuda_sync: only with --device=cuda"),
        (("train_step", "--device=cuda", "--cuda_sync=busy"), {},
         "--cuda_sync: unknown policy 'busy'"),
        (("train_step", "--device=cuda", "--cuda_sync=spin"), {"FAKE_BENCH_NO_CUDA_TOOLKIT": 1},
         "--cuda_sync: this build has no CUDA toolkit"),
        (("train_step", "--loader=dali"), {}, "--loader: unknown value"),
        (("train_step", "--workers=2", "--loader=tbb"), {"FAKE_BENCH_NO_TBB": 1},
         "--loader: tbb: this build has no TBB"),
        (("train_step", "--mkldnn=2"), {}, "--mkldnn: expected integers in [0, 1]"),
        (("train_step", "--kernel=omp"), {}, "--kernel: unknown flag (see --help)"),
        (("optimizer_step", "--mkldnn=1"), {}, "optimizer_step_bench: error: --mkldnn: unknown "
         "flag"),
        (("runtime", "--kernel=cuda"), {}, "runtime_bench: error: --kernel: unknown value"),
        (("runtime", "--n=0"), {}, "--n: expected integers in [1, 1073741824], got '0'"),
        (("runtime", "--device=cuda"), {}, "--device: runtime_bench runs on cpu only"),
        (("runtime", "--kernel=tbb"), {"FAKE_BENCH_NO_TBB": 1}, "--kernel: tbb: this build has "
         "no TBB"),
        (("runtime", "--kernel=onednn"), {"FAKE_BENCH_NO_DNNL": 1}, "--kernel: onednn: this "
         "build has no oneDNN"),
        (("runtime", "--model=cifar_sgd"), {}, "--model: unknown flag"),
    ]

    def test_refused_flags_exit_2_with_one_line(self):
        for args, env, message in self.REFUSED:
            with self.subTest(args=args):
                result = fake(*args, **env)
                self.assertEqual(result.returncode, 2)
                self.assertEqual(result.stdout, "")
                self.assertEqual(result.stderr.count("\n"), 1)
                self.assertIn(message, result.stderr)

    def test_accepted_like_the_real_programs(self):
        # 0 / auto count as "not set" for the CUDA-only flags on cpu
        for args in (("train_step", "--item_sync=0", "--cuda_sync=auto", "--gap_ms=0"),
                     ("train_step", "--workers=0", "--loader=tbb", "--gap_ms=0"),
                     ("runtime", "--kernel=omp", "--gap_ms=0")):
            with self.subTest(args=args):
                result = fake(*args)
                self.assertEqual(result.returncode, 0, result.stderr)
        # the TBB loader without workers is skipped, not run: no benchmarks at all
        report = json.loads(fake("train_step", "--workers=0", "--loader=tbb", "--gap_ms=0",
                                 "--model=cifar_sgd").stdout)
        self.assertEqual(report["benchmarks"], [])


if __name__ == "__main__":
    unittest.main()
