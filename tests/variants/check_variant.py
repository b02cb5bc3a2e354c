#!/usr/bin/python3
"""One other configuration of the build, configured and built beside this one:

    check_variant.py NAME --source DIR --build-dir DIR --generator G --targets T1,T2 [--ctest REGEX]
                     [--run-probe] -- CMAKE_OPTION...

Configures the source into BUILD_DIR/variants/NAME with the options given
(the generator and build type of this build, ccache as any build finds it),
builds only TARGETS (the parts the options change), runs the tests of that
build that match --ctest (ctest in that folder: they use that build), and
with --run-probe `threadburn run` against that build of its regions_child
(a program of known OpenMP regions): what a GPU host without Debian's
libtorch runs. A guard missing for a part
that is off fails here, not on a GPU host. Prints each stage's time.
Standard library only.
"""
import argparse
import csv
import os
import subprocess
import sys
import time


def stage(title, cmd, cwd=None, env=None):
    t0 = time.monotonic()
    print("$ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    took = time.monotonic() - t0
    if p.returncode != 0:
        sys.stdout.write(p.stdout[-12000:])
        print(f"FAIL: {title} exited {p.returncode} ({took:.1f} s)")
        sys.exit(1)
    print(f"{title}: {took:.1f} s", flush=True)
    return p.stdout


def run_probe(source, out):
    """`threadburn run` against this build on regions_child (its tests/cpp program: STEPS x REGIONS
    OpenMP regions): the probe must count every region."""
    steps, regions = 3, 10
    child = [os.path.join(out, "tests", "cpp", "regions_child"), f"--steps={steps}", f"--regions={regions}",
             "--gap_ms=20"]
    files = os.path.join(out, "run-check")
    stage("threadburn run against this build", [os.path.join(source, "bin", "threadburn"), "run", "--build-dir", out,
                                                "--out", files, "--force", "--no-plot", "--", *child])
    with open(os.path.join(files, "run.csv")) as f:
        row = next(csv.DictReader(f))
    if float(row["regions"]) != steps * regions:
        print(f"FAIL: threadburn run counted {row['regions']} regions of regions_child, not {steps * regions}")
        sys.exit(1)
    print(f"threadburn run: {row['regions']} regions counted, as regions_child ran")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--source", required=True)
    ap.add_argument("--build-dir", required=True, help="the build this variant lies under")
    ap.add_argument("--generator", required=True)
    ap.add_argument("--build-type", default="Release")
    ap.add_argument("--targets", required=True)
    ap.add_argument("--ctest", default="", help="regex of the variant's own tests to run")
    ap.add_argument("--run-probe", action="store_true")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = ap.parse_args(argv[:cut])
    a.options = argv[cut + 1:]
    out = os.path.join(a.build_dir, "variants", a.name)
    t0 = time.monotonic()
    stage("configure", ["cmake", "-S", a.source, "-B", out, "-G", a.generator,
                        f"-DCMAKE_BUILD_TYPE={a.build_type}", *a.options])
    stage("build " + a.targets, ["cmake", "--build", out, "-j", str(os.cpu_count() or 2),
                                 "--target", *a.targets.split(",")])
    if a.ctest:
        listed = stage("ctest " + a.ctest, ["ctest", "-R", a.ctest, "--output-on-failure"], cwd=out)
        if "No tests were found" in listed:
            print(f"FAIL: no test of the variant matches {a.ctest}")
            sys.exit(1)
    if a.run_probe:
        run_probe(a.source, out)
    print(f"variant {a.name}: configured, built and checked in {time.monotonic() - t0:.1f} s")


if __name__ == "__main__":
    main()
