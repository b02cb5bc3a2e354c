#!/usr/bin/python3
"""The installed threadburn, end to end (label install):

    check_install.py prefix --build-dir DIR
    check_install.py deb    --build-dir DIR

prefix  `cmake --install DIR --prefix TMP`, then from a folder outside the
        checkout: doctor, list, run, a tiny tune, a smoke sweep
        (tiny_grid.toml) and findings --check on the installed references;
        the license (share/doc/threadburn/copyright, LICENSE's text).
deb     `cpack -G DEB` into TMP, its control fields (Depends from
        dpkg-shlibdeps, Recommends), file list and license, then `dpkg -x` into a
        private root (no root needed, the system untouched) and doctor + run
        from there: the tree finds its parts relative to itself (paths.py),
        so it works unpacked anywhere, not only at /usr.

Known answers: omp_entry_points_gcc (tests/cpp) with --bench=parallel
--regions=N runs N + 1 GOMP_parallel regions of 2 threads (one first to check
the kind): `run` must show exactly that. Every command's files must land in
the current folder (runs/), and the installed tree must be byte for byte
what was installed (no __pycache__, no runs/, no results written into it).
Exit 77 (skipped) when a tool is missing (cpack, dpkg-deb).
"""
import argparse
import csv
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
LICENSE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "LICENSE")
DEP5 = "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/"
REGIONS = 40   # run: REGIONS + 1 regions (omp_entry_points' check of the kind)


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def snapshot(root):
    """Every path under root with its mode and content hash (or link target)."""
    out = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = os.path.join(d, name)
            st = os.lstat(p)
            if os.path.islink(p):
                what = "-> " + os.readlink(p)
            elif os.path.isdir(p):
                what = "dir"
            else:
                with open(p, "rb") as f:
                    what = hashlib.sha256(f.read()).hexdigest()
            out[os.path.relpath(p, root)] = (oct(st.st_mode), what)
    return out


def unchanged(before, root):
    after = snapshot(root)
    if after != before:
        added = sorted(set(after) - set(before))[:5]
        gone = sorted(set(before) - set(after))[:5]
        changed = sorted(k for k in set(after) & set(before) if after[k] != before[k])[:5]
        fail(f"the installed tree changed: added {added}, removed {gone}, changed {changed}")


def environment():
    """The user's environment, minus what would point the command at the
    build or hide a write into the installed tree."""
    env = dict(os.environ)
    for k in ("THREADBURN_BUILD_DIR", "THREADBURN_PROGRAMS", "THREADBURN_RUNS", "PYTHONPATH",
              "PYTHONDONTWRITEBYTECODE", "OMP_NUM_THREADS", "LD_PRELOAD"):
        env.pop(k, None)
    return env


def tb(command, args, cwd, expect_rc=0):
    t0 = time.monotonic()
    p = subprocess.run([command] + args, cwd=cwd, env=environment(), capture_output=True, text=True)
    print(f"$ threadburn {' '.join(args)}   ({time.monotonic() - t0:.1f} s, exit {p.returncode})")
    print(p.stdout[-3000:] + p.stderr[-3000:])
    if p.returncode != expect_rc:
        fail(f"threadburn {args[0]}: exit {p.returncode}, expected {expect_rc}")
    return p.stdout


def check_doctor(command, libexec, cwd):
    out = tb(command, ["doctor"], cwd)
    for what, name in (("probe", "libthreadburn_probe.so"), ("monitor", "threadburn_monitor"),
                       ("programs", "optimizer_step_bench")):
        line = next((l for l in out.splitlines() if l.startswith(what + " ")), "")
        if os.path.join(libexec, name) not in line:
            fail(f"doctor: the {what} line does not name {os.path.join(libexec, name)}: {line!r}")


def check_run(command, program, cwd):
    out = tb(command, ["run", "--", program, "--bench=parallel", f"--regions={REGIONS}"], cwd)
    want = REGIONS + 1
    if f"regions: {want} " not in out:
        fail(f"run: expected 'regions: {want}' in its report")
    found = glob.glob(os.path.join(cwd, "runs", "run-omp_entry_points_gcc-*", "probe-*.json"))
    if len(found) != 1:
        fail(f"run: expected one probe-<pid>.json under {cwd}/runs, found {found}")
    with open(found[0]) as f:
        eps = {e["name"]: e for e in json.load(f)["entry_points"]}
    if set(eps) != {"GOMP_parallel"} or eps["GOMP_parallel"]["regions"] != want \
            or eps["GOMP_parallel"]["teams"] != {"2": want}:
        fail(f"run: the probe saw {eps}, expected {want} GOMP_parallel regions of 2 threads")


def check_copyright(root):
    """share/doc/threadburn/copyright under an installed root: Debian's
    machine-readable format, every file under BSD-3-Clause by the threadburn
    developers, and the license text exactly LICENSE's."""
    path = os.path.join(root, "share", "doc", "threadburn", "copyright")
    if not os.path.isfile(path):
        fail(f"no license in the installed tree: {path} is missing")
    with open(path) as f:
        paragraphs = [p.split("\n") for p in f.read().rstrip("\n").split("\n\n")]
    if paragraphs[0][0] != DEP5:
        fail(f"{path}: its first line is not {DEP5!r}")
    files = next((p for p in paragraphs if p[0] == "Files: *"), None)
    if files is None or "Copyright: 2026 the threadburn developers" not in files or "License: BSD-3-Clause" not in files:
        fail(f"{path}: no paragraph 'Files: *' with the copyright of the threadburn developers under BSD-3-Clause")
    text = next((p for p in paragraphs if p[0] == "License: BSD-3-Clause" and len(p) > 1), None)
    if text is None:
        fail(f"{path}: no stand-alone License: BSD-3-Clause paragraph with the text")
    with open(LICENSE) as f:
        want = f.read().rstrip("\n")
    bad = [line for line in text[1:] if not line.startswith(" ") or not line.strip()]
    if bad:
        fail(f"{path}: the license text is not in Debian's format (each line indented, an empty one as ' .'): {bad[0]!r}")
    got = "\n".join("" if line == " ." else line[1:] for line in text[1:])
    if got != want:
        fail(f"{path}: the license text differs from {LICENSE}")
    print(f"{path}: BSD-3-Clause, the text of LICENSE")


def check_prefix(build, work):
    prefix = os.path.join(work, "prefix")
    p = subprocess.run(["cmake", "--install", build, "--prefix", prefix], capture_output=True, text=True)
    if p.returncode:
        fail("cmake --install: " + p.stdout[-2000:] + p.stderr[-2000:])
    check_copyright(prefix)
    before = snapshot(prefix)
    cwd = os.path.join(work, "user")
    os.mkdir(cwd)
    command = os.path.join(prefix, "bin", "threadburn")
    libexec = os.path.join(prefix, "libexec", "threadburn")
    program = os.path.join(build, "tests", "cpp", "omp_entry_points_gcc")
    check_doctor(command, libexec, cwd)
    out = tb(command, ["list"], cwd)
    for bench in ("optimizer_step", "train_step", "runtime", "ddp_step"):
        if bench not in out:
            fail(f"list: {bench} missing")
    check_run(command, program, cwd)
    # A tiny tune: 2 settings x 3 runs (and 2 + 2 fresh runs without the probe when the race selects one).
    points = os.path.join(cwd, "points.toml")
    with open(points, "w") as f:
        # Teams of 2 on any machine: the settings differ in force (no duplicate dropped).
        f.write('[[point]]\nname = "plain"\nruntime = "gomp"\nenv = {OMP_NUM_THREADS = "2"}\n'
                '[[point]]\nname = "passive"\nruntime = "gomp"\n'
                'env = {OMP_NUM_THREADS = "2", OMP_WAIT_POLICY = "passive"}\n')
    out = tb(command, ["tune", "--points", points, "--repetitions", "3", "--confirm", "2", "--seed", "1", "--",
                       program, "--bench=parallel", "--regions=40"], cwd)
    if not any(w in out for w in ("CHANGE to", "KEEP", "UNDECIDED")):
        fail("tune: no verdict in its report")
    csvs = glob.glob(os.path.join(cwd, "runs", "tune-omp_entry_points_gcc-*.csv"))
    if len(csvs) != 1:
        fail(f"tune: expected one results CSV under {cwd}/runs, found {csvs}")
    with open(csvs[0]) as f:
        phases = [r["phase"] for r in csv.DictReader(l for l in f if not l.startswith("#"))]
    # 2 settings x 3 probed runs; a candidate the race selected adds 2 + 2 runs without the probe.
    with open(os.path.splitext(csvs[0])[0] + ".verdict.json") as f:
        candidate = json.load(f)["workloads"][0]["candidate"]
    confirm = 4 if candidate else 0
    if sorted(phases) != ["confirm"] * confirm + ["race"] * 6:
        fail(f"tune: rows of phases {phases}, expected 6 race rows and {confirm} confirm rows")
    out = tb(command, ["sweep", os.path.join(HERE, "tiny_grid.toml"), "--seed", "1", "--strict", "--no-plot"], cwd)
    if "rows: 2 ok, 0 skipped, 0 failed" not in out:   # tiny_grid: 1 point, 2 benchmarks (its gaps)
        fail("sweep: expected 2 rows ok")
    csvs = [c for c in glob.glob(os.path.join(cwd, "runs", "tiny_grid-*.csv"))]
    if len(csvs) != 1:
        fail(f"sweep: expected one results CSV under {cwd}/runs, found {csvs}")
    tb(command, ["findings", "--check"], cwd)
    unchanged(before, prefix)
    print(f"OK: the installed tree under {prefix} ran doctor, list, run, tune, sweep and findings; "
          "files only under the current folder, the tree unchanged")


def field(deb, name):
    return subprocess.run(["dpkg-deb", "-f", deb, name], capture_output=True, text=True).stdout.strip()


def owners(libs):
    """{library: the Debian package of the file the dynamic loader finds for it, or None}.
    One `ldconfig -p` and one `dpkg-query -S` for them all: each
    dpkg-query reads every package's file list (about 3 s here on a loaded machine)."""
    cache = subprocess.run(["/sbin/ldconfig", "-p"], capture_output=True, text=True).stdout.splitlines()
    candidates = {}
    for lib in libs:
        found = [l.split(" => ")[1].strip() for l in cache
                 if l.strip().startswith(lib + " ") and "x86-64" in l and " => " in l]
        for path in found[:1]:
            real = os.path.realpath(path)
            # usr-merged Debian: dpkg may know the file under /lib or /usr/lib.
            candidates[lib] = [path, real, real.removeprefix("/usr"), "/usr" + real]
    paths = sorted({p for ps in candidates.values() for p in ps})
    # Exit 1 when some path is no package's; each found one is a line "pkg[:arch][, pkg...]: path".
    q = subprocess.run(["dpkg-query", "-S", *paths], capture_output=True, text=True) if paths else None
    package = {}
    for line in (q.stdout.splitlines() if q else []):
        if ": " in line and not line.startswith("diversion by"):
            pkgs, path = line.rsplit(": ", 1)
            package.setdefault(path.strip(), pkgs.split(",")[0].split(":")[0].strip())
    return {lib: next((package[p] for p in ps if p in package), None) for lib, ps in candidates.items()}


def check_depends(libexec, dep_names):
    """Every library the packaged programs and probe link (DT_NEEDED) that
    comes from a Debian package here is in Depends: the libtorch, oneDNN, TBB,
    Google Benchmark, glog, libgomp, libstdc++ and libc packages. A library no
    package provides (e.g. libcudart from an NVIDIA installer in a build with
    the CUDA toolkit) cannot be a Depends: it is named, and README.md says to
    build the .deb with -DTHREADBURN_WITH_CUDA=OFF for other hosts."""
    needed = set()
    for f in os.listdir(libexec):
        dyn = subprocess.run(["objdump", "-p", os.path.join(libexec, f)], capture_output=True, text=True).stdout
        needed |= {l.split()[1] for l in dyn.splitlines() if l.strip().startswith("NEEDED")}
    outside = []
    owner = owners(needed)
    for lib in sorted(needed):
        pkg = owner.get(lib)
        if pkg is None:
            outside.append(lib)
        elif pkg not in dep_names:
            fail(f"Depends lacks {pkg}, the package of {lib} that the packaged programs link")
    print(f"Depends covers the packages of the {len(needed) - len(outside)} linked libraries; "
          f"from no Debian package: {', '.join(outside) or 'none'}")


def check_deb(build, work):
    for tool in ("cpack", "dpkg-deb", "dpkg-shlibdeps", "objdump"):
        if not shutil.which(tool):
            print(f"SKIP: {tool} not found (apt install cmake dpkg-dev binutils)")
            return 77
    t0 = time.monotonic()
    p = subprocess.run(["cpack", "-G", "DEB", "--config", os.path.join(build, "CPackConfig.cmake"), "-B", work],
                       capture_output=True, text=True)
    print(f"$ cpack -G DEB   ({time.monotonic() - t0:.1f} s)")
    debs = glob.glob(os.path.join(work, "threadburn_*_amd64.deb"))
    if p.returncode or len(debs) != 1:
        fail(f"cpack: exit {p.returncode}, packages {debs}: " + p.stdout[-2000:] + p.stderr[-2000:])
    deb = debs[0]
    depends, recommends = field(deb, "Depends"), field(deb, "Recommends")
    print(f"{os.path.basename(deb)}: {os.path.getsize(deb) / 2**20:.1f} MiB\nDepends: {depends}\n"
          f"Recommends: {recommends}")
    dep_names = {d.strip().split()[0] for d in depends.split(",")}
    if "python3" not in dep_names:
        fail(f"Depends lacks python3 (the command): {depends}")
    for want in ("libomp5-14", "python3-numpy", "python3-matplotlib"):
        if want not in recommends:
            fail(f"Recommends lacks {want}: {recommends}")
    listing = subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True).stdout
    for path in ("./usr/bin/threadburn", "./usr/libexec/threadburn/libthreadburn_probe.so",
                 "./usr/libexec/threadburn/train_step_bench", "./usr/share/threadburn/configs/default.toml",
                 "./usr/share/threadburn/results/FINDINGS.md", "./usr/share/doc/threadburn/README.md",
                 "./usr/share/doc/threadburn/copyright",
                 "./usr/share/threadburn/python/threadburn/_installed.py"):
        if path + " " not in listing + " " and path + "\n" not in listing:
            fail(f"the package lacks {path}")
    root = os.path.join(work, "root")
    subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    check_depends(os.path.join(root, "usr", "libexec", "threadburn"), dep_names)
    check_copyright(os.path.join(root, "usr"))
    before = snapshot(root)
    cwd = os.path.join(work, "user")
    os.mkdir(cwd)
    command = os.path.join(root, "usr", "bin", "threadburn")
    check_doctor(command, os.path.join(root, "usr", "libexec", "threadburn"), cwd)
    check_run(command, os.path.join(build, "tests", "cpp", "omp_entry_points_gcc"), cwd)
    unchanged(before, root)
    print(f"OK: {os.path.basename(deb)} unpacked under {root} ran doctor and run; the tree unchanged")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=("prefix", "deb"))
    ap.add_argument("--build-dir", required=True)
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.build_dir, "tests", "cpp", "omp_entry_points_gcc")):
        fail(f"{a.build_dir}: omp_entry_points_gcc not built")
    with tempfile.TemporaryDirectory(prefix=f"threadburn-install-{a.case}-") as work:
        return (check_prefix if a.case == "prefix" else check_deb)(os.path.abspath(a.build_dir), work) or 0


if __name__ == "__main__":
    sys.exit(main())
