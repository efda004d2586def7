#!/bin/sh
# tests/test_cli_integrity.sh: never mix or lose a result (issue 43), through ./run. First the
# three cases that gave wrong results with exit 0 before (each fails on a ./run built before the
# issue): compress onto its own input by another path; a sweep resumed after the model's
# weights were replaced at the same path; a journal of another model's sweep adopted after its
# sweep.json was deleted. Then identity by content (a model copied elsewhere is the same model:
# a sweep resumes and ppl shards merge; another model's shards and sweeps are refused), a
# sweep.json without model_id, truncated or failing its CRC-32C, a journal record edited, a
# compressed file with a byte changed, the same-file checks by device and inode, error messages
# that quote control bytes on one line, --configs line numbers, --stride's default and an
# evaluation of one scored token. Every refusal: exit 2, one stderr line naming the file, and
# what was on disk left as it was (checked byte for byte). Run from the repo root after `make`.
. tests/cli_helpers.sh
M=data/models/mini-llama-brown
O=data/models/mini-llama-brown-outliers      # mini-llama-brown's shape, other weights
S=data/models/stories260K
KV=tests/fixtures/reference/kv-mini-llama.safetensors
RUN="$(pwd)/run"
[ -x ./run ] || { fail "cli integrity" "./run not built"; exit 1; }
head -c 4000 data/wikitext-2-raw/wiki.test.raw >"$T/small.txt"
W="--text-file $T/small.txt --ctx 64 --stride 32 --windows 2 --quiet"

# same_tree NAME A B: directories A and B hold the same files with the same bytes
same_tree() { if diff -r "$2" "$3" >/dev/null 2>&1; then pass "$1"; else fail "$1" "$(diff -r "$2" "$3" 2>&1 | head -c 300)"; fi; }
# names NAME WANT: the last command's one stderr line contains WANT
names() { if grep -qF -- "$2" "$T/err"; then pass "$1"; else fail "$1" "message does not name '$2': $(cat "$T/err")"; fi; }

# --- the three regressions of the issue's "Why"

# 1. compress onto its own input by another path: refused, the input untouched
cp $KV "$T/x.st" && cp $KV "$T/x.orig"
expect_exit "regression 1 (issue 43): compress -input x.st -output ./x.st is refused" 2 \
    sh -c "cd '$T' && '$RUN' compress -input x.st -output ./x.st"
cmp -s "$T/x.st" "$T/x.orig" && pass "regression 1 (issue 43): compress onto its own input leaves the input as it was" ||
    fail "regression 1 (issue 43): compress onto its own input leaves the input as it was" "x.st changed: $(wc -c <"$T/x.st") bytes"

# 2. a sweep resumed after the model directory's weights were replaced at the same path
cp -r $M "$T/model"
./run sweep "$T/model" $W --config int4-g64 --config int2-g64 --out-dir "$T/r2" >/dev/null 2>&1
sed -i '$d' "$T/r2/journal.jsonl" && rm -f "$T/r2"/results.* "$T/r2/chart.svg"   # an interrupted sweep
cp -r "$T/r2" "$T/r2.before"
cp $O/model.safetensors "$T/model/model.safetensors"
expect_exit "regression 2 (issue 43): a sweep resumed after the weights were replaced at the same path is refused" 2 \
    ./run sweep "$T/model" $W --config int4-g64 --config int2-g64 --out-dir "$T/r2"
names "regression 2 (issue 43): the refusal names sweep.json and another model" "r2/sweep.json: a sweep of another model"
same_tree "regression 2 (issue 43): the refused resume leaves the sweep directory as it was" "$T/r2" "$T/r2.before"

# 3. a journal of another model's sweep, its sweep.json deleted, then a sweep of this model
./run sweep $O $W --config int4-g64 --out-dir "$T/r3" >/dev/null 2>&1
rm -f "$T/r3/sweep.json" "$T/r3"/results.* "$T/r3/chart.svg"
cp -r "$T/r3" "$T/r3.before"
expect_exit "regression 3 (issue 43): a journal without its sweep.json is refused, not adopted" 2 \
    ./run sweep $M $W --config int4-g64 --out-dir "$T/r3"
names "regression 3 (issue 43): the refusal names the journal" "r3/journal.jsonl: a journal without its sweep.json"
same_tree "regression 3 (issue 43): the refused sweep writes no sweep.json and leaves the journal as it was" "$T/r3" "$T/r3.before"

# --- identity by content, not by path
cp -r $M "$T/copy"
./run sweep $M $W --config int4-g64 --config int2-g64 --out-dir "$T/c1" >/dev/null 2>&1
sed -i '$d' "$T/c1/journal.jsonl"
expect_exit "sweep: resumed with the same model under another path" 0 \
    ./run sweep "$T/copy" $W --config int4-g64 --config int2-g64 --out-dir "$T/c1"
./run sweep $M $W --config int4-g64 --config int2-g64 --out-dir "$T/c2" >/dev/null 2>&1
cmp -s "$T/c1/results.csv" "$T/c2/results.csv" && pass "sweep: resumed from the copy, results.csv equals the uninterrupted run's" ||
    fail "sweep: resumed from the copy" "$(diff "$T/c1/results.csv" "$T/c2/results.csv" | head -3)"
grep -q '"model_id": "c6cacc6f0f3a8ed8cfc4b701219bdd048972c772a4a2465a6458c6a1f4cd4566"' "$T/c2/sweep.json" &&
    pass "sweep.json records mini-llama-brown's model_id (tests/test_model_identity.c's, from hashlib)" ||
    fail "sweep.json model_id" "$(grep model_id "$T/c2/sweep.json")"
./run sweep $M $W --config int4-g64 --shard 0/2 --out-dir "$T/m0" >/dev/null 2>&1
./run sweep $O $W --config int4-g64 --shard 1/2 --out-dir "$T/m1" >/dev/null 2>&1
expect_exit "sweep-merge: shards of two models (the same settings otherwise) are refused" 2 \
    ./run sweep-merge "$T/m0" "$T/m1" --out-dir "$T/mm"
no_file "sweep-merge: refused shards of two models write no results" "$T/mm/results.csv"
./run ppl $M $W --kv-scheme int4-g64 --json --shard 0/2 >"$T/p0.json" 2>/dev/null
./run ppl "$T/copy" $W --kv-scheme int4-g64 --json --shard 1/2 >"$T/p1.json" 2>/dev/null
./run ppl $O $W --kv-scheme int4-g64 --json --shard 1/2 >"$T/o1.json" 2>/dev/null
expect_exit "ppl-merge: shards of one model run from two paths merge" 0 ./run ppl-merge "$T/p0.json" "$T/p1.json"
expect_exit "ppl-merge: a shard of another model is refused" 2 ./run ppl-merge "$T/p0.json" "$T/o1.json"
names "ppl-merge: the refusal names the other model's shard" "o1.json: a shard of another model"
sed '/"model_id"/d' "$T/p1.json" >"$T/noid.json"
expect_exit "ppl-merge: a shard without model_id is refused" 2 ./run ppl-merge "$T/p0.json" "$T/noid.json"
names "ppl-merge: the refusal names the shard without model_id" "noid.json: no model_id"

# --- sweep.json and the journal: refused, never adopted, the directory left as it was
# refused_resume NAME DIR WANT: a resume of DIR (the c2 sweep's arguments) exits 2 naming WANT, DIR unchanged
refused_resume() {
    cp -r "$2" "$2.before"
    expect_exit "$1" 2 ./run sweep $M $W --config int4-g64 --config int2-g64 --out-dir "$2"
    names "$1: the message" "$3"
    same_tree "$1: the directory left as it was" "$2" "$2.before"
}
cp -r "$T/c2" "$T/noid" && sed -i '/"model_id"/d' "$T/noid/sweep.json" && python3 tests/journal_seal.py "$T/noid/sweep.json"
refused_resume "sweep: a sweep.json without model_id is refused" "$T/noid" "noid/sweep.json: no model_id"
cp -r "$T/c2" "$T/trunc" && head -c 200 "$T/c2/sweep.json" >"$T/trunc/sweep.json"
refused_resume "sweep: a truncated sweep.json says it is truncated" "$T/trunc" "trunc/sweep.json: truncated"
cp -r "$T/c2" "$T/bits" && sed -i 's/"k_bits": \[4.25, /"k_bits": [4.5, /' "$T/bits/sweep.json"
expect_exit "sweep-merge: a sweep.json edited (k_bits) is refused by its CRC-32C" 2 ./run sweep-merge "$T/bits" --out-dir "$T/bm"
names "sweep-merge: the edited sweep.json named" "bits/sweep.json: fails its CRC-32C"
cp -r "$T/c2" "$T/nll" && sed -i '2s/"nll_sum": [0-9.]*/"nll_sum": 1.5/' "$T/nll/journal.jsonl"
refused_resume "sweep: a journal record with an edited nll_sum is refused" "$T/nll" "nll/journal.jsonl: line 2 fails its CRC-32C"
expect_exit "sweep-merge: a journal record with an edited nll_sum is refused" 2 ./run sweep-merge "$T/nll" --out-dir "$T/nm"
no_file "sweep-merge: the refused edit writes no results" "$T/nm/results.csv"
# what kvq wrote before issue 43: no model_id, no crc32c
cp -r "$T/c2" "$T/old" && sed -e '/"model_id"/d' -e '/"crc32c"/d' -e 's/^  \],$/  ]/' "$T/c2/sweep.json" >"$T/old/sweep.json"
refused_resume "sweep: a sweep.json of an older kvq (no crc32c, no model_id) is refused" "$T/old" "old/sweep.json: no crc32c"

# --- compressed files: checksums, identity, same-file checks
./run kv-extract $M -i "Robert Boulter is an English film actor ." -o "$T/kv.st" 2>/dev/null
./run compress -input "$T/kv.st" -output "$T/c.st" --kv-scheme int4-g64 >/dev/null 2>&1
cp "$T/c.st" "$T/resealed.st" && python3 tests/compressed_seal.py "$T/resealed.st"
cmp -s "$T/c.st" "$T/resealed.st" && pass "compressed: tests/compressed_seal.py's checksums of a kvq file are kvq's, byte for byte" ||
    fail "compressed: compressed_seal.py" "the resealed file differs"
python3 - "$T/c.st" "$T/flipped.st" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[-40] ^= 0x04                      # a data byte of the last tensor
open(sys.argv[2], "wb").write(bytes(b))
PY
expect_exit "decompress: a compressed file with one data bit flipped is refused" 2 ./run decompress -input "$T/flipped.st" -output "$T/f.st"
names "decompress: the flipped file's refusal names its tensor" "tensor 'layer_3_value.packed' fails its CRC-32C"
no_file "decompress: the refused flip writes no output" "$T/f.st"
expect_exit "kv-info: the flipped compressed file is refused too" 2 ./run kv-info "$T/flipped.st"
./run decompress -input "$T/c.st" -output "$T/d.st" 2>/dev/null
grep -q '"model_id": "c6cacc6f' "$T/d.st.metadata.json" &&
    pass "kv-extract records model_id; compress and decompress carry it" || fail "model_id carried" "$(cat "$T/d.st.metadata.json")"
expect_exit "kv-info --model of another model counts model_id as a mismatch: exit 1" 1 ./run kv-info "$T/d.st" --model $O
grep -q "model_id: cache made by c6cacc6f0f3a" "$T/out" && pass "kv-info names both model ids" || fail "kv-info model_id" "$(cat "$T/out")"
CAL=tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors   # mini-llama-brown-outliers' calibration
expect_exit "compress --calib of another model than the cache's is refused" 2 \
    ./run compress -input "$T/kv.st" -output "$T/fit.st" --kv-scheme nuq3-g64 --calib $CAL
names "compress --calib of another model: both models named" "is of the model of sha256 36068468f272..., but the cache was made by 788084364210..."
no_file "compress --calib of another model writes nothing" "$T/fit.st"
cp "$T/c.st" "$T/c.orig"
expect_exit "decompress -input c.st -output ./c.st is refused" 2 sh -c "cd '$T' && '$RUN' decompress -input c.st -output ./c.st"
ln "$T/c.st" "$T/hard.st" && ln -s x.st "$T/x-link.st"
expect_exit "compress: -output a symlink to -input is refused" 2 ./run compress -input "$T/x.st" -output "$T/x-link.st"
expect_exit "decompress: -output a hard link of -input is refused" 2 ./run decompress -input "$T/c.st" -output "$T/hard.st"
cmp -s "$T/c.st" "$T/c.orig" && cmp -s "$T/x.st" "$T/x.orig" && pass "the refused same-file runs leave their inputs as they were" ||
    fail "same-file inputs" "an input changed"

# --- messages: one line whatever they quote
NL_ESC=$(printf 'int4\033[31m-g64\nx')
expect_exit "sweep: a --config with an ESC and a newline: exit 2, one line" 2 ./run sweep $M $W --config "$NL_ESC" --out-dir "$T/e1"
if grep -q "$(printf '\033')" "$T/err"; then fail "the ESC is shown escaped" "a raw ESC byte on stderr"
else names "the ESC is shown escaped" 'int4\x1B[31m-g64\nx'; fi
expect_exit "ppl: a model path with a newline: exit 2, one line" 2 ./run ppl "$(printf 'no\nsuch')" $W
printf 'int4-g64\n\n# a comment\nint5-g64   # line 4\n' >"$T/configs.txt"
expect_exit "sweep: a bad --configs line: exit 2" 2 ./run sweep $M $W --configs "$T/configs.txt" --out-dir "$T/e2"
names "sweep: the bad --configs line is named by file and number" "configs.txt line 4: KV scheme 'int5-g64'"

# --- --stride's default and one scored token
expect_exit "ppl --ctx 128 without --stride runs (stride min(512, ctx))" 0 ./run ppl $M --text-file "$T/small.txt" --ctx 128 --windows 1 --quiet
grep -q "ctx 128, stride 128" "$T/out" && pass "ppl --ctx 128 reports stride 128" || fail "stride default" "$(grep protocol "$T/out")"
expect_exit "ppl of one scored token" 0 ./run ppl $S --text-file "$T/small.txt" --ctx 32 --max-tokens 2 --kv-scheme int4-g8 --quiet
if grep -qi "nan" "$T/out"; then fail "one scored token: no nan in the report" "$(grep -i nan "$T/out")"
else pass "one scored token: no nan in the report"; fi
grep -q "+/- undefined" "$T/out" && pass "one scored token: the report says the standard errors are 'undefined'" ||
    fail "one scored token: undefined" "$(cat "$T/out")"
./run ppl $S --text-file "$T/small.txt" --ctx 32 --max-tokens 2 --kv-scheme int4-g8 --quiet --json >"$T/one.json" 2>/dev/null
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d['nll_stderr'] is None and d['delta_stderr'] is None and d['top1_stderr'] is None else 1)" "$T/one.json" &&
    pass "one scored token: --json's standard errors are null" || fail "one scored token JSON" "$(grep stderr "$T/one.json")"
