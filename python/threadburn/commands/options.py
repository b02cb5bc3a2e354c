"""argparse types the commands share: each checks one kind of value and
says what it expected (one line, as every error)."""
import argparse

from ..engine import campaign


def positive(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def budget(text):
    try:
        return campaign.parse_budget(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def margin(text):
    """0.05 or 5%: a fraction in (0, 1)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        value = 0
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"expected a fraction in (0, 1) such as 0.05, or 5%, got {text!r}")
    return value
