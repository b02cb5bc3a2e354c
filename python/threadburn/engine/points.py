"""A tune's setting as a campaign item (TunePoint): its name, runtime and
environment, and with --copies and --param the plan around it: the copies a
run starts, each copy's CPUs (a pinned plan) and GPU (a host with a GPU for
each copy), the values put into the command. engine/plans.py makes them, engine/exec_probe.py runs them."""
import shlex

from ..lib import keys, knobs, schema


class TunePoint:
    """A setting of a tune: a name, the OpenMP runtime and its environment;
    with --copies, the copies a run starts and, for a pinned plan, each
    copy's CPUs; with --param, the values put into the command."""

    def __init__(self, name, runtime, env, phase="race", builtin=False, copies=None, core_sets=None, params=None,
                 base_key=None, gpus=None):
        self.name, self.runtime, self.env, self.phase = name, runtime, dict(env), phase
        self.builtin = builtin  # one of tune's default settings (pruned of duplicates), not the user's
        self.copies = copies    # None: a plain tune (one process a run, launch.run); else N copies together
        self.core_sets = [tuple(c) for c in core_sets] if core_sets else None  # per copy (a pinned plan)
        self.params = dict(params or {})
        self.base_key = base_key or (f"c{copies}-{name}" if copies else name)
        self.gpus = list(gpus) if gpus else None  # per copy: the GPU it alone sees (CUDA_VISIBLE_DEVICES)

    @property
    def key(self):
        return keys.phase_key(self.phase, self.base_key)

    def for_phase(self, phase):
        return TunePoint(self.name, self.runtime, self.env, phase, self.builtin, self.copies, self.core_sets,
                         self.params, self.base_key, self.gpus)

    def alone(self):
        """One copy of this plan by itself (copy 0: its environment, core
        set and GPU): what each copy is compared with (phase alone)."""
        return TunePoint(self.name, self.runtime, self.env, "alone", self.builtin, 1,
                         self.core_sets[:1] if self.core_sets else None, self.params, self.base_key,
                         self.gpus[:1] if self.gpus else None)

    def with_env(self, name, env):
        """This plan under another name with more variables (tune's CUDA wait
        policies on top of plain): one of tune's own settings."""
        return TunePoint(name, self.runtime, dict(self.env, **env), self.phase, True, self.copies, self.core_sets,
                         self.params, None, self.gpus)

    def gpu_of(self, index):
        """The GPU copy `index` alone sees, or None (the copies share them)."""
        return self.gpus[index] if self.gpus else None

    @property
    def label(self):
        return self.name + (f" x{self.copies}" if self.copies and self.copies > 1 else "") + (
            "" if self.phase == "race" else f" ({self.phase})")

    def command(self, cmd):
        """cmd with each {NAME} of a --param replaced by this point's value."""
        out = []
        for arg in cmd:
            for name, value in self.params.items():
                arg = arg.replace("{" + name + "}", value)
            out.append(arg)
        return out

    def copy_env(self, index):
        """Copy `index`'s variables: the setting's, where it stands among
        the copies (THREADBURN_COPY, THREADBURN_COPIES) and its own GPU."""
        if not self.copies:
            return self.env
        env = dict(self.env, THREADBURN_COPY=str(index), THREADBURN_COPIES=str(self.copies))
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[index]
        return env

    def env_line(self, libomp, cuda_lib=None):
        """The variables that give this setting without threadburn: LLVM's
        runtime and, for a CUDA wait policy, cuda_lib preloaded."""
        parts = [f"{k}={shlex.quote(v)}" for k, v in self.env.items() if v != schema.UNSET]
        preload = knobs.preloads(self.runtime, libomp) + ([cuda_lib] if cuda_lib else [])
        if preload:
            parts.append(f"LD_PRELOAD={shlex.quote(' '.join(preload))}")
        return " ".join(parts) or "(no change)"

    def plan_line(self, libomp):
        """What the plan sets, for the plan's listing (dry run)."""
        line = self.env_line(libomp)
        if self.params:
            line += " " + " ".join(f"{{{k}}}={v}" for k, v in self.params.items())
        if self.core_sets:
            line += "; pinned: " + " | ".join(",".join(map(str, c)) for c in self.core_sets)
        if self.gpus:
            line += "; GPU of each copy: " + " | ".join(self.gpus)
        return line
