#!/bin/sh
# tests/test_cli_words.sh: what ./run's messages and reports say, in words a newcomer reads right
# (issue 52): a directory that is not a model's is called that; a file that cannot be read says
# why; q4_k's refusal names every llama.cpp type kvq has (iq4_nl too); ppl's report counts the
# windows of the whole text beside those asked for, and its tok/s says what it counts, the same as
# the progress line's; --validate --quiet drops the progress, not the report; calibrate's summary
# and a random model's heatmap title; a sweep's results.md counts the text's windows too. Small models and
# windows: seconds.
. tests/cli_helpers.sh
S=data/models/stories260K
M=data/models/mini-llama-brown
[ -x ./run ] || { fail "cli words" "./run not built"; exit 1; }

# words NAME WANT CMD...: exit 2 and the one stderr line holds WANT
words() {
    what=$1 says=$2
    shift 2
    expect_exit "$what" 2 "$@"
    grep -qF -- "$says" "$T/err" && pass "$what: says '$says'" || fail "$what: says '$says'" "$(cat "$T/err")"
}

words "ppl on a directory that is not a model's" "data: not a model directory (no config.json;" ./run ppl data
words "ppl --text-file missing says why" "$T/none.txt: cannot open: No such file or directory" \
    ./run ppl $S --text-file "$T/none.txt" --windows 1 --ctx 64
words "ppl --text-file a directory says why" "$T: read error: Is a directory" ./run ppl $S --text-file "$T" --windows 1 --ctx 64
words "q4_k's refusal names iq4_nl" "expected q8_0, q4_0, q4_1, q5_0, q5_1 or iq4_nl" ./run ppl $S --kv-scheme q4_k

# --- ppl's report: the text's windows beside those asked for; tok/s of forward passes, as the progress
P="--ctx 64 --stride 64 --max-tokens 640 --kv-scheme int8-g8"
./run ppl $S $P >"$T/all.out" 2>/dev/null
./run ppl $S $P --windows 2 >"$T/two.out" 2>"$T/two.err"
all=$(sed -n 's/^windows:   \([0-9]*\) of \([0-9]*\),.*/\1 \2/p' "$T/all.out")
set -- $all
[ -n "$all" ] && [ "$1" = "$2" ] && [ "$1" -gt 2 ] &&
    grep -q "^windows:   2 of 2 asked (--windows; the text has $1), " "$T/two.out" &&
    pass "ppl --windows 2: the report says 2 of 2 asked and the text's $1 windows (those of a run without --windows)" ||
    fail "ppl --windows 2: the text's windows" "all: '$all'; $(grep '^windows' "$T/two.out")"
grep -q "asked" "$T/all.out" && fail "ppl without --windows: no 'asked'" "$(grep '^windows' "$T/all.out")" ||
    pass "ppl without --windows: the windows line has no 'asked'"
report=$(sed -n 's/^time: .* \([0-9]*\) tok\/s of forward passes (\([0-9]*\) window tokens, each run with the fp32 cache and with the scheme.s)$/\1 \2/p' "$T/two.out")
progress=$(sed -n 's/^ppl: 2\/2 windows, \([0-9]*\) tok\/s.*/\1/p' "$T/two.err" | tail -n 1)
set -- $report
# the two rates are the same count over nearly the same seconds: 0.75..1.33 (a progress counting each
# window token once, half the report's, fails)
[ -n "$report" ] && [ "$2" -eq 128 ] && [ -n "$progress" ] && [ $((4 * progress)) -ge $((3 * $1)) ] && [ $((3 * progress)) -le $((4 * $1)) ] &&
    pass "ppl: the report's tok/s counts forward passes (128 window tokens, two runs each), as the progress line ($progress vs $1)" ||
    fail "ppl: tok/s of the report and of the progress" "report '$report', progress '$progress': $(grep '^time' "$T/two.out")"

# --- --validate --quiet: no progress on stderr, as everywhere; the report stays
./run --validate --model $S --kv-scheme int8-g8 --windows 1 --ctx 64 --stride 64 --quiet >"$T/v.out" 2>"$T/v.err"
rc=$?
[ "$rc" -le 1 ] && grep -q "^Baseline perplexity:" "$T/v.out" && [ ! -s "$T/v.err" ] &&
    pass "--validate --quiet: the report on stdout, nothing on stderr (no progress)" ||
    fail "--validate --quiet" "exit $rc, stdout $(head -c 200 "$T/v.out"), stderr $(head -c 200 "$T/v.err")"

# --- calibrate: one window and one fit in the singular; random weights titled as such
./run calibrate $S --fit nuq2-g8 --tokens 64 --ctx 64 --quiet --out "$T/c.st" >"$T/c.out" 2>"$T/c.err"
grep -q "^calibration: $T/c.st (64 tokens of .* in 1 window of 64; 1 fit)$" "$T/c.out" &&
    pass "calibrate: 1 window, 1 fit (singular)" || fail "calibrate: singular" "$(head -c 300 "$T/c.out") $(head -c 300 "$T/c.err")"
./run calibrate --random $M/config.json --tokens 64 --ctx 64 --quiet --out "$T/r.st" >"$T/r.out" 2>"$T/r.err"
grep -q ">random weights of $M/config.json&apos;s shape: 64 calibration tokens of " "$T/r.st.svg" &&
    pass "calibrate --random: the heatmap's title says random weights of that shape" ||
    fail "calibrate --random: heatmap title" "$(grep -o '<text[^>]*font-weight="bold"[^<]*<' "$T/r.st.svg" | head -2) $(head -c 300 "$T/r.err")"

# --- a sweep's results.md: the windows asked for beside those the text holds (as ppl's report)
./run sweep $S --ctx 64 --stride 64 --max-tokens 640 --windows 2 --config int8-g8 --out-dir "$T/sw" --quiet >/dev/null 2>"$T/sw.err"
grep -q ", 2 of 2 windows (--windows 2; the text has 10), " "$T/sw/results.md" &&
    pass "sweep --windows 2: results.md says 2 of 2 windows and the text's 10" ||
    fail "sweep --windows 2: the text's windows" "$(head -c 400 "$T/sw/results.md") $(head -c 200 "$T/sw.err")"
./run sweep $S --ctx 64 --stride 64 --max-tokens 640 --config int8-g8 --out-dir "$T/swall" --quiet >/dev/null 2>&1
grep -q ", 10 of 10 windows, " "$T/swall/results.md" &&
    pass "sweep without --windows: results.md says 10 of 10 windows, nothing more" ||
    fail "sweep without --windows: windows" "$(head -c 400 "$T/swall/results.md")"
