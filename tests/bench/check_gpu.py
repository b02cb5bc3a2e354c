#!/usr/bin/python3
"""Known answers of the probe's GPU side (src/probe/thread_tap.cc,
src/cuda/nvml_sampler.cc), live, with no GPU:

    check_gpu.py CASE --probe LIB --build-dir DIR [--repo DIR]

cuda_user (tests/cpp/fake_cuda/cuda_user.c) runs under the probe with the
stand-ins in build/tests/fake_cuda: the CUDA driver libcuda.so.1
(fake_libcuda.c: its threads created from its own code, through glibc's old
symbol version of pthread_create as the real driver's are, or with
FAKE_CUDA_GLIBC=2.34 the new one) and NVML libnvidia-ml.so.1 (fake_nvml.c:
samples from a file). The driver's
thread and the pin-memory thread each burn a known CPU time and print their
own CPU clock: the probe's cpu_cuda_ms and cpu_pin_ms must be that (at least
it, at most 2 ms more: the thread's start and its last steps). The GPU's busy
share must be the mean of the file's samples in the probe's lifetime, to
within one sample at each end of it (the stand-in places the samples from the
process's start to 10 ms, the probe's window starts later). Standard library
only (the last check reads the package's CSV cell rule).
"""
import argparse
import ctypes
import glob
import json
import os
import subprocess
import sys
import tempfile

PERIOD_MS = 100


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def fakes(a):
    return os.path.join(a.build_dir, "tests", "fake_cuda")


def user(a):
    return os.path.join(fakes(a), "cuda_user")


def driver_only(tmp, a):
    """A folder with the stand-in driver and no NVML."""
    path = os.path.join(tmp, "driver_only")
    os.makedirs(path, exist_ok=True)
    os.symlink(os.path.join(fakes(a), "libcuda.so.1"), os.path.join(path, "libcuda.so.1"))
    return path


def probed(a, tmp, args, env, nvml=True, preload_first=(), program=None):
    """Runs cuda_user under the probe: (the main summary, the program's k=v lines, the NVML log)."""
    summaries, said, calls = probed_all(a, tmp, args, env, nvml, preload_first, program)
    check(len(summaries) == 1, f"{len(summaries)} probe summaries, expected 1")
    return summaries[0], said, calls


def probed_all(a, tmp, args, env, nvml=True, preload_first=(), program=None):
    """Runs cuda_user (or program) under the probe: (every process's summary,
    the k=v lines printed, the NVML log's lines)."""
    out = os.path.join(tmp, "probe")
    os.makedirs(out, exist_ok=True)
    log = os.path.join(tmp, "nvml.log")
    full = dict(os.environ, LD_LIBRARY_PATH=fakes(a) if nvml else driver_only(tmp, a),
                LD_PRELOAD=" ".join([a.probe, *preload_first]), THREADBURN_PROBE_DIR=out, FAKE_NVML_LOG=log, **env)
    for k in [k for k in full if k.startswith(("FAKE_CUDA_", "THREADBURN_CUDA_")) and k not in env]:
        del full[k]  # the stand-in driver's defaults and no wait policy unless the case says
    if "CUDA_VISIBLE_DEVICES" not in env:
        full.pop("CUDA_VISIBLE_DEVICES", None)  # every device unless the case says
    cmd = program or [user(a), *args]
    print("$ " + " ".join(f"{k}={v}" for k, v in env.items()) + " " + " ".join(cmd))
    p = subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=120)
    sys.stdout.write(p.stdout + p.stderr)
    check(p.returncode == 0, f"{os.path.basename(cmd[0])} exited {p.returncode}")
    said = dict(line.split("=", 1) for line in p.stdout.splitlines() if "=" in line)
    summaries = []
    for path in sorted(glob.glob(os.path.join(out, "probe-*.json"))):
        with open(path) as f:
            s = json.load(f)
        s["_dir"] = out
        summaries.append(s)
        c = s["counters"]
        print(f"{s['pid']} {s['command']}")
        print("counters: " + ", ".join(f"{k}={v}" for k, v in c.items() if k.startswith(("cpu_", "gpu", "main_", "wall"))))
        print(f"gpus: {s['gpus']}; note: {s['context']['gpu_note']}; cuda_used: {s['context']['cuda_used']}")
        print("threads: " + ", ".join(f"{t['tid']}:{t['class']}:{t['cpu_ms']:.3f}" for t in s["threads"]))
    calls = open(log).read().splitlines() if os.path.exists(log) else []
    return summaries, said, calls


def check_burned(counter, own_ms, what):
    """The probe's CPU of a class against the thread's own CPU clock."""
    check(own_ms <= counter <= own_ms + 2.0,
          f"{what}: the probe says {counter:.3f} ms, the thread's own clock {own_ms:.3f} ms (expected it to +2 ms)")


def case_cuda_thread(a, tmp, glibc=None):
    env = {"FAKE_CUDA_DRIVER_THREAD_MS": "300", **({"FAKE_CUDA_GLIBC": glibc} if glibc else {})}
    s, said, _ = probed(a, tmp, ["--sleep-ms=100"], env)
    check("driver_thread_cpu_ms" in said, "the stand-in driver started no thread")
    own = float(said["driver_thread_cpu_ms"])
    check(own >= 300, f"the driver thread burned {own} ms, asked 300")
    c = s["counters"]
    check_burned(c["cpu_cuda_ms"], own, "cpu_cuda_ms")
    cuda = [t for t in s["threads"] if t["class"] == "cuda"]
    check(len(cuda) == 1, f"{len(cuda)} threads of class cuda, expected the driver's one")
    check(c["cpu_other_ms"] < 50, f"cpu_other_ms {c['cpu_other_ms']:.1f}: the driver's thread counted as other too")
    check(c["cpu_ms"] >= c["cpu_cuda_ms"] + c["cpu_main_ms"] - 1e-6, "cpu_ms lacks the driver's thread")


def case_cuda_thread_new_glibc(a, tmp):
    case_cuda_thread(a, tmp, glibc="2.34")


def case_cuda_ctor_thread(a, tmp):
    """A driver thread started by the driver's constructor, before the
    probe's constructor ran (the driver preloaded after the probe is
    initialised before it)."""
    driver = os.path.join(fakes(a), "libcuda.so.1")
    env = {"FAKE_CUDA_CTOR_THREAD_MS": "200", "FAKE_CUDA_DRIVER_THREAD_MS": "50"}
    s, said, _ = probed(a, tmp, [], env, preload_first=(driver,))
    check(said.get("ctor_before_probe") == "1", "the driver's constructor did not run before the probe's: "
          "this case tests nothing (loader order changed?)")
    own = float(said["ctor_thread_cpu_ms"]) + float(said["driver_thread_cpu_ms"])
    check_burned(s["counters"]["cpu_cuda_ms"], own, "cpu_cuda_ms (constructor's thread + cuInit's)")
    check(len([t for t in s["threads"] if t["class"] == "cuda"]) == 2, "expected two threads of class cuda")


def case_pin(a, tmp, via):
    s, said, _ = probed(a, tmp, ["--no-cuda", "--pin-ms=250", f"--pin-via={via}"], {})
    own = float(said["pin_thread_cpu_ms"])
    check(own >= 250, f"the pin thread burned {own} ms, asked 250")
    check_burned(s["counters"]["cpu_pin_ms"], own, f"cpu_pin_ms (named by {via})")
    pins = [t for t in s["threads"] if t["class"] == "pin"]
    check(len(pins) == 1 and pins[0]["name"] == "pt_data_pin", f"expected one pin thread named pt_data_pin: {pins}")
    check(s["counters"]["cpu_other_ms"] < 50, "the pin thread counted as other too")


def case_pin_setname(a, tmp):
    case_pin(a, tmp, "setname")


def case_pin_prctl(a, tmp):
    case_pin(a, tmp, "prctl")


def case_pin_old(a, tmp):
    case_pin(a, tmp, "old")


PIN_PY = """
import ctypes, threading, time
libc = ctypes.CDLL(None)  # the process's global scope: the probe's pthread_setname_np comes first
libc.pthread_self.restype = ctypes.c_ulong
def pin():
    assert libc.pthread_setname_np(ctypes.c_ulong(libc.pthread_self()), b"pt_data_pin") == 0
    while time.thread_time() < 0.25:
        pass
    print(f"pin_thread_cpu_ms={time.thread_time() * 1e3:.3f}", flush=True)
t = threading.Thread(target=pin)
t.start()
t.join()
"""


def case_pin_python(a, tmp):
    """A real program: CPython's threads (pthread_create@GLIBC_2.34 from the
    interpreter) and libc's pthread_setname_np found by an unversioned
    lookup (ctypes), as a Python extension would."""
    s, said, _ = probed(a, tmp, [], {}, program=["/usr/bin/python3", "-c", PIN_PY])
    check_burned(s["counters"]["cpu_pin_ms"], float(said["pin_thread_cpu_ms"]), "cpu_pin_ms (a Python thread)")


def write_samples(tmp, rows):
    path = os.path.join(tmp, "samples.csv")
    with open(path, "w") as f:
        f.write("# device,t_ms,gpu%,memory%\n" + "".join(",".join(str(x) for x in r) + "\n" for r in rows))
    return path


def case_nvml_samples(a, tmp, clock="realtime"):
    # Every 100 ms from the process's start to 4 s; the program runs about
    # 1.5 s, so the later samples never happen. Busy 20, 60, 20, 60, ...
    rows = [(0, t, 20 if (t // PERIOD_MS) % 2 else 60, 25) for t in range(PERIOD_MS, 4001, PERIOD_MS)]
    env = {"FAKE_NVML_SAMPLES": write_samples(tmp, rows), "FAKE_NVML_CLOCK": clock}
    s, _, calls = probed(a, tmp, ["--sleep-ms=1500"], env)
    c = s["counters"]
    wall = c["wall_ms"]
    inside = [r[2] / 100 for r in rows if r[1] <= wall]
    want = sum(inside) / len(inside)
    tol = 2 * (60 - 20) / 100 / len(inside)  # one sample at each end
    check(abs(c["gpu_busy_share"] - want) <= tol, f"gpu_busy_share {c['gpu_busy_share']:.4f}, the samples in the "
          f"probe's {wall:.0f} ms average {want:.4f} (+-{tol:.4f}: one sample at each end)")
    check(abs(c["gpu_samples"] - len(inside)) <= 2, f"{c['gpu_samples']} samples, {len(inside)} in the run")
    check(c["gpus_sampled"] == 1, f"gpus_sampled {c['gpus_sampled']}, expected 1")
    g = s["gpus"][0]
    check(g["index"] == 0 and g["name"] == "Fake GPU 0" and g["source"] == "samples", f"gpus entry {g}")
    check(abs(g["period_ms"] - PERIOD_MS) < 1, f"period_ms {g['period_ms']}, expected {PERIOD_MS}")
    check(abs(g["memory_busy_share"] - 0.25) < 1e-9, f"memory_busy_share {g['memory_busy_share']}, expected 0.25")
    check(0 <= g["first_ms"] <= PERIOD_MS + 50 and wall - PERIOD_MS - 50 <= g["last_ms"] <= wall,
          f"samples from {g['first_ms']} to {g['last_ms']} ms of a {wall:.0f} ms run")
    check(any("nvmlDeviceGetSamples" in line for line in calls), "NVML's samples were never asked for")
    check_timeline(s, g)


def check_timeline(s, g):
    (path,) = glob.glob(os.path.join(s["_dir"], "*.timeline.csv"))
    with open(path) as f:
        rows = [line for line in f if ",gpu0_busy," in line]
    check(len(rows) == g["samples"], f"{len(rows)} gpu0_busy rows in the timeline, {g['samples']} samples")


def case_nvml_boottime(a, tmp):
    case_nvml_samples(a, tmp, "boottime")


def case_nvml_fallback(a, tmp):
    # The device keeps no samples: the probe polls the current utilisation,
    # 40 % throughout (the one sample, before the process started).
    env = {"FAKE_NVML_SAMPLES": write_samples(tmp, [(0, -1000, 40, 10)]), "FAKE_NVML_NO_SAMPLES": "1"}
    s, _, calls = probed(a, tmp, ["--sleep-ms=1200"], env)
    c, g = s["counters"], s["gpus"][0]
    check(abs(c["gpu_busy_share"] - 0.40) < 1e-9, f"gpu_busy_share {c['gpu_busy_share']}, expected 0.40")
    check(g["source"] == "utilization_rates", f"source {g['source']}, expected utilization_rates")
    check(abs(g["memory_busy_share"] - 0.10) < 1e-9, f"memory_busy_share {g['memory_busy_share']}, expected 0.10")
    polls = sum("nvmlDeviceGetUtilizationRates" in line for line in calls)
    check(polls >= 1200 / 200 - 2 and g["samples"] == polls, f"{polls} polls, {g['samples']} samples in 1.2 s at 200 ms")
    check("polled every 200 ms" in s["context"]["gpu_note"], f"no note of the fallback: {s['context']['gpu_note']}")


def case_visible_devices(a, tmp):
    rows = [(d, t, v, 0) for t in range(PERIOD_MS, 3001, PERIOD_MS) for d, v in ((0, 10), (1, 70), (2, 30))]
    env = {"FAKE_NVML_SAMPLES": write_samples(tmp, rows), "FAKE_NVML_DEVICES": "3", "CUDA_VISIBLE_DEVICES": "1"}
    s, _, calls = probed(a, tmp, ["--sleep-ms=600"], env)
    check([g["index"] for g in s["gpus"]] == [1], f"GPUs sampled {[g['index'] for g in s['gpus']]}, expected [1]")
    check(abs(s["counters"]["gpu_busy_share"] - 0.70) < 1e-9, f"gpu_busy_share {s['counters']['gpu_busy_share']}")
    touched = {w for line in calls for w in line.split() if w.startswith(("device=", "index="))}
    check(touched == {"device=1", "index=1"}, f"NVML calls named {sorted(touched)}, expected device 1 only")


def case_no_cuda(a, tmp):
    """A process that never loads the driver never touches NVML; its GPU
    counters have no value: null in the summary, an empty cell in a row."""
    env = {"FAKE_NVML_SAMPLES": write_samples(tmp, [(0, 100, 50, 0)])}
    s, _, calls = probed(a, tmp, ["--no-cuda", "--pin-ms=20", "--sleep-ms=300"], env)
    c = s["counters"]
    check(calls == [], f"NVML was called in a process without CUDA: {calls[:3]}")
    check(s["gpus"] == [] and c["gpu_busy_share"] is None, f"gpus {s['gpus']}, gpu_busy_share {c['gpu_busy_share']}")
    check(c["gpus_sampled"] == 0 and c["gpu_samples"] == 0 and c["cpu_cuda_ms"] == 0, "GPU counters not 0")
    check(s["context"]["gpu_note"] == "none", f"gpu_note {s['context']['gpu_note']!r}, expected none")
    sys.path.insert(0, os.path.join(a.repo, "python"))
    from threadburn.lib import schema
    check(schema.fmt_value(c["gpu_busy_share"]) == "", "a counter without a value is not an empty cell")


def case_policy_no_cuda(a, tmp):
    """Under a wait policy the probe itself loads and initialises the driver
    in every process: a process that never uses CUDA still never touches
    NVML, neither while it runs (cuda_user --no-cuda, longer than the
    sampler's looks) nor at its end (true, which ends at once)."""
    env = {"THREADBURN_CUDA_SYNC": "blocking_sync", "FAKE_NVML_SAMPLES": write_samples(tmp, [(0, 100, 50, 0)])}
    for i, program in enumerate([[user(a), "--no-cuda", "--sleep-ms=500"], ["true"]]):
        run = os.path.join(tmp, str(i))
        os.makedirs(run)
        s, _, calls = probed(a, run, [], env, program=program)
        check(s["context"]["cuda_sync_in_force"] == "n/a" and s["context"]["cuda_used"] == "0",
              f"{program[-1]}: cuda context {s['context']}")
        check(calls == [], f"{program[-1]}: NVML was called in a process that never used CUDA: {calls[:3]}")
        check(s["gpus"] == [] and s["counters"]["gpu_busy_share"] is None, f"{program[-1]}: gpus {s['gpus']}")


def case_policy_wrapper(a, tmp):
    """Under a wait policy, a shell starting a CUDA program (bash -c: dash
    ends with _exit, so the probe writes no summary for it): the shell (the
    driver loaded and initialised by the probe alone) makes no NVML call, the
    program (its context active) samples: its busy share is the samples' 0.5."""
    env = {"THREADBURN_CUDA_SYNC": "blocking_sync",
           "FAKE_NVML_SAMPLES": write_samples(tmp, [(0, t, 50, 0) for t in range(PERIOD_MS, 4001, PERIOD_MS)])}
    summaries, _, calls = probed_all(a, tmp, [], env, program=["bash", "-c", f"{user(a)} --sleep-ms=1200; true"])
    check(len(summaries) == 2, f"{len(summaries)} probe summaries, expected the shell's and the program's")
    shell, program = sorted(summaries, key=lambda s: "cuda_user" in s["command"].split()[0])
    nvml_pids = {int(line.split()[0]) for line in calls}
    check(shell["pid"] not in nvml_pids, f"the shell called NVML: {[c for c in calls if int(c.split()[0]) == shell['pid']][:3]}")
    check(shell["gpus"] == [] and shell["context"]["cuda_used"] == "0", f"the shell: gpus {shell['gpus']}")
    check(nvml_pids == {program["pid"]}, f"NVML called by {sorted(nvml_pids)}, expected the program {program['pid']}")
    check(program["context"]["cuda_sync_in_force"] == "blocking_sync", f"in force {program['context']}")
    c = program["counters"]
    check(c["gpus_sampled"] == 1 and abs(c["gpu_busy_share"] - 0.5) < 1e-9,
          f"the program: gpus_sampled {c['gpus_sampled']}, gpu_busy_share {c['gpu_busy_share']}, expected 1 and 0.5")


def case_no_nvml(a, tmp):
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        print("skipped: this host has a libnvidia-ml.so.1 of its own")
        sys.exit(77)
    except OSError:
        pass
    s, _, _ = probed(a, tmp, ["--sleep-ms=300"], {}, nvml=False)
    check(s["gpus"] == [] and s["counters"]["gpu_busy_share"] is None, "GPUs reported without NVML")
    note = s["context"]["gpu_note"]
    check(note.startswith("libnvidia-ml.so.1 not found") and ";" not in note, f"expected one note, got {note!r}")


def case_transparency(a, tmp):
    probed(a, tmp, ["--transparency"], {})  # exits 1 at the first difference
    plain = subprocess.run([user(a), "--transparency"], env=dict(os.environ, LD_LIBRARY_PATH=fakes(a)),
                           capture_output=True, text=True, timeout=60)
    check("transparency: ok" in plain.stdout, f"without the probe: {plain.stdout}{plain.stderr}")


CASES = {name[len("case_"):]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--probe", required=True)
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        CASES[a.case](a, tmp)
    print(f"ok: {a.case}")


if __name__ == "__main__":
    main()
