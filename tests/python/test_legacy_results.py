"""Why the reader of schema-3 results (keys.legacy_layout, "3" in
schema.READABLE_VERSIONS) stays: eleven committed reference CSVs are of
schema 3, and regenerating them (scripts/references.sh) takes about an
hour of this machine for numbers that would not change what FINDINGS.md
says. What schema 3 lacks is only bookkeeping: the knob_layout column that
names which columns are environment knobs and which program flags (its
layout is implied: the knob columns sit between runtime and repetition),
the run columns round/phase, the tune column metric_better, the rules
columns of schema 5 (noise_cv, burn_threshold_cores, throughput_counter,
throughput_unit), and it spells the flag data_dir as data-dir.

Known answers: the layout legacy_layout reads is the one built here from
other sources, the knob table (lib/knobs.py) and the recorded programs'
flags; every row gives the same setting and workload through the legacy
path as through an explicit knob_layout (the path of schema 4 and later).
That their tables come out exactly as before is docs.findings: FINDINGS.md,
generated from them, is checked byte for byte (`threadburn findings --check`).
When the last of these files is regenerated, this test fails on the list:
then delete legacy_layout and "3" from READABLE_VERSIONS with it.
"""
import csv
import glob
import os
import unittest

import helpers
from threadburn.lib import keys, knobs, schema

RESULTS = os.path.join(helpers.REPO, "results")
LEGACY = ("batch_workers.csv", "blocktime.csv", "cuda.csv", "ddp.csv", "launcher.csv", "loader.csv", "onednn.csv",
          "oversubscription.csv", "runtime.csv", "sampler.csv", "seed000.csv")
ADDED_SINCE = ("knob_layout", "round", "phase", "metric_better", "noise_cv", "burn_threshold_cores",
               "throughput_counter", "throughput_unit", "data_dir")
OLD_SPELLING = {"data_dir": "data-dir"}  # schema 3 wrote this flag with '-'


def read(name):
    with open(os.path.join(RESULTS, name), newline="") as f:
        return list(csv.DictReader(f))


def schema_of(path):
    with open(path, newline="") as f:
        versions = {r.get("schema_version") for r in csv.DictReader(f)}
    return versions.pop() if len(versions) == 1 else versions


def explicit_layout(header):
    """The layout from the knob table and the programs' flags (not from where the columns sit)."""
    env = [c for c in header if knobs.get(c) is not None and knobs.get(c).is_column]
    flags = set()
    for desc in helpers.recorded_descriptions():
        flags |= {OLD_SPELLING.get(f, f) for f in desc.flags if f not in schema.SWEEP_FLAGS}
    return keys.Layout(tuple(env), tuple(c for c in header if c in flags))


class LegacyReferences(unittest.TestCase):
    def test_which_files_are_schema_3(self):
        found = sorted(os.path.basename(p) for p in glob.glob(os.path.join(RESULTS, "*.csv"))
                       if schema_of(p) == "3")
        self.assertEqual(found, sorted(LEGACY), "the schema-3 reference CSVs changed: update LEGACY (and when "
                         "none is left, remove keys.legacy_layout and \"3\" from schema.READABLE_VERSIONS)")
        self.assertIn("3", schema.READABLE_VERSIONS)

    def test_what_they_lack_is_bookkeeping(self):
        for name in LEGACY:
            with self.subTest(file=name):
                header = list(read(name)[0])
                self.assertEqual([c for c in ADDED_SINCE if c in header], [])
                self.assertIn("data-dir", header)

    def test_they_read_as_with_an_explicit_layout(self):
        for name in LEGACY:
            with self.subTest(file=name):
                rows = helpers.typed(read(name))
                explicit = explicit_layout(list(rows[0].columns()))
                self.assertEqual(keys.layout(rows[0]), explicit)
                self.assertIn("OMP_NUM_THREADS", explicit.env)
                self.assertIn("gap_ms", explicit.flags)
                text = explicit.text()
                for row in rows:
                    modern = row.copy(knob_layout=text)
                    self.assertEqual(keys.setting_of(row), keys.setting_of(modern))
                    self.assertEqual(keys.workload_of(row), keys.workload_of(modern))


if __name__ == "__main__":
    unittest.main()
