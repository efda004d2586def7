#!/bin/sh
# tests/test_cli_calib.sh: calibrations through ./run (SCHEMES.md §8; issue 40's --calib): every
# refusal exits 2 with ONE stderr line naming the cause (and the file), leaves no output or temp
# file behind and no sanitizer report — a fitted base without a calibration (naming the
# `./run calibrate ... --fit KEY` that makes it), another model's calibration on each command
# that takes a scheme, a missing fit, truncated and malformed files (built here with python3
# from the reference calibration), a resumed sweep with another calibration, compressed files
# of fitted bases (compress / decompress / kv-info), calibrate's bad flags; and the accepted
# paths they guard: the default MODEL_DIR/kv-calib.safetensors, --validate --calib's report,
# compress -> decompress / kv-info with the same file. Run from the repo root after `make`.
. tests/cli_helpers.sh
REF=tests/fixtures/reference
CAL=$REF/kv-calib-mini-llama-brown-outliers.safetensors   # made for mini-llama-brown-outliers
M=data/models/mini-llama-brown
O=data/models/mini-llama-brown-outliers
KV=$REF/kv-mini-llama.safetensors                           # 4 layers, 2 KV heads, head_dim 64
# ppl's window: one short window of a small text (a refusal comes before any of it runs)
W="--text-file $M/config.json --ctx 64 --stride 64 --windows 1 --quiet"
[ -x ./run ] || { fail "cli calib" "./run not built"; exit 1; }

# refused NAME WANT CMD...: exit 2, one stderr line containing WANT, no crash or sanitizer report.
refused() {
    name=$1 want=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -ge 128 ]; then fail "$name" "crashed (exit $rc): $(head -c 300 "$T/err")"
    elif grep -q 'Sanitizer\|runtime error:' "$T/err"; then fail "$name" "sanitizer report: $(grep -m1 'Sanitizer\|runtime error:' "$T/err")"
    elif [ "$rc" -ne 2 ]; then fail "$name" "exit $rc, expected 2: $(head -c 300 "$T/err")"
    elif [ "$(wc -l <"$T/err" | tr -d ' ')" -ne 1 ]; then fail "$name" "expected one line on stderr, got: $(head -c 600 "$T/err")"
    elif ! grep -qF -- "$want" "$T/err"; then fail "$name" "message does not name '$want': $(cat "$T/err")"
    else pass "$name"
    fi
}

# ok NAME CMD...: exit 0 and no sanitizer report.
ok() {
    name=$1
    shift
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    if [ "$rc" -ne 0 ] || grep -q 'Sanitizer\|runtime error:' "$T/err"; then fail "$name" "exit $rc: $(head -c 300 "$T/err")"
    else pass "$name"
    fi
}

# --- broken calibrations, from the reference file (python3, standard library only)
# broken WHAT OUT: the reference calibration with one thing wrong, the rest as it was.
broken() {
    python3 - "$CAL" "$2" "$1" <<'PY'
import json, struct, sys
src, dst, what = sys.argv[1:4]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
data = bytearray(b[8 + n:])
def floats(name):
    lo, hi = h[name]["data_offsets"]
    return lo, list(struct.unpack("<%df" % ((hi - lo) // 4), data[lo:hi]))
def put(name, values):
    lo, _ = floats(name)
    data[lo:lo + 4 * len(values)] = struct.pack("<%df" % len(values), *values)
if what == "nan":                      # a NaN in a nuq table
    _, t = floats("fit.nuq3-g64.k.2"); t[3] = float("nan"); put("fit.nuq3-g64.k.2", t)
elif what == "inf":                    # +inf in a vq codebook
    _, t = floats("fit.vq8-d4.v.1"); t[100] = float("inf"); put("fit.vq8-d4.v.1", t)
elif what == "unsorted":               # a nuq table out of order
    _, t = floats("fit.nuq2-g64.v.0"); t[0], t[3] = t[3], t[0]; put("fit.nuq2-g64.v.0", t)
elif what == "shape":                  # [8] declared as [2, 4]: same bytes, wrong shape
    h["fit.nuq3-g64.k.1"]["shape"] = [2, 4]
elif what == "vqshape":                # a vq codebook with its heads and sub-vectors swapped
    s = h["fit.vq8-d4.k.0"]["shape"]; s[0], s[1] = s[1], s[0]
elif what == "missing-layer":          # a fit missing one layer's values
    del h["fit.nuq2-t64.v.3"]; del h["__metadata__"]["crc32c.fit.nuq2-t64.v.3"]
elif what == "other":                  # valid, but another file (another sha256): a note in the metadata
    h["__metadata__"]["note"] = "another calibration"
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + bytes(data))
PY
    python3 tests/compressed_seal.py "$2"   # its CRC-32Cs again: the check of what was broken answers, not theirs
}
for what in nan inf unsorted shape vqshape missing-layer other; do broken $what "$T/$what.st"; done
head -c 100000 $CAL >"$T/trunc.st"
head -c 6 $CAL >"$T/tiny.st"
printf 'this is not a safetensors file\n' >"$T/text.st"
cp $KV "$T/kv.st"   # a KV cache file whose name has no other use

# --- a fitted base without a calibration; a missing fit (both print the calibrate command)
# The bundled models ship a default kv-calib.safetensors: B is the outlier model without one.
B="$T/bare"
mkdir -p "$B"
for f in config.json model.safetensors tokenizer.bin; do ln -s "$PWD/$O/$f" "$B/$f"; done
refused "calib: ppl nuq3-g64 without a calibration names the calibrate command, the model and the default path" \
    "needs a calibration, and $B has none (./run calibrate $B --fit nuq3-g64 --out $B/kv-calib.safetensors makes it; or --calib FILE)" \
    ./run ppl $B $W --kv-scheme nuq3-g64
refused "calib: ppl --k-scheme vq8-d8+had without a calibration names its fit key" \
    "--fit vq8-d8+had --out $B/kv-calib.safetensors makes it" ./run ppl $B $W --k-scheme vq8-d8+had+res16 --v-scheme fp16
refused "calib: generate a fitted layer item without a calibration" "--fit nuq2-t64 --out $B/kv-calib.safetensors" \
    ./run generate $B -n 4 -s 1 --kv-scheme "int4-g64;2:nuq2-t64"
refused "calib: ppl a fit the bundled calibration lacks names it and the calibrate command" \
    "$O/kv-calib.safetensors has no fit vq12-d8 (./run calibrate $O --fit vq12-d8 --out $O/kv-calib-vq12-d8.safetensors makes it; then --calib that file)" \
    ./run ppl $O $W --kv-scheme vq12-d8
ok "calib: ppl nuq3-g64 on a bundled model reads its kv-calib.safetensors" ./run ppl $O $W --kv-scheme nuq3-g64
grep -q "calib: *$O/kv-calib.safetensors" "$T/out" && pass "calib: ppl's report names the bundled calibration" ||
    fail "calib: ppl's report names the bundled calibration" "$(head -c 400 "$T/out")"
refused "calib: ppl a fit the file lacks prints the calibrate command" \
    "$CAL has no fit nuq4-g64 (./run calibrate $O --fit nuq4-g64 --out $O/kv-calib-nuq4-g64.safetensors makes it; then --calib that file)" \
    ./run ppl $O $W --kv-scheme nuq4-g64 --calib $CAL
refused "calib: ppl vq8-d8 (the file has vq8-d8+had only) is a missing fit" "has no fit vq8-d8 (" \
    ./run ppl $O $W --kv-scheme vq8-d8 --calib $CAL

# --- another model's calibration, on every command that takes a scheme and a model
other="calibration of another model (model_sha256 36068468"
refused "calib: ppl --calib of another model" "$CAL: $other" ./run ppl $M $W --kv-scheme nuq3-g64 --calib $CAL
refused "calib: generate --calib of another model" "$CAL: $other" ./run generate $M -n 4 -s 1 --kv-scheme nuq3-g64 --calib $CAL
refused "calib: logits --calib of another model" "$CAL: $other" ./run logits $M --tokens 1,2,3 --kv-scheme nuq3-g64 --calib $CAL --out "$T/logits.f32"
no_file "calib: logits refused writes no logits file" "$T/logits.f32"
refused "calib: sweep --calib of another model" "$CAL: $other" ./run sweep $M $W --config nuq3-g64 --out-dir "$T/sweep-other" --calib $CAL
no_file "calib: sweep refused makes no --out-dir" "$T/sweep-other"
refused "calib: --validate --calib of another model" "$CAL: $other" \
    ./run --validate --model $M --kv-scheme nuq3-g64 --calib $CAL --windows 1 --ctx 64 --stride 64 --quiet
refused "calib: bench --calib of another model" "$CAL: $other" \
    ./run bench $M -p 8 -n 2 --ctx 0 --kv-scheme nuq3-g64 --calib $CAL --no-probe --quiet
refused "calib: --calib of another model is refused with an unfitted scheme too" "$CAL: $other" \
    ./run ppl $M $W --kv-scheme int4-g64 --calib $CAL

# --- truncated and malformed files (each named in the message)
refused "calib: truncated calibration" "$T/trunc.st:" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/trunc.st"
refused "calib: calibration of 6 bytes" "$T/tiny.st:" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/tiny.st"
refused "calib: a text file as calibration" "$T/text.st:" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/text.st"
refused "calib: a KV cache file as calibration" "$T/kv.st:" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/kv.st"
refused "calib: missing calibration file" "$T/none.st: cannot open" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/none.st"
refused "calib: NaN in a nuq table" "fit.nuq3-g64.k.2" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/nan.st"
refused "calib: +inf in a vq codebook" "fit.vq8-d4.v.1" ./run ppl $O $W --kv-scheme vq8-d4 --calib "$T/inf.st"
refused "calib: unsorted nuq table" "fit.nuq2-g64.v.0" ./run ppl $O $W --kv-scheme nuq2-g64 --calib "$T/unsorted.st"
refused "calib: nuq table of the wrong shape" "fit.nuq3-g64.k.1" ./run ppl $O $W --kv-scheme nuq3-g64 --calib "$T/shape.st"
refused "calib: vq codebook of the wrong shape" "fit.vq8-d4.k.0" ./run ppl $O $W --kv-scheme vq8-d4 --calib "$T/vqshape.st"
refused "calib: a fit missing a layer" "nuq2-t64" ./run ppl $O $W --kv-scheme nuq2-t64 --calib "$T/missing-layer.st"
refused "calib: a malformed file is refused even when no scheme is fitted" "fit.nuq3-g64.k.2" \
    ./run generate $O -n 4 -s 1 --calib "$T/nan.st"
refused "calib: --validate with a truncated calibration" "$T/trunc.st:" \
    ./run --validate --model $O --kv-scheme nuq3-g64 --calib "$T/trunc.st" --windows 1 --ctx 64 --stride 64 --quiet

# --- the default file: MODEL_DIR/kv-calib.safetensors when it exists (a model directory of links)
mkdir "$T/om"
for f in config.json model.safetensors tokenizer.bin; do ln -s "$PWD/$O/$f" "$T/om/$f"; done
cp $CAL "$T/om/kv-calib.safetensors"
ok "calib: ppl takes MODEL_DIR/kv-calib.safetensors by default" ./run ppl "$T/om" $W --kv-scheme nuq3-g64 --json
grep -qF "\"calib\": \"$T/om/kv-calib.safetensors\"" "$T/out" && pass "calib: ppl's report names the default calibration" ||
    fail "calib: ppl's report names the default calibration" "$(grep calib "$T/out")"
cp "$T/unsorted.st" "$T/om/kv-calib.safetensors"
refused "calib: a malformed default calibration is refused, named" "$T/om/kv-calib.safetensors:" \
    ./run ppl "$T/om" $W --kv-scheme nuq2-g64
ok "calib: the default calibration is not read when no scheme is fitted" ./run ppl "$T/om" $W --kv-scheme int4-g64

# --- the default file serves the fitted schemes a run holds beside its flags' too: a sweep's
# configurations and bench's long runs (issue 49's recipe: resolved from "others fitted" as well)
osha=$(python3 -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" $O/kv-calib.safetensors)
ok "calib: sweep --config nuq3-g64 reads MODEL_DIR/kv-calib.safetensors" \
    ./run sweep $O $W --config int4-g64 --config nuq3-g64 --out-dir "$T/sweep-default" --json
grep -qF "\"calib_sha256\": \"$osha\"" "$T/sweep-default/results.json" &&
    pass "calib: the sweep's results name the default calibration's sha256" ||
    fail "calib: the sweep's results name the default calibration's sha256" "$(grep calib "$T/sweep-default/results.json")"
ok "calib: bench --long-scheme nuq3-g64 reads MODEL_DIR/kv-calib.safetensors" \
    ./run bench $O -p 8 -n 2 --ctx 64 --long-scheme nuq3-g64 --no-probe --repeat 1 --quiet --json
grep -q '"long_kv_scheme": "nuq3-g64"' "$T/out" && pass "calib: bench reports the fitted long scheme it ran" ||
    fail "calib: bench reports the fitted long scheme it ran" "$(head -c 300 "$T/out")"
refused "calib: bench --long-scheme nuq3-g64 without a calibration names the calibrate command" \
    "--fit nuq3-g64 --out $B/kv-calib.safetensors makes it" ./run bench $B -p 8 -n 2 --ctx 64 --long-scheme nuq3-g64 --no-probe --repeat 1 --quiet

# --- --validate --calib: every step with the calibration's tables, named in the report
sha=$(python3 -c "import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb').read()).hexdigest())" $CAL)
mkdir "$T/vtmp"   # --validate's compressed file goes to TMPDIR and is removed
TMPDIR="$T/vtmp" ./run --validate --model $O --kv-scheme nuq3-g64 --calib $CAL --windows 1 --ctx 256 --stride 256 --json --quiet >"$T/v.json" 2>"$T/v.err"
python3 - "$T/v.json" "$CAL" "$sha" <<'PY' && pass "calib: --validate --calib: JSON names the calibration and its sha256, round trip exact" || fail "calib: --validate --calib JSON" "$(head -c 400 "$T/v.json") $(head -c 300 "$T/v.err")"
import json, sys
r = json.load(open(sys.argv[1]))
ok = r["calib"] == sys.argv[2] and r["calib_sha256"] == sys.argv[3] and r["k_scheme"] == "nuq3-g64"
ok = ok and r["cache_roundtrip_ok"] is True and r["compressed_perplexity"] > r["baseline_perplexity"]
sys.exit(0 if ok else 1)
PY
./run --validate --model $O --kv-scheme nuq3-g64 --calib $CAL --windows 1 --ctx 256 --stride 256 >"$T/v.txt" 2>/dev/null
grep -q "calibration $CAL (sha256 $sha)" "$T/v.txt" && grep -q "^Calibration: *$CAL" "$T/v.txt" &&
    pass "calib: --validate's text report names the calibration" || fail "calib: --validate text report" "$(head -c 600 "$T/v.txt")"
refused "calib: --validate nuq3-g64 without a calibration" "--fit nuq3-g64 --out $B/kv-calib.safetensors makes it" \
    env TMPDIR="$T/vtmp" ./run --validate --model $B --kv-scheme nuq3-g64 --windows 1 --ctx 64 --stride 64 --quiet
[ -z "$(ls -A "$T/vtmp")" ] && pass "calib: --validate leaves no compressed file in TMPDIR" || fail "calib: --validate TMPDIR" "$(ls "$T/vtmp")"

# --- a sweep resumed with another calibration
S="$T/sweep"
ok "calib: sweep nuq2-g64 with the calibration" ./run sweep $O $W --config nuq2-g64 --out-dir "$S" --calib $CAL
cp -r "$S" "$T/sweep-before"
refused "calib: a resumed sweep with another calibration" "calib" \
    ./run sweep $O $W --config nuq2-g64 --out-dir "$S" --calib "$T/other.st"
refused "calib: a resumed sweep without its calibration" "calib" \
    ./run sweep $O $W --config nuq2-g64 --out-dir "$S"
diff -r "$S" "$T/sweep-before" >/dev/null && pass "calib: the refused resumes changed nothing in the sweep's directory" ||
    fail "calib: refused resumes" "$(diff -r "$S" "$T/sweep-before" | head -5)"

# --- compressed files of fitted bases
C="$T/c.st"
refused "calib: compress nuq3-g64 without --calib" "needs a calibration (--calib FILE; ./run calibrate MODEL_DIR --fit nuq3-g64" \
    ./run compress -input $KV -output "$C" --kv-scheme nuq3-g64
no_file "calib: refused compress writes nothing" "$C"
refused "calib: compress with a fit the file lacks" "has no fit nuq4-g64 (./run calibrate MODEL_DIR --fit nuq4-g64" \
    ./run compress -input $KV -output "$C" --kv-scheme nuq4-g64 --calib $CAL
refused "calib: compress with a calibration of another geometry" "is for 4 layers, 2 KV heads, head_dim 64; the cache has 22, 4, 64" \
    ./run compress -input $REF/kv-synthetic.safetensors -output "$C" --kv-scheme nuq3-g64 --calib $CAL
refused "calib: compress with a truncated calibration" "$T/trunc.st:" \
    ./run compress -input $KV -output "$C" --kv-scheme nuq3-g64 --calib "$T/trunc.st"
refused "calib: compress with NaN in a codebook" "fit.nuq3-g64.k.2" \
    ./run compress -input $KV -output "$C" --kv-scheme nuq3-g64 --calib "$T/nan.st"
no_file "calib: refused compresses write nothing" "$C"
ok "calib: compress keys vq8-d4, values nuq3-g64;1:nuq2-t64 with --calib" \
    ./run compress -input $KV -output "$C" --k-scheme vq8-d4 --v-scheme "nuq3-g64;1:nuq2-t64" --calib $CAL --max-rmse 10 --min-snr -100 --min-cosine -1
python3 - "$C" "$sha" <<'PY' && pass "calib: the compressed file records the calibration's sha256" || fail "calib: calib_sha256 recorded" "$(head -c 400 "$C" | tr -d '\0')"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
m = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])["__metadata__"]
sys.exit(0 if m.get("calib_sha256") == sys.argv[2] and m["k_scheme"] == "vq8-d4" else 1)
PY
./run compress -input $KV -output "$T/plain.st" --kv-scheme int4-g64 >/dev/null 2>&1
./run compress -input $KV -output "$T/plain-calib.st" --kv-scheme int4-g64 --calib $CAL >/dev/null 2>&1
cmp -s "$T/plain.st" "$T/plain-calib.st" && ! grep -q calib_sha256 "$T/plain.st" &&
    pass "calib: int4-g64 with --calib is byte-identical to without (no calib_sha256)" || fail "calib: unfitted compress with --calib" "files differ"
refused "calib: decompress of a fitted file without --calib" "$C: packed with the tables of the calibration of sha256 $sha: give that file with --calib FILE" \
    ./run decompress -input "$C" -output "$T/d.st"
refused "calib: decompress with another calibration" "but --calib $T/other.st has sha256" \
    ./run decompress -input "$C" -output "$T/d.st" --calib "$T/other.st"
refused "calib: decompress with a malformed calibration" "$T/unsorted.st:" \
    ./run decompress -input "$C" -output "$T/d.st" --calib "$T/unsorted.st"
no_file "calib: refused decompresses write nothing" "$T/d.st"
refused "calib: kv-info of a fitted file without --calib" "give that file with --calib FILE" ./run kv-info "$C"
refused "calib: kv-info with another calibration" "but --calib $T/other.st has sha256" ./run kv-info "$C" --calib "$T/other.st"
ok "calib: decompress with the same calibration" ./run decompress -input "$C" -output "$T/d.st" --calib $CAL
ok "calib: kv-info with the same calibration" ./run kv-info "$C" --calib $CAL --json
grep -q '"k_scheme": "vq8-d4"' "$T/out" && pass "calib: kv-info reports the fitted schemes" || fail "calib: kv-info fitted" "$(head -c 300 "$T/out")"
# the file's metadata edited: a malformed calib_sha256, and none at all
python3 - "$C" "$T" <<'PY'
import json, struct, sys
src, t = sys.argv[1:3]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
for name, value in (("badsha", "not-a-sha256"), ("nosha", None)):
    h = json.loads(b[8:8 + n])
    if value is None: del h["__metadata__"]["calib_sha256"]
    else: h["__metadata__"]["calib_sha256"] = value
    s = json.dumps(h, separators=(",", ":")).encode()
    s += b" " * (-len(s) % 8)
    open(f"{t}/{name}.st", "wb").write(struct.pack("<Q", len(s)) + s + b[8 + n:])
PY
# sealed again (its CRC-32Cs), so that the calib_sha256 checks answer, not the header's checksum
python3 tests/compressed_seal.py "$T/badsha.st" "$T/nosha.st"
refused "calib: decompress of a file with a malformed calib_sha256" "metadata 'calib_sha256' = 'not-a-sha256' is invalid" \
    ./run decompress -input "$T/badsha.st" -output "$T/d2.st" --calib $CAL
refused "calib: kv-info of a fitted file without calib_sha256" "without metadata 'calib_sha256'" \
    ./run kv-info "$T/nosha.st" --calib $CAL
no_file "calib: refused decompress of an edited file writes nothing" "$T/d2.st"

# --- calibrate: bad flags, refused before any work
X="$T/x.st"
refused "calib: calibrate unknown flag" "unknown argument '--bogus'" ./run calibrate $M --out "$X" --bogus
refused "calib: calibrate --fit of an unfitted base" "--fit 'int4-g64': int4-g64 is not a fitted base" ./run calibrate $M --out "$X" --fit int4-g64
refused "calib: calibrate --fit with per-layer items" "one spec, not per-layer items" ./run calibrate $M --out "$X" --fit "nuq3-g64;1:nuq2-g64"
refused "calib: calibrate --fit of an unknown base" "unknown base 'foo-g3'" ./run calibrate $M --out "$X" --fit foo-g3
refused "calib: calibrate without --out" "missing --out FILE" ./run calibrate $M --fit nuq3-g64
refused "calib: calibrate --ctx 0" "--ctx: expected an integer" ./run calibrate $M --out "$X" --ctx 0
refused "calib: calibrate --text-file missing" "$T/none.txt: cannot open" ./run calibrate $M --out "$X" --text-file "$T/none.txt"
refused "calib: calibrate --tokens fewer than one window" "--tokens 100 is fewer than one window of --ctx 256" \
    ./run calibrate $M --out "$X" --tokens 100 --ctx 256
refused "calib: calibrate into a missing directory" "$T/nodir/x.st: cannot write: directory $T/nodir does not exist" \
    ./run calibrate $M --out "$T/nodir/x.st" --tokens 512 --ctx 256
# 48 --fit are taken (the refusal that follows is the missing directory's), the 49th is not
FITS48=$(i=0; while [ $i -lt 48 ]; do printf ' --fit nuq3-g64'; i=$((i + 1)); done)
refused "calib: calibrate takes 48 --fit" "$T/nodir/x.st: cannot write: directory $T/nodir does not exist" \
    ./run calibrate $M --out "$T/nodir/x.st" --tokens 512 --ctx 256 $FITS48
refused "calib: calibrate refuses a 49th --fit" "more --fit than calibrate takes (48)" \
    ./run calibrate $M --out "$X" --tokens 512 --ctx 256 $FITS48 --fit nuq2-g64
no_file "calib: calibrate's refusals write no calibration" "$X"
no_file "calib: calibrate's refusals write no heatmap" "$X.svg"
no_file "calib: calibrate into a missing directory makes none" "$T/nodir"

# --- a calibration made here: kvq's own, of mini-llama-brown, refused on the outliers model
ok "calib: calibrate mini-llama-brown (1024 tokens, ctx 256, --fit nuq2-g64)" \
    ./run calibrate $M --tokens 1024 --ctx 256 --fit nuq2-g64 --out "$T/brown.st" --quiet
refused "calib: kvq's calibration of mini-llama-brown on mini-llama-brown-outliers" "$T/brown.st: calibration of another model" \
    ./run ppl $O $W --kv-scheme nuq2-g64 --calib "$T/brown.st"
ok "calib: kvq's calibration on its own model" ./run ppl $M $W --kv-scheme nuq2-g64 --calib "$T/brown.st"

# --- calibrate's progress lines (stderr, not a terminal): the fits count tables, and give no tok/s
./run calibrate $M --tokens 1024 --ctx 256 --fit nuq2-g64 --out "$T/progress.st" 2>"$T/progress.err" >/dev/null
grep -q '^calibrate: fits: 8/8 tables, ETA' "$T/progress.err" && ! grep '^calibrate: fits' "$T/progress.err" | grep -q 'tok/s' &&
    grep -q '^calibrate: rows: 4/4 windows, [0-9]* tok/s' "$T/progress.err" &&
    pass "calib: calibrate's progress counts the rows' windows with tok/s and the fits' tables without" ||
    fail "calib: calibrate's progress counts the rows' windows with tok/s and the fits' tables without" "$(cat "$T/progress.err")"
grep -q '^calibrate: time: rows [0-9]*\.[0-9] s (4 windows), fits [0-9]*\.[0-9] s (CPU seconds: nuq2-g64 [0-9]*\.[0-9])$' "$T/progress.err" &&
    pass "calib: calibrate's progress ends with the time of the rows and of the fits, with each fit's CPU seconds" ||
    fail "calib: calibrate's progress ends with the time of the rows and of the fits, with each fit's CPU seconds" "$(cat "$T/progress.err")"
