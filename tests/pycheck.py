"""tests/pycheck.py: check() for the Python tests, as tests/test.h is for the C ones: prints
"PASS name" or "FAIL name: why" (tests/run_tests.sh counts those lines) and remembers failures."""

failures = 0


def check(ok, name, why=""):
    global failures
    if ok:
        print("PASS " + name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))


def exit_code():
    return 1 if failures else 0
