"""`threadburn tune` on a GPU training, whole, in this process, with the
process launcher (lib/launch.py) replaced by a training whose truth is
known: 12 s of startup at a core (import, CUDA initialisation: the same in
every setting), then a steady phase of 1 s in which its main thread burns
95 % of a core while it waits for the GPU unless blocking_sync is in force,
then 15 %; every setting runs equally fast. The probe's files it writes
follow the probe's GPU interface (the context cuda_used,
cuda_sync_in_force, startup_ends; the phases), and so do the phase mark's
(phase-<pid>.json) where libthreadburn_phase.so is preloaded. The policy
applies only where threadburn puts it: the probe (the race) or
libthreadburn_cuda_sync.so preloaded (the fresh runs without the probe),
as the real libraries do.

Known answers: round 1 shows CUDA, so the policies join the race on top of
plain and the runs are judged on their steady phase (rule version 6); the
verdict changes to cuda-blocking_sync (as fast, 82 % less CPU in the steady
phase, where whole runs would read 6 %), confirmed in fresh runs that
preloaded the library and the phase mark, and says how to keep it without
threadburn. A program whose context existed before the probe
could set it (every policy in force is the program's) gets them dropped as
duplicates; a CPU program gets none. With --copies N on a host of N GPUs,
copy i sees GPU i alone, and each row says which."""
import contextlib
import io
import json
import os
import random
import unittest
from unittest import mock

import helpers
from threadburn import cli
from threadburn.engine import plans
from threadburn.engine.points import TunePoint
from threadburn.lib import launch, machine, paths, probe, records
from test_gpu_run import cuda_knob

PROBE = "/fake/libthreadburn_probe.so"
CUDA_LIB = "/fake/libthreadburn_cuda_sync.so"
PHASE_LIB = "/fake/libthreadburn_phase.so"
STARTUP_MS = 12000.0  # at a core, in every setting
with open(os.path.join(helpers.FIXTURES, "gpu_probe", "describe.json")) as _f:
    DESCRIBE = json.load(_f)


class Training:
    """launch.run and launch.run_together for a GPU training of known truth
    (module docstring); `calls`: (environment, the policy in force) per process."""

    def __init__(self, seed=1, context_first=False, cuda=True):
        self.rng, self.context_first, self.cuda = random.Random(seed), context_first, cuda
        self.calls, self.pid = [], 5000

    def process(self, env):
        preload = env.get("LD_PRELOAD", "").split()
        asked = env.get(probe.CUDA_SYNC, "auto")
        applied = self.cuda and not self.context_first and (PROBE in preload or CUDA_LIB in preload)
        in_force = asked if applied and asked != "auto" else ("auto" if self.cuda else "n/a")
        steady = 1000.0 * (1 + self.rng.gauss(0, 0.01))
        main = steady * (0.15 if in_force == "blocking_sync" else 0.95) if self.cuda else steady * 0.5
        steady_cpu = main + 30.0
        wall, cpu = STARTUP_MS + steady, STARTUP_MS + steady_cpu
        phases = dict(startup_ms=STARTUP_MS, startup_cpu_ms=STARTUP_MS, steady_ms=steady, steady_cpu_ms=steady_cpu)
        self.calls.append((dict(env), in_force))
        self.pid += 1
        if PROBE in preload:
            counters = {c["name"]: 0 for c in DESCRIBE["counters"]}
            counters.update(wall_ms=wall, cpu_ms=cpu, cpu_main_ms=STARTUP_MS + main, cpu_cuda_ms=30.0,
                            main_core_share=(STARTUP_MS + main) / wall, gpu_busy_share=0.8 if self.cuda else None,
                            **(phases if self.cuda else {}))
            context = dict(DESCRIBE["context"], cuda_used="1" if self.cuda else "0", cuda_sync_requested=asked,
                           cuda_sync_in_force=in_force, startup_ends="device" if self.cuda else "none")
            with open(os.path.join(env["THREADBURN_PROBE_DIR"], f"probe-{self.pid}.json"), "w") as f:
                json.dump({"pid": self.pid, "command": "train", "counters": counters, "context": context}, f)
        elif PHASE_LIB in preload and self.cuda:
            with open(os.path.join(env[probe.PHASE_DIR], f"phase-{self.pid}.json"), "w") as f:
                json.dump(dict(pid=self.pid, startup_ends="device", **phases), f)
        return wall, cpu

    def run(self, cmd, env, timeout_s=None, capture=True):
        wall, cpu = self.process(env)
        return launch.Finished(0, "", "", wall / 1000, cpu, 0.0, 0.0)

    def run_together(self, cmd, envs, work, timeout_s=None, cpus=None):
        ends = []
        for i, env in enumerate(envs):
            wall, cpu = self.process(env)
            ends.append(launch.CopyEnd(i, 0, "", "", 0.0, wall / 1000, cpu, ()))
        return launch.Together(ends, max(e.end_s for e in ends), sum(e.cpu_ms for e in ends), 0.0, 0.0)


@contextlib.contextmanager
def faked(training, gpus=None):
    """The training in place of the process launcher, on a host of one core
    (and `gpus` GPUs by the test hook), the probe's files faked."""
    hook = {} if gpus is None else {machine.GPU_COUNT_VAR: str(gpus)}
    with cuda_knob(), mock.patch.object(launch, "run", training.run), \
            mock.patch.object(machine, "physical_cores", return_value=1), \
            mock.patch.object(machine, "usable_cpus", return_value=1), \
            mock.patch.object(machine, "core_sets", return_value=None), \
            mock.patch.object(launch, "run_together", training.run_together), \
            mock.patch.object(probe, "library", return_value=PROBE), \
            mock.patch.object(probe, "cuda_sync_library", return_value=CUDA_LIB), \
            mock.patch.object(paths, "cuda_sync_library", return_value=CUDA_LIB), \
            mock.patch.object(probe, "phase_library", return_value=PHASE_LIB), \
            mock.patch.object(probe, "describe", return_value=DESCRIBE), \
            mock.patch.dict(os.environ, hook):
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        yield


def tune_argv(test, *args):
    return ["tune", "--out", test.path("tune.csv"), "--seed", "7", "--libomp", helpers.fake_libomp(test.tmp), *args,
            "--", "/usr/bin/python3", "train.py"]


def tune(test, training, *args, gpus=None):
    """tune.main with its default settings on a host of one core (plain, the
    launcher, T1-*: one thread, the same in force as plain) on the training;
    (exit code, console, rows of its CSV)."""
    console = io.StringIO()
    with faked(training, gpus), contextlib.redirect_stdout(console):
        code = cli.main(tune_argv(test, *args))
    return code, console.getvalue(), records.read_rows(test.path("tune.csv"))


class GpuTune(helpers.TempDir, unittest.TestCase):
    def test_blocking_sync_found_confirmed_and_explained(self):
        training = Training()
        code, console, rows = tune(self, training)
        self.assertEqual(code, 0, console)
        self.assertIn("tune: the program uses CUDA (its first round's probe: cuda_used = 1): added its host wait "
                      "policies on top of plain, THREADBURN_CUDA_SYNC = blocking_sync (cuda-blocking_sync), spin "
                      "(cuda-spin), yield (cuda-yield)", console)
        self.assertIn("CHANGE to cuda-blocking_sync: time ", console)
        verdict = console[console.index("CHANGE"):]
        self.assertTrue(verdict.startswith("CHANGE to cuda-blocking_sync: time "), verdict)
        self.assertIn(f"Set: THREADBURN_CUDA_SYNC=blocking_sync; without threadburn the CUDA wait policy needs its "
                      f"library: LD_PRELOAD={CUDA_LIB} THREADBURN_CUDA_SYNC=blocking_sync /usr/bin/python3 train.py; "
                      "or in the program, after `import torch` and before its first CUDA call, "
                      "`ctypes.CDLL('libcudart.so.' + torch.version.cuda.split('.')[0]).cudaSetDeviceFlags(4)`", verdict)
        by = {}
        for r in rows:
            by.setdefault((r.study, r.phase), []).append(r)
        self.assertEqual({r.text("cuda_sync") for r in by[("plain", "race")]}, {"auto"})
        self.assertEqual({r.text("cuda_sync") for r in by[("cuda-blocking_sync", "race")]}, {"blocking_sync"})
        self.assertNotIn("THREADBURN_CUDA_SYNC", rows[0].text("knob_layout").split(";")[0])
        # the fresh runs ran without the probe, the policy's library and the phase mark preloaded, and the
        # policy was in force
        fresh = [(env, in_force) for env, in_force in training.calls if PROBE not in env.get("LD_PRELOAD", "")
                 and env.get(probe.CUDA_SYNC) == "blocking_sync"]
        self.assertTrue(fresh)
        self.assertEqual({(env["LD_PRELOAD"], f) for env, f in fresh}, {(f"{PHASE_LIB} {CUDA_LIB}", "blocking_sync")})
        # judged on the steady phase: 180 / 980 ms of CPU (-82 %), not the whole runs' 12180 / 12980 (-6 %)
        self.assertRegex(console, r"the steady phase decided \(rule version [6-9]\)")
        self.assertIn("left out (median 12 s a run)", console)
        self.assertRegex(verdict, r"CPU -8[12]\.\d% \[")
        self.assertEqual({r.text("startup_ends") for r in rows}, {"device"})
        self.assertTrue(all(r.steady_ms for r in by[("plain", "confirm")]))
        self.assertEqual(f"THREADBURN_CUDA_SYNC=blocking_sync LD_PRELOAD={CUDA_LIB} /usr/bin/python3 train.py",
                         by[("cuda-blocking_sync", "confirm")][0].repro)

    def test_a_policy_the_program_decides_is_dropped(self):
        code, console, rows = tune(self, Training(context_first=True))
        self.assertEqual(code, 0, console)
        self.assertIn("tune: the same settings in force, dropped: cuda-blocking_sync (= plain), cuda-spin (= plain), "
                      "cuda-yield (= plain)", console)
        self.assertNotIn("CHANGE", console)

    def test_a_cpu_program_gets_no_policy(self):
        code, console, rows = tune(self, Training(cuda=False), "--budget", "12")
        self.assertEqual(code, 0, console)
        self.assertNotIn("tune: the program uses CUDA", console)
        self.assertFalse({r.study for r in rows} & {"cuda-spin", "cuda-yield", "cuda-blocking_sync"})
        self.assertEqual({r.text("cuda_sync") for r in rows}, {"auto"})

    def test_copies_on_their_own_gpus(self):
        training = Training(cuda=False)
        code, console, rows = tune(self, training, "--copies", "2", "--budget", "12", gpus=2)
        self.assertEqual(code, 0, console)
        self.assertIn("tune: GPUs: 2 copies a run: copy i alone sees GPU i of 0, 1", console)
        for env, _ in training.calls:
            self.assertEqual(env["CUDA_VISIBLE_DEVICES"], env["THREADBURN_COPY"])
        for r in rows:
            self.assertIn(f"cuda_visible_devices={r.proc_index}", r.text("extra_context").split(";"))

    def test_more_copies_than_gpus_share_them(self):
        training = Training(cuda=False)
        code, console, rows = tune(self, training, "--copies", "2", "--budget", "12", gpus=1)
        self.assertEqual(code, 0, console)
        self.assertIn("tune: GPUs: 2 copies a run share the 1 GPU(s)", console)
        self.assertEqual(console.count("share the"), 1)
        self.assertFalse(any("CUDA_VISIBLE_DEVICES" in env for env, _ in training.calls))
        self.assertFalse(any("cuda_visible_devices" in r.text("extra_context") for r in rows))


class Plans(unittest.TestCase):
    def test_policies_on_top_of_every_plain(self):
        points = plans.with_params([TunePoint("plain", "gomp", {}, copies=2), TunePoint("T1", "gomp", {}, copies=2)],
                                   {"workers": ["0", "2"]})
        with cuda_knob():
            added = plans.cuda_points(points)
        self.assertEqual([p.name for p in added], ["cuda-spin", "cuda-spin,workers=2", "cuda-yield",
                                                   "cuda-yield,workers=2", "cuda-blocking_sync",
                                                   "cuda-blocking_sync,workers=2"])
        p = added[-1]
        self.assertEqual((p.env, p.params, p.copies, p.key, p.builtin),
                         ({"THREADBURN_CUDA_SYNC": "blocking_sync"}, {"workers": "2"}, 2,
                          "c2-cuda-blocking_sync,workers=2", True))

    def test_a_policy_of_the_users_own(self):
        with cuda_knob():
            # --env THREADBURN_CUDA_SYNC=spin: plain has it, the others are added
            user = [TunePoint("plain", "gomp", {"THREADBURN_CUDA_SYNC": "spin"}),
                    TunePoint("T1", "gomp", {"THREADBURN_CUDA_SYNC": "spin", "OMP_NUM_THREADS": "1"})]
            self.assertEqual(plans.cuda_policies(user), ["yield", "blocking_sync"])
            # a --points file that sets policies itself: nothing added
            own = [TunePoint("plain", "gomp", {}), TunePoint("b", "gomp", {"THREADBURN_CUDA_SYNC": "blocking_sync"})]
            self.assertEqual(plans.cuda_points(own), [])

    def test_repro_preloads_the_policy_library(self):
        p = TunePoint("x", "llvm", {"THREADBURN_CUDA_SYNC": "yield"})
        self.assertEqual(p.env_line("/omp.so", "/c.so"), "THREADBURN_CUDA_SYNC=yield LD_PRELOAD='/omp.so /c.so'")


if __name__ == "__main__":
    unittest.main()
