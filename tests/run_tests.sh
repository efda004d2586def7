#!/bin/sh
# Runs every test program in $1 and every tests/test_*.sh and tests/test_*.py,
# counts PASS/FAIL lines, and ends with "N passed, N failed".
# A program that crashes or exits nonzero without printing FAIL counts as one failure.
bindir=$1
passed=0
failed=0
log=$(mktemp)
for t in "$bindir"/test_* tests/test_*.sh tests/test_*.py; do
    [ -f "$t" ] || continue
    case "$t" in
        *.sh) cmd="sh $t" ;;
        *.py) cmd="python3 $t" ;;
        *)    cmd="$t" ;;
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
