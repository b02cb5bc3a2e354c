"""results/README.md documents every column the sweep writes for the real
programs: schema.Columns of their own descriptions (skipped without a build
of them). A column counts as documented when the README names it in
backquotes (`step_ms`); the env_<KNOB> context columns may instead be named
together as `env_<KNOB>` (or `env_*`)."""
import os
import re
import unittest

import helpers
from threadburn.lib import programs, schema
from threadburn.lib.errors import ThreadburnError

BUILD = helpers.real_build_dir()
README = os.path.join(helpers.REPO, "results", "README.md")


def undocumented(columns, text):
    env_together = re.search(r"`env_(<[A-Za-z_]+>|\*)`", text) is not None
    return [c for c in columns if f"`{c}`" not in text and not (c.startswith("env_") and env_together)]


class Undocumented(unittest.TestCase):
    def test_the_check_itself(self):
        self.assertEqual(undocumented(["a", "env_X", "b"], "`a` and `env_<KNOB>`"), ["b"])
        self.assertEqual(undocumented(["a", "env_X"], "`a`"), ["env_X"])
        self.assertEqual(undocumented(["step_ms"], "step_ms without quotes"), ["step_ms"])


class Header(unittest.TestCase):
    def test_the_recorded_programs_give_a_header(self):
        # what a sweep builds from the programs' descriptions before anything runs
        try:
            columns = schema.Columns(helpers.recorded_descriptions())
        except ThreadburnError as e:
            self.fail(f"the programs recorded in tests/fixtures/programs give no results header: {e}")
        self.assertEqual(len(columns.all), len(set(columns.all)))

    def test_names_used_twice_are_one_line(self):
        doc = helpers.recording(helpers.BENCHES[0])
        clashing = dict(doc, context=dict(doc["context"], step_ms="1"))  # a context key named like a counter
        with self.assertRaises(ThreadburnError) as caught:
            schema.Columns([programs.Description.from_json(clashing)])
        self.assertEqual(str(caught.exception), "column names used twice: step_ms (a flag, counter or context key "
                         "of the programs shares a name with another)")


@unittest.skipUnless(BUILD, "no build of the real programs ($THREADBURN_BUILD_DIR or build/bench/*_bench)")
class Documentation(unittest.TestCase):
    def test_every_column_of_the_real_programs_is_documented(self):
        descriptions = [p.describe() for p in programs.programs(BUILD).values()]
        try:
            columns = schema.Columns(descriptions).all
        except ThreadburnError as e:
            self.fail(f"the programs of {BUILD} give no results header: {e}")
        with open(README) as f:
            text = f.read()
        missing = undocumented(columns, text)
        self.assertEqual(missing, [], f"results/README.md does not name {len(missing)} of the {len(columns)} "
                         f"columns the sweep writes (schema {schema.SCHEMA_VERSION}): {', '.join(missing)}")


if __name__ == "__main__":
    unittest.main()
