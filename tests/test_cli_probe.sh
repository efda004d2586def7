#!/bin/sh
# tests/test_cli_probe.sh: ./run probe and sweep --probe end to end on mini-llama-brown at a short
# ctx: --help names every flag; the JSON's counts are what the options make (tokens scored per
# sequence, trials per cell); sweep --probe copy writes probe-copy.md/.csv/.json whose scheme
# cells equal ./run probe's for that scheme; bad flags and bad input: exit 2, one line, nothing
# on stdout.
. tests/cli_helpers.sh
M=data/models/mini-llama-brown

expect_exit "probe --help exits 0" 0 ./run probe --help
missing=""
for f in --task --kv-scheme --k-scheme --v-scheme --calib --ctx --sequences --seed --lengths --depths \
         --prompt-tokens --new-tokens --text-file --batch --json; do
    grep -q -- "$f" "$T/out" || missing="$missing $f"
done
[ -z "$missing" ] && pass "probe --help names every flag" || fail "probe --help names every flag" "missing:$missing"

# --- copy: S = 8 and 16 at ctx 64, 2 sequences: S - 1 tokens scored each
expect_exit "probe --task copy runs" 0 ./run probe $M --task copy --ctx 64 --lengths 8,16 --sequences 2 \
    --kv-scheme int4-g64 --json
cp "$T/out" "$T/copy.json"
python3 - "$T/copy.json" <<'PY' && pass "probe copy --json: fp32 then the scheme, S - 1 tokens a sequence, rates = hits / n" || fail "probe copy --json" "see above"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["task"] == "copy" and [c["label"] for c in r["caches"]] == ["fp32", "int4-g64"], r
for cache in r["caches"]:
    for cell, S in zip(cache["cells"], (8, 16)):
        assert cell["length"] == S and cell["n"] == 2 * (S - 1), cell
        assert abs(cell["rate"] - cell["hits"] / cell["n"]) < 1e-15, cell
assert all(c["agree"] == c["n"] for c in r["caches"][0]["cells"]), "fp32 agrees with itself"
PY

# --- sweep --probe copy: the same figures as ./run probe for that configuration
expect_exit "sweep --probe copy runs" 0 ./run sweep $M --ctx 64 --windows 1 --config int4-g64 --out-dir "$T/sw" \
    --probe copy --probe-sequences 2 --quiet
for f in probe-copy.md probe-copy.csv probe-copy.json results.md; do
    [ -s "$T/sw/$f" ] || fail "sweep --probe copy writes $f" "missing or empty"
done
expect_exit "probe copy at the sweep's ctx (default lengths)" 0 ./run probe $M --task copy --ctx 64 --sequences 2 \
    --kv-scheme int4-g64 --json
python3 - "$T/sw/probe-copy.json" "$T/out" <<'PY' && pass "sweep --probe copy: probe-copy.json's cells = ./run probe's" || fail "sweep --probe copy = probe" "see above"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
assert a["caches"] == b["caches"], (a["caches"], b["caches"])
assert a["caches"][0]["cells"][0]["length"] == 32, "ctx 64 under 128: S = ctx/2"
PY

# --- bad flags and bad input
expect_exit "probe without --task: exit 2" 2 ./run probe $M
expect_exit "probe --task bogus: exit 2" 2 ./run probe $M --task bogus
expect_exit "probe --lengths 8x: exit 2" 2 ./run probe $M --task copy --lengths 8x
expect_exit "probe --depths 101: exit 2" 2 ./run probe $M --task passkey --depths 0,101
expect_exit "probe with an unknown flag: exit 2" 2 ./run probe $M --task copy --frobnicate
expect_exit "probe without MODEL_DIR: exit 2" 2 ./run probe --task copy
expect_exit "probe --lengths past ctx/2: exit 2" 2 ./run probe $M --task copy --ctx 64 --lengths 33
[ -s "$T/out" ] && fail "probe --lengths past ctx/2: nothing on stdout" "$(head -c 200 "$T/out")" || pass "probe --lengths past ctx/2: nothing on stdout"
expect_exit "probe of a missing model directory: exit 2" 2 ./run probe "$T/nothing" --task copy
expect_exit "probe --task passkey with a missing --text-file: exit 2" 2 ./run probe $M --task passkey --ctx 256 \
    --text-file "$T/missing.txt"
expect_exit "probe with a bad scheme: exit 2" 2 ./run probe $M --task copy --kv-scheme int9-g7
expect_exit "sweep --probe bogus: exit 2" 2 ./run sweep $M --config int4-g64 --out-dir "$T/x" --probe bogus
expect_exit "sweep --probe copy twice: exit 2" 2 ./run sweep $M --config int4-g64 --out-dir "$T/x" --probe copy --probe copy
expect_exit "sweep --probe with --shard: exit 2" 2 ./run sweep $M --config int4-g64 --out-dir "$T/x" --probe copy --shard 0/2
no_file "sweep with a bad --probe writes nothing" "$T/x"
