"""Host plans (tune --copies, --param) without running anything: a run of N
copies is one value for the rule (the host's throughput), the fresh runs say
what each copy loses and how many copies fit, the plans and their names,
the core sets, the words. Known truths by construction: synthetic rows whose
figures are chosen."""
import math
import random
import unittest
from unittest import mock

import helpers  # noqa: F401  (the package on sys.path)
from threadburn.analysis import race as races, runfigures, verdicts
from threadburn.engine import plans
from threadburn.engine.points import TunePoint
from threadburn.export import jsonfile, views
from threadburn.lib import machine, records, rule as rules
from threadburn.lib.errors import ThreadburnError
from threadburn.lib.records import Row

LAYOUT = "env=OMP_NUM_THREADS;flags=command metric_better"


def copy_rows(name, n, rnd, phase="race", walls=None, cpus=None, metrics=None, status=None, key=None, rep=0,
              higher=True, threads="1", wall_s=None):
    """The rows of one run of n copies started together (a host tune's)."""
    walls = walls or [1000.0] * n
    cpus = cpus or [900.0] * n
    base = key or f"c{n}-{name}"
    run_key = base if phase == "race" else f"{phase}-{base}"
    out = []
    for i in range(n):
        row = Row(grid="tune", study=name, preset="", run_key=f"{run_key}-r{rep}", point_key=base, round=rnd,
                  phase=phase, status=(status or ["ok"] * n)[i], bench="command", benchmark="prog", command="prog x",
                  processes=n, proc_index=i, run_rows=n, wall_s=(wall_s or max(walls)) / 1000, wall_ms=walls[i],
                  cpu_ms=cpus[i], copy_start_ms=0.1 * i, knob_layout=LAYOUT, OMP_NUM_THREADS=threads,
                  host_other_cpu_ms=0.0, host_steal_ms=0.0, runtime="gomp", regions=0,
                  metric_better=("higher" if higher else "lower") if metrics else "")
        if metrics:
            row.set("metric", metrics[i])
        out.append(row)
    return out


class OneValuePerRun(unittest.TestCase):
    def test_a_run_of_copies_is_one_record_of_the_host(self):
        rows = copy_rows("plain", 2, 0, walls=[400.0, 500.0], cpus=[300.0, 350.0])
        (r,) = records.run_records(rows, "libomp", runfigures.of_run)
        self.assertEqual((r.time_kind, r.copies, r.higher_is_better), ("host", 2, True))
        self.assertAlmostEqual(r.time, 2 / 0.5)           # copies / the run's wall time (s)
        self.assertAlmostEqual(r.cpu, 650.0)               # every copy's CPU
        self.assertAlmostEqual(r.per_copy, 450.0)          # the copies' own times, their mean
        self.assertAlmostEqual(r.wall_ms, 500.0)

    def test_with_a_metric_the_copies_rates_add_up(self):
        (r,) = records.run_records(copy_rows("plain", 3, 0, metrics=[10.0, 20.0, 30.0]), "libomp", runfigures.of_run)
        self.assertEqual((r.time_kind, r.time, r.per_copy, r.per_copy_higher), ("host_metric", 60.0, 20.0, True))
        # a lower-is-better figure (seconds per epoch) is a rate turned around: epochs/s summed
        (r,) = records.run_records(copy_rows("plain", 2, 0, metrics=[2.0, 4.0], higher=False), "libomp", runfigures.of_run)
        self.assertAlmostEqual(r.time, 0.5 + 0.25)
        self.assertTrue(r.higher_is_better)
        self.assertFalse(r.per_copy_higher)

    def test_a_failed_or_missing_copy_measures_no_host(self):
        (r,) = records.run_records(copy_rows("plain", 2, 0, status=["ok", "failed"]), "libomp", runfigures.of_run)
        self.assertEqual((r.status, r.time), ("failed", None))
        (r,) = records.run_records(copy_rows("plain", 2, 0)[:1], "libomp", runfigures.of_run)
        self.assertIsNone(r.time)

    def test_a_plain_tune_run_is_as_before(self):
        row = copy_rows("plain", 1, 0)[0].copy(copy_start_ms="")
        (r,) = records.run_records([row], "libomp", runfigures.of_run)
        self.assertEqual((r.time_kind, r.time, r.copies), ("wall_ms", 1000.0, 1))

    def test_copies_pooled_as_runs_would_shrink_the_interval(self):
        # Two settings whose runs differ by a run-level luck shared by the copies of a run: compared as one
        # value per run the interval is honest; the same rows read as one record per copy (what pooling
        # would do) claim twice the runs.
        rng = random.Random(4)
        rows = []
        for rnd in range(4):
            for name in ("plain", "T1"):
                luck = math.exp(rng.gauss(0, 0.1))
                rows += copy_rows(name, 2, rnd, walls=[1000 * luck, 1000 * luck], rep=rnd)
        recs = records.run_records(rows, "libomp", runfigures.of_run)
        self.assertEqual(len(recs), 8)
        v = verdicts.decide_records(recs, rules.Rule(design="fixed"))
        self.assertEqual(v.entries[0].decision.vs_baseline["T1"].time.n, 4)


def host_tune(gain_2=1.5, rounds=6, noise=0.01, seed=1, fresh=8, alone_ms=800.0):
    """A host tune of 1 and 2 copies whose truth is chosen: at 1 copy plain
    runs 1000 ms and T2 625 (a change); at 2 copies plain runs 4000 ms (a
    spinning team: 0.5 copies/s) and T1 2 / (1.6 x gain_2) s, so that T1 at
    2 copies does gain_2 x the work of T2 alone; then fresh runs (confirm)
    of every workload's plain and winner, and one copy of T1 alone."""
    rng = random.Random(seed)
    luck = lambda: math.exp(rng.gauss(0, noise))  # noqa: E731
    t1_two = 2000.0 / (1.6 * gain_2)
    rows = []
    for phase, first, n_rounds in (("race", 0, rounds), ("confirm", 1000, fresh)):
        for k in range(n_rounds):
            rnd = first + k
            rows += copy_rows("plain", 1, rnd, phase, walls=[1000 * luck()], rep=k)
            rows += copy_rows("T2", 1, rnd, phase, walls=[625 * luck()], rep=k, threads="2")
            rows += copy_rows("plain", 2, rnd, phase, walls=[4000 * luck()] * 2, rep=k)
            rows += copy_rows("T1", 2, rnd, phase, walls=[t1_two * luck()] * 2, rep=k)
            if phase == "confirm":
                rows += copy_rows("T1", 1, rnd, "alone", walls=[alone_ms * luck()], rep=k, key="c2-T1")
    return rows


class FreshRuns(unittest.TestCase):
    def test_each_copy_against_alone_and_how_many_fit(self):
        v = verdicts.decide_records(records.run_records(host_tune(), "libomp", runfigures.of_run), rules.Rule())
        one, two = v.entries
        self.assertEqual((one.copies, one.verdict, one.chosen), (1, "change", "T2"))
        self.assertEqual((two.copies, two.verdict, two.chosen), (2, "change", "T1"))
        # each copy of T1 at 2 copies runs 2000/2.4 ms where one alone runs 800: +4 %
        a = two.alone
        self.assertEqual(a.setting, "T1")
        self.assertAlmostEqual(a.ratio.est, 2000 / 2.4 / 800, delta=0.02)
        self.assertIsNone(one.alone)
        f = v.fit
        self.assertEqual((f.tried, f.fits, f.settled), ((1, 2), 2, False))
        (step,) = f.steps
        self.assertEqual((step.fewer_plan, step.more_plan, step.word), ("T2", "T1", "adds"))
        self.assertAlmostEqual(1 / step.ratio.est, 1.5, delta=0.03)
        text = "\n".join(views.fit_lines(v))
        self.assertIn("1 -> 2 copies (T2 -> T1): host throughput +50", text)
        self.assertIn("this host fits at least 2 of these (the most tried)", text)
        self.assertIn("each copy +4", views.alone_text(two).replace("each copy 4", "each copy +4"))
        data = jsonfile.verdict_data(v)
        self.assertEqual(data["fit"]["fits"], 2)
        self.assertEqual(data["workloads"][1]["alone"]["setting"], "T1")

    def test_a_second_copy_that_adds_nothing_does_not_fit(self):
        v = verdicts.decide_records(records.run_records(host_tune(gain_2=1.01), "libomp", runfigures.of_run), rules.Rule())
        self.assertEqual((v.fit.fits, v.fit.settled, v.fit.steps[0].word), (1, True, "adds less"))
        self.assertIn("this host fits 1 of these", "\n".join(views.fit_lines(v)))

    def test_at_the_margin_the_fit_stays_open(self):
        v = verdicts.decide_records(records.run_records(host_tune(gain_2=1.05, noise=0.04, fresh=3), "libomp", runfigures.of_run),
                                    rules.Rule())
        self.assertEqual((v.fit.fits, v.fit.settled, v.fit.steps[0].word), (1, False, "open"))

    def test_without_the_fit_the_steps_would_be_claims_from_the_race(self):
        # The fit reads fresh runs only: a tune without them says nothing about how many fit.
        rows = [r for r in host_tune() if r.phase == "race"]
        v = verdicts.decide_records(records.run_records(rows, "libomp", runfigures.of_run), rules.Rule())
        self.assertEqual(v.fit.steps[0].word, "open")
        self.assertIsNone(v.entries[1].alone)

    def test_the_race_asks_for_every_count_and_a_copy_alone(self):
        rows = [r for r in host_tune() if r.phase == "race"]
        items = {k: k for k in ("c1-plain", "c1-T2", "c2-plain", "c2-T1")}
        race = races.Race(lambda: records.run_records(rows, "libomp", runfigures.of_run), items, rules.Rule())
        wanted, n = race.confirmation_plan(20, host=True)
        self.assertEqual(sorted(wanted), sorted([("c1-plain", "confirm"), ("c1-T2", "confirm"),
                                                 ("c2-plain", "confirm"), ("c2-T1", "confirm"), ("c2-T1", "alone")]))
        self.assertGreaterEqual(n, 5)
        # not a host tune: a pair per candidate only
        wanted, _ = race.confirmation_plan(20)
        self.assertNotIn(("c2-T1", "alone"), wanted)

    def test_duplicates_are_per_copy_count(self):
        rows = []
        for rnd in range(3):
            for n in (1, 2):
                rows += copy_rows("T1-gomp", n, rnd, rep=rnd)
                rows += copy_rows("torchrun", n, rnd, rep=rnd)
                rows += [r.copy(regions=9, max_team=2, omp_runtime="libgomp")
                         for r in copy_rows("plain", n, rnd, rep=rnd, threads="2")]
        for r in rows:
            r.set("preset", "default")  # tune's own settings (a user's --points are never pruned)
        dropped = verdicts.duplicates(records.run_records(rows, "libomp", runfigures.of_run))
        self.assertEqual(len(dropped), 2)  # one per workload
        for by_name in dropped.values():
            self.assertEqual(by_name, {"T1-gomp": "torchrun"})  # the preset's name is kept


    def test_a_runtime_nobody_could_name_merges_nothing(self):
        # A benchmark program exports its own GOMP_parallel: the probe names no runtime and reads back no
        # blocktime. Two teams of 2 under different runtimes and blocktimes are then what they were asked to
        # be, not duplicates of each other (they were, merged on "unknown" and "n/a").
        def team(name, runtime, **env):
            return [r.copy(regions=9, max_team=2, omp_runtime="unknown", kmp_blocktime_ms="n/a", runtime=runtime,
                           preset="default", knob_layout="env=OMP_NUM_THREADS KMP_BLOCKTIME;flags=command",
                           KMP_BLOCKTIME=env.get("bt", "unset"))
                    for r in copy_rows(name, 1, 0, threads="2")]
        rows = team("T2-gomp", "gomp") + team("T2-llvm-bt0", "llvm", bt="0") + team("T2-llvm-bt1", "llvm", bt="1")
        self.assertEqual(verdicts.duplicates(records.run_records(rows, "libomp", runfigures.of_run)), {})


class Plans(unittest.TestCase):
    def test_copies(self):
        self.assertEqual(machine.parse_copies("1,4,2"), [1, 2, 4])
        self.assertEqual(machine.parse_copies("auto", cpus=6), [1, 2, 4, 6])
        for bad in ("0", "two", "1,1", "", "300"):
            with self.assertRaises(ValueError):
                machine.parse_copies(bad)

    def test_core_sets_are_disjoint_physical_cores(self):
        cores = {("0", "0"): [0, 4], ("0", "1"): [1, 5], ("0", "2"): [2, 6], ("0", "3"): [3, 7]}
        with mock.patch.object(machine, "_cores", return_value=cores):
            self.assertEqual(machine.core_sets(2), [(0, 1), (2, 3)])
            self.assertEqual(machine.core_sets(3), [(0,), (1,), (2,)])
            self.assertIsNone(machine.core_sets(5))

    def test_default_plans_for_copies(self):
        with mock.patch.object(machine, "physical_cores", return_value=4), \
                mock.patch.object(machine, "usable_cpus", return_value=4), \
                mock.patch.object(machine, "core_sets", return_value=[(0, 1), (2, 3)]):
            one = plans.default_points({}, None)
            two = plans.default_points({}, 2)
        self.assertEqual([p.name for p in one][:2], ["plain", "launcher"])
        self.assertIsNone(one[1].core_sets)
        self.assertEqual({p.name.split("-")[0] for p in one if p.name.startswith("T")}, {"T1", "T4"})
        by = {p.name: p for p in two}
        self.assertEqual(by["launcher"].core_sets, [(0, 1), (2, 3)])
        self.assertEqual(by["launcher"].env["OMP_NUM_THREADS"], "2")
        self.assertEqual(by["torchrun"].env, {"OMP_NUM_THREADS": "1"})
        self.assertEqual({p.name.split("-")[0] for p in two if p.name.startswith("T")}, {"T1", "T2", "T4"})
        self.assertEqual({p.key for p in two} & {"c2-plain", "c2-launcher"}, {"c2-plain", "c2-launcher"})
        self.assertEqual(by["launcher"].copy_env(1)["THREADBURN_COPY"], "1")

    def test_gpus_counted_without_cuda(self):
        with mock.patch.dict(machine.os.environ, {machine.GPU_COUNT_VAR: "3"}):
            machine.os.environ.pop("CUDA_VISIBLE_DEVICES", None)
            self.assertEqual(machine.gpus(), ["0", "1", "2"])
            # the user's own choice of devices is what copies are given, up to its first empty entry
            self.assertEqual(machine.gpus({"CUDA_VISIBLE_DEVICES": "3,GPU-5e1f,,7"}), ["3", "GPU-5e1f"])
            self.assertEqual(machine.gpus({"CUDA_VISIBLE_DEVICES": ""}), [])
        with mock.patch.dict(machine.os.environ, {machine.GPU_COUNT_VAR: "many"}), self.assertRaises(ValueError):
            machine.gpu_count()
        with mock.patch.dict(machine.os.environ, {machine.GPU_COUNT_VAR: ""}), \
                mock.patch.object(machine.os.path, "isdir", return_value=False), \
                mock.patch.object(machine.shutil, "which", return_value=None):
            self.assertEqual(machine.gpu_count(), 0)  # no driver, no nvidia-smi

    def test_each_copy_its_own_gpu(self):
        with mock.patch.object(machine, "physical_cores", return_value=4), \
                mock.patch.object(machine, "usable_cpus", return_value=4), \
                mock.patch.object(machine, "core_sets", return_value=[(0, 1), (2, 3)]):
            two = plans.default_points({}, 2, gpus=["0", "1", "2"])
            shared = plans.default_points({}, 4, gpus=["0", "1", "2"])
            one = plans.default_points({}, None, gpus=["0", "1", "2"])
        for p in two:
            self.assertEqual([p.copy_env(i)["CUDA_VISIBLE_DEVICES"] for i in range(2)], ["0", "1"], p.name)
        self.assertEqual(two[0].alone().copy_env(0)["CUDA_VISIBLE_DEVICES"], "0")
        self.assertIn("GPU of each copy: 0 | 1", two[0].plan_line("libomp"))
        for p in shared + one:  # 4 copies on 3 GPUs share them; one process a run uses them as it would
            self.assertNotIn("CUDA_VISIBLE_DEVICES", p.copy_env(0))
            self.assertIsNone(p.gpu_of(0))

    def test_params_name_and_fill_the_settings(self):
        params = plans.parse_params(["workers=0,2", "batch=32,64"], ["prog", "--workers", "{workers}",
                                                                      "--batch={batch}"])
        points = plans.with_params([TunePoint("plain", "gomp", {}), TunePoint("T1", "gomp", {})], params)
        names = [p.name for p in points]
        self.assertEqual(names[:4], ["plain", "plain,batch=64", "plain,workers=2", "plain,workers=2,batch=64"])
        self.assertEqual(len(points), 8)
        p = points[3]
        self.assertEqual(p.command(["prog", "--workers", "{workers}", "--batch={batch}"]),
                         ["prog", "--workers", "2", "--batch=64"])

    def test_params_refused_in_one_line(self):
        for items, cmd, must in ((["w"], ["p", "{w}"], "expected NAME=v1,v2"), (["w=1,1"], ["p", "{w}"], "twice"),
                                 (["w=1", "w=2"], ["p", "{w}"], "given twice"), (["w=1,2"], ["p"], "has no {w}"),
                                 (["w=1,,2"], ["p", "{w}"], "non-empty"), (["9w=1"], ["p", "{9w}"], "NAME")):
            with self.assertRaises(ThreadburnError) as caught:
                plans.parse_params(items, cmd)
            self.assertIn(must, str(caught.exception))
            self.assertEqual(len(str(caught.exception).splitlines()), 1)


if __name__ == "__main__":
    unittest.main()
