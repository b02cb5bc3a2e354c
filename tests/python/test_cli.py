"""bin/threadburn, the one command line (python/threadburn/cli.py): every
subcommand is listed and has --help; bad commands and flags are one line and
exit code 2; `list` shows the programs as they describe themselves."""
import argparse
import json
import os
import re
import unittest

import helpers
from threadburn import cli


def subcommands():
    p = cli.parser()
    action = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return list(action.choices)


class Help(unittest.TestCase):
    def test_help_lists_every_subcommand(self):
        names = subcommands()
        self.assertLessEqual({"sweep", "compare", "plot", "monitor", "monitor-plot", "findings", "list", "doctor"},
                             set(names))
        for args in (["--help"], ["-h"], []):
            with self.subTest(args=args):
                result = helpers.threadburn(*args, launcher=True)  # bin/threadburn as typed
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertTrue(result.stdout.startswith("usage: threadburn "), result.stdout)
                section = result.stdout.split("positional arguments:")[1].split("options:")[0]
                listed = [m.group(1) for m in re.finditer(r"^ {4}(\S+)", section, re.MULTILINE)]
                self.assertEqual(listed, names)

    def test_each_subcommand_has_help(self):
        for name in subcommands():
            if name == "monitor" and not helpers.real_build_dir():
                continue  # its flags are the monitor program's own: it prints that program's --help
            with self.subTest(command=name):
                env = helpers.clean_env(THREADBURN_BUILD_DIR=helpers.real_build_dir() or "")
                result = helpers.threadburn(name, "--help", env=env)
                self.assertEqual(result.returncode, 0, result.stderr)
                self.assertIn("usage:", result.stdout)
                self.assertEqual(result.stderr, "")


class Errors(unittest.TestCase):
    def test_bad_subcommand(self):
        result = helpers.threadburn("bogus")
        helpers.assert_one_line_error(self, result, "threadburn: error: argument COMMAND: invalid choice: 'bogus'")
        self.assertEqual(result.stdout, "")

    def test_bad_flags_of_each_subcommand(self):
        for name in subcommands():
            if name == "monitor":
                continue  # handed to the monitor program as they are
            with self.subTest(command=name):
                result = helpers.threadburn(name, "--no-such-flag")
                helpers.assert_one_line_error(self, result, "error: ")
                self.assertEqual(result.stdout, "")

    def test_bad_values(self):
        for args, message in ((["sweep", "default", "--seed", "x"], "argument --seed: invalid int value: 'x'"),
                              (["sweep", "default", "--timeout", "0"], "argument --timeout: expected an integer >= 1"),
                              (["compare", "a.csv", "b.csv", "--format", "pdf"], "argument --format: invalid choice"),
                              (["plot", "--max-timelines", "many"], "argument --max-timelines: invalid int value")):
            with self.subTest(args=args):
                result = helpers.threadburn(*args)
                helpers.assert_one_line_error(self, result, f"threadburn {args[0]}: error: {message}")

    def test_errors_of_a_command_name_it(self):
        result = helpers.threadburn("sweep", "/nonexistent/grid.toml", "--build-dir",
                                    helpers.make_fake_build(self.tmp_build()), "--dry-run")
        helpers.assert_one_line_error(self, result, "threadburn sweep: error: /nonexistent/grid.toml: cannot read: "
                                      "No such file or directory")

    def tmp_build(self):
        import tempfile
        tmp = tempfile.TemporaryDirectory(prefix="tb-cli-")
        self.addCleanup(tmp.cleanup)
        return tmp.name


class TuneGpus(unittest.TestCase):
    """tune --copies on a host of N GPUs (THREADBURN_GPU_COUNT, the test hook): said once, in the plan."""

    def dry_run(self, gpus, copies):
        return helpers.threadburn("tune", "--copies", copies, "--dry-run", "--", "/bin/true",
                                  env=helpers.clean_env(THREADBURN_GPU_COUNT=gpus))

    def test_copies_get_their_own_gpus_or_share(self):
        result = self.dry_run("2", "1,2,4")
        self.assertEqual(result.returncode, 0, result.stderr)
        self.assertIn("tune: GPUs: 2 copies a run: copy i alone sees GPU i of 0, 1 (CUDA_VISIBLE_DEVICES, in each "
                      "row's extra_context); 4 copies a run share the 2 GPU(s)\n", result.stdout)
        self.assertIn("GPU of each copy: 0 | 1", result.stdout)
        self.assertNotIn("GPUs", self.dry_run("0", "2").stdout)

    def test_a_bad_count_is_one_line(self):
        helpers.assert_one_line_error(self, self.dry_run("two", "2"), "threadburn tune: error: THREADBURN_GPU_COUNT="
                                      "'two': expected a number of GPUs")


class Listing(helpers.TempDir, unittest.TestCase):
    def setUp(self):
        super().setUp()
        self.build = helpers.make_fake_build(self.path("build"))

    def test_list_shows_flags_benchmarks_and_counters(self):
        result = helpers.threadburn("list", "--build-dir", self.build)
        self.assertEqual(result.returncode, 0, result.stderr)
        for bench in helpers.BENCHES:
            self.assertIn(f"{bench}  ({self.build}/bench/{bench}_bench)", result.stdout)
        self.assertIn("    * --model=mnist_adadelta,cifar_sgd", result.stdout)
        self.assertIn("    optimizer_step/sgd/params:4000000/gap_ms:300", result.stdout)
        counters = helpers.threadburn("list", "--counters", "--build-dir", self.build)
        self.assertEqual(counters.returncode, 0, counters.stderr)
        names = [ln.split()[0] for ln in counters.stdout.splitlines()]
        # Every program's counters, each once, in the programs' order (each
        # program describes the step loop's table and its workloads' own).
        expected = []
        for bench in helpers.BENCHES:
            expected += [c["name"] for c in helpers.recording(bench)["counters"] if c["name"] not in expected]
        self.assertEqual(names, expected)

    def test_list_json_and_one_program(self):
        result = helpers.threadburn("list", "runtime", "--json", "--build-dir", self.build)
        self.assertEqual(result.returncode, 0, result.stderr)
        doc = json.loads(result.stdout)
        self.assertEqual(list(doc), ["runtime"])
        recorded = helpers.recording("runtime")
        self.assertEqual([b["name"] for b in doc["runtime"]["benchmarks"]], [b["name"] for b in recorded["benchmarks"]])
        self.assertEqual(doc["runtime"]["program"], "runtime_bench")
        result = helpers.threadburn("list", "nosuch", "--build-dir", self.build)
        helpers.assert_one_line_error(self, result, "threadburn list: error: nosuch: not a program of this build; "
                                      f"expected one of {', '.join(helpers.BENCHES)}")


class ForkedAsStarted(helpers.TempDir, unittest.TestCase):
    """helpers.threadburn() runs most tests' commands in a fork of an
    interpreter that imported the package already (command_server.py): each
    gives what bin/threadburn gives, byte for byte (exit code, stdout, stderr):
    a refusal, a decision (scipy.stats), a build's programs (a fake build),
    an environment the command reads (Help checks the launcher's help)."""

    def test_each_gives_what_a_start_gives(self):
        build = helpers.make_fake_build(self.path("build"))
        a, b = (os.path.join(helpers.FIXTURES, f"compare_{x}.csv") for x in "ab")
        for args, env in ((["bogus"], None), (["compare", a, b, "--format", "md"], None),
                          (["list", "runtime", "--json", "--build-dir", build], None),
                          (["tune", "--copies", "1,2", "--dry-run", "--", "/bin/true"],
                           helpers.clean_env(THREADBURN_GPU_COUNT="2"))):
            with self.subTest(args=args):
                forked, started = (helpers.threadburn(*args, env=env, launcher=launcher) for launcher in (False, True))
                self.assertEqual((forked.returncode, forked.stdout, forked.stderr),
                                 (started.returncode, started.stdout, started.stderr))
                self.assertTrue(started.stdout or started.stderr)


if __name__ == "__main__":
    unittest.main()
