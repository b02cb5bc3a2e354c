"""The python the command runs under (python/threadburn/lib/interpreter.py): a
python3 without scipy hands the command to the first one that has it, as on
the GPU host where /usr/bin/python3 has no scipy and the PyTorch wheel's
virtual environment has it (the first device check stopped there: `bin/threadburn
--help` failed with ModuleNotFoundError).

The known answers are made here: a python3 that cannot import scipy (Debian's
python3 with -S: no site packages) and virtual environments of Debian's python3
with its site packages (scipy importable, each at its own path)."""
import os
import shutil
import subprocess
import tempfile
import unittest

import helpers


class Interpreter(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="tb-interp-")
        cls.nosci = os.path.join(cls.dir, "nosci")
        os.makedirs(cls.nosci)
        helpers.write_file(os.path.join(cls.nosci, "python3"), '#!/bin/sh\nexec /usr/bin/python3 -S "$@"\n')
        os.chmod(os.path.join(cls.nosci, "python3"), 0o755)
        cls.venvs = {}
        for name in ("venv1", "venv2"):
            subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", "--system-site-packages",
                            os.path.join(cls.dir, name)], check=True)
            cls.venvs[name] = os.path.join(cls.dir, name, "bin", "python3")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def version(self, path, **extra):
        """`python3 -m threadburn --version` started by the python3 without scipy."""
        env = helpers.clean_env(PYTHONPATH=helpers.PYTHON_DIR, PATH=os.pathsep.join(path), **extra)
        return subprocess.run([os.path.join(self.nosci, "python3"), "-m", "threadburn", "--version"],
                              capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)

    def test_the_stand_in_has_no_scipy(self):
        # The premise: without it every other test here would pass for nothing.
        p = subprocess.run([os.path.join(self.nosci, "python3"), "-c", "import scipy"], capture_output=True)
        self.assertNotEqual(p.returncode, 0)

    def test_first_python3_on_path_with_scipy(self):
        r = self.version([self.nosci, os.path.dirname(self.venvs["venv2"]), os.path.dirname(self.venvs["venv1"])])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"under {self.venvs['venv2']} (", r.stdout)
        self.assertIn("scipy ", r.stdout)
        self.assertIn("chosen because", r.stdout)

    def test_threadburn_python_before_path(self):
        r = self.version([self.nosci, os.path.dirname(self.venvs["venv2"])], THREADBURN_PYTHON=self.venvs["venv1"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(f"under {self.venvs['venv1']} (", r.stdout)

    def test_the_chosen_python_runs_a_command(self):
        # Not only --version: a command that imports scipy (the decision rule) runs to its end.
        env = helpers.clean_env(PYTHONPATH=helpers.PYTHON_DIR,
                                PATH=os.pathsep.join([self.nosci, os.path.dirname(self.venvs["venv1"])]))
        r = subprocess.run([os.path.join(self.nosci, "python3"), "-m", "threadburn", "verdict",
                            os.path.join(helpers.REPO, "results", "default.csv"), "--no-write"],
                           capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("KEEP", r.stdout.upper())

    def test_none_has_scipy(self):
        # The only other python3 (/usr/bin/python3) is the one already running, without its site packages.
        r = self.version([self.nosci])
        helpers.assert_one_line_error(self, r, "no python3 here imports scipy", "python3-scipy", "THREADBURN_PYTHON")


if __name__ == "__main__":
    unittest.main()
