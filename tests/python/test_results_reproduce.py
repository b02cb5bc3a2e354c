"""Every committed verdict reproduces: for each results/<stem>.verdict.json,
`threadburn verdict --no-write` on results/<stem>.csv (by the rule its rows
recorded) gives the same verdict file: every workload's verdict, setting,
figures and evidence, and the same rule (results/README.md, "Regenerating
the references"). A reader who re-runs the project's own command on its own
results gets the answer it committed."""
import glob
import json
import math
import os
import unittest

import helpers
from threadburn.commands import verdict
from threadburn.export import jsonfile

RESULTS = os.path.join(helpers.REPO, "results")


def recomputed(csv_path):
    args = type("Args", (), {"objective": None, "margin": None, "looks": None, "baseline": None})()
    return json.loads(jsonfile.verdict_text(verdict.of_file(csv_path, args)))


def differences(committed, now, where=""):
    """Where two JSON values differ, as 'path: committed != now' lines."""
    if isinstance(committed, dict) and isinstance(now, dict):
        out = []
        for k in sorted(set(committed) | set(now)):
            out += differences(committed.get(k), now.get(k), f"{where}.{k}")
        return out
    if isinstance(committed, list) and isinstance(now, list) and len(committed) == len(now):
        return [d for i, (a, b) in enumerate(zip(committed, now)) for d in differences(a, b, f"{where}[{i}]")]
    if isinstance(committed, float) and isinstance(now, float) and math.isclose(committed, now, rel_tol=1e-6):
        return []  # another scipy's last digits of a quantile far in the tail (an interval's end at 1e+217)
    return [] if committed == now else [f"{where}: {json.dumps(committed)[:160]} != {json.dumps(now)[:160]}"]


class CommittedVerdicts(unittest.TestCase):
    def test_each_reproduces_from_its_csv(self):
        files = sorted(glob.glob(os.path.join(RESULTS, "*.verdict.json")))
        self.assertGreaterEqual(len(files), 10)
        for path in files:
            with self.subTest(os.path.basename(path)):
                with open(path) as f:
                    committed = json.load(f)
                csv_path = path.removesuffix(".verdict.json") + ".csv"
                self.assertTrue(os.path.exists(csv_path), f"{path}: no CSV beside it")
                now = recomputed(csv_path)
                self.assertEqual(committed.get("source"), os.path.basename(csv_path),
                                 "the file names another CSV than the one beside it")
                self.assertEqual(differences(committed, now), [])

    def test_the_comparison_sees_a_changed_verdict(self):
        a = {"workloads": [{"verdict": "keep", "time_ratio": {"estimate": 0.99}}]}
        b = {"workloads": [{"verdict": "undecided", "time_ratio": {"estimate": 0.99}}]}
        self.assertEqual(differences(a, b), ['.workloads[0].verdict: "keep" != "undecided"'])
        self.assertEqual(differences(a, a), [])
        c = {"workloads": [{"verdict": "keep", "time_ratio": {"estimate": 0.98}}]}
        self.assertEqual(differences(a, c), [".workloads[0].time_ratio.estimate: 0.99 != 0.98"])


class RuleSaid(unittest.TestCase):
    """`verdict` says when the rule it applies is not this threadburn's own,
    or not the one the file was made by."""

    def notes(self, stem, **asked):
        args = type("Args", (), dict({"objective": None, "margin": None, "looks": None, "baseline": None}, **asked))()
        path = os.path.join(RESULTS, stem + ".csv")
        return "\n".join(verdict.rule_notes(verdict.of_file(path, args), None))

    def test_an_older_rule_is_named(self):
        self.assertIn("judged by rule version 2, as the rows recorded it, the rule the file was made by",
                      self.notes("tune-sleep_step_sleep"))
        self.assertNotIn("predates", self.notes("tune-sleep_step_sleep"))
        self.assertIn("its text predates `confirm`", self.notes("tune-param-dataloader_workers"))
        self.assertEqual(self.notes("tune-host-mnist_adadelta", objective=None).count("\n"), 0)

    def test_a_rule_asked_on_top_is_not_the_files(self):
        said = self.notes("default", margin=0.1)
        self.assertIn("not the rule the file was made by: the rows with --margin 0.1", said)
        self.assertNotIn("the rule the file was made by (this", said)

    def test_a_legacy_rule_reads_back_as_written(self):
        from threadburn.lib import rule as rules
        old = ("objective=balanced;margin=0.05;alpha=0.05;design=race;method=paired;disturbed_cores=0.25;"
               "cpu_floor_cores=0.05;confirm_alpha=0.05;version=2")
        r = rules.parse(old)
        self.assertTrue(r.legacy_disturbed)
        self.assertEqual(r.text(), old)
        self.assertNotIn("confirm", r.to_json())
        self.assertFalse(rules.parse(rules.Rule().text()).legacy_disturbed)
        self.assertNotIn("legacy", rules.Rule().text())


if __name__ == "__main__":
    unittest.main()
