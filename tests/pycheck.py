"""tests/pycheck.py: check() for the Python tests, as tests/test.h is for the C ones: prints
"PASS name" or "FAIL name: why" (tests/run_tests.sh counts those lines) and remembers failures."""

import math
import os

failures = 0


def check(ok, name, why=""):
    global failures
    if ok:
        print("PASS " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


def quick():
    """KVQ_QUICK=1 (`make check`): a long test checks a sample of its reference rows and says
    which; unset or 0 (`make test`, CI) it checks all (tests/test.h's test_quick)."""
    return os.environ.get("KVQ_QUICK", "0") not in ("", "0")


def max_abs_diff(a, b):
    """max |a[i] - b[i]|, but inf when a value of either is NaN or infinite: Python's max()
    skips a NaN that is not first (every comparison with NaN is false), so a tolerance check
    on max(abs(x - y)) would pass on garbage."""
    worst = 0.0
    for x, y in zip(a, b):
        d = abs(x - y)
        if not math.isfinite(d):
            return math.inf
        worst = max(worst, d)
    return worst


class Printed(float):
    """A figure as a program printed it: its value, and `half`, half a unit of its last printed
    digit (0.0193 -> 0.00005, 6.2e-06 -> 5e-08, 12 -> 0.5). The true value lies within half of it,
    so no check on a printed figure may ask for more than that. json.load(f, parse_float=Printed)
    keeps it for every non-integer number of a JSON file; Printed(text) for one taken from text."""

    def __new__(cls, text):
        x = float.__new__(cls, text)
        mantissa, _, exponent = text.lower().partition("e")
        decimals = len(mantissa.partition(".")[2])
        x.half = 0.5 * 10.0 ** ((int(exponent) if exponent else 0) - decimals)
        return x


def bounds(x):
    """(lowest, highest) value a figure can stand for: a Printed one +/- half its last digit, any
    other number (an integer a JSON file prints exactly, a value computed here) itself."""
    half = getattr(x, "half", 0.0)
    return x - half, x + half


def quotient_bounds(a, b):
    """Bounds of a / b for positive figures a and b, each within its printing."""
    (a_lo, a_hi), (b_lo, b_hi) = bounds(a), bounds(b)
    return a_lo / b_hi, a_hi / b_lo


def agrees(printed, lo, hi):
    """1 if the printed figure can stand for a value in [lo, hi] (1e-12 relative for the doubles'
    own rounding): the check at the printing's resolution, not tighter."""
    p_lo, p_hi = bounds(printed)
    slack = 1e-12 * max(abs(lo), abs(hi))
    return p_lo <= hi + slack and lo - slack <= p_hi


def exit_code():
    return 1 if failures else 0
