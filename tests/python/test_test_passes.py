"""scripts/test_passes.py: the tests of some labels split into those that may
share the machine and those that run alone (RUN_SERIAL), numbered as ctest
numbers them (the order of its whole listing), on a listing of known content."""
import importlib.util
import os
import unittest

import helpers

spec = importlib.util.spec_from_file_location("test_passes", os.path.join(helpers.REPO, "scripts", "test_passes.py"))
test_passes = importlib.util.module_from_spec(spec)
spec.loader.exec_module(test_passes)


def listing(*tests):
    """ctest --show-only=json-v1's shape: (name, labels, serial) per test."""
    out = []
    for name, labels, serial in tests:
        props = [{"name": "LABELS", "value": labels}, {"name": "TIMEOUT", "value": 60}]
        if serial is not None:
            props.append({"name": "RUN_SERIAL", "value": serial})
        out.append({"name": name, "properties": props})
    return {"kind": "ctestInfo", "tests": out}


class Passes(unittest.TestCase):
    DOC = listing(("a", ["unit"], True), ("b", ["unit"], None), ("c", ["build"], True), ("d", ["bench"], True),
                  ("e", ["bench", "extra"], False), ("f", [], None), ("g", ["unit"], None))

    def test_split_by_run_serial_and_numbered_over_the_whole_listing(self):
        self.assertEqual(test_passes.passes(self.DOC, "^(unit|bench)$"), ([2, 5, 7], [1, 4]))

    def test_labels_are_matched_whole_by_the_regex(self):
        self.assertEqual(test_passes.passes(self.DOC, "^(build)$"), ([], [3]))
        self.assertEqual(test_passes.passes(self.DOC, "^(unitx)$"), ([], []))

    def test_ctest_lists(self):
        self.assertEqual(test_passes.ids([2, 5, 7]), "0,0,0,2,5,7")
        self.assertEqual(test_passes.ids([]), "none")


if __name__ == "__main__":
    unittest.main()
