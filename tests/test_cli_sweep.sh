#!/bin/sh
# tests/test_cli_sweep.sh: ./run sweep and sweep-merge end to end: the statistics equal ppl's
# for the same configuration and agree with the reference file; a killed sweep resumes to the
# same numbers, and so does a journal cut after any of its lines or torn inside any; shards
# merge to the single run's numbers; the chart passes tests/svg_check.h (and renders to a PNG
# where rsvg-convert is installed); a calibration fitted on the text measured is said to be NOT held
# out, by the run and by sweep-merge from what sweep.json recorded; bad input gets exit 2 and one line.
. tests/cli_helpers.sh
M=data/models/mini-llama-brown
REF=tests/fixtures/reference
# small windows: seconds per configuration
W="--ctx 128 --stride 64 --windows 6"
CONFIGS="$T/configs.txt"
cat >"$CONFIGS" <<'EOF'
# the configurations of this test: one K[:V] per line
int8-g64
int4-g64   # a comment after a configuration
int2-t32-asym+res16:int2-g32-asym+res16

q4_0+had
EOF

# --- a whole sweep, and each configuration's numbers against ppl's
expect_exit "sweep of 4 configurations runs" 0 ./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/full" --quiet
for f in results.md results.csv results.json chart.svg journal.jsonl sweep.json; do
    [ -s "$T/full/$f" ] || fail "sweep writes $f" "missing or empty"
done
./run ppl $M $W --k-scheme int2-t32-asym+res16 --v-scheme int2-g32-asym+res16 --json --quiet >"$T/ppl.json" 2>/dev/null
python3 - "$T/full/results.json" "$T/ppl.json" <<'PY' && pass "sweep = ppl --json for K int2-t32 / V int2-g32 (ppl, delta, KL mean/percentiles/max, top-1, p(correct): rel 1e-9)" || fail "sweep = ppl" "see above"
import json, sys
sweep = json.load(open(sys.argv[1]))
ppl = json.load(open(sys.argv[2]))
row = [c for c in sweep["configs"] if c["k_scheme"].startswith("int2-t32")][0]
worst = 0.0
for key in ["ppl", "baseline_ppl", "delta", "delta_percent", "delta_stderr", "kl_mean", "kl_stderr", "kl_median",
            "kl_p90", "kl_p99", "kl_p999", "kl_max", "top1_agreement", "dp_mean", "dp_rms", "ln_ppl_ratio"]:
    a, b = row[key], ppl[key]
    rel = abs(a - b) / max(abs(b), 1e-300)
    if not rel <= 1e-9:   # ppl adds tokens in one sum, the sweep window by window: rounding differs
        print("differs:", key, a, b)
        sys.exit(1)
sys.exit(0 if row["scored_tokens"] == ppl["scored_tokens"] else 1)
PY

# --- the statistics of one configuration against the independent reference (the reference
# protocol: HF ctx 1024 stride 512, 4 windows)
expect_exit "sweep with the reference protocol" 0 ./run sweep data/models/mini-llama-brown-outliers --ctx 1024 --stride 512 --windows 4 \
    --config int4-g64 --config 'int2-t32-asym+res128:int2-g32-asym+res128' --out-dir "$T/ref" --quiet
python3 - "$T/ref/results.json" "$REF/kv-schemes-mini-llama-brown-outliers.json" <<'PY' && pass "sweep statistics = kv-schemes-mini-llama-brown-outliers.json (ppl 1e-4 rel, KL 2% rel, top-1 0.2 points)" || fail "sweep vs reference" "see above"
import json, sys
sweep = json.load(open(sys.argv[1]))
ref = json.load(open(sys.argv[2]))
rows = ref["rows"]
def find(k, v):
    for r in rows:
        if r["k_scheme"] == k and r["v_scheme"] == v:
            return r
    return None
ok = 0
for c in sweep["configs"]:
    r = find(c["k_scheme"], c["v_scheme"])
    if r is None:
        print("no reference row for", c["k_scheme"], c["v_scheme"]); sys.exit(1)
    ppl_rel = abs(c["ppl"] - r["ppl"]) / r["ppl"]
    kl_ref = r["kl"]
    kl_ok = abs(c["kl_mean"] - kl_ref) <= max(0.02 * kl_ref, 2e-6)
    top1 = r["top1"]
    top_ok = abs(c["top1_agreement"] - top1) <= 0.002
    print("  %s / %s: ppl %.5f vs %.5f, KL %.6g vs %.6g, top-1 %.4f vs %.4f" % (c["k_scheme"], c["v_scheme"], c["ppl"], r["ppl"], c["kl_mean"], kl_ref, c["top1_agreement"], top1))
    if ppl_rel <= 1e-4 and kl_ok and top_ok:
        ok += 1
sys.exit(0 if ok == len(sweep["configs"]) else 1)
PY

# --- the chart: XML, svg_check, and a real renderer makes a PNG of it where one is installed
python3 -c "import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); sys.exit(0 if r.tag.endswith('svg') else 1)" "$T/full/chart.svg" \
    && pass "chart.svg parses as XML with an svg root" || fail "chart.svg XML" "$(head -c 300 "$T/full/chart.svg")"
check_svg "sweep chart.svg" "$T/full/chart.svg"

# --- killed mid-run, started again: the same numbers
./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/killed" --quiet >/dev/null 2>&1 &
pid=$!
i=0
while [ "$i" -lt 600 ] && [ "$(cat "$T/killed/journal.jsonl" 2>/dev/null | wc -l)" -lt 5 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
lines=$(wc -l <"$T/killed/journal.jsonl")
[ "$lines" -ge 5 ] && [ "$lines" -lt 24 ] && pass "a sweep killed mid-run leaves a journal of finished results ($lines of 24)" \
    || fail "kill mid-run" "$lines journal lines"
printf '{"window": 5, "config": 3, "k": "q4_0+ha' >>"$T/killed/journal.jsonl"   # a torn append
expect_exit "the killed sweep started again finishes" 0 ./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/killed" --quiet
cmp -s "$T/full/results.csv" "$T/killed/results.csv" && cmp -s "$T/full/results.md" "$T/killed/results.md" \
    && pass "killed, torn and resumed: results.csv and results.md identical to the uninterrupted run" \
    || fail "resume identical" "$(diff "$T/full/results.csv" "$T/killed/results.csv" | head -5)"
[ "$(wc -l <"$T/killed/journal.jsonl")" -eq 24 ] && pass "the resumed journal holds each (window, configuration) once" \
    || fail "resumed journal" "$(wc -l <"$T/killed/journal.jsonl") lines"
expect_exit "a finished sweep started again runs nothing and prints the same table" 0 ./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/killed" --quiet

# --- resumed from every cut of a finished journal: after each whole line, and torn inside each
# line. Cuts that end inside a window (a window's last configuration missing, or its first
# ones) are where a resume can go wrong without a kill ever landing there. A tiny sweep
# (stories260K, a small text, 3 windows x 3 configurations, one thread) keeps the 19 resumes
# to seconds. The resumed files must be the uninterrupted run's bytes; results.json but for its
# "seconds" (the records' compute time), and the journal the same records but for theirs.
S=data/models/stories260K
head -c 4000 data/wikitext-2-raw/wiki.test.raw >"$T/small.txt"
SW="--text-file $T/small.txt --ctx 32 --stride 16 --windows 3"
printf 'int8-g8\nint4-g8:int2-g8\nint2-g8-asym\n' >"$T/tiny.txt"
tiny_sweep() { OMP_NUM_THREADS=1 ./run sweep $S $SW --configs "$T/tiny.txt" --out-dir "$1" --quiet >/dev/null 2>"$T/err"; }
# (a record's crc32c covers its seconds: it differs with them; the resumed sweep has checked each)
no_seconds() { sed -e 's/, "seconds": [^,]*//' -e 's/, "crc32c": "[0-9a-f]*"//' -e '/^  "seconds": /d' "$1"; }
# same_results DIR: DIR's results and journal equal $T/tiny's (empty) or name what differs
same_results() {
    for f in results.csv results.md chart.svg; do cmp -s "$T/tiny/$f" "$1/$f" || { echo "$f differs"; return; }; done
    no_seconds "$T/tiny/results.json" >"$T/want.json"; no_seconds "$1/results.json" >"$T/got.json"
    cmp -s "$T/want.json" "$T/got.json" || { echo "results.json differs"; return; }
    no_seconds "$T/tiny/journal.jsonl" >"$T/want.jsonl"; no_seconds "$1/journal.jsonl" >"$T/got.jsonl"
    cmp -s "$T/want.jsonl" "$T/got.jsonl" || echo "journal.jsonl differs"
}
tiny_sweep "$T/tiny"
R=$(wc -l <"$T/tiny/journal.jsonl")
if [ "$R" -eq 9 ]; then
    whole_bad="" torn_bad=""
    k=0
    while [ "$k" -le "$R" ]; do
        for torn in 0 1; do
            [ "$torn" -eq 1 ] && [ "$k" -eq "$R" ] && continue   # no line after the last to tear
            d="$T/cut$k-$torn"
            mkdir "$d" && cp "$T/tiny/sweep.json" "$d/" && head -n "$k" "$T/tiny/journal.jsonl" >"$d/journal.jsonl"
            if [ "$torn" -eq 1 ]; then   # the first half of line k + 1, without its newline
                line=$(sed -n "$((k + 1))p" "$T/tiny/journal.jsonl")
                printf '%s' "$line" | head -c $((${#line} / 2)) >>"$d/journal.jsonl"
            fi
            tiny_sweep "$d"
            rc=$?
            why=$([ "$rc" -eq 0 ] && same_results "$d" || echo "exit $rc: $(head -c 200 "$T/err")")
            head -n "$k" "$T/tiny/journal.jsonl" >"$T/kept"
            [ -z "$why" ] && ! head -n "$k" "$d/journal.jsonl" | cmp -s "$T/kept" - && why="the $k lines kept were rewritten"
            if [ -n "$why" ]; then
                if [ "$torn" -eq 1 ]; then torn_bad="$torn_bad [$k lines + half: $why]"; else whole_bad="$whole_bad [$k lines: $why]"; fi
            fi
        done
        k=$((k + 1))
    done
    [ -z "$whole_bad" ] && pass "sweep resumed after each of 0..9 whole lines of a finished 3x3 journal: exit 0, results.csv/md/json, chart.svg and journal = the uninterrupted run's" \
        || fail "resume after whole lines" "$whole_bad"
    [ -z "$torn_bad" ] && pass "sweep resumed with each of the 9 lines torn in half after the lines before it: the torn line cut off, results = the uninterrupted run's" \
        || fail "resume after a torn line" "$torn_bad"
else
    fail "tiny sweep for the resume cuts" "$R journal lines, expected 9: $(cat "$T/err")"
fi

# --- other arguments on an existing journal
expect_exit "other arguments on an existing sweep directory: exit 2" 2 ./run sweep $M --ctx 128 --stride 32 --windows 6 --configs "$CONFIGS" --out-dir "$T/full"
grep -q 'sweep.json' "$T/err" && grep -q -- '(--stride: the directory holds a sweep of stride 64; this run asks for stride 32)' "$T/err" \
    && pass "the refusal names sweep.json, the differing flag and both values in words" || fail "refusal message" "$(cat "$T/err")"
# the setting of the issue: a sweep of 6 windows resumed without --windows (all of them), then other configurations
expect_exit "no --windows on a sweep of 6 windows: exit 2" 2 ./run sweep $M --ctx 128 --stride 64 --configs "$CONFIGS" --out-dir "$T/full"
grep -q -- '(--windows: the directory holds a sweep of 6 windows; this run asks for all windows)' "$T/err" \
    && pass "the refusal of another --windows says both in words (6 windows, all windows)" || fail "--windows refusal" "$(cat "$T/err")"
grep -v "^q4_0" "$CONFIGS" >"$T/fewer.txt"
expect_exit "fewer configurations on an existing sweep: exit 2" 2 ./run sweep $M $W --configs "$T/fewer.txt" --out-dir "$T/full"
grep -q '(the configurations: the directory holds a sweep of 4; this run asks for 3)' "$T/err" \
    && pass "the refusal of other configurations counts both" || fail "configurations refusal" "$(cat "$T/err")"
sed 's/^int4-g64 .*/int3-g64/' "$CONFIGS" >"$T/other.txt"
expect_exit "another configuration on an existing sweep: exit 2" 2 ./run sweep $M $W --configs "$T/other.txt" --out-dir "$T/full"
grep -q '(configuration 2: the directory holds a sweep of int4-g64; this run asks for int3-g64)' "$T/err" \
    && pass "the refusal of another configuration names it and both schemes" || fail "configuration refusal" "$(cat "$T/err")"

# --- shards
expect_exit "shard 0/2" 0 ./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/s0" --shard 0/2 --quiet
expect_exit "shard 1/2" 0 ./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/s1" --shard 1/2 --quiet
expect_exit "sweep-merge of the two shards" 0 ./run sweep-merge "$T/s1" "$T/s0" --out-dir "$T/merged"
cmp -s "$T/full/results.csv" "$T/merged/results.csv" && pass "2 shards merged: results.csv identical to the single run" \
    || fail "shards merged" "$(diff "$T/full/results.csv" "$T/merged/results.csv" | head -5)"
expect_exit "sweep-merge with a shard missing: exit 2" 2 ./run sweep-merge "$T/s0" --out-dir "$T/m1"
expect_exit "sweep-merge with a shard twice: exit 2" 2 ./run sweep-merge "$T/s0" "$T/s0" --out-dir "$T/m2"
expect_exit "sweep-merge of shards of different sweeps: exit 2" 2 ./run sweep-merge "$T/s0" "$T/full" --out-dir "$T/m3"
no_file "a refused merge writes no results" "$T/m3/results.csv"
# A shard whose journal lost its last record, and one whose record holds a count no integer can.
cp -r "$T/s1" "$T/s1cut" && sed -i '$d' "$T/s1cut/journal.jsonl"
expect_exit "sweep-merge with a shard's journal cut short: exit 2" 2 ./run sweep-merge "$T/s0" "$T/s1cut" --out-dir "$T/m4"
grep -q "s1cut/journal.jsonl" "$T/err" && grep -q "window 5, configuration 3 (q4_0+had" "$T/err" \
    && pass "the refusal names the unfinished shard's journal and its first result missing (window 5, configuration 3)" \
    || fail "cut journal message" "$(cat "$T/err")"
# (sealed again, so that the range check answers, not the line's CRC-32C)
cp -r "$T/s1" "$T/s1big" && sed -i '1s/"scored_tokens": [0-9]*/"scored_tokens": 1e300/' "$T/s1big/journal.jsonl" &&
    python3 tests/journal_seal.py "$T/s1big/journal.jsonl"
expect_exit "sweep-merge with a record's scored_tokens 1e300: exit 2" 2 ./run sweep-merge "$T/s0" "$T/s1big" --out-dir "$T/m5"
grep -q "token counts are missing or out of range" "$T/err" && pass "the 1e300 refusal is the range check's (the line resealed)" ||
    fail "1e300 refusal" "$(cat "$T/err")"
no_file "a merge refused for a record with scored_tokens 1e300 writes no results" "$T/m5/results.csv"

# --- bad input
expect_exit "sweep: unknown base in a configuration: exit 2" 2 ./run sweep $M $W --config int5-g64 --out-dir "$T/bad1"
grep -q "int5-g64" "$T/err" && pass "the message names the bad configuration" || fail "bad config message" "$(cat "$T/err")"
expect_exit "sweep: a scheme the model cannot hold: exit 2" 2 ./run sweep $M $W --config int4-g128 --out-dir "$T/bad2"
expect_exit "sweep: missing --configs file: exit 2" 2 ./run sweep $M $W --configs "$T/nope.txt" --out-dir "$T/bad3"
expect_exit "sweep: no configurations: exit 2" 2 ./run sweep $M $W --out-dir "$T/bad4"
expect_exit "sweep: no --out-dir: exit 2" 2 ./run sweep $M $W --config int4-g64
printf 'garbage\n' >"$T/full2.jsonl"
mkdir -p "$T/corrupt" && cp "$T/full/sweep.json" "$T/corrupt/" && printf 'not json\n' >"$T/corrupt/journal.jsonl"
expect_exit "sweep: a journal line that is not a record: exit 2" 2 ./run sweep $M $W --configs "$CONFIGS" --out-dir "$T/corrupt"

# --- ppl shards merge the new statistics exactly (the KL histogram adds up)
./run ppl $M $W --kv-scheme int4-g64 --json --quiet >"$T/whole.json" 2>/dev/null
./run ppl $M $W --kv-scheme int4-g64 --json --quiet --shard 0/2 >"$T/p0.json" 2>/dev/null
./run ppl $M $W --kv-scheme int4-g64 --json --quiet --shard 1/2 >"$T/p1.json" 2>/dev/null
./run ppl-merge "$T/p0.json" "$T/p1.json" --json >"$T/merged.json" 2>/dev/null
python3 - "$T/whole.json" "$T/merged.json" <<'PY' && pass "ppl-merge: KL median, p99, p99.9 and max equal the single run's" || fail "ppl-merge percentiles" "see above"
import json, sys
a, b = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
for k in ["kl_median", "kl_p99", "kl_p999", "kl_max"]:
    if a[k] != b[k]:
        print(k, a[k], b[k]); sys.exit(1)
PY

# --- held out or not: a sweep with a calibration fitted on the very text it measures says NOT held
# out (results.md's header, results.json and sweep.json false, results.csv's column, chart.svg's
# title); on another text held out (true, and the Markdown as before); sweep-merge says what the
# shards recorded when they started, even with another calibration at that path since; a sweep.json
# of before the record resumes (this run's calibration, the same by sha256, says it) and merges
# ("not recorded": null).
head -c 20000 data/wikitext-2-raw/wiki.valid.raw >"$T/own.txt"
OWN_SHA=$(sha256sum "$T/own.txt" | cut -c1-64)
CAL="$T/own-calib.safetensors"
HW="--ctx 64 --stride 32 --windows 2 --config nuq2-g64 --config int4-g64 --quiet --calib $CAL"
expect_exit "held out: calibrate on a 20 kB text (256 tokens, ctx 64)" 0 ./run calibrate $M --text-file "$T/own.txt" --tokens 256 --ctx 64 \
    --fit nuq2-g64 --out "$CAL" --quiet
# held_check NAME DIR WANT [sweep.json]: DIR's results say WANT (false, true or null: not recorded)
held_check() {
    python3 - "$2" "$3" "$OWN_SHA" "$4" <<'PY' && pass "$1" || fail "$1" "see above"
import csv, json, sys
d, want, sha, settings = sys.argv[1], {"false": False, "true": True, "null": None}[sys.argv[2]], sys.argv[3], sys.argv[4]
j = json.load(open(d + "/results.json"))
head = open(d + "/results.md").read().split("\n\n")[0]
rows = list(csv.DictReader(open(d + "/results.csv")))
chart = open(d + "/chart.svg").read()
bad = []
if j.get("calib_held_out", "absent") != want: bad.append("results.json calib_held_out %r" % j.get("calib_held_out", "absent"))
if j.get("calib_text_sha256") != (sha if want is not None else ""): bad.append("results.json calib_text_sha256 %r" % j.get("calib_text_sha256"))
said = {False: "fitted on this very text: NOT held out", None: "not recorded"}
for w, words in said.items():
    if (words in head) != (w is want): bad.append("results.md: %r %s" % (words, "missing" if w is want else "said"))
if want is True and "held out" in head: bad.append("results.md of a held-out sweep says 'held out'")
cells = {r["calib_held_out"] for r in rows}
if cells != {{False: "false", True: "true", None: ""}[want]}: bad.append("results.csv calib_held_out %r" % cells)
if ("calibration NOT held out" in chart) != (want is False): bad.append("chart.svg title")
if settings:
    s = json.load(open(d + "/sweep.json"))
    if s.get("calib_held_out", "absent") != want or s.get("calib_text_sha256") != sha: bad.append("sweep.json %r" % s.get("calib_held_out", "absent"))
if bad: print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}
expect_exit "held out: a sweep on the calibration's own text" 0 ./run sweep $M $HW --text-file "$T/own.txt" --out-dir "$T/own"
held_check "held out: a sweep on the calibration's own text says NOT held out (results.md, results.json and sweep.json false, csv, chart)" "$T/own" false settings
expect_exit "held out: the sweep on wiki.test" 0 ./run sweep $M $HW --text-file data/wikitext-2-raw/wiki.test.raw --out-dir "$T/held"
held_check "held out: the sweep on wiki.test says held out (json, csv true; results.md says nothing of it)" "$T/held" true settings
# a sweep.json of before the record (the two lines gone, sealed again), resumed
cp -r "$T/own" "$T/old" && sed -i '/"calib_held_out"\|"calib_text_sha256"/d' "$T/old/sweep.json" && python3 tests/journal_seal.py "$T/old/sweep.json"
cp "$T/old/sweep.json" "$T/old-sweep.json"
expect_exit "held out: a sweep.json without the record resumes" 0 ./run sweep $M $HW --text-file "$T/own.txt" --out-dir "$T/old"
held_check "held out: ... and says NOT held out from this run's calibration" "$T/old" false
cmp -s "$T/old/sweep.json" "$T/old-sweep.json" && pass "held out: ... leaving its sweep.json as it was" || fail "held out: ... leaving its sweep.json as it was" "rewritten"
# a sweep.json that recorded held out, resumed on the calibration's own text (edited, sealed again)
cp -r "$T/own" "$T/flip" && sed -i 's/"calib_held_out": false/"calib_held_out": true/' "$T/flip/sweep.json" && python3 tests/journal_seal.py "$T/flip/sweep.json"
expect_exit "held out: a sweep.json that recorded held out, resumed on the calibration's own text: exit 2" 2 ./run sweep $M $HW --text-file "$T/own.txt" --out-dir "$T/flip"
grep -q -- "(--text-file or --calib: the directory holds a sweep of a text the calibration was not fitted on; this run asks for the calibration's own text)" "$T/err" &&
    pass "held out: ... the refusal says both in words" || fail "held out: ... the refusal says both in words" "$(cat "$T/err")"
# shards; then another calibration at the same path before they are merged
expect_exit "held out: shard 0/2 on the calibration's own text" 0 ./run sweep $M $HW --text-file "$T/own.txt" --out-dir "$T/own0" --shard 0/2
expect_exit "held out: shard 1/2" 0 ./run sweep $M $HW --text-file "$T/own.txt" --out-dir "$T/own1" --shard 1/2
./run calibrate $M --text-file data/wikitext-2-raw/wiki.test.raw --tokens 256 --ctx 64 --fit nuq2-g64 --out "$CAL" --quiet >/dev/null 2>&1
expect_exit "held out: sweep-merge of the shards (another calibration at that path now)" 0 ./run sweep-merge "$T/own1" "$T/own0" --out-dir "$T/ownm"
held_check "held out: the merged results say NOT held out, as the shards recorded" "$T/ownm" false
for i in 0 1; do
    cp -r "$T/own$i" "$T/old$i" && sed -i '/"calib_held_out"\|"calib_text_sha256"/d' "$T/old$i/sweep.json" && python3 tests/journal_seal.py "$T/old$i/sweep.json"
done
expect_exit "held out: sweep-merge of shards without the record" 0 ./run sweep-merge "$T/old0" "$T/old1" --out-dir "$T/oldm"
held_check "held out: ... says it is not recorded (null, an empty csv cell)" "$T/oldm" null
expect_exit "held out: sweep-merge of one shard with the record and one without" 0 ./run sweep-merge "$T/old0" "$T/own1" --out-dir "$T/mixm"
held_check "held out: ... says what the one recorded (NOT held out)" "$T/mixm" false
cp -r "$T/own1" "$T/bad1" && sed -i 's/"calib_held_out": false/"calib_held_out": 0/' "$T/bad1/sweep.json" && python3 tests/journal_seal.py "$T/bad1/sweep.json"
expect_exit "held out: sweep-merge of a sweep.json whose calib_held_out is 0: exit 2" 2 ./run sweep-merge "$T/own0" "$T/bad1" --out-dir "$T/badm"
grep -q "bad1/sweep.json: \"calib_held_out\"" "$T/err" && pass "held out: ... naming the file and the member" || fail "held out: ... naming the file and the member" "$(cat "$T/err")"
