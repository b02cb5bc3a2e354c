"""`threadburn sweep` end to end against fake_program.py: rows, counters,
settings, repro lines, files, dry runs, failures of every kind."""
import collections
import contextlib
import io
import json
import os
import subprocess
import textwrap
import unittest

import helpers
from threadburn.commands import sweep as sweep_command
from threadburn.engine import campaign
from threadburn.lib import schema

TWO_POINTS = """
    repetitions = 2
    [[study]]
    bench = "optimizer_step"
    optimizer = "sgd"
    gap_ms = [0, 300]
    runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = 50}]
"""
OPT_NAME = "optimizer_step/sgd/params:4000000/gap_ms:{}/iterations:10/manual_time"


class SweepTest(helpers.TempDir, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.build = helpers.make_fake_build(self.path("build"))
        self.lib = helpers.fake_libomp(self.tmp)
        self.out = self.path("res.csv")
        self.host_stat = helpers.still_host(os.path.join(self.build, "host-stat"))

    def grid(self, text, name="g"):
        return helpers.write_file(self.path(f"{name}.toml"), textwrap.dedent(text))

    def env(self, **fake):
        return helpers.clean_env(FAKE_CPUS=2, THREADBURN_HOST_STAT=self.host_stat, **fake)

    def args(self, grid, *extra):
        return ["sweep", grid, "--build-dir", self.build, "--libomp", self.lib, "--out", self.out,
                "--seed", "11", "--no-plot"] + list(extra)

    def sweep(self, grid, *extra, env=None, ok=True):
        result = helpers.threadburn(*self.args(grid, *extra), env=env or self.env())
        if ok:
            self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        return result

    def rows(self):
        return helpers.read_rows(self.out)

    def program(self, bench):
        return os.path.join(self.build, "bench", f"{bench}_bench")

    def runs_logged(self, log):
        """The fake's invocations that ran benchmarks (not --describe)."""
        if not os.path.exists(log):
            return []
        with open(log) as f:
            calls = [json.loads(line) for line in f]
        return [c for c in calls if "--describe" not in c["argv"]]


class Running(SweepTest):
    def test_rows_hold_knobs_effective_settings_counters_and_repro(self):
        result = self.sweep(self.grid(TWO_POINTS))
        rows = self.rows()
        self.assertEqual(helpers.read_header(self.out), list(schema.Columns(helpers.recorded_descriptions()).all))
        self.assertEqual(len(rows), 2 * 2 * 2)  # points x repetitions x gaps
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        self.assertEqual({r["reason"] for r in rows}, {""})
        self.assertEqual({r["schema_version"] for r in rows}, {schema.SCHEMA_VERSION})
        llvm = [r for r in rows if r["runtime"] == "llvm" and r["gap_ms"] == "300"]
        self.assertEqual(sorted(r["repetition"] for r in llvm), ["0", "1"])
        r = llvm[0]
        # the fake: (T - 1) * min(KMP_BLOCKTIME, gap) = 1 * 50; step 2 + 4 * 4 / 2
        self.assertEqual((r["residual_cpu_ms"], r["tail_ms"], r["step_ms"], r["gap_slept_ms"]),
                         ("50", "50", "10", "300"))
        self.assertEqual((r["OMP_NUM_THREADS"], r["KMP_BLOCKTIME"], r["GOMP_SPINCOUNT"], r["OMP_WAIT_POLICY"]),
                         ("2", "50", "unset", "unset"))
        self.assertEqual((r["omp_runtime"], r["omp_library"], r["env_LD_PRELOAD"], r["kmp_blocktime_ms"],
                          r["env_OMP_NUM_THREADS"], r["omp_max_threads"]),
                         ("llvm-libomp", self.lib, self.lib, "50", "2", "2"))
        # every flag of the program: the benchmark's axis values, else the value in force
        self.assertEqual((r["optimizer"], r["params"], r["gap_ms"], r["steps"], r["warmup"], r["device"],
                          r["sampler"], r["model"], r["batch"], r["kernel"]),
                         ("sgd", "4000000", "300", "10", "2", "cpu", "on", "", "", ""))
        self.assertEqual((r["benchmark"], r["bench"], r["processes"], r["proc_index"]),
                         (OPT_NAME.format(300), "optimizer_step", "1", "0"))
        self.assertEqual((r["extra_counters"], r["extra_context"], r["overlap"]), ("", "", ""))
        self.assertEqual((r["load_avg"], r["num_cpus"], r["host_name"], r["threads"]),
                         ("0.5 0.25 0.125", "2", "fakehost", "3"))
        self.assertEqual((r["iterations"], r["real_time"], r["cpu_time"], r["time_unit"]), ("10", "10", "20", "ms"))
        self.assertEqual((r["run_rows"], r["seed"], r["exit_code"], r["grid"], r["study"]),
                         ("2", "11", "0", "g", "optimizer_step0"))
        self.assertEqual(r["run_key"], f"{r['point_key']}-r{r['repetition']}")
        self.assertRegex(r["started_at"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        only = f"'--benchmark_filter=^{OPT_NAME.format(300)}(/|$)'"
        self.assertEqual(r["repro"], f"OMP_NUM_THREADS=2 KMP_BLOCKTIME=50 LD_PRELOAD={self.lib} "
                         f"{self.program('optimizer_step')} --optimizer=sgd --gap_ms=0,300 {only}")
        gomp = next(x for x in rows if x["runtime"] == "gomp" and x["gap_ms"] == "300")
        # libgomp's default spin: 3 ms, one worker (T = the 2 CPUs)
        self.assertEqual((gomp["residual_cpu_ms"], gomp["env_LD_PRELOAD"], gomp["omp_runtime"],
                          gomp["OMP_NUM_THREADS"]), ("3", "unset", "libgomp", "unset"))
        self.assertEqual(gomp["repro"], f"{self.program('optimizer_step')} --optimizer=sgd --gap_ms=0,300 {only}")
        # The repro line is a working shell command running that one benchmark.
        done = subprocess.run(["bash", "-c", r["repro"] + " --benchmark_format=json"], capture_output=True,
                              text=True, env=self.env())
        self.assertEqual(done.returncode, 0, done.stderr)
        (entry,) = json.loads(done.stdout)["benchmarks"]
        self.assertEqual((entry["name"], entry["residual_cpu_ms"]), (OPT_NAME.format(300), 50))
        self.assertIn("[4/4]", result.stdout)
        self.assertIn("ETA", result.stdout)
        self.assertIn("seed 11", result.stdout)
        self.assertIn(f"sweep: results in {self.out}", result.stdout)
        self.assertIn("rows: 8 ok, 0 skipped, 0 failed", result.stdout.splitlines())
        self.assertEqual(sorted(os.listdir(self.tmp)), ["build", "g.toml", "libomp.so.5", "res.csv", "res.verdict.json"])

    def test_summary_recommends_a_setting_against_the_default(self):
        # Equal step times (the fake has no noise; its figures with all their digits); CPU per
        # iteration 20 + burn: 20 (blocktime 0) against 23 (libgomp's default 3 ms spin) and 20 +
        # the blocktime's 50 ms or the gap. A 30 ms gap: 3 ms of burn per 40 ms iteration (7.5 %
        # of a core) is worth a change; a 300 ms gap: 3 ms per 310 ms (1 % of a core) is not,
        # below the CPU floor (5 % of a core over the iteration): keep.
        result = self.sweep(self.grid("""
            repetitions = 4
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = [30, 300]
            runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = [0, 50]}]
        """), env=self.env(FAKE_MEASURED=1))
        lines = [" ".join(ln.split()) for ln in result.stdout.splitlines()]
        short = lines.index("optimizer_step/sgd/params:4000000/gap_ms:30")
        self.assertTrue(lines[short + 1].startswith("CHANGE to llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=0: time +0.0% "
                                                    "[+0.0%, +0.0%], CPU -13.0% [-13.0%, -13.0%] against gomp (no env)"),
                        lines[short + 1])
        self.assertIn("compared: time per iteration (step + gap) and CPU", lines[short + 2])
        long = lines.index("optimizer_step/sgd/params:4000000/gap_ms:300")
        self.assertTrue(lines[long + 1].startswith("KEEP gomp (no env)"), lines[long + 1])
        with open(os.path.splitext(self.out)[0] + ".verdict.json") as f:
            (w,) = [w for w in json.load(f)["workloads"] if w["workload"] == lines[short]]
        self.assertEqual((w["verdict"], w["env"]["KMP_BLOCKTIME"], w["runs_per_setting"]["gomp (no env)"]),
                         ("change", "0", 4))
        self.assertIn("rows: 24 ok, 0 skipped, 0 failed", lines)

    def test_exports_hold_the_verdict_file_and_the_printed_line(self):
        md, js = self.path("v.md"), self.path("v.json")
        result = self.sweep(self.grid("""
            repetitions = 3
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = 300
            runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = [0, 50]}]
        """), "--export-markdown", md, "--export-json", js)
        self.assertIn(f"sweep: exported {md}", result.stdout)
        with open(js) as f, open(os.path.splitext(self.out)[0] + ".verdict.json") as g, open(md) as h:
            exported, written, text = json.load(f), json.load(g), h.read()
        (w,) = exported["workloads"]
        self.assertEqual({k: v for k, v in w.items() if k not in ("headline", "settings")}, written["workloads"][0])
        self.assertIn("  " + w["headline"], result.stdout)
        self.assertIn(f"> {w['headline']}", text)
        self.assertEqual(len(w["settings"]), 3)

    def test_decide_races_and_writes_the_verdict(self):
        # repetitions 2: below the race's start; --decide says so and brings every setting to 3 runs
        # before its first look (the fake's values are exact: decided there); the change is then
        # confirmed in fresh runs (phase confirm, rounds of their own) whose ratio is the headline.
        grid = self.grid("""
            repetitions = 2
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = 30
            runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = [0, 50]}]
        """)
        result = self.sweep(grid, "--decide", "--budget", "30", env=self.env(FAKE_MEASURED=1))
        self.assertIn("start below 3 runs; --decide runs them 3 times before its first look", result.stdout)
        self.assertIn("(9 race runs; race decided)", result.stdout)
        race = [r for r in self.rows() if r["phase"] == "race"]
        self.assertEqual(collections.Counter(r["round"] for r in race), {"0": 3, "1": 3, "2": 3})
        confirm = [r for r in self.rows() if r["phase"] == "confirm"]
        self.assertTrue(confirm and all(int(r["round"]) >= 1000 for r in confirm), result.stdout)
        with open(os.path.splitext(self.out)[0] + ".verdict.json") as f:
            data = json.load(f)
        (w,) = data["workloads"]
        self.assertEqual((w["verdict"], w["gain_from"], w["confirmation"]["holds"]), ("change", "confirmation", "yes"))
        self.assertEqual(data["rule"]["design"], "race")
        self.assertTrue(all(r["rule"] == race[0]["rule"] and r["rule"] for r in self.rows()))

    def test_a_race_reruns_only_the_undecided_workloads(self):
        # gap 300 (the second benchmark): every setting's step has +-10 % luck per run (undecided
        # for some looks, within what the budget can settle: a race the budget cannot settle
        # stops, the next test); gap 0: exact values, decided at the first look. The race's rounds after the
        # grid run only the gap-300 benchmark (--benchmark_filter), one ok row a run: Google
        # Benchmark numbers a filtered run's families from 0, so rows match by name there.
        grid = self.grid("""
            repetitions = 3
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = [0, 300]
            runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = [0, 50]}]
        """)
        log = self.path("log.jsonl")
        result = self.sweep(grid, "--decide", "--budget", "60", env=self.env(FAKE_JITTER="0.1", FAKE_JITTER_GAP_MS="300",
                                                                      FAKE_LOG=log, FAKE_MEASURED=1))
        rows = self.rows()
        later = [r for r in rows if int(r["round"]) >= 3 and r["phase"] == "race"]
        self.assertTrue(later, result.stdout)
        filters = [c for c in self.runs_logged(log) if any(a.startswith("--benchmark_filter=") for a in c["argv"])]
        self.assertEqual(len(filters), len({r["run_key"] for r in later}))
        by_run = collections.Counter(r["run_key"] for r in later)
        self.assertTrue(all(n == 1 for n in by_run.values()), by_run)  # one benchmark a run, not both
        self.assertEqual({r["run_rows"] for r in later}, {"1"})
        self.assertEqual({(r["gap_ms"], r["status"]) for r in later}, {("300", "ok")})
        self.assertLessEqual(len({r["run_key"] for r in rows}), 60)

    def test_a_race_the_budget_cannot_settle_gives_its_runs_to_the_others(self):
        # gap 0: +-90 % luck a run on the step, which is the whole iteration: once its settings
        # have 8 runs, its nearest comparison still racing needs over twice the runs a setting
        # that the 60-run budget could still give it (206 against 27 at 11 runs); gap 30: exact
        # values, a change (13 % less CPU) found at the first look. The gap-0 race stops (said
        # once, with the runs it would need), the race ends before its budget, and what it left
        # goes to gap 30: confirmed in fresh runs.
        grid = self.grid("""
            repetitions = 3
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = [0, 30]
            runtimes = [{name = "gomp"}, {name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = [0, 50]}]
        """)
        result = self.sweep(grid, "--decide", "--budget", "60",
                            env=self.env(FAKE_JITTER="0.9", FAKE_JITTER_GAP_MS="0", FAKE_MEASURED=1,
                                         FAKE_JITTER_SEQ=self.path("luck")))
        stop = [ln for ln in result.stdout.splitlines() if "stops racing" in ln]
        self.assertEqual(len(stop), 1, result.stdout)
        self.assertIn("gap_ms:0: stops racing: its nearest comparison needs", stop[0])
        # without the stop the race goes on to its budget: +-90 % luck settles nothing in 60 runs
        self.assertIn("race runs; race decided, 1 workload(s) stopped short of the runs they need)", result.stdout)
        self.assertIn("30", {r["gap_ms"] for r in self.rows() if r["phase"] == "confirm"}, result.stdout)
        with open(os.path.splitext(self.out)[0] + ".verdict.json") as f:
            by_gap = {w["workload"].rsplit(":", 1)[1]: w["verdict"] for w in json.load(f)["workloads"]}
        self.assertEqual(by_gap, {"0": "undecided", "30": "change"})

    def test_budget_needs_decide_and_a_grid_too_small_is_said(self):
        result = self.sweep(self.grid(TWO_POINTS), "--budget", "10", ok=False)
        self.assertEqual((result.returncode, result.stderr.strip()), (2, "threadburn sweep: error: --budget needs --decide"))
        result = self.sweep(self.grid(TWO_POINTS), "--force")
        self.assertIn("sweep: warning: the decision rule needs at least 2 runs a setting", result.stdout)

    def test_plots_are_made_at_the_end(self):
        args = [a for a in self.args(self.grid(TWO_POINTS)) if a != "--no-plot"]
        result = helpers.threadburn(*args, env=self.env())
        self.assertEqual(result.returncode, 0, result.stderr)
        plots = self.path("res.plots")
        self.assertIn(f"sweep: plots in {plots}", result.stdout)
        self.assertIn("pareto.png", os.listdir(plots))

    def test_same_seed_same_order(self):
        self.sweep(self.grid(TWO_POINTS))
        first = [(r["run_key"], r["order_index"]) for r in self.rows()]
        self.sweep(self.grid(TWO_POINTS), "--force")
        self.assertEqual([(r["run_key"], r["order_index"]) for r in self.rows()], first)
        self.assertEqual(sorted({int(i) for _, i in first}), [0, 1, 2, 3])

    def test_dry_run_lists_points_and_benchmarks_and_writes_nothing(self):
        log = self.path("log")
        result = self.sweep(self.grid(TWO_POINTS), "--dry-run", env=self.env(FAKE_LOG=log))
        lines = result.stdout.splitlines()
        self.assertEqual(lines[0], "grid g: 2 points, 4 runs (one process per run, shuffled with seed 11)")
        self.assertRegex(lines[1], r"^[0-9a-f]{12}  x2  optimizer_step gomp \(no env\)$")
        self.assertEqual(lines[2], f"    {self.program('optimizer_step')} --optimizer=sgd --gap_ms=0,300")
        self.assertEqual(lines[3:5], ["      optimizer_step/sgd/params:4000000/gap_ms:0",
                                      "      optimizer_step/sgd/params:4000000/gap_ms:300"])
        self.assertRegex(lines[5], r"^[0-9a-f]{12}  x2  optimizer_step llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=50$")
        self.assertTrue(lines[6].startswith(f"    OMP_NUM_THREADS=2 KMP_BLOCKTIME=50 LD_PRELOAD={self.lib} "))
        self.assertEqual(lines[9], "2 workloads; each compares its settings with its baseline (the default setting):")
        self.assertEqual(lines[10], "  optimizer_step/sgd/params:4000000/gap_ms:0: 2 settings (baseline: gomp, no env)")
        self.assertRegex(lines[11], r"^    gomp \(no env\)  \[baseline\]  <- point [0-9a-f]{12}$")
        self.assertRegex(lines[12], r"^    llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=50  <- point [0-9a-f]{12}$")
        self.assertEqual(len(lines), 16)
        self.assertFalse(os.path.exists(self.out))
        self.assertEqual(self.runs_logged(log), [])
        self.assertEqual(sorted(os.listdir(self.tmp)), ["build", "g.toml", "libomp.so.5", "log"])

    def test_match_picks_points(self):
        self.sweep(self.grid(TWO_POINTS), "--match", "KMP_BLOCKTIME=50")
        self.assertEqual({r["runtime"] for r in self.rows()}, {"llvm"})
        self.assertEqual(len(self.rows()), 4)
        result = self.sweep(self.grid(TWO_POINTS), "--force", "--match", "nothing-like-this", ok=False)
        helpers.assert_one_line_error(self, result, "--match 'nothing-like-this': no point matches")

    def test_repetitions_and_timeout_overrides(self):
        self.sweep(self.grid(TWO_POINTS), "--repetitions", "1", "--timeout", "30")
        self.assertEqual(len(self.rows()), 4)
        result = self.sweep(self.grid(TWO_POINTS), "--force", "--repetitions", "0", ok=False)
        helpers.assert_one_line_error(self, result, "--repetitions: expected an integer >= 1, got '0'")

    def test_inherited_knobs_are_removed_and_shown_in_repro(self):
        self.sweep(self.grid(TWO_POINTS), env=self.env(OMP_NUM_THREADS=7, KMP_BLOCKTIME=5,
                                                          LD_PRELOAD=self.lib))
        gomp = next(r for r in self.rows() if r["runtime"] == "gomp")
        self.assertEqual((gomp["env_OMP_NUM_THREADS"], gomp["env_KMP_BLOCKTIME"], gomp["env_LD_PRELOAD"],
                          gomp["omp_runtime"]), ("unset", "unset", "unset", "libgomp"))
        self.assertTrue(gomp["repro"].startswith("env -u OMP_NUM_THREADS -u KMP_BLOCKTIME -u LD_PRELOAD "),
                        gomp["repro"])

    def test_timelines_and_thread_files_are_kept_next_to_the_csv(self):
        self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = 20
            timeline = true
            threads_csv = true
        """))
        (row,) = self.rows()
        key = row["run_key"]
        # the file the program's JSON entry names in its label (the fake names
        # it unlike the programs: the sweep must not derive the name itself)
        self.assertEqual(row["timeline_file"], f"res.timelines/{key}-p0/fake-0.timeline.csv")
        self.assertEqual(row["threads_file"], f"res.threads/{key}-p0.csv")
        for column in ("timeline_file", "threads_file"):
            self.assertTrue(os.path.exists(self.path(row[column])), row[column])

    def test_counters_and_context_no_program_declares(self):
        self.sweep(self.grid('repetitions = 1\n[[study]]\nbench = "optimizer_step"\noptimizer = "sgd"\n'
                             'gap_ms = 0\n'), env=self.env(FAKE_EXTRA=1))
        (row,) = self.rows()
        self.assertEqual((row["extra_counters"], row["extra_context"]), ("fake_counter=1.5", "fake_extra_key=x"))

    def test_runtime_bench_counters(self):
        self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "runtime"
            kernel = ["serial", "omp"]
            gap_ms = [0, 300]
            steps = 4
            runtimes = [{name = "llvm", OMP_NUM_THREADS = 2, KMP_BLOCKTIME = 50}]
        """))
        rows = {(r["kernel"], r["gap_ms"]): r for r in self.rows()}
        self.assertEqual(sorted(rows), [("omp", "0"), ("omp", "300"), ("serial", "0"), ("serial", "300")])
        r = rows[("omp", "300")]
        self.assertEqual((r["benchmark"], r["bench"], r["n"], r["steps"], r["status"]),
                         ("runtime_region/omp/n:1048576/gap_ms:300/iterations:4/manual_time", "runtime",
                          "1048576", "4", "ok"))
        # serial 2 ms; on 2 threads 1 + 0.25 back to back; workers asleep (blocktime 50 < gap 300)
        # cost 0.5 ms to wake; (T - 1) * 50 burnt
        self.assertEqual([r[c] for c in ("serial_ms", "backtoback_ms", "wakeup_ms", "step_ms", "kernel_threads",
                                         "overhead_ms", "residual_cpu_ms", "real_time", "time_unit")],
                         ["2", "1.25", "0.5", "1.75", "2", "0.75", "50", "1750", "us"])
        self.assertAlmostEqual(float(r["speedup"]), 2 / 1.75, places=12)
        self.assertEqual([rows[("omp", "0")][c] for c in ("wakeup_ms", "residual_cpu_ms")], ["0", "0"])
        self.assertEqual([rows[("serial", "300")][c] for c in ("kernel_threads", "residual_cpu_ms", "speedup")],
                         ["1", "0", "1"])
        self.assertEqual((r["model"], r["samples_per_s"]), ("", ""))

    def test_train_step_rows(self):
        self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            model = "mnist_adadelta"
            workers = [0, 2]
            mkldnn = [0, 1]
            gap_ms = 0
            env = {OMP_NUM_THREADS = 2}
        """))
        rows = self.rows()
        # 1 + 30 / 2 + 0.5 per worker + 4 without oneDNN
        self.assertEqual(sorted((r["workers"], r["mkldnn"], r["step_ms"], r["samples_per_s"]) for r in rows),
                         [("0", "0", "20", "3200"), ("0", "1", "16", "4000"), ("2", "0", "21", repr(64 / 21 * 1000)),
                          ("2", "1", "17", repr(64 / 17 * 1000))])
        self.assertEqual({(r["batch"], r["loader"], r["preload"], r["cuda_sync"], r["pin_memory"]) for r in rows},
                         {("64", "torch", "0", "auto", "0")})
        self.assertEqual(rows[0]["benchmark"].split("/")[0], "train_step")


class ConfirmationLooks(unittest.TestCase):
    """sweep.confirm's looks after the first, with the race's answers given
    (GridRace.next_looks asks confirmation.next_look, tested in
    test_robust): each look adds rounds numbered from 1000 x its number, the
    runs of each point go on from where the last look left them, and the
    looks end when the race has no more to ask or the budget no room."""

    class Race:
        def __init__(self, item, looks):
            self.item, self.looks, self.asked = item, list(looks), []

        def confirmations(self, available):
            return [self.item], 6

        def next_looks(self, available):
            self.asked.append(available)
            return ([self.item], self.looks.pop(0)) if self.looks else None

    class Executor(campaign.Executor):
        def __init__(self):
            self.specs = []

        def execute(self, specs):
            for spec in specs:
                self.specs.append(spec)
                yield spec, []

    class Rows:
        def append(self, rows):
            return rows

    def confirm(self, looks, budget):
        item = type("Item", (), {"key": "confirm-p", "label": "p (confirm)"})()
        race, ex = self.Race(item, looks), self.Executor()
        race_campaign = campaign.Campaign(ex, self.Rows(), 1, budget=campaign.Budget(runs=budget), say=lambda *a, **k: None)
        race_campaign.spent = 10
        with contextlib.redirect_stdout(io.StringIO()) as out:
            sweep_command.confirm(race, race_campaign, campaign.Budget(runs=budget), ex, self.Rows(), 1)
        return race, ex.specs, out.getvalue()

    def test_looks_go_on_in_rounds_of_their_own(self):
        race, specs, out = self.confirm([4, 5], budget=100)
        self.assertEqual([s.rep for s in specs], list(range(15)))
        self.assertEqual([s.round // 1000 for s in specs], [1] * 6 + [2] * 4 + [3] * 5)
        self.assertEqual(race.asked, [84, 80, 75])   # what the budget had left at each look
        self.assertIn("confirmation look 2: 1 points, 4 more rounds", out)

    def test_no_look_without_room_in_the_budget(self):
        race, specs, out = self.confirm([4, 2], budget=21)   # 10 + 6 spent, 5 left: a look of 4, then of 2 (< 3)
        self.assertEqual([s.round // 1000 for s in specs], [1] * 6 + [2] * 4)
        self.assertEqual(race.asked, [5, 1])


class Failures(SweepTest):
    def test_crash_exit_hang_are_failed_rows_and_the_sweep_goes_on(self):
        grid = self.grid("""
            repetitions = 1
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = [0, 100]
            env = {OMP_NUM_THREADS = [1, 2, 3]}
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = [0, 100]
            env = {OMP_NUM_THREADS = 4}
            timeout_s = 2
        """)
        env = self.env(FAKE_CRASH_IF="OMP_NUM_THREADS=2", FAKE_EXIT_IF="OMP_NUM_THREADS=3",
                       FAKE_HANG_IF="OMP_NUM_THREADS=4")
        result = self.sweep(grid, env=env)
        got = sorted((r["OMP_NUM_THREADS"], r["gap_ms"], r["status"], r["reason"], r["exit_code"])
                     for r in self.rows())
        exit3 = "exit code 3: optimizer_step_bench: error: fake failure: could not load the dataset"
        self.assertEqual(got, [
            ("1", "0", "ok", "", "0"), ("1", "100", "ok", "", "0"),
            ("2", "0", "failed", "killed by SIGSEGV", "-11"), ("2", "100", "failed", "killed by SIGSEGV", "-11"),
            ("3", "0", "failed", exit3, "3"), ("3", "100", "failed", exit3, "3"),
            ("4", "0", "failed", "timeout after 2 s", "-9"), ("4", "100", "failed", "timeout after 2 s", "-9")])
        # a run that reported nothing still has one row per benchmark it should have run
        self.assertEqual(sorted(r["benchmark"] for r in self.rows() if r["OMP_NUM_THREADS"] == "2"),
                         ["optimizer_step/sgd/params:4000000/gap_ms:0", "optimizer_step/sgd/params:4000000/gap_ms:100"])
        self.assertIn("rows: 2 ok, 0 skipped, 6 failed", result.stdout)
        strict = self.sweep(grid, "--force", "--strict", env=self.env(FAKE_EXIT_IF="OMP_NUM_THREADS=3"), ok=False)
        self.assertEqual(strict.returncode, 1)
        self.assertEqual(self.sweep(grid, "--force", "--strict").returncode, 0)

    def test_reported_errors_exit_after_report_and_wrong_runtime(self):
        grid = self.grid("""
            repetitions = 1
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = 0
            env = {OMP_NUM_THREADS = [1, 2, 3]}
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = 0
            runtimes = [{name = "llvm", OMP_NUM_THREADS = 2}]
        """)
        env = self.env(FAKE_ERROR_IF="OMP_NUM_THREADS=1", FAKE_EXIT_AFTER_IF="OMP_NUM_THREADS=3",
                       FAKE_REPORT_RUNTIME="libgomp")
        self.sweep(grid, env=env)
        got = {(r["runtime"], r["OMP_NUM_THREADS"]): (r["status"], r["reason"]) for r in self.rows()}
        self.assertEqual(got, {
            ("gomp", "1"): ("failed", "fake error: out of memory"),
            ("gomp", "2"): ("ok", ""),
            ("gomp", "3"): ("failed", "exit code 4 after reporting: optimizer_step_bench: fake: crashed in a "
                                      "destructor"),
            ("llvm", "2"): ("failed", f"asked for runtime llvm but the process reports libgomp ({self.lib})")})

    def test_knobs_the_runtime_overrode_are_noted(self):
        self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "optimizer_step"
            optimizer = "sgd"
            gap_ms = 300
            runtimes = [{name = "llvm", OMP_NUM_THREADS = 2, OMP_WAIT_POLICY = "passive", KMP_BLOCKTIME = 50}]
        """))
        (row,) = self.rows()
        self.assertEqual((row["status"], row["reason"], row["overridden_knobs"], row["residual_cpu_ms"]),
                         ("ok", "note: the process reports overriding OMP_WAIT_POLICY", "OMP_WAIT_POLICY", "50"))

    def test_cuda_without_gpu_is_skipped(self):
        result = self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            model = "mnist_adadelta"
            workers = 0
            gap_ms = 0
            device = ["cpu", "cuda"]
        """))
        got = sorted((r["device"], r["status"], r["reason"], r["benchmark"].split("/")[0]) for r in self.rows())
        self.assertEqual(got, [("cpu", "ok", "", "train_step"),
                               ("cuda", "skipped", "skipped: no CUDA device", "train_step_cuda")])
        self.assertIn("rows: 1 ok, 1 skipped, 0 failed", result.stdout)

    def test_cuda_with_a_gpu_and_a_policy_not_in_force(self):
        self.sweep(self.grid("""
            repetitions = 1
            [[study]]
            bench = "train_step"
            model = "mnist_adadelta"
            workers = 0
            gap_ms = 0
            device = "cuda"
            cuda_sync = ["auto", "spin"]
            item_sync = [0, 1]
        """), env=self.env(FAKE_CUDA=1, FAKE_SYNC_IN_FORCE="yield"))
        rows = self.rows()
        self.assertEqual({r["status"] for r in rows}, {"ok"})
        got = sorted((r["cuda_sync"], r["item_sync"], r["cuda_sync_in_force"], r["reason"]) for r in rows)
        self.assertEqual(got, [("auto", "0", "yield", ""), ("auto", "1", "yield", ""),
                               ("spin", "0", "yield", "note: asked for cuda_sync spin but yield is in force"),
                               ("spin", "1", "yield", "note: asked for cuda_sync spin but yield is in force")])
        self.assertEqual({(r["gpu_span_ms"], r["gpu_busy_ms"], r["gpu_idle_share"]) for r in rows},
                         {("14.4", "8", "0.5")})
        self.assertTrue(all("/item_sync:" in r["benchmark"] for r in rows))

    def test_missing_libomp_stops_before_running(self):
        result = self.sweep(self.grid(TWO_POINTS), "--libomp", "/nonexistent/libomp.so.5", ok=False)
        helpers.assert_one_line_error(self, result, "--libomp /nonexistent/libomp.so.5: not found")
        self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    unittest.main()
