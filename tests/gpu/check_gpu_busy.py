#!/usr/bin/python3
"""The GPU figures' known answer, live on a GPU:

    check_gpu_busy.py --program PATH/train_step_bench [--sleep-ms 20] [--steps 30]

Runs the same CUDA step (MNIST Net + Adadelta, the dataset preloaded on the
GPU: no loader) twice, once plain and once with a sleep of S ms on the host
between backward and the optimizer step (--host_sleep_ms). The GPU has
nothing queued during the sleep: the step takes S ms longer, and so does the
span between the events around its device work (gpu_span_ms: the stream
waited for its host), but the time the GPU ran work (gpu_busy_ms: CUPTI's
kernel, copy and memset records) does not change. So:

    step_ms(S) - step_ms(0)          = S   (within 10 % of S + 0.5 ms)
    gpu_span_ms(S) - gpu_span_ms(0)  = S   (within 10 % of S + 0.5 ms)
    gpu_busy_ms(S) - gpu_busy_ms(0)  = 0   (within 10 % of S + 0.5 ms: a gpu_busy_ms that
                                            counted the wait would differ by S)

Prints the figures and one line: "PASS: ..." (exit 0) or "FAIL: ..." (exit
1). Without a CUDA device (or a libtorch without CUDA) the program skips its
benchmarks: "SKIP: ..." and exit 77 (ctest's skip). Standard library only.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

FIGURES = ("step_ms", "gpu_span_ms", "gpu_busy_ms", "gpu_idle_share", "sync_ms")


def run(a, sleep_ms):
    cmd = [a.program, "--device=cuda", "--model=mnist_adadelta", "--preload=1", "--workers=0", f"--batch={a.batch}",
           "--gap_ms=0", f"--steps={a.steps}", "--warmup=5", f"--host_sleep_ms={sleep_ms}"]
    print("$ " + " ".join(cmd), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        p = subprocess.run(cmd + [f"--benchmark_out={path}", "--benchmark_out_format=json"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=600)
        sys.stdout.write(p.stdout)
        if p.returncode != 0:
            print(f"FAIL: {a.program} exited {p.returncode}")
            sys.exit(1)
        with open(path) as f:
            out = json.load(f)
    bench = out["benchmarks"][0]
    if bench.get("error_occurred"):
        msg = bench.get("error_message", "")
        if msg.startswith("skipped:"):
            print(f"SKIP: {msg} (the known answer needs a CUDA device)")
            sys.exit(77)
        print(f"FAIL: {msg}")
        sys.exit(1)
    missing = [f for f in FIGURES if f not in bench]
    if missing:
        why = out.get("context", {}).get("cuda_cupti", "?")
        print(f"FAIL: no {', '.join(missing)} in the output (cuda_cupti: {why})")
        sys.exit(1)
    figures = {f: float(bench[f]) for f in FIGURES}
    print(f"host_sleep_ms={sleep_ms}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()), flush=True)
    return figures, out.get("context", {})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--program", required=True, help="train_step_bench of a CUDA build")
    ap.add_argument("--sleep-ms", type=int, default=20)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1000)
    a = ap.parse_args()
    if not os.access(a.program, os.X_OK):
        print(f"FAIL: no program {a.program} (scripts/gpu_host.sh build makes it)")
        sys.exit(1)
    base, ctx = run(a, 0)
    slept, _ = run(a, a.sleep_ms)
    print(f"device {ctx.get('device_in_force', '?')}, torch {ctx.get('torch_version', '?')}, "
          f"cuda_cupti {ctx.get('cuda_cupti', '?')}, cuda_sync_in_force {ctx.get('cuda_sync_in_force', '?')}")
    s = a.sleep_ms
    tol = 0.1 * s + 0.5
    d = {k: slept[k] - base[k] for k in ("step_ms", "gpu_span_ms", "gpu_busy_ms")}
    print(f"S = {s} ms: step_ms {d['step_ms']:+.3f}, gpu_span_ms {d['gpu_span_ms']:+.3f}, "
          f"gpu_busy_ms {d['gpu_busy_ms']:+.3f} (each held to +-{tol:.2f} ms of S, S, 0); "
          f"gpu_idle_share {base['gpu_idle_share']:.3f} -> {slept['gpu_idle_share']:.3f}")
    bad = [f"{k} changed by {d[k]:+.3f} ms, not {want} ms" for k, want in
           (("step_ms", s), ("gpu_span_ms", s), ("gpu_busy_ms", 0)) if abs(d[k] - want) > tol]
    if not 0 < slept["gpu_busy_ms"] < slept["gpu_span_ms"]:
        bad.append(f"gpu_busy_ms {slept['gpu_busy_ms']:.3f} not within (0, gpu_span_ms {slept['gpu_span_ms']:.3f})")
    if bad:
        print("FAIL: a host sleep of %d ms: %s" % (s, "; ".join(bad)))
        sys.exit(1)
    print(f"PASS: a step with a host sleep of {s} ms shows it in step_ms ({d['step_ms']:+.2f}) and gpu_span_ms "
          f"({d['gpu_span_ms']:+.2f}), not in gpu_busy_ms ({d['gpu_busy_ms']:+.2f})")


if __name__ == "__main__":
    main()
