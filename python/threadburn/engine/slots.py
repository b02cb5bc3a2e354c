"""tune --cpus with several slot sizes (tune --cpus 1,2,4, or auto;
docs/slot.md): which plan for each size of a CPU quota, and how many CPUs
the training needs.

Each size's whole tune runs in a cgroup of that quota that threadburn makes
under its own and removes after (lib/cgroup.py, QuotaCgroup), exactly as a
tune of one size: threadburn joins the slot, so every run and its probe's
reading of the slot are inside it. Its rows go to <stem>-cpus<size>.csv
with its own verdict. Then the sizes side by side: each size's plan (its
tune's confirmed change, else plain; the command layer reads it) and plain
beside it, fresh runs without the probe, interleaved in rounds, each run in
a slot of its own size (every size's slot made again for them, all removed
after), into <stem>.csv, each row carrying its slot (cgroup_version,
cpu_quota, cpu_period_us, effective_cpus). How each size's plan compares
with the previous size's is --copies' rule (analysis/hostplan.py, steps).

Bad input is one line before anything runs: a size above the host's CPUs
or below what one thread needs (cgroup.parse_sizes), a cgroup that cannot
be made (one is made and removed first), an existing --out. Ctrl-C and
SIGTERM end the runs, then every slot is removed: nothing is left under
the cpu controller."""
import contextlib
import copy
import math
import os
import random
import signal
from dataclasses import dataclass

from . import campaign
from .points import TunePoint
from ..lib import cgroup, probe, rule as rules
from ..lib.paths import work_dir
from ..lib.errors import ThreadburnError
from ..lib.procs import Interrupt
from ..lib.records import ResultsFile
from ..lib.usercmd import command_of, default_out

# Rounds of fresh runs of the sizes' plans side by side (--confirm N sets them): with two steps,
# each at confirm_alpha / 2 one-sided, the signed ranks of 10 pairs can show a step (at 6 the
# least level they reach is 1/64).
SIZE_ROUNDS = 10
# Flags a tune of several sizes does not take (one line each).
NOT_WITH_SIZES = {"copies": "--copies", "in_run": "--in-run", "resume": "--resume"}


def size_paths(out, sizes):
    """{size: the results CSV of its own tune}: <stem>-cpus<size>.csv."""
    stem = os.path.splitext(out)[0]
    return {s: f"{stem}-cpus{cgroup.size_text(s)}.csv" for s in sizes}


@dataclass(frozen=True)
class Hooks:
    """What a tune of several sizes takes from the command (commands/tune.py)."""
    tune: object        # tune(args): a whole tune (its --out set) in the slot threadburn has joined: exit code
    plan_of: object     # plan_of(csv): the name of the plan a size's tune ended with
    settings: object    # settings(args): the tune's settings, as built in the slot threadburn is in
    executor: object    # executor(cmd, columns, work, seed): runs TunePoints (fresh ones without the probe)
    report: object      # report(out, sizes, paths, rule): the sizes' verdict from the fresh runs' file


def slot_name(i):
    return f"threadburn-slot-{os.getpid()}-{i}"


class SlotExecutor(campaign.Executor):
    """Each run in its item's slot: threadburn joins the slot for the run
    (its children start inside), leaves it after; the rows say which slot."""

    def __init__(self, inner, slot_of):
        self.inner, self.slot_of = inner, slot_of

    def execute(self, specs):
        for spec in specs:
            slot = self.slot_of[spec.item.key]
            with slot.joined():
                done = list(self.inner.execute([spec]))
            for s, rows in done:
                for r in rows:
                    r.update(slot_cells(slot))
                yield s, rows

    def stop(self):
        self.inner.stop()


def slot_cells(slot):
    """A run's slot in the rows' context columns (the probe's keys, src/core/slot.h)."""
    return {"cgroup_version": slot.version, "cpu_quota": cgroup.size_text(slot.cpus),
            "cpu_period_us": str(slot.period_us),
            "effective_cpus": str(min(os.cpu_count(), math.ceil(slot.cpus - 1e-9)))}


def _as_interrupt(*_):
    Interrupt.pending = True  # as Ctrl-C's handler: a launch after it stops too (lib/procs.py)
    raise KeyboardInterrupt


def check(args, sizes, cmd):
    """Everything that can be said before a run: the flags, the files, a cgroup made and removed."""
    given = [flag for key, flag in NOT_WITH_SIZES.items() if getattr(args, key, None)]
    if given:
        raise ThreadburnError(f"--cpus {args.cpus}: not with {', '.join(given)} (a tune of several slot sizes: "
                              "each size's tune, then its plan against the others' in fresh runs)")
    out = args.out or default_out("tune", cmd) + ".csv"
    if not args.dry_run:
        for path in [out] + list(size_paths(out, sizes).values()):
            if os.path.exists(path) and not args.force:
                raise ThreadburnError(f"{path}: exists; pass --force to replace it")
    with cgroup.QuotaCgroup(sizes[0], name=slot_name("check")):
        pass
    return out


def named(points, name):
    """The setting `name` among points (a size's, rebuilt in its slot: the thread counts derive
    from the slot's effective CPUs)."""
    for p in points:
        if p.name == name:
            return p
    raise ThreadburnError(f"--cpus: the plan {name!r} its tune chose is not among the settings rebuilt for it")


def main_sizes(args, sizes, hooks):
    """The tune of several slot sizes (hooks: Hooks)."""
    cmd = command_of(args)
    out = check(args, sizes, cmd)
    paths = size_paths(out, sizes)
    previous = signal.signal(signal.SIGTERM, _as_interrupt)
    try:
        chosen = {}
        for i, s in enumerate(sizes):
            a = copy.copy(args)
            a.out, a.cpus, a.force = paths[s], None, True
            with cgroup.QuotaCgroup(s, name=slot_name(i)) as slot, slot.joined():
                print(f"tune --cpus: size {i + 1} of {len(sizes)}: a slot of {cgroup.size_text(s)} CPUs' quota: "
                      f"{slot.path} (cgroup {slot.version}, removed after); its tune into {a.out}", flush=True)
                code = hooks.tune(a)
                if code:
                    return code
                if args.dry_run:
                    continue
                points = hooks.settings(args)
                chosen[s] = (named(points, hooks.plan_of(a.out)), named(points, "plain"))
            print(f"tune --cpus: {cgroup.size_text(s)} CPUs: its plan {chosen[s][0].name}", flush=True)
        if args.dry_run:
            print(f"tune --cpus: then each size's plan and plain in fresh runs, {SIZE_ROUNDS} rounds, each run in "
                  f"its own size's slot, into {out}")
            return 0
        return compare(args, sizes, chosen, cmd, out, paths, hooks)
    except KeyboardInterrupt:  # between runs (the slots are gone: each with block removed its own)
        print("tune --cpus: interrupted; every slot removed", flush=True)
        return 130
    finally:
        signal.signal(signal.SIGTERM, previous)


def compare(args, sizes, chosen, cmd, out, paths, hooks):
    """Each size's plan, and plain beside it, in fresh runs interleaved in
    rounds, each run in its own size's slot; then hooks.report()."""
    items, size_of = [], {}
    for s in sizes:
        t = cgroup.size_text(s)
        plan, plain = chosen[s]
        roles = [("plan", plan)] + ([("plain", plain)] if plan.name != "plain" else [])
        for role, p in roles:
            item = TunePoint(p.name, p.runtime, p.env, "confirm", p.builtin, params=p.params,
                             base_key=f"cpus{t}-{role}")
            items.append(item)
            size_of[item.key] = s
    variables = []
    for p in items:
        variables += [k for k in p.env if k not in variables]
    params = list(dict.fromkeys(k for p in items for k in p.params))
    columns = probe.columns(probe.describe(args.build_dir), variables, params)
    rule = rules.Rule(objective=args.objective or ("time" if params else "balanced"), margin=args.margin,
                      design="race", confirm=True)
    results_file = ResultsFile(out, columns, rule)
    results_file.create()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2 ** 31)
    rounds = int(args.confirm) if str(args.confirm).isdigit() and int(args.confirm) > 0 else SIZE_ROUNDS
    work = work_dir(out)
    print(f"tune --cpus: each size's plan and plain beside it, {rounds} fresh runs each without the probe, "
          f"interleaved in rounds, each run in a slot of its size: " +
          ", ".join(f"{cgroup.size_text(s)} CPUs {chosen[s][0].name}" for s in sizes) + f"; seed {seed}", flush=True)
    with contextlib.ExitStack() as stack:
        slots = {s: stack.enter_context(cgroup.QuotaCgroup(s, name=slot_name(i))) for i, s in enumerate(sizes)}
        ex = SlotExecutor(hooks.executor(cmd, columns, work, seed), {k: slots[s] for k, s in size_of.items()})
        c = campaign.Campaign(ex, results_file, seed, set(), None, name="tune --cpus")
        ended = campaign.guarded(c, lambda: c.run(items, {i.key: rounds for i in items}), lambda: print(
            f"tune --cpus: interrupted; {out} holds every finished run; each size's tune is in its own file"))
        ex.inner.stop()  # its scratch folder
    if ended == 130:
        return 130
    return hooks.report(out, sizes, paths, rule)
