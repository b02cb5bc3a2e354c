#!/usr/bin/python3
"""The device check (scripts/gpu_check.sh) on this machine, so that it
cannot rot between the GPU hosts it is lent (ctest gpu_check.stand_in,
label unit; THREADBURN_BUILD_DIR names a build of the tests):

* --stand-in against the stand-in CUDA driver and NVML of the build: each
  check whose known answer the stand-ins hold passes (the policy asked is the
  one in force, through the probe and the preloaded library, and the wait
  follows it; NVML's samples, written from the program's own phases, average
  its busy half in its window; on the driver's simulated device a sync-bound
  training's main thread waits nearly all its steady phase, spinning, and run
  says sync-bound with the saving, a launch-bound one host-bound; tune --in-run
  --apply changes the policy live, its blocking_sync blocks' CPU a wait a
  fraction of plain's, CHANGE to cuda-blocking_sync, the program waited for;
  tune adds the three policies after round 1, judges the steady phase and
  ends CHANGE to cuda-blocking_sync; on a node of 2 the training on device 1
  is the process's one GPU, its backward launched by an autograd thread, its
  pageable copies hidden waits, its steady phase from its first step after a
  startup of device work; the driver's thread, the pin-memory
  thread and two worker processes are their classes), the others say SKIP,
  exit 0; the files under $OUT are the ones the device tool brings back (at
  most 8, no deeper than 2 folders, under 16 MiB each), the table comes last.
* a step over its time limit is a FAIL row and the next step still runs; a
  step without the least time it needs before the deadline is a SKIP row; no
  process of a killed step is left; exit 1.
* the judge (tests/gpu/gpu_check.py) on made-up program output and files:
  each bound fails on the wrong side of it.
"""
import contextlib
import glob
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "gpu_check.sh")
JUDGE = os.path.join(HERE, "gpu_check.py")
BUILD = os.environ.get("THREADBURN_BUILD_DIR", os.path.join(REPO, "build"))
POLICY_ROWS = [f"{how} {p}: {what}" for how in ("run", "preload") for p in ("spin", "blocking_sync")
               for what in ("loop", "driver's read-back", "run.csv cuda_sync_in_force")
               if not (how == "preload" and what.startswith("run.csv"))]
EXPECTED = dict(
    [(("preflight", "CUDA device"), "SKIP"), (("preflight", "threadburn command"), "PASS"),
     (("build", "probe and libraries"), "PASS")]
    + [(("policy", r), "PASS") for r in POLICY_ROWS]
    + [(("nvml", "busy share in the window"), "PASS"), (("nvml", "run.csv gpu_busy_share"), "PASS")]
    + [(("waits", r), "PASS") for r in ("sync-bound: waits' share of the steady phase",
                                        "sync-bound: CPU inside the waits", "sync-bound: advice",
                                        "launch-bound: advice")]
    + [(("inrun", r), "PASS") for r in ("live change of the CUDA wait policy: CPU per wait by block", "verdict",
                                        "decided in one run")]
    + [(("gputune", r), "PASS") for r in ("CUDA policies added after round 1", "policy in force per race row", "runs",
                                          "verdict", "judged on the steady phase", "wall time")]
    + [(("node", r), "PASS") for r in ("the process's GPUs", "backward on the autograd thread",
                                       ".cpu() each step: hidden waits", "steady phase from the first step")]
    + [(("classes", r), "PASS") for r in ("the training ran", "pin-memory thread", "CUDA driver threads",
                                          "worker processes", "main thread", "GPU busy share")]
    + [(("busy", "host sleep not in gpu_busy_ms"), "SKIP"), (("sweep", "configs/cuda_check.toml"), "SKIP")])
STEPS = ("preflight", "build", "policy", "nvml", "waits", "inrun", "gputune", "node", "classes", "busy", "sweep")
MAX_FILES, MAX_DEPTH, MAX_BYTES = 8, 2, 16 * 1024 * 1024


def run_check(tmp, *args, env=None):
    out, work = os.path.join(tmp, "out"), os.path.join(tmp, "work")
    full = dict(os.environ, OUT=out, **(env or {}))
    t0 = time.monotonic()
    p = subprocess.run(["bash", SCRIPT, "--stand-in", "--build-dir", BUILD, "--work", work, *args], env=full,
                       capture_output=True, text=True, timeout=300)
    print(p.stdout[-6000:] + p.stderr[-2000:])
    with open(os.path.join(work, "checks.tsv")) as f:
        rows = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    return p, {(r[0], r[1]): r for r in rows}, out, time.monotonic() - t0


def processes_with(token):
    """Processes whose environment holds GC_TOKEN=token."""
    found = []
    for path in glob.glob("/proc/[0-9]*/environ"):
        try:
            with open(path, "rb") as f:
                if f"GC_TOKEN={token}".encode() in f.read().split(b"\0"):
                    found.append(path.split("/")[2])
        except OSError:
            pass
    return found


@unittest.skipUnless(os.path.exists(os.path.join(BUILD, "tests", "fake_cuda", "libcuda.so.1")),
                     "needs a build of the tests (THREADBURN_BUILD_DIR)")
class StandIn(unittest.TestCase):
    def test_every_step(self):
        with tempfile.TemporaryDirectory() as tmp:
            p, rows, out, _ = run_check(tmp)
            got = {k: r[4] for k, r in rows.items()}
            self.assertEqual(got, EXPECTED, "\n".join("\t".join(r) for r in rows.values()))
            self.assertEqual(p.returncode, 0)
            lines = [ln for ln in p.stdout.splitlines() if ln.strip()]
            self.assertEqual(lines[-1], f"{len(EXPECTED) - 3} PASS, 0 FAIL, 3 SKIP")  # the table comes last
            head = max(i for i, ln in enumerate(lines) if ln.startswith("step ") and "result" in ln)
            self.assertEqual(len(lines) - head - 3, len(EXPECTED), "the table's rows after its header")
            self.check_files(out)

    def check_files(self, out):
        files = [os.path.relpath(os.path.join(d, f), out) for d, _, fs in os.walk(out) for f in fs]
        self.assertEqual(sorted(files), ["gpu-check.tar.gz", "gputune-stand-in.csv", "gputune-stand-in.verdict.json",
                                         "inrun-stand-in.csv", "inrun-stand-in.verdict.json", "summary.txt"])
        self.assertLessEqual(len(files), MAX_FILES)
        for f in files:
            self.assertLessEqual(f.count(os.sep), MAX_DEPTH, f)
            self.assertLessEqual(os.path.getsize(os.path.join(out, f)), MAX_BYTES, f)
        with tarfile.open(os.path.join(out, "gpu-check.tar.gz")) as t:
            names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        for want in ("checks.tsv", "summary.txt", "steps.tsv", "logs/policy.txt", "logs/gputune.log", "logs/inrun.log",
                     "runs/policy-run-spin/run.csv", "runs/nvml/run.csv", "runs/waits-sync/run.csv",
                     "runs/waits-launch/run.csv", "gputune/gputune-stand-in.csv", "inrun/inrun-stand-in.csv",
                     "inrun/inrun-stand-in.program.log", "inrun/control.bin"):
            self.assertIn(want, names)
        with open(os.path.join(out, "summary.txt")) as f:
            summary = f.read()
        for step in STEPS:
            self.assertRegex(summary, rf"\n  {step} +[0-9]+ +[0-9.]+  done\n")
        self.assertEqual(re.findall(r"\n  ([a-z]+) +[0-9]+ +[0-9.]+  done", summary), list(STEPS), "the steps' order")

    def test_limit_and_deadline(self):
        with tempfile.TemporaryDirectory() as tmp:
            p, rows, _, took = run_check(tmp, "--steps", "preflight,policy,gputune", "--budget-s", "30",
                                         env={"GPU_CHECK_LIMIT_policy": "2"})
            self.assertEqual(p.returncode, 1)
            self.assertEqual(rows[("policy", "(step)")][2:], ["timed out after 2 s", "<= 2 s", "FAIL"])
            self.assertEqual(rows[("gputune", "(step)")][4], "SKIP")
            self.assertTrue(rows[("gputune", "(step)")][2].startswith("out of time: "), rows[("gputune", "(step)")])
            self.assertEqual(rows[("build", "(step)")][2], "not asked (--steps preflight,policy,gputune)")
            self.assertEqual(rows[("preflight", "CUDA device")][4], "SKIP")  # the step before ran
            self.assertLess(took, 30)
            run = p.stdout.split("gpu_check: run ", 1)[1].split()[0]
            self.assertEqual(processes_with(f"{run}.policy"), [])


def run_judge(*argv):
    """The judge's command line (gpu_check.py ARGV) in this process: its main(), as the
    script runs it, without an interpreter started for each of the ~30 made-up cases; its
    printing swallowed, as the captured output was. An exit other than 0 raises, as check=True did."""
    sys.path.insert(0, HERE)
    import gpu_check
    with contextlib.redirect_stdout(io.StringIO()):
        rc = gpu_check.main(list(argv))
    if rc:
        raise subprocess.CalledProcessError(rc, [JUDGE, *argv])


def judge(tmp, kind, log_text, *args):
    """The judge on one made-up log: its rows' results."""
    log, rows = os.path.join(tmp, "prog.log"), os.path.join(tmp, "rows.tsv")
    with open(log, "w") as f:
        f.write(log_text)
    open(rows, "w").close()
    run_judge(rows, "s", kind, "--log", log, *args)
    with open(rows) as f:
        return {ln.split("\t")[1]: ln.rstrip("\n").split("\t")[4] for ln in f}


def loop_line(cpu, runnable, policy):
    return (f"sync_loop: loop_wall_s=2.0 loop_cpu_s=0 cpu_per_wall={cpu} main_cpu_s=0 main_wait_s=0 "
            f"runnable_per_wall={runnable} steps=190 matmuls_per_step=4 step_ms=10.0 policy_in_force={policy}\n")


def judge_files(tmp, kind, files, *args):
    """The judge on made-up files ({name: text} written under tmp; '{tmp}' in args is that
    folder): its rows' results by check."""
    for name, text in files.items():
        path = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    rows = os.path.join(tmp, "rows.tsv")
    open(rows, "w").close()
    run_judge(rows, "s", kind, *[x.format(tmp=tmp) for x in args])
    with open(rows) as f:
        return {ln.split("\t")[1]: ln.rstrip("\n").split("\t")[4] for ln in f}


def csv_text(rows):
    head = list(rows[0])
    return ",".join(head) + "\n" + "".join(",".join(str(r[k]) for k in head) + "\n" for r in rows)


SYNC_ADVICE = ("  advice: sync-bound: the main thread waited for the GPU 95% of the steady phase (1.9 s in 80 "
               "waits) and burned 1.8 s of CPU inside them under the policy in force (auto), which spins: "
               "blocking_sync would save about 1.8 s of CPU, 90% of the steady phase's; ...\n")
SLEEPING_ADVICE = ("  advice: sync-bound: the main thread waited for the GPU 95% of the steady phase (1.9 s in 80 "
                   "waits), its waits sleeping under the policy in force (blocking_sync: 50 ms of CPU inside them): "
                   "...\n")
HOST_ADVICE = "  advice: host-bound: the main thread worked 0.95 of a core outside its waits on the device ...\n"


def waits_run(wait=1900, cpu=1800, queue=0, steady=2000):
    return csv_text([dict(status="ok", exit_code=0, main_sync_wait_ms=wait, main_sync_cpu_ms=cpu, main_syncs=80,
                          steady_ms=steady, startup_ms=1000, wait_main_ms=queue, steady_gpu_busy_share=0.9,
                          launches=320, launch_ms=3, steady_main_core_share=0.9, cuda_sync_in_force="auto",
                          startup_ends="device")])


def inrun_blocks(plain_cpu, blocking_cpu):
    rows = [dict(status="ok", study=study, phase=phase, unit_ms=24.0, unit_cpu_ms=cpu, units=20, progress="waits")
            for phase in ("race", "race", "confirm") for study, cpu in (("plain", plain_cpu), ("cuda-spin", plain_cpu),
                                                                        ("cuda-blocking_sync", blocking_cpu))]
    return csv_text(rows)


def verdict_json(verdict, setting, time=1.0, cpu=0.05, metric="steady_ms", startup=1000.0):
    return json.dumps({"workloads": [dict(verdict=verdict, setting=setting, baseline="plain", gain_from="confirmation",
                                          time_ratio={"estimate": time}, cpu_ratio={"estimate": cpu},
                                          time_metric=metric, startup_ms=startup)]})


DECIDED = ("tune --in-run: decided in one run, 30 s, 24 blocks\n"
           "tune --in-run: cuda-blocking_sync in force from 30.2 s into the run; waiting for the program to end\n"
           "tune --in-run: the program ended, exit 0\n")
ADDED = ("tune: the program uses CUDA (its first round's probe: cuda_used = 1): added its host wait policies on top of "
         "plain, THREADBURN_CUDA_SYNC = blocking_sync (cuda-blocking_sync), spin (cuda-spin), yield (cuda-yield) (the "
         "probe sets each ...)\n")


def race_rows(in_force=None):
    return csv_text([dict(status="ok", run_key=f"{p}-r{i}", phase="race", cuda_sync=p,
                          cuda_sync_in_force=(in_force or {}).get(p, p))
                     for i in range(2) for p in ("spin", "yield", "blocking_sync")])


class Judge(unittest.TestCase):
    def test_policy_bounds(self):
        with tempfile.TemporaryDirectory() as tmp:
            cases = [("spin", loop_line(0.99, 0.95, "spin"), "PASS", "PASS"),
                     ("spin", loop_line(0.99, 0.85, "spin"), "FAIL", "PASS"),
                     ("blocking_sync", loop_line(0.05, 0.05, "blocking_sync"), "PASS", "PASS"),
                     ("blocking_sync", loop_line(0.12, 0.12, "blocking_sync"), "FAIL", "PASS"),
                     ("blocking_sync", loop_line(0.05, 0.05, "spin"), "PASS", "FAIL"),
                     ("spin", loop_line(0.99, 0.95, "spin") + "threadburn cuda_sync: no CUDA device\n", "PASS",
                      "FAIL")]
            for policy, text, loop, back in cases:
                with self.subTest(policy=policy, text=text):
                    got = judge(tmp, "policy", text, "--how", "preload", "--policy", policy)
                    self.assertEqual(got, {f"preload {policy}: loop": loop,
                                           f"preload {policy}: driver's read-back": back})

    def test_no_figures_and_skip(self):
        with tempfile.TemporaryDirectory() as tmp:
            self.assertEqual(judge(tmp, "policy", "Traceback ...\n", "--how", "preload", "--policy", "spin"),
                             {"preload spin": "FAIL"})
            self.assertEqual(judge(tmp, "policy", "sync_loop: SKIP: CUDA is not available\n", "--how", "preload",
                                   "--policy", "spin"), {"preload spin": "SKIP"})

    def test_waits_bounds(self):
        sync = ["--what", "sync", "--log", "{tmp}/run.log", "--run-dir", "{tmp}/run"]
        rows = ("sync-bound: waits' share of the steady phase", "sync-bound: CPU inside the waits",
                "sync-bound: advice")
        cases = [(waits_run(), SYNC_ADVICE, ("PASS", "PASS", "PASS")),
                 (waits_run(wait=900, cpu=850), SYNC_ADVICE, ("FAIL", "PASS", "PASS")),      # 0.45 of the phase
                 (waits_run(cpu=1000, queue=600), SYNC_ADVICE, ("PASS", "PASS", "PASS")),   # a shared core: 0.84
                 (waits_run(cpu=1000, queue=100), SYNC_ADVICE, ("PASS", "FAIL", "PASS")),   # 0.58: no spin
                 (waits_run(), SLEEPING_ADVICE, ("PASS", "PASS", "FAIL")),                  # no saving quoted
                 (waits_run(), SYNC_ADVICE + HOST_ADVICE, ("PASS", "PASS", "FAIL"))]        # not that alone
        for run, log, want in cases:
            with self.subTest(run=run, log=log), tempfile.TemporaryDirectory() as tmp:
                got = judge_files(tmp, "waits", {"run/run.csv": run, "run.log": log}, *sync)
                self.assertEqual(got, dict(zip(rows, want)))
        launch = ["--what", "launch", "--log", "{tmp}/run.log", "--run-dir", "{tmp}/run"]
        for log, want in ((HOST_ADVICE, "PASS"), ("", "FAIL"), (SYNC_ADVICE + HOST_ADVICE, "FAIL")):
            with self.subTest(log=log), tempfile.TemporaryDirectory() as tmp:
                got = judge_files(tmp, "waits", {"run/run.csv": waits_run(), "run.log": log}, *launch)
                self.assertEqual(got, {"launch-bound: advice": want})
        with tempfile.TemporaryDirectory() as tmp:
            got = judge_files(tmp, "waits", {"run.log": "sync_loop: SKIP: CUDA is not available\n"}, *sync)
            self.assertEqual(got, {"sync-bound": "SKIP"})

    def test_inrun_bounds(self):
        args = ["--log", "{tmp}/inrun.log", "--csv", "{tmp}/inrun.csv", "--verdict", "{tmp}/inrun.verdict.json",
                "--program-log", "{tmp}/inrun.program.log"]
        live = "live change of the CUDA wait policy: CPU per wait by block"
        cases = [(inrun_blocks(24.0, 1.0), verdict_json("change", "cuda-blocking_sync"), DECIDED, 0,
                  ("PASS", "PASS", "PASS")),
                 (inrun_blocks(24.0, 6.0), verdict_json("undecided", "cuda-blocking_sync"), DECIDED, 0,
                  ("FAIL", "PASS", "PASS")),   # 0.25: the driver did not honour it; the verdict could not change
                 (inrun_blocks(24.0, 23.0), verdict_json("change", "cuda-blocking_sync"), DECIDED, 0,
                  ("FAIL", "FAIL", "PASS")),   # not honoured, yet a change
                 (inrun_blocks(24.0, 1.0), verdict_json("keep", "plain"), DECIDED, 0,
                  ("PASS", "FAIL", "PASS")),   # honoured, yet no change
                 (inrun_blocks(24.0, 1.0), verdict_json("change", "cuda-spin"), DECIDED, 0, ("PASS", "FAIL", "PASS")),
                 (inrun_blocks(24.0, 1.0), verdict_json("change", "cuda-blocking_sync"),
                  DECIDED.replace("24 blocks", "24 blocks (the program ended before the tune did)"), 0,
                  ("PASS", "PASS", "FAIL")),
                 (inrun_blocks(24.0, 1.0), verdict_json("change", "cuda-blocking_sync"), DECIDED, 1,
                  ("PASS", "PASS", "FAIL"))]
        for blocks, verdict, log, rc, want in cases:
            with self.subTest(blocks=blocks, verdict=verdict, log=log, rc=rc), tempfile.TemporaryDirectory() as tmp:
                got = judge_files(tmp, "inrun", {"inrun.csv": blocks, "inrun.verdict.json": verdict, "inrun.log": log,
                                                 "inrun.program.log": ""}, *args, "--rc", str(rc))
                self.assertEqual(got, dict(zip((live, "verdict", "decided in one run"), want)))
        with tempfile.TemporaryDirectory() as tmp:
            got = judge_files(tmp, "inrun", {"inrun.log": "", "inrun.program.log": "sync_loop: SKIP: no CUDA\n"}, *args)
            self.assertEqual(got, {"in-run": "SKIP"})

    def test_gputune_bounds(self):
        args = ["--log", "{tmp}/tune.log", "--csv", "{tmp}/tune.csv", "--verdict", "{tmp}/tune.verdict.json"]
        checks = ("CUDA policies added after round 1", "policy in force per race row", "runs", "verdict",
                  "judged on the steady phase", "wall time")
        ok = ("PASS",) * 6
        cases = [(ADDED, race_rows(), verdict_json("change", "cuda-blocking_sync"), 120, ok),
                 (ADDED, race_rows(), verdict_json("undecided", "cuda-blocking_sync"), 120, ok),
                 (ADDED, race_rows(), verdict_json("change", "cuda-yield", time=0.98), 120, ok),
                 (ADDED, race_rows(), verdict_json("change", "cuda-spin", time=1.2), 120,
                  ("PASS", "PASS", "PASS", "FAIL", "PASS", "PASS")),   # a change to a slower setting
                 (ADDED, race_rows(), verdict_json("change", "cuda-blocking_sync", metric="wall_ms", startup=None), 120,
                  ("PASS", "PASS", "PASS", "PASS", "FAIL", "PASS")),   # the whole run judged
                 (ADDED, race_rows(), verdict_json("keep", "plain"), 301, ("PASS",) * 5 + ("FAIL",)),
                 ("", race_rows({"spin": "auto"}), verdict_json("keep", "plain"), 120,
                  ("FAIL", "FAIL", "PASS", "PASS", "PASS", "PASS"))]
        for log, data, verdict, seconds, want in cases:
            with self.subTest(log=log, data=data, verdict=verdict, seconds=seconds), \
                    tempfile.TemporaryDirectory() as tmp:
                got = judge_files(tmp, "gputune", {"tune.log": log, "tune.csv": data, "tune.verdict.json": verdict},
                                  *args, "--seconds", str(seconds))
                self.assertEqual(got, dict(zip(checks, want)))

    def test_node_hidden_bounds(self):
        """The .cpu() copies' hidden waits: on the stand-in, at least the copies its device says waited, at most
        one a step, those at least half the steps; on a GPU (no such count), at least 0.9 a step."""
        args = ["--log", "{tmp}/node.log", "--run-dir", "{tmp}/run"]
        row = ".cpu() each step: hidden waits"

        def summary(hidden, before):
            return json.dumps({"counters": {"wall_ms": 1000}, "device_calls": [
                {"class": "autograd", "launches": 100, "hidden_waits": hidden, "hidden_wait_ms": hidden * 15.0,
                 "startup_hidden_waits": before}]})

        cases = [((50, 0), "blocked_copies=50", "PASS"), ((44, 0), "blocked_copies=44", "PASS"),   # a busy host
                 ((49, 1), "blocked_copies=50", "PASS"),   # the first step's copy before the steady phase
                 ((49, 0), "blocked_copies=50", "FAIL"),   # a copy that waited, not counted
                 ((43, 0), "blocked_copies=44", "FAIL"),
                 ((50, 1), "blocked_copies=44", "FAIL"),   # more than one a step
                 ((24, 0), "blocked_copies=24", "FAIL"),   # too few waited for the check to hold anything
                 ((46, 0), "", "PASS"), ((44, 0), "", "FAIL")]   # a GPU: 0.9 a step
        for (hidden, before), count, want in cases:
            with self.subTest(hidden=hidden, before=before, count=count), tempfile.TemporaryDirectory() as tmp:
                got = judge_files(tmp, "node", {"run/run.csv": csv_text([dict(status="ok", exit_code=0)]),
                                                "run/probe-1.json": summary(hidden, before),
                                                "node.log": f"device_training: steps=50 steps_ms=1000 {count}\n"},
                                  *args)
                self.assertEqual(got[row], want, got)

    def test_gpu_tag(self):
        sys.path.insert(0, HERE)
        import gpu_check
        for name, tag in (("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                          ("NVIDIA A100-SXM4-80GB", "a100"), ("", "gpu")):
            self.assertEqual(gpu_check.gpu_tag(name, "real"), tag)


if __name__ == "__main__":
    unittest.main()
