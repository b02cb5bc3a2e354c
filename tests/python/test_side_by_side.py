"""The verdict's side-by-side line (export/views.py, side_by_side): the chosen
setting beside the cheapest one within the margin of the fastest. On tunes of
synthetic runs whose truth is set by hand (paired by round, so which
comparisons are tight and which are lost in noise is known), read as a user
reads them, from `threadburn verdict CSV`:

* only the fastest within its own margin (its runs too noisy for any other
  setting to be shown that close): the line says "the fastest", never that the
  fastest, at 2.5 times the chosen setting's CPU, is "the cheapest";
* the settings shown within the margin all cost more than the chosen one: no
  costlier setting is called the cheapest;
* a setting truly cheaper within the margin is still named the cheapest.
"""
import csv
import re
import unittest

import helpers
from threadburn.lib import rule as rules

COLUMNS = ("schema_version", "run_key", "status", "grid", "study", "preset", "benchmark", "bench", "runtime",
           "processes", "command", "repetition", "proc_index", "wall_ms", "cpu_ms", "regions", "point_key", "seed",
           "phase", "round", "rule")
RULE = rules.Rule(design="fixed", method="paired").text()
ROUNDS = 8
# Each round's shared effect on the settings of one group (the run order's drift): the "calm" group
# moves by under 1 %, the "wild" one by a factor of two, the same for every setting in it, so
# settings of one group are compared tightly with each other and loosely with the other group's.
CALM = (1.0, 1.004, 0.997, 1.002, 0.999, 1.003, 0.998, 1.001)
WILD = (0.7, 1.4, 0.72, 1.38, 0.69, 1.41, 0.71, 1.39)


def write_tune(path, settings):
    """settings: [(name, time ms, CPU ms, round effects)], the first the baseline (plain)."""
    rows = []
    for name, time_ms, cpu_ms, effects in settings:
        for r in range(ROUNDS):
            rows.append({"schema_version": "4", "run_key": f"{name}-r{r}", "status": "ok", "grid": "tune",
                         "study": name, "preset": "", "benchmark": "command", "bench": "command",
                         "runtime": "gomp", "processes": "1", "command": "python3 train.py", "repetition": str(r),
                         "proc_index": "0", "wall_ms": f"{time_ms * effects[r]:.3f}", "cpu_ms": f"{cpu_ms:.1f}",
                         "regions": "10", "point_key": name, "seed": "7", "phase": "race", "round": str(r),
                         "rule": RULE})
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return path


class SideBySide(helpers.TempDir, unittest.TestCase):
    def verdict(self, settings, *extra):
        p = helpers.threadburn("verdict", write_tune(self.path("tune-x.csv"), settings), "--no-write", *extra)
        self.assertEqual(p.returncode, 0, p.stderr)
        found = [ln.strip() for ln in p.stdout.splitlines() if re.match(r"\s+(chosen|kept|leaning) ", ln)]
        self.assertEqual(len(found), 1, p.stdout)
        return p.stdout, found[0]

    def test_only_the_fastest_within_its_margin_is_called_the_fastest(self):
        # The main job's case: bt0 as fast as plain at 40 % of its CPU (the change); bt200 the
        # fastest by its estimate, at 2.5 times bt0's CPU, its runs too wild for any setting
        # to be shown within 5 % of it.
        out, line = self.verdict([("plain", 100.0, 200.0, CALM), ("bt0", 100.2, 80.0, CALM),
                                   ("bt200", 88.0, 203.0, WILD)])
        self.assertRegex(out, r"\n  CHANGE to bt0: ")
        self.assertTrue(line.startswith("chosen bt0: "), line)
        self.assertIn("; the fastest, bt200: ", line)
        self.assertIn("no other setting is shown within 5% of it", line)
        self.assertNotIn("cheapest", line)

    def test_no_costlier_setting_is_called_the_cheapest(self):
        # F and X move together (tight with each other, loose with plain and C): both within 5 %
        # of the fastest (F), both costlier than the chosen C, which is not within 5 % of F.
        out, line = self.verdict([("plain", 100.0, 200.0, CALM), ("C", 100.2, 80.0, CALM),
                                   ("F", 88.0, 210.0, WILD), ("X", 88.5, 190.0, WILD)])
        self.assertRegex(out, r"\n  CHANGE to C: ")
        self.assertNotIn("cheapest", line)
        self.assertIn("; the fastest, F: ", line)
        self.assertIn("the settings shown within 5% of it (F, X) all use more CPU than C", line)

    def test_a_cheaper_setting_within_the_margin_is_the_cheapest(self):
        # F the fastest, X 1 % slower at half its CPU: by time F is chosen and X named the
        # cheapest within 5 % of the fastest; balanced chooses X itself.
        settings = [("plain", 100.0, 200.0, CALM), ("F", 80.0, 200.0, CALM), ("X", 80.8, 100.0, CALM)]
        _, line = self.verdict(settings, "--objective", "time")
        self.assertTrue(line.startswith("chosen F: "), line)
        self.assertIn("; the cheapest within 5% of the fastest, X: ", line)
        _, line = self.verdict(settings, "--objective", "balanced")
        self.assertTrue(line.startswith("chosen X: "), line)
        self.assertIn("; it is also the cheapest within 5% of the fastest", line)

    def test_the_fastest_alone_and_chosen(self):
        # F the fastest by far (X 20 % slower, shown): chosen by time, alone within its margin.
        _, line = self.verdict([("plain", 100.0, 200.0, CALM), ("F", 50.0, 200.0, CALM), ("X", 60.0, 100.0, CALM)],
                               "--objective", "time")
        self.assertTrue(line.startswith("chosen F: "), line)
        self.assertIn("it is also the fastest, and no other setting is shown within 5% of it", line)


if __name__ == "__main__":
    unittest.main()
