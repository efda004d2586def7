#!/bin/sh
# Runs every test program in $1 and every tests/test_*.sh and tests/test_*.py,
# counts PASS/FAIL lines, and ends with "N passed, N failed" after the seconds taken (each test's
# too). KVQ_QUICK=1 in the environment (`make check`) makes the long tests sample their rows.
# A program that crashes or exits nonzero without printing FAIL counts as one failure.
# Every check name appears once across the whole run, so N passed counts distinct checks:
# a repeated name is itself a FAIL (see repeated_names).
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
# The test programs spin briefly, then sleep, as ./run does (run.c, wait_briefly): libgomp's long
# spinning made test_kvcache twice as slow on the shared machine. A user's own setting is kept.
if [ -z "${OMP_WAIT_POLICY-}" ] && [ -z "${GOMP_SPINCOUNT-}" ]; then
    GOMP_SPINCOUNT=10000
    export GOMP_SPINCOUNT
fi
passed=0
failed=0
began=$(date +%s)
log=$(mktemp)
all=$(mktemp)

# Names printed more than once in the PASS/FAIL lines of file $1, one "Nx name" a line. A FAIL
# line is "FAIL name: why" and a name may hold ": " itself, so a FAIL repeats a name when it
# begins with a PASS name followed by ": ", or equals another FAIL line.
repeated_names() {
    awk '
        /^PASS / { seen[substr($0, 6)]++ }
        /^FAIL / { fails[++n_fail] = substr($0, 6) }
        END {
            for (name in seen) if (seen[name] > 1) print seen[name] "x " name
            for (i = 1; i <= n_fail; i++) {
                same = 0
                for (j = 1; j <= n_fail; j++) same += fails[j] == fails[i]
                if (same > 1 && !(fails[i] in reported)) { print same "x " fails[i]; reported[fails[i]] = 1 }
                for (name in seen) if (index(fails[i], name ": ") == 1) print "PASS and FAIL " name
            }
        }' "$1"
}
for t in $tests; do
    if [ ! -f "$t" ]; then
        # a glob that matched nothing is fine; a program asked for by name must exist
        [ "$listed" -eq 1 ] && { echo "FAIL $t: not built"; failed=$((failed + 1)); }
        continue
    fi
    # a test program whose source is gone is a stale build left in the build directory
    case "$t" in *.sh|*.py) ;; *) [ -f "tests/$(basename "$t").c" ] || continue ;; esac
    case "$t" in
        *.sh) cmd="sh $t" ;;
        *.py) cmd="python3 $t" ;;
        *)    cmd="$runner $t" ;;
    esac
    echo "== $t"
    start=$(date +%s)
    KVQ_TEST_BIN=$bindir $cmd >"$log" 2>&1
    rc=$?
    cat "$log"
    echo "   ($t: $(($(date +%s) - start)) s)"
    cat "$log" >>"$all"
    p=$(grep -c '^PASS ' "$log")
    f=$(grep -c '^FAIL ' "$log")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $t: exited with status $rc" | tee -a "$all"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
done
repeats=$(repeated_names "$all")
if [ -n "$repeats" ]; then
    echo "FAIL every check name is printed once across the run: repeated:"
    echo "$repeats" | sed 's/^/    /'
    failed=$((failed + 1))
else
    echo "PASS every check name is printed once across the run"
    passed=$((passed + 1))
fi
rm -f "$log" "$all"
echo "all tests: $(($(date +%s) - began)) s"
echo "$passed passed, $failed failed"   # the last line, exactly so: CI reads it
[ "$failed" -eq 0 ]
