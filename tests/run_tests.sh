#!/bin/sh
# Runs every test program in $1 and every tests/test_*.sh and tests/test_*.py,
# counts PASS/FAIL lines, and ends with "N passed, N failed" after the seconds taken (each test's
# too) and the list of SKIP lines (checks not made: a program they need is not installed). KVQ_QUICK=1 in the environment (`make check`) makes the long tests sample their rows;
# KVQ_TEST_JOBS=N runs N programs at a time (`make check`: 2), each report still whole and in order.
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
jobs=${KVQ_TEST_JOBS:-1}
case "$jobs" in ''|*[!0-9]*|0) echo "FAIL KVQ_TEST_JOBS=$jobs: not a positive number"; exit 2 ;; esac
passed=0
failed=0
began=$(date +%s)
all=$(mktemp)
work=$(mktemp -d)

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
# One test: its output, seconds and exit status into $work/N.out, N.secs, N.rc (the status last,
# so that N.rc existing means N is done).
run_one() {
    one_start=$(date +%s)
    KVQ_TEST_BIN=$bindir $2 >"$work/$1.out" 2>&1
    one_rc=$?
    echo $(($(date +%s) - one_start)) >"$work/$1.secs"
    echo "$one_rc" >"$work/$1.rc.tmp" && mv "$work/$1.rc.tmp" "$work/$1.rc"
}
# Test N's report, printed in the order the tests were started, whatever order they end in.
report_one() {
    name=$(cat "$work/$1.name")
    status=$(cat "$work/$1.rc")
    echo "== $name"
    cat "$work/$1.out"
    echo "   ($name: $(cat "$work/$1.secs") s)"
    cat "$work/$1.out" >>"$all"
    p=$(grep -c '^PASS ' "$work/$1.out")
    f=$(grep -c '^FAIL ' "$work/$1.out")
    if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $name: exited with status $status" | tee -a "$all"
        f=1
    fi
    passed=$((passed + p))
    failed=$((failed + f))
}
# Reports every finished test that is next in order; with "all", waits for every test first.
report_ready() {
    while [ "$reported" -lt "$started" ]; do
        n=$((reported + 1))
        if [ ! -f "$work/$n.rc" ]; then
            [ "$1" = all ] || return 0
            sleep 0.1
            continue
        fi
        report_one "$n"
        reported=$n
    done
}
# Tests still running: started, and without an exit status yet.
running_count() {
    done_count=$(ls "$work" | grep -c '\.rc$')
    echo $((started - done_count))
}
started=0
reported=0
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
    echo "$t" >"$work/$((started + 1)).name"
    while [ "$(running_count)" -ge "$jobs" ]; do
        report_ready
        sleep 0.1
    done
    started=$((started + 1))
    run_one "$started" "$cmd" &
    report_ready
done
report_ready all
wait
repeats=$(repeated_names "$all")
if [ -n "$repeats" ]; then
    echo "FAIL every check name is printed once across the run: repeated:"
    echo "$repeats" | sed 's/^/    /'
    failed=$((failed + 1))
else
    echo "PASS every check name is printed once across the run"
    passed=$((passed + 1))
fi
# A SKIP line is a check not made (a program it needs is not installed): neither passed nor failed,
# but listed again here so that a run that skipped something says so beside its count.
skipped=$(grep -c '^SKIP ' "$all")
if [ "$skipped" -gt 0 ]; then
    echo "$skipped skipped, counted neither passed nor failed:"
    grep '^SKIP ' "$all" | sed 's/^SKIP /    /'
fi
rm -rf "$all" "$work"
echo "all tests: $(($(date +%s) - began)) s"
echo "$passed passed, $failed failed"   # the last line, exactly so: CI reads it
[ "$failed" -eq 0 ]
