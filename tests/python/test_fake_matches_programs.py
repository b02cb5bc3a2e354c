"""fake_program.py against the real programs (skipped without a build of them):

* the recordings in tests/fixtures/programs are what the programs print now
  for `--describe` (apart from the context's values: host, libraries), so a
  change to a program's flags, axes, skip rules, counters or context keys
  fails here until tests/python/record_programs.py re-records them;
* for many flag sets per program (the defaults, a list for each axis, all axes
  at once, combinations each skip rule applies to, a bad value of each flag
  kind, malformed command lines) the fake's --describe equals the program's
  (benchmarks, axes, flag values, ...), and a refused command line gives the
  same exit code and error line.
The real programs answer through a fork server (fork_server.py, tests/cpp/fork_server.c):
each program starts once and each case is a child forked after its static initialisers,
so libtorch's start is paid 4 times, not about 90; ForkedAsFresh checks that a forked
case prints what a fresh start prints, byte for byte (each program's defaults, a refusal,
the help). Without the server's library in the build, each case starts afresh.
The build dir: $THREADBURN_BUILD_DIR (ctest sets it), else build/.
"""
import json
import os
import shutil
import subprocess
import tempfile
import unittest

import fork_server
import helpers
import record_programs

BUILD = helpers.real_build_dir()
WHY_SKIP = "no build of the real programs ($THREADBURN_BUILD_DIR or build/bench/*_bench)"
RERECORD = "/usr/bin/python3 tests/python/record_programs.py"


def comparable(doc):
    """A description without the context's values (they describe the machine)."""
    out = {k: v for k, v in doc.items() if k != "context"}
    out["context keys"] = sorted(doc.get("context", {}))
    return out


def differences(a, b):
    a, b = comparable(a), comparable(b)
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


def int_values(flag, count=2):
    lo = flag.get("min", 0)
    return [str(lo + i) for i in range(count)]


def two_values(flag):
    """Two valid values of an axis flag, in an order other than the default's."""
    if flag["kind"] == "choice_list":
        default = flag["default"].split(",")
        return list(reversed(default if len(default) > 1 else flag["choices"]))[:3]
    return list(reversed(int_values(flag)))


def satisfying(flag, cond):
    """One value of the flag that meets a skip rule's condition."""
    if "in" in cond:
        return cond["in"][0]
    pool = flag["choices"] if flag.get("choices") else [str(flag.get("min", 0) + i) for i in range(10)]
    return next(v for v in pool if v not in cond["not_in"])


def common_flags():
    """Flags every program declares (bench/program.cc): their refusals are checked once."""
    names = [{f["name"] for f in helpers.recording(b, d)["flags"]} for b, d, _ in record_programs.recorded()]
    return set.intersection(*names)


def last_of_kind(recording, kind, common):
    found = [f for f in recording["flags"] if f["kind"] == kind and (f["name"] in COMMON) == common]
    return found[-1] if found else None


def bad_values(recording, common):
    """[(args, what)]: refused values for the last flag of each kind among the
    program's own flags (common: among the flags every program has)."""
    cases = []
    f = last_of_kind(recording, "int", common)
    if f:
        cases += [([f"--{f['name']}={f.get('min', 0) - 1}"], "int below min"),
                  ([f"--{f['name']}=abc"], "int not a number"),
                  ([f"--{f['name']}=99999999999999999999"], "int out of int64")]
    f = last_of_kind(recording, "int_list", common)
    if f:
        cases += [([f"--{f['name']}="], "int_list empty"), ([f"--{f['name']}=1,,2"], "int_list empty item"),
                  ([f"--{f['name']}={f.get('min', 0)},{f.get('max', 10 ** 12) + 1}"], "int_list above max")]
    f = last_of_kind(recording, "double", common)
    if f:
        cases += [([f"--{f['name']}=abc"], "double not a number"), ([f"--{f['name']}=inf"], "double infinite")]
    f = last_of_kind(recording, "choice", common)
    if f:
        cases += [([f"--{f['name']}=nope"], "choice unknown"),
                  ([f"--{f['name']}={','.join(f['choices'][:2])}"], "choice two values")]
    f = last_of_kind(recording, "choice_list", common)
    if f:
        cases += [([f"--{f['name']}=nope"], "choice_list unknown"), ([f"--{f['name']}="], "choice_list empty")]
    f = last_of_kind(recording, "switch", common)
    if f:
        cases += [([f"--{f['name']}=2"], "switch 2")]
    return cases


def flag_sets(recording, device_args, with_common):
    """[(args, what)] for one recording."""
    flags = {f["name"]: f for f in recording["flags"]}
    axes = [a["name"] for a in recording["axes"]]
    cases = [([], "defaults")]
    if device_args:  # another device of a program: its own axes; the flags are checked on the first
        cpu_axes = {a["name"] for a in helpers.recording(recording["family"])["axes"]}
        singles = [a for a in axes if a not in cpu_axes]
    else:
        singles = axes
    for axis in singles:
        cases.append(([f"--{axis}={','.join(two_values(flags[axis]))}"], f"a list of {axis}"))
    cases.append(([f"--{a}={','.join(two_values(flags[a]))}" for a in axes], "every axis a list"))
    if not device_args:
        for i, rule in enumerate(recording["skip_rules"]):
            # every combination skipped: an error naming the rules that skipped them
            cases.append(([f"--{c['axis']}={satisfying(flags[c['axis']], c)}" for c in rule["all"]],
                          f"skip rule {i}: everything skipped"))
        cases += bad_values(recording, common=False)
        if with_common:
            cases += bad_values(recording, common=True)
    return [(device_args + args, what) for args, what in cases]


COMMON = common_flags()
COMMAND_LINES = [  # malformed or unusual command lines, on optimizer_step
    (["--no-such-flag=1"], "unknown flag"),
    (["--steps"], "missing value (it takes --describe as its value)"),
    (["stray"], "positional argument"),
    (["--steps", "5", "--gap_ms", "7"], "values as separate arguments"),
    (["--steps= 7 ", "--gap_ms=+5, 007,0"], "whitespace and signs"),
    (["--gap_ms=1", "--gap_ms=2,3"], "a flag given twice"),
    (["--timeline_dir=/nonexistent/dir"], "a missing timeline dir"),
    (["--barrier=nocolon"], "a barrier without parties"),
    (["--barrier=/tmp/x:0"], "a barrier of 0 parties"),
    (["--barrier=/nonexistent/barrier:2"], "a barrier file that does not exist"),
    (["--timeline_threads", "--sampler", "off"], "a bare switch"),
    (["--timeline-threads", "--sampler_us=200"], "a flag spelled with '-' (the alias of '_')"),
    (["--threads_csv=/tmp/t.csv", "--benchmark_filter=sgd"], "a string flag and a benchmark flag"),
    (["--help"], "help"),
]


# (exit code, stdout, stderr) of a real program's `args --describe`, by (path, args): the
# recordings' check and the flag sets' "defaults" ask for the same default descriptions.
REAL = {}
# The real programs' fork servers (fork_server.py), by path: each program starts once, and
# each case is a child forked after its static initialisers (libtorch's: about 0.6 s of CPU
# a start, most of this test's time when every case started the program afresh). Without
# the server's library in the build (tests/cpp), every case starts the program afresh.
SERVERS = {}
PRELOAD = fork_server.library(BUILD) if BUILD else None


def real_run(path, args):
    if PRELOAD and path not in SERVERS:
        SERVERS[path] = fork_server.ForkServer(path, PRELOAD, record_programs.plain_env())
    if not PRELOAD or SERVERS[path] is None:
        return record_programs.run_describe(path, args)
    try:
        return SERVERS[path].run([*args, "--describe"])
    except RuntimeError as e:
        if fork_server.MANY_THREADS not in str(e):
            raise
        SERVERS[path] = None  # a program with threads before main (a fork would lose them): fresh starts
        return record_programs.run_describe(path, args)


def tearDownModule():
    for server in filter(None, SERVERS.values()):
        server.close()  # raises if a program's static initialisers printed anything (a fresh start shows it)
    SERVERS.clear()


def describe_both(paths, args):
    """[(exit code, stdout, stderr)] of `path args --describe` for each path, run at once;
    a real program's answer (under BUILD) asked for before is not asked again."""
    todo = [p for p in paths if (p, tuple(args)) not in REAL]
    real = [p for p in todo if p.startswith(BUILD + os.sep)]
    procs = {p: subprocess.Popen([p, *args, "--describe"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=record_programs.plain_env(), stdin=subprocess.DEVNULL)
             for p in todo if p not in real}
    for path in real:
        REAL[(path, tuple(args))] = real_run(path, args)
    got = {}
    for path, p in procs.items():
        stdout, stderr = p.communicate(timeout=120)
        got[path] = (p.returncode, stdout, stderr)
    return [REAL[(p, tuple(args))] if p not in got else got[p] for p in paths]


def real_describe(bench, args):
    """What record_programs.describe gives (the description, exit code 0), through REAL."""
    path = record_programs.program_path(BUILD, bench)
    code, out, err = describe_both([path], args)[0]
    if code != 0:
        raise AssertionError(f"{path} {' '.join(args)} --describe: exit code {code}: {err.strip()}")
    return json.loads(out)


@unittest.skipUnless(BUILD, WHY_SKIP)
class Recordings(unittest.TestCase):
    def test_every_program_is_recorded(self):
        built = record_programs.recordings_of(record_programs.built_programs(BUILD))
        self.assertEqual(sorted({(b, d) for b, d, _ in record_programs.recorded()}),
                         sorted((b, d) for b, d, _ in built),
                         f"the programs of {BUILD} and the recordings in tests/fixtures/programs differ; "
                         f"run {RERECORD} {BUILD}")

    def test_the_recordings_are_what_the_programs_print_now(self):
        for bench, device, args in record_programs.recorded():
            path = record_programs.recording_path(bench, device)
            with self.subTest(recording=os.path.basename(path)):
                self.assertTrue(os.path.exists(path), f"{path} is missing: run {RERECORD} {BUILD}")
                if not os.access(record_programs.program_path(BUILD, bench), os.X_OK):
                    continue  # test_every_program_is_recorded says so
                live = real_describe(bench, args)
                with open(path) as f:
                    recorded = json.load(f)
                diff = differences(live, recorded)
                self.assertEqual(diff, [], f"{path} is not what {bench}_bench {' '.join(args)} --describe prints now "
                                 f"(it differs in: {', '.join(diff)}); run {RERECORD} {BUILD}")


@unittest.skipUnless(BUILD and PRELOAD, WHY_SKIP + " or of its fork server (tests/cpp)")
class ForkedAsFresh(unittest.TestCase):
    """A case the fork server answers is what a fresh start of the program prints,
    byte for byte: each program's defaults, a refusal, the help."""
    CASES = [(bench, []) for bench in record_programs.built_programs(BUILD or "")] + \
        [("optimizer_step", ["--steps=abc"]), ("optimizer_step", ["--help"])]

    def test_a_forked_case_is_a_fresh_start(self):
        paths = [record_programs.program_path(BUILD, bench) for bench, _ in self.CASES]
        starts = [subprocess.Popen([path, *args, "--describe"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=record_programs.plain_env(), stdin=subprocess.DEVNULL)
                  for path, (_, args) in zip(paths, self.CASES)]  # the fresh starts, at once
        forked = [real_run(path, args) for path, (_, args) in zip(paths, self.CASES)]
        for (bench, args), start, got in zip(self.CASES, starts, forked):
            stdout, stderr = start.communicate(timeout=120)
            with self.subTest(bench=bench, args=args):
                self.assertEqual(got, (start.returncode, stdout, stderr))


@unittest.skipUnless(BUILD, WHY_SKIP)
class FakeAgainstProgram(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tb-drift-")
        cls.fake = helpers.make_fake_build(os.path.join(cls.tmp, "fake"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def assert_same(self, bench, args):
        real, fake = describe_both([record_programs.program_path(BUILD, bench),
                                    record_programs.program_path(self.fake, bench)], args)
        if real[0] != 0 and fake[0] == 0 and "this build has no" in real[2]:
            self.skipTest(f"this build lacks a part: {real[2].strip()}")
        if args == ["--help"]:  # the fake's help text is its own; both print help and exit 0
            self.assertEqual((real[0], fake[0]), (0, 0))
            return
        self.assertEqual(fake[0], real[0], f"exit code; real stderr: {real[2]!r}, fake stderr: {fake[2]!r}")
        if real[0] != 0:
            self.assertEqual(fake[2], real[2])
            self.assertEqual(real[2].count("\n"), 1, real[2])
            return
        real_doc, fake_doc = json.loads(real[1]), json.loads(fake[1])
        for key in ("flags", "axes", "benchmarks", "skip_rules"):
            self.assertEqual(fake_doc[key], real_doc[key], key)
        self.assertEqual(comparable(fake_doc), comparable(real_doc))

    def test_flag_sets(self):
        count = 0
        for bench, device, device_args in record_programs.recorded():
            if not os.access(record_programs.program_path(BUILD, bench), os.X_OK):
                continue
            recording = helpers.recording(bench, device)
            for args, what in flag_sets(recording, device_args, with_common=bench == "optimizer_step"):
                with self.subTest(bench=bench, device=device, what=what, args=args):
                    self.assert_same(bench, args)
                count += 1
        self.assertGreater(count, 40)

    def test_command_lines(self):
        for args, what in COMMAND_LINES:
            with self.subTest(what=what, args=args):
                self.assert_same("optimizer_step", args)


if __name__ == "__main__":
    unittest.main()
