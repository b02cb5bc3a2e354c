"""The settings a tune races (TunePoints): its defaults, a --points file,
and with --copies and --param the plans built from them.

A plain tune's defaults are one process a run. With --copies N each run
starts N copies together, and the defaults are host plans for N: threads
per copy in {1, cores / N, cores, CPUs} crossed with the wait settings,
PyTorch's launcher in its multi-instance mode (N instances on disjoint
core sets, cores / N threads each, LLVM with KMP_BLOCKTIME=1 and compact
affinity) and what torchrun sets for N processes (OMP_NUM_THREADS=1); the
baseline is the plain environment at the same N. With --param NAME=v1,v2
every setting is crossed with the values (the first value of each is the
baseline's); {NAME} in the command is replaced by them.

On a host with at least N GPUs, each of N copies sees a GPU of its own
(copy i the i-th: CUDA_VISIBLE_DEVICES); with fewer, the copies share them.
When the program turns out to use CUDA (its first round's probe says so),
tune adds the CUDA host wait policies on top of plain (cuda_points).
"""
import itertools
import re

from .points import TunePoint
from ..lib import grid, knobs, machine, probe, schema
from ..lib.errors import ThreadburnError

LAUNCHER_AFFINITY = "granularity=fine,compact,1,0"
# Presets kept before the thread-count settings when two have the same settings in force.
PRESETS = ("launcher", "torchrun")
PARAM_NAME = r"[A-Za-z_][A-Za-z0-9_]*"


def parse_params(items, cmd):
    """{NAME: [values]} of the --param NAME=v1,v2 items, each NAME used as
    {NAME} in the command; one-line errors."""
    out = {}
    for item in items:
        name, sep, values = item.partition("=")
        if not sep or not re.fullmatch(PARAM_NAME, name):
            raise ThreadburnError(f"--param {item!r}: expected NAME=v1,v2,... (NAME: letters, digits, _)")
        if name in out:
            raise ThreadburnError(f"--param {name}: given twice")
        vals = values.split(",")
        if any(not v or re.search(r"\s", v) for v in vals):
            raise ThreadburnError(f"--param {item!r}: expected non-empty values without spaces, between commas")
        if len(set(vals)) != len(vals):
            raise ThreadburnError(f"--param {item!r}: a value given twice")
        if not any("{" + name + "}" in arg for arg in cmd):
            raise ThreadburnError(f"--param {name}: the command has no {{{name}}} to put its values in")
        out[name] = vals
    return out


def copy_gpus(copies, gpus):
    """Each copy's own GPU (the i-th of the host's `gpus`, machine.gpus) for
    a run of `copies` copies (2 or more) when the host has as many; else
    None: one process a run uses the GPUs as it would, and more copies than
    GPUs share them."""
    if not copies or copies < 2 or len(gpus) < copies:
        return None
    return list(gpus[:copies])


def default_points(user_env, copies=None, gpus=()):
    """plain, the presets, and the thread counts crossed with the wait
    settings: for one process a run (copies None, a plain tune) or for N
    copies started together."""
    cores, cpus = machine.physical_cores() or machine.usable_cpus(), machine.usable_cpus()
    slot = machine.effective_cpus()  # a CPU quota's, rounded up (docs/slot.md); the CPUs without one
    n = copies or 1
    points = [TunePoint("plain", "gomp", {})]
    if n == 1:
        points.append(TunePoint("launcher", "llvm", {"OMP_NUM_THREADS": str(cores), "KMP_BLOCKTIME": "1",
                                                     "KMP_AFFINITY": LAUNCHER_AFFINITY}))
    else:
        sets = machine.core_sets(n)
        if sets:  # the launcher's multi-instance mode: a core set per instance (none when cores < N)
            points.append(TunePoint("launcher", "llvm", {"OMP_NUM_THREADS": str(len(sets[0])), "KMP_BLOCKTIME": "1",
                                                         "KMP_AFFINITY": LAUNCHER_AFFINITY}, core_sets=sets))
        points.append(TunePoint("torchrun", "gomp", {"OMP_NUM_THREADS": "1"}))
    for t in sorted({1, max(1, cores // n), cores, cpus, max(1, slot // n)}):
        env = {"OMP_NUM_THREADS": str(t)}
        points += [TunePoint(f"T{t}-gomp", "gomp", env),
                   TunePoint(f"T{t}-passive", "gomp", dict(env, OMP_WAIT_POLICY="passive")),
                   TunePoint(f"T{t}-llvm-bt0", "llvm", dict(env, KMP_BLOCKTIME="0")),
                   TunePoint(f"T{t}-llvm-bt1", "llvm", dict(env, KMP_BLOCKTIME="1"))]
    out = []
    for p in points:  # --env applies to every point; a point's own setting wins
        out.append(TunePoint(p.name, p.runtime, dict(user_env, **p.env), builtin=True, copies=copies,
                             core_sets=p.core_sets, gpus=copy_gpus(copies, gpus)))
    return out


def load_points(path, user_env, copies=None, gpus=()):
    """The [[point]] tables of a TOML file (name, runtime, env, and pin =
    true for a core set per copy), for one process a run or N copies."""
    data = grid.read_toml(path, ThreadburnError)
    raw = data.get("point")
    if not isinstance(raw, list) or not raw:
        raise ThreadburnError(f"{path}: expected [[point]] tables (name, runtime, env)")
    points, names = [], set()
    for i, entry in enumerate(raw):
        where = f"{path}: point[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise ThreadburnError(f"{where}.name: expected a non-empty string")
        if entry["name"] in names:
            raise ThreadburnError(f"{where}.name: {entry['name']!r} twice")
        if not re.fullmatch(r"[A-Za-z0-9_.=+-]+", entry["name"]):
            raise ThreadburnError(f"{where}.name: letters, digits and _.=+- only, got {entry['name']!r}")
        names.add(entry["name"])
        runtime = entry.get("runtime", "gomp")
        if runtime not in schema.RUNTIMES:
            raise ThreadburnError(f"{where}.runtime: expected one of {', '.join(schema.RUNTIMES)}, got {runtime!r}")
        env = entry.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, (str, int)) for v in env.values()):
            raise ThreadburnError(f"{where}.env: expected a table of VAR = value")
        for name, value in env.items():  # the knob table's values (lib/knobs.py); the user's own variables: any
            try:
                knobs.check(name, value, extra=(schema.UNSET,) if knobs.get(name) else ())
            except knobs.KnobError as e:
                raise ThreadburnError(f"{where}.env.{name}: {e}") from None
        pin = entry.get("pin", False)
        if not isinstance(pin, bool):
            raise ThreadburnError(f"{where}.pin: expected true or false")
        unknown = set(entry) - {"name", "runtime", "env", "pin"}
        if unknown:
            raise ThreadburnError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; expected name, runtime, "
                                  "env, pin")
        sets = None
        if pin:
            sets = machine.core_sets(copies or 1)
            if sets is None:
                raise ThreadburnError(f"{where}.pin: {copies or 1} copies need as many cores; this machine gives "
                                      f"{machine.physical_cores() or machine.usable_cpus()}")
        points.append(TunePoint(entry["name"], runtime, dict(user_env, **{k: str(v) for k, v in env.items()}),
                                copies=copies, core_sets=sets, gpus=copy_gpus(copies, gpus)))
    if "plain" not in names:
        raise ThreadburnError(f"{path}: no point named \"plain\": the baseline the verdict is about")
    return points


def with_params(points, params):
    """Each point crossed with every combination of the --param values:
    named point,NAME=value for each value that is not the first (the
    baseline's), so plain with the first values stays `plain`."""
    if not params:
        return points
    names = list(params)
    out = []
    for p in points:
        for combo in itertools.product(*(params[n] for n in names)):
            values = dict(zip(names, combo))
            suffix = "".join(f",{n}={v}" for n, v in values.items() if v != params[n][0])
            q = TunePoint(p.name + suffix, p.runtime, p.env, builtin=p.builtin, copies=p.copies,
                          core_sets=p.core_sets, params=values, gpus=p.gpus)
            out.append(q)
    return out


def plan(args_points, user_env, copies_list, params, gpus=()):
    """Every TunePoint of a tune: per copy count (None: a plain tune) the
    default or the file's points, crossed with the params; `gpus`: the
    host's (machine.gpus), a GPU for each copy where there are enough."""
    out = []
    for n in copies_list:
        points = load_points(args_points, user_env, n, gpus) if args_points else default_points(user_env, n, gpus)
        out += with_params(points, params)
    return out


CUDA_PREFIX = "cuda-"


def cuda_policies(points):
    """The CUDA host wait policies tune adds for a program that uses CUDA:
    the knob table's values of THREADBURN_CUDA_SYNC but auto (the driver's
    own, plain's unless the user set one), none when a setting of the plan
    sets the policy itself (a --points file) or the table has no such knob."""
    knob = knobs.get(probe.CUDA_SYNC)
    plain = next((p for p in points if p.name == "plain"), None)
    if knob is None or plain is None:
        return []
    own = plain.env.get(probe.CUDA_SYNC, probe.CUDA_SYNC_AUTO)
    if any(p.env.get(probe.CUDA_SYNC, probe.CUDA_SYNC_AUTO) != own for p in points):
        return []
    return [w for w in knob.words if w not in (probe.CUDA_SYNC_AUTO, own)]


def cuda_points(points):
    """Each policy of cuda_policies on top of every plain of the plan (each
    copy count, each --param combination): cuda-<policy>[,NAME=value]."""
    out = []
    for policy in cuda_policies(points):
        for p in points:
            base, sep, suffix = p.name.partition(",")
            if base == "plain":
                out.append(p.with_env(CUDA_PREFIX + policy + sep + suffix, {probe.CUDA_SYNC: policy}))
    return out
