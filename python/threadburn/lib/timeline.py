"""The one reader of threadburn's timelines (library). The format is
src/core/timeline.h's, written by the benchmark programs (--timeline_dir) and
the preload probe (probe-<pid>.timeline.csv);
results/README.md, "Timelines and per-thread files", says what each series
means:

    # threadburn timeline 1; origin=step_end[; key=value ...]
    t_ms,series,cores

The comment line is optional (timelines written before it existed have only
the column line). threadburn_monitor writes this format too (origin
monitor_start, t0_unix_ms in the header). One other path: a monitor
recording from before it did (unix_ms,t_ms,dt_ms,tid,name,cpu_ms,...), as in
results/monitor/, reads as the same series, process and thread:<tid>:<name>.
"""
import csv

from .errors import ThreadburnError

COLUMNS = ["t_ms", "series", "cores"]
MARKS = ("step_start", "step_end")  # one row each: the instant, cores 0
LEGACY_MONITOR = {"unix_ms", "t_ms", "dt_ms", "tid", "name", "cpu_ms"}
LEGACY_PROCESS_TID = "0"


class Timeline(dict):
    """{series: (t_ms list, cores list)}, each in time order; .meta: the
    comment line's key=value pairs (origin, t0_unix_ms, ...)."""

    def __init__(self, series, meta):
        super().__init__(series)
        self.meta = meta

    def marks(self):
        """{mark: t_ms} of the marks present."""
        return {m: self[m][0][0] for m in MARKS if m in self and self[m][0]}

    def burn_threshold(self):
        """Cores above which a sample is burn, as the writer's header says
        (burn_threshold_cores: src/core/burn.h's rule, written by the one C++
        writer). A file written before the header carried it: 0, any CPU."""
        return float(self.meta.get("burn_threshold_cores", 0.0))

    def threads(self):
        """{series: (tid, label)} of the per-thread series."""
        out = {}
        for name in self:
            if name.startswith("thread:"):
                _, tid, label = name.split(":", 2)
                out[name] = (tid, label)
        return out


def parse_meta(line):
    """'# threadburn timeline 1; origin=x; k=v' -> {'version': '1', 'origin': 'x', 'k': 'v'}"""
    parts = [p.strip() for p in line.lstrip("#").split(";")]
    meta = {}
    if parts and parts[0].startswith("threadburn timeline"):
        meta["version"] = parts[0].split()[-1]
    for p in parts[1:]:
        k, _, v = p.partition("=")
        meta[k.strip()] = v.strip()
    return meta


def read(path):
    """The timeline at path as a Timeline; ThreadburnError (one line) when it
    cannot be read or is not a timeline."""
    try:
        with open(path, newline="") as f:
            first = f.readline()
            meta = parse_meta(first) if first.startswith("#") else {}
            if first.startswith("#"):
                first = f.readline()
            header = next(csv.reader([first]), [])
            if set(header) >= LEGACY_MONITOR:
                return _legacy_monitor(path, header, f)
            if header != COLUMNS:
                raise ThreadburnError(f"{path}: not a threadburn timeline (columns {','.join(COLUMNS)} expected)")
            series = {}
            for n, rec in enumerate(csv.reader(f), 3 if meta else 2):
                if len(rec) != 3:
                    raise ThreadburnError(f"{path}:{n}: malformed row")
                points = series.setdefault(rec[1], [])
                points.append((float(rec[0]), float(rec[2])))
    except OSError as e:
        raise ThreadburnError(f"cannot read {path}: {e.strerror}") from None
    except ValueError as e:
        raise ThreadburnError(f"{path}: malformed row ({e})") from None
    return Timeline({k: _columns(v) for k, v in series.items()}, meta)


def _columns(points):
    points.sort(key=lambda p: p[0])
    return [t for t, _ in points], [c for _, c in points]


def _legacy_monitor(path, header, f):
    series, meta = {}, {"origin": "monitor_start", "legacy": "monitor"}
    for rec in csv.DictReader(f, fieldnames=header):
        t, dt, cpu = float(rec["t_ms"]), float(rec["dt_ms"]), float(rec["cpu_ms"])
        if "t0_unix_ms" not in meta:
            meta["t0_unix_ms"] = str(int(rec["unix_ms"]) - round(t))
        name = "process" if rec["tid"] == LEGACY_PROCESS_TID else f"thread:{rec['tid']}:{rec['name']}"
        series.setdefault(name, []).append((t, cpu / dt if dt > 0 else 0.0))
    if "process" not in series:
        raise ThreadburnError(f"{path}: no samples")
    return Timeline({k: _columns(v) for k, v in series.items()}, meta)
