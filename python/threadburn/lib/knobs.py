"""The environment knobs: one table, python/threadburn/knobs.tsv, for both sides.

Each line of the table is one knob: its name, who reads it (openmp: every
OpenMP runtime; gomp or llvm: that runtime only; onednn; cuda: threadburn's
preload libraries, for the CUDA driver; loader: reported, never a knob
column), the values a grid or `tune --points` may give it, its short label in
plots, the context key that reports what the live process really uses (its
read-back), the results column that holds its value (its own knob column, a
program flag's column of the same meaning, or none), its part of the
"settings in force" line, its place in the sweep's heatmaps, and one line of
doc. The column comments are at the top of the table.

Every list of knobs is asked here: the settings in force line
(in_force_line; src/runtime/runtime.cc writes the same line for the programs'
console from the same column), the report's settings table
(in_force_columns), the heatmaps' axes (heatmap_knob), the variables a
clean environment removes (names), and which libraries a runtime of the
runtime column preloads (preloads).

The C++ programs and the preload probe compile the same table in: CMake runs
this file as a script (`python3 knobs.py --header OUT`, stdlib only) to write
the header src/runtime/runtime.cc reads (the knob list, each runtime's own
knobs, --describe's "knobs"); the Python side reads it here (grid values,
figure labels, the in-force keys). tests/python/test_knobs.py checks that the
programs describe exactly this table.
"""
import os
import re
import sys
from dataclasses import dataclass

TABLE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "knobs.tsv")
COLUMNS = ("name", "reader", "values", "expected", "label", "in_force", "column", "shown", "heatmap", "doc")
READERS = ("openmp", "gomp", "llvm", "onednn", "cuda", "loader")
# The readers that are an OpenMP runtime (every one, or one of the runtime column's).
OPENMP_READERS = ("openmp", "gomp", "llvm")
# Where a heatmap lays a knob out (the heatmap column): "columns" takes a unit too.
HEATMAP_ROLES = ("rows", "columns", "panels")
# What an OpenMP runtime's read-back says when it cannot say (no runtime, the other runtime's knob).
NOT_KNOWN = ("", "n/a")
NONE = "-"  # an empty cell
# A knob column's value when the variable was not set at all.
UNSET = "unset"


def param_column(name):
    """The column of a tune's --param NAME: a knob of the user's program
    itself, not of the environment (not in the table)."""
    return f"param_{name}"


class KnobError(ValueError):
    """A value a knob refuses; str() is the clause "expected ..., got ..."."""


def join_or(items):
    items = list(items)
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def quoted(words):
    return [f'"{w}"' for w in words]


@dataclass(frozen=True)
class Knob:
    name: str
    reader: str
    values: str
    expected: str
    label: str
    in_force: str
    column: str   # the results column of its value; None for "-" (cell() gives the table's text)
    shown: str    # its part of the settings in force line ("{} threads"), or "-"
    heatmap: str  # rows, panels, "columns (UNIT)" or "-"
    doc: str

    def cell(self, column):
        """The table's text of one of its columns ("-" for an empty one)."""
        value = getattr(self, column)
        return NONE if value is None else value

    @property
    def kind(self):
        """int, one-of, pattern, or - (threadburn never sets it)."""
        return self.values.split(" ", 1)[0].split(">=", 1)[0]

    @property
    def minimum(self):
        return int(self.values.split(" ", 1)[0].split(">=", 1)[1])

    @property
    def words(self):
        """The words an int knob also accepts, or a one-of knob's values."""
        return tuple(self.values.split()[1:]) if self.kind in ("int", "one-of") else ()

    @property
    def pattern(self):
        return self.values.split(" ", 1)[1]

    @property
    def is_column(self):
        """A knob column of the results, named after the variable. Not so:
        LD_PRELOAD (the runtime column says what was preloaded) and a knob
        whose value lands in a program flag's column (THREADBURN_CUDA_SYNC:
        cuda_sync)."""
        return self.column == self.name

    def expectation(self, extra=()):
        """What the knob accepts, as error messages say it; extra: more words
        the caller accepts (a grid's "unset")."""
        if self.kind == "int":
            return join_or([f"an integer >= {self.minimum}"] + quoted(self.words + tuple(extra)))
        base = join_or(quoted(self.words)) if self.kind == "one-of" else self.expected
        return base + (f", or {join_or(quoted(extra))}" if extra else "")

    def check(self, value, extra=()):
        """The value as the environment's text; KnobError when refused. An
        int knob takes an integer (or its decimal text) or one of its words;
        the others take a string."""
        if self.kind == "int":
            if isinstance(value, str) and value in self.words:
                return value
            if isinstance(value, str) and re.fullmatch(r"[0-9]+", value):
                value = int(value)
            if not isinstance(value, bool) and isinstance(value, int) and value >= self.minimum:
                return str(value)
        elif self.kind == "one-of":
            if isinstance(value, str) and value in self.words:
                return value
        elif self.kind == "pattern":
            if isinstance(value, str) and re.fullmatch(self.pattern, value):
                return value
        else:
            raise KnobError(f"{self.name} is not set by threadburn ({self.doc})")
        raise KnobError(f"expected {self.expectation(extra)}, got {value!r}")

    def short(self, value):
        """The knob's setting in a plot's label: "T=4", "passive", "aff"."""
        return self.label.replace("{}", value)

    @property
    def heatmap_role(self):
        """rows, columns, panels, or None."""
        return None if self.heatmap == NONE else self.heatmap.split(" ", 1)[0]

    @property
    def heatmap_label(self):
        """Its heatmap axis's title: its name and the unit ("NAME (ms)")."""
        return self.name + self.heatmap[len(self.heatmap_role):]

    def part(self, context):
        """Its part of the settings in force line for a context (a mapping of
        the programs' context keys), or None where it has none or its
        read-back does not say."""
        value = context.get(self.in_force, "")
        if self.shown == NONE or value in NOT_KNOWN:
            return None
        return re.sub(r"\{([a-z0-9_]*)\}", lambda m: value if not m.group(1) else context.get(m.group(1), "?"),
                      self.shown)


def parse(text, source=TABLE):
    """The knobs of a table's text; ValueError naming the line for a broken one."""
    knobs, header = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        cells = line.split("\t")
        if header is None:
            header = tuple(cells)
            if header != COLUMNS:
                raise ValueError(f"{source}:{number}: expected the header {' '.join(COLUMNS)}, got {' '.join(header)}")
            continue
        if len(cells) != len(COLUMNS) or not all(c.strip() for c in cells):
            raise ValueError(f"{source}:{number}: expected {len(COLUMNS)} non-empty tab-separated cells, got {len(cells)}")
        knob = Knob(*cells[:6], None if cells[6] == NONE else cells[6], *cells[7:])
        if knob.reader not in READERS:
            raise ValueError(f"{source}:{number}: {knob.name}: reader {knob.reader!r}, expected one of {', '.join(READERS)}")
        if knob.kind not in ("int", "one-of", "pattern", NONE) or (knob.kind != NONE and " " not in knob.values
                                                                  and knob.kind != "int"):
            raise ValueError(f"{source}:{number}: {knob.name}: values {knob.values!r}: expected int>=N [words], "
                             "one-of WORDS, pattern REGEX or -")
        if (knob.kind == "pattern") != (knob.expected != NONE):
            raise ValueError(f"{source}:{number}: {knob.name}: a pattern needs its expected text, nothing else has one")
        if knob.column not in (None, knob.name) and not re.fullmatch(r"[a-z][a-z0-9_]*", knob.column):
            raise ValueError(f"{source}:{number}: {knob.name}: column {knob.column!r}: expected -, {knob.name} or "
                             "a program flag's column (lower case)")
        if knob.name in {k.name for k in knobs}:
            raise ValueError(f"{source}:{number}: {knob.name} twice")
        _check_shown(knob, f"{source}:{number}")
        _check_heatmap(knob, knobs, f"{source}:{number}")
        knobs.append(knob)
    if not knobs:
        raise ValueError(f"{source}: no knobs")
    return tuple(knobs)


def _check_shown(knob, where):
    if knob.shown == NONE:
        return
    stray = re.sub(r"\{[a-z0-9_]*\}", "", knob.shown)
    if knob.shown.count("{}") != 1 or knob.in_force == NONE or "{" in stray or "}" in stray:
        raise ValueError(f"{where}: {knob.name}: shown {knob.shown!r}: expected - or a text with one {{}} (its "
                         "in-force value, which it needs) and any {context_key}")


def _check_heatmap(knob, earlier, where):
    role = knob.heatmap_role
    if role is None:
        return
    if role not in HEATMAP_ROLES or (role != "columns" and knob.heatmap != role):
        raise ValueError(f"{where}: {knob.name}: heatmap {knob.heatmap!r}: expected -, rows, panels or "
                         "columns (UNIT)")
    if role == "columns" and knob.reader not in ("gomp", "llvm"):
        raise ValueError(f"{where}: {knob.name}: heatmap columns need one runtime's knob (reader gomp or llvm)")
    if any(k.heatmap_role == role and (role != "columns" or k.reader == knob.reader) for k in earlier):
        raise ValueError(f"{where}: {knob.name}: a second knob on the heatmaps' {role}"
                         + (f" under {knob.reader}" if role == "columns" else ""))


_table = None


def table():
    global _table
    if _table is None:
        with open(TABLE) as f:
            _table = parse(f.read())
    return _table


def get(name):
    """The knob of that name, or None (a variable of the user's own)."""
    return next((k for k in table() if k.name == name), None)


def names():
    return [k.name for k in table()]


def in_force_line(context):
    """The settings in force as one line, from a context (the programs' or
    the probe's context keys): "libgomp with 4 threads, spin count 300000 (in
    force 300000), wait policy default, ..., oneDNN ISA avx2"; "no OpenMP
    runtime loaded" and the parts of the other readers without one. The table's
    shown column says which knobs and how; runtime.cc's in_force_line writes
    the same line in C++."""
    runtime = context.get("omp_runtime", "none")
    openmp = runtime not in ("", "none")
    parts = {True: [], False: []}
    for knob in table():
        of_openmp = knob.reader in OPENMP_READERS
        part = knob.part(context) if openmp or not of_openmp else None
        if part is not None:
            parts[of_openmp].append(part)
    head = (runtime + (" with " + ", ".join(parts[True]) if parts[True] else "") if openmp
            else "no OpenMP runtime loaded")
    return ", ".join([head] + parts[False])


def in_force_columns():
    """(context key, knob name) of each knob in the settings in force line:
    the report's table of the settings in force."""
    return [(k.in_force, k.name) for k in table() if k.shown != NONE]


def heatmap_knob(role, runtime=None):
    """The knob a heatmap lays out as rows, panels or (under a runtime of the
    runtime column) columns: that runtime's wait knob; None if none."""
    return next((k for k in table() if k.heatmap_role == role and (role != "columns" or k.reader == runtime)), None)


def heatmap_knobs():
    """The names of every knob a heatmap lays out (the others each get their own figure)."""
    return tuple(k.name for k in table() if k.heatmap_role)


def preloads(runtime, libomp):
    """The libraries a runtime of the runtime column puts first in LD_PRELOAD:
    gomp is the libgomp libtorch links (none); llvm is LLVM's libomp, which
    implements the GOMP ABI and so serves a libgomp-built libtorch when
    preloaded in front of it (docs/design.md, "Runtimes"). The one place
    that rule is written."""
    return [libomp] if runtime == "llvm" else []


def not_knob_columns():
    """The table's variables that have no knob column of their own."""
    return tuple(k.name for k in table() if not k.is_column)


def check(name, value, extra=()):
    """A value for the variable `name` as its environment text; KnobError
    when the table's knob refuses it. A variable outside the table takes any
    text without spaces (the user's program may read anything)."""
    knob = get(name)
    if knob is not None:
        return knob.check(value, extra)
    if isinstance(value, bool) or not isinstance(value, (str, int)) or not re.fullmatch(r"\S+", str(value)):
        raise KnobError(f"expected a value without spaces{', or ' + join_or(quoted(extra)) if extra else ''}, "
                        f"got {value!r}")
    return str(value)


def shorten(text):
    """A setting's label with each knob's NAME=VALUE in its short form (plots)."""
    def short(m):
        knob = get(m.group(1))
        return knob.short(m.group(2)) if knob and knob.label != NONE else m.group(0)
    return re.sub(r"\b([A-Z][A-Z0-9_]*)=(\S+)", short, text)


def header(knobs):
    """The C++ header of the table (CMake: knobs.py --header OUT)."""
    def lit(text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    rows = "\n".join("    {" + ", ".join(lit(k.cell(c)) for c in COLUMNS) + "}," for k in knobs)
    fields = "\n".join(f"  const char* {c};" for c in COLUMNS)
    names = ", ".join(lit(c) for c in COLUMNS)
    members = ", ".join(f"&KnobSpec::{c}" for c in COLUMNS)
    return (f"// Generated from python/threadburn/knobs.tsv by python/threadburn/lib/knobs.py: do not edit.\n"
            f"#pragma once\n\n#include <cstddef>\n\nnamespace threadburn {{\n\n"
            f"// One row of the knob table; \"-\" is an empty cell.\nstruct KnobSpec {{\n{fields}\n}};\n\n"
            f"inline constexpr KnobSpec kKnobTable[] = {{\n{rows}\n}};\n\n"
            f"// The columns by name, and each one's member (--describe prints every column).\n"
            f"inline constexpr std::size_t kKnobColumnCount = {len(COLUMNS)};\n"
            f"inline constexpr const char* kKnobColumns[kKnobColumnCount] = {{{names}}};\n"
            f"inline constexpr const char* KnobSpec::*kKnobFields[kKnobColumnCount] = {{{members}}};\n\n"
            f"}}  // namespace threadburn\n")


# Not a knob column (Knob.is_column): the runtime column says what was
# preloaded (the loader's knob); the cuda_sync column holds THREADBURN_CUDA_SYNC.
NOT_A_KNOB = not_knob_columns()


def main(argv):
    if len(argv) != 2 or argv[0] != "--header":
        print("usage: knobs.py --header OUT.h", file=sys.stderr)
        return 2
    try:
        text = header(table())
    except (OSError, ValueError) as e:
        print(f"knobs.py: error: {e}", file=sys.stderr)
        return 2
    os.makedirs(os.path.dirname(os.path.abspath(argv[1])), exist_ok=True)
    with open(argv[1] + ".tmp", "w") as f:
        f.write(text)
    os.replace(argv[1] + ".tmp", argv[1])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
