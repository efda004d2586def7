#!/bin/sh
# tests/test_run_tests.sh: the test runner counts what it is shown. tests/run_tests.sh runs four
# made-up test programs here (their PASS/FAIL lines go to a file, not into this test's own count):
# one slow, one with a FAIL (and a SKIP), one that exits 3 printing nothing, one that repeats
# another's check name. Two at a time (KVQ_TEST_JOBS=2) the second starts while the first runs, one at a time it
# does not; either way the report must be the same: each program's lines in the order the programs
# were given (the slow first one ends last), a crash counted as a failure, the repeated name
# caught, the SKIP listed at the end, "4 passed, 3 failed" the last line, exit nonzero.
. tests/cli_helpers.sh
# slow.sh waits up to 3 s for fails.sh, the next program, to start: it does when two run at a time
cat >"$T/slow.sh" <<EOF
echo "PASS check one"
i=0
while [ ! -e "$T/fails-started" ] && [ \$i -lt 30 ]; do sleep 0.1; i=\$((i + 1)); done
[ -e "$T/fails-started" ] && echo "    fails.sh ran beside slow.sh" || echo "    fails.sh did not run beside slow.sh"
echo "PASS check two"
EOF
printf 'touch "%s/fails-started"\necho "PASS check three"\necho "FAIL check four: why"\necho "SKIP check five: no tool"\n' "$T" >"$T/fails.sh"
printf 'exit 3\n' >"$T/crashes.sh"
printf 'echo "PASS check one"\n' >"$T/repeats.sh"
PROGRAMS="$T/slow.sh $T/fails.sh $T/crashes.sh $T/repeats.sh"

for jobs in 1 2; do
    rm -f "$T/fails-started"
    KVQ_TEST_JOBS=$jobs sh tests/run_tests.sh --runner "" $PROGRAMS >"$T/report$jobs" 2>&1
    rc=$?
    [ "$rc" -ne 0 ] && pass "run_tests.sh, $jobs at a time: a failing run exits nonzero" ||
        fail "run_tests.sh, $jobs at a time: a failing run exits nonzero" "exit 0"
    last=$(tail -n 1 "$T/report$jobs")
    [ "$last" = "4 passed, 3 failed" ] && pass "run_tests.sh, $jobs at a time: the last line counts 4 passed, 3 failed" ||
        fail "run_tests.sh, $jobs at a time: the last line counts 4 passed, 3 failed" "$last"
    order=$(grep '^== ' "$T/report$jobs" | sed 's#.*/##' | tr '\n' ' ')
    [ "$order" = "slow.sh fails.sh crashes.sh repeats.sh " ] &&
        pass "run_tests.sh, $jobs at a time: reports in the order given" ||
        fail "run_tests.sh, $jobs at a time: reports in the order given" "$order"
    grep -q "^FAIL $T/crashes.sh: exited with status 3" "$T/report$jobs" &&
        pass "run_tests.sh, $jobs at a time: an exit without a FAIL line is a failure" ||
        fail "run_tests.sh, $jobs at a time: an exit without a FAIL line is a failure" "$(cat "$T/report$jobs")"
    grep -q "^    2x check one" "$T/report$jobs" &&
        pass "run_tests.sh, $jobs at a time: a repeated check name is a failure" ||
        fail "run_tests.sh, $jobs at a time: a repeated check name is a failure" "$(cat "$T/report$jobs")"
    sed -n '/^1 skipped, counted neither passed nor failed:$/,$p' "$T/report$jobs" | sed -n 2p | grep -qx "    check five: no tool" &&
        pass "run_tests.sh, $jobs at a time: a SKIP line is listed at the end, counted neither passed nor failed" ||
        fail "run_tests.sh, $jobs at a time: a SKIP line is listed at the end, counted neither passed nor failed" "$(tail -n 5 "$T/report$jobs")"
    grep -v '^   (\|^all tests\|beside slow.sh' "$T/report$jobs" >"$T/lines$jobs"
done
grep -q "^    fails.sh did not run beside slow.sh" "$T/report1" && pass "run_tests.sh, 1 at a time: one program at a time" ||
    fail "run_tests.sh, 1 at a time: one program at a time" "$(grep 'beside' "$T/report1")"
grep -q "^    fails.sh ran beside slow.sh" "$T/report2" && pass "run_tests.sh, 2 at a time: two programs at a time" ||
    fail "run_tests.sh, 2 at a time: two programs at a time" "$(grep 'beside' "$T/report2")"
# apart from seconds, one at a time and two at a time print the same lines
cmp -s "$T/lines1" "$T/lines2" && pass "run_tests.sh: two at a time reports what one at a time does" ||
    fail "run_tests.sh: two at a time reports what one at a time does" "$(diff "$T/lines1" "$T/lines2" | head -5)"
# the slow program's lines stay together though the others end while it runs
sed -n '/slow.sh$/,/^== /p' "$T/lines2" | grep -c "^PASS check" | grep -qx 2 &&
    pass "run_tests.sh, 2 at a time: a program's lines are printed together" ||
    fail "run_tests.sh, 2 at a time: a program's lines are printed together" "$(head -8 "$T/lines2")"
KVQ_TEST_JOBS=0 timeout 60 sh tests/run_tests.sh --runner "" "$T/slow.sh" >"$T/zero" 2>&1
rc=$?
[ "$rc" -eq 2 ] && grep -q "KVQ_TEST_JOBS=0" "$T/zero" && pass "run_tests.sh: KVQ_TEST_JOBS=0 is refused (exit 2)" ||
    fail "run_tests.sh: KVQ_TEST_JOBS=0 is refused (exit 2)" "exit $rc: $(cat "$T/zero")"
# Each report is headed by its own program's name: 30 short programs of uneven length (0 to 0.05 s),
# so that programs end while the runner waits for a free slot (a stop 47 bug: a report printed there
# gave the next program the name of the one reported, seen once in a run of 40 under qemu).
many=""
i=1
while [ $i -le 30 ]; do
    printf 'sleep 0.0%s\necho "PASS program %s"\n' "$(( (i * 7) % 6 ))" "$i" >"$T/prog$i.sh"
    many="$many $T/prog$i.sh"
    i=$((i + 1))
done
for jobs in 1 2; do
    KVQ_TEST_JOBS=$jobs sh tests/run_tests.sh --runner "" $many >"$T/many$jobs" 2>&1
    wrong=$(awk '/^== / { n = $2; sub(/.*prog/, "", n); sub(/\.sh$/, "", n) }
                 /^PASS program / && $3 != n { print "header prog" n ".sh over PASS program " $3 }' "$T/many$jobs" | head -3)
    count=$(grep -c '^PASS program ' "$T/many$jobs")
    [ -z "$wrong" ] && [ "$count" -eq 30 ] && pass "run_tests.sh, $jobs at a time: each of 30 reports is headed by its own program" ||
        fail "run_tests.sh, $jobs at a time: each of 30 reports is headed by its own program" "$count reports; $wrong"
done
