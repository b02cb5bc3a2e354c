#!/usr/bin/python3
"""Known answer of the slot's throttling, live, as root:

    check_slot.py --repo DIR --child regions_child

A cgroup of one CPU's quota (100 ms periods) is made under this process's
own (python/threadburn/lib/cgroup.py: v1 or v2) and removed after, on a
failure or an interrupt too. In it, `threadburn run` runs regions_child at
two threads with libgomp's default spin, its regions back to back with a
short gap: a team that wants two CPUs in a slot of one. By construction:

  - the slot is read: cpu_quota 1, cpu_period_us 100000, effective_cpus 1;
  - the quota is enforced: the steady phase's CPU at most one CPU's worth
    (plus one period's quota and 10 % for the kernel's slack and the reads'
    edges), while a team of two in regions wants two;
  - the cgroup ran out of its quota in at least advice.THROTTLED_SHARE of
    its periods, where the machine gave the team both CPUs often enough (a
    team of two, each busy in every region, runs out in any period where it
    had both CPUs half the period). Where it did not (other processes held
    the CPUs: seen at a load of 5-7 on 2 CPUs, the slot got 0.46-0.58 CPUs),
    the run says no throttling and gives no advice on it, and the team runs
    again in a slot of half what it got: by construction it runs out of that
    one, and every check below holds there;
  - the probe's figures agree with the cgroup's own cpu.stat read here after
    the run (the probe's are a part of the cgroup's: its periods and
    throttled periods at most the cgroup's);
  - `run` says it: the slot line, the quota's line and the advice
    "throttled", naming the team larger than the slot (OMP_NUM_THREADS=1) or
    the spinning worker;
  - nothing is left: the cgroup is gone, the parent's processes are as they were.

With --case tune: `threadburn tune --cpus 1` (the whole tune in a slot of one
CPU's quota that threadburn makes and removes) of regions_child whose every
team member spins each region's work (--body=each), plain (a team of 2,
libgomp's default spin) against a team of 1 and a passive wait. On two free
CPUs the team of 2 costs no time (both spin at once); in the slot it needs
two CPUs' time a region from one CPU's quota, so each region takes about
twice as long as a team of 1's: T1 is faster by construction. (With the
work split over the team instead, --body=split, the answer rested on the
spin alone: T1 -6.4 % of time on a quiet machine, at the 5 % margin, and
two fresh clones went UNDECIDED.) The tune must end CHANGE to a setting other
than plain, its fresh runs' time interval below 1 - the margin, name the
slot it decided in, and leave no cgroup.

With --case sizes: `threadburn tune --cpus 1,2` of quota_child (a step's fixed
CPU work in chunks its OpenMP team shares dynamically: a run's time is the
CPU its process is given), plain (a team of 2) against a team of 1 and a
passive wait. In a slot of one CPU's quota no plan does a step's work faster
than one CPU; in a slot of two, a team of two does it in about half the time
on two free CPUs, and in about two thirds with a core kept busy (the team
gets two of the three runnable threads' shares): by construction the 2-CPU
slot's plan is faster than the 1-CPU slot's by far more than the 5 %
margin. That holds where the machine gives the team nearly two CPUs; where
other processes leave it less (measured first: its CPU over wall time
outside any slot), both quotas would bind nothing, so the sizes are then a
quarter and a half of what it gets (0.63 CPUs at a load of 5: 0.16,0.32),
and the larger is twice the smaller by construction. The tune must end with a plan per size, its step 1 -> 2 CPUs
"faster by more than 5%" (its throughput interval above 1.05), say the
training needs at least 2 CPUs, record each run's slot, draw slots.png, and
leave no cgroup. Then twice more, small, interrupted: SIGTERM in the second
size's tune, SIGINT in the fresh runs side by side: each ends, and no cgroup
of threadburn's and no process of the command is left.

Skipped (77) unless root with a cpu controller a child cgroup can be made in.
"""
import argparse
import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

SKIP = 77


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg)


def one_slot(a, slot, version, advice, expect_throttled=None):
    """threadburn run of the team of two in this slot; the checks; (counters, whether it was
    throttled). expect_throttled None: the throttling's checks only where the run was throttled
    (in THROTTLED_SHARE of its periods or more)."""
    print(f"cgroup {version}: {slot.path}, quota {slot.quota_us} us a {slot.period_us} us period", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "run")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMP_", "GOMP_", "KMP_")) and k != "LD_PRELOAD"}
        cmd = [os.path.join(a.repo, "bin", "threadburn"), "run", "--out", out, "--no-plot", "--exact", "off",
               "--env", "OMP_NUM_THREADS=2", "--"] + slot.wrap(
            [a.child, f"--seconds={a.seconds}", "--regions=20", "--work_us=2000", "--gap_ms=5"])
        print("$ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
        sys.stdout.write(p.stdout + "".join("stderr: " + ln + "\n" for ln in p.stderr.splitlines()))
        check(p.returncode == 0, f"threadburn run exits 0 (got {p.returncode})")
        cg = slot.stat()
        print("the cgroup's cpu.stat after the run: " + ", ".join(f"{k} {v}" for k, v in cg.items()))
        summaries = []
        for f in glob.glob(os.path.join(out, "probe-*.json")):
            with open(f) as fh:
                summaries.append(json.load(fh))
        main = max(summaries, key=lambda s: s["counters"].get("regions") or 0)
    c, ctx = main["counters"], main["context"]
    quota = f"{slot.quota_us / slot.period_us:.3f}".rstrip("0").rstrip(".")
    effective = str(min(os.cpu_count(), -(-slot.quota_us // slot.period_us)))
    check((ctx.get("cpu_quota"), ctx.get("cpu_period_us"), ctx.get("effective_cpus")) == (quota, "100000", effective),
          f"the slot read: quota {ctx.get('cpu_quota')} CPUs, period {ctx.get('cpu_period_us')} us, "
          f"{ctx.get('effective_cpus')} effective CPUs ({quota}, 100000, {effective})")
    check(c.get("max_team") == 2, f"a team of 2 ran (max_team {c.get('max_team')})")
    steady_ms, steady_cpu = c["steady_ms"], c["steady_cpu_ms"]
    bound = 1.1 * steady_ms * slot.cpus + slot.quota_us / 1000
    check(steady_cpu <= bound, f"the quota held the steady phase to {slot.cpus:g} CPUs: {steady_cpu:.0f} ms of CPU "
                               f"in {steady_ms:.0f} ms (at most {bound:.0f})")
    check(c["quota_periods"] <= cg["nr_periods"] and c["throttled_periods"] <= cg["nr_throttled"],
          f"the probe's run within the cgroup's own cpu.stat: periods {c['quota_periods']:.0f} <= "
          f"{cg['nr_periods']}, throttled {c['throttled_periods']:.0f} <= {cg['nr_throttled']}")
    check(c["steady_quota_periods"] <= c["quota_periods"] and c["steady_throttled_ms"] <= c["throttled_ms"],
          "the steady phase's figures within the run's")
    check(f"slot: {effective} effective CPUs" in p.stdout
          and f"CPU quota ({quota} CPUs a 100 ms period): throttled in" in p.stdout,
          "run says the slot and the quota's throttling")
    got = steady_cpu / steady_ms
    periods, throttled = c["steady_quota_periods"], c["steady_throttled_periods"]
    share = throttled / periods if periods else 0
    if expect_throttled is None and share < advice.THROTTLED_SHARE:
        print(f"throttled in {throttled:.0f} of {periods:.0f} periods: the slot got {got:.2f} CPUs of its "
              f"{slot.cpus:g} (other processes held the CPUs)")
        check("advice: throttled:" not in p.stdout, "no throttling advice below its threshold")
        return c, False
    check(c["steady_throttled_ms"] > 0, f"time held back: {c['steady_throttled_ms']:.0f} ms")
    check(periods and share >= advice.THROTTLED_SHARE,
          f"throttled in {throttled:.0f} of {periods:.0f} periods of the steady phase ({share:.0%}, at least "
          f"{advice.THROTTLED_SHARE:.0%}), {c['steady_throttled_ms']:.0f} ms held back; the slot got {got:.2f} CPUs")
    advice_lines = [ln for ln in p.stdout.splitlines() if ln.startswith("  advice: throttled:")]
    check(len(advice_lines) == 1 and (f"OMP_NUM_THREADS={effective}" in advice_lines[0]
                                      or "worker spins" in advice_lines[0]),
          "run's advice names the throttling and its cause (the team of 2 in a smaller slot, or the spin)")
    return c, True


POINTS = """[[point]]
name = "plain"
runtime = "gomp"

[[point]]
name = "T1-gomp"
runtime = "gomp"
env = { OMP_NUM_THREADS = "1" }

[[point]]
name = "T2-passive"
runtime = "gomp"
env = { OMP_WAIT_POLICY = "passive" }
"""


def tune_case(a, parent, before):
    with tempfile.TemporaryDirectory() as tmp:
        points = os.path.join(tmp, "points.toml")
        with open(points, "w") as f:
            f.write(POINTS)
        out = os.path.join(tmp, "tune.csv")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("OMP_", "GOMP_", "KMP_")) and k != "LD_PRELOAD"}
        cmd = [os.path.join(a.repo, "bin", "threadburn"), "tune", "--cpus", "1", "--points", points, "--budget", "80",
               "--out", out, "--", a.child, "--steps=4", "--regions=40", "--body=each", "--work_us=2000",
               "--gap_ms=2"]
        print("$ " + " ".join(cmd), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
        sys.stdout.write(p.stdout + "".join("stderr: " + ln + "\n" for ln in p.stderr.splitlines()))
        if "cannot make a cgroup" in p.stderr:
            print("SKIP: " + p.stderr.strip())
            sys.exit(SKIP)
        check(p.returncode == 0, f"threadburn tune exits 0 (got {p.returncode})")
        with open(os.path.splitext(out)[0] + ".verdict.json") as f:
            w = json.load(f)["workloads"][0]
        check(w["verdict"] == "change" and w["setting"] != "plain",
              f"CHANGE to a setting other than plain: {w['verdict']} {w['setting']}")
        t = w["time_ratio"]
        check(w["gain_from"] == "confirmation" and t["high"] < 1 - 0.05,
              f"measured faster in fresh runs: time x{t['estimate']:.2f} [{t['low']:.2f}, {t['high']:.2f}] "
              "(below 0.95)")
        check("tune: decided in its slot: 1 effective CPUs" in p.stdout and "CPU quota 1 CPUs" in p.stdout,
              "the verdict names the slot")
    check(sorted(os.listdir(parent)) == before, "the slot removed: the parent cgroup is as it was")


def clean_env():
    return {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "KMP_")) and k != "LD_PRELOAD"}


def children_of(child):
    """The pids of processes running `child` (the command under test)."""
    out = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if f.read().split(b"\0")[0].decode(errors="replace") == child:
                    out.append(int(pid))
        except OSError:
            pass
    return out


def interrupted(a, parent, before, tmp, sig, when):
    """A small tune --cpus 1,2 stopped by `sig` once its output has a line with `when`: it
    ends, and leaves no cgroup and no process of the command."""
    out = os.path.join(tmp, f"stopped-{sig}.csv")
    cmd = [os.path.join(a.repo, "bin", "threadburn"), "tune", "--cpus", "1,2", "--points", a.points_stopped,
           "--repetitions", "3", "--confirm", "3", "--out", out, "--", a.child] + CHILD_ARGS
    print("$ " + " ".join(cmd) + f"   (stopped by signal {sig} at {when!r})", flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=clean_env())
    seen = []
    for line in p.stdout:
        seen.append(line)
        if when in line:
            time.sleep(0.5)  # a run under way
            p.send_signal(sig)
            break
    rest, _ = p.communicate(timeout=120)
    sys.stdout.write("".join(seen[-3:]) + rest[-2000:])
    check(any(when in ln for ln in seen), f"the tune reached {when!r} before the signal")
    check(p.returncode in (130, 143, -sig), f"the tune ended on the signal (exit {p.returncode})")
    left = [d for d in os.listdir(parent) if d.startswith("threadburn-slot-")]
    check(not left and sorted(os.listdir(parent)) == before, f"no cgroup left under {parent} ({left or 'none'})")
    time.sleep(0.2)
    check(not children_of(a.child), f"no process of the command left ({children_of(a.child) or 'none'})")


CHILD_ARGS = ["--steps", "4", "--chunks", "25", "--chunk-us", "2000"]  # 200 ms of CPU a run


def cpus_given(a, runs=3):
    """The CPUs the machine gives quota_child's team of two outside any slot now: the median
    of its CPU / wall time over a few runs."""
    got = []
    for _ in range(runs):
        r0, t0 = os.times(), time.monotonic()
        subprocess.run([a.child] + CHILD_ARGS, env=dict(clean_env(), OMP_NUM_THREADS="2"), check=True,
                       capture_output=True)
        r1, wall = os.times(), time.monotonic() - t0
        got.append((r1.children_user + r1.children_system - r0.children_user - r0.children_system) / wall)
    return sorted(got)[len(got) // 2]


def sizes_for(got):
    """--cpus 1,2 where the machine gives the team nearly two CPUs (the 2-CPU slot then gets
    about twice the 1-CPU slot's); else slots of a quarter and a half of what it gives, so
    that both quotas bind and the larger is twice the smaller by construction (seen: 0.57 CPUs
    given at a load of 3 on 2 CPUs, where the slots of 1 and 2 CPUs both got all of it)."""
    if got >= 1.8:
        return "1,2", 1.0, 2.0
    lo = max(0.02, round(got / 4, 2))
    return f"{lo:g},{2 * lo:g}", lo, 2 * lo


def sizes_case(a, parent, before):
    got = cpus_given(a)
    text, lo, hi = sizes_for(got)
    print(f"the machine gives the team {got:.2f} CPUs outside any slot now: --cpus {text}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        a.points = os.path.join(tmp, "points.toml")
        with open(a.points, "w") as f:
            f.write(POINTS)
        # The interrupted tunes: two of the settings (what they check is the stop and what it
        # leaves, not a plan), so that each size's tune before the signal runs 6 runs, not 9.
        a.points_stopped = os.path.join(tmp, "points-stopped.toml")
        with open(a.points_stopped, "w") as f:
            f.write(POINTS[:POINTS.index("[[point]]\nname = \"T2-passive\"")])
        out = os.path.join(tmp, "sizes.csv")
        cmd = [os.path.join(a.repo, "bin", "threadburn"), "tune", "--cpus", text, "--points", a.points,
               "--budget", "30", "--out", out, "--", a.child] + CHILD_ARGS
        print("$ " + " ".join(cmd), flush=True)
        t0 = time.monotonic()
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=clean_env())
        sys.stdout.write(p.stdout + "".join("stderr: " + ln + "\n" for ln in p.stderr.splitlines()))
        if "cannot make a cgroup" in p.stderr:
            print("SKIP: " + p.stderr.strip())
            sys.exit(SKIP)
        check(p.returncode == 0, f"threadburn tune --cpus {text} exits 0 (got {p.returncode}, "
                                 f"{time.monotonic() - t0:.0f} s)")
        with open(os.path.splitext(out)[0] + ".slots.json") as f:
            z = json.load(f)
        check([s["cpus"] for s in z["sizes"]] == [lo, hi] and all(s["plan"] for s in z["sizes"]),
              "a plan per size: " + ", ".join(f"{s['cpus']:g} CPUs {s['plan']} ({s['throughput']:.3g} runs/s, "
                                              f"{s['cpus_busy']:.2f} CPUs busy)" for s in z["sizes"]))
        step = z["steps"][0]
        r = step["throughput_ratio"]
        check(step["word"] == "adds" and r["low"] > 1 + z["margin"],
              f"{hi:g} CPUs' plan measured faster than {lo:g} CPUs': throughput x{r['estimate']:.2f} [{r['low']:.2f}, "
              f"{r['high']:.2f}] ({r['pairs']} pairs, one-sided {z['alpha_per_step']:.3g}), above {1 + z['margin']:.2f}")
        said = f"{hi:g} CPU{'' if hi == 1 else 's'}"
        check(z["needs_cpus"] == hi and f"the training needs at least {said} (the largest slot tried)" in p.stdout
              and f"{lo:g} -> {said}" in p.stdout, f"the report says the training needs (at least) {said}")
        from threadburn.lib import records
        for s in z["sizes"]:
            _, rows = records.read_table(s["tune"])
            quotas = {r.cpu_quota for r in rows if r.phase == "race" and r.status == "ok"}
            check(quotas == {f"{s['cpus']:g}"}, f"the {s['cpus']:g}-CPU tune's runs read their slot: cpu_quota "
                                                f"{sorted(quotas)}")
        _, rows = records.read_table(out)
        check({r.cpu_quota for r in rows} == {f"{lo:g}", f"{hi:g}"},
              f"the fresh runs side by side record their slots ({lo:g}, {hi:g})")
        plots = os.path.join(tmp, "plots")
        q = subprocess.run([os.path.join(a.repo, "bin", "threadburn"), "plot", out, "--out-dir", plots],
                           capture_output=True, text=True, timeout=120)
        check(q.returncode == 0 and os.path.exists(os.path.join(plots, "slots.png")),
              f"threadburn plot draws slots.png ({q.stdout.strip() or q.stderr.strip()})")
        check(sorted(os.listdir(parent)) == before, "every slot removed: the parent cgroup is as it was")
        interrupted(a, parent, before, tmp, signal.SIGTERM, "size 2 of 2")
        interrupted(a, parent, before, tmp, signal.SIGINT, "each size's plan and plain beside it")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", required=True)
    ap.add_argument("--child", required=True, help="regions_child (--case sizes: quota_child)")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--case", choices=("quota", "tune", "sizes"), default="quota")
    a = ap.parse_args()
    sys.path.insert(0, os.path.join(a.repo, "python"))
    from threadburn.analysis import advice
    from threadburn.lib import cgroup
    from threadburn.lib.errors import ThreadburnError

    if os.geteuid() != 0:
        print("SKIP: not root (a cgroup of its own needs root or a delegated subtree)")
        sys.exit(SKIP)
    version, parent = cgroup.own_cpu_cgroup()
    if version == "none":
        print("SKIP: no cgroup with the cpu controller for this process")
        sys.exit(SKIP)
    # An interrupt or a SIGTERM ends through the with block: the cgroup is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    before = sorted(os.listdir(parent))
    if a.case == "tune":
        tune_case(a, parent, before)
        return
    if a.case == "sizes":
        sizes_case(a, parent, before)
        return
    slot = cgroup.QuotaCgroup(1.0, name=f"threadburn-check-slot-{os.getpid()}")
    try:
        slot.__enter__()
    except ThreadburnError as e:
        print(f"SKIP: {e}")
        sys.exit(SKIP)
    try:
        c, throttled = one_slot(a, slot, version, advice)
        got = c["steady_cpu_ms"] / c["steady_ms"]
        if not throttled:
            # The machine gave the slot too little to run out of its quota often (other processes
            # held the CPUs). Again in a slot of half what the team got: by construction the team,
            # which got that much with the quota hardly binding, runs out of half of it.
            print(f"again in a slot of {max(0.1, round(got / 2, 2)):g} CPUs")
            path = slot.path
            slot.close()
            check(path is None or not os.path.exists(path), "the first cgroup is removed")
            slot = cgroup.QuotaCgroup(max(0.1, round(got / 2, 2)), name=f"threadburn-check-slot-{os.getpid()}-b")
            slot.__enter__()
            one_slot(a, slot, version, advice, expect_throttled=True)
    finally:
        path = slot.path
        slot.close()
    check(path is None or not os.path.exists(path), "the cgroup is removed")
    check(sorted(os.listdir(parent)) == before, "the parent cgroup is as it was")


if __name__ == "__main__":
    main()
