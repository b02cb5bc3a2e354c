"""`threadburn run` on a GPU training (its report: export/run_report.py), from probe files
written by hand to the probe's GPU interface (tests/python/fixtures/gpu_probe:
one folder per case, probe-<pid>.json): per GPU its busy share and how it was
sampled, the CUDA wait policy asked and in force with its note, CPU by class
with the CUDA driver's threads, the pin-memory thread and the worker
processes, the main thread's share of a core, the steady phase first and the
startup in one line, the waits on the device, and advice only where the
steady phase's causes call for it. Each case's figures are chosen so the
advice is known: sync-bound (spinning or sleeping), host-bound,
loader-bound, or none; item_sync is the user reports' case, where the whole
run's shares said host-bound and the waits say sync-bound. A program without any OpenMP
region gets its report (live, with the real build's probe)."""
import contextlib
import copy
import dataclasses
import json
import os
import unittest
from unittest import mock

import helpers
from threadburn.export import run_report
from threadburn.lib import knobs, probe
from threadburn.lib.errors import ThreadburnError

CASES = os.path.join(helpers.FIXTURES, "gpu_probe")


@contextlib.contextmanager
def cuda_knob():
    """The knob table with THREADBURN_CUDA_SYNC: as it is, or, for a table
    that lacks it yet, with a stand-in as the probe's GPU interface agrees
    it (a row of reader cuda whose value lands in the cuda_sync column)."""
    if knobs.get(probe.CUDA_SYNC) is not None:
        yield
        return

    @dataclasses.dataclass(frozen=True)
    class StandIn(knobs.Knob):
        column: str = "cuda_sync"
    stand_in = StandIn("THREADBURN_CUDA_SYNC", "cuda", "one-of auto spin yield blocking_sync", "-", "sync={}",
                       "cuda_sync_in_force", "the CUDA host wait policy")
    with mock.patch.object(knobs, "_table", knobs.table() + (stand_in,)):
        yield


def report_of(case, **counters):
    """The main report of a fixture case, its counters changed as given."""
    rep = probe.main_report(os.path.join(CASES, case), ["python3"])
    rep.summary = copy.deepcopy(rep.summary)
    rep.summary["counters"].update(counters)
    return rep


def text(case, **counters):
    return "\n".join(run_report.describe_report(report_of(case, **counters), ["python3", "train.py"]))


def advice(case, **counters):
    """The kinds of advice the report gives: the words before the first colon."""
    lines = run_report.describe_report(report_of(case, **counters), ["python3", "train.py"])
    return [ln.split("advice: ", 1)[1].split(":")[0] for ln in lines if ln.startswith("  advice: ")]


class GpuReport(unittest.TestCase):
    def test_host_bound(self):
        out = text("host_bound")
        self.assertIn("GPU 0 (NVIDIA H100 80GB HBM3): busy 30% of the steady phase, busy 30% of the time, memory busy "
                      "8% (60 NVML samples of 167 ms each)", out)
        self.assertIn("a kernel ran, not how much of the GPU it used", out)  # what the share can say
        self.assertIn("CUDA host wait policy: asked auto, in force auto (1 device(s) in the driver)", out)
        self.assertIn("main thread (0.95 of a core)", out)
        self.assertRegex(out, r"CUDA driver threads +120\b")
        self.assertIn("regions: no OpenMP region", out)
        self.assertEqual(advice("host_bound"), ["host-bound"])
        self.assertIn("the main thread worked 0.92 of a core outside its waits on the device while the GPU was busy "
                      "30% of the steady phase", out)
        self.assertIn("(200000 launches, 6 s inside them)", out)

    def test_the_spin_between_regions_is_advised_past_both_its_thresholds(self):
        # analysis/advice.between_regions: over BETWEEN_SHARE (0.1) of the workers' CPU and over
        # BETWEEN_MIN_MS (50 ms); each case just past, or at, one bound.
        said = ("  advice: the workers burned 51 ms while no region ran (spin-waiting). KMP_BLOCKTIME=0 or "
                "OMP_WAIT_POLICY=passive stop that")
        self.assertIn(said, text("host_bound", omp_between_regions_ms=51.0, cpu_omp_ms=500.0))
        self.assertNotIn("while no region ran", text("host_bound", omp_between_regions_ms=50.0, cpu_omp_ms=400.0))
        self.assertNotIn("while no region ran", text("host_bound", omp_between_regions_ms=100.0, cpu_omp_ms=1000.0))
        self.assertIn("workers burned 101 ms", text("host_bound", omp_between_regions_ms=101.0, cpu_omp_ms=1000.0))

    def test_the_steady_phase_leads_and_the_startup_is_one_line(self):
        lines = run_report.describe_report(report_of("item_sync"), ["python3", "train.py"])
        self.assertTrue(lines[1].startswith("  steady phase: 9.5 s: CPU 9300 ms (0.98 cores), main thread 0.97 of a "
                                            "core, GPU busy 97%"), lines[1])
        self.assertIn("waits on the device: the main thread 7600 ms in 400 waits (80% of the steady phase) with "
                      "7500 ms of CPU inside them", lines[2])
        self.assertEqual(lines[3], "  startup: 13 s before the first device work (a wait or launch through the CUDA "
                                   "driver), 12740 ms of CPU (not in the steady phase's figures)")
        self.assertEqual(sum(ln.startswith("  startup") for ln in lines), 1)

    def test_a_spinning_wait_is_not_host_work(self):
        # The case of the user reports (an H200, PyTorch 2.11): 400 steps of ~24 ms of GPU matmuls, each ending
        # in loss.item(), after 13 s of import and CUDA initialisation at a core. Over the whole run the main
        # thread ran 0.97 of a core while the GPU was busy 44% of the time, which read "host-bound" before; the
        # waits say the main thread spun 7.5 s of its 9.5 s of steps inside them.
        rep = report_of("item_sync")
        self.assertEqual((rep.counters["main_core_share"], rep.counters["gpu_busy_share"]), (0.97, 0.44))
        self.assertEqual(advice("item_sync"), ["sync-bound"])
        out = text("item_sync")
        self.assertIn("sync-bound: the main thread waited for the GPU 80% of the steady phase (7.6 s in 400 waits) "
                      "and burned 7.5 s of CPU inside them under the policy in force (auto), which spins: "
                      "blocking_sync would save about 7.5 s of CPU, 81% of the steady phase's", out)

    def test_sync_bound_under_a_spinning_policy(self):
        out = text("sync_spin")
        self.assertIn("GPU 0 (NVIDIA H100 80GB HBM3): busy 85% of the steady phase, busy 90% of the time", out)
        self.assertIn("regions: 120 ", out)  # OpenMP regions stay reported beside the GPU
        self.assertEqual(advice("sync_spin"), ["sync-bound"])
        self.assertIn("blocking_sync would save about 15.8 s of CPU, 78% of the steady phase's", out)
        self.assertIn("`threadburn tune -- <command>` measures whether it costs time", out)
        self.assertIn("--env THREADBURN_CUDA_SYNC=blocking_sync", out)

    def test_a_spinning_wait_starved_of_a_core_still_spins(self):
        # 0.42 of a core inside 16 s of spinning waits, 13 s waiting for a core (at most 0.4 s of
        # it outside the waits: 20 s less 16 s of waits less 3.6 s of CPU there): it spins.
        starved = dict(main_sync_cpu_ms=6700.0, sync_cpu_ms=6700.0, steady_cpu_main_ms=10300.0,
                       steady_wait_main_ms=13000.0)
        self.assertIn("which spins: blocking_sync would save about 6.7 s of CPU", text("sync_spin", **starved))
        # The same run-queue wait could all fall outside sleeping waits only if the phase had room
        # for it there: with 4.4 s of it (its whole room) the waits still sleep.
        self.assertIn("its waits sleeping", text("sync_spin", main_sync_cpu_ms=400.0, sync_cpu_ms=400.0,
                                                 steady_cpu_main_ms=400.0, steady_wait_main_ms=4000.0))
        # Under blocking_sync a wait's wait for a core is its wake-up's, no spin.
        self.assertIn("its waits sleeping", text("blocking_sync", steady_wait_main_ms=13000.0))

    def test_sync_bound_whose_waits_sleep_has_nothing_to_save(self):
        out = text("blocking_sync")
        self.assertIn("CUDA host wait policy: asked blocking_sync, in force blocking_sync", out)
        self.assertEqual(advice("blocking_sync"), ["sync-bound"])
        self.assertIn("its waits sleeping under the policy in force (blocking_sync: 400 ms of CPU inside them): the "
                      "GPU sets the pace", out)
        self.assertNotIn("would save", out)

    def test_loader_bound(self):
        out = text("loader_bound")
        self.assertEqual(advice("loader_bound"), ["loader-bound"])
        self.assertIn("the main thread sat idle 95% of the steady phase outside its waits on the device while its 4 "
                      "worker processes ran 0.90 of a core each", out)
        self.assertRegex(out, r"pin-memory thread +800\b")
        self.assertRegex(out, r"worker processes \(4: forked, e.g. DataLoader workers\) +36000 +36000\b")
        self.assertIn("main thread (0.35 of a core)", out)

    def test_how_each_gpu_was_sampled(self):
        rep = report_of("host_bound")
        polled = dict(rep.summary["gpus"][0], source="utilization_rates", samples=48, period_ms=None)
        silent = dict(rep.summary["gpus"][0], index=1, busy_share=None, memory_busy_share=None, samples=0,
                      period_ms=None)
        rep.summary["gpus"] = [polled, silent]
        rep.summary["steady_gpus"] = []
        out = "\n".join(run_report.gpu_lines(rep))
        self.assertIn("GPU 0 (NVIDIA H100 80GB HBM3): busy 30% of the time, memory busy 8% (48 readings of NVML's "
                      "utilisation rate, polled)", out)
        self.assertIn("GPU 1 (NVIDIA H100 80GB HBM3): no sample (0 NVML samples)", out)

    def test_the_advice_is_judged_per_gpu_of_the_process(self):
        """Two GPUs of the process, one busy 90 % and one 5 %, and a third visible, unused, idle:
        the busiest sets the pace, so not host-bound, where the two's mean (47 %, under GPU_LOW)
        would say so; with the busiest at 30 %, host-bound, naming each one's share and not the
        unused GPU's. One GPU: judged on the counter as before."""
        def report(busy0, busy1):
            rep = report_of("host_bound", steady_gpu_busy_share=(busy0 + busy1) / 2)
            gpu = rep.summary["steady_gpus"][0]
            rep.summary["steady_gpus"] = [dict(gpu, used=True, busy_share=busy0),
                                          dict(gpu, index=1, used=True, busy_share=busy1),
                                          dict(gpu, index=2, used=False, busy_share=0.0)]
            lines = run_report.describe_report(rep, ["python3", "train.py"])
            return [ln for ln in lines if ln.startswith("  advice: ")]
        self.assertEqual(report(0.9, 0.05), [])
        said = report(0.3, 0.05)
        self.assertEqual(len(said), 1)
        self.assertIn("host-bound", said[0])
        self.assertIn("while its GPUs were busy 30% (GPU 0, the busiest) and 5% (GPU 1) of the steady phase", said[0])
        self.assertNotIn("GPU 2", said[0])
        self.assertTrue(report(0.05, 0.49)[0].startswith("  advice: host-bound"))  # the busiest is GPU 1
        self.assertEqual(report(0.05, 0.5), [])  # GPU_LOW, on the busiest
        self.assertEqual(advice("host_bound", steady_gpu_busy_share=0.49), ["host-bound"])

    def test_the_startup_names_its_device_work_before_the_first_step(self):
        rep = report_of("item_sync")
        rep.summary["context"] = dict(rep.summary["context"], steady_from="steps")
        rep.summary["startup_device"] = {"first_work_ms": 4200.0, "syncs": 56, "sync_wait_ms": 700.0,
                                         "sync_cpu_ms": 690.0, "launches": 9, "launch_ms": 0.1, "launch_cpu_ms": 0.1}
        lines = run_report.describe_report(rep, ["python3", "train.py"])
        self.assertEqual(lines[3], "  startup: 13 s before the first training step recognised (the first of a run of "
                                   "repeated waits on the device: the phase begins as its wait returns), 12740 ms of "
                                   "CPU; device work from 4.2 s: 56 waits (700 ms), 9 launches (dataset preparation, "
                                   "model.cuda(), a compile, the first step) (not in the steady phase's figures)")

    def test_cuda_without_a_sampled_gpu_gives_no_advice(self):
        out = text("not_sampled")
        self.assertIn("the process used CUDA, but no GPU was sampled", out)
        self.assertIn("  note: libnvidia-ml.so.1 not found, no GPU sampled", out)
        self.assertNotIn("busy", out.split("GPU:")[0])
        self.assertEqual(advice("not_sampled"), [])  # the main thread's 0.95 of a core alone says nothing

    def test_the_policy_in_force_and_its_note(self):
        out = text("context_active")
        self.assertIn("CUDA host wait policy: asked blocking_sync, in force spin", out)
        self.assertIn("  note: device 0: context already active before the probe could set it", out)
        self.assertEqual(advice("context_active"), ["sync-bound"])
        self.assertIn("under the policy in force (spin), which spins", out)

    def test_a_cpu_run_is_reported_as_before(self):
        # a probe of today writes the GPU counters in every run: a CPU run's are zeros and no GPU
        out = text("cpu_run", main_core_share=0.2, cpu_cuda_ms=0, cpu_pin_ms=0, gpu_busy_share=None)
        for absent in ("GPU", "CUDA", "advice", "main thread (", "pin-memory", "waits on the device"):
            self.assertNotIn(absent, out)
        self.assertIn("no device work and no OpenMP region, so no steady phase", out)
        self.assertIn("regions: no OpenMP region", out)
        self.assertIn("settings in force: no OpenMP runtime loaded", out)
        self.assertIn("all (cpu_ms)", out)

    def test_thresholds(self):
        # Each at and beside its edge (analysis/advice.py): SYNC_SHARE 0.2 and SPIN_SHARE 0.5 (at least),
        # NEAR_A_CORE 0.8 (at least), GPU_LOW 0.5 (below), IDLE_SHARE 0.3 (at least), STARVED_SHARE 0.1 (at least).
        self.assertEqual(advice("sync_spin", main_sync_wait_ms=4000.0, main_sync_cpu_ms=2000.0), ["sync-bound"])
        self.assertEqual(advice("sync_spin", main_sync_wait_ms=3999.0, main_sync_cpu_ms=2000.0), [])
        # (no run-queue wait: the fixture's 15 ms would fall inside the waits, its thread on a CPU all else)
        self.assertIn("which spins", text("sync_spin", main_sync_wait_ms=4000.0, main_sync_cpu_ms=2000.0,
                                          steady_wait_main_ms=0.0))
        self.assertIn("its waits sleeping", text("sync_spin", main_sync_wait_ms=4000.0, main_sync_cpu_ms=1999.0,
                                                 steady_wait_main_ms=0.0))
        # host-bound: the main thread's CPU outside its waits, not its CPU
        self.assertEqual(advice("host_bound", steady_cpu_main_ms=8290.0, steady_wait_main_ms=0.0), ["host-bound"])
        self.assertEqual(advice("host_bound", steady_cpu_main_ms=8289.0, steady_wait_main_ms=0.0), [])
        self.assertEqual(advice("host_bound", steady_gpu_busy_share=0.49), ["host-bound"])
        self.assertEqual(advice("host_bound", steady_gpu_busy_share=0.5), [])
        # whole-run figures move nothing
        self.assertEqual(advice("host_bound", gpu_busy_share=0.9, main_core_share=0.1), ["host-bound"])
        self.assertEqual(advice("loader_bound", steady_children_cpu_ms=4 * 0.8 * 10000.0), ["loader-bound"])
        self.assertEqual(advice("loader_bound", steady_children_cpu_ms=4 * 0.79 * 10000.0), [])
        # idle = 1 - 500/10000 - (400 - 380 + 15)/10000 = 0.9465 (the waits' time off the CPU and 15 ms of
        # run-queue wait); at 0.3 with the main thread at 0.6965 of a core
        self.assertEqual(advice("loader_bound", steady_cpu_main_ms=6965.0), ["loader-bound"])
        self.assertEqual(advice("loader_bound", steady_cpu_main_ms=6966.0), [])
        # host-bound counts the main thread's wait for a core as its demand: at 6000 ms of CPU (0.571 of a core
        # outside its 290 ms of waits) it is host-bound from 2290 ms of run-queue wait (0.571 + 0.229 = 0.8)
        self.assertEqual(advice("host_bound", steady_cpu_main_ms=6000.0, steady_wait_main_ms=2290.0), ["host-bound"])
        self.assertEqual(advice("host_bound", steady_cpu_main_ms=6000.0, steady_wait_main_ms=2289.0), [])
        # ... and names the starvation from STARVED_SHARE 0.1 (at least) of the steady phase
        self.assertIn("and waited for a core 10% of the steady phase", text("host_bound", steady_wait_main_ms=1000.0))
        self.assertNotIn("and waited for a core", text("host_bound", steady_wait_main_ms=999.0))
        # a main thread waiting for a core is not idle: loader-bound's idle share leaves it out
        # (1 - 0.05 - 0.002 - 6480/10000 = 0.3)
        self.assertEqual(advice("loader_bound", steady_wait_main_ms=6480.0), ["loader-bound"])
        self.assertEqual(advice("loader_bound", steady_wait_main_ms=6481.0), [])
        # no steady phase: no advice at all
        self.assertEqual(advice("item_sync", steady_ms=None), [])

    def test_a_starved_main_thread_is_host_bound(self):
        # The launching thread ran 0.5 of a core and waited for one 0.45 of the steady phase (a busy neighbour
        # on its core), the GPU busy 30 %: on its CPU alone it looked like neither host- nor loader-bound.
        self.assertEqual(advice("host_bound", steady_cpu_main_ms=5290.0, steady_wait_main_ms=0.0), [])
        out = text("host_bound", steady_cpu_main_ms=5290.0, steady_wait_main_ms=4500.0)
        self.assertEqual(advice("host_bound", steady_cpu_main_ms=5290.0, steady_wait_main_ms=4500.0), ["host-bound"])
        self.assertIn("host-bound: the main thread worked 0.50 of a core outside its waits on the device and waited "
                      "for a core 45% of the steady phase (4.5 s: other threads or processes held the cores) while the "
                      "GPU was busy 30% of it", out)
        self.assertIn("Give it one first: fewer threads beside it", out)
        self.assertIn("main thread 0.53 of a core, GPU busy 30%; the main thread waited for a core 45.0% of it", out)


class Columns(unittest.TestCase):
    def setUp(self):
        with open(os.path.join(CASES, "describe.json")) as f:
            self.desc = json.load(f)

    def test_the_policy_lands_in_cuda_sync(self):
        with cuda_knob():
            cols = probe.columns(self.desc, ["OMP_NUM_THREADS", "THREADBURN_CUDA_SYNC", "MY_VAR"])
            self.assertEqual(cols.env_knobs, ("OMP_NUM_THREADS", "MY_VAR"))
            self.assertEqual(cols.flags, ("command", "metric_better", "cuda_sync"))
            cells = probe.setting_cells(cols, {"OMP_NUM_THREADS": "2", "THREADBURN_CUDA_SYNC": "blocking_sync"})
            self.assertEqual(cells, {"OMP_NUM_THREADS": "2", "MY_VAR": "unset", "cuda_sync": "blocking_sync"})
            self.assertEqual(probe.setting_cells(cols, {})["cuda_sync"], "auto")
            # a probe that cannot set the policy (it reports none in force) gets no column for it
            old = dict(self.desc, context={k: v for k, v in self.desc["context"].items() if not k.startswith("cuda")})
            self.assertEqual(probe.columns(old, ["OMP_NUM_THREADS"]).flags, ("command", "metric_better"))

    def test_fresh_runs_preload_the_policy_library(self):
        env = probe.environment({"PATH": "/bin"}, None, "/tmp/x", env={"THREADBURN_CUDA_SYNC": "yield"},
                                cuda_lib="/lib/libthreadburn_cuda_sync.so")
        self.assertEqual(env["LD_PRELOAD"], "/lib/libthreadburn_cuda_sync.so")
        # under the probe, the probe sets it; auto or unset need nothing
        env = probe.environment({}, "/p.so", "/tmp/x", env={"THREADBURN_CUDA_SYNC": "yield"}, cuda_lib="/c.so")
        self.assertEqual(env["LD_PRELOAD"], "/p.so")
        for value in ("auto", "unset"):
            self.assertNotIn("LD_PRELOAD", probe.environment({}, None, "/tmp/x", env={"THREADBURN_CUDA_SYNC": value}))
        # the user's own policy (their environment) is kept in fresh runs too
        env = probe.environment({"THREADBURN_CUDA_SYNC": "spin", "LD_PRELOAD": "/mine.so"}, None, "/t",
                                runtime="llvm", libomp="/omp.so", cuda_lib="/c.so")
        self.assertEqual(env["LD_PRELOAD"], "/omp.so /c.so /mine.so")
        # the setting's own preload (run --env LD_PRELOAD=...) follows ours and replaces the environment's
        env = probe.environment({"LD_PRELOAD": "/mine.so"}, "/p.so", "/t", env={"LD_PRELOAD": "/theirs.so"})
        self.assertEqual(env["LD_PRELOAD"], "/p.so /theirs.so")
        env = probe.environment({"LD_PRELOAD": "/mine.so"}, "/p.so", "/t", env={"LD_PRELOAD": "unset"})
        self.assertEqual(env["LD_PRELOAD"], "/p.so")
        self.assertNotIn("LD_PRELOAD", probe.environment({"LD_PRELOAD": "/mine.so"}, None, "/t",
                                                         env={"LD_PRELOAD": "unset"}))
        with self.assertRaises(ThreadburnError) as caught:
            probe.environment({}, None, "/tmp/x", env={"THREADBURN_CUDA_SYNC": "spin"})
        self.assertIn("libthreadburn_cuda_sync.so", str(caught.exception))


@unittest.skipUnless(helpers.real_build_dir(), "needs the real build's probe (THREADBURN_BUILD_DIR)")
class LiveRun(helpers.TempDir, unittest.TestCase):
    def run_it(self, *args):
        env = helpers.clean_env(THREADBURN_RUNS=self.path("runs"))
        return helpers.threadburn("run", "--build-dir", helpers.real_build_dir(), "--exact", "off", "--no-plot",
                                  *args, env=env)

    def test_a_program_without_openmp_gets_its_report(self):
        p = self.run_it("--out", self.path("out"), "--", "/usr/bin/python3", "-c", "import time; time.sleep(1)")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("regions: no OpenMP region", p.stdout)
        self.assertRegex(p.stdout, r"\n  main thread[^\n]* +\d")
        self.assertIn("all (cpu_ms)", p.stdout)
        rows = helpers.read_rows(self.path("out", "run.csv"))
        self.assertEqual((rows[0]["status"], rows[0]["regions"]), ("ok", "0"))
        self.assertGreaterEqual(float(rows[0]["wall_ms"]), 1000.0)

    def test_env_reaches_the_program(self):
        p = self.run_it("--out", self.path("out"), "--env", "THREADBURN_CUDA_SYNC=blocking_sync", "--",
                        "/usr/bin/python3", "-c", "import os; print('asked', os.environ['THREADBURN_CUDA_SYNC'])")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("asked blocking_sync", p.stdout)


if __name__ == "__main__":
    unittest.main()
