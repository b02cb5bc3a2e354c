"""Files the commands write beside a results CSV: each whole or not at all."""
import json
import os

from . import rule as rules
from .errors import ThreadburnError


def write_text(path, text):
    """path holds text whole or not at all (a .tmp renamed over it); one-line error."""
    tmp = path + ".tmp"
    try:
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as e:
        raise ThreadburnError(f"{path}: cannot write: {e.strerror}") from None
    return path


def verdict_path(csv_path):
    return os.path.splitext(csv_path)[0] + ".verdict.json"


def recorded_rule(csv_path):
    """The rule the verdict file beside csv_path recorded, or None: its
    "rule" (verdict schema 2), or for an older file the objective, margin
    and design (a race when it took looks) of its first workload, with the
    method of its day (Welch)."""
    try:
        with open(verdict_path(csv_path)) as f:
            data = json.load(f)
        if "rule" in data:
            return rules.parse(data["rule"])
        first = data["workloads"][0]
        looks = max(int(w.get("looks") or 1) for w in data["workloads"])
        return rules.Rule(objective=first["objective"], margin=first["margin"], alpha=first.get("alpha", rules.ALPHA),
                          design="race" if looks > 1 else "fixed", method="welch")
    except (OSError, ValueError, AttributeError, KeyError, TypeError, IndexError):
        return None
