"""The slot (src/core/slot.h's context keys) and the throttling of its CPU
quota (the probe's quota_periods, throttled_periods, throttled_ms and their
steady_ twins) from the Python side: the report's slot line, the quota's
line, and the advice `run` gives (analysis/advice.py), on made-up figures
whose answer is known: THROTTLED_SHARE at its edge, each cause the line
names, and loader-bound left unsaid in a throttled slot."""
import os
import unittest
from unittest import mock

import helpers
from threadburn.analysis import advice, slotsizes
from threadburn.commands import doctor
from threadburn.engine import plans
from threadburn.export import slotsizes as slotsizes_text
from threadburn.lib import cgroup, machine, rule as rules
from threadburn.lib.machine import slot_line
from threadburn.lib.records import Row

FIXTURES = os.path.join(helpers.REPO, "tests", "fixtures", "slot")

ONE_CPU = {"cgroup_version": "v1", "cpu_quota": "1", "cpu_period_us": "100000", "effective_cpus": "1",
           "available_cpus": "2", "cpuset": "0-1", "slurm_cpus_per_task": "unset"}


def spinning(**changed):
    """A team of 2 under a 1-CPU quota, its worker spinning between regions:
    62 of 100 periods of its 10 s steady phase throttled, 4.1 s held back."""
    c = {"steady_ms": 10000.0, "steady_quota_periods": 100.0, "steady_throttled_periods": 62.0,
         "steady_throttled_ms": 4100.0, "quota_periods": 103.0, "throttled_periods": 63.0, "throttled_ms": 4150.0,
         "max_team": 2.0, "omp_between_regions_ms": 3000.0, "cpu_ms": 9800.0}
    c.update(changed)
    return c


class Advice(unittest.TestCase):
    def test_spinning_workers_under_a_quota(self):
        line = advice.throttled(spinning(), ONE_CPU)
        self.assertEqual(line, "throttled: the cgroup ran out of its CPU quota in 62% of its 100 ms periods (62 of 100 "
                               "in the steady phase), 4.1 s held back: the OpenMP worker spins between regions under "
                               "a 1-CPU quota (3 s of CPU, 31% of the run's, charged to the quota like work): "
                               "OMP_NUM_THREADS=1, or a passive wait (OMP_WAIT_POLICY=passive); `threadburn tune -- "
                               "<command>` measures which costs least")

    def test_the_threshold_at_its_edge(self):
        # THROTTLED_SHARE 0.1 (at least): 10 of 100 periods is throttled, 9 is not.
        self.assertEqual(advice.THROTTLED_SHARE, 0.1)
        self.assertIsNotNone(advice.throttled(spinning(steady_throttled_periods=10.0), ONE_CPU))
        self.assertIsNone(advice.throttled(spinning(steady_throttled_periods=9.0), ONE_CPU))
        # the steady phase's figures, not the run's: a throttled startup alone says nothing
        self.assertIsNone(advice.throttled(spinning(steady_throttled_periods=0.0, throttled_periods=90.0), ONE_CPU))
        # without a steady phase, the run's
        self.assertIsNotNone(advice.throttled(spinning(steady_ms=None, steady_quota_periods=None,
                                                       throttled_periods=90.0), ONE_CPU))

    def test_each_cause(self):
        # SPIN_OF_CPU 0.1 (at least) of the run's CPU between regions: the spin is named
        self.assertIn("worker spins between regions", advice.throttled(spinning(omp_between_regions_ms=980.0), ONE_CPU))
        # below it, a team larger than the slot
        line = advice.throttled(spinning(omp_between_regions_ms=979.0, max_team=4.0), ONE_CPU)
        self.assertIn("a team of 4 threads in a slot of 1 CPUs (1-CPU quota): OMP_NUM_THREADS=1", line)
        # neither: the program needs more CPU than the slot
        line = advice.throttled(spinning(omp_between_regions_ms=0.0, max_team=1.0), ONE_CPU)
        self.assertIn("the program needs more CPU than the slot's 1 CPUs", line)
        three = advice.throttled(spinning(max_team=4.0), dict(ONE_CPU, effective_cpus="2", cpu_quota="1.5"))
        self.assertIn("3 OpenMP workers spin between regions under a 1.5-CPU quota", three)
        self.assertIn("OMP_NUM_THREADS=2", three)

    def test_no_quota_no_line(self):
        none = spinning(steady_quota_periods=None, quota_periods=None)
        self.assertIsNone(advice.throttled(none, ONE_CPU))
        self.assertIsNone(advice.quota_line(none, ONE_CPU))
        self.assertIsNone(advice.throttled({"steady_quota_periods": float("nan"), "steady_ms": 5.0}, ONE_CPU))

    def test_the_quota_line(self):
        self.assertEqual(advice.quota_line(spinning(), ONE_CPU),
                         "CPU quota (1 CPUs a 100 ms period): throttled in 62 of 100 periods of the steady phase "
                         "(62%), 4.1 s held back (the cgroup's cpu.stat: every process in it counts)")

    def test_a_throttled_main_thread_is_not_idle(self):
        # Loader-bound as test_gpu_run's case has it, then in a throttled slot: unsaid there.
        p = advice.Steady(ms=10000.0, cpu_ms=30000.0, main_cpu_ms=2000.0, children_ms=28000.0, workers=3,
                          gpu_busy=0.3, main_wait_ms=0.0, main_wait_cpu_ms=0.0, waits=0, wait_cpu_ms=0.0,
                          launches=0, launch_ms=0.0)
        self.assertIsNotNone(advice.loader_bound(p))
        self.assertIsNone(advice.loader_bound(advice.Steady(**dict(p.__dict__, throttled_share=0.1))))
        self.assertIsNotNone(advice.loader_bound(advice.Steady(**dict(p.__dict__, throttled_share=0.09))))

    def test_a_launcher_held_by_its_quota_waits_for_the_quota(self):
        # The GPU busy 30 % of a 10 s steady phase; the main thread launches, 0.5 of a core of CPU and
        # 4 s of run-queue wait: its demand 0.9 of a core (host-bound). In a slot throttled in 60 % of
        # its periods that wait is the quota's (the kernel counts a throttled thread's wait as run-queue
        # wait): the advice names the quota, not cores held by others; below THROTTLED_SHARE, the cores.
        p = advice.Steady(ms=10000.0, cpu_ms=9000.0, main_cpu_ms=5000.0, children_ms=0.0, workers=0,
                          gpu_busy=0.3, main_wait_ms=0.0, main_wait_cpu_ms=0.0, waits=0, wait_cpu_ms=0.0,
                          launches=500, launch_ms=900.0, main_runq_ms=4000.0, throttled_share=0.6)
        line = advice.host_bound(p)
        self.assertTrue(line.startswith("host-bound: the main thread worked 0.50 of a core outside its waits on the "
                                        "device and waited to run 40% of the steady phase (4 s) in a slot whose CPU "
                                        "quota ran out in 60% of its periods"), line)
        self.assertIn("that thread for the slot's quota, not for idle cores. A larger quota", line)
        self.assertNotIn("other threads or processes held the cores", line)
        for share in (0.1, 0.09):  # THROTTLED_SHARE at its edge
            line = advice.host_bound(advice.Steady(**dict(p.__dict__, throttled_share=share)))
            self.assertEqual("slot's quota" in line, share >= advice.THROTTLED_SHARE, line)
            self.assertEqual("other threads or processes held the cores" in line, share < advice.THROTTLED_SHARE)


class SlotLine(unittest.TestCase):
    def test_the_line(self):
        self.assertEqual(slot_line(ONE_CPU), "1 effective CPUs (the affinity mask's 2, the quota rounded up: the "
                                             "smaller); cgroup v1, CPU quota 1 CPUs a 100 ms period, cpuset 0-1")
        free = dict(ONE_CPU, cpu_quota="none", cpu_period_us="none", effective_cpus="2", slurm_cpus_per_task="2")
        self.assertEqual(slot_line(free), "2 effective CPUs (the affinity mask's 2: the smaller); cgroup v1, no CPU "
                                          "quota, cpuset 0-1, SLURM_CPUS_PER_TASK=2")
        self.assertIsNone(slot_line({"available_cpus": "2"}))  # a file from before the slot was read

    def test_of_a_results_files_rows(self):
        rows = [Row({"available_cpus": "2"}), Row({k: v for k, v in ONE_CPU.items()})]
        self.assertEqual(machine.slot_line_of_rows(rows), slot_line(ONE_CPU))
        self.assertIsNone(machine.slot_line_of_rows([Row({"available_cpus": "2"})]))

    def test_doctor_says_the_slot(self):
        # Read here when no program reports it: the effective CPUs as this process's own rule gives them
        # (doctor's line itself, not the whole command: its other checks take seconds).
        line = doctor.read_here()
        self.assertTrue(line.startswith(f"{machine.effective_cpus()} effective CPUs (the affinity mask's "
                                        f"{machine.usable_cpus()}"), line)
        self.assertTrue(line.endswith("(read here: no program reported it)"), line)


class Planning(unittest.TestCase):
    """tune's default thread counts from the slot: the quota read in Python
    (lib/cgroup.py) with src/core/slot.cc's rule, on the same fixture trees."""

    def test_the_tightest_quota_of_both_versions(self):
        self.assertEqual(cgroup.quota_cpus(os.path.join(FIXTURES, "v1")), 2.5)  # the parent's, not the leaf's 3
        self.assertEqual(cgroup.quota_cpus(os.path.join(FIXTURES, "v2")), 1.5)  # the pod's, two levels up
        self.assertIsNone(cgroup.quota_cpus(os.path.join(FIXTURES, "none")))

    def threads(self, quota, cores=8, cpus=8, copies=None):
        with mock.patch.object(machine, "physical_cores", lambda: cores), \
                mock.patch.object(machine, "usable_cpus", lambda: cpus), \
                mock.patch.object(cgroup, "quota_cpus", lambda root="": quota):
            self.assertEqual(machine.effective_cpus(), min(cpus, -(-quota // 1)) if quota else cpus)
            points = plans.default_points({}, copies=copies)
        return sorted({int(p.env["OMP_NUM_THREADS"]) for p in points if p.name.endswith("-gomp")})

    def test_the_quotas_cpus_join_the_thread_counts(self):
        self.assertEqual(self.threads(None), [1, 8])
        self.assertEqual(self.threads(2.5), [1, 3, 8])   # 2.5 CPUs' quota: 3 threads
        self.assertEqual(self.threads(16.0), [1, 8])     # a quota above the mask: the mask's
        self.assertEqual(self.threads(4.0, copies=2), [1, 2, 4, 8])  # per copy: the slot's 4 over 2 copies



class SlotSize(unittest.TestCase):
    """tune --cpus: the size of the slot threadburn makes, refused in one line before anything is made."""

    def test_sizes(self):
        self.assertEqual(cgroup.parse_cpus("1", host_cpus=2), 1.0)
        self.assertEqual(cgroup.parse_cpus("1.5", host_cpus=2), 1.5)
        for text, said in (("0.001", "below what one thread needs"), ("3", "above this host's 2 CPUs"),
                           ("1,2", "one slot size (1, 1.5) expected"), ("many", "expected a number of CPUs")):
            with self.assertRaises(ValueError) as caught:
                cgroup.parse_cpus(text, host_cpus=2)
            self.assertIn(said, str(caught.exception))

    def test_lists_of_sizes(self):
        # tune --cpus 1,2,4 / 1.5 / auto: sorted; auto as --copies auto counts (1, 2, 4, ... and the CPUs)
        self.assertEqual(cgroup.parse_sizes("2,1", host_cpus=2), [1.0, 2.0])
        self.assertEqual(cgroup.parse_sizes("0.5,1.5", host_cpus=2), [0.5, 1.5])
        self.assertEqual(cgroup.parse_sizes("auto", host_cpus=2), [1.0, 2.0])
        self.assertEqual(cgroup.parse_sizes("auto", host_cpus=6), [1.0, 2.0, 4.0, 6.0])
        for text, said in (("1,3", "above this host's 2 CPUs"), ("0.001,1", "below what one thread needs"),
                           ("1,1.0", "given twice"), ("1,", "expected a number of CPUs")):
            with self.assertRaises(ValueError) as caught:
                cgroup.parse_sizes(text, host_cpus=2)
            self.assertIn(said, str(caught.exception))

    def test_bad_input_is_one_line(self):
        result = helpers.threadburn("tune", "--cpus", "0", "--", "true")
        helpers.assert_one_line_error(self, result, "--cpus 0: a quota of 0 CPUs is below what one thread needs "
                                                    "(at least 0.01)")
        result = helpers.threadburn("tune", "--cpus", "1,1", "--", "true")
        helpers.assert_one_line_error(self, result, "--cpus 1,1: a slot size given twice in '1,1'")
        result = helpers.threadburn("tune", "--cpus", f"1,{os.cpu_count() + 1}", "--", "true")
        helpers.assert_one_line_error(self, result, f"--cpus 1,{os.cpu_count() + 1}: a quota of {os.cpu_count() + 1} "
                                                    f"CPUs is above this host's {os.cpu_count()} CPUs")
        result = helpers.threadburn("tune", "--cpus", "1,2", "--copies", "2", "--", "true")
        helpers.assert_one_line_error(self, result, "--cpus 1,2: not with --copies (a tune of several slot sizes: "
                                                    "each size's tune, then its plan against the others' in fresh "
                                                    "runs)")


def size_rows(times, plain=None, rounds=10, noise=0.01):
    """Rows of a sizes file (engine/slots.py): {size: (plan, wall ms)} of each size's plan, the
    same ms every round but for a deterministic jitter within +-noise, its own for each size
    and round; plain: {size: wall ms} beside."""
    rows = []
    for rnd in range(rounds):
        for size, (plan, ms) in times.items():
            jitter = 1 + noise * (((rnd * 7 + int(size * 3)) % 5) - 2) / 2
            roles = [("plan", plan, ms)] + ([("plain", "plain", plain[size])] if plain and size in plain else [])
            for role, name, wall in roles:
                t = f"{size:g}"
                rows.append(Row({"point_key": f"cpus{t}-{role}", "run_key": f"confirm-cpus{t}-{role}-r{rnd}",
                                 "phase": "confirm", "status": "ok", "round": str(rnd), "study": name,
                                 "wall_ms": str(wall * jitter), "cpu_ms": str(wall * jitter * min(size, 2)),
                                 "command": "train", "cpu_quota": t, "metric": ""}))
    return rows


class SlotSizes(unittest.TestCase):
    """tune --cpus 1,2,4: each size's plan against the previous size's, by --copies' rule
    (hostplan.steps), on fresh runs whose answer is known: twice as fast from 1 to 2 CPUs, the
    same from 2 to 4 (2 % apart, inside the 5 % margin)."""

    def test_the_training_needs_two(self):
        z = slotsizes.decide(size_rows({1.0: ("T1-gomp", 200.0), 2.0: ("plain", 100.0), 4.0: ("plain", 98.0)},
                                       plain={1.0: 260.0}), rules.Rule())
        self.assertEqual([s.cpus for s in z.sizes], [1.0, 2.0, 4.0])
        self.assertEqual([s.plan for s in z.sizes], ["T1-gomp", "plain", "plain"])
        self.assertEqual([s.word for s in z.steps], ["adds", "adds less"])
        self.assertEqual((z.needs, z.settled), (2.0, True))
        self.assertAlmostEqual(z.alpha, rules.Rule().confirm_alpha / 2)
        self.assertAlmostEqual(z.sizes[0].throughput, 5.0, delta=0.05)  # runs/s: 1 / 200 ms
        self.assertAlmostEqual(z.sizes[0].plain["throughput"], 1000 / 260, delta=0.05)
        self.assertAlmostEqual(z.sizes[1].cpus_used, 2.0)
        text = "\n".join(slotsizes_text.lines(z))
        self.assertRegex(text, r"1 -> 2 CPUs \(T1-gomp -> plain\): throughput \+10\d\.\d% \[.*\]: faster by more than 5%")
        self.assertIn("the training needs 2 CPUs of these: a larger slot is not faster by 5%", text)

    def test_open_and_the_largest(self):
        # 2 CPUs 3 % faster than 1: inside the margin but too few runs to show it: open, "at least 1"
        z = slotsizes.decide(size_rows({1.0: ("plain", 103.0), 2.0: ("plain", 100.0)}, rounds=4, noise=0.06),
                             rules.Rule())
        self.assertEqual((z.steps[0].word, z.needs, z.settled), ("open", 1.0, False))
        self.assertIn("needs at least 1 CPU; more fresh runs", "\n".join(slotsizes_text.lines(z)))
        # every step faster: the largest tried, at least
        z = slotsizes.decide(size_rows({1.0: ("plain", 200.0), 2.0: ("plain", 100.0)}), rules.Rule())
        self.assertEqual((z.needs, z.settled), (2.0, False))
        self.assertIn("needs at least 2 CPUs (the largest slot tried)", "\n".join(slotsizes_text.lines(z)))

    def test_one_size_is_no_comparison(self):
        self.assertIsNone(slotsizes.decide(size_rows({1.0: ("plain", 100.0)}), rules.Rule()))

    def test_the_figure(self):
        # slots.png: throughput and CPUs busy against the slot size, the plan's line and plain's
        import tempfile
        from threadburn.export import figures
        rows = size_rows({1.0: ("T1-gomp", 200.0), 2.0: ("plain", 100.0)}, plain={1.0: 260.0})
        points = slotsizes.figure_points(rows)
        self.assertEqual(sorted((e["setting"], e["cpus"]) for e in points),
                         [("each size's plan", 1.0), ("each size's plan", 2.0), ("plain", 1.0)])
        try:
            plt = figures.pyplot()
        except Exception as e:  # noqa: BLE001 (no matplotlib here)
            self.skipTest(str(e))
        with tempfile.TemporaryDirectory() as tmp:
            written = figures.slot_sizes(rows, plt, tmp)
            self.assertEqual([os.path.basename(w) for w in written], ["slots.png"])
        self.assertEqual(figures.slot_sizes(size_rows({1.0: ("plain", 100.0)}), plt, "/nonexistent"), [])


if __name__ == "__main__":
    unittest.main()
