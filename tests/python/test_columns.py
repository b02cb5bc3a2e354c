"""One source for every column name (lib/schema.py's kinds, lib/records.py's
Row): every column the Python side names has its kind there, each named
program column is one the programs (or the probe, or a committed results
file) really have, a row reads each cell as its kind, and no module but the
CSV module reads a cell by a name it spells itself."""
import ast
import glob
import json
import os
import tempfile
import unittest

import helpers
from threadburn.lib import schema
from threadburn.lib.records import Row

PACKAGE = os.path.join(helpers.PYTHON_DIR, "threadburn")
PROBE_DESCRIPTION = os.path.join(helpers.FIXTURES, "gpu_probe", "describe.json")
# The CSV module: the only files that read or write a cell by a name spelled there.
CSV_MODULE = {"lib/records.py", "lib/schema.py"}
# bench/decisions.py's own file (decisions.csv is no results file), laid out as it wrote it.
OWN_COLUMNS = {("export/findings.py", "decisions_table")}
ACCESSORS = {"text", "number", "integer", "has", "set"}


def program_columns():
    """Every counter, flag and context key of the recorded programs (cpu and
    cuda) and of the probe's recorded description."""
    names = set()
    for path in glob.glob(os.path.join(helpers.PROGRAM_FIXTURES, "*.json")) + [PROBE_DESCRIPTION]:
        with open(path) as f:
            doc = json.load(f)
        names |= {c["name"] for c in doc["counters"]} | set(doc["context"])
        flags = doc.get("flags", [])
        names |= {f["name"] for f in flags} if isinstance(flags, list) else set(flags)
    return names


def committed_columns(*names):
    """The header columns of results/*.csv (or of the files named)."""
    paths = [os.path.join(helpers.REPO, "results", n) for n in names] or glob.glob(
        os.path.join(helpers.REPO, "results", "*.csv"))
    return set().union(*(helpers.read_header(p) for p in paths))


def spelled_reads(path, rel):
    """(file, top-level function, call) of every row.text("name") style call:
    an accessor of ACCESSORS whose first argument is a string literal."""
    with open(path) as f:
        tree = ast.parse(f.read())
    found = []
    for top in tree.body:
        name = top.name if isinstance(top, (ast.FunctionDef, ast.ClassDef)) else "<module>"
        for node in ast.walk(top):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ACCESSORS
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                found.append((rel, name, f"{node.func.attr}({node.args[0].value!r}) line {node.lineno}"))
    return found


class Kinds(unittest.TestCase):
    def test_the_sweeps_own_columns_all_have_a_kind(self):
        columns = schema.Columns(helpers.recorded_descriptions())
        own = [c for c in columns.all if c not in columns.counters + columns.context + columns.flags + columns.env_knobs]
        self.assertEqual([c for c in own if c not in schema.SWEEP_KINDS], [])

    def test_every_program_column_named_is_one_they_have(self):
        known = program_columns() | committed_columns()
        self.assertEqual(sorted(set(schema.PROGRAM_KINDS) - known), [])

    def test_the_other_files_columns_are_theirs(self):
        self.assertEqual(sorted(set(schema.OTHER_KINDS) - committed_columns("overheads.csv", "fleet_ddp.csv")), [])

    def test_every_kind_is_a_kind(self):
        kinds = {kind for kind, _ in schema.column_kinds().values()}
        self.assertLessEqual(kinds, {schema.TEXT, schema.NUMBER, schema.INTEGER})


class Reading(unittest.TestCase):
    def test_each_cell_reads_as_its_kind(self):
        row = Row({"gap_ms": "100", "step_ms": "1.5", "status": "ok", "processes": "", "cpu_ms": "n/a",
                   "OMP_NUM_THREADS": "4", "world_size": ""})
        self.assertEqual((row.gap_ms, type(row.gap_ms)), (100, int))
        self.assertEqual(row.step_ms, 1.5)
        self.assertIsNone(row.cpu_ms)          # not a number
        self.assertIsNone(row.wall_ms)         # absent
        self.assertIsNone(row.world_size)      # empty, no default
        self.assertEqual(row.processes, 1)     # empty: its default
        self.assertEqual(row.phase, "race")    # absent: its default (files older than schema 4)
        self.assertEqual(row.OMP_NUM_THREADS, "4")  # a knob column, from the knob table: text
        self.assertEqual(row.reason, "")

    def test_an_executors_values_read_as_the_file_will(self):
        row = Row(processes=2, repetition=3)
        row.overlap = 0.97
        row.status = "ok"
        self.assertEqual((row.processes, row.overlap, row.status), (2, 0.97, "ok"))
        self.assertEqual(row.cells(["processes", "overlap", "status", "repetition"]), ["2", "0.97", "ok", "3"])
        self.assertEqual(Row(bench=7).bench, "7")  # text of a number: as written

    def test_the_class_holds_the_column(self):
        row = Row({"step_ms": "2"})
        self.assertEqual((Row.step_ms.name, Row.step_ms.kind), ("step_ms", schema.NUMBER))
        self.assertEqual(Row.step_ms(row), 2.0)

    def test_a_misspelt_column_is_refused(self):
        with self.assertRaises(TypeError):
            Row(statsu="ok")
        with self.assertRaises(TypeError):
            Row().update(statsu="ok")
        with self.assertRaises(AttributeError):
            Row().statsu = "ok"
        Row().update({"a_counter_of_a_program": 1})  # a dict of any columns (a description's) is fine


class SpelledOnce(unittest.TestCase):
    def test_no_module_reads_a_cell_by_a_name_it_spells(self):
        found = []
        for path in glob.glob(os.path.join(PACKAGE, "**", "*.py"), recursive=True):
            rel = os.path.relpath(path, PACKAGE)
            if rel not in CSV_MODULE:
                found += [f for f in spelled_reads(path, rel) if f[:2] not in OWN_COLUMNS]
        self.assertEqual(found, [], "read the cell through its Row attribute (schema.column_kinds)")

    def test_the_check_sees_one(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = helpers.write_file(os.path.join(tmp, "x.py"), "def f(row):\n    g = lambda r: r.has('metric')\n"
                                      "    return row.number('step_ms') + row.text(name)\n")
            self.assertEqual(sorted(spelled_reads(path, "x.py")), [("x.py", "f", "has('metric') line 2"),
                                                          ("x.py", "f", "number('step_ms') line 3")])


if __name__ == "__main__":
    unittest.main()
