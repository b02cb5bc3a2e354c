"""The environment knobs: one table, python/threadburn/knobs.tsv, for both sides.

Each line of the table is one knob: its name, who reads it (openmp: every
OpenMP runtime; gomp or llvm: that runtime only; onednn; cuda: threadburn's
preload libraries, for the CUDA driver; loader: reported, never a knob
column), the values a grid or `tune --points` may give it, its short label in
plots, the context key that reports what the live process really uses (its
read-back), the results column that holds its value (its own knob column, a
program flag's column of the same meaning, or none), and one line of doc. The
column comments are at the top of the table.

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
COLUMNS = ("name", "reader", "values", "expected", "label", "in_force", "column", "doc")
READERS = ("openmp", "gomp", "llvm", "onednn", "cuda", "loader")
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
        knob = Knob(*cells[:6], None if cells[6] == NONE else cells[6], cells[7])
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
        knobs.append(knob)
    if not knobs:
        raise ValueError(f"{source}: no knobs")
    return tuple(knobs)


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


def runtime_knobs(runtime):
    """The knobs only that OpenMP runtime reads (gomp, llvm)."""
    return [k.name for k in table() if k.reader == runtime]


def in_force_keys(flags=None):
    """The context keys that report what the knobs really are in the live
    process. With flags (a program's flag names): those the program reports,
    which leaves out the read-back of a knob whose column is a flag it lacks
    (cuda_sync_in_force: the programs with --cuda_sync, and the probe)."""
    return [k.in_force for k in table() if k.in_force != NONE
            and (flags is None or k.is_column or k.column is None or k.column in flags)]


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


def as_dicts(knobs=None):
    """The table as --describe prints it ("knobs")."""
    return [{c: k.cell(c) for c in COLUMNS} for k in (knobs or table())]


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
