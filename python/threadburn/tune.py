"""threadburn tune: which thread settings for YOUR program, and what they cost.

    threadburn tune -- python3 train.py --steps 200
    threadburn tune --metric 'samples/s: ([0-9.]+)' --metric-better higher -- python3 train.py

Runs the command under a set of environment points, each run a fresh process
under the preload probe, every point --repetitions times (default 5) in a
random interleaved order, and measures each run: wall time, total CPU, the
OpenMP workers' CPU between regions, threads; and your own figure when
--metric gives a regular expression whose first group is a number in the
command's output (the last match counts). The default points:
  plain         your environment as it is
  launcher      what PyTorch's CPU launcher (torch.backends.xeon.run_cpu)
                sets: LLVM's OpenMP runtime, KMP_BLOCKTIME=1, compact
                KMP_AFFINITY, OMP_NUM_THREADS = physical cores
  threads=N     OMP_NUM_THREADS = 1 .. the CPUs this process may use
  passive       OMP_WAIT_POLICY=passive: workers sleep at once
  spincount     GOMP_SPINCOUNT=10000 (libgomp's default is 300000)
  llvm-bt0/1    LLVM's runtime with KMP_BLOCKTIME=0 / 1
--points FILE (TOML: [[point]] name, runtime, env = {VAR = value}) replaces
them. Then, per point, the median with a confidence interval of the time
(your figure, or the wall time) and the CPU, the change against the plain
environment and the launcher preset with Mann-Whitney p-values, and ONE
recommendation by the rule of recommend.py (--objective time, cpu or
balanced: the least CPU among the fastest within the noise), or, when the
best points cannot be told apart, that, and how many runs would. Rows go to a
results CSV (results/README.md), resumable with --resume like a sweep.
"""
import argparse
import os
import random
import re
import shlex
import shutil
import statistics
import time

from . import fmt, paths, probe, recommend, schema, sweep
from .errors import ThreadburnError
from .run import add_run_options, command_of, parse_env, probe_extra, default_out

LAUNCHER_AFFINITY = "granularity=fine,compact,1,0"


def add_parser(sub):
    p = sub.add_parser("tune", help="your program under many thread settings: statistics and one recommendation",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repetitions", type=sweep._positive, default=5, help="runs per point (default 5)")
    p.add_argument("--objective", choices=recommend.OBJECTIVES, default="balanced",
                   help="time, cpu, or balanced: the least CPU among the fastest (default)")
    p.add_argument("--metric", help="regex whose first group is your figure in the command's output")
    p.add_argument("--metric-better", choices=("higher", "lower"), default="higher",
                   help="which way your figure is better (default higher, e.g. samples/s)")
    p.add_argument("--points", help="TOML file of [[point]] tables (name, runtime, env) instead of the defaults")
    p.add_argument("--out", help="results CSV (default: runs/tune-<command>-<time>.csv)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true", help="continue --out, skipping the runs it holds")
    mode.add_argument("--force", action="store_true", help="replace an existing --out")
    p.add_argument("--seed", type=int, help="seed of the run order (default: random, printed)")
    p.add_argument("--timeout", type=sweep._positive, default=3600, help="per-run timeout in s (default 3600)")
    p.add_argument("--dry-run", action="store_true", help="list the points and the runs, run nothing")
    add_run_options(p)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")
    p.set_defaults(run=main)
    return p


class TunePoint:
    def __init__(self, name, runtime, env):
        self.name, self.runtime, self.env = name, runtime, dict(env)

    def env_line(self, libomp):
        parts = [f"{k}={shlex.quote(v)}" for k, v in self.env.items()]
        if self.runtime == "llvm":
            parts.append(f"LD_PRELOAD={libomp}")
        return " ".join(parts) or "(no change)"


def physical_cores():
    from .doctor import physical_cores as cores
    return cores() or os.cpu_count() or 1


def default_points(user_env):
    cpus = len(os.sched_getaffinity(0))
    points = [TunePoint("plain", "gomp", {}),
              TunePoint("launcher", "llvm", {"OMP_NUM_THREADS": str(physical_cores()), "KMP_BLOCKTIME": "1",
                                             "KMP_AFFINITY": LAUNCHER_AFFINITY})]
    points += [TunePoint(f"threads={n}", "gomp", {"OMP_NUM_THREADS": str(n)}) for n in range(1, cpus + 1)]
    points += [TunePoint("passive", "gomp", {"OMP_WAIT_POLICY": "passive"}),
               TunePoint("spincount", "gomp", {"GOMP_SPINCOUNT": "10000"}),
               TunePoint("llvm-bt0", "llvm", {"KMP_BLOCKTIME": "0"}),
               TunePoint("llvm-bt1", "llvm", {"KMP_BLOCKTIME": "1"})]
    for p in points:  # --env applies to every point; a point's own setting wins
        p.env = dict(user_env, **p.env)
    return points


def load_points(path, user_env):
    import tomllib
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as e:
        raise ThreadburnError(f"{path}: cannot read: {e.strerror}") from None
    except tomllib.TOMLDecodeError as e:
        raise ThreadburnError(f"{path}: not valid TOML: {e}") from None
    raw = data.get("point")
    if not isinstance(raw, list) or not raw:
        raise ThreadburnError(f"{path}: expected [[point]] tables (name, runtime, env)")
    points, names = [], set()
    for i, entry in enumerate(raw):
        where = f"{path}: point[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ThreadburnError(f"{where}.name: expected a non-empty string")
        if entry["name"] in names:
            raise ThreadburnError(f"{where}.name: {entry['name']!r} twice")
        names.add(entry["name"])
        runtime = entry.get("runtime", "gomp")
        if runtime not in schema.RUNTIMES:
            raise ThreadburnError(f"{where}.runtime: expected one of {', '.join(schema.RUNTIMES)}, got {runtime!r}")
        env = entry.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, (str, int)) for v in env.values()):
            raise ThreadburnError(f"{where}.env: expected a table of VAR = value")
        unknown = set(entry) - {"name", "runtime", "env"}
        if unknown:
            raise ThreadburnError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; expected name, runtime, env")
        points.append(TunePoint(entry["name"], runtime, dict(user_env, **{k: str(v) for k, v in env.items()})))
    return points


def parse_metric(pattern, text):
    rx = re.compile(pattern)
    found = rx.findall(text)
    if not found:
        return None
    last = found[-1]
    try:
        return float(last[0] if isinstance(last, tuple) else last)
    except ValueError:
        return None


class Tuner:
    def __init__(self, args, cmd, points):
        self.args, self.cmd, self.points = args, cmd, points
        self.lib = probe.library(args.build_dir)
        desc = probe.describe(args.build_dir)
        knobs = []
        for p in points:
            knobs += [k for k in p.env if k not in knobs]
        self.columns = probe.columns(desc, knobs or ["OMP_NUM_THREADS"])
        self.work = None

    def row_base(self, point, rep, order_index, seed, env):
        base = {"schema_version": schema.SCHEMA_VERSION, "run_key": f"{point.name}-r{rep}", "grid": "tune",
                "study": point.name, "preset": point.name, "benchmark": os.path.basename(self.cmd[0]),
                "bench": "command", "runtime": point.runtime, "processes": 1, "command": " ".join(self.cmd),
                "repetition": rep, "proc_index": 0, "seed": seed, "order_index": order_index, "run_rows": 1,
                "point_key": point.name}
        # What the process got: the point's value, or the user's own for a knob the point leaves alone.
        base.update({k: env.get(k, schema.UNSET) for k in self.columns.env_knobs})
        base["repro"] = (point.env_line(self.args.libomp).replace("(no change)", "") + " " +
                         " ".join(shlex.quote(c) for c in self.cmd)).strip()
        return base

    def run_once(self, point, rep, order_index, seed):
        out = os.path.join(self.work, f"{point.name}-r{rep}")
        shutil.rmtree(out, ignore_errors=True)
        env = probe.environment(os.environ, self.lib, out, point.runtime, point.env, self.args.libomp,
                                probe_extra(self.args))
        row = self.row_base(point, rep, order_index, seed, env)
        row["started_at"] = sweep.utc_now()
        t0 = time.monotonic()
        code, stdout, last = probe.run_command(self.cmd, env, out, self.args.timeout)
        row.update(finished_at=sweep.utc_now(), wall_s=round(time.monotonic() - t0, 3), exit_code=code)
        if code != 0:
            row.update(status="failed", reason=(f"{sweep.describe_exit(code)}: {last}" if code is not None else last))
            return row
        try:
            report = probe.main_report(out, self.cmd, require_regions=False)
        except ThreadburnError as e:
            row.update(status="failed", reason=str(e))
            return row
        from .run import row_for
        row = row_for(report, self.columns, row)
        row.update(status="ok", reason="" if report.regions else "note: no OpenMP region (the setting runs one thread)")
        if self.args.metric:
            value = parse_metric(self.args.metric, stdout)
            if value is None:
                raise ThreadburnError(f"--metric {self.args.metric!r}: no match (with a number in its first group) in "
                                      f"the output of {point.name} run {rep}; nothing after this run was measured")
            row["metric"] = value
        shutil.rmtree(out, ignore_errors=True)  # the summary is in the row; keep the disk small
        return row


def point_stats(rows, points, args):
    """recommend.Point per tune point from its ok rows; points with a failed
    run are left out (no recommendation from incomplete points)."""
    by = {}
    for r in rows:
        by.setdefault(r["study"], []).append(r)
    out, incomplete = [], []
    for p in points:
        rs = by.get(p.name, [])
        if any(r["status"] != "ok" for r in rs) or not rs:
            incomplete.append(p.name)
            continue
        key = "metric" if args.metric else "wall_ms"
        time_values = [schema.to_float(r[key]) for r in rs]
        cpu_values = [schema.to_float(r["cpu_ms"]) for r in rs]
        out.append(recommend.Point(p.name, time_values, cpu_values, p.env_line(args.libomp)))
    return out, incomplete


def report_text(stats_points, incomplete, rec, args):
    time_name = "your figure" if args.metric else "wall time (ms)"
    header = ["point", "runs", f"{time_name} median", "95% CI", "CPU ms median", "95% CI", "between regions ms"]
    body = []
    for p in sorted(stats_points, key=lambda p: p.med_time, reverse=bool(args.metric and args.metric_better == "higher")):
        lo, hi, cov = recommend.median_ci(p.time)
        clo, chi, _ = recommend.median_ci(p.cpu)
        body.append([p.name, str(len(p.time)), fmt.number(p.med_time, 4),
                     f"{fmt.number(lo, 4)}..{fmt.number(hi, 4)}" + ("" if cov >= 0.95 else f" ({cov:.0%})"),
                     fmt.number(p.med_cpu, 4), f"{fmt.number(clo, 4)}..{fmt.number(chi, 4)}",
                     fmt.number(getattr(p, "between", None), 4) if getattr(p, "between", None) is not None else ""])
    lines = fmt.table(header, body, right_from=1)
    if incomplete:
        lines.append(f"left out (a run failed or none finished): {', '.join(incomplete)}")
    lines.append("")
    lines.append(f"objective {rec.objective}: {rec.why}.")
    if rec.winner:
        lines.append(f"recommendation: {rec.winner.name}: {rec.winner.env_line or '(no change)'}")
    else:
        lines.append(f"no recommendation: {rec.best.name} is best by the median, but these runs cannot tell it from: "
                     + ", ".join(f"{p.name} (~{n or '?'} runs each would)" for p, n in
                                 sorted(rec.tied, key=lambda t: t[1] or 10 ** 9)))
        lines.append(f"  rerun with more --repetitions (--resume keeps these runs), or accept {rec.best.name}: "
                     f"{rec.best.env_line or '(no change)'}")
    for v in rec.versus:
        lines.append(f"  vs {v.baseline}: time {fmt.pct(v.time_change)} (p {fmt.number(v.time_p)}), "
                     f"CPU {fmt.pct(v.cpu_change)} (p {fmt.number(v.cpu_p)})")
    return lines


def main(args):
    cmd = command_of(args)
    user_env = parse_env(args.env)
    points = load_points(args.points, user_env) if args.points else default_points(user_env)
    if args.metric is not None:
        try:
            re.compile(args.metric)
        except re.error as e:
            raise ThreadburnError(f"--metric {args.metric!r}: not a regular expression: {e}") from None
    if any(p.runtime == "llvm" for p in points) and not os.path.exists(args.libomp):
        raise ThreadburnError(f"--libomp {args.libomp}: not found (Debian: apt install libomp-dev)")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
    runs = [(p, r) for p in points for r in range(args.repetitions)]
    if args.dry_run:
        print(f"tune: {len(points)} points x {args.repetitions} = {len(runs)} runs of: {' '.join(cmd)}")
        for p in points:
            print(f"  {p.name:<12} {p.env_line(args.libomp)}")
        return 0
    tuner = Tuner(args, cmd, points)
    out = args.out or default_out("tune", cmd) + ".csv"
    results_file = sweep.ResultsFile(out, tuner.columns)
    done = set()
    if args.resume:
        if not os.path.exists(out):
            raise ThreadburnError(f"{out}: --resume: no such file")
        done, file_seed = results_file.repair_for_resume()
        seed = args.seed if args.seed is not None else (file_seed or seed)
    elif os.path.exists(out) and not args.force:
        raise ThreadburnError(f"{out}: exists; pass --resume to continue it or --force to replace it")
    else:
        results_file.create()
    random.Random(seed).shuffle(runs)
    todo = [(i, p, r) for i, (p, r) in enumerate(runs) if f"{p.name}-r{r}" not in done]
    tuner.work = os.path.join(os.path.dirname(os.path.abspath(out)), "." + os.path.basename(out) + ".work")
    print(f"tune: {len(points)} points x {args.repetitions} runs of: {' '.join(cmd)}; {len(runs) - len(todo)} already in "
          f"{out}; seed {seed}", flush=True)
    t0 = time.monotonic()
    try:
        for n, (order_index, point, rep) in enumerate(todo, 1):
            row = tuner.run_once(point, rep, order_index, seed)
            results_file.append([row])
            eta = (time.monotonic() - t0) / n * (len(todo) - n)
            shown = (f"metric {fmt.number(row.get('metric'))}" if args.metric and row.get("metric") is not None
                     else f"wall {fmt.number(schema.to_float(row.get('wall_ms')) or 0)} ms")
            print(f"[{len(runs) - len(todo) + n}/{len(runs)}] {point.name} rep {rep}: {row['status']} "
                  f"({shown}){' ' + row['reason'][:100] if row.get('reason') else ''} | ETA {fmt.duration(eta)}",
                  flush=True)
    except KeyboardInterrupt:
        print(f"\ntune: interrupted; {out} holds every finished run; continue with --resume --out {out}")
        return 130
    finally:
        shutil.rmtree(tuner.work, ignore_errors=True)
    from . import results
    rows = results.read_rows(out)
    stats_points, incomplete = point_stats(rows, points, args)
    for p in stats_points:
        p.between = statistics.median(schema.to_float(r["omp_between_regions_ms"]) for r in rows
                                      if r["study"] == p.name and r["status"] == "ok")
    rec = recommend.recommend(stats_points, args.objective, baselines=("plain", "launcher"),
                              time_higher_is_better=bool(args.metric) and args.metric_better == "higher")
    print(f"tune: results in {out}")
    print("\n".join(report_text(stats_points, incomplete, rec, args)))
    return 0
