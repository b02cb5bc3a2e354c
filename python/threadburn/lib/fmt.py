"""How numbers and durations are printed: one formatter for every table."""


def number(value, digits=3):
    """`digits` significant digits; |x| < 0.0005 prints as 0 (sampler noise
    around zero burn would otherwise read like -0.000197); None as n/a."""
    if value is None:
        return "n/a"
    if abs(value) < 5e-4:
        return "0"
    return f"{value:.{digits}g}" if abs(value) < 10 ** digits else f"{value:.0f}"


def ms(value):
    return "n/a" if value is None else number(value) + " ms"


def pct(change):
    """A change as a signed percentage; one that rounds to zero is +0.0%."""
    if change is None:
        return "n/a"
    return "+0.0%" if abs(change) < 0.0005 else f"{change:+.1%}"


def duration(seconds):
    seconds = int(round(seconds))
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


def table(header, body, fmt="text", right_from=2):
    """Rows of cells as a text or Markdown table; columns from right_from on
    are right-aligned (numbers)."""
    if fmt == "md":
        lines = ["| " + " | ".join(header) + " |",
                 "|" + "|".join("---" if i < right_from else "---:" for i in range(len(header))) + "|"]
        return lines + ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]

    def line(row):
        return "  ".join(c.ljust(w) if i < right_from else c.rjust(w)
                         for i, (c, w) in enumerate(zip(row, widths))).rstrip()
    return [line(header), "  ".join("-" * w for w in widths)] + [line(r) for r in body]
