#!/bin/sh
# tests/test_cli_errors.sh: ./run on broken inputs. Every case must exit 2 with a
# one-line message on stderr that names the bad file or flag; a crash (exit >= 128)
# or any sanitizer report is a failure. Broken model directories are built in a
# temp dir from data/models/stories260K. Run from the repo root after `make`.
# Prints "PASS name" / "FAIL name: why" lines (counted by tests/run_tests.sh).
RUN=./run
MODEL=data/models/stories260K
[ -x "$RUN" ] || { echo "FAIL cli errors: $RUN not built"; exit 1; }
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM
err="$tmp/stderr"
failures=0

fail() { echo "FAIL $1: $2"; failures=$((failures + 1)); }

# expect_error NAME WANT CMD...: exit status 2, one stderr line containing WANT, no crash.
expect_error() {
    name=$1 want=$2
    shift 2
    "$@" >/dev/null 2>"$err"
    rc=$?
    lines=$(wc -l <"$err" | tr -d ' ')
    if [ "$rc" -ge 128 ]; then
        fail "$name" "crashed (exit $rc): $(head -c 300 "$err")"
    elif grep -q 'Sanitizer\|runtime error:' "$err"; then
        fail "$name" "sanitizer report: $(grep -m1 'Sanitizer\|runtime error:' "$err")"
    elif [ "$rc" -ne 2 ]; then
        fail "$name" "exit $rc, expected 2; stderr: $(head -c 300 "$err")"
    elif [ "$lines" -ne 1 ]; then
        fail "$name" "$lines lines on stderr, expected 1: $(head -c 300 "$err")"
    elif ! grep -qF -- "$want" "$err"; then
        fail "$name" "message does not name '$want': $(cat "$err")"
    else
        echo "PASS $name"
    fi
}

# A copy of the model dir; the caller then breaks one file in it.
model_copy() {
    rm -rf "$tmp/$1"
    cp -r "$MODEL" "$tmp/$1"
    echo "$tmp/$1"
}

# The arguments each command needs besides MODEL_DIR, so that only the broken part fails.
args_for() {
    case $1 in
        logits) echo "--tokens 1,2,3" ;;
        generate) echo "-n 8 -s 1" ;;
        tokenize) echo "--text hello" ;;
        ppl) echo "--text-file $MODEL/config.json --ctx 16 --stride 8 --windows 1 --quiet" ;;
    esac
}

# ---- broken model directories ----
d_trunc=$(model_copy trunc-weights)
head -c 5000 "$MODEL/model.safetensors" >"$d_trunc/model.safetensors"
d_notst=$(model_copy not-safetensors)
printf 'this is not a safetensors file, just some text\n' >"$d_notst/model.safetensors"
# edit_header DIR WHAT: rewrites DIR/model.safetensors's header, keeping the data bytes:
# the file stays valid safetensors but no longer fits the config.
edit_header() {
    python3 - "$MODEL/model.safetensors" "$1/model.safetensors" "$2" <<'PY'
import json, struct, sys
src, dst, what = sys.argv[1], sys.argv[2], sys.argv[3]
b = open(src, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
if what == "shape":
    h["model.norm.weight"]["shape"] = [8, 8]        # [64] re-declared, same bytes
elif what == "dtype":
    h["model.norm.weight"]["dtype"] = "I32"         # same size as F32
elif what == "missing":
    del h["model.layers.4.mlp.down_proj.weight"]    # its bytes stay, unreferenced
t = json.dumps(h, separators=(",", ":")).encode()
t += b" " * (-len(t) % 8)
open(dst, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
PY
}
d_shape=$(model_copy wrong-shape)
edit_header "$d_shape" shape
d_dtype=$(model_copy wrong-dtype)
edit_header "$d_dtype" dtype
d_missing=$(model_copy missing-tensor)
edit_header "$d_missing" missing
d_cfg_utf8=$(model_copy config-not-utf8)
printf '{"hidden_size": 64, "model_type": "ll\377ama"}' >"$d_cfg_utf8/config.json"
d_cfg_json=$(model_copy config-not-json)
printf 'hidden_size = 64\n' >"$d_cfg_json/config.json"
d_cfg_field=$(model_copy config-missing-field)
python3 - "$MODEL/config.json" "$d_cfg_field/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
del c["num_hidden_layers"]
json.dump(c, open(sys.argv[2], "w"))
PY
d_tok=$(model_copy trunc-tokenizer)
head -c 100 "$MODEL/tokenizer.bin" >"$d_tok/tokenizer.bin"
d_vocab=$(model_copy tokenizer-other-vocab)
cp data/models/mini-llama-brown/tokenizer.bin "$d_vocab/tokenizer.bin"   # 32000 pieces for a 512-token model

# The same commands on the intact model must work, or the cases below prove nothing.
for cmd in logits generate tokenize ppl; do
    # shellcheck disable=SC2086  # args_for gives a list of arguments
    if $RUN $cmd $MODEL $(args_for $cmd) >/dev/null 2>"$err"; then echo "PASS $cmd: intact model works"
    else fail "$cmd: intact model works" "$(head -c 300 "$err")"; fi
done

for cmd in logits generate tokenize ppl; do
    a=$(args_for $cmd)
    # shellcheck disable=SC2086  # $a is a list of arguments
    expect_error "$cmd: missing model dir" "$tmp/no-such-dir" $RUN $cmd "$tmp/no-such-dir" $a
    if [ $cmd != tokenize ]; then   # tokenize reads only tokenizer.bin
        expect_error "$cmd: truncated model.safetensors" "$d_trunc/model.safetensors" $RUN $cmd "$d_trunc" $a
        expect_error "$cmd: model.safetensors not safetensors" "$d_notst/model.safetensors" $RUN $cmd "$d_notst" $a
        expect_error "$cmd: tensor shape wrong for the config" "model.norm.weight" $RUN $cmd "$d_shape" $a
        expect_error "$cmd: weight with an integer dtype" "model.norm.weight" $RUN $cmd "$d_dtype" $a
        expect_error "$cmd: weight missing" "model.layers.4.mlp.down_proj.weight" $RUN $cmd "$d_missing" $a
        expect_error "$cmd: config.json not UTF-8" "$d_cfg_utf8/config.json" $RUN $cmd "$d_cfg_utf8" $a
        expect_error "$cmd: config.json not JSON" "$d_cfg_json/config.json" $RUN $cmd "$d_cfg_json" $a
        expect_error "$cmd: config.json missing a field" "num_hidden_layers" $RUN $cmd "$d_cfg_field" $a
    fi
    if [ $cmd != logits ]; then     # logits does not read the tokenizer
        expect_error "$cmd: truncated tokenizer.bin" "$d_tok/tokenizer.bin" $RUN $cmd "$d_tok" $a
        [ $cmd != tokenize ] &&
            expect_error "$cmd: tokenizer.bin of another vocabulary" "$d_vocab/tokenizer.bin" $RUN $cmd "$d_vocab" $a
    fi
    expect_error "$cmd: unknown flag" "--bogus" $RUN $cmd $MODEL $a --bogus
done

# ---- bad flag values ----
expect_error "generate: -n abc" "-n" $RUN generate $MODEL -n abc
expect_error "generate: -t nan" "-t" $RUN generate $MODEL -t nan
expect_error "generate: flag without value" "-n" $RUN generate $MODEL -n
expect_error "logits: --tokens 1,x" "--tokens" $RUN logits $MODEL --tokens 1,x
expect_error "logits: --tokens 99999" "--tokens" $RUN logits $MODEL --tokens 99999
expect_error "logits: --tokens empty" "--tokens" $RUN logits $MODEL --tokens ""
expect_error "logits: --tokens -1" "--tokens" $RUN logits $MODEL --tokens -1
expect_error "ppl: --ctx abc" "ppl: --ctx: expected an integer" $RUN ppl $MODEL --ctx abc
# messages name a flag as it was typed: one dash or two, short name or long
expect_error "ppl: -ctx=5x" "ppl: -ctx: expected an integer" $RUN ppl $MODEL -ctx=5x
expect_error "generate: --temperature x" "generate: --temperature: expected a number" $RUN generate $MODEL --temperature x
expect_error "ppl: --json=1" "flag --json takes no value" $RUN ppl $MODEL --json=1
expect_error "ppl: --shard 3/2" "--shard" $RUN ppl $MODEL --shard 3/2
expect_error "ppl: --protocol nope" "--protocol" $RUN ppl $MODEL --protocol nope
expect_error "tokenize: --text-file missing" "$tmp/no-such.txt" $RUN tokenize $MODEL --text-file "$tmp/no-such.txt"
for cmd in logits generate ppl; do
    a=$(args_for $cmd)
    # shellcheck disable=SC2086
    expect_error "$cmd: --kv-scheme nope" "nope" $RUN $cmd $MODEL $a --kv-scheme nope
done
expect_error "ppl: --k-scheme nope" "nope" $RUN ppl $MODEL --k-scheme nope

# ---- outputs: a failed write leaves nothing behind ----
expect_error "logits: --out in a missing directory" "$tmp/no-dir/logits.f32" \
    $RUN logits $MODEL --tokens 1,2 --out "$tmp/no-dir/logits.f32"
if [ -e "$tmp/no-dir" ]; then fail "logits: --out in a missing directory leaves no file" "$tmp/no-dir exists"
else echo "PASS logits: --out in a missing directory leaves no file"; fi
mkdir "$tmp/outdir" "$tmp/outdir/target"
expect_error "logits: --out onto a directory" "$tmp/outdir/target" \
    $RUN logits $MODEL --tokens 1,2 --out "$tmp/outdir/target"
left=$(ls -A "$tmp/outdir")
if [ "$left" = target ] && [ -z "$(ls -A "$tmp/outdir/target")" ]; then
    echo "PASS logits: --out onto a directory leaves no temp file"
else
    fail "logits: --out onto a directory leaves no temp file" "found: $left"
fi

# ---- an unknown command: one line, a guess within 2 edits of a name (the nearest; none beyond), exit 2 ----
expect_error "unknown command pll: did you mean ppl" "unknown command 'pll'; did you mean 'ppl'?" $RUN pll x
expect_error "unknown command --validat: did you mean --validate" "did you mean '--validate'?" $RUN --validat
expect_error "unknown command 2 edits away: did you mean calibrate" "did you mean 'calibrate'?" $RUN calibrateXY
expect_error "unknown command 3 edits away: named without a guess" "unknown command 'calibrateXYZ' (./run" \
    $RUN calibrateXYZ
expect_error "unknown command far from every name: named without a guess" "unknown command 'zzzzz' (./run" $RUN zzzzz

# ---- --help after any command: the command's own usage on stdout, exit 0, nothing run
# (tests/test_cli_help.py checks every command's help against its parser) ----
for cmd in generate ppl bench compress --validate; do
    $RUN $cmd --help >"$tmp/help" 2>"$err"
    rc=$?
    if [ "$rc" -eq 0 ] && grep -q -- "^usage: ./run $cmd " "$tmp/help" && [ ! -s "$err" ]; then
        echo "PASS $cmd --help: its own usage, exit 0"
    else
        fail "$cmd --help: its own usage, exit 0" "exit $rc, stdout $(head -c 100 "$tmp/help"), stderr $(head -c 200 "$err")"
    fi
done

[ "$failures" -eq 0 ]
