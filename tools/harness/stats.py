"""Figures of repeated runs, and how the reports print them."""
import statistics


def median(values):
    return statistics.median(values) if values else float("nan")


def percentile(values, p):
    """The value at rank p % (nearest rank, no interpolation)."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def fmt(x, digits=1):
    """x with `digits` decimals; "n/a" for NaN."""
    if isinstance(x, float) and (x != x):
        return "n/a"
    return ("%%.%df" % digits) % x


def runs_text(values, digits=1):
    return ", ".join(fmt(v, digits) for v in values)
