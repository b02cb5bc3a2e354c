"""The package's layers (docs/design.md, Architecture), read from its own
imports and seen in its folders:

    commands/   one module per command (options.py: the flags they share)
    export/     text, Markdown, JSON, HTML and figures of what analysis made
    analysis/   records -> rule -> verdicts; aggregates of results
    engine/     the campaign and its executors
    lib/        the library: the CSV module, schema, knobs, statistics, ...

A subpackage imports only from the floors below it (commands from all,
export from analysis and lib, analysis and engine from lib, lib from lib);
a command never imports another command; nothing imports in a circle; and
no chain of imports is longer than six modules below the entry points (cli,
__main__)."""
import ast
import os
import unittest

import helpers

PACKAGE = os.path.join(helpers.PYTHON_DIR, "threadburn")
# Which subpackage may import which (itself included).
ALLOWED = {
    "lib": {"lib"},
    "engine": {"engine", "lib"},
    "analysis": {"analysis", "lib"},
    "export": {"export", "analysis", "lib"},
    "commands": {"commands", "export", "analysis", "engine", "lib"},
    "": {"", "commands", "export", "analysis", "engine", "lib"},
}
# Modules of commands/ that are no command: the flags they share; tune's plan and budget.
SHARED_BY_COMMANDS = {"commands.options", "commands.tune_plan"}
MAX_FLOORS = 6


def modules():
    """{dotted name below the package: path}, e.g. "analysis.decide"."""
    out = {}
    for folder, _, files in os.walk(PACKAGE):
        rel = os.path.relpath(folder, PACKAGE)
        prefix = "" if rel == "." else rel.replace(os.sep, ".") + "."
        for f in files:
            if f.endswith(".py") and f != "__init__.py" and f != "_installed.py":
                out[prefix + f[:-3]] = os.path.join(folder, f)
    return out


def _resolve(mod, node, mods):
    """The package's modules an ImportFrom of module `mod` names."""
    parts = mod.split(".")[:-1]  # the subpackage mod is in
    base = parts[:len(parts) - (node.level - 1)] if node.level > 1 else parts
    target = base + (node.module.split(".") if node.module else [])
    name = ".".join(target)
    if name in mods:
        return {name}
    return {f"{name}.{a.name}" if name else a.name for a in node.names} & set(mods)


def imports():
    """{module: {modules of the package it imports, at any depth of its code}}"""
    mods = modules()
    graph = {}
    for m, path in mods.items():
        with open(path) as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level >= 1:
                deps |= _resolve(m, node, mods)
        graph[m] = deps - {m}
    return graph


def floor_of(module):
    return module.split(".")[0] if "." in module else ""


def floors(graph):
    """Longest import chain from each module (1 = imports nothing of the package); raises on a circle."""
    memo, stack = {}, set()

    def depth(m):
        if m in memo:
            return memo[m]
        if m in stack:
            raise ValueError(f"import circle through {m}")
        stack.add(m)
        memo[m] = 1 + max((depth(d) for d in graph[m]), default=0)
        stack.discard(m)
        return memo[m]
    return {m: depth(m) for m in graph}


class Layers(unittest.TestCase):
    def test_every_module_lives_in_a_layer(self):
        for m in modules():
            self.assertIn(floor_of(m), ALLOWED, m)
        self.assertEqual({m for m in modules() if floor_of(m) == ""}, {"cli", "__main__"})

    def test_each_layer_imports_only_the_floors_below(self):
        for m, deps in imports().items():
            for d in deps:
                self.assertIn(floor_of(d), ALLOWED[floor_of(m)], f"{m} imports {d}")

    def test_commands_do_not_import_commands(self):
        for m, deps in imports().items():
            if floor_of(m) == "commands":
                self.assertEqual({d for d in deps if floor_of(d) == "commands"} - SHARED_BY_COMMANDS, set(), m)

    def test_no_circle_and_at_most_six_floors(self):
        # The entry points (cli, __main__) stand on the commands: not counted.
        f = {m: n for m, n in floors(imports()).items() if m not in ("cli", "__main__")}
        self.assertLessEqual(max(f.values()), MAX_FLOORS, sorted(f.items(), key=lambda kv: -kv[1])[:5])

    def test_the_check_sees_a_circle_and_a_layer_broken(self):
        with self.assertRaises(ValueError):
            floors({"a": {"b"}, "b": {"a"}})
        self.assertNotIn(floor_of("commands.tune"), ALLOWED[floor_of("lib.schema")])


if __name__ == "__main__":
    unittest.main()
