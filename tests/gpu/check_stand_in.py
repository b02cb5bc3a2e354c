#!/usr/bin/python3
"""The device check (scripts/gpu_check.sh) on this machine, so that it
cannot rot between the GPU hosts it is lent (ctest gpu_check.stand_in,
label unit; THREADBURN_BUILD_DIR names a build of the tests):

* --stand-in against the stand-in CUDA driver and NVML of the build: each
  check whose known answer the stand-ins hold passes (the policy asked is the
  one in force, through the probe and the preloaded library, and the wait
  follows it; NVML's samples, written from the program's own phases, average
  its busy half in its window; the driver's thread, the pin-memory thread
  and two worker processes are their classes; tune adds the three policies
  after round 1 and ends with a verdict), the others say SKIP, exit 0; the
  files under $OUT are the ones the device tool brings back (at most 8, no
  deeper than 2 folders, under 16 MiB each), the table comes last.
* a step over its time limit is a FAIL row and the next step still runs; a
  step without the least time it needs before the deadline is a SKIP row; no
  process of a killed step is left; exit 1.
* the judge (tests/gpu/gpu_check.py) on made-up program output: each bound
  fails on the wrong side of it.
"""
import glob
import os
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
    + [(("nvml", "busy share in the window"), "PASS"), (("nvml", "run.csv gpu_busy_share"), "PASS"),
       (("busy", "host sleep not in gpu_busy_ms"), "SKIP")]
    + [(("classes", r), "PASS") for r in ("the training ran", "pin-memory thread", "CUDA driver threads",
                                          "worker processes", "main thread", "GPU busy share")]
    + [(("tune", r), "PASS") for r in ("CUDA policies added after round 1", "policy in force per race row", "runs",
                                       "verdict")]
    + [(("sweep", "configs/cuda_check.toml"), "SKIP")])
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
        self.assertEqual(sorted(files), ["gpu-check.tar.gz", "summary.txt", "tune-stand-in.csv",
                                         "tune-stand-in.verdict.json"])
        self.assertLessEqual(len(files), MAX_FILES)
        for f in files:
            self.assertLessEqual(f.count(os.sep), MAX_DEPTH, f)
            self.assertLessEqual(os.path.getsize(os.path.join(out, f)), MAX_BYTES, f)
        with tarfile.open(os.path.join(out, "gpu-check.tar.gz")) as t:
            names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        for want in ("checks.tsv", "summary.txt", "steps.tsv", "logs/policy.txt", "logs/tune.log",
                     "runs/policy-run-spin/run.csv", "runs/nvml/run.csv", "tune/tune-stand-in.csv"):
            self.assertIn(want, names)
        with open(os.path.join(out, "summary.txt")) as f:
            summary = f.read()
        for step in ("preflight", "build", "policy", "nvml", "busy", "classes", "tune", "sweep"):
            self.assertRegex(summary, rf"\n  {step} +[0-9]+ +[0-9.]+  done\n")

    def test_limit_and_deadline(self):
        with tempfile.TemporaryDirectory() as tmp:
            p, rows, _, took = run_check(tmp, "--steps", "preflight,policy,tune", "--budget-s", "30",
                                         env={"GPU_CHECK_LIMIT_policy": "2"})
            self.assertEqual(p.returncode, 1)
            self.assertEqual(rows[("policy", "(step)")][2:], ["timed out after 2 s", "<= 2 s", "FAIL"])
            self.assertEqual(rows[("tune", "(step)")][4], "SKIP")
            self.assertTrue(rows[("tune", "(step)")][2].startswith("out of time: "), rows[("tune", "(step)")])
            self.assertEqual(rows[("build", "(step)")][2], "not asked (--steps preflight,policy,tune)")
            self.assertEqual(rows[("preflight", "CUDA device")][4], "SKIP")  # the step before ran
            self.assertLess(took, 30)
            run = p.stdout.split("gpu_check: run ", 1)[1].split()[0]
            self.assertEqual(processes_with(f"{run}.policy"), [])


def judge(tmp, kind, log_text, *args):
    """The judge on one made-up log: its rows' results."""
    log, rows = os.path.join(tmp, "prog.log"), os.path.join(tmp, "rows.tsv")
    with open(log, "w") as f:
        f.write(log_text)
    open(rows, "w").close()
    subprocess.run([sys.executable, JUDGE, rows, "s", kind, "--log", log, *args], check=True, capture_output=True)
    with open(rows) as f:
        return {ln.split("\t")[1]: ln.rstrip("\n").split("\t")[4] for ln in f}


def loop_line(cpu, runnable, policy):
    return (f"sync_loop: loop_wall_s=2.0 loop_cpu_s=0 cpu_per_wall={cpu} main_cpu_s=0 main_wait_s=0 "
            f"runnable_per_wall={runnable} steps=190 matmuls_per_step=4 step_ms=10.0 policy_in_force={policy}\n")


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

    def test_gpu_tag(self):
        sys.path.insert(0, HERE)
        import gpu_check
        for name, tag in (("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"),
                          ("NVIDIA A100-SXM4-80GB", "a100"), ("", "gpu")):
            self.assertEqual(gpu_check.gpu_tag(name, "real"), tag)


if __name__ == "__main__":
    unittest.main()
