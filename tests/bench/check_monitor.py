#!/usr/bin/python3
"""Live checks of threadburn_monitor against spin_child (stdlib only).

spin_child's "spinner" thread burns a known 200 ms of CPU, so the recording
must show 200 ms +-10 % for it; every file the monitor leaves must be complete
(the timeline header, then rows of 3 columns, each ending in a newline).
Each case runs in one mode (--mode: auto, the exact mode where allowed; or
proc, the /proc bins): the recording's format and the known answers are the
same in both.
Usage: check_monitor.py CASE --mode MODE --monitor BIN --child BIN --fixtures DIR --threadburn BIN
"""
import argparse
import csv
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

COLUMNS = ["t_ms", "series", "cores"]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def read_complete_csv(path):
    """The recording's rows as dicts (t_ms, tid, name, cores, and cpu_ms over
    the interval that the process series' clock gives); fails unless every
    line is whole and the header is the one timeline format's."""
    data = open(path, "rb").read()
    check(data.endswith(b"\n"), f"{path} does not end with a newline (partial row)")
    lines = data.decode().splitlines()
    check(lines[0].startswith("# threadburn timeline 1; origin=monitor_start;") and "t0_unix_ms=" in lines[0],
          f"bad first line {lines[0]!r}")
    check(lines[1].split(",") == COLUMNS, f"bad header {lines[1]!r}")
    rows, start, clock = [], 0.0, 0.0
    for i, r in enumerate(csv.reader(lines[2:]), 3):
        check(len(r) == len(COLUMNS), f"line {i} has {len(r)} columns: {lines[i - 1]!r}")
        t, series, cores = float(r[0]), r[1], float(r[2])
        if series == "process":
            start, clock = (clock, t) if t != clock else (start, clock)
            tid, name = "0", "[process]"
        else:
            check(series.startswith("thread:"), f"line {i}: series {series!r}")
            _, tid, name = series.split(":", 2)
        rows.append({"t_ms": t, "tid": tid, "name": name, "cores": cores, "cpu_ms": cores * (t - start)})
    return rows


def cpu_by_name(rows):
    out = {}
    for r in rows:
        out[r["name"]] = out.get(r["name"], 0.0) + float(r["cpu_ms"])
    return out


def monitor_cmd(a):
    """The monitor program in the case's mode."""
    return [a.monitor, f"--mode={a.mode}"]


def exact(stderr):
    return "threadburn_monitor: exact mode:" in stderr


def check_samples(rows, stderr):
    """The monitor's own account of its sampling must match the file: one
    [process] row per sample, and samples + missed deadlines = span / period
    (it skips a deadline it overslept, it never drops one silently). A slow or
    loaded machine only moves samples into "missed" (/proc mode); the exact
    mode's bins come from the scheduler's records and miss none."""
    m = re.search(r": ([0-9.]+) s, (\d+) samples every (\d+) us \((\d+) missed\)", stderr)
    check(m is not None, "no sampling line in the summary:\n" + stderr)
    span_s, samples, period_us, missed = float(m[1]), int(m[2]), int(m[3]), int(m[4])
    procs = [r for r in rows if r["tid"] == "0"]
    check(len(procs) == samples, f"{len(procs)} [process] rows for {samples} samples")
    slots = span_s * 1e6 / period_us
    check(abs(samples + missed - slots) <= 2, f"{samples} samples + {missed} missed for {slots:.1f} periods")
    check(not exact(stderr) or missed == 0, f"{missed} bins missed in the exact mode")
    return samples


def taken_ms():
    """Time the kernel counted as taken from every CPU's tasks so far
    (interrupts, soft interrupts, and steal: the hypervisor running another
    guest on this one's CPU), in ms, from /proc/stat's first line."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return sum(int(x) for x in fields[6:9]) * 1000.0 / os.sysconf("SC_CLK_TCK")  # irq, softirq, steal


def check_spin(rows, stderr, taken_ms=0.0):
    # spin_child's spinner burns exactly 200 ms of its own CPU time (a CPU-time
    # fact, however loaded the machine); schedstat settles it when it exits.
    # The exact mode's figure is its time on a CPU from the scheduler's
    # events, which also holds what interrupts and the hypervisor took from
    # it while it ran and its own clock leaves out (233.6 ms once, for a 240
    # ms spin): the bound allows what /proc/stat counted as taken meanwhile
    # (taken_ms, machine-wide; 0 on a host that hides its steal).
    cpu = cpu_by_name(rows)
    print(f"CPU by thread name (ms): {cpu}; taken by interrupts and steal meanwhile: {taken_ms:g} ms")
    check(199 <= cpu.get("spinner", 0) <= 205 + taken_ms,
          f"spinner used {cpu.get('spinner')} ms, expected 200 (+ its exit, + {taken_ms:g} ms taken)")
    check(cpu.get("idler", 0) < 5, f"idler used {cpu.get('idler')} ms, expected ~0 (it sleeps)")
    check_samples(rows, stderr)
    # A thread's row without CPU is written only when it was born, renamed or
    # gone: the spinner's last row is its exit.
    spinner = [r for r in rows if r["name"] == "spinner"]
    check(spinner and spinner[-1]["cores"] == 0,
          f"spinner's exit not recorded: its last rows {spinner[-3:]}, the file's last {rows[-4:]}")
    check("spinner" in stderr and "[process]" in stderr, "summary missing:\n" + stderr)


def rows_tid(rows, name):
    return next((r["tid"] for r in rows if r["name"] == name), None)


def run(cmd, **kw):
    print("$ " + " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=15, **kw)
    sys.stdout.write(p.stderr)
    return p


def one_error_line(p, rc, start):
    check(p.returncode == rc, f"exit {p.returncode}, expected {rc}")
    lines = p.stderr.splitlines()
    check(len(lines) == 1, f"expected one line on stderr, got {lines}")
    check(lines[0].startswith(start), f"expected '{start}...', got '{lines[0]}'")


def case_launch(a, tmp):
    out = os.path.join(tmp, "m.csv")
    taken0 = taken_ms()
    p = run([*monitor_cmd(a), "--out=" + out, "--", a.child, "--spin_ms=200", "--sleep_ms=100", "--exit=3"])
    taken = taken_ms() - taken0
    check(p.returncode == 3, f"monitor returned {p.returncode}, expected the child's 3")
    check("ended (exit code 3) while recording" in p.stderr, "no exit note")
    rows = read_complete_csv(out)
    check_spin(rows, p.stderr, taken)
    # The gate: the baseline is read before exec, so the rename is recorded.
    leader = {r["name"] for r in rows if r["tid"] == rows_tid(rows, "spin_child")}
    check(len(leader) >= 2, f"exec rename missing: the leader's names {leader}")


def case_attach(a, tmp):
    out = os.path.join(tmp, "m.csv")
    child = subprocess.Popen([a.child, "--wait_usr1", "--spin_ms=200", "--sleep_ms=100"])
    try:
        cmd = [*monitor_cmd(a), f"--pid={child.pid}", "--out=" + out, "--period_us=500"]
        print("$ " + " ".join(cmd))
        mon = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
        # Start the spin once the monitor has written (so has read a baseline).
        deadline = time.monotonic() + 5
        while (not os.path.exists(out) or os.path.getsize(out) == 0) and time.monotonic() < deadline:
            time.sleep(0.01)
        taken0 = taken_ms()
        child.send_signal(signal.SIGUSR1)
        _, err = mon.communicate(timeout=10)
        taken = taken_ms() - taken0
        sys.stdout.write(err)
    finally:
        # The child stays a zombie until this wait(): the monitor had to notice anyway.
        child.wait()
    check(mon.returncode == 0, f"monitor returned {mon.returncode}")
    check(f"process {child.pid} exited while recording" in err, "no exit note")
    check_spin(read_complete_csv(out), err, taken)


def case_sigint(a, tmp):
    # Attached: SIGINT stops the recording, the target is left alone.
    out = os.path.join(tmp, "a.csv")
    child = subprocess.Popen([a.child, "--spin_ms=0", "--sleep_ms=5000"])
    mon = subprocess.Popen([*monitor_cmd(a), f"--pid={child.pid}", "--out=" + out], stderr=subprocess.PIPE, text=True)
    time.sleep(0.2)
    # It oversleeps 20 deadlines (5 ms): /proc mode, they must show as missed;
    # exact mode, the bins are whole all the same.
    mon.send_signal(signal.SIGSTOP)
    time.sleep(0.1)
    mon.send_signal(signal.SIGCONT)
    time.sleep(0.2)
    mon.send_signal(signal.SIGINT)
    _, err = mon.communicate(timeout=5)
    sys.stdout.write(err)
    check(mon.returncode == 0, f"attached monitor returned {mon.returncode} after SIGINT")
    check("stopped by Interrupt" in err and "[process]" in err, "no summary after SIGINT")
    check(child.poll() is None, "the attached target was touched")
    check(check_samples(read_complete_csv(out), err) >= 1, "no sample before the SIGINT")
    missed = int(re.search(r"\((\d+) missed\)", err)[1])
    if exact(err):
        check(missed == 0, "the exact mode missed bins while stopped")
    else:
        check(missed >= 15, "the stopped monitor's deadlines were not counted as missed")
    # Even SIGKILL of the monitor leaves whole rows: it writes whole lines only.
    out = os.path.join(tmp, "k.csv")
    mon = subprocess.Popen([*monitor_cmd(a), f"--pid={child.pid}", "--out=" + out], stderr=subprocess.DEVNULL)
    time.sleep(0.35)
    mon.kill()
    mon.wait()
    read_complete_csv(out)  # whole lines only, however many
    child.kill()
    child.wait()
    # Launched: a SIGINT sent to the monitor alone is forwarded; CMD's status comes back.
    out = os.path.join(tmp, "l.csv")
    mon = subprocess.Popen([*monitor_cmd(a), "--out=" + out, "--", a.child, "--spin_ms=0", "--sleep_ms=5000"],
                           stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    mon.send_signal(signal.SIGINT)
    _, err = mon.communicate(timeout=5)
    sys.stdout.write(err)
    check(mon.returncode == 128 + signal.SIGINT, f"launched monitor returned {mon.returncode}, expected 130")
    check("killed by signal" in err, "no note of the child's signal")
    read_complete_csv(out)


def case_bad_pid(a, tmp):
    p = run([*monitor_cmd(a), "--pid=99999999", "--out=" + os.path.join(tmp, "m.csv")])
    one_error_line(p, 2, "threadburn_monitor: error: --pid=99999999: no such process")
    check(not os.path.exists(os.path.join(tmp, "m.csv")), "a CSV was left for a bad pid")


def case_bad_flags(a, tmp):
    out = "--out=" + os.path.join(tmp, "m.csv")
    for args in (["--period_us=50", "--pid=1"], ["--pid=abc"], ["--frobnicate=1"], [], ["--pid=1", "--", "true"],
                 ["--threshold=-1", "--pid=1"], ["--duration_s=soon", "--pid=1"]):
        p = run([*monitor_cmd(a), out] + args)
        one_error_line(p, 2, "threadburn_monitor: error: --")
    p = run([a.monitor, "--pid=1"])
    one_error_line(p, 2, "threadburn_monitor: error: --out: required")
    p = run([a.monitor, "--help"])
    check(p.returncode == 0 and "usage: threadburn_monitor" in p.stdout, "--help")


def case_no_overwrite(a, tmp):
    path = os.path.join(tmp, "m.csv")
    with open(path, "w") as f:
        f.write("keep\n")
    p = run([*monitor_cmd(a), "--out=" + path, "--", a.child, "--spin_ms=1", "--sleep_ms=0"])
    one_error_line(p, 2, f"threadburn_monitor: error: --out={path}: file exists (use --force")
    check(open(path).read() == "keep\n", "the existing file was changed")
    p = run([*monitor_cmd(a), "--out=" + path, "--force", "--duration_s=0.05", "--", a.child, "--spin_ms=1",
             "--sleep_ms=200"])
    check(p.returncode == 0, f"--force run returned {p.returncode}")
    check("stopped after --duration_s" in p.stderr, "no duration note")
    read_complete_csv(path)


def case_exec_error(a, tmp):
    path = os.path.join(tmp, "m.csv")
    p = run([*monitor_cmd(a), "--out=" + path, "--", "/nonexistent/threadburn-cmd"])
    one_error_line(p, 127, "threadburn_monitor: error: cannot run '/nonexistent/threadburn-cmd'")
    check(not os.path.exists(path), "a CSV was left for a command that never ran")


def case_plot(a, tmp):
    png = os.path.join(tmp, "m.png")
    build = os.path.dirname(os.path.dirname(os.path.dirname(a.monitor)))
    p = run([a.threadburn, "monitor-plot", os.path.join(a.fixtures, "recording.csv"), "--marks",
             os.path.join(a.fixtures, "ckpt.log"), "--out", png, "--build-dir", build])
    check(p.returncode == 0, f"threadburn monitor-plot returned {p.returncode}")
    check(open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n", "not a PNG")
    p = run([a.threadburn, "monitor-plot", os.path.join(tmp, "missing.csv"), "--out", png])
    one_error_line(p, 2, "threadburn monitor-plot: error:")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case")
    ap.add_argument("--mode", default="auto", choices=("auto", "proc"))
    for name in ("--monitor", "--child", "--fixtures", "--threadburn"):
        ap.add_argument(name, required=True)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        globals()["case_" + a.case](a, tmp)
    print("OK " + a.case)


if __name__ == "__main__":
    main()
