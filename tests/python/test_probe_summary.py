"""Reading the probe's summaries (lib/probe.py, load_summary and reports):
one bad field never makes a run unreadable.

fixtures/probe_summary/probe-4106.json is a real summary (a probed
`python3 -c 'import time; time.sleep(0.3)'`) whose context field
dnnl_cpu_isa holds what an older probe wrote there on a CPU with a long
oneDNN ISA name: the freed heap bytes of a destroyed std::string,
"\\xda^\\x93F" then four NULs and "ore_bf16" (not UTF-8: 0xda begins a
two-byte character that '^' breaks off). Every other field must still be
read, and the warning must name the field.
"""
import json
import os
import shutil
import tempfile
import unittest

import helpers  # noqa: F401 (the package on sys.path)

from threadburn.lib import probe
from threadburn.lib.errors import ThreadburnError

CORRUPT = os.path.join(helpers.FIXTURES, "probe_summary")


class ProbeSummary(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, self.tmp)
        self.warnings = []

    def write(self, raw):
        path = os.path.join(self.tmp, "probe-77.json")
        with open(path, "wb") as f:
            f.write(raw)
        return path

    def test_a_field_of_freed_heap_bytes_is_named_and_the_rest_read(self):
        found = probe.reports(CORRUPT, warn=self.warnings.append)
        self.assertEqual(len(found), 1)
        r = found[0]
        self.assertEqual(r.pid, 4106)
        self.assertEqual(r.counters["cpu_ms"], 81.384431)  # the fields around it, read as written
        self.assertEqual(r.summary["context"]["omp_runtime"], "none")
        # As Python's own decoder replaces them: 0xda (cut off by '^') and
        # the lone 0x93 are one U+FFFD each; the escaped NULs are NULs.
        self.assertEqual(r.summary["context"]["dnnl_cpu_isa"], "\ufffd^\ufffdF\0\0\0\0ore_bf16")
        self.assertEqual(len(self.warnings), 1)
        self.assertIn("context.dnnl_cpu_isa", self.warnings[0])
        self.assertIn("probe-4106.json", self.warnings[0])

    def test_the_default_warning_goes_to_stderr(self):
        import contextlib
        import io
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            probe.reports(CORRUPT)
        self.assertIn("warning", err.getvalue())
        self.assertIn("context.dnnl_cpu_isa", err.getvalue())

    def test_a_clean_summary_warns_nothing(self):
        path = self.write(json.dumps({"pid": 77, "counters": {"regions": 3}, "context": {"k": "caf\u00e9 \ufeff"}},
                                     ensure_ascii=False).encode())
        self.assertEqual(probe.load_summary(path, self.warnings.append)["context"]["k"], "caf\u00e9 \ufeff")
        self.assertEqual(self.warnings, [])

    def test_bad_bytes_in_a_key_and_in_a_list_are_named(self):
        path = self.write(b'{"pid": 77, "threads": [{"name": "w\xffk"}], "ctx": {"a\xc3": "x"}}')
        summary = probe.load_summary(path, self.warnings.append)
        self.assertEqual(summary["threads"][0]["name"], "w\ufffdk")
        self.assertIn("threads.0.name", self.warnings[0])
        self.assertIn("ctx.a\ufffd", self.warnings[0])

    def test_a_raw_control_character_in_a_string_is_taken(self):
        path = self.write(b'{"pid": 77, "command": "a\tb\x01"}')
        self.assertEqual(probe.load_summary(path, self.warnings.append)["command"], "a\tb\x01")

    def test_a_summary_cut_short_names_where_it_stopped(self):
        with open(os.path.join(CORRUPT, "probe-4106.json"), "rb") as f:
            raw = f.read()
        path = self.write(raw[:raw.index(b'"cpu_main_ms"') + 20])
        with self.assertRaises(ThreadburnError) as e:
            probe.load_summary(path, self.warnings.append)
        msg = str(e.exception)
        self.assertIn("unreadable probe summary", msg)
        self.assertIn("line 12", msg)
        self.assertIn("'cpu_main_ms'", msg)

    def test_not_an_object(self):
        with self.assertRaises(ThreadburnError) as e:
            probe.load_summary(self.write(b"[1, 2]"), self.warnings.append)
        self.assertIn("not an object", str(e.exception))


if __name__ == "__main__":
    unittest.main()
