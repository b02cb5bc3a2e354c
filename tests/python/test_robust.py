"""Rule versions 3 and 4 (python/threadburn/lib/rule.py, analysis/decide.py and ratios.py,
analysis/confirmation.py, analysis/race.py) on data whose truth is known:
the ranks' bounds against published tables, their coverage and their
resistance to runs slowed 2x by what no evidence shows, the spending of
keep and of the sequential confirmation, the last look that makes keep
reachable, and the fresh runs that go on until the budget is spent. Every
rate bound is the promise plus three binomial standard errors of the trial
count; each test goes red when the piece it guards is undone (the commit
that added it says how it was seen red)."""
import math
import os
import random
import sys
import unittest

import helpers
from threadburn.analysis import ratios
from threadburn.lib import rule as rules
from threadburn.lib.stats import sign_bound, sign_depth, signed_rank_depth

sys.path.insert(0, os.path.join(helpers.REPO, "bench"))
import decisions  # noqa: E402  (the decision rule's benchmark: its synthetic tune)

EDGE = 1 / (1 + rules.MARGIN)


def at_most(rate, p, trials):
    return rate <= p + 3 * math.sqrt(p * (1 - p) / trials)


def rounds(rng, n, ratio, sd=0.03, hidden=0.10):
    """({round: setting's value}, {round: baseline's}) of n rounds: the
    setting's true cost `ratio` x the baseline's, log-normal run noise sd,
    and each run of either slowed 2x with probability `hidden`."""
    run = lambda truth: truth * math.exp(rng.gauss(0, sd)) * (2.0 if rng.random() < hidden else 1.0)
    return {r: run(1000.0 * ratio) for r in range(n)}, {r: run(1000.0) for r in range(n)}


class Depths(unittest.TestCase):
    def test_the_signed_rank_depths_are_the_published_critical_values(self):
        # One-sided critical values of the Wilcoxon signed-rank statistic (the largest T with
        # P(T+ <= T) <= alpha), from the tables: alpha 0.05: n 6: 2, 8: 5, 10: 10, 12: 17, 20: 60;
        # alpha 0.01: n 8: 1, 10: 5, 20: 43. The depth (the Walsh average that bounds) is T + 1.
        for n, a, t in ((6, 0.05, 2), (8, 0.05, 5), (10, 0.05, 10), (12, 0.05, 17), (20, 0.05, 60),
                        (8, 0.01, 1), (10, 0.01, 5), (20, 0.01, 43)):
            self.assertEqual(signed_rank_depth(n, a), t + 1, (n, a))

    def test_the_sign_depths_are_the_binomials(self):
        # n 20: P(B <= 5) = 0.0207, P(B <= 6) = 0.0577; n 10: P(B <= 1) = 0.0107, P(B <= 2) = 0.0547.
        self.assertEqual(sign_depth(20, 0.05), 6)
        self.assertEqual(sign_depth(10, 0.05), 2)
        self.assertEqual(sign_depth(10, 0.01), 1)

    def test_no_depth_below_two_to_the_minus_n(self):
        # The floor of both tests: with n pairs the smallest one-sided level is 2^-n.
        for n in (3, 5, 8, 12):
            self.assertEqual(signed_rank_depth(n, 0.99 * 2.0 ** -n), 0)
            self.assertEqual(sign_depth(n, 0.99 * 2.0 ** -n), 0)
            self.assertEqual(signed_rank_depth(n, 2.0 ** -n), 1)
            self.assertEqual(sign_depth(n, 2.0 ** -n), 1)

    def test_below_the_floor_the_bound_is_the_paired_ts(self):
        # 3 rounds at one-sided 0.01 (below 1/8): no rank bound exists; the ratio is still an
        # interval, the paired t's, and a clear 30 % gain at 0.5 % noise still shows.
        rng = random.Random(3)
        x, y = rounds(rng, 3, 0.7, sd=0.005, hidden=0.0)
        r = ratios.ratio(x, y, 0.01, method="ranks")
        t = ratios.ratio(x, y, 0.01, method="paired")
        self.assertAlmostEqual(r.lo, t.lo, places=6)  # (the ranks widen by the rounding, the t by its variance)
        self.assertAlmostEqual(r.hi, t.hi, places=6)
        self.assertTrue(r.better(rules.MARGIN))


class Interpolated(unittest.TestCase):
    """The sign test's bound interpolated to its level (rule version 4,
    lib/stats.sign_bound), on draws whose median is known (0)."""

    TRIALS = 20000

    def level(self, n, alpha, draw, exact=False):
        rng = random.Random(n * 1000 + int(alpha * 1000))
        missed = 0
        for _ in range(self.TRIALS):
            xs = sorted(draw(rng) for _ in range(n))
            bound = xs[-sign_depth(n, alpha)] if exact else sign_bound(xs, alpha, upper=True)
            missed += bound < 0
        return missed / self.TRIALS

    def test_the_bound_is_at_its_level_where_the_exact_one_is_far_below(self):
        # 11 rounds at 3 % (a confirmation's first look): the exact bound, the 2nd largest, is
        # a test at 0.59 %; interpolated toward the 3rd, at 3 % within three standard errors
        # and a tenth, for the normal, the Laplace and a normal with a run in ten slowed 2x
        # on either side (symmetric about 0).
        laplace = lambda r: r.expovariate(1.0) * (1 if r.random() < 0.5 else -1)
        hidden = lambda r: r.gauss(0, 0.042) + (math.log(2) if r.random() < 0.1 else 0) - (
            math.log(2) if r.random() < 0.1 else 0)
        for name, draw in (("normal", lambda r: r.gauss(0, 1)), ("laplace", laplace), ("hidden", hidden)):
            for n, alpha in ((11, 0.03), (17, 0.03), (24, 0.018)):
                p = self.level(n, alpha, draw)
                slack = 0.1 * alpha + 3 * math.sqrt(alpha * (1 - alpha) / self.TRIALS)
                self.assertLess(abs(p - alpha), slack, (name, n, alpha, p))
        self.assertLess(self.level(11, 0.03, lambda r: r.gauss(0, 1), exact=True), 0.01)

    def test_it_lies_between_the_two_order_statistics_and_is_exact_on_a_step(self):
        xs = sorted(random.Random(5).gauss(0, 1) for _ in range(11))
        k = sign_depth(11, 0.03)
        self.assertTrue(xs[-k - 1] <= sign_bound(xs, 0.03, True) <= xs[-k])
        self.assertTrue(xs[k - 1] <= sign_bound(xs, 0.03, False) <= xs[k])
        # at a level the binomial reaches exactly, the exact order statistic: P(B <= 1 | 11) = 12/2048
        self.assertEqual(sign_bound(xs, 12 / 2048, True), xs[-2])
        self.assertIsNone(sign_bound(xs, 0.99 * 2.0 ** -11, True))


class HiddenSlowdowns(unittest.TestCase):
    TRIALS = 2000

    def test_the_bounds_cover_with_a_run_in_ten_slowed_2x(self):
        # Each bound is a one-sided 5 % test of the centre of the rounds' log ratios: with a
        # run in ten slowed 2x (either side, no evidence) the truth (12 % faster) lies below the
        # upper bound and above the lower one in at least 95 % of data sets each.
        rng = random.Random(11)
        high = low = 0
        for _ in range(self.TRIALS):
            r = ratios.ratio(*rounds(rng, 12, 0.88), 0.05, method="ranks")
            high += r.hi < 0.88
            low += r.lo > 0.88
        self.assertTrue(at_most(high / self.TRIALS, 0.05, self.TRIALS), high)
        self.assertTrue(at_most(low / self.TRIALS, 0.05, self.TRIALS), low)

    def test_a_run_in_ten_slowed_2x_does_not_hide_a_12_percent_gain(self):
        # 18 rounds: the ranks show the 12 % winner better by the 5 % margin in most data sets;
        # the paired t, whose spread the slow runs blow up, in few.
        rng = random.Random(12)
        shown = {"ranks": 0, "paired": 0}
        for _ in range(400):
            x, y = rounds(rng, 18, 0.88)
            for method in shown:
                shown[method] += ratios.ratio(x, y, 0.05, method=method).better(rules.MARGIN)
        self.assertGreaterEqual(shown["ranks"] / 400, 0.85, shown)
        self.assertLessEqual(shown["paired"] / 400, 0.5, shown)


class Spending(unittest.TestCase):
    def test_keep_and_the_confirmation_spend_at_most_their_alpha(self):
        r = rules.Rule()
        self.assertTrue(all(r.alpha_keep(k) >= 0 and r.alpha_confirm(k) >= 0 for k in range(1, 500)))
        early = sum(r.alpha_keep(k) for k in range(1, 500))
        self.assertLessEqual(early + r.alpha * rules.KEEP_FINAL, r.alpha + 1e-12)
        self.assertAlmostEqual(r.alpha_keep(3, final=True), r.alpha * (rules.KEEP_FINAL + rules.KEEP_SPENDING[2]))
        self.assertLessEqual(sum(r.alpha_confirm(k) for k in range(1, 500)), r.confirm_alpha + 1e-12)
        self.assertGreater(sum(r.alpha_confirm(k) for k in range(1, 60)), 0.999 * r.confirm_alpha)

    def test_a_version_2_rule_reads_as_it_was_written(self):
        # A file written by rule version 2 is judged by it: paired t, keep at the look's share,
        # one confirmation look at confirm_alpha, looks by the entries reached.
        old = rules.parse("objective=balanced;margin=0.05;alpha=0.05;design=race;confirm=True;disturbed_cores=0.25;"
                          "cpu_floor_cores=0.05;confirm_alpha=0.05;version=2")
        self.assertEqual(old.method, "paired")
        self.assertEqual(old.alpha_keep(3, final=True), 0.05 * rules.SPENDING[2])
        self.assertEqual(old.alpha_confirm(2), 0.05)
        self.assertEqual(old.alpha_select(7), 0.05)
        self.assertEqual([old.look_of(n) for n in (3, 5, 7, 8, 10)], [1, 2, 2, 3, 3])
        new = rules.Rule()
        self.assertEqual((new.version, new.method, new.interpolates, new.rules_out_refuted, new.steady_phase,
                          new.claims_clearer), (7, "ranks", True, True, True, True))
        self.assertFalse(rules.parse(new.text().replace("version=7", "version=3")).interpolates)
        self.assertFalse(rules.parse(new.text().replace("version=7", "version=4")).rules_out_refuted)
        self.assertFalse(rules.parse(new.text().replace("version=7", "version=5")).steady_phase)
        self.assertFalse(rules.parse(new.text().replace("version=7", "version=6")).claims_clearer)
        # version 3: a look short of the next entry (the budget's last) is a look of its own
        self.assertEqual([new.look_of(n) for n in (3, 5, 7, 8, 10)], [1, 2, 3, 3, 4])


def case(truths, seed, **scenario):
    sc = dict({"objective": "balanced", "noise": 0.03, "truths": truths}, **scenario)
    return decisions.run_case(sc, seed)


class WholeTunes(unittest.TestCase):
    """Whole synthetic tunes (bench/decisions.py's) within tune's default budget."""

    def test_keep_is_the_usual_ending_of_a_null_at_3_percent_noise(self):
        # Seven settings alike, 3 % run noise, 70 runs: the last look spends the budget on
        # the comparisons still open and keep's last test gets most of keep's alpha (rule
        # version 2 kept in 3 % of such cases).
        null = [decisions.Truth("plain", 1.0)] + [decisions.Truth(f"s{i}", 1.0) for i in range(1, 7)]
        kept = [case(null, 500 + i).verdict for i in range(60)].count("keep")
        self.assertGreaterEqual(kept / 60, 0.35, kept)

    def test_a_candidate_the_last_look_finds_gets_fresh_runs(self):
        # Plain, a 12 % winner W and a setting alike, a run in ten slowed 2x, 5 % noise, 60
        # runs. Of 200 such tunes (seeds 3000-3199), 6 end their race's budget with no
        # candidate and keep not shown, and the last look finds W. When that look took the
        # whole rest, W got no fresh runs ("no budget left for fresh runs": undecided, as in
        # a soak round of the live known answer); race.last_looks leaves their room first
        # and these three are confirmed (the other three find W only in the look that spends
        # the room on keep's test; no tune of the 200 ended otherwise than before).
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("W", 0.88), decisions.Truth("S", 1.0)]
        for seed in (3031, 3059, 3163):
            k = case(truths, seed, invisible=0.10, noise=0.05, runs_per_setting=20)
            self.assertEqual((k.verdict, k.chosen), ("change", "W"), seed)
            self.assertGreaterEqual(k.looks, 1, seed)

    def test_fresh_runs_under_the_margin_go_on_while_their_interval_reaches_past_it(self):
        # Three settings alike at 8 % noise with invisible slowdowns, 150 runs: the race picks
        # B on luck after 15 runs; its first 30 + 30 fresh runs show a gain under the margin
        # with an interval still reaching past it. They stopped there ("The budget is spent;
        # no number of fresh runs would show it", with 81 runs left, as a soak round of
        # tune_hidden printed with 125 left after 8 pairs); they go on now, look after look,
        # until the budget is spent, and the verdict says what they show and that it is spent.
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("A", 1.0), decisions.Truth("B", 1.0)]
        k = case(truths, 9007, noise=0.08, invisible=0.10, runs_per_setting=50)
        self.assertEqual((k.verdict, k.candidate), ("undecided", "B"))
        self.assertGreaterEqual(k.looks, 2)
        self.assertGreater(k.runs, 150 - 2 * decisions.confirmation.LOOK_MIN_RUNS)
        from threadburn.export import views
        line = views.headline(k.entry)
        self.assertIn("The budget is spent; the gain they measure is under the 5% margin so far", line)
        self.assertNotIn("no number of fresh runs", line.lower())

    def test_a_cheaper_setting_barely_faster_is_confirmed_on_its_cpu(self):
        # Plain and X: CPU -26 %, time -7 % (2 points past the 5 % margin), 4 % noise, 40
        # runs; X is right on either claim. The race shows both; rule version 6 confirmed
        # X's time, which fresh runs of a 7 % gain rarely show past the margin (23 of seeds
        # 4000-4039 changed, the rest undecided: LLVM's blocktime 0 beside four spinners, CPU
        # -26 % and time -3 %, was undecided in 7 of 7 in-run tunes); version 7 confirms the
        # claim the race showed further past its margin, here the CPU (39 of 40).
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("X", 0.93, cpu=0.74)]
        for design in (None, "in-run"):
            right = {}
            for version in (6, 7):
                verdicts = [case(truths, 4000 + i, noise=0.04, runs_per_setting=20, rule_version=version,
                                 **({"design": design} if design else {})) for i in range(40)]
                self.assertNotIn("keep", [k.verdict for k in verdicts], (design, version))
                right[version] = sum((k.verdict, k.chosen) == ("change", "X") for k in verdicts)
            self.assertGreaterEqual(right[7], 34, (design, right))
            self.assertLess(right[6], right[7] - 5, (design, right))

    def test_a_candidate_its_fresh_runs_contradict_is_ruled_out_and_the_race_goes_on(self):
        # Plain, P 15 % faster under the probe only (its fresh runs, without it, are plain's
        # time) and W 12 % faster everywhere, 3 % noise, 90 runs. The race picks P; its fresh
        # runs contradict it. Rule version 4 ended there, undecided, with the rest of the
        # budget unspent (0 of these 40 changed); version 5 rules P out, the race goes on, and
        # W's fresh runs confirm it (97 of seeds 0-99; never P).
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("P", 0.85, fresh=1.0), decisions.Truth("W", 0.88)]
        right = refuted = 0
        for seed in range(40):
            k = case(truths, seed, runs_per_setting=30)
            self.assertNotEqual(k.chosen if k.verdict == "change" else None, "P", seed)
            self.assertIn([(c.chosen, c.holds) for c in k.entry.refuted], ([], [("P", "no")]), seed)
            right += (k.verdict, k.chosen) == ("change", "W")
            if k.entry.refuted and k.verdict == "change":  # W's looks come after P's: it spent what P's left
                refuted += 1
                self.assertGreater(k.entry.confirmation.look, k.entry.refuted[0].look, seed)
                self.assertLess(k.entry.confirmation.alpha, rules.Rule().alpha_confirm(1), seed)
        self.assertGreaterEqual(refuted, 20, refuted)  # most races pick P first
        self.assertGreaterEqual(right / 40, 0.85, right)

    def test_a_look_past_the_margin_by_luck_does_not_take_the_whole_budget(self):
        # Plain, P 25 % faster under the probe only, W 15 % faster (time and CPU) everywhere,
        # 4 % noise, 130 runs a setting (tests/bench/check_hidden.py's tune_refuted). When
        # P's first fresh look showed a gain just past the margin by luck, the runs its next
        # look would need to tell (ratios.runs_needed at a gain that near the margin) were
        # the whole budget: 190 + 190 runs at look 2, P then contradicted and no runs left
        # for W, undecided (5 of seeds 7000-7199, these). A look adds at most the runs so far
        # (confirmation.LOOK_MAX_GROWTH): P is contradicted within budget and W confirmed.
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("P", 0.75, fresh=1.0),
                  decisions.Truth("W", 0.85, 0.85)]
        for seed in (7000, 7002, 7023, 7073, 7179):
            k = case(truths, seed, noise=0.04, runs_per_setting=130)
            self.assertEqual((k.verdict, k.chosen), ("change", "W"), (seed, k.look_runs))
            for name in ("P", "W"):
                looks = sorted((look, n) for (s, look), n in k.look_runs.items() if s == name)
                for i in range(1, len(looks)):
                    so_far = sum(n for _, n in looks[:i])
                    self.assertLessEqual(looks[i][1], max(decisions.confirmation.LOOK_MIN_RUNS, so_far),
                                         (seed, name, looks))

    def test_a_null_ends_keep_when_fresh_runs_contradict_the_race_s_pick(self):
        # Three settings alike at 3 % noise, 120 runs (seeds 9000-9399): the race picks one on
        # luck in a few percent of tunes; its fresh runs contradict it. Version 4 ended those
        # undecided with 36-79 runs unspent; version 5 rules it out, the race goes on and
        # keep's test counts it as shown by its fresh runs.
        truths = [decisions.Truth("plain", 1.0), decisions.Truth("A", 1.0), decisions.Truth("B", 1.0)]
        ended = {}
        for seed in range(9000, 9200):
            k = case(truths, seed, runs_per_setting=40)
            if k.entry.refuted:
                ended[seed] = k.verdict
        self.assertGreaterEqual(len(ended), 3, ended)
        self.assertEqual(set(ended.values()), {"keep"}, ended)

    def test_fresh_runs_go_on_until_the_budget_is_spent(self):
        # A 10 % winner among seven settings with a run in ten slowed 2x: whenever the verdict
        # stays undecided after fresh runs that more runs could still settle, the budget is
        # spent (too few runs left for another look: rule version 2 stopped after one look,
        # 54-136 s into a default budget, telling the user to raise it). Within tune's default
        # budget at 3 % noise most tunes confirm W (35 of these 40 with rule version 4, 31
        # with version 3); with twice the budget at 5 % noise, where the first look often
        # cannot tell, some confirmations take a second look (6 of 40).
        truths = decisions.default_set(0.10)
        for noise, per_setting, least_right, second_looks in ((0.03, 10, 0.7, 0), (0.05, 20, 0.5, 1)):
            budget = per_setting * len(truths)
            looks, right = 0, 0
            for i in range(40):
                k = case(truths, 900 + i, invisible=0.10, noise=noise, runs_per_setting=per_setting)
                right += (k.verdict, k.chosen) == ("change", "W")
                if k.verdict == "undecided" and k.conf_est is not None and k.more is not None:
                    self.assertGreater(k.runs, budget - 2 * decisions.confirmation.LOOK_MIN_RUNS, vars(k))
                looks += k.looks > 1
            self.assertGreaterEqual(looks, second_looks, noise)
            self.assertGreaterEqual(right / 40, least_right, (noise, right))


if __name__ == "__main__":
    unittest.main()
