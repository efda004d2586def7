#!/bin/sh
# Runs every test program in $1 and every tests/test_*.sh and tests/test_*.py,
# counts PASS/FAIL lines, and ends with "N passed, N failed".
# A program that crashes or exits nonzero without printing FAIL counts as one failure.
#
#   tests/run_tests.sh BINDIR
#   tests/run_tests.sh --runner CMD PROGRAM...   only these programs, each run as "CMD PROGRAM"
#                                                (a cross build under an emulator: make test-aarch64)
if [ "$1" = --runner ]; then
    runner=$2
    shift 2
    bindir=$(dirname "$1")
    tests="$*"
    listed=1
else
    runner=
    listed=0
    bindir=$1
    tests="$bindir/test_* tests/test_*.sh tests/test_*.py"
fi
passed=0
failed=0
log=$(mktemp)
for t in $tests; do
    if [ ! -f "$t" ]; then
        # a glob that matched nothing is fine; a program asked for by name must exist
        [ "$listed" -eq 1 ] && { echo "FAIL $t: not built"; failed=$((failed + 1)); }
        continue
    fi
    case "$t" in
        *.sh) cmd="sh $t" ;;
        *.py) cmd="python3 $t" ;;
        *)    cmd="$runner $t" ;;
    esac
    echo "== $t"
    KVQ_TEST_BIN=$bindir $cmd >"$log" 2>&1
    rc=$?
    cat "$log"
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $t: exited with status $rc"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
done
rm -f "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
