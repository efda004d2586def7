"""tests/pycheck.py: check() for the Python tests, as tests/test.h is for the C ones: prints
"PASS name" or "FAIL name: why" (tests/run_tests.sh counts those lines) and remembers failures."""

import math

failures = 0


def check(ok, name, why=""):
    global failures
    if ok:
        print("PASS " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


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


def exit_code():
    return 1 if failures else 0
