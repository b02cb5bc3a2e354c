"""The results file: a CSV that only ever holds whole runs.

Every run's rows are written with one write + fsync, so a sweep or tune
killed at any moment leaves either all of a run's rows or, at worst, a
partial last line; repair_for_resume drops that and any run with fewer
rows than it announced (run_rows). The header is schema.Columns.
"""
import csv
import io
import os
import signal

from . import schema
from .errors import ThreadburnError


class SignalsHeld:
    """Hold Ctrl-C / SIGTERM while a results file is being written, so an
    interrupt lands between whole runs, never inside one."""
    SIGNALS = {signal.SIGINT, signal.SIGTERM}

    def __enter__(self):
        signal.pthread_sigmask(signal.SIG_BLOCK, self.SIGNALS)

    def __exit__(self, *exc):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, self.SIGNALS)


class ResultsFile:
    def __init__(self, path, columns):
        self.path = path
        self.columns = columns
        self.header = columns.header()

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
        announced (run_rows); returns (finished run keys, seed of the file)."""
        with open(self.path, "rb") as f:
            data = f.read()
        if not data.startswith(self.header.encode()):
            raise ThreadburnError(f"{self.path}: its header differs from what this sweep writes (schema "
                                  f"{schema.SCHEMA_VERSION}, these programs' flags and counters); write to a new --out")
        complete = data[:data.rfind(b"\n") + 1]
        lines = complete[len(self.header):].split(b"\n")[:-1]
        parsed = [next(csv.reader([ln.decode()])) for ln in lines]
        idx = {c: i for i, c in enumerate(self.columns.all)}
        counts, announced = {}, {}
        for fields in parsed:
            if len(fields) != len(self.columns.all):
                raise ThreadburnError(f"{self.path}: a row has {len(fields)} fields, expected "
                                      f"{len(self.columns.all)}; not a file this sweep wrote")
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
        return done, (int(seeds.pop()) if len(seeds) == 1 else None)

    def append(self, rows):
        """All rows of one run with a single write + fsync: a kill leaves
        either all of them or (at worst) a partial last line that resume drops."""
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        layout = self.columns.layout_text()
        for row in rows:
            row.setdefault("knob_layout", layout)
            writer.writerow([schema.fmt_value(row.get(c)) for c in self.columns.all])
        data = memoryview(buf.getvalue().encode())
        with SignalsHeld():
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            try:
                while data:
                    data = data[os.write(fd, data):]
                os.fsync(fd)
            finally:
                os.close(fd)
