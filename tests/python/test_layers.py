"""The package's layers (docs/design.md, Architecture), read from its own
imports: commands never import commands, the engine never imports a
command, nothing imports in a circle, and no chain of imports is longer
than six modules below the entry points (cli, __main__)."""
import ast
import os
import unittest

import helpers

PACKAGE = os.path.join(helpers.PYTHON_DIR, "threadburn")
COMMANDS = {"cli", "sweep", "tune", "run", "verdict", "compare", "plot", "findings", "monitor", "listing", "doctor",
            "slurm_task", "report", "__main__"}
ENGINE = {"campaign", "exec_bench", "exec_probe", "exec_slurm"}
MAX_FLOORS = 6


def imports():
    """{module: {modules of the package it imports, at any depth of its code}}"""
    mods = {f[:-3] for f in os.listdir(PACKAGE) if f.endswith(".py")}
    graph = {}
    for m in mods:
        with open(os.path.join(PACKAGE, m + ".py")) as f:
            tree = ast.parse(f.read())
        deps = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names)
        graph[m] = {d for d in deps if d in mods and d != m}
    return graph


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
    def test_commands_do_not_import_commands(self):
        graph = imports()
        for m in COMMANDS - {"cli", "__main__"}:
            self.assertEqual(graph.get(m, set()) & COMMANDS, set(), m)

    def test_engine_and_library_import_no_command(self):
        graph = imports()
        for m, deps in graph.items():
            if m not in COMMANDS:
                self.assertEqual(deps & COMMANDS, set(), m)
            if m not in COMMANDS | ENGINE:  # the library: argtypes parses a campaign's budget, nothing more
                self.assertEqual(deps & ENGINE - ({"campaign"} if m == "argtypes" else set()), set(), m)

    def test_no_circle_and_at_most_six_floors(self):
        # The entry points (cli, __main__) stand on the commands: not counted.
        f = {m: n for m, n in floors(imports()).items() if m not in ("cli", "__main__")}
        self.assertLessEqual(max(f.values()), MAX_FLOORS, sorted(f.items(), key=lambda kv: -kv[1])[:5])

    def test_the_check_sees_a_circle(self):
        with self.assertRaises(ValueError):
            floors({"a": {"b"}, "b": {"a"}})


if __name__ == "__main__":
    unittest.main()
