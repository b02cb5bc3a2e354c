"""scripts/gpu_host.sh build makes every library and program the package
looks for in a build folder: the GPU host builds a list of targets, not the
whole tree, and the device check's tune of a GPU training once stopped at its
start because libthreadburn_phase.so was not in that list (results/
gpu-check-h200.txt, the fifth run). The names are read from the package's
source, so a library added there and not to the script turns this red."""
import glob
import os
import re
import unittest

import helpers

SCRIPT = os.path.join(helpers.REPO, "scripts", "gpu_host.sh")


def package_names():
    """Every shared library (libthreadburn_*.so) and program (find_program)
    the package's source names."""
    libraries, programs = set(), set()
    for path in glob.glob(os.path.join(helpers.PYTHON_DIR, "threadburn", "**", "*.py"), recursive=True):
        with open(path) as f:
            text = f.read()
        libraries |= set(re.findall(r'"(libthreadburn_\w+\.so)"', text))
        programs |= set(re.findall(r'find_program\("(\w+)"', text))
    return libraries, programs


def script_targets():
    """The CMake targets of `gpu_host.sh build` (its targets=(...) and targets+=(...) lines)."""
    with open(SCRIPT) as f:
        text = f.read()
    found = set()
    for words in re.findall(r"\btargets\+?=\(([^)]*)\)", text):
        found |= set(words.split())
    return found


class GpuHostBuild(unittest.TestCase):
    def test_the_script_names_its_targets(self):
        self.assertIn("threadburn_probe", script_targets())

    def test_every_library_and_program_the_package_finds_is_built(self):
        libraries, programs = package_names()
        self.assertTrue(libraries and programs, (libraries, programs))
        targets = script_targets()
        built = {f"lib{t}.so" for t in targets} | targets
        self.assertEqual(sorted(libraries - built), [], "libraries gpu_host.sh build does not make")
        self.assertEqual(sorted(programs - built), [], "programs gpu_host.sh build does not make")


if __name__ == "__main__":
    unittest.main()
