"""`threadburn compare` and its statistics (python/threadburn/commands/compare.py,
stats.py), on hand-checked fixtures (make_fixtures.compare_rows):

  G1 optimizer llvm T=2 bt=200: step A 10,11,12  B 13,14,15; residual A 200,201,202  B 0.5,1,1.5
  G2 optimizer gomp (no env):   step A 10 x4     B 10 x4;    residual A 0 x4         B 1 x4
  G3 train mnist gap 100 gomp:  step A 19,20,21  B 24,25,26; residual A 6,7,8       B 0,0.5,1
                                samples_per_s A 3400,3200,3050  B 2700,2560,2460
  G4 only in A, G5 only in B; A has one failed row of G1, B one skipped CUDA row.
compare_schema2.csv: a file of schema 2, for the refusal to compare across versions.
"""
import csv
import math
import os
import unittest

import helpers
from threadburn.commands import compare
from threadburn.analysis import comparison
from threadburn.lib import schema, stats

A = os.path.join(helpers.FIXTURES, "compare_a.csv")
B = os.path.join(helpers.FIXTURES, "compare_b.csv")
OPT = "optimizer_step/sgd/params:4000000/gap_ms:300"
TRAIN = "train_step/mnist_adadelta/preload:0/batch:64/workers:0/loader:torch/mkldnn:1/gap_ms:100"
G1 = "llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=200"


class MannWhitney(unittest.TestCase):
    def test_exact_without_ties(self):
        # n=3,3 fully separated: U=0; P(U<=0) = 1/C(6,3) = 1/20; two-sided 2/20.
        self.assertEqual(stats.mann_whitney_u([1, 2, 3], [4, 5, 6]), (0.0, 0.1, "exact"))
        self.assertEqual(stats.mann_whitney_u([4, 5, 6], [1, 2, 3]), (9.0, 0.1, "exact"))
        # n=4,5 separated: 2 / C(9,4) = 2/126.
        u, p, method = stats.mann_whitney_u([1, 2, 3, 4], [5, 6, 7, 8, 9])
        self.assertEqual((u, method), (0.0, "exact"))
        self.assertAlmostEqual(p, 2 / 126, places=15)
        # n=2,2, one swap: U=1; counts of U=0,1,2,3,4 are 1,1,2,1,1 -> P(U<=1)=2/6.
        self.assertAlmostEqual(stats.mann_whitney_u([1, 3], [2, 4])[1], 2 * 2 / 6, places=15)
        # identical order interleaved: U at its mean -> p = 1
        self.assertEqual(stats.mann_whitney_u([1, 4], [2, 3])[1], 1.0)

    def test_normal_approximation_with_ties(self):
        # a=[1,2,2,3] b=[2,3,4,5]: ranks 1 | 3,3,3 | 5.5,5.5 | 7 | 8; R_a = 12.5, U = 2.5;
        # mean 8; tie groups 3 and 2: sum(t^3-t) = 30; var = 16/12*(9 - 30/56) = 11.2857;
        # z = (5.5 - 0.5)/sqrt(var) = 1.48835; p = erfc(z/sqrt 2) = 0.136658
        u, p, method = stats.mann_whitney_u([1, 2, 2, 3], [2, 3, 4, 5])
        self.assertEqual((u, method), (2.5, "normal"))
        self.assertAlmostEqual(p, math.erfc(5 / math.sqrt(16 / 12 * (9 - 30 / 56)) / math.sqrt(2)), places=15)
        self.assertAlmostEqual(p, 0.136658, places=6)

    def test_degenerate_samples(self):
        self.assertEqual(stats.mann_whitney_u([5, 5, 5], [5, 5]), (3.0, 1.0, "normal"))
        self.assertEqual(stats.mann_whitney_u([], [1, 2]), (None, None, None))

    def test_large_samples_use_normal(self):
        a = list(range(0, 42, 2))  # 21 values: beyond EXACT_MAX_N
        b = list(range(1, 43, 2))
        self.assertEqual(stats.mann_whitney_u(a, b)[2], "normal")

    def test_exact_u_distribution(self):
        # 2 against 2: the 6 arrangements give U = 0, 1, 2, 2, 3, 4; complete separation has
        # probability 1/6 a side. 5 against 7: complete separation 1 / C(12, 5) a side.
        self.assertAlmostEqual(stats.mann_whitney_u([1, 2], [3, 4])[1], 2 / 6, places=12)
        self.assertAlmostEqual(stats.mann_whitney_u([1, 2, 3, 4, 5], list(range(6, 13)))[1],
                               2 / math.comb(12, 5), places=12)

    def test_cv_and_geomean(self):
        self.assertAlmostEqual(stats.coefficient_of_variation([10, 11, 12]), 1 / 11, places=15)
        self.assertIsNone(stats.coefficient_of_variation([3]))
        self.assertIsNone(stats.coefficient_of_variation([0, 0]))
        self.assertAlmostEqual(stats.geometric_mean([2, 8]), 4.0, places=15)
        self.assertEqual(stats.geometric_mean([None, 0]), None)


def load_pair(a, b):
    header_a, rows_a, _ = compare.load(a)
    header_b, rows_b, _ = compare.load(b)
    knobs = [k for k in rows_a[0].knob_columns if k in header_b]
    return comparison.compare(comparison.group(rows_a, knobs), comparison.group(rows_b, knobs))


class CompareFixtures(unittest.TestCase):
    def setUp(self):
        self.table, self.geo, self.only_a, self.only_b = load_pair(A, B)
        self.by = {(e["workload"], e["setting"]): e for e in self.table}

    def test_groups_medians_changes_p_values(self):
        self.assertEqual(sorted(self.by), [(OPT, "gomp (no env)"), (OPT, G1), (TRAIN, "gomp (no env)")])
        g1 = self.by[(OPT, G1)]
        self.assertEqual((g1["n_a"], g1["n_b"]), (3, 3))  # the failed row is not a sample
        step = g1["metrics"]["step_ms"]
        self.assertEqual((step["median_a"], step["median_b"], step["p"], step["method"]), (11.0, 14.0, 0.1, "exact"))
        self.assertAlmostEqual(step["change"], 3 / 11, places=15)
        self.assertAlmostEqual(step["cv_a"], 1 / 11, places=15)
        res = g1["metrics"]["residual_cpu_ms"]
        self.assertEqual((res["median_a"], res["median_b"], res["p"]), (201.0, 1.0, 0.1))
        self.assertNotIn("samples_per_s", g1["metrics"])

        g2 = self.by[(OPT, "gomp (no env)")]
        self.assertEqual(g2["metrics"]["step_ms"]["p"], 1.0)  # all 8 values tied
        self.assertEqual(g2["metrics"]["step_ms"]["change"], 0.0)
        res = g2["metrics"]["residual_cpu_ms"]
        self.assertIsNone(res["change"])  # A median 0: no ratio
        # 4 zeros vs 4 ones: U=0, var = 16/12*(9 - 120/56) = 64/7, z = 7.5/sqrt(64/7)
        self.assertAlmostEqual(res["p"], math.erfc(7.5 / math.sqrt(64 / 7) / math.sqrt(2)), places=15)
        self.assertAlmostEqual(res["p"], 0.013124, places=6)

        g3 = self.by[(TRAIN, "gomp (no env)")]
        sps = g3["metrics"]["samples_per_s"]
        self.assertEqual((sps["median_a"], sps["median_b"], sps["p"]), (3200.0, 2560.0, 0.1))
        self.assertAlmostEqual(sps["change"], -0.2, places=15)

    def test_geomeans_and_unmatched(self):
        self.assertAlmostEqual(self.geo["step_ms"]["ratio"], (14 / 11 * 1.0 * 1.25) ** (1 / 3), places=14)
        self.assertAlmostEqual(self.geo["residual_cpu_ms"]["ratio"], math.sqrt(1 / 201 * 0.5 / 7), places=14)
        self.assertEqual(self.geo["residual_cpu_ms"]["left_out"], 1)
        self.assertAlmostEqual(self.geo["samples_per_s"]["ratio"], 0.8, places=14)
        self.assertEqual(self.only_a, [f"{OPT} | llvm OMP_NUM_THREADS=1 KMP_BLOCKTIME=0"])
        self.assertEqual(self.only_b, ["train_step/cifar_sgd/preload:0/batch:64/workers:0/loader:torch/mkldnn:1"
                                       "/gap_ms:0 | gomp (no env)"])

    def test_text_output(self):
        result = helpers.threadburn("compare", A, B)
        self.assertEqual(result.returncode, 0, result.stderr)
        out = result.stdout
        row = next(ln for ln in out.splitlines() if "KMP_BLOCKTIME=200" in ln).split()
        self.assertEqual(row[-19:], ["3/3", "11", "(!", "9.1%)", "14", "(!", "7.1%)", "+27.3%", "0.1", "201", "1",
                                     "(!", "50%)", "-99.5%", "0.1", "-", "-", "-", "-"])
        geo = next(ln for ln in out.splitlines() if ln.startswith("geomean")).split()
        self.assertEqual(geo, ["geomean", "(3", "groups)", "+16.7%", "-98.1%", "-20.0%"])
        self.assertIn("warning: 3 of 3 groups have fewer than 9 samples on a side", out)
        self.assertIn("noisy: (! X%) marks a coefficient of variation above the rows' noise_cv (5%)", out)
        self.assertIn(f"{A}: not compared: 1 failed, 0 skipped rows", out)
        self.assertIn(f"{B}: not compared: 0 failed, 1 skipped rows", out)
        self.assertIn(f"only in {A} (1):\n  {OPT} | llvm OMP_NUM_THREADS=1 KMP_BLOCKTIME=0", out)
        self.assertIn("n/a (A~0)", out)

    def test_markdown_output(self):
        result = helpers.threadburn("compare", A, B, "--format", "md")
        lines = result.stdout.splitlines()
        start = next(i for i, ln in enumerate(lines) if ln.startswith("| benchmark"))  # after the machines' table
        table = [ln for ln in lines[start:] if ln.startswith("|")]
        self.assertEqual(len(table), 2 + 3 + 1)
        self.assertEqual({ln.count("|") for ln in table}, {16})  # 15 columns everywhere
        self.assertEqual(table[0], "| benchmark | setting | n A/B | step_ms A | step_ms B | change | p | "
                         "residual_cpu_ms A | residual_cpu_ms B | change | p | samples_per_s A | samples_per_s B "
                         "| change | p |")
        # B's burn median 0.5 ms is zero within noise (ZERO_FLOOR): no CV flag there
        self.assertIn(f"| {TRAIN} | gomp (no env) | 3/3 | 20 | 25 | +25.0% | 0.1 | 7 (! 14%) | 0.5 | -92.9% | 0.1 "
                      "| 3200 (! 5.5%) | 2560 | -20.0% | 0.1 |", table)

    def test_fail_if_regress(self):
        cases = [(["step_ms:10"], 1),   # geomean +16.7 % (and rows) > 10 %
                 (["step_ms:30"], 0),   # geomean 16.7, rows 27.3 and 25: all within 30
                 (["step_ms:26"], 1),   # geomean fine, but G1's row +27.3 % > 26
                 (["samples_per_s:19"], 1),  # -20 % throughput
                 (["samples_per_s:21"], 0),
                 (["residual_cpu_ms:0"], 0),  # burn only fell; the A~0 group is left out
                 (["step_ms:30", "samples_per_s:10"], 1)]
        for rules, code in cases:
            with self.subTest(rules=rules):
                args = [A, B] + [x for r in rules for x in ("--fail-if-regress", r)]
                result = helpers.threadburn("compare", *args)
                self.assertEqual(result.returncode, code, result.stderr)
                self.assertEqual(bool(result.stderr), bool(code))
        result = helpers.threadburn("compare", A, B, "--fail-if-regress", "step_ms:26")
        self.assertEqual(result.stderr, f"regression: step_ms +27.3% (limit 26%): {OPT} | {G1}\n")

    def test_same_file_shows_no_change(self):
        result = helpers.threadburn("compare", A, A, "--fail-if-regress", "step_ms:0")
        self.assertEqual(result.returncode, 0)
        self.assertIn("geomean (4 groups)", result.stdout)


class SelectRows(helpers.TempDir, unittest.TestCase):
    """--a-where/--b-where: one file of a fleet, host against host."""

    def setUp(self):
        super().setUp()
        self.assertEqual(helpers.read_header(A), helpers.read_header(B))
        rows = [dict(r, host_name="n1") for r in helpers.read_rows(A)] + \
               [dict(r, host_name="n2") for r in helpers.read_rows(B)]
        self.fleet = self.path("fleet.csv")
        with open(self.fleet, "w", newline="") as f:
            w = csv.DictWriter(f, helpers.read_header(A), lineterminator="\n")
            w.writeheader()
            w.writerows(rows)

    def test_host_against_host_is_a_against_b(self):
        whole = helpers.threadburn("compare", A, B)
        split = helpers.threadburn("compare", self.fleet, self.fleet, "--a-where", "host_name=n1",
                                   "--b-where", "host_name=n2")
        self.assertEqual(split.returncode, 0, split.stderr)
        table = lambda out: [ln for ln in out.splitlines() if ln.startswith(("optimizer_step", "train_step", "geomean"))]
        self.assertEqual(len(table(whole.stdout)), 4)
        self.assertEqual(table(split.stdout), table(whole.stdout))
        self.assertIn(f"{self.fleet} [host_name=n1]", split.stdout)

    def test_unknown_column_and_bad_condition(self):
        result = helpers.threadburn("compare", self.fleet, self.fleet, "--a-where", "rack=3")
        helpers.assert_one_line_error(self, result, f"{self.fleet}: no column 'rack' to select on")
        result = helpers.threadburn("compare", self.fleet, self.fleet, "--b-where", "host_name")
        helpers.assert_one_line_error(self, result, "expected COLUMN=VALUE, got 'host_name'")


class Machines(helpers.TempDir, unittest.TestCase):
    """compare starts with the machine and libraries of both files (their rows'
    context columns) and names what differs. The fixtures with the context set
    by hand: A on a 2-CPU Xeon with torch 1.13, B as given per test."""
    XEON = {"host_name": "vm", "cpu_model": "Intel(R) Xeon(R) Processor", "num_cpus": "2", "available_cpus": "2",
            "torch_version": "1.13.0", "dnnl_version": "2.6.3", "tbb_version": "2021.8"}
    LIBS = {"libgomp": "/lib/x86_64-linux-gnu/libgomp.so.1", "llvm-libomp": "/usr/lib/x86_64-linux-gnu/libomp.so.5"}

    def write(self, name, source, context, libs=None, keep=lambda row: True, per_row=lambda row: {}):
        libs = dict(self.LIBS, **(libs or {}))
        rows = [dict(r, **dict(context, omp_library=libs[r["omp_runtime"]], **per_row(r)))
                for r in helpers.read_rows(source) if keep(r)]
        path = self.path(name)
        header = list(helpers.read_header(source))
        header += [k for k in context if k not in header]  # context the fixture's rows predate (the slot's)
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, header, lineterminator="\n")
            w.writeheader()
            w.writerows(rows)
        return path

    def compare(self, b_context, libs=None, keep=lambda row: True, per_row=lambda row: {}):
        a = self.write("a.csv", A, self.XEON)
        b = self.write("b.csv", B, dict(self.XEON, **b_context), libs, keep, per_row)
        result = helpers.threadburn("compare", a, b)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        start = lines.index("machine and libraries (the rows' context columns):")
        self.assertLess(start, next(i for i, ln in enumerate(lines) if ln.startswith("benchmark")))
        table = {ln.split("  ")[0]: [c for c in ln.split("  ")[1:] if c.strip()] for ln in lines[start + 3:]
                 if ln and not ln.startswith(("warning", "benchmark"))}
        warning = [ln for ln in lines if ln.startswith("warning: A and B ran on")]
        return table, warning

    def test_other_cpu_cores_and_torch_are_named(self):
        table, warning = self.compare({"cpu_model": "AMD EPYC 9654 96-Core Processor", "num_cpus": "192",
                                       "available_cpus": "192", "torch_version": "2.11.0"})
        self.assertEqual(warning, ["warning: A and B ran on different machines or libraries (CPU model, CPUs, "
                                   "CPUs available, torch differ): every change below is theirs as much as the "
                                   "settings'"])
        self.assertEqual([c.strip() for c in table["CPU model"]],
                         ["Intel(R) Xeon(R) Processor", "AMD EPYC 9654 96-Core Processor"])
        self.assertEqual([c.strip() for c in table["CPUs"]], ["2", "192"])
        self.assertEqual([c.strip() for c in table["torch"]], ["1.13.0", "2.11.0"])
        self.assertEqual([c.strip() for c in table["oneDNN"]], ["2.6.3", "same"])
        self.assertEqual([c.strip() for c in table["host"]], ["vm", "same"])

    def test_files_that_agree_get_no_warning(self):
        table, warning = self.compare({})
        self.assertEqual(warning, [])
        for label in ("host", "CPU model", "CPUs", "CPUs available", "OpenMP library", "torch", "oneDNN", "TBB",
                      "schema"):
            self.assertEqual(table[label][-1].strip(), "same", label)

    def test_another_slot_is_named(self):
        # The same host in a slot of one CPU's quota (a container's --cpus=1): the quota and the
        # effective CPUs differ; a pinned run's fewer effective CPUs do not (the most any run had counts).
        slot = {"cpu_quota": "none", "effective_cpus": "2", "cpuset": "0-1", "slurm_cpus_per_task": "unset"}
        self.XEON = dict(self.XEON, **slot)
        pinned = lambda row: {"effective_cpus": "1"} if row["runtime"] == "llvm" else {}
        table, warning = self.compare({}, per_row=pinned)
        self.assertEqual(warning, [])
        self.assertEqual(table["CPUs effective"][-1].strip(), "same")
        table, warning = self.compare({"cpu_quota": "1", "effective_cpus": "1"})
        self.assertEqual(warning, ["warning: A and B ran on different machines or libraries (CPU quota, "
                                   "CPUs effective differ): every change below is theirs as much as the settings'"])
        self.assertEqual([c.strip() for c in table["CPU quota"]], ["none", "1"])
        self.assertEqual([c.strip() for c in table["cpuset"]], ["0-1", "same"])
        _, warning = self.compare({"slurm_cpus_per_task": "4"})
        self.assertIn("(Slurm CPUs per task differ)", warning[0])

    def test_the_openmp_library_is_compared_per_runtime(self):
        # B without llvm rows has no libomp: no difference. Another libgomp (a pip wheel's) is one;
        # a pinned run seeing 1 CPU is none (the most any run had counts).
        only_gomp = lambda row: row["runtime"] == "gomp"
        _, warning = self.compare({}, keep=only_gomp)
        self.assertEqual(warning, [])
        pinned = lambda row: {"available_cpus": "1"} if row["runtime"] == "llvm" else {}
        table, warning = self.compare({}, per_row=pinned)
        self.assertEqual(warning, [])
        self.assertEqual(table["CPUs available"][-1].strip(), "same")
        table, warning = self.compare({}, libs={"libgomp": "/venv/torch/lib/libgomp-a34b3233.so.1"})
        self.assertIn("(OpenMP library differ)", warning[0])
        self.assertIn("libgomp: /venv/torch/lib/libgomp-a34b3233.so.1", table["OpenMP library"][-1])


class TuneFiles(helpers.TempDir, unittest.TestCase):
    """Files of runs of a command (threadburn tune, run: bench = command), no
    steps: compared on the run's wall_ms, cpu_ms, omp_between_regions_ms and
    the --metric figure. B's passive point burns 20 % more CPU than A's."""
    COUNTERS = ("wall_ms", "cpu_ms", "omp_between_regions_ms", "metric")

    def write(self, name, cpu_factor):
        columns = schema.Columns.from_parts(["OMP_WAIT_POLICY"], ("command",), self.COUNTERS, ["omp_runtime"])
        path = self.path(name)
        with open(path, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(columns.all)
            for point, policy in (("plain", "unset"), ("passive", "passive")):
                for rep, (wall, cpu) in enumerate(((1000, 900), (1010, 910), (1020, 920), (1030, 930))):
                    factor = cpu_factor if point == "passive" else 1.0
                    row = {"schema_version": schema.SCHEMA_VERSION, "run_key": f"{point}-r{rep}", "status": "ok",
                           "study": point, "preset": point, "benchmark": "python3", "bench": "command",
                           "runtime": "gomp", "OMP_WAIT_POLICY": policy, "processes": 1, "command": "python3 t.py",
                           "repetition": rep, "proc_index": 0, "wall_ms": wall, "cpu_ms": cpu * factor,
                           "omp_between_regions_ms": 0, "metric": 100 + rep, "run_rows": 1}
                    w.writerow([schema.fmt_value(row.get(c)) for c in columns.all])
        return path

    def test_compares_runs_on_their_metrics(self):
        a, b = self.write("a.csv", 1.0), self.write("b.csv", 1.2)
        result = helpers.threadburn("compare", a, b)
        self.assertEqual(result.returncode, 0, result.stderr)
        header = next(ln for ln in result.stdout.splitlines() if ln.startswith("benchmark"))
        for metric in self.COUNTERS:
            self.assertIn(f"{metric} A", header)
        passive = next(ln for ln in result.stdout.splitlines() if "[passive]" in ln)
        self.assertIn("915", passive.split())   # A's CPU median
        self.assertIn("1098", passive.split())  # B's: 915 x 1.2
        self.assertIn("+20.0%", passive.split())
        result = helpers.threadburn("compare", a, b, "--fail-if-regress", "cpu_ms:10")
        self.assertEqual(result.returncode, 1)
        self.assertIn("regression: cpu_ms +20.0% (limit 10%): python3 | gomp OMP_WAIT_POLICY=passive [passive]",
                      result.stderr)
        self.assertEqual(helpers.threadburn("compare", a, b, "--fail-if-regress", "wall_ms:1").returncode, 0)

    def test_refuses_a_sweep_against_a_tune(self):
        result = helpers.threadburn("compare", A, self.write("t.csv", 1.0))
        helpers.assert_one_line_error(self, result, "one holds benchmark rows (sweep), the other runs of a command")


class NoiseRuleFromTheRows(helpers.TempDir, unittest.TestCase):
    """The noise threshold is the one the rows carry (noise_cv, written by the
    programs), not compare's own: the same cells (CVs 9.1 % and 7.1 % in A and
    B, 50 % in B's residual) are flagged at 0.05, only the 50 % at 0.2, none
    when the rows carry no rule (files older than schema 5)."""

    def rewritten(self, name, src, noise_cv):
        with open(src, newline="") as f:
            rows = list(csv.reader(f))
        i = rows[0].index("noise_cv")
        for r in rows[1:]:
            r[i] = noise_cv
        with open(self.path(name), "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows(rows)
        return self.path(name)

    def cells(self, noise_cv):
        a, b = self.rewritten("a.csv", A, noise_cv), self.rewritten("b.csv", B, noise_cv)
        result = helpers.threadburn("compare", a, b)
        self.assertEqual(result.returncode, 0, result.stderr)
        row = next(ln for ln in result.stdout.splitlines() if "KMP_BLOCKTIME=200" in ln)
        return row.count("(!"), result.stdout

    def test_threshold_read_from_rows(self):
        self.assertEqual(self.cells("0.05")[0], 3)
        self.assertEqual(self.cells("0.2")[0], 1)
        flagged, out = self.cells("")
        self.assertEqual(flagged, 0)
        self.assertIn("carry no noise_cv: their cells are not flagged", out)


class BadInput(helpers.TempDir, unittest.TestCase):
    def rewrite(self, name, edit_header=None, edit_row=None):
        with open(A, newline="") as f:
            rows = list(csv.reader(f))
        header, body = rows[0], rows[1:]
        if edit_header:
            header, body = edit_header(header, body)
        if edit_row:
            body = [edit_row(header, r) for r in body]
        path = self.path(name)
        with open(path, "w", newline="") as f:
            csv.writer(f, lineterminator="\n").writerows([header] + body)
        return path

    def assert_exit_2(self, args, message):
        result = helpers.threadburn("compare", *args)
        helpers.assert_one_line_error(self, result, f"threadburn compare: error: {message}")
        self.assertEqual(result.stdout, "")

    def test_missing_columns(self):
        def drop(header, body):
            keep = [i for i, c in enumerate(header) if c not in ("residual_cpu_ms", "repetition")]
            return [header[i] for i in keep], [[r[i] for i in keep] for r in body]
        path = self.rewrite("missing.csv", edit_header=drop)
        self.assert_exit_2([path, B], f"{path}: missing columns: repetition, residual_cpu_ms")

    def test_other_schema_version(self):
        def bump(header, row):
            return ["99" if c == "schema_version" else v for c, v in zip(header, row)]
        path = self.rewrite("v99.csv", edit_row=bump)
        self.assert_exit_2([A, path], f"{path}: schema_version 99, this threadburn reads {schema.SCHEMA_VERSION}")

    def test_a_schema_2_file_is_refused_by_version_not_by_columns(self):
        # compare_schema2.csv has the columns of schema 2 (extra_args, no sampler ...):
        # the one line must name the version, in either position.
        old = os.path.join(helpers.FIXTURES, "compare_schema2.csv")
        for args in ([old, B], [A, old]):
            with self.subTest(args=args):
                self.assert_exit_2(args, f"{old}: schema_version 2, this threadburn reads {schema.SCHEMA_VERSION} "
                                   "(columns differ between versions")

    def test_mixed_versions_in_one_file(self):
        def half(header, row):
            i = header.index("run_key")
            return ["2" if c == "schema_version" and row[i].endswith("r0") else v for c, v in zip(header, row)]
        path = self.rewrite("mixed.csv", edit_row=half)
        kept = helpers.read_rows(A)[0]["schema_version"]  # the fixture's own version, maybe an older readable one
        self.assert_exit_2([path, B], f"{path}: mixes schema versions 2, {kept}")

    def test_no_common_rows(self):
        def other_steps(header, row):
            return ["99" if c == "steps" else v for c, v in zip(header, row)]
        path = self.rewrite("other.csv", edit_row=other_steps)
        self.assert_exit_2([A, path], f"no common rows: no (knobs, benchmark) with status ok is in both {A} and "
                           f"{path}")

    def test_unreadable_and_bad_rule(self):
        self.assert_exit_2([self.path("none.csv"), B], f"{self.path('none.csv')}: cannot read: No such file")
        self.assert_exit_2([A, B, "--fail-if-regress", "speed:10"],
                           "argument --fail-if-regress: expected METRIC:PCT with METRIC one of step_ms, "
                           "residual_cpu_ms, samples_per_s, wall_ms, cpu_ms, omp_between_regions_ms and PCT >= 0, "
                           "got 'speed:10'")
        # tune's figure: which way is better is not in the file.
        self.assert_exit_2([A, B, "--fail-if-regress", "metric:10"], "argument --fail-if-regress: expected")
        self.assert_exit_2([A, B, "--format", "html"], "argument --format: invalid choice: 'html'")


if __name__ == "__main__":
    unittest.main()
