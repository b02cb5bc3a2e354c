#!/usr/bin/python3
"""Known answers of the preload probe's view of OpenMP (src/omptap), live:

    check_entry_points.py CASE --probe LIB --build-dir DIR --libomp LIB

tests/cpp/omp_entry_points.c runs a known number of regions through every
entry point that starts a team, each region checking its own team, and prints
what the probe must see per entry point ("expect ENTRY regions=N nested=K
teams=T:N,..."). The probe's summary (probe-<pid>.json, entry_points) must
match exactly: the same entry points, the same outermost regions, nested
ones and team of each region; `regions` is their sum, and
region_depth_max is 1 (the nested case). Cases:

  gcc, gcc_llvm       GCC's build (GOMP_* ABI), served by libgomp / by LLVM's libomp
                      (preloaded after the probe, as `run --runtime llvm` does)
  clang, clang_llvm   clang's build (__kmpc_fork_call / __kmpc_fork_teams, one
                      microtask of 70 arguments), on libomp
  wheel               GCC's build linked against a copy of libgomp renamed like a
                      pip wheel's (libgomp-<hash>.so.1, through its SONAME and rpath):
                      libgomp.so.1 itself must not be loaded

Exit 77 (skipped) when the build lacks the program (no clang, no patchelf).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

PROGRAM = {"gcc": "omp_entry_points_gcc", "gcc_llvm": "omp_entry_points_gcc", "clang": "omp_entry_points_clang",
           "clang_llvm": "omp_entry_points_clang", "wheel": "omp_entry_points_wheel"}
# Every entry point the brief of docs/probe.md names for each build: a program
# that stopped exercising one would pass the comparison, not this.
GOMP = ["GOMP_parallel", "GOMP_parallel_reductions", "GOMP_parallel_sections", "GOMP_parallel_loop_static",
        "GOMP_parallel_loop_dynamic", "GOMP_parallel_loop_guided", "GOMP_parallel_loop_runtime",
        "GOMP_parallel_loop_nonmonotonic_dynamic", "GOMP_parallel_loop_nonmonotonic_guided",
        "GOMP_parallel_loop_nonmonotonic_runtime", "GOMP_parallel_loop_maybe_nonmonotonic_runtime",
        "GOMP_parallel_start", "GOMP_parallel_sections_start", "GOMP_parallel_loop_static_start",
        "GOMP_parallel_loop_dynamic_start", "GOMP_parallel_loop_guided_start", "GOMP_parallel_loop_runtime_start",
        "GOMP_teams_reg"]
KMPC = ["__kmpc_fork_call", "__kmpc_fork_teams"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def parse_expect(stdout):
    want = {}
    for line in stdout.splitlines():
        if not line.startswith("expect "):
            continue
        _, name, regions, nested, teams = line.split()
        want[name] = {"regions": int(regions.split("=")[1]), "nested": int(nested.split("=")[1]),
                      "teams": {t.split(":")[0]: int(t.split(":")[1]) for t in teams.split("=")[1].split(",")}}
    return want


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=sorted(PROGRAM))
    for name in ("--probe", "--build-dir", "--libomp"):
        ap.add_argument(name, required=True)
    a = ap.parse_args()
    program = os.path.join(a.build_dir, "tests", "cpp", PROGRAM[a.case])
    if not os.path.exists(program):
        print(f"SKIP: {program} was not built (clang / patchelf missing: scripts/setup.sh)")
        return 77
    preload = [a.probe] + ([a.libomp] if a.case.endswith("_llvm") else [])
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, LD_PRELOAD=" ".join(preload), THREADBURN_PROBE_DIR=out)
        env.pop("OMP_NUM_THREADS", None)
        cmd = [program, "--repeat=20"]
        if a.case == "wheel":
            # The renamed copy serves it, and libgomp.so.1 itself stays out.
            maps = subprocess.run(["ldd", program], capture_output=True, text=True).stdout
            print(maps)
            if "libgomp-a34b3233.so.1" not in maps or "libgomp.so.1" in maps:
                fail("the wheel program does not load (only) the renamed libgomp")
        print("$ LD_PRELOAD=" + env["LD_PRELOAD"] + " " + " ".join(cmd))
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
        sys.stdout.write(p.stdout + p.stderr)
        if p.returncode != 0:
            fail(f"{program} exited {p.returncode}")
        want = parse_expect(p.stdout)
        summaries = [json.load(open(path)) for path in glob.glob(os.path.join(out, "probe-*.json"))]
    if len(summaries) != 1:
        fail(f"{len(summaries)} probe summaries, expected 1")
    s = summaries[0]
    seen = {e["name"]: {"regions": e["regions"], "nested": e["nested"], "teams": e["teams"]} for e in s["entry_points"]}
    for name in sorted(set(want) | set(seen)):
        print(f"{name}: expected {want.get(name)}, seen {seen.get(name)}")
    names = KMPC if a.case.startswith("clang") else GOMP
    missing = [n for n in names if n not in want]
    if missing:
        fail(f"the program no longer runs regions through {missing}")
    if seen != want:
        fail("the probe's regions per entry point differ from the program's")
    c = s["counters"]
    if c["regions"] != sum(w["regions"] for w in want.values()):
        fail(f"regions = {c['regions']}, expected the sum over entry points")
    if c["regions_nested"] != sum(w["nested"] for w in want.values()) or c["region_depth_max"] != 1:
        fail(f"regions_nested {c['regions_nested']}, depth {c['region_depth_max']}: expected the nested case at depth 1")
    print(f"OK {a.case}: {int(c['regions'])} regions through {len(want)} entry points, "
          f"{int(c['regions_nested'])} nested")
    return 0


if __name__ == "__main__":
    sys.exit(main())
