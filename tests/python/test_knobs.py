"""The knob table (python/threadburn/knobs.tsv) and lib/knobs.py: one table
that the C++ programs, the probe and the Python package all see the same.

* parse/check/shorten on tables and values whose answers are known; the
  settings in force line (the same contexts and lines as
  tests/cpp/runtime_test.cc), the heatmaps' knobs, the runtimes' preloads;
* the recorded descriptions (tests/fixtures/programs) carry exactly the table;
* with a build: every program's --describe and the probe's describe.json
  carry exactly the table, their runtimes' own knobs are the table's, and
  every in_force key of the table is a context key they report (that of a
  knob whose column is a program flag, cuda_sync_in_force: where the program
  has the flag, and in the probe's); the programs read back OMP_PROC_BIND and
  OMP_SCHEDULE under both runtimes (known answers), and their console prints
  the line lib/knobs.py writes from their own context.
"""
import json
import os
import subprocess
import unittest

import helpers
import record_programs
from threadburn.lib import knobs, paths, probe, programs

BUILD = helpers.real_build_dir()


# What the programs and the probe print of the table (--describe's "knobs", each runtime's
# "own_knobs", the context keys of the read-backs), written from the table as the C++ side
# must: the drift checks below compare the two.
def described_table():
    """The table as --describe prints it ("knobs"): every cell of every row."""
    return [{c: k.cell(c) for c in knobs.COLUMNS} for k in knobs.table()]


def own_knobs(runtime):
    """The knobs only that runtime reads (gomp, llvm; cuda: the preload libraries')."""
    return [k.name for k in knobs.table() if k.reader == runtime]


def in_force_keys(flags=None):
    """The context keys that report what the knobs really are in the live
    process. With flags (a program's flag names): those the program reports,
    which leaves out the read-back of a knob whose column is a flag it lacks
    (cuda_sync_in_force: the programs with --cuda_sync, and the probe)."""
    return [k.in_force for k in knobs.table() if k.in_force != knobs.NONE
            and (flags is None or k.is_column or k.column is None or k.column in flags)]

SMALL = "\t".join(knobs.COLUMNS) + "\n" + "\n".join("\t".join(row) for row in (
    ("THREADS", "openmp", "int>=1 cores", "-", "T={}", "max_threads", "THREADS", "{} threads", "rows", "threads"),
    ("WAIT", "gomp", "one-of active passive", "-", "{}", "-", "WAIT", "-", "columns (spins)", "wait"),
    ("PLACE", "llvm", "pattern [a-z]+(,[a-z]+)*", "lower-case words, comma list", "aff", "-", "PLACE", "-", "-",
     "places"),
    ("SYNC", "cuda", "one-of auto spin", "-", "sync={}", "sync_in_force", "sync", "sync {} of {sync_devices}", "-",
     "host wait"),
    ("PRE", "loader", "-", "-", "-", "-", "-", "-", "-", "preloaded"),
)) + "\n"


class Table(unittest.TestCase):
    def test_parses_each_column(self):
        t = knobs.parse("# a comment\n\n" + SMALL)
        self.assertEqual([k.name for k in t], ["THREADS", "WAIT", "PLACE", "SYNC", "PRE"])
        self.assertEqual((t[0].kind, t[0].minimum, t[0].words), ("int", 1, ("cores",)))
        self.assertEqual((t[1].kind, t[1].words, t[1].reader), ("one-of", ("active", "passive"), "gomp"))
        self.assertEqual((t[2].kind, t[2].pattern), ("pattern", "[a-z]+(,[a-z]+)*"))
        self.assertEqual((t[3].reader, t[3].words, t[3].in_force), ("cuda", ("auto", "spin"), "sync_in_force"))
        # the results column of each: its own, a program flag's (sync), none (the loader's)
        self.assertEqual([k.column for k in t], ["THREADS", "WAIT", "PLACE", "sync", None])
        self.assertEqual([k.is_column for k in t], [True, True, True, False, False])
        self.assertEqual(t[4].cell("column"), "-")
        self.assertEqual([k.shown for k in t], ["{} threads", "-", "-", "sync {} of {sync_devices}", "-"])
        self.assertEqual([k.heatmap_role for k in t], ["rows", "columns", None, None, None])
        self.assertEqual(t[1].heatmap_label, "WAIT (spins)")

    def test_refuses_a_broken_table_naming_the_line(self):
        lines = SMALL.splitlines()
        for text, words in (
                (SMALL.replace("reader", "who"), ":1: expected the header"),
                (SMALL.replace("\tgomp\t", "\tgcc\t"), ":3: WAIT: reader 'gcc'"),
                (SMALL.replace("one-of active passive", "one-of"), ":3: WAIT: values 'one-of'"),
                (SMALL.replace("lower-case words, comma list", "-"), ":4: PLACE: a pattern needs its expected"),
                (SMALL.replace("\tmax_threads\tTHREADS\t", "\tmax_threads\t"), ":2: expected 10 non-empty"),
                (SMALL.replace("\tsync\tsync {}", "\tSync-Col\tsync {}"), ":5: SYNC: column 'Sync-Col'"),
                (SMALL.replace("\tWAIT\t-", "\tOTHER\t-"), ":3: WAIT: column 'OTHER'"),
                # a part needs its value once, and the read-back it shows
                (SMALL.replace("{} threads", "threads"), ":2: THREADS: shown 'threads'"),
                (SMALL.replace("{} threads", "{} of {} threads"), ":2: THREADS: shown '{} of {} threads'"),
                (SMALL.replace("{} threads", "{} threads {"), ":2: THREADS: shown '{} threads {'"),
                (SMALL.replace("\tWAIT\t-", "\tWAIT\twait {}"), ":3: WAIT: shown 'wait {}'"),
                # heatmap: a role, the columns one runtime's knob, each role once (columns once a runtime)
                (SMALL.replace("\trows\t", "\tcells\t"), ":2: THREADS: heatmap 'cells'"),
                (SMALL.replace("\trows\t", "\trows (T)\t"), ":2: THREADS: heatmap 'rows (T)'"),
                (SMALL.replace("\trows\t", "\tcolumns\t"), ":2: THREADS: heatmap columns need one runtime's"),
                (SMALL.replace("PLACE\t-\t-", "PLACE\t-\trows"), ":4: PLACE: a second knob on the heatmaps' rows"),
                (SMALL + lines[1] + "\n", ":7: THREADS twice"),
                (lines[0] + "\n", ": no knobs")):
            with self.subTest(words=words):
                with self.assertRaises(ValueError) as e:
                    knobs.parse(text, "t.tsv")
                self.assertIn("t.tsv" + words, str(e.exception))

    def test_checks_values_by_kind(self):
        threads, wait, place, sync, pre = knobs.parse(SMALL)
        self.assertEqual([threads.check(v) for v in (1, 8, "8", "cores")], ["1", "8", "8", "cores"])
        for bad in (0, -1, True, 1.5, "eight", "8 "):
            with self.subTest(bad=bad), self.assertRaises(knobs.KnobError) as e:
                threads.check(bad, extra=("unset",))
            self.assertEqual(str(e.exception), f'expected an integer >= 1, "cores" or "unset", got {bad!r}')
        self.assertEqual(wait.check("passive"), "passive")
        with self.assertRaises(knobs.KnobError) as e:
            wait.check("PASSIVE", extra=("unset",))
        self.assertEqual(str(e.exception), """expected "active" or "passive", or "unset", got 'PASSIVE'""")
        self.assertEqual(place.check("a,b"), "a,b")
        with self.assertRaises(knobs.KnobError) as e:
            place.check("a, b")
        self.assertEqual(str(e.exception), "expected lower-case words, comma list, got 'a, b'")
        self.assertEqual(sync.check("spin"), "spin")
        with self.assertRaises(knobs.KnobError) as e:
            sync.check("fast")
        self.assertEqual(str(e.exception), """expected "auto" or "spin", got 'fast'""")
        with self.assertRaises(knobs.KnobError):
            pre.check("/lib/x.so")

    def test_a_variable_outside_the_table_takes_any_word(self):
        self.assertIsNone(knobs.get("MY_OWN_VARIABLE"))
        self.assertEqual(knobs.check("MY_OWN_VARIABLE", 3), "3")
        with self.assertRaises(knobs.KnobError):
            knobs.check("MY_OWN_VARIABLE", "two words")

    def test_short_labels_come_from_the_table(self):
        label = "llvm OMP_NUM_THREADS=2 KMP_BLOCKTIME=1 KMP_AFFINITY=granularity=fine,compact,1,0 " \
                "OMP_WAIT_POLICY=passive MY_VAR=3 [launcher]"
        self.assertEqual(knobs.shorten(label), "llvm T=2 bt=1 aff passive MY_VAR=3 [launcher]")

    def test_header_holds_every_cell_as_a_cpp_string(self):
        text = knobs.header(knobs.parse(SMALL))
        self.assertIn('{"PLACE", "llvm", "pattern [a-z]+(,[a-z]+)*", "lower-case words, comma list", "aff", "-", '
                      '"PLACE", "-", "-", "places"},', text)
        # no column: "-" as in the table
        self.assertIn('{"PRE", "loader", "-", "-", "-", "-", "-", "-", "-", "preloaded"},', text)
        self.assertIn('kKnobColumns[kKnobColumnCount] = {"name", "reader", "values", "expected", "label", '
                      '"in_force", "column", "shown", "heatmap", "doc"}', text)
        self.assertIn(r'"pattern a\\d\"b"', knobs.header([knobs.Knob("X", "openmp", 'pattern a\\d"b', "x", "-",
                                                                        "-", "X", "-", "-", "x")]))

    def test_the_package_table_parses_and_names_its_runtimes(self):
        self.assertIn("OMP_NUM_THREADS", knobs.names())
        self.assertEqual(own_knobs("gomp"), ["GOMP_SPINCOUNT"])
        self.assertTrue(set(own_knobs("llvm")) >= {"KMP_BLOCKTIME", "KMP_AFFINITY"})

    def test_the_settings_in_force_line(self):
        """The same contexts and lines as tests/cpp/runtime_test.cc's
        InForceLineFromTheKnobTable: both sides write one line from the table."""
        gomp = {"omp_runtime": "libgomp", "omp_max_threads": "4", "omp_wait_policy": "default",
                "gomp_spincount": "300000", "gomp_spincount_in_force": "100", "kmp_blocktime_ms": "n/a",
                "kmp_library": "n/a", "omp_proc_bind": "close", "omp_places": "{0},{1}", "omp_schedule": "dynamic,4",
                "dnnl_cpu_isa": "avx2", "cuda_sync_in_force": "spin"}
        self.assertEqual(knobs.in_force_line(gomp),
                         "libgomp with 4 threads, spin count 300000 (in force 100), wait policy default, bind close, "
                         "places {0},{1}, schedule dynamic,4, oneDNN ISA avx2")
        llvm = {"omp_runtime": "llvm-libomp", "omp_max_threads": "2", "kmp_blocktime_ms": "0",
                "gomp_spincount_in_force": "n/a", "omp_wait_policy": "passive", "kmp_library": "throughput",
                "dnnl_cpu_isa": "n/a"}
        self.assertEqual(knobs.in_force_line(llvm),
                         "llvm-libomp with 2 threads, blocktime 0 ms, wait policy passive, mode throughput")
        none = {"omp_runtime": "none", "omp_max_threads": "-1", "omp_wait_policy": "n/a", "dnnl_cpu_isa": "sse41"}
        self.assertEqual(knobs.in_force_line(none), "no OpenMP runtime loaded, oneDNN ISA sse41")
        # the report's settings table: the knobs of the line, each with its read-back
        self.assertEqual(knobs.in_force_columns()[:2], [("omp_max_threads", "OMP_NUM_THREADS"),
                                                       ("kmp_blocktime_ms", "KMP_BLOCKTIME")])
        self.assertNotIn("KMP_AFFINITY", [name for _, name in knobs.in_force_columns()])

    def test_the_heatmaps_and_the_runtimes_preloads(self):
        self.assertEqual(knobs.heatmap_knob("rows").name, "OMP_NUM_THREADS")
        self.assertEqual(knobs.heatmap_knob("panels").name, "OMP_WAIT_POLICY")
        self.assertEqual(knobs.heatmap_knob("columns", "llvm").heatmap_label, "KMP_BLOCKTIME (ms)")
        self.assertEqual(knobs.heatmap_knob("columns", "gomp").heatmap_label, "GOMP_SPINCOUNT (spins)")
        self.assertEqual(knobs.preloads("llvm", "/x/libomp.so.5"), ["/x/libomp.so.5"])
        self.assertEqual(knobs.preloads("gomp", "/x/libomp.so.5"), [])

    def test_what_pytorchs_launcher_sets_for_libgomp(self):
        """OMP_SCHEDULE=STATIC and OMP_PROC_BIND=CLOSE (upper case, as the
        launcher writes them; the runtimes take any case), with their read-backs."""
        self.assertEqual(knobs.check("OMP_SCHEDULE", "STATIC"), "STATIC")
        self.assertEqual(knobs.check("OMP_PROC_BIND", "CLOSE"), "CLOSE")
        for good in ("dynamic,4", "nonmonotonic:dynamic", "guided,16", "auto"):
            self.assertEqual(knobs.check("OMP_SCHEDULE", good), good)
        for bad in ("dynamic,0", "fast", "dynamic, 4"):
            with self.subTest(bad=bad), self.assertRaises(knobs.KnobError):
                knobs.check("OMP_SCHEDULE", bad)
        self.assertEqual([knobs.get(n).in_force for n in ("OMP_PROC_BIND", "OMP_PLACES", "OMP_SCHEDULE")],
                         ["omp_proc_bind", "omp_places", "omp_schedule"])
        self.assertEqual(knobs.shorten("gomp OMP_SCHEDULE=STATIC"), "gomp sched=STATIC")

    def test_the_cuda_host_wait_policy_lands_in_the_cuda_sync_column(self):
        sync = knobs.get("THREADBURN_CUDA_SYNC")
        self.assertEqual((sync.reader, sync.words, sync.in_force, sync.column),
                         ("cuda", ("auto", "spin", "yield", "blocking_sync"), "cuda_sync_in_force", "cuda_sync"))
        self.assertFalse(sync.is_column)
        self.assertEqual(knobs.NOT_A_KNOB, ("THREADBURN_CUDA_SYNC", "LD_PRELOAD"))
        self.assertEqual(own_knobs("cuda"), ["THREADBURN_CUDA_SYNC"])
        # read back where the flag is: the probe and the programs with --cuda_sync, not the others
        self.assertIn("cuda_sync_in_force", in_force_keys())
        self.assertIn("cuda_sync_in_force", in_force_keys(["cuda_sync", "batch"]))
        self.assertNotIn("cuda_sync_in_force", in_force_keys(["batch"]))
        self.assertIn("omp_max_threads", in_force_keys(["batch"]))


class Recordings(unittest.TestCase):
    """What the fake programs serve is the table (the drift test checks the
    recordings against the real programs)."""

    def test_every_recording_carries_the_table(self):
        for bench, device, _ in record_programs.recorded():
            with self.subTest(recording=f"{bench}.{device}"):
                rec = helpers.recording(bench, device)
                self.assertEqual(rec["knobs"], described_table(),
                                 "knobs.tsv changed: rebuild and re-record (tests/python/record_programs.py)")
                d = programs.Description.from_json(rec)
                for runtime in d.runtimes:
                    self.assertEqual(runtime["own_knobs"], own_knobs(runtime["name"]))
                missing = [k for k in in_force_keys(d.flags) if k not in rec["context"]]
                self.assertEqual(missing, [], "in_force keys the program does not report")


@unittest.skipUnless(BUILD, "no build of the real programs ($THREADBURN_BUILD_DIR or build/bench/*_bench)")
class Build(unittest.TestCase):
    def test_every_program_describes_the_table(self):
        for bench in record_programs.built_programs(BUILD):
            with self.subTest(program=bench):
                doc = record_programs.describe(BUILD, bench, [])
                self.assertEqual(doc["knobs"], described_table())
                self.assertEqual({r["name"]: r["own_knobs"] for r in doc["runtimes"]},
                                 {r["name"]: own_knobs(r["name"]) for r in doc["runtimes"]})
                flags = [f["name"] for f in doc["flags"]]
                self.assertEqual([k for k in in_force_keys(flags) if k not in doc["context"]], [])

    def test_the_programs_read_back_placement_and_schedule(self):
        """runtime_bench --describe under each runtime: with what PyTorch's
        launcher sets for libgomp (OMP_PROC_BIND=CLOSE, OMP_SCHEDULE=STATIC)
        and with OMP_SCHEDULE=dynamic,4 the context says close and static, or
        dynamic,4; unset, the runtimes' defaults (false; libgomp dynamic,1 and
        no places, LLVM static). The places set: tests/bench/check_probe.py."""
        path = record_programs.program_path(BUILD, "runtime")
        cases = (("gomp", {"OMP_PROC_BIND": "CLOSE", "OMP_SCHEDULE": "STATIC"}, ("close", "static")),
                 ("llvm", {"OMP_PROC_BIND": "CLOSE", "OMP_SCHEDULE": "STATIC"}, ("close", "static")),
                 ("gomp", {"OMP_SCHEDULE": "dynamic,4"}, ("false", "dynamic,4")),
                 ("llvm", {"OMP_SCHEDULE": "dynamic,4"}, ("false", "dynamic,4")),
                 ("gomp", {}, ("false", "dynamic,1")), ("llvm", {}, ("false", "static")))
        for runtime, env, (bind, schedule) in cases:
            with self.subTest(runtime=runtime, env=env):
                full = dict(record_programs.plain_env(), OMP_NUM_THREADS="2", **env)
                if knobs.preloads(runtime, paths.LIBOMP):
                    full["LD_PRELOAD"] = " ".join(knobs.preloads(runtime, paths.LIBOMP))
                code, out, err = record_programs.run_describe(path, [], full)
                self.assertEqual(code, 0, err)
                ctx = json.loads(out)["context"]
                self.assertEqual((ctx["omp_runtime"], ctx["omp_proc_bind"], ctx["omp_schedule"]),
                                 ("llvm-libomp" if runtime == "llvm" else "libgomp", bind, schedule))
                if not env and runtime == "gomp":
                    self.assertEqual(ctx["omp_places"], "none")

    def test_the_console_line_is_the_pythons(self):
        """The programs' console prints runtime.cc's settings in force line:
        the line lib/knobs.py writes from the same program's --describe
        context, under each runtime."""
        path = record_programs.program_path(BUILD, "runtime")
        for runtime in ("gomp", "llvm"):
            with self.subTest(runtime=runtime):
                env = dict(record_programs.plain_env(), OMP_NUM_THREADS="2", OMP_WAIT_POLICY="passive")
                if knobs.preloads(runtime, paths.LIBOMP):
                    env["LD_PRELOAD"] = " ".join(knobs.preloads(runtime, paths.LIBOMP))
                p = subprocess.run([path, "--kernel=serial", "--n=32768", "--gap_ms=0", "--steps=1", "--warmup=0"],
                                   capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL)
                self.assertEqual(p.returncode, 0, p.stderr)
                printed = [ln for ln in p.stdout.splitlines() if ln.startswith("settings in force: ")]
                code, out, err = record_programs.run_describe(path, [], env)
                self.assertEqual(code, 0, err)
                self.assertEqual(printed, ["settings in force: " + knobs.in_force_line(json.loads(out)["context"])])
                self.assertIn("wait policy passive", printed[0])

    def test_the_probe_describes_the_table(self):
        doc = probe.describe(BUILD)
        self.assertEqual(doc["knobs"], described_table())
        self.assertEqual([k for k in in_force_keys() if k not in doc["context"]], [])

    def test_the_generated_header_is_the_tables(self):
        with open(os.path.join(BUILD, "generated", "runtime", "knob_table.h")) as f:
            self.assertEqual(f.read(), knobs.header(knobs.table()))


if __name__ == "__main__":
    unittest.main()
