"""examples/mnist_adadelta.py's ways of feeding a GPU (--feed gpu | loader,
--workers, --pin-memory, --device cuda), run here on the CPU: without CUDA
--device cuda says so in one line and trains on the CPU; every feed trains on
the same batches with the same dropout, so the losses it prints are the
same (the known answer: only how the data reaches the step differs); the
default output keeps its lines, "samples/s: N" last. Skipped without
PyTorch (Debian 12: python3-torch)."""
import os
import re
import subprocess
import unittest

import helpers

EXAMPLE = os.path.join(helpers.REPO, "examples", "mnist_adadelta.py")
PY = "/usr/bin/python3"


def has_torch():
    """Whether PY finds torch (without importing it: 2 CPU seconds here, which
    every training below spends anyway; one that is there but fails to import
    fails the tests instead of skipping them)."""
    return subprocess.run([PY, "-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('torch') is None)"],
                          capture_output=True).returncode == 0


def train(*args):
    p = subprocess.run([PY, EXAMPLE, "--steps", "6", "--log-interval", "2", "--dataset", "256", *args],
                       capture_output=True, text=True, timeout=300, env=helpers.clean_env(OMP_NUM_THREADS=1))
    return p


@unittest.skipUnless(has_torch(), "needs PyTorch (Debian 12: python3-torch)")
class Feeds(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.default = train()

    def losses(self, p):
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout.splitlines()[-1], r"^samples/s: [0-9]+\.[0-9]{2}$")
        found = re.findall(r"step \d+: loss ([0-9.]+)", p.stdout)
        self.assertEqual(len(found), 3, p.stdout)
        return found

    def test_every_feed_trains_the_same(self):
        self.assertNotIn("feed", self.default.stdout)  # the default's lines as they were
        expected = self.losses(self.default)
        for args in (["--feed", "loader"], ["--feed", "loader", "--workers", "2", "--pin-memory"]):
            with self.subTest(args=args):
                self.assertEqual(self.losses(train(*args)), expected)

    def test_cuda_falls_back_in_one_line(self):
        p = train("--device", "cuda", "--feed", "loader", "--workers", "1", "--pin-memory")
        if p.returncode == 0 and "CUDA is not available" not in p.stderr:
            self.skipTest("this PyTorch has CUDA: no fallback to see")
        self.assertEqual(p.stderr.strip().count("\n"), 0, p.stderr)
        self.assertRegex(p.stderr, r"^mnist_adadelta.py: CUDA is not available to this PyTorch \(.*\): training on "
                                   r"the CPU\n$")
        self.assertEqual(self.losses(p), self.losses(self.default))


if __name__ == "__main__":
    unittest.main()
