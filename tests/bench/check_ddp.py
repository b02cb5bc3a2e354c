#!/usr/bin/python3
"""ddp_step_bench for ctest (label bench): ranks on this host, one case per test.

    check_ddp.py CASE --program PATH

  single        no launcher variables: a world of 1 (rank 0) that runs
  env           2 ranks by hand: RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT
  mpirun        2 ranks by mpirun -n 2 --allow-run-as-root --oversubscribe
                (exit 77, skipped, without mpirun)
  peer_missing  rank 0 of 2 alone: one error line naming rank 1, exit 2, within the timeout
  port_in_use   rank 0 of 2 on a port another socket holds: one error line, exit 2, at once
  mismatch      2 ranks started with different --batch: one error line each, exit 2
  rank_dies     rank 1 of 2 killed mid-run: rank 0 stops, one error line, exit 2, within its timeout

Each run of 2 ranks must give, on both ranks, the same benchmarks with
world_size 2 and its own rank, allreduce_ms > 0, CPU on gloo's threads and
none on unclassified ones, equal param_checksum (the replicas stayed in step)
and overlapping timed steps. Free ports come from binding port 0.
Standard library only.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SKIP = 77
# Small: 8 benchmarks of 3 steps, both models, one and several buckets.
ARGS = ["--model=mnist_adadelta,cifar_sgd", "--batch=16", "--bucket_mb=0,25", "--gap_ms=0,100", "--steps=3",
        "--warmup=1", "--synthetic_n=256"]
LAUNCHER_PREFIXES = ("OMPI_", "PMIX_", "SLURM_", "PMI_")
LAUNCHER_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "GLOO_SOCKET_IFNAME")


def clean_env(**extra):
    """This environment without any launcher's variables (ctest may run inside a job)."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS and not k.startswith(LAUNCHER_PREFIXES)}
    env["OMP_NUM_THREADS"] = "1"  # two ranks on two cores
    env.update({k: str(v) for k, v in extra.items()})
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load(path):
    with open(path) as f:
        return json.load(f)


def rows(doc):
    return [b for b in doc.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"]


def check_ranks(docs, world, source):
    """docs[r]: rank r's JSON. Returns the failures."""
    fail = []
    names = [[b["name"] for b in rows(d)] for d in docs]
    if not names[0]:
        return ["rank 0 ran no benchmark"]
    for r, n in enumerate(names):
        if n != names[0]:
            fail.append(f"rank {r} ran {n}, rank 0 {names[0]}")
    for r, d in enumerate(docs):
        ctx = d.get("context", {})
        for key, want in (("dist_rendezvous", source), ("dist_local_rank", str(r))):
            if ctx.get(key) != want:
                fail.append(f"rank {r}: context {key} = {ctx.get(key)!r}, expected {want!r}")
        if int(ctx.get("gloo_threads", "0")) < 3:  # gloo's event loop + 2 ProcessGroupGloo workers at least
            fail.append(f"rank {r}: only {ctx.get('gloo_threads')} threads classed gloo")
        for b in rows(d):
            where = f"rank {r}: {b['name']}"
            if b.get("error_occurred"):
                fail.append(f"{where}: error {b.get('error_message')}")
                continue
            checks = [("world_size", b.get("world_size") == world), ("rank", b.get("rank") == r),
                      ("allreduce_ms > 0", b.get("allreduce_ms", 0) > 0),
                      ("samples_per_s > 0", b.get("samples_per_s", 0) > 0),
                      ("buckets >= 1", b.get("buckets", 0) >= 1),
                      # the all-reduce runs on gloo's threads, every one of them classed
                      ("step_cpu_gloo_ms > 0", b.get("step_cpu_gloo_ms", 0) > 0),
                      ("step_cpu_other_ms < 0.5", b.get("step_cpu_other_ms", 1) < 0.5)]
            for what, ok in checks:
                if not ok:
                    shown = {k: v for k, v in b.items() if k in what.split()}
                    fail.append(f"{where}: {what} does not hold {shown}")
    if world > 1 and not fail:
        for i, name in enumerate(names[0]):
            sums = {int(rows(d)[i]["param_checksum"]) for d in docs}
            if len(sums) != 1:
                fail.append(f"{name}: param_checksum differs across ranks: {sorted(sums)}")
            # Same clock on one host: the ranks' timed steps overlap.
            start = max(rows(d)[i]["timed_start_s"] for d in docs)
            end = min(rows(d)[i]["timed_end_s"] for d in docs)
            if start >= end:
                fail.append(f"{name}: the ranks' timed steps do not overlap")
    for r, d in enumerate(docs):
        for b in rows(d):
            print(f"rank {r} {b['name']}: step_ms={b.get('step_ms', 0):.3f} allreduce_ms={b.get('allreduce_ms', 0):.3f} "
                  f"buckets={b.get('buckets', 0):g} gloo_ms={b.get('step_cpu_gloo_ms', 0):.3f} "
                  f"checksum={int(b.get('param_checksum', 0))}")
    return fail


def wait_all(procs, timeout):
    out = []
    for p in procs:
        try:
            o, e = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        out.append((p.returncode, o, e))
    return out


def start_ranks(prog, tmp, world, port, args=None, per_rank_args=None):
    procs = []
    for r in range(world):
        extra = (per_rank_args or {}).get(r, [])
        cmd = [prog] + (args or ARGS) + extra + [f"--benchmark_out={tmp}/rank{r}.json", "--benchmark_out_format=json"]
        env = clean_env(RANK=r, WORLD_SIZE=world, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    return procs


def one_error_line(err, must_contain):
    lines = [l for l in err.splitlines() if l.strip()]
    if len(lines) != 1:
        return [f"expected one line on stderr, got {len(lines)}: {err!r}"]
    if "ddp_step_bench: error: " not in lines[0] or must_contain not in lines[0]:
        return [f"expected 'ddp_step_bench: error: ...{must_contain}...', got {lines[0]!r}"]
    return []


def case_single(prog, tmp):
    out = f"{tmp}/rank0.json"
    p = subprocess.run([prog] + ARGS + [f"--benchmark_out={out}", "--benchmark_out_format=json"], env=clean_env(),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=200)
    print(p.stdout[-2000:])
    if p.returncode != 0:
        return [f"exit {p.returncode}"]
    return check_ranks([load(out)], 1, "single")


def case_env(prog, tmp):
    results = wait_all(start_ranks(prog, tmp, 2, free_port()), 200)
    fail = [f"rank {r} exited {rc}: {e.strip()[-500:]}" for r, (rc, _, e) in enumerate(results) if rc != 0]
    return fail or check_ranks([load(f"{tmp}/rank{r}.json") for r in range(2)], 2, "env")


def case_mpirun(prog, tmp):
    mpirun = shutil.which("mpirun")
    if not mpirun:
        print("mpirun not found (Debian: openmpi-bin): skipped")
        return None
    # Each rank its own JSON: the shell names it after Open MPI's rank.
    inner = " ".join([prog] + ARGS + [f"--benchmark_out={tmp}/rank$OMPI_COMM_WORLD_RANK.json",
                                      "--benchmark_out_format=json"])
    cmd = [mpirun, "-n", "2", "--allow-run-as-root", "--oversubscribe", "-x", "MASTER_PORT", "-x", "OMP_NUM_THREADS",
           "sh", "-c", "exec " + inner]
    p = subprocess.run(cmd, env=clean_env(MASTER_PORT=free_port()), stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=200)
    print(p.stdout[-2000:])
    if p.returncode != 0:
        return [f"mpirun exited {p.returncode}"]
    return check_ranks([load(f"{tmp}/rank{r}.json") for r in range(2)], 2, "openmpi")


def case_peer_missing(prog, tmp):
    timeout_s = 3
    port = free_port()
    env = clean_env(RANK=0, WORLD_SIZE=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    t0 = time.monotonic()
    p = subprocess.run([prog] + ARGS + [f"--timeout_s={timeout_s}"], env=env, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=120)
    took = time.monotonic() - t0
    print(f"rank 0 of 2 alone: exit {p.returncode} after {took:.1f} s: {p.stderr.strip()}")
    fail = [] if p.returncode == 2 else [f"exit {p.returncode}, expected 2"]
    fail += one_error_line(p.stderr, "rank(s) 1 did not arrive")
    if took > timeout_s + 10:
        fail.append(f"took {took:.1f} s with --timeout_s={timeout_s}")
    return fail


def case_port_in_use(prog, tmp):
    with socket.socket() as held:
        held.bind(("0.0.0.0", 0))
        held.listen()
        port = held.getsockname()[1]
        env = clean_env(RANK=0, WORLD_SIZE=2, MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
        t0 = time.monotonic()
        p = subprocess.run([prog] + ARGS + ["--timeout_s=30"], env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=120)
        took = time.monotonic() - t0
    print(f"rank 0 on a port in use: exit {p.returncode} after {took:.1f} s: {p.stderr.strip()}")
    fail = [] if p.returncode == 2 else [f"exit {p.returncode}, expected 2"]
    fail += one_error_line(p.stderr, "Address already in use")
    if took > 20:
        fail.append(f"took {took:.1f} s: a port in use must fail at once")
    return fail


def case_rank_dies(prog, tmp):
    """Rank 1 of 2 killed (SIGKILL) while the ranks train: rank 0 must stop
    with one error line, exit 2, within its timeout, leaving nothing behind."""
    timeout_s = 10
    procs = start_ranks(prog, tmp, 2, free_port(), ["--model=mnist_adadelta", "--batch=16", "--gap_ms=0",
                                                    "--steps=100000", "--warmup=1", "--synthetic_n=256",
                                                    f"--timeout_s={timeout_s}"])
    # Wait for the rendezvous and the warmup (well under 5 s even on a slow machine), then kill.
    time.sleep(5)
    if procs[0].poll() is not None or procs[1].poll() is not None:
        wait_all(procs, 30)
        return ["a rank ended before it was killed"]
    procs[1].kill()
    t0 = time.monotonic()
    try:
        _, err = procs[0].communicate(timeout=timeout_s + 60)
    except subprocess.TimeoutExpired:
        procs[0].kill()
        return [f"rank 0 still ran {timeout_s + 60} s after its peer died"]
    procs[1].communicate()
    took = time.monotonic() - t0
    print(f"rank 0 after rank 1 was killed: exit {procs[0].returncode} after {took:.1f} s: {err.strip()}")
    fail = [] if procs[0].returncode == 2 else [f"exit {procs[0].returncode}, expected 2"]
    fail += one_error_line(err, "rank 0 of 2")
    if took > timeout_s + 15:
        fail.append(f"took {took:.1f} s with --timeout_s={timeout_s}")
    return fail


def case_mismatch(prog, tmp):
    procs = start_ranks(prog, tmp, 2, free_port(), ARGS + ["--timeout_s=20"], {1: ["--batch=8"]})
    fail = []
    for r, (rc, _, err) in enumerate(wait_all(procs, 120)):
        print(f"rank {r}: exit {rc}: {err.strip()}")
        if rc != 2:
            fail.append(f"rank {r}: exit {rc}, expected 2")
        fail += [f"rank {r}: {f}" for f in one_error_line(err, "rank 1's benchmark list differs from rank 0's")]
    return fail


CASES = {"single": case_single, "env": case_env, "mpirun": case_mpirun, "peer_missing": case_peer_missing,
         "port_in_use": case_port_in_use, "mismatch": case_mismatch, "rank_dies": case_rank_dies}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("case", choices=sorted(CASES))
    ap.add_argument("--program", required=True)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        failures = CASES[args.case](args.program, tmp)
    if failures is None:
        return SKIP
    for f in failures:
        print("FAIL: " + f)
    print(f"{args.case}: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
