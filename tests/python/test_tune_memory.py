"""A tune keeps its runs in memory (analysis/runs.py, Runs): each run the
engine appends to the results CSV is handed to the race, the fresh runs, the
verdict and the report as the file holds it; the CSV is the resume log,
read once, by --resume. Known answers from test_gpu_tune's training (every
setting as fast; blocking_sync burns 80 % less CPU): a fresh tune reads
its file never, a resumed one once, and both still say CHANGE to
cuda-blocking_sync."""
import builtins
import contextlib
import io
import os
import unittest
from unittest import mock

import helpers
from threadburn import cli
from test_gpu_tune import Training, faked, tune_argv


class ReadsItsFileOnce(helpers.TempDir, unittest.TestCase):
    def tune(self, training, *args):
        """(exit code, console, how many times the tune opened its CSV to read it)."""
        out = os.path.abspath(self.path("tune.csv"))
        reads = []
        real_open = builtins.open

        def counting_open(file, mode="r", *a, **k):
            if isinstance(file, str) and os.path.abspath(file) == out and not set(mode) & set("wax+"):
                reads.append(mode)
            return real_open(file, mode, *a, **k)
        console = io.StringIO()
        with faked(training), mock.patch.object(builtins, "open", counting_open), \
                contextlib.redirect_stdout(console):
            code = cli.main(tune_argv(self, *args))
        return code, console.getvalue(), len(reads)

    def test_a_fresh_tune_never_reads_its_file(self):
        # the race's looks, the CUDA check, the duplicates, the fresh runs' looks and the report
        code, console, reads = self.tune(Training())
        self.assertEqual(code, 0, console)
        self.assertIn("CHANGE to cuda-blocking_sync: time ", console)
        self.assertIn("fresh runs without the probe, look 1", console)
        self.assertEqual(reads, 0)

    def test_a_resumed_tune_reads_it_once(self):
        code, console, _ = self.tune(Training(), "--budget", "30")
        self.assertEqual(code, 0, console)
        with open(self.path("tune.csv")) as f:
            lines = f.readlines()
        with open(self.path("tune.csv"), "w") as f:  # cut short in the middle of the race, a partial last line
            f.write("".join(lines[:12]) + lines[12][:40])
        code, console, reads = self.tune(Training(seed=2), "--budget", "30", "--resume")
        self.assertEqual(code, 0, console)
        self.assertIn("11 runs already in", console)
        self.assertIn("CHANGE to cuda-blocking_sync: time ", console)
        self.assertEqual(reads, 1)


if __name__ == "__main__":
    unittest.main()
