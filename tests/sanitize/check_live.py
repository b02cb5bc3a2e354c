#!/usr/bin/python3
"""The live scenarios of the probe and tune --in-run, run in a sanitized build
(check_sanitize.py runs these through that build's ctest, with the sanitizer's
runtime in THREADBURN_TEST_PRELOAD and every report a failure):

    check_live.py CASE --probe LIB --child regions_child --libomp LIB --repo DIR --build-dir DIR

  probe_gomp   regions_child under the probe on libgomp, passive workers
               (tests/bench/check_probe.py's program and its run)
  probe_llvm   the same on LLVM's runtime, KMP_BLOCKTIME=30 (the workers spin
               between regions while the sampler reads them)
  device       the stand-in GPU training (device_training on the stand-in
               driver of the build, tests/cpp/fake_cuda) under the probe: a
               startup of device work (--prep-ms), then steps launched from
               two threads, the waits on an autograd-like thread copying into
               pageable memory: the driver's wrappers, the run of repeated
               waits and its snapshots taken on the waiting thread, each
               thread's tallies of each phase; every wait and launch counted
               once in one phase
  inrun        tune --in-run of regions_child (check_inrun.py's team_up
               program: naps shared by the team), on the runtime --runtime names:
               the control block taken, published to at every sample, the team
               switched at each block's regions, the blocktime too under LLVM

The same programs, runs and code paths as check_probe.py and check_inrun.py, with
checks of function only (every region counted, a team of two seen, a readable
summary, an in-run verdict reached): the sanitizers slow the probe's sampler (its
period stretches within its CPU budget) and ThreadSanitizer adds a thread of its own
to the process, which the timing bounds of those tests do not allow for (they run,
unsanitized, in the unit and bench labels). Standard library only.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench"))
import check_inrun  # noqa: E402
import check_probe  # noqa: E402
from check_probe import check  # noqa: E402

STEPS, REGIONS = 4, 20


def probe_case(a, tmp, env, llvm):
    cmd = [a.child, f"--steps={STEPS}", f"--regions={REGIONS}", "--gap_ms=60", "--work_us=200"]
    c, gaps = check_probe.probed(a, tmp, cmd, env, llvm=llvm)
    check(c["regions"] == STEPS * REGIONS, f"{c['regions']} regions, expected {STEPS * REGIONS}")
    check(c["max_team"] == 2 and c["threads_omp"] == 1, "expected a team of 2: main + one worker")
    check(c["samples"] > 0 and gaps, "no samples or no closed gap")
    runtime = "llvm-libomp" if llvm else "libgomp"
    check(check_probe.probed.context.get("omp_runtime") == runtime,
          f"omp_runtime {check_probe.probed.context.get('omp_runtime')}, expected {runtime}")


def case_probe_gomp(a, tmp):
    probe_case(a, tmp, {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "passive"}, llvm=False)


def case_probe_llvm(a, tmp):
    probe_case(a, tmp, {"OMP_NUM_THREADS": "2", "KMP_BLOCKTIME": "30"}, llvm=True)


def case_device(a, tmp):
    fakes = os.path.join(a.build_dir, "tests", "fake_cuda")
    steps, out = 30, tempfile.mkdtemp(dir=tmp)
    env = dict(os.environ, LD_LIBRARY_PATH=fakes, FAKE_NVML_SAMPLES="device", FAKE_CUDA_DEVICES="2",
               FAKE_NVML_DEVICES="2", THREADBURN_PROBE_DIR=out,
               LD_PRELOAD=os.environ["THREADBURN_TEST_PRELOAD"] + ":" + a.probe)
    cmd = [os.path.join(fakes, "device_training"), "--device=1", "--launcher=split", "--wait=pageable",
           "--startup-ms=100", "--prep-ms=300", f"--steps={steps}", "--step-ms=20"]
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    sys.stdout.write(p.stdout + p.stderr)
    check(p.returncode == 0, f"device_training exited {p.returncode}")
    paths = glob.glob(os.path.join(out, "probe-*.json"))
    check(len(paths) == 1, f"{len(paths)} probe summaries, expected 1")
    with open(paths[0]) as f:
        s = json.load(f)
    calls = s["device_calls"]
    whole = {k: sum(t[k] + t["startup_" + k] for t in calls) for k in ("syncs", "launches")}
    print(f"steady_from {s['context']['steady_from']}; startup_device {s['startup_device']}; {whole}")
    # The preparation's 50 copies and 5 waits, and each step's hidden copy and synchronisation;
    # its 5 launches and 4 a step: each counted once, in one phase or the other.
    check(whole == {"syncs": 55 + 2 * steps, "launches": 5 + 4 * steps}, f"{whole}: expected "
          f"{55 + 2 * steps} waits and {5 + 4 * steps} launches in all")
    check(s["context"]["steady_from"] in ("steps", "first_device_work"), s["context"]["steady_from"])
    check(s["startup_device"]["syncs"] >= 55 or s["context"]["steady_from"] != "steps",
          "the preparation's waits are not the startup's")


def case_inrun(a, tmp):
    # The verdict's deadline is the known answer's business (check_inrun.py); here it is
    # enough that one comes while the probe steers (ThreadSanitizer slows the probe's side).
    args, env = check_inrun.PROGRAMS["team_up"]
    extra = ("--runtime", a.runtime) if a.runtime != "gomp" else ()
    _, entry, out = check_inrun.in_run(a, tmp, check_inrun.child(a, *args, "--seconds=120"),
                                      check_inrun.env_clean(**env), *extra, deadline_s=240.0)
    check(entry["verdict"] in ("change", "keep"), f"verdict {entry['verdict']}: the in-run trial did not decide")
    with open(os.path.splitext(out)[0] + ".verdict.json") as f:
        json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=[n[5:] for n in globals() if n.startswith("case_")])
    for name in ("--probe", "--child", "--libomp", "--repo", "--build-dir"):
        ap.add_argument(name, required=True)
    ap.add_argument("--runtime", default="gomp", help="inrun: the runtime tune runs the program on (gomp, llvm)")
    a = ap.parse_args()
    if not os.environ.get("THREADBURN_TEST_PRELOAD"):
        print("FAIL: no THREADBURN_TEST_PRELOAD: run through check_sanitize.py (the sanitize label)")
        sys.exit(1)
    with tempfile.TemporaryDirectory() as tmp:
        globals()["case_" + a.case](a, tmp)
    print("OK " + a.case)


if __name__ == "__main__":
    main()
