#!/usr/bin/env python3
"""(Re)record the benchmark programs' self-descriptions that fake_program.py serves.

    /usr/bin/python3 tests/python/record_programs.py [BUILD_DIR]

BUILD_DIR defaults to $THREADBURN_BUILD_DIR, else build/. Writes
tests/fixtures/programs/<bench>.<device>.json for every <bench>_bench of the
build (device cpu; train_step also cuda): what `<bench>_bench [--device=...]
--describe` prints with its default flags, run in an environment without any
OpenMP knob or LD_PRELOAD (so the context is the default one). Run it after
changing a program's flags, axes, skip rules, counters or context keys;
tests/python/test_fake_matches_programs.py fails until you do.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT_DIR = os.path.join(REPO, "tests", "fixtures", "programs")
# Besides each program's default (cpu) description: other devices worth a
# recording, as (bench, device, the flags that select it).
OTHER_DEVICES = (("train_step", "cuda", ["--device=cuda"]),)
SUFFIX = "_bench"
sys.path.insert(0, os.path.join(REPO, "python"))
from threadburn.lib import knobs  # noqa: E402  (the knob table: every variable a recording must not inherit)

KNOB_PREFIXES = ("OMP_", "KMP_", "GOMP_")


def default_build_dir():
    return os.environ.get("THREADBURN_BUILD_DIR") or os.path.join(REPO, "build")


def program_path(build_dir, bench):
    return os.path.join(build_dir, "bench", f"{bench}{SUFFIX}")


def built_programs(build_dir):
    """The benchmark programs of a build (bench names), sorted."""
    folder = os.path.join(build_dir, "bench")
    names = os.listdir(folder) if os.path.isdir(folder) else []
    return sorted(n[:-len(SUFFIX)] for n in names
                  if n.endswith(SUFFIX) and os.access(os.path.join(folder, n), os.X_OK))


def recordings_of(benches):
    """[(bench, device, args)] to record for these programs."""
    return [(b, "cpu", []) for b in benches] + [r for r in OTHER_DEVICES if r[0] in benches]


def recorded():
    """[(bench, device, args)] of the recordings on disk."""
    out = []
    for name in sorted(os.listdir(OUT_DIR)) if os.path.isdir(OUT_DIR) else []:
        if name.endswith(".json") and name.count(".") == 2:
            bench, device, _ = name.split(".")
            other = next((r[2] for r in OTHER_DEVICES if r[:2] == (bench, device)), [f"--device={device}"])
            out.append((bench, device, [] if device == "cpu" else other))
    return out


def plain_env():
    """This environment without the knob table's variables (LD_PRELOAD and
    THREADBURN_CUDA_SYNC among them), other OpenMP knobs or the fake's switches."""
    table = {k.name for k in knobs.table()}
    return {k: v for k, v in os.environ.items()
            if not k.startswith(KNOB_PREFIXES + ("FAKE_",)) and k not in table}


def run_describe(path, args, env=None, timeout=120):
    """(exit code, stdout, stderr) of `path args... --describe`."""
    p = subprocess.run([path, *args, "--describe"], capture_output=True, text=True, timeout=timeout,
                       env=plain_env() if env is None else env, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


def describe(build_dir, bench, args):
    path = program_path(build_dir, bench)
    code, out, err = run_describe(path, args)
    if code != 0:
        raise SystemExit(f"record_programs.py: {path} {' '.join(args)} --describe: exit code {code}: {err.strip()}")
    return json.loads(out)


def dumps(doc):
    """The description as JSON with one line per top-level key and per item
    of its lists and objects: short files whose diffs name what changed."""
    def item(value):
        return json.dumps(value, ensure_ascii=False)

    parts = []
    for key, value in doc.items():
        if isinstance(value, list) and value:
            inner = ",\n".join("  " + item(v) for v in value)
            parts.append(f" {item(key)}: [\n{inner}\n ]")
        elif isinstance(value, dict) and value:
            inner = ",\n".join(f"  {item(k)}: {item(v)}" for k, v in value.items())
            parts.append(f" {item(key)}: {{\n{inner}\n }}")
        else:
            parts.append(f" {item(key)}: {item(value)}")
    return "{\n" + ",\n".join(parts) + "\n}\n"


def recording_path(bench, device):
    return os.path.join(OUT_DIR, f"{bench}.{device}.json")


def main(argv):
    build_dir = argv[0] if argv else default_build_dir()
    benches = built_programs(build_dir)
    if not benches:
        raise SystemExit(f"record_programs.py: no programs (*{SUFFIX}) in {build_dir}/bench: build first")
    os.makedirs(OUT_DIR, exist_ok=True)
    wanted = recordings_of(benches)
    for bench, device, args in wanted:
        doc = describe(build_dir, bench, args)
        path = recording_path(bench, device)
        with open(path, "w") as f:
            f.write(dumps(doc))
        print(f"record_programs.py: {path}: {len(doc['flags'])} flags, {len(doc['benchmarks'])} benchmarks, "
              f"{len(doc['counters'])} counters")
    for bench, device, _ in recorded():
        if (bench, device) not in {(b, d) for b, d, _ in wanted}:
            os.remove(recording_path(bench, device))
            print(f"record_programs.py: removed {recording_path(bench, device)}: no such program in {build_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
