"""The verdicts as data: <stem>.verdict.json beside a results CSV (what
`threadburn verdict CSV` recomputes from the CSV alone, exactly), and the
export JSON (--export-json FILE: the same with the headline and a row per
setting). results/README.md documents both."""
import json

from . import views

VERDICT_SCHEMA = 2
EXPORT_SCHEMA = 2


def _ratio(r):
    return views.ratio_data(r)


def _confirmation(c):
    if c is None:
        return None
    out = {"chosen": c.chosen, "baseline": c.baseline, "claim": c.claim, "runs": list(c.runs),
           "time_ratio": _ratio(c.time), "cpu_ratio": _ratio(c.cpu), "holds": c.holds,
           "coverage": round(c.coverage, 4), "margin": c.margin, "cpu_margin": round(c.cpu_margin, 5),
           "probe_cost": _ratio(c.probe_cost)}
    if c.sequential:  # rule version 3's looks: keys an older file's verdict does not have
        out.update({"look": c.look, "alpha": round(c.alpha, 6), "more_runs": c.more, "more_runs_sized": c.more_sized})
    return out


def workload(e):
    d = e.decision
    race = d.vs_baseline.get(e.chosen) if e.chosen and e.chosen != d.baseline else None
    race_t, race_c = (race.time, race.cpu) if race else (None, None)
    c = e.confirmation
    confirmed = c is not None and c.time is not None
    headline_ratios = (c.time, c.cpu) if confirmed else (race_t, race_c)
    side = {n: {"time_geomean": d.settings[n].geo("time"), "cpu_geomean": d.settings[n].geo("cpu")}
            for n in dict.fromkeys([e.chosen, d.cheapest_within]) if n in d.settings}
    out = {
        "workload": e.label, "verdict": e.verdict, "race_verdict": d.verdict, "setting": e.chosen,
        "baseline": d.baseline, "env": e.env.get(e.chosen, {}) if e.chosen else {}, "why": d.why,
        "time_ratio": _ratio(headline_ratios[0]), "cpu_ratio": _ratio(headline_ratios[1]),
        "gain_from": "confirmation" if confirmed else "race, as selected",
        "candidate": d.candidate, "candidate_claim": d.candidate_claim,
        "as_selected": {"time_ratio": _ratio(race_t), "cpu_ratio": _ratio(race_c)},
        "confirmation": _confirmation(c), "time_metric": e.time_kind,
        "fastest": d.fastest, "cheapest_within_margin": d.cheapest_within, "side_by_side": side,
        "alpha_per_test": d.alpha_each, "cpu_margin": round(d.cpu_margin, 5),
        "winners": d.winners, "eliminated": d.eliminated,
        "contenders": [{"setting": n, "runs_needed": k} for n, k in d.contenders],
        "open": [{"setting": n, "against": d.baseline, "runs_needed": k} for n, k in d.open],
        "runs": e.runs, "runs_per_setting": {n: s.n for n, s in d.settings.items()},
        "duplicates": e.duplicates, "failed": e.failed,
        "set_aside": [{"setting": n, "run_key": k, "why": w} for n, k, w in e.set_aside]}
    if d.rule.rules_out_refuted:  # rule version 5: a key an older file's verdict does not have
        out["refuted"] = [_confirmation(r) for r in e.refuted]
    if d.rule.steady_phase:  # version 6: the startup left out of a run judged on its steady phase (null: none)
        out["startup_ms"] = e.startup_ms
    chosen_params = e.params.get(e.chosen, {}) if e.chosen else {}
    if chosen_params or any(e.params.values()):
        out["params"] = chosen_params
    if e.copies:  # a host tune's (--copies): keys a file of one process a run does not have
        out.update({"copies": e.copies, "pins": list(e.pins.get(e.chosen, ())) if e.chosen else [],
                    "alone": None if e.alone is None else {
                        "setting": e.alone.setting, "per_copy_ratio": _ratio(e.alone.ratio),
                        "higher_is_better": e.alone.higher_is_better, "runs": list(e.alone.runs)}})
    return out


def _fit(f):
    if f is None:
        return None
    return {"command": f.command, "tried": list(f.tried), "fits": f.fits, "settled": f.settled, "margin": f.margin,
            "alpha_per_step": f.alpha,
            "steps": [{"fewer": s.fewer, "more": s.more, "fewer_plan": s.fewer_plan, "more_plan": s.more_plan,
                       "ratio": _ratio(s.ratio), "word": s.word} for s in f.steps]}


def verdict_data(verdicts):
    out = {"verdict_schema": VERDICT_SCHEMA, "source": verdicts.source, "rule": verdicts.rule.to_json(),
           "rule_from": verdicts.rule_from, "workloads": [workload(e) for e in verdicts.entries]}
    if verdicts.fit is not None:
        out["fit"] = _fit(verdicts.fit)
    return out


def verdict_text(verdicts):
    return json.dumps(verdict_data(verdicts), indent=1) + "\n"


def export_text(verdicts):
    out = {"export_schema": EXPORT_SCHEMA}
    out.update(verdict_data(verdicts))
    out["workloads"] = [dict(w, headline=views.headline(e), settings=views.setting_rows(e))
                        for w, e in zip(out["workloads"], verdicts.entries)]
    return json.dumps(out, indent=1) + "\n"
