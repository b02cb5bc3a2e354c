#!/usr/bin/python3
"""OpenMP's promise under an in-run tune, live (src/probe/inrun.h: answer() and
team_hook(); src/probe/omp_ask.cc): a region the program leaves to the runtime
gets exactly the omp_get_max_threads() its forking thread was told, and a region
the program names keeps its team, in every block, while the blocks' teams go
around the program's own (up to the ceiling).

    check_promise.py CASE --build-dir DIR --libomp LIB [--clang-child PATH]

The program is tests/cpp/promise_child.c: per-thread slots sized by
omp_get_max_threads(), guard slots with a canary after them, every member
writing its slot; it exits 3 on a thread beyond its slots, an overwritten
guard, a region with another team than it was told (fewer too), or a named
region with another team. This script is threadburn's side
of the control block, by hand: it writes the ceiling (4) and the settings T1,
T2, T4, starts the program under the probe, and asks the program's own, T1, T2,
T4 in turn every 0.25 s for the program's 4 s. Known answers, each case:
  the program exits 0 with violations=0 (nothing written past its slots,
  every region the team it was told);
  asked before every region: its largest team is 4 (the block's team reaches
  it through the answer), every setting applied in the process (its slot's
  `applied`), the probe answered its asks (`asks` > 0), no region held back;
  sized once at start (told the runtime's own, 2 here, before it was
  steered): every region keeps that team, so the settings of another team
  never take effect (T1, T4 not applied, their regions counted as held back)
  and the program's own and T2 do.
Cases:
  gcc_start     GCC (GOMP_*), libgomp, slots sized once before the first
                region (told the ceiling at start: every team fits)
  gcc_each      the same, sized before every region (told each block's team)
  gcc_named     sized before every region, every third region named
                num_threads(3): exactly 3 in every block
  llvm_each     the GCC program on LLVM's runtime (LD_PRELOAD libomp)
  clang_named   clang (__kmpc_fork_call; a named team is __kmpc_push_num_threads
                before it), LLVM's runtime: every third region named 3
  forkers       three threads forking empty regions at once at one thread each,
                the program's own setting: the probe's count of them
                (free_regions, shared by every forking thread) is the
                program's own, to the region
And the in-run verdict on such a program stays right (threadburn tune --in-run;
the program stops at its first violation, which its log would show):
  verdict_each  slots sized before every region, OMP_NUM_THREADS=1, passive
                workers, each region's 4 ms of sleep shared by its team: a team
                of two halves it: CHANGE to T2 (time -30 % or better), by its
                step_ms
  verdict_start the same, slots sized once at start (at one thread, before it
                was steered): its regions keep that team, so T2's blocks are
                dropped as not in effect, and no change is claimed
Standard library only (and the package's lib/probe.py for the probe's paths).
"""
import argparse
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_inrun import check, env_clean  # noqa: E402

CEILING = 4
TEAMS = (1, 2, 4)
SWITCH_S = 0.25
SECONDS = 4.0
# verdict_start's tune budget (blocks): the race's first three rounds of plain and T2, and a last look.
START_BUDGET = 8


class Block:
    """The control block by its described layout (describe.json's "inrun")."""

    def __init__(self, path, layout, settings=tuple((t, -1, -1) for t in TEAMS), ceiling=CEILING):
        """settings: (team, blocktime_ms, cuda_flags) each, -1 for a knob left alone."""
        self.l, self.f = layout, layout["fields"]
        with open(path, "wb") as f:
            f.write(b"\0" * layout["size"])
        self.fd = os.open(path, os.O_RDWR)
        import mmap
        self.mm = mmap.mmap(self.fd, layout["size"])
        for name in ("magic", "version"):
            self.put(self.f[name], layout[name])
        self.put(self.f["request"], -1)
        self.put(self.f["ceiling"], ceiling)
        for i, setting in enumerate(settings):
            base = self.f["settings"] + i * layout["setting_size"]
            for field, value in zip(("team", "blocktime_ms", "cuda_flags"), setting):
                self.put(base + layout["setting_fields"][field], value)
        self.put(self.f["n_settings"], len(settings))

    def put(self, offset, value):
        struct.pack_into("<q", self.mm, offset, int(value))

    def get(self, name):
        return struct.unpack_from("<q", self.mm, self.f[name])[0]

    def proc(self, i, name):
        return struct.unpack_from("<q", self.mm, self.f["procs"] + i * self.l["proc_size"]
                                  + self.l["proc_fields"][name])[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=("gcc_start", "gcc_each", "gcc_named", "llvm_each", "clang_named",
                                     "verdict_start", "verdict_each", "forkers"))
    ap.add_argument("--build-dir", required=True)
    ap.add_argument("--repo", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--libomp", default="")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.repo, "python"))
    from threadburn.lib import probe

    llvm = a.case in ("llvm_each", "clang_named")
    if llvm and not (a.libomp and os.path.exists(a.libomp)):
        print("SKIP: LLVM's runtime not found")
        sys.exit(77)
    program = os.path.join(a.build_dir, "tests", "cpp",
                           "promise_child_clang" if a.case == "clang_named" else "promise_child_gcc")
    if not os.path.exists(program):
        print(f"SKIP: {program} not built (clang missing?)")
        sys.exit(77)
    args = [f"--seconds={SECONDS}", "--work_us=2000",
            "--sizing=start" if a.case == "gcc_start" else "--sizing=each"]
    if a.case.endswith("named"):
        args += ["--named=3", "--team_named=3"]
    if a.case.startswith("verdict_"):
        return verdict(a, program, a.case.split("_")[1])
    if a.case == "forkers":
        return forkers(a, program)
    layout = probe.describe(a.build_dir)["inrun"]
    with tempfile.TemporaryDirectory() as tmp:
        block = Block(os.path.join(tmp, "control"), layout)
        # A sanitized build's runtime (tests/sanitize: THREADBURN_TEST_PRELOAD) first, then the probe.
        first = [os.environ["THREADBURN_TEST_PRELOAD"]] if os.environ.get("THREADBURN_TEST_PRELOAD") else []
        env = dict(env_clean(), LD_PRELOAD=" ".join(first + [probe.library(a.build_dir)] + ([a.libomp] if llvm else [])),
                   THREADBURN_PROBE_DIR=os.path.join(tmp, "probe"), THREADBURN_INRUN=os.path.join(tmp, "control"))
        os.makedirs(os.path.join(tmp, "probe"), exist_ok=True)
        print("$ THREADBURN_INRUN=... LD_PRELOAD=" + env.get("LD_PRELOAD", "") + " " + " ".join([program, *args]))
        p = subprocess.Popen([program, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        while not block.get("owner_pid") and p.poll() is None:
            time.sleep(0.005)
        applied, asked = set(), 0
        order = [-1, 0, 1, 2]
        while p.poll() is None:
            want = order[asked % len(order)]
            block.put(block.f["request"], want)
            t = time.monotonic()
            while time.monotonic() - t < SWITCH_S and p.poll() is None:
                if block.proc(0, "applied") == want:
                    applied.add(want)
                time.sleep(0.002)
            asked += 1
        out = p.communicate()[0]
        print(out.strip().splitlines()[-1] if out.strip() else "(no output)")
        figures = dict(kv.split("=") for kv in out.strip().splitlines()[-1].split()[1:]) if "promise:" in out else {}
        print(f"applied {sorted(applied)}, asks {block.get('asks')}, held back {block.get('held_back')}, "
              f"own team {block.get('own_team')}, steered processes {block.get('n_procs')}")
        check(p.returncode == 0 and figures.get("violations") == "0",
              f"the program's slots were overrun or a named team changed (exit {p.returncode})")
        if a.case == "gcc_start":  # asked once, before it was steered: that team in every block
            size = int(figures.get("first_size", 0))
            check(int(figures.get("max_team", 0)) == size, f"largest team {figures.get('max_team')}: expected the "
                  f"{size} it was told at start")
            same = {-1} | {i for i, t in enumerate(TEAMS) if t == size}
            check(applied == same, f"settings applied {sorted(applied)}: expected {sorted(same)} (those of its team)")
            check(block.get("held_back") > 0, "no region of another team's block counted as held back")
        else:  # asked before every region, while steered
            check(int(figures.get("max_team", 0)) == CEILING, f"largest team {figures.get('max_team')}: the "
                  f"block's team {CEILING} never reached it")
            check(applied >= {-1, 0, 1, 2}, f"settings applied {sorted(applied)} (expected own, T1, T2, T4)")
            check(block.get("asks") > 0, "the probe never answered the program's omp_get_max_threads()")
            check(block.get("held_back") == 0, f"{block.get('held_back')} regions held back: each asked first")
    print("PASS")


def forkers(a, program):
    """Three threads forking regions the runtime sizes, at once, under the program's own
    setting: the probe's count of them (free_regions, shared by every forking thread of every
    steered process) is the program's own count, to the region (a load-then-store lost some)."""
    from threadburn.lib import probe
    layout = probe.describe(a.build_dir)["inrun"]
    with tempfile.TemporaryDirectory() as tmp:
        block = Block(os.path.join(tmp, "control"), layout)
        env = probe.environment(env_clean(OMP_NUM_THREADS="1"), probe.library(a.build_dir),
                                os.path.join(tmp, "probe"), "gomp")
        env["THREADBURN_INRUN"] = os.path.join(tmp, "control")
        os.makedirs(os.path.join(tmp, "probe"), exist_ok=True)
        out = subprocess.run([program, "--seconds=3", "--work_us=0", "--sizing=start", "--forkers=3"], env=env,
                             capture_output=True, text=True).stdout
        line = out.strip().splitlines()[-1]
        figures = dict(kv.split("=") for kv in line.split()[1:])
        counted = block.get("free_regions")
    print(f"{line}; the probe counted {counted}")
    check(int(figures["free"]) > 10000, f"only {figures['free']} regions: too few to show a lost count")
    check(counted == int(figures["free"]), f"the probe counted {counted} of the program's {figures['free']} regions")
    print("PASS")


def verdict(a, program, sizing):
    """tune --in-run on the promise program (module docstring, verdict_*)."""
    from check_inrun import in_run
    env = env_clean(OMP_NUM_THREADS="1", OMP_WAIT_POLICY="passive")
    with tempfile.TemporaryDirectory() as tmp:
        # start: every T2 block is dropped (not in effect), so no budget buys a comparison; the
        # default's 40 blocks ran 3 of T2 and 37 of plain alone (41.6 s). START_BUDGET keeps the
        # race's first rounds (3 blocks of T2, each the chance for T2 to take effect and the
        # program to catch it) and ends there.
        budget = ("--budget", str(START_BUDGET)) if sizing == "start" else ()
        text, entry, out = in_run(a, tmp, [program, f"--sizing={sizing}", "--seconds=90", "--work_us=4000"], env,
                                  "--metric", r"step_ms=([0-9.]+)", "--metric-better", "lower", *budget)
        with open(os.path.splitext(out)[0] + ".program.log") as f:
            log = f.read()
    check("violations=" not in log, "the program stopped at a violation: " + log.strip().splitlines()[-1])
    if sizing == "each":
        check((entry["verdict"], entry["setting"]) == ("change", "T2"),
              f"verdict {entry['verdict']} {entry['setting']} (expected change to T2)")
        check(entry["time_ratio"]["high"] <= 0.7, f"T2's time {entry['time_ratio']}: expected -30 % or better")
    else:
        # Sized at one thread before it was steered: its regions keep that team, T2 never takes
        # effect, and the tune must say so rather than claim anything.
        check(entry["verdict"] != "change", f"verdict {entry['verdict']} {entry['setting']}: its team cannot change")
        check("T2 not in effect" in text, "the dropped T2 blocks were not named")
    print("PASS")


if __name__ == "__main__":
    main()
