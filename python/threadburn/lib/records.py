"""The results CSV, read and written here and nowhere else: the only module
where a row is text.

Row is one line of the file, typed as it is read: every column the Python
side names is an attribute of Row, made from the schema's table of kinds
(schema.column_kinds: row.status as text, row.step_ms as a float, row.gap_ms
as an int), converted here and nowhere else; a column whose name comes from
data (a program's loop counters, a file's knob layout) reads through
text/number/integer(name). RunRecord is one run of one setting for one
workload (a fresh process, or P copies, or the W ranks of a world): which
run, which setting, its status; its figures (the time and CPU the decision
rule compares, the evidence of disturbance) are analysis's definitions
(analysis/runfigures.py), handed to run_records. analysis/ reads
RunRecords, export/ and the commands read Rows; none of them reads a cell
by a name of its own spelling.

ResultsFile appends whole runs atomically, so a campaign killed at any
moment leaves either all of a run's rows or, at worst, a partial last line
that repair_for_resume drops (with any run that has fewer rows than it
announced, run_rows). Appending returns the run's rows as the file now
holds them (every column, as text: what reading the file back would give),
so a campaign can keep its runs in memory and read the file only to resume.
"""
import csv
import io
import os
import signal
from collections import namedtuple
from dataclasses import dataclass, field

from . import keys, knobs, rule as rules, schema
from .errors import ThreadburnError


class ResultsError(ThreadburnError):
    """A results file that cannot be used; str() is the one line to print."""


def _float(value):
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _reader(name, kind, default):
    """The function reading one column of a row as its kind (schema.column_kinds)."""
    if kind == schema.TEXT:
        default = "" if default is None else default

        def read(row):
            value = row._cells.get(name)
            if value is None or value == "":
                return default
            return value if value.__class__ is str else schema.fmt_value(value)
    elif kind == schema.NUMBER:
        def read(row):
            value = _float(row._cells.get(name))
            return default if value is None else value
    else:
        def read(row):
            value = _float(row._cells.get(name))
            return default if value is None else int(value)
    return read


class Column(property):
    """One column of the results CSV as an attribute of Row, made from the
    schema's table of kinds (schema.column_kinds). On a row it is the cell,
    typed (row.step_ms: a float or None) and assignable (row.overlap = 0.97,
    kept as given and written as text by schema.fmt_value); on the class it
    is the column itself: Row.step_ms.name is its name in the file, and
    Row.step_ms(row) reads a row, so code that picks a column by rule (a
    table's metric, the figure of a world's ranks) holds the column, not its
    name."""

    def __init__(self, name, kind, default=None):
        def write(row, value):
            row._cells[name] = value
        super().__init__(_reader(name, kind, default), write)
        self.name, self.kind, self.default = name, kind, default
        self.__doc__ = f"the {name} column ({kind})"

    def __call__(self, row):
        return self.fget(row)

    def __repr__(self):
        return f"Row.{self.name}"


class Row:
    """One row of a results CSV (or one an executor is about to write).
    Every column of schema.column_kinds is an attribute (Column); those
    below are what a row says beyond one cell."""
    __slots__ = ("_cells",)

    def __init__(self, cells=None, **values):
        self._cells = dict(cells or {})
        if values:
            self.update(**values)

    # --- reading a column whose name comes from data (a program's loop counters, a file's knobs) -----
    def text(self, name, default=""):
        """A column as text ("" when empty or absent unless `default`)."""
        value = self._cells.get(name)
        if value is None or value == "":
            return default
        return schema.fmt_value(value) if not isinstance(value, str) else value

    def number(self, name):
        """A numeric column as a float; None when empty, absent or not a number."""
        return _float(self._cells.get(name))

    def integer(self, name, default=None):
        value = self.number(name)
        return default if value is None else int(value)

    def has(self, name):
        return self._cells.get(name) not in (None, "")

    def columns(self):
        return tuple(self._cells)

    def legacy_knob_columns(self):
        """The knob columns of a row of a file older than schema 4 (no
        knob_layout), by their place in its header (keys.legacy_layout)."""
        return schema.legacy_knob_columns(self.columns())

    @property
    def knob_columns(self):
        """Everything that was asked for, by the layout of the row's file:
        bench, runtime, env knobs, a tune's params, processes, flags."""
        lay = keys.layout(self)
        return schema.knob_columns(lay.env, lay.params, lay.flags)

    # --- what the row says beyond a cell -------------------------------------------------
    ok = property(lambda self: self.status == "ok")
    is_tune = property(lambda self: self.grid == "tune")
    host_run = property(lambda self: self.copy_start_ms is not None,
                        doc="a row of a run whose copies the host launcher let go together (tune --copies)")
    metric_higher = property(lambda self: self.metric is not None and self.metric_better == "higher")

    @property
    def throughput(self):
        """(counter, unit) of the row's throughput, as the program that wrote
        it says: its throughput_counter/throughput_unit context (schema 5;
        counter "none": steps/s = 1000 / step_ms). Older rows carry no rule:
        then a filled samples_per_s is the counter (the programs that had one
        filled it)."""
        counter, unit = self.throughput_counter, self.throughput_unit
        if counter and unit:
            return (None if counter == "none" else counter), unit
        if self.samples_per_s is not None:
            return Row.samples_per_s.name, "samples/s"
        return None, "steps/s"

    @property
    def setting(self):
        return keys.setting_of(self)

    @property
    def workload(self):
        return keys.workload_of(self)

    @property
    def rule(self):
        """The decision rule the campaign that wrote this row ran by (its
        rule column, parsed); None for files that predate the column."""
        text = self.text("rule")
        if not text:
            return None
        try:
            return rules.parse(text)
        except ValueError as e:
            raise ResultsError(f"run {self.run_key}: its rule column is not a rule: {e}") from None

    # --- writing (executors) ------------------------------------------------------------
    def set(self, name, value):
        self._cells[name] = value

    def update(self, values=None, **more):
        """Cells by name: a dict of any columns (a program's counters, the
        knobs of a point), keywords only of the columns Row knows."""
        self._cells.update(values or {})
        for name, value in more.items():
            if name not in KNOWN_COLUMNS:
                raise TypeError(f"Row has no column {name!r} (schema.column_kinds)")
            self._cells[name] = value

    def copy(self, **changes):
        return Row(self._cells, **changes)

    def cells(self, columns):
        """The row's cells in the file's column order, as text."""
        return [schema.fmt_value(self._cells.get(c)) for c in columns]

    def __repr__(self):
        return f"Row({self.run_key!r}, {self.benchmark!r}, {self.status!r})"


KNOWN_COLUMNS = frozenset(schema.column_kinds())
# Row's column attributes, made once from the schema (a name Row defines itself, rule, stays
# Row's own: the parsed Rule; its cell reads as Row.text("rule")).
for _name, (_kind, _default) in schema.column_kinds().items():
    if _name not in vars(Row):
        setattr(Row, _name, Column(_name, _kind, _default))


def read_table(path):
    """(header, [Row]) of a results CSV."""
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            rows = [Row(r) for r in reader]
            return list(reader.fieldnames or []), rows
    except OSError as e:
        raise ResultsError(f"{path}: cannot read: {e.strerror}") from None
    except (csv.Error, UnicodeDecodeError) as e:
        raise ResultsError(f"{path}: not a readable CSV: {e}") from None


def read_rows(path, required=()):
    """The Rows of a results CSV; checks the columns named in required."""
    header, rows = read_table(path)
    check_columns(path, header, required)
    return rows


def holds_steps(header):
    """A file of a program's benchmark steps (a sweep's), by its header."""
    return Row.step_ms.name in header


def is_runs_file(header):
    """A file of runs of a command under the probe (tune, run), not of benchmarks."""
    return not holds_steps(header) and Row.wall_ms.name in header


def check_columns(path, header, required):
    missing = [c for c in required if c not in header]
    if missing:
        raise ResultsError(f"{path}: missing columns: {', '.join(missing)}")


def metric_values(rows, column):
    """The values of a numeric column (a Column: Row.step_ms) the rows have."""
    read = column.fget
    values = [read(r) for r in rows]
    return [v for v in values if v is not None]


# --- worlds -------------------------------------------------------------------------

# How a world's row combines its ranks' values (world_rows): the step goes at
# the slowest rank's pace, CPU adds up, the all-reduce is the ranks' mean.
WORLD_METRICS = {Row.step_ms: max, Row.step_cpu_ms: sum, Row.residual_cpu_ms: sum, Row.residual_omp_ms: sum,
                 Row.residual_gloo_ms: sum, Row.step_cpu_gloo_ms: sum, Row.tail_ms: max, Row.gap_slept_ms: max,
                 Row.allreduce_ms: lambda v: sum(v) / len(v)}


def world_rows(rows):
    """Rows with each data-parallel world (the ranks of one run, per
    benchmark) made one row: the metrics of WORLD_METRICS combined over the
    ranks (step_ms of the slowest rank, CPU summed: what the whole world
    spends per step), samples_per_s = world_samples_per_s; other columns rank
    0's. A world missing a rank's ok row is left out: it measured no world.
    Rows of independent copies pass unchanged."""
    out, worlds = [], {}
    for row in rows:
        if row.world_size is not None:
            worlds.setdefault((row.run_key, row.benchmark), []).append(row)
        else:
            out.append(row)
    for ranks in worlds.values():
        size = ranks[0].world_size
        if len(ranks) != size or any(not r.ok for r in ranks):
            continue
        ranks.sort(key=lambda r: r.rank)
        world = ranks[0].copy()
        for metric, combine in WORLD_METRICS.items():
            values = metric_values(ranks, metric)
            metric.fset(world, combine(values) if len(values) == size else None)
        world.samples_per_s = ranks[0].world_samples_per_s
        out.append(world)
    return out


# --- run records --------------------------------------------------------------------

@dataclass(frozen=True)
class RunRecord:
    """One run of one setting for one workload: which run it is (here),
    and its figures (what they are is analysis/runfigures.py's)."""
    run_key: str
    point_key: str
    workload: object            # keys.Workload
    setting: object             # keys.SettingId: asked, and in force
    name: str                   # the setting's name in a verdict (a tune's point, a sweep's label)
    round: int                  # the shuffled block it ran in (None: the file records none)
    phase: str                  # race | confirm
    status: str                 # ok | failed | skipped (the worst of its rows)
    reason: str
    time: float                 # the figure compared as time (see time_kind); None when not measured
    time_kind: str              # loop_ms | step_ms | wall_ms | steady_ms | unit_ms | metric | host | host_metric
    higher_is_better: bool
    cpu: float                  # CPU ms of the run per iteration (sweep) or in all (tune); None without
    wall_ms: float
    disturbance: object         # analysis/runfigures.Disturbance: what else ran
    env: dict                   # the variables a user sets for this setting
    rule: object                # lib.rule.Rule the rows recorded, or None
    command: str = ""
    benchmark: str = ""
    repro: str = ""
    rows: tuple = field(default=(), compare=False, repr=False)
    # A run of copies started together (tune --copies): its time is the
    # host's throughput (time_kind host: copies / the run's wall time in s;
    # host_metric: the copies' --metric summed, as rates), its cpu every
    # copy's; per copy, the mean of the copies' own figure (their --metric,
    # else their wall time in ms; per_copy_higher says which way is better).
    copies: int = 1
    per_copy: float = None
    per_copy_higher: bool = False
    overlap: float = None       # the least share of a copy's time the others ran too (None: one copy)
    between_ms: float = None    # the OpenMP workers' CPU between regions, all copies (None: not probed)
    startup_ms: float = None    # a run judged on its steady phase: the startup before it (not compared)
    pins: tuple = ()            # each copy's CPUs as taskset lists them (a pinned plan), or ()


def user_env(row, libomp):
    """The variables that give a row's setting (LD_PRELOAD for LLVM's runtime;
    a tune's CUDA wait policy, from its cuda_sync column, as the knob the
    table records there)."""
    env = {k: v for k, v in row.setting.env if v not in (schema.UNSET, "")}
    if preload := knobs.preloads(row.runtime, libomp):
        env["LD_PRELOAD"] = " ".join(preload)
    if row.is_tune and row.cuda_sync not in ("", "auto"):
        env.update({k.name: row.cuda_sync for k in knobs.table() if getattr(k, "column", None) == Row.cuda_sync.name})
    return env


def setting_name(row):
    """A setting's name in a verdict: a tune's point name, a sweep's setting label."""
    return row.study if row.is_tune else row.setting.label


def run_records(rows, libomp, figures):
    """One RunRecord per (workload, setting, run) of the rows: copies of a run are
    one record, the ranks of a world one record (world_rows), a tune's run
    its one row or, of N copies started together, one record of the host.
    figures(first, run_rows): the run's figures, a dict of RunRecord's
    figure fields (time, time_kind, cpu, ..., rows: the run's rows in their
    order); what a run's figure is is analysis's (analysis/runfigures.py,
    of_run), handed in because this library imports nothing above it."""
    groups = {}
    source = rows if rows and rows[0].is_tune else world_rows(rows)
    for r in source:  # one process may run several settings of a workload (a setting flag's values)
        groups.setdefault((r.workload, r.setting, r.run_key), []).append(r)
    out = []
    for (workload, _, run_key), run_rows in groups.items():
        first = next((r for r in run_rows if r.ok), run_rows[0])
        bad = [r for r in run_rows if not r.ok]
        status = "failed" if any(r.status == "failed" for r in bad) else ("skipped" if bad else "ok")
        out.append(RunRecord(
            run_key=run_key, point_key=first.point_key, workload=workload, setting=keys.setting_id(first),
            name=setting_name(first), round=first.round, phase=first.phase, status=status,
            reason="; ".join(dict.fromkeys(r.reason for r in bad if r.reason)) or first.reason,
            env=user_env(first, libomp), rule=first.rule, command=first.command, benchmark=first.benchmark,
            repro=first.repro, **figures(first, run_rows, status)))
    return out


# --- writing ------------------------------------------------------------------------

class SignalsHeld:
    """Hold Ctrl-C / SIGTERM while a results file is being written, so an
    interrupt lands between whole runs, never inside one."""
    SIGNALS = {signal.SIGINT, signal.SIGTERM}

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)


# What resuming a results file gives back (ResultsFile.repair_for_resume).
Resumed = namedtuple("Resumed", "done seed rows")


class ResultsFile:
    def __init__(self, path, columns, rule=None):
        self.path = path
        self.columns = columns
        self.header = columns.header()
        self.rule = rule            # written into every row's rule column

    def create(self):
        """A new file holding only the header, put in place atomically."""
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        self._replace(self.header.encode())

    def _replace(self, data):
        tmp = f"{self.path}.tmp{os.getpid()}"
        with SignalsHeld():
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)

    def repair_for_resume(self):
        """Drops a trailing partial line and any run with fewer rows than it
        announced (run_rows); returns a Resumed: the finished run keys, the
        seed of the file, the Rows it kept (read this once: a campaign keeps
        its runs in memory from here on)."""
        with open(self.path, "rb") as f:
            data = f.read()
        if not data.startswith(self.header.encode()):
            raise ThreadburnError(f"{self.path}: its header differs from what this campaign writes (schema "
                                  f"{schema.SCHEMA_VERSION}, these programs' flags and counters); write to a new --out")
        complete = data[:data.rfind(b"\n") + 1]
        lines = complete[len(self.header):].split(b"\n")[:-1]
        parsed = [next(csv.reader([ln.decode()])) for ln in lines]
        idx = {c: i for i, c in enumerate(self.columns.all)}
        counts, announced = {}, {}
        for fields in parsed:
            if len(fields) != len(self.columns.all):
                raise ThreadburnError(f"{self.path}: a row has {len(fields)} fields, expected "
                                      f"{len(self.columns.all)}; not a file this campaign wrote")
            key = fields[idx["run_key"]]
            counts[key] = counts.get(key, 0) + 1
            announced[key] = int(fields[idx["run_rows"]])
        done = {k for k, n in counts.items() if n == announced[k]}
        kept = [ln for ln, fields in zip(lines, parsed) if fields[idx["run_key"]] in done]
        if len(kept) != len(lines) or len(complete) != len(data):
            self._replace(self.header.encode() + b"".join(ln + b"\n" for ln in kept))
            print(f"threadburn: {self.path}: dropped {len(lines) - len(kept)} rows of unfinished runs"
                  + (" and a partial line" if len(complete) != len(data) else ""))
        seeds = {fields[idx["seed"]] for fields in parsed if fields[idx["seed"]]}
        rules_seen = {fields[idx["rule"]] for fields in parsed if fields[idx["rule"]]} if "rule" in idx else set()
        if self.rule is not None and rules_seen and rules_seen != {self.rule.text()}:
            raise ThreadburnError(f"{self.path}: its runs were made under another rule ({sorted(rules_seen)[0]}) than "
                                  f"this one ({self.rule.text()}); resume with the same --margin, --objective and "
                                  "--budget, or write to a new --out")
        kept_rows = [self.held(fields) for fields in parsed if fields[idx["run_key"]] in done]
        return Resumed(done, int(seeds.pop()) if len(seeds) == 1 else None, kept_rows)

    def held(self, cells):
        """The Row the file holds for a line of cells (text, in the file's column order)."""
        return Row(dict(zip(self.columns.all, cells)))

    def append(self, rows):
        """All rows of one run with a single write + fsync: a kill leaves
        either all of them or (at worst) a partial last line that resume drops.
        Returns the run's Rows as the file now holds them (held)."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        layout = self.columns.layout_text()
        held = []
        for row in rows:
            if not row.knob_layout:
                row.knob_layout = layout
            if self.rule is not None and not row.has("rule"):  # a Slurm task's rows get the sweep's here
                row.set("rule", self.rule.text())
            cells = row.cells(self.columns.all)
            writer.writerow(cells)
            held.append(self.held(cells))
        data = memoryview(buf.getvalue().encode())
        with SignalsHeld():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
        return held
