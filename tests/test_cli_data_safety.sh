#!/bin/sh
# tests/test_cli_data_safety.sh: commands that write results never lose what was there (issue 51):
# calibrate refuses an --out that is one of its inputs, and a calibrate that fails late leaves the
# previous calibration as it was; two sweeps started together on one directory: one runs, the other
# is refused at once naming the first one's pid, and the journal holds every record once; sweep,
# sensitivity, allocate --verify and calibrate are refused while another process holds their lock;
# sweep-merge refuses to write into another sweep's directory; a killed run's temps are cleaned by
# the next run on that output. On stories260K (its own tokenizer, seconds a run).
. tests/cli_helpers.sh
S=data/models/stories260K
M=data/models/mini-llama-brown

# --- calibrate --out naming one of its inputs: refused before any work, the input untouched
cp -r "$S" "$T/model"
cp "$S/model.safetensors" "$T/weights.orig"
head -c 20000 data/wikitext-2-raw/wiki.valid.raw >"$T/text.txt"
cp "$T/text.txt" "$T/text.orig"
CAL_ARGS="--tokens 256 --ctx 64 --fit nuq2-g8 --quiet"
expect_exit "safety: calibrate --out MODEL_DIR/model.safetensors is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/model/model.safetensors"
grep -q "which this run reads" "$T/err" && pass "safety: the refusal says --out is an input" || fail "safety: the refusal says --out is an input" "$(cat "$T/err")"
cmp -s "$T/model/model.safetensors" "$T/weights.orig" && pass "safety: the weights are untouched" || fail "safety: the weights are untouched" "model.safetensors changed"
expect_exit "safety: calibrate --out ./MODEL_DIR/../model/config.json (another spelling) is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/model/../model/config.json"
expect_exit "safety: calibrate --out equal to --text-file is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/text.txt"
ln -s "$T/text.txt" "$T/link.txt"
expect_exit "safety: calibrate --out a symlink to --text-file is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/link.txt"
cmp -s "$T/text.txt" "$T/text.orig" && pass "safety: the text is untouched" || fail "safety: the text is untouched" "text.txt changed"
cp "$T/text.txt" "$T/cal.svg"
expect_exit "safety: calibrate whose heatmap (--out.svg) is --text-file is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/cal.svg" $CAL_ARGS --out "$T/cal"
no_file "safety: that refusal writes no calibration" "$T/cal"

# --- a calibrate that fails late (its heatmap cannot be written) keeps the previous calibration
cp "$T/weights.orig" "$T/model/model.safetensors"   # whatever happened above, the rest starts from the real weights
expect_exit "safety: calibrate stories260K (256 tokens, nuq2-g8)" 0 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/kv.st"
cp "$T/kv.st" "$T/kv.orig"
cp "$T/kv.st.svg" "$T/kv.svg.orig"
# the heatmap's temp (OUT.svg.tmp.PID, PID the exec'd ./run's) made a directory: the write fails late
expect_exit "safety: calibrate whose heatmap temp cannot be created exits 2" 2 \
    sh -c 'mkdir "$1.svg.tmp.$$" && exec ./run calibrate "$2" --text-file "$3" --tokens 192 --ctx 64 --fit nuq2-g8 --quiet --out "$1"' \
    sh "$T/kv.st" "$T/model" "$T/text.txt"
cmp -s "$T/kv.st" "$T/kv.orig" && pass "safety: the failed calibrate left the previous calibration as it was" ||
    fail "safety: the failed calibrate left the previous calibration as it was" "kv.st changed"
cmp -s "$T/kv.st.svg" "$T/kv.svg.orig" && pass "safety: ... and the previous heatmap" || fail "safety: ... and the previous heatmap" "kv.st.svg changed"
rmdir "$T"/kv.st.svg.tmp.* 2>/dev/null
ls "$T"/kv.st.tmp.* >/dev/null 2>&1 && fail "safety: the failed calibrate leaves no temp" "$(ls "$T")" || pass "safety: the failed calibrate leaves no temp"
mkdir "$T/kv2.st.svg"
expect_exit "safety: calibrate whose --out.svg is a directory is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/kv2.st"
no_file "safety: ... before writing the calibration" "$T/kv2.st"

# --- a killed run's temps of this output are removed by the next run on it (a pid not running)
sh -c 'exit 0' & dead=$!
wait $dead
echo partial >"$T/kv.st.tmp.$dead"
echo partial >"$T/kv.st.svg.tmp.$dead"
echo theirs >"$T/kv.st.tmp.$$"   # this shell is running: its temp is not a stale one
expect_exit "safety: calibrate over a killed run's temps" 0 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/kv.st"
[ ! -e "$T/kv.st.tmp.$dead" ] && [ ! -e "$T/kv.st.svg.tmp.$dead" ] && pass "safety: calibrate removes a dead run's temps of its output" ||
    fail "safety: calibrate removes a dead run's temps of its output" "$(ls "$T")"
[ -e "$T/kv.st.tmp.$$" ] && pass "safety: ... and keeps a running process's" || fail "safety: ... and keeps a running process's" "removed"
[ ! -e "$T/kv.st.lock" ] && pass "safety: calibrate leaves no lock file" || fail "safety: calibrate leaves no lock file" "kv.st.lock there"

# --- two sweeps started together on one directory
W="--ctx 64 --stride 32 --windows 6"
printf 'int4-g8\nint2-g8\n' >"$T/configs.txt"
./run sweep "$S" $W --configs "$T/configs.txt" --out-dir "$T/both" --quiet >"$T/a.out" 2>"$T/a.err" & a=$!
./run sweep "$S" $W --configs "$T/configs.txt" --out-dir "$T/both" --quiet >"$T/b.out" 2>"$T/b.err" & b=$!
wait $a; ra=$?
wait $b; rb=$?
if [ "$ra" -eq 0 ] && [ "$rb" -eq 2 ]; then loser=b; winner=$a
elif [ "$ra" -eq 2 ] && [ "$rb" -eq 0 ]; then loser=a; winner=$b
else loser=; fi
[ -n "$loser" ] && pass "safety: two sweeps started together: one runs (exit 0), the other is refused (exit 2)" ||
    fail "safety: two sweeps started together: one runs (exit 0), the other is refused (exit 2)" "exits $ra and $rb: $(cat "$T/a.err" "$T/b.err")"
[ -n "$loser" ] && [ "$(grep -c . "$T/$loser.err")" -eq 1 ] && grep -q "sweep.lock: in use by another ./run (pid $winner)" "$T/$loser.err" &&
    pass "safety: the refused sweep names the running one's pid in one line" ||
    fail "safety: the refused sweep names the running one's pid in one line" "$(cat "$T/a.err" "$T/b.err")"
[ "$(grep -c . "$T/both/journal.jsonl")" -eq 12 ] && pass "safety: the journal holds each of the 6 x 2 records once" ||
    fail "safety: the journal holds each of the 6 x 2 records once" "$(grep -c . "$T/both/journal.jsonl") lines"
expect_exit "safety: the sweep resumes afterwards (nothing to run)" 0 ./run sweep "$S" $W --configs "$T/configs.txt" --out-dir "$T/both" --quiet
[ "$(grep -c . "$T/both/journal.jsonl")" -eq 12 ] && pass "safety: ... adding no record" || fail "safety: ... adding no record" "journal grew"
[ ! -e "$T/both/sweep.lock" ] && pass "safety: a finished sweep leaves no lock file" || fail "safety: a finished sweep leaves no lock file" "sweep.lock there"

# --- a lock held by another process (python's fcntl lock, the kind ./run takes) refuses each command
hold() {   # hold LOCKFILE: a background process holding it; $holder its pid once it holds it
    rm -f "$T/held"
    python3 -c 'import fcntl, os, sys, time
f = open(sys.argv[1], "a"); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB); open(sys.argv[2], "w").close(); time.sleep(60)' "$1" "$T/held" &
    holder=$!
    i=0; while [ ! -e "$T/held" ] && [ $i -lt 150 ]; do sleep 0.2; i=$((i + 1)); done   # up to 30 s on a loaded machine
}
release() { kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null; }
hold "$T/both/sweep.lock"
expect_exit "safety: sweep into a directory another process holds is refused" 2 ./run sweep "$S" $W --configs "$T/configs.txt" --out-dir "$T/both" --quiet
grep -q "in use by another ./run (pid $holder)" "$T/err" && pass "safety: ... naming its pid" || fail "safety: ... naming its pid" "$(cat "$T/err")"
release
mkdir "$T/sens"
hold "$T/sens/sweep.lock"
expect_exit "safety: sensitivity into a directory another process holds is refused" 2 \
    ./run sensitivity "$S" --candidates int4-g8,int2-g8 $W --out-dir "$T/sens" --quiet
grep -q "sens/sweep.lock: in use by another ./run (pid $holder)" "$T/err" && pass "safety: sensitivity's refusal names the pid" || fail "safety: sensitivity's refusal names the pid" "$(cat "$T/err")"
release
expect_exit "safety: sensitivity of stories260K (2 candidates)" 0 ./run sensitivity "$S" --candidates int4-g8,int2-g8 $W --out-dir "$T/sens" --quiet
mkdir "$T/verify"
hold "$T/verify/sweep.lock"
expect_exit "safety: allocate --verify into a directory another process holds is refused" 2 \
    ./run allocate "$S" --from "$T/sens" --budget 5 --verify --windows 1 --out-dir "$T/verify" --quiet
grep -q "verify/sweep.lock: in use by another ./run (pid $holder)" "$T/err" && pass "safety: allocate --verify's refusal names the pid" || fail "safety: allocate --verify's refusal names the pid" "$(cat "$T/err")"
release
hold "$T/kv.st.lock"
expect_exit "safety: calibrate into an --out another process holds is refused" 2 \
    ./run calibrate "$T/model" --text-file "$T/text.txt" $CAL_ARGS --out "$T/kv.st"
grep -q "kv.st.lock: in use by another ./run (pid $holder)" "$T/err" && pass "safety: calibrate's refusal names the pid" || fail "safety: calibrate's refusal names the pid" "$(cat "$T/err")"
release

# --- sweep-merge into another sweep's directory: refused, its results kept
./run sweep "$S" $W --configs "$T/configs.txt" --shard 0/2 --out-dir "$T/s0" --quiet >/dev/null 2>&1
./run sweep "$S" $W --configs "$T/configs.txt" --shard 1/2 --out-dir "$T/s1" --quiet >/dev/null 2>&1
cp "$T/both/results.json" "$T/both.results.orig"
expect_exit "safety: sweep-merge --out-dir another sweep's directory is refused" 2 ./run sweep-merge "$T/s0" "$T/s1" --out-dir "$T/both"
grep -q "both/sweep.json" "$T/err" && pass "safety: ... naming its sweep.json" || fail "safety: ... naming its sweep.json" "$(cat "$T/err")"
cmp -s "$T/both/results.json" "$T/both.results.orig" && pass "safety: ... whose results stay" || fail "safety: ... whose results stay" "results.json changed"
expect_exit "safety: sweep-merge --out-dir one of its own shards is refused" 2 ./run sweep-merge "$T/s0" "$T/s1" --out-dir "$T/s0"
expect_exit "safety: sweep-merge into a new directory" 0 ./run sweep-merge "$T/s0" "$T/s1" --out-dir "$T/merged"
expect_exit "safety: sweep-merge again into its own merged directory (no sweep.json there)" 0 ./run sweep-merge "$T/s0" "$T/s1" --out-dir "$T/merged"

# --- allocate reads only what it can verify: sensitivity.json's CRC-32C, each cell's KL in range and
# equal to its own kl_sum / scored_tokens; the committed files (version 1, no checksum) still read
edit_sens() {   # edit_sens SRC DST WHAT: a copy of SRC/sensitivity.json with one thing changed
    mkdir -p "$2"
    python3 - "$1/sensitivity.json" "$2/sensitivity.json" "$3" <<'PY'
import re, sys
src, dst, what = sys.argv[1:4]
t = open(src).read()
first = re.search(r'"kl_mean": ([0-9.e+-]+)', t)
if what == "negative":
    t = t[:first.start(1)] + "-1" + t[first.end(1):]
elif what == "huge":
    t = re.sub(r'"kl_mean": [0-9.e+-]+', '"kl_mean": 1e308', t)
elif what == "digit":   # the first significant digit after the leading zeros, made another
    v = first.group(1)
    i = next(k for k, ch in enumerate(v) if ch in "123456789")
    v = v[:i] + ("1" if v[i] != "1" else "2") + v[i + 1:]
    t = t[:first.start(1)] + v + t[first.end(1):]
elif what == "scheme":
    t = re.sub(r'"spec": "[^"]*"', '"spec": "intruet4-g64"', t, count=1)
elif what == "crc-stripped":
    t = re.sub(r',\n  "crc32c": "[0-9a-f]{8}"\n}\n$', '\n}\n', t)
open(dst, "w").write(t)
PY
}
for what in negative huge digit scheme crc-stripped; do
    edit_sens "$T/sens" "$T/sens-$what" $what
    expect_exit "safety: allocate refuses a sensitivity.json edited ($what)" 2 ./run allocate "$S" --from "$T/sens-$what" --budget 5
    grep -q "sens-$what/sensitivity.json: " "$T/err" && pass "safety: ... ($what) naming the file" || fail "safety: ... ($what) naming the file" "$(cat "$T/err")"
done
grep -q '"crc32c": "[0-9a-f]\{8\}"$' "$T/sens/sensitivity.json" && grep -q '"kvq_sensitivity": 3' "$T/sens/sensitivity.json" &&
    pass "safety: sensitivity.json (version 3) ends in its CRC-32C" || fail "safety: sensitivity.json (version 3) ends in its CRC-32C" "$(tail -3 "$T/sens/sensitivity.json")"
expect_exit "safety: allocate reads an intact sensitivity.json" 0 ./run allocate "$S" --from "$T/sens" --budget 5
# A version-1 file, as written before the checksum: a version-2 one (tests/fixtures/sensitivity-v2, once
# data/sensitivity/mini-llama-brown's, one list of candidates for both sides) without its CRC line.
B="$T/v1"
V2=tests/fixtures/sensitivity-v2
mkdir -p "$B"
python3 - $V2/sensitivity.json "$B/sensitivity.json" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
t = re.sub(r',\n  "crc32c": "[0-9a-f]{8}"\n}\n$', '\n}\n', t).replace('"kvq_sensitivity": 2', '"kvq_sensitivity": 1', 1)
open(sys.argv[2], "w").write(t)
PY
expect_exit "safety: allocate reads the committed sensitivity (version 3)" 0 ./run allocate $M --from data/sensitivity/mini-llama-brown --budget 3
expect_exit "safety: allocate still reads a version-2 sensitivity.json (one list for both sides)" 0 ./run allocate $M --from $V2 --budget 3
expect_exit "safety: allocate still reads a version-1 sensitivity.json (no checksum)" 0 ./run allocate $M --from $B --budget 3
for what in negative huge digit; do
    edit_sens "$B" "$T/v1-$what" $what
    expect_exit "safety: allocate refuses a version-1 sensitivity.json edited ($what), by its own sums" 2 ./run allocate $M --from "$T/v1-$what" --budget 3
done
edit_sens "$B" "$T/v1-scheme" scheme
expect_exit "safety: allocate refuses a sensitivity.json naming an unknown scheme" 2 ./run allocate $M --from "$T/v1-scheme" --budget 3
grep -q "v1-scheme/sensitivity.json: candidate 0: 'intruet4-g64'" "$T/err" && ! grep -q -- "--candidates" "$T/err" &&
    pass "safety: ... naming the file, not a flag never given" || fail "safety: ... naming the file, not a flag never given" "$(cat "$T/err")"

# --- allocate's capacity is floor(groups x denominator x budget): just under an allocation's bits,
# that allocation is out (stories260K: 10 groups of 4 or 6 bits; one 6-bit group is 4.2 bits)
./run allocate "$S" --from "$T/sens" --budget 4.19999,4.2 --json >"$T/under.json" 2>"$T/err"
python3 - "$T/under.json" <<'PY' && pass "safety: allocate at 4.19999 bits keeps 4 bits (one 6-bit group, 4.2, is over), at 4.2 takes it" || fail "safety: allocate's capacity rounds down" "see above"
import json, sys
a = json.load(open(sys.argv[1]))["allocations"]
bits = [x["bits"] for x in a]
print("bits", bits) if not (bits[0] == 4 and abs(bits[1] - 4.2) < 1e-12) else None
sys.exit(0 if bits[0] == 4 and abs(bits[1] - 4.2) < 1e-12 and all(x["bits"] <= x["budget"] for x in a) else 1)
PY

# --- ppl with a calibration fitted on the very text it measures says so (text and JSON); on another
# text it says nothing new (the bundled calibrations are fitted on wiki.valid)
PW="--ctx 128 --stride 64 --windows 1 --kv-scheme nuq2-g64 --quiet"
./run ppl $M $PW --text-file data/wikitext-2-raw/wiki.valid.raw >"$T/own.txt" 2>&1
./run ppl $M $PW --text-file data/wikitext-2-raw/wiki.valid.raw --json >"$T/own.json" 2>&1
grep -q "fitted on this very text: NOT held out" "$T/own.txt" && grep -q '"calib_held_out": false' "$T/own.json" &&
    pass "safety: ppl on the calibration's own text says NOT held out (text and JSON)" ||
    fail "safety: ppl on the calibration's own text says NOT held out (text and JSON)" "$(grep calib "$T/own.txt" "$T/own.json")"
./run ppl $M $PW --json >"$T/held.json" 2>&1
! grep -q "calib_held_out" "$T/held.json" && grep -q '"calib_sha256": "[0-9a-f]' "$T/held.json" &&
    pass "safety: ppl on wiki.test with the same calibration: held out, nothing added" ||
    fail "safety: ppl on wiki.test with the same calibration: held out, nothing added" "$(grep calib "$T/held.json")"
