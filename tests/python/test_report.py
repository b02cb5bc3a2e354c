"""threadburn report (one self-contained HTML page) and the exports of a
verdict (--export-markdown, --export-json on tune, sweep and verdict): on the
committed reference results, on a run's files and on a tiny synthetic tune
whose verdict is known. They agree with what `threadburn verdict` prints and
with <stem>.verdict.json. The page in a real browser: test_report_browser.py."""
import csv
import json
import os
import re
import shutil
import unittest

import helpers
from threadburn.lib import rule as rules

RESULTS = os.path.join(helpers.REPO, "results")
REFERENCES = ("default.csv", "tune-sleep_step_sleep.csv", "tune-mnist_adadelta.csv")
RUN_FIXTURE = os.path.join(helpers.FIXTURES, "report_run")
SYNTHETIC_COLUMNS = ("schema_version", "run_key", "status", "reason", "grid", "study", "preset", "benchmark", "bench",
                     "runtime", "OMP_NUM_THREADS", "processes", "command", "metric_better", "repetition", "proc_index",
                     "wall_ms", "cpu_ms", "regions", "max_team", "omp_runtime", "metric", "point_key", "seed", "phase",
                     "rule")
# The rule of `tune --repetitions 3`: a fixed design (one look), on runs that record no rounds.
SYNTHETIC_RULE = rules.Rule(design="fixed", method="welch").text()


def synthetic_tune(path, fast_ms=50.0):
    """A tune of three runs each (a fixed design): plain near 100 ms, `fast`
    near fast_ms, the same CPU: with fast_ms 50 the verdict is CHANGE to fast,
    with 100 KEEP plain."""
    rows = []
    for study, base, threads in (("plain", 100.0, ""), ("fast", fast_ms, "2")):
        for rep, jitter in enumerate((-1.0, 0.0, 1.0)):
            rows.append({"schema_version": "4", "run_key": f"{study}-r{rep}", "status": "ok", "grid": "tune",
                         "study": study, "preset": "default", "benchmark": "command", "bench": "command",
                         "runtime": "gomp", "OMP_NUM_THREADS": threads or "unset", "processes": "1",
                         "command": "python3 train.py", "metric_better": "higher", "repetition": str(rep),
                         "proc_index": "0", "wall_ms": str(base + jitter), "cpu_ms": str(80.0 + jitter),
                         "regions": "10", "max_team": threads or "1", "omp_runtime": "libgomp", "metric": "",
                         "point_key": study, "seed": "7", "phase": "race", "rule": SYNTHETIC_RULE})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, SYNTHETIC_COLUMNS, restval="")
        w.writeheader()
        w.writerows(rows)
    return path


class Exports(helpers.TempDir, unittest.TestCase):
    def verdict(self, csv_path, *extra):
        md, js = self.path("v.md"), self.path("v.json")
        result = helpers.threadburn("verdict", csv_path, "--no-write", "--export-markdown", md, "--export-json", js,
                                    *extra)
        self.assertEqual(result.returncode, 0, result.stderr)
        with open(md) as f, open(js) as g:
            return result.stdout, f.read(), json.load(g)

    def test_exports_agree_with_what_verdict_prints_and_the_verdict_file(self):
        # `threadburn verdict CSV` reproduces the committed verdict file exactly, from the rule
        # recorded in the file; the exports are that data with the headline printed and a row
        # per setting, and the Markdown holds both.
        for name in REFERENCES:
            with self.subTest(file=name):
                printed, md, data = self.verdict(os.path.join(RESULTS, name))
                with open(os.path.join(RESULTS, name.replace(".csv", ".verdict.json"))) as f:
                    committed = json.load(f)
                self.assertEqual(data["export_schema"], 2)
                bare = {k: v for k, v in data.items() if k != "export_schema"}
                bare["workloads"] = [{k: v for k, v in w.items() if k not in ("headline", "settings")}
                                     for w in data["workloads"]]
                self.assertEqual(bare, committed)
                headlines = [ln.strip() for ln in printed.splitlines() if re.match(r"  (CHANGE|KEEP|UNDECIDED)", ln)]
                self.assertEqual([w["headline"] for w in data["workloads"]], headlines)
                for w in data["workloads"]:
                    self.assertEqual({s["setting"] for s in w["settings"]}, set(w["runs_per_setting"]))
                    if w["verdict"] == "change":
                        chosen = next(s for s in w["settings"] if s["setting"] == w["setting"])
                        self.assertEqual(chosen["role"], "chosen")
                    # Markdown: the headline as a quote, a row per setting with its ratio and interval.
                    self.assertIn(f"> {w['headline']}", md)
                    for s in w["settings"]:
                        self.assertRegex(md, rf"\n\| {re.escape(s['setting'])} \| {re.escape(s['role'])} \| "
                                             rf"{s['runs']} \|")

    def test_a_synthetic_tune_whose_verdict_is_known(self):
        csv_path = synthetic_tune(self.path("tune-x.csv"))
        printed, md, data = self.verdict(csv_path)
        w = data["workloads"][0]
        self.assertEqual((w["verdict"], w["setting"], w["baseline"]), ("change", "fast", "plain"))
        self.assertEqual(w["env"], {"OMP_NUM_THREADS": "2"})
        self.assertAlmostEqual(w["time_ratio"]["estimate"], 0.5, delta=0.01)
        self.assertIn("CHANGE to fast: time -50.0%", printed)
        self.assertIn("| fast | chosen | 3 | 49.99 | -50.0% [-52.0%, -47.9%] | 80 | +0.0% [-2.8%, +2.9%] |", md)
        self.assertIn("| plain | baseline | 3 | 100 |  | 80 |  |", md)
        same = synthetic_tune(self.path("tune-y.csv"), fast_ms=100.0)
        self.assertEqual(self.verdict(same)[2]["workloads"][0]["verdict"], "keep")

    def test_a_csv_without_its_rule_says_what_it_was_judged_by(self):
        # No rule column and no verdict file beside it: the defaults, said on the console and in
        # the verdict file, never silently.
        csv_path = synthetic_tune(self.path("tune-old.csv"))
        with open(csv_path) as f:
            lines = f.read().splitlines()
        i = lines[0].split(",").index("rule")
        with open(csv_path, "w") as f:
            f.write("\n".join(",".join(c for j, c in enumerate(ln.split(",")) if j != i) for ln in lines) + "\n")
        printed, _, data = self.verdict(csv_path)
        self.assertIn("note: rule from the defaults (the file records no rule): objective=balanced", printed)
        self.assertTrue(data["rule_from"].startswith("the defaults"))
        self.assertEqual((data["rule"]["method"], data["rule"]["design"]), ("welch", "race"))

    def test_an_interval_too_wide_to_bound_a_gain_prints_no_figure(self):
        # The device check's tune (results/gpu-check-h200-tune.csv): 3 runs a setting at alpha'
        # 8.3e-05, where the paired t's bound on a higher-is-better figure printed "The most any
        # setting could gain: your figure +1750017536950120311206...%": no number, the reason.
        printed, md, _ = self.verdict(os.path.join(RESULTS, "gpu-check-h200-tune.csv"))
        self.assertIn("What any setting could gain is not bounded yet: the intervals of 3 runs a setting reach "
                      "past +900.0%", printed)
        self.assertIsNone(re.search(r"[0-9]{7}", printed + md), printed)

    def test_an_unwritable_export_is_one_line(self):
        result = helpers.threadburn("verdict", os.path.join(RESULTS, "default.csv"), "--no-write",
                                    "--export-json", self.path("no", "such", "dir.json"))
        helpers.assert_one_line_error(self, result, "threadburn verdict: error: ", "cannot write")

    def test_tune_and_sweep_take_the_export_flags(self):
        for command in ("tune", "sweep"):
            with self.subTest(command=command):
                result = helpers.threadburn(command, "--help")
                self.assertIn("--export-markdown FILE", result.stdout)
                self.assertIn("--export-json FILE", result.stdout)


class Report(helpers.TempDir, unittest.TestCase):
    def report(self, csv_path, out=None):
        out = out or self.path("page.html")
        result = helpers.threadburn("report", csv_path, "-o", out)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertEqual(result.stdout.strip(), f"report: {out}")
        with open(out) as f:
            return f.read()

    def assert_self_contained(self, page):
        self.assertIn("Content-Security-Policy", page)
        sources = re.findall(r'<img [^>]*src="([^"]*)"', page)
        self.assertTrue(sources)
        self.assertTrue(all(s.startswith("data:image/png;base64,") for s in sources), [s[:40] for s in sources])
        self.assertNotRegex(page, r'(src|href)="https?:')
        for section in ("verdict", "evidence", "figures", "settings", "machine", "reproduce", "method"):
            self.assertIn(f'<section id="{section}">', page)
        self.assertLess(page.index('id="verdict"'), page.index('id="evidence"'))

    def test_a_synthetic_tune(self):
        page = self.report(synthetic_tune(self.path("tune-x.csv")))
        self.assert_self_contained(page)
        self.assertIn('<div class="verdict change"', page)
        self.assertIn('<p class="headline">CHANGE to fast: time -50.0%', page)
        self.assertIn("bin/threadburn tune --seed 7 --margin 0.05 --objective balanced -- python3 train.py", page)
        self.assertIn("docs/design.md#decisions</a>", page)

    def test_the_reference_results(self):
        for name in REFERENCES:
            with self.subTest(file=name):
                src = os.path.join(RESULTS, name)
                page = self.report(src)
                self.assert_self_contained(page)
                with open(os.path.join(RESULTS, name.replace(".csv", ".verdict.json"))) as f:
                    committed = json.load(f)
                for w in committed["workloads"]:
                    self.assertIn(f'<div class="verdict {w["verdict"]}"', page)
                printed = helpers.threadburn("verdict", src, "--no-write").stdout
                import html
                for line in printed.splitlines():
                    if re.match(r"  (CHANGE|KEEP|UNDECIDED)", line):
                        self.assertIn(f'<p class="headline">{html.escape(line.strip())}</p>', page)
        self.assertFalse(os.path.exists(os.path.join(RESULTS, "default.report.html")))

    def test_a_run(self):
        run_dir = shutil.copytree(RUN_FIXTURE, self.path("run"))
        page = self.report(os.path.join(run_dir, "run.csv"))
        self.assert_self_contained(page)
        self.assertIn("ONE RUN: no verdict", page)
        self.assertEqual(len(re.findall(r"<img ", page)), 2)  # time against CPU, the probe's timeline
        self.assertIn("bin/threadburn run --env OMP_NUM_THREADS=2 -- /usr/bin/python3", page)

    def test_default_out_beside_the_csv(self):
        csv_path = synthetic_tune(self.path("tune-x.csv"))
        result = helpers.threadburn("report", csv_path)
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertTrue(os.path.exists(self.path("tune-x.report.html")))

    def test_bad_inputs_are_one_line_and_write_nothing(self):
        other = helpers.write_file(self.path("other.csv"), "a,b\n1,2\n")
        empty = helpers.write_file(self.path("empty.csv"), "run_key,status,grid\n")
        for path, message in ((self.path("missing.csv"), "cannot read: No such file or directory"),
                              (other, "not a results CSV of threadburn sweep, tune or run"),
                              (empty, "no rows")):
            with self.subTest(path=path):
                out = self.path("out.html")
                result = helpers.threadburn("report", path, "-o", out)
                helpers.assert_one_line_error(self, result, "threadburn report: error: ", message)
                self.assertFalse(os.path.exists(out))
                self.assertEqual(result.stdout, "")


if __name__ == "__main__":
    unittest.main()
