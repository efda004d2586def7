#!/bin/sh
# tests/test_cli_allocate.sh: ./run sensitivity and ./run allocate end to end on mini-llama-brown
# (ctx 256, 2 windows, 2 candidates: 17 forward passes a window). A cell of the sensitivity has the
# sums of `./run ppl` with that LAYERED scheme (keys and values apart); the run costs 2 x layers x
# candidates + 1 passes a window; a killed and resumed run and two shards put together by
# sweep-merge give the uninterrupted run's report byte for byte; the heatmap is XML, passes
# svg_check (and renders where rsvg-convert is installed); allocate's choice is the brute-force
# optimum over every combination (python3, exact fractions for the bits), its LAYERED strings say
# that choice, and --verify's measured KL is ppl's for those strings; a calibration fitted on the
# text measured is said to be NOT held out by the sensitivity, its merge, allocate (as recorded) and
# --verify; bad budgets, candidates, models and flags exit 2 with one line and write nothing. Keys
# and values with their own lists (--k-candidates A,B --v-candidates C): exactly 4 x 2 + 4 x 1 cells,
# allocate's keys only from {A, B} and values only from {C} (brute force again), a +prerope value
# candidate refused, and a version-2 sensitivity.json (one list, tests/fixtures/sensitivity-v2) still read.
. tests/cli_helpers.sh
M=data/models/mini-llama-brown
W="--ctx 256 --stride 128 --windows 2"
C="int2-g64+had,tq3"
[ -x ./run ] || { fail "cli allocate" "./run not built"; exit 1; }

# --- a whole sensitivity (not quiet: its plan line and the run's forward-pass tokens)
./run sensitivity $M $W --candidates "$C" --out-dir "$T/full" >"$T/full.out" 2>"$T/full.err"
rc=$?
[ "$rc" -eq 0 ] && pass "sensitivity of 2 candidates on mini-llama-brown runs" || fail "sensitivity runs" "exit $rc: $(head -c 300 "$T/full.err")"
missing=""
for f in sensitivity.md sensitivity.csv sensitivity.json sensitivity.svg results.csv journal.jsonl sweep.json; do
    [ -s "$T/full/$f" ] || missing="$missing $f"
done
[ -z "$missing" ] && pass "sensitivity writes sensitivity.md/csv/json/svg beside the sweep's files" || fail "sensitivity files" "missing:$missing"
# 4 layers x 2 sides x 2 candidates + the baseline = 17 passes of 256 tokens, 2 windows
grep -q "17 forward passes a window" "$T/full.err" && grep -q "this run: .* 8704 forward-pass tokens" "$T/full.err" \
    && pass "sensitivity costs (2 x 4 layers x 2 candidates + 1) x 256 tokens x 2 windows = 8704 forward-pass tokens, no more" \
    || fail "sensitivity cost" "$(cat "$T/full.err")"
# each cell's pass starts at its layer from the baseline's residual stream (eval/layer_resume.h):
# (4 baseline layers + 2 sides x 2 candidates x (4 + 3 + 2 + 1) layers) x 256 tokens x 2 windows
grep -q "layers x tokens run: 22528 of 34816 " "$T/full.err" \
    && pass "sensitivity runs (4 + 2 x 2 x (4 + 3 + 2 + 1)) x 256 x 2 = 22528 layer-tokens of the whole passes' 34816" \
    || fail "sensitivity layer-tokens" "$(cat "$T/full.err")"
grep -q "^| K | 3 |" "$T/full.out" && grep -q "^| V | 0 |" "$T/full.out" && pass "sensitivity prints the KL table by side and layer" \
    || fail "sensitivity table" "$(head -c 400 "$T/full.out")"

# --- a cell = ppl with that LAYERED scheme: the same sums (keys of layer 2, values of layer 1)
./run ppl $M $W --text-file data/wikitext-2-raw/wiki.valid.raw --k-scheme 'fp32;2:tq3' --v-scheme fp32 --json --quiet >"$T/k2.json" 2>"$T/k2.err"
./run ppl $M $W --text-file data/wikitext-2-raw/wiki.valid.raw --k-scheme fp32 --v-scheme 'fp32;1:int2-g64+had' --json --quiet >"$T/v1.json" 2>"$T/v1.err"
python3 - "$T/full/sensitivity.json" "$T/k2.json" "$T/v1.json" <<'PY' && pass "sensitivity cells K 2 tq3 and V 1 int2-g64+had = ppl --k-scheme/--v-scheme 'fp32;L:c': nll, baseline nll, KL sums and tokens (rel 1e-9)" || fail "sensitivity = ppl" "see above"
import json, sys
s = json.load(open(sys.argv[1]))
cells = {(c["side"], c["layer"], c["candidate"]): c for c in s["cells"]}
for (key, path) in [(("K", 2, "tq3"), sys.argv[2]), (("V", 1, "int2-g64+had"), sys.argv[3])]:
    p = json.load(open(path))
    c = cells[key]
    if c["scored_tokens"] != p["scored_tokens"]:
        print("tokens", key, c["scored_tokens"], p["scored_tokens"]); sys.exit(1)
    for k in ["kl_sum", "nll_sum", "base_nll_sum"]:
        if not abs(c[k] - p[k]) <= 1e-9 * abs(p[k]):   # ppl adds all tokens in one sum, the sweep window by window
            print("differs:", key, k, c[k], p[k]); sys.exit(1)
    other = ("V" if key[0] == "K" else "K", key[1], key[2])
    if abs(cells[other]["kl_sum"] - p["kl_sum"]) <= 1e-6 * abs(p["kl_sum"]):
        print("the other side's cell has the same KL:", other); sys.exit(1)
PY

# --- the heatmap: XML with 16 titled cells, svg_check, and a renderer makes a PNG of it where one is installed
python3 - "$T/full/sensitivity.svg" <<'PY' && pass "sensitivity.svg parses as XML with 16 cells titled K/V layer candidate" || fail "sensitivity.svg" "see above"
import sys, xml.etree.ElementTree as E
root = E.parse(sys.argv[1]).getroot()
ns = "{http://www.w3.org/2000/svg}"
cells = [r for r in root.iter(ns + "rect") if r.get("class") == "cell"]
titles = [r.find(ns + "title").text for r in cells]
ok = len(cells) == 16 and sum(t.startswith("K layer") for t in titles) == 8 and sum(t.startswith("V layer") for t in titles) == 8
print(len(cells), titles[:2])
sys.exit(0 if ok else 1)
PY
check_svg "sensitivity.svg" "$T/full/sensitivity.svg"

# --- killed mid-run and a torn last line, started again: the same report, byte for byte
./run sensitivity $M $W --candidates "$C" --out-dir "$T/killed" --quiet >/dev/null 2>&1 &
pid=$!
i=0
while [ "$i" -lt 1200 ] && [ "$(cat "$T/killed/journal.jsonl" 2>/dev/null | wc -l)" -lt 5 ]; do sleep 0.05; i=$((i + 1)); done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
lines=$(wc -l <"$T/killed/journal.jsonl")
[ "$lines" -ge 5 ] && [ "$lines" -lt 32 ] && pass "a sensitivity killed mid-run leaves a journal of finished cells ($lines of 32)" \
    || fail "sensitivity killed mid-run" "$lines journal lines"
printf '{"window": 1, "config": 9, "k": "fp3' >>"$T/killed/journal.jsonl"
expect_exit "the killed sensitivity started again finishes" 0 ./run sensitivity $M $W --candidates "$C" --out-dir "$T/killed" --quiet
same=""
for f in sensitivity.md sensitivity.csv sensitivity.json sensitivity.svg; do cmp -s "$T/full/$f" "$T/killed/$f" || same="$same $f"; done
[ -z "$same" ] && pass "killed, torn and resumed: sensitivity.md/csv/json/svg identical to the uninterrupted run's" \
    || fail "sensitivity resumed" "differ:$same"

# --- two shards put together by sweep-merge: the same report
expect_exit "sensitivity shard 0/2" 0 ./run sensitivity $M $W --candidates "$C" --out-dir "$T/s0" --shard 0/2 --quiet
expect_exit "sensitivity shard 1/2" 0 ./run sensitivity $M $W --candidates "$C" --out-dir "$T/s1" --shard 1/2 --quiet
expect_exit "sweep-merge of the sensitivity's shards" 0 ./run sweep-merge "$T/s1" "$T/s0" --out-dir "$T/merged"
same=""
for f in sensitivity.md sensitivity.csv sensitivity.json sensitivity.svg results.csv; do cmp -s "$T/full/$f" "$T/merged/$f" || same="$same $f"; done
[ -z "$same" ] && pass "2 sensitivity shards merged: sensitivity.md/csv/json/svg and results.csv identical to the single run's" \
    || fail "sensitivity shards merged" "differ:$same"

# --- allocate: the brute-force optimum over all 2^8 choices, with exact bits
# (tests brute.py: SENSITIVITY.json ALLOCATION.json, each side choosing from its own list; version 2 files have one)
cat >"$T/brute.py" <<'PY'
import itertools, json, sys
from fractions import Fraction
s = json.load(open(sys.argv[1]))
a = json.load(open(sys.argv[2]))
L = s["n_layers"]
# the lists allocate chose from (all the sensitivity's, or a subset), each candidate's bits from the sensitivity
measured = {"K": s["k_candidates"], "V": s["v_candidates"]} if "k_candidates" in s else {"K": s["candidates"], "V": s["candidates"]}
bits = {(side, c["spec"]): Fraction(c["effective_bits"]).limit_denominator(1 << 20) for side in "KV" for c in measured[side]}
lists = {"K": a["k_candidates"], "V": a["v_candidates"]} if "k_candidates" in a else {"K": a["candidates"], "V": a["candidates"]}
kl = {(c["side"], c["layer"], c["candidate"]): c["kl_mean"] for c in s["cells"]}
groups = [("K", l) for l in range(L)] + [("V", l) for l in range(L)]
def layered(text):   # a LAYERED value as the spec of each layer
    items = text.split(";")
    out = [items[0]] * L
    for it in items[1:]:
        rng, spec = it.split(":", 1)
        lo, hi = (rng.split("-") + [rng])[:2] if "-" in rng else (rng, rng)
        for l in range(int(lo), int(hi) + 1):
            out[l] = spec
    return out
for alloc in a["allocations"]:
    budget = Fraction(alloc["budget_fraction"][0], alloc["budget_fraction"][1])
    best = None
    for choice in itertools.product(*[[c["spec"] for c in lists[g[0]]] for g in groups]):
        mean = sum(bits[(g[0], c)] for g, c in zip(groups, choice)) / len(groups)
        if mean > budget:
            continue
        damage = sum(kl[(g[0], g[1], c)] for g, c in zip(groups, choice))
        if best is None or damage < best[0] - 1e-15:
            best = (damage, choice, mean)
    got = alloc["k_choice"] + alloc["v_choice"]
    got_damage = sum(kl[(g[0], g[1], c)] for g, c in zip(groups, got))
    ok = abs(got_damage - best[0]) <= 1e-12 * best[0] and abs(alloc["predicted_kl"] - best[0]) <= 1e-12 * best[0]
    ok = ok and sum(bits[(g[0], c)] for g, c in zip(groups, got)) / len(groups) <= budget and list(got) == list(best[1])
    ok = ok and layered(alloc["k_scheme"]) == alloc["k_choice"] and layered(alloc["v_scheme"]) == alloc["v_choice"]
    print("budget", budget, "K", alloc["k_scheme"], "V", alloc["v_scheme"], alloc["predicted_kl"], "brute force", best[0])
    if not ok:
        sys.exit(1)
PY
./run allocate $M --from "$T/full" --budget 2.25,2.5,2.75,3,3.25 --json >"$T/alloc.json" 2>"$T/alloc.err"
python3 "$T/brute.py" "$T/full/sensitivity.json" "$T/alloc.json" && pass "allocate at 2.25, 2.5, 2.75, 3, 3.25 bits = brute force over every choice (least summed KL within the mean bits, exact fractions); its LAYERED strings say that choice" || fail "allocate = brute force" "see above"

# --- allocate --verify: on held-out windows, the allocation's and the uniform candidate's KL are
# ppl's for the same schemes (1 window of wiki.test)
expect_exit "allocate --verify at 2.25 and 2.5 bits on 1 held-out window" 0 ./run allocate $M --from "$T/full" --budget 2.25,2.5 --verify \
    --out-dir "$T/verify" --windows 1 --json --quiet
cp "$T/out" "$T/verify.json"
python3 - "$T/verify.json" >"$T/schemes" <<'PY'
import json, sys
a = json.load(open(sys.argv[1]))
print(a["allocations"][1]["k_scheme"], a["allocations"][1]["v_scheme"])
PY
read -r KS VS <"$T/schemes"
./run ppl $M --ctx 256 --stride 128 --windows 1 --k-scheme "$KS" --v-scheme "$VS" --json --quiet >"$T/pa.json" 2>/dev/null
./run ppl $M --ctx 256 --stride 128 --windows 1 --kv-scheme int2-g64+had --json --quiet >"$T/pu.json" 2>/dev/null
python3 - "$T/verify.json" "$T/pa.json" "$T/pu.json" <<'PY' && pass "allocate --verify: the 2.5-bit allocation's and the uniform int2-g64+had's measured KL = ppl's for the same schemes on wiki.test (rel 1e-9), held out; at 2.25 bits the allocation is int2-g64+had everywhere, the best uniform candidate exactly at the budget" || fail "allocate --verify = ppl" "see above"
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
pa, pu = json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
at = v["budgets"][0]["rows"]
if len(at) != 2 or at[1]["k_scheme"] != "int2-g64+had" or not at[1].get("best_uniform") or at[0]["kl_mean"] != at[1]["kl_mean"]:
    print("2.25 bits:", at); sys.exit(1)
rows = v["budgets"][1]["rows"]
alloc = [r for r in rows if r["kind"] == "allocation"][0]
uni = [r for r in rows if r["kind"] == "uniform"][0]
ok = v["held_out"] and uni["k_scheme"] == "int2-g64+had" and uni.get("best_uniform")
for row, p in [(alloc, pa), (uni, pu)]:
    ok = ok and abs(row["kl_mean"] - p["kl_mean"]) <= 1e-9 * p["kl_mean"] and row["scored_tokens"] == p["scored_tokens"]
    ok = ok and abs(row["measured_over_predicted"] * row["predicted_kl"] - row["kl_mean"]) <= 1e-12 * row["kl_mean"]
    print(row["kind"], row["kl_mean"], p["kl_mean"])
sys.exit(0 if ok else 1)
PY
# each budget's best uniform candidate fits that budget, not only the largest (tq3, 3.25 bits, fits 3.5
# but not 2.25: at 2.25 the best uniform is int2-g64+had even though tq3 damages less)
expect_exit "allocate --verify at 2.25 and 3.5 bits on 1 held-out window" 0 ./run allocate $M --from "$T/full" --budget 2.25,3.5 \
    --verify --out-dir "$T/verify2" --windows 1 --json --quiet
python3 - "$T/out" <<'PY' && pass "allocate --verify: each budget's best uniform candidate fits that budget (tq3 at 3.5 bits, not at 2.25)" \
    || fail "allocate --verify best uniform within each budget" "see above"
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
best = {b["budget"]: [r for r in b["rows"] if r.get("best_uniform")] for b in v["budgets"]}
print({b: [(r["k_scheme"], r["bits"]) for r in rows] for b, rows in best.items()})
ok = [r["k_scheme"] for r in best[2.25]] == ["int2-g64+had"] and [r["k_scheme"] for r in best[3.5]] == ["tq3"]
sys.exit(0 if ok and all(r["bits"] <= b for b, rows in best.items() for r in rows) else 1)
PY
[ -s "$T/verify/allocation.md" ] && [ -s "$T/verify/allocation.json" ] && pass "allocate --verify writes allocation.md and allocation.json beside the sweep's files" \
    || fail "allocate --verify files" "$(ls "$T/verify")"

# --- keys and values with their own lists: 2 key candidates (one for keys only), 1 value candidate
KC="tq3,int2-g64+prerope"
./run sensitivity $M $W --k-candidates "$KC" --v-candidates tq2 --out-dir "$T/own" >"$T/own.out" 2>"$T/own.err"
rc=$?
[ "$rc" -eq 0 ] && grep -q "4 layers x (2 key + 1 value candidates) = 12 configurations: 13 forward passes a window" "$T/own.err" \
    && grep -q "this run: .* 6656 forward-pass tokens" "$T/own.err" \
    && pass "sensitivity --k-candidates A,B --v-candidates C: 4 x 2 + 4 x 1 cells + the baseline = 13 passes of 256 tokens x 2 windows, no more" \
    || fail "sensitivity of own lists: cost" "exit $rc: $(tail -c 400 "$T/own.err")"
./run ppl $M $W --text-file data/wikitext-2-raw/wiki.valid.raw --k-scheme 'fp32;3:int2-g64+prerope' --v-scheme fp32 --json --quiet >"$T/ok3.json" 2>/dev/null
./run ppl $M $W --text-file data/wikitext-2-raw/wiki.valid.raw --k-scheme fp32 --v-scheme 'fp32;2:tq2' --json --quiet >"$T/ov2.json" 2>/dev/null
python3 - "$T/own/sensitivity.json" "$T/ok3.json" "$T/ov2.json" <<'PY' && pass "sensitivity of own lists: version 3, k_candidates [tq3, int2-g64+prerope], v_candidates [tq2], 12 cells; K 3 int2-g64+prerope and V 2 tq2 = ppl's sums (rel 1e-9)" || fail "sensitivity of own lists: cells" "see above"
import json, sys
s = json.load(open(sys.argv[1]))
ks, vs = [c["spec"] for c in s["k_candidates"]], [c["spec"] for c in s["v_candidates"]]
cells = {(c["side"], c["layer"], c["candidate"]): c for c in s["cells"]}
ok = s["kvq_sensitivity"] == 3 and "candidates" not in s and ks == ["tq3", "int2-g64+prerope"] and vs == ["tq2"]
ok = ok and len(s["cells"]) == 12 and sorted(cells) == sorted([("K", l, c) for l in range(4) for c in ks] + [("V", l, "tq2") for l in range(4)])
for key, path in [(("K", 3, "int2-g64+prerope"), sys.argv[2]), (("V", 2, "tq2"), sys.argv[3])]:
    p, c = json.load(open(path)), cells.get(key, {})
    for k in ["kl_sum", "nll_sum", "base_nll_sum"]:
        ok = ok and k in c and abs(c[k] - p[k]) <= 1e-9 * abs(p[k])
    print(key, c.get("kl_sum"), p["kl_sum"])
sys.exit(0 if ok else 1)
PY
grep -q "^| V | 3 | [0-9]" "$T/own.out" && grep -q "^| side | layer | tq2 (2.25 b) |$" "$T/own.out" \
    && pass "sensitivity of own lists: a KL table for keys and one for values, each with its own columns" || fail "own lists table" "$(head -c 600 "$T/own.out")"
./run allocate $M --from "$T/own" --budget 2.25,2.5,2.75,3 --json >"$T/own-alloc.json" 2>"$T/own-alloc.err"
python3 "$T/brute.py" "$T/own/sensitivity.json" "$T/own-alloc.json" && python3 - "$T/own-alloc.json" <<'PY' && pass "allocate from own lists at 2.25..3 bits = brute force with K from {tq3, int2-g64+prerope} only and V from {tq2} only" || fail "allocate from own lists" "see above"
import json, sys
a = json.load(open(sys.argv[1]))
ks, vs = {c["spec"] for c in a["k_candidates"]}, {c["spec"] for c in a["v_candidates"]}
ok = ks == {"tq3", "int2-g64+prerope"} and vs == {"tq2"} and "candidates" not in a
ok = ok and all(set(x["k_choice"]) <= ks and set(x["v_choice"]) == {"tq2"} for x in a["allocations"])
ok = ok and any("int2-g64+prerope" in x["k_choice"] for x in a["allocations"]) and any("tq3" in x["k_choice"] for x in a["allocations"])
sys.exit(0 if ok else 1)
PY
./run allocate $M --from "$T/own" --budget 3 --k-candidates tq3 --json >"$T/own-sub.json" 2>/dev/null
python3 - "$T/own-sub.json" <<'PY' && pass "allocate --k-candidates tq3: keys from tq3 only, values still from the sensitivity's (tq2)" || fail "allocate --k-candidates subset" "see above"
import json, sys
a = json.load(open(sys.argv[1]))["allocations"][0]
print(a["k_scheme"], a["v_scheme"])
sys.exit(0 if a["k_scheme"] == "tq3" and a["v_scheme"] == "tq2" else 1)
PY
expect_exit "allocate --v-candidates with a key candidate of the sensitivity (tq3): exit 2" 2 ./run allocate $M --from "$T/own" --budget 3 --v-candidates tq3
grep -q -- "--v-candidates: 'tq3' is not one of the 1 value candidates" "$T/err" && pass "... naming --v-candidates and the value candidates" || fail "V candidate not measured message" "$(cat "$T/err")"
expect_exit "allocate --candidates tq3 from own lists (tq3 not a value candidate): exit 2" 2 ./run allocate $M --from "$T/own" --budget 3 --candidates tq3
expect_exit "allocate --v-candidates with +prerope: exit 2" 2 ./run allocate $M --from "$T/own" --budget 3 --v-candidates int2-g64+prerope
expect_exit "allocate from own lists below the cheapest (2.25): exit 2" 2 ./run allocate $M --from "$T/own" --budget 2
grep -q "below the cheapest allocation, 2.25 bits a value (int2-g64+prerope in every layer's keys, tq2 in its values)" "$T/err" \
    && pass "the refusal from own lists names the lightest key and value candidates" || fail "own lists cheapest message" "$(cat "$T/err")"
# --verify: the uniform configuration is the first key candidate with the first value one (tq3 / tq2)
expect_exit "allocate --verify from own lists at 2.75 bits on 1 held-out window" 0 ./run allocate $M --from "$T/own" --budget 2.75 --verify \
    --out-dir "$T/own-verify" --windows 1 --json --quiet
python3 - "$T/out" <<'PY' && pass "allocate --verify from own lists: its uniform configuration is K tq3 / V tq2 (the lists' first, paired)" || fail "own lists verify" "see above"
import json, sys
v = json.load(open(sys.argv[1]))["verify"]
u = [(r["k_scheme"], r["v_scheme"]) for r in v["uniform"]]
print(u)
sys.exit(0 if u == [("tq3", "tq2")] else 1)
PY
grep -q "best uniform: K \`tq3\`, V \`tq2\`" "$T/own-verify/allocation.md" && pass "allocation.md names the uniform pair as K \`tq3\`, V \`tq2\`" \
    || fail "own lists verify md" "$(grep uniform "$T/own-verify/allocation.md" | head -3)"
# a version-2 sensitivity.json (one list for both sides): read, and allocate is brute force's there too
./run allocate $M --from tests/fixtures/sensitivity-v2 --budget 2.5,3 --candidates tq2,tq3 --json >"$T/v2-alloc.json" 2>"$T/v2.err"
python3 "$T/brute.py" tests/fixtures/sensitivity-v2/sensitivity.json "$T/v2-alloc.json" && grep -q '"candidates"' "$T/v2-alloc.json" \
    && pass "allocate reads a version-2 sensitivity.json (tests/fixtures/sensitivity-v2, one list for both sides): brute force's choice from tq2, tq3 at 2.5, 3 bits" \
    || fail "version-2 sensitivity" "$(cat "$T/v2.err")"
expect_exit "sensitivity --v-candidates with +prerope (keys only): exit 2" 2 ./run sensitivity $M $W --k-candidates tq3 --v-candidates tq2,int2-g64+prerope --out-dir "$T/bad5"
[ "$(wc -l <"$T/err")" -eq 1 ] && grep -q -- "--v-candidates: 'int2-g64+prerope'.*keys only" "$T/err" \
    && pass "the refusal is one line naming --v-candidates, the candidate and keys only" || fail "+prerope V message" "$(cat "$T/err")"
no_file "a refused +prerope value candidate writes no --out-dir" "$T/bad5"
expect_exit "sensitivity --k-candidates without --v-candidates: exit 2" 2 ./run sensitivity $M $W --k-candidates tq3 --out-dir "$T/bad5"

# --- bad input: exit 2, one line, nothing written
expect_exit "allocate --budget nan: exit 2" 2 ./run allocate $M --from "$T/full" --budget nan
expect_exit "allocate --budget -1: exit 2" 2 ./run allocate $M --from "$T/full" --budget -1
expect_exit "allocate --budget abc: exit 2" 2 ./run allocate $M --from "$T/full" --budget abc
expect_exit "allocate --budget '': exit 2" 2 ./run allocate $M --from "$T/full" --budget ''
expect_exit "allocate --budget 2 (below the cheapest, 2.25) with --verify: exit 2" 2 ./run allocate $M --from "$T/full" --budget 2 --verify --out-dir "$T/bad1"
grep -q "below the cheapest allocation, 2.25 bits" "$T/err" && pass "the refusal names the cheapest allocation's bits" || fail "below cheapest message" "$(cat "$T/err")"
no_file "a budget below the cheapest writes no --out-dir" "$T/bad1"
expect_exit "allocate without --from: exit 2" 2 ./run allocate $M --budget 3
grep -q "sensitivity" "$T/err" && pass "allocate without --from says to run the sensitivity first" || fail "no --from message" "$(cat "$T/err")"
expect_exit "allocate --candidates with one the sensitivity did not measure: exit 2" 2 ./run allocate $M --from "$T/full" --budget 3 --candidates tq3,tq2
expect_exit "allocate --candidates '': exit 2" 2 ./run allocate $M --from "$T/full" --budget 3 --candidates ''
expect_exit "allocate with another model than the sensitivity's: exit 2" 2 ./run allocate data/models/mini-llama-brown-outliers --from "$T/full" --budget 3 --verify --out-dir "$T/bad2"
no_file "allocate with another model writes no --out-dir" "$T/bad2"
grep -q "is not the model $T/full/sensitivity.json measured ([0-9a-f]\{64\}, " "$T/err" \
    && pass "the refusal names sensitivity.json and its model's whole sha256" || fail "another model message" "$(cat "$T/err")"
# a hash that is not one (the CRC sealed again, so the reader's own check answers)
mkdir "$T/badsha" && cp "$T/full/sensitivity.json" "$T/badsha/"
sed -i 's/"model_sha256": "\(.\{40\}\)./"model_sha256": "\1m/' "$T/badsha/sensitivity.json" && python3 tests/journal_seal.py "$T/badsha/sensitivity.json"
expect_exit "allocate from a sensitivity whose model_sha256 is not hex: exit 2" 2 ./run allocate $M --from "$T/badsha" --budget 3
grep -q "$T/badsha/sensitivity.json: \"model_sha256\" is not 64 lowercase hex digits" "$T/err" \
    && pass "a malformed model_sha256 is refused by name" || fail "malformed model_sha256 message" "$(cat "$T/err")"
expect_exit "allocate --from a directory without a sensitivity: exit 2" 2 ./run allocate $M --from "$T/nope" --budget 3
expect_exit "allocate --verify without --out-dir: exit 2" 2 ./run allocate $M --from "$T/full" --budget 3 --verify
expect_exit "sensitivity --candidates '': exit 2" 2 ./run sensitivity $M $W --candidates '' --out-dir "$T/bad3"
expect_exit "sensitivity with an unknown candidate: exit 2" 2 ./run sensitivity $M $W --candidates tq3,int5-g64 --out-dir "$T/bad3"
expect_exit "sensitivity with a candidate twice: exit 2" 2 ./run sensitivity $M $W --candidates 'tq3, tq3' --out-dir "$T/bad3"
expect_exit "sensitivity with a per-layer candidate: exit 2" 2 ./run sensitivity $M $W --candidates 'fp32;1:tq3' --out-dir "$T/bad3"
expect_exit "sensitivity with a candidate the model cannot hold (int4-g128, head_dim 64): exit 2" 2 ./run sensitivity $M $W --candidates int4-g128 --out-dir "$T/bad3"
no_file "refused sensitivities write no --out-dir" "$T/bad3"
mkdir "$T/nocal" && cp $M/config.json $M/model.safetensors $M/tokenizer.bin "$T/nocal/"
expect_exit "sensitivity with a fitted candidate (nuq2-g64) and no calibration: exit 2" 2 ./run sensitivity "$T/nocal" $W --candidates tq3,nuq2-g64 --out-dir "$T/bad4"
grep -q "needs a calibration" "$T/err" && pass "the refusal says the fitted candidate needs a calibration" || fail "no calibration message" "$(cat "$T/err")"
no_file "a sensitivity refused for want of a calibration writes no --out-dir" "$T/bad4"
expect_exit "sensitivity with other candidates on an existing out dir: exit 2" 2 ./run sensitivity $M $W --candidates tq3 --out-dir "$T/full" --quiet

# --- held out or not: a sensitivity with a calibration fitted on the very text it measures says NOT
# held out (sensitivity.md's header, sensitivity.json false, the heatmap's title), sweep-merge of its
# shards too; on another text held out (true; the Markdown as before). allocate says what the
# sensitivity.json recorded (one of before the record, tests/fixtures/sensitivity-v2: not recorded, null), and --verify
# its own sweep's, on wiki.test (true) and on the calibration's text (false, and a sentence).
head -c 20000 data/wikitext-2-raw/wiki.valid.raw >"$T/own.txt"
OWN_SHA=$(sha256sum "$T/own.txt" | cut -c1-64)
CAL="$T/own-calib.safetensors"
HW="--ctx 64 --stride 32 --windows 2 --candidates nuq2-g64,int4-g64 --quiet --calib $CAL"
expect_exit "held out: calibrate on a 20 kB text for the sensitivity (256 tokens, ctx 64)" 0 ./run calibrate $M --text-file "$T/own.txt" \
    --tokens 256 --ctx 64 --fit nuq2-g64 --out "$CAL" --quiet
# sens_held NAME DIR WANT: DIR's sensitivity.md, sensitivity.json and sensitivity.svg say WANT (false or true)
sens_held() {
    python3 - "$2" "$3" "$OWN_SHA" <<'PY' && pass "$1" || fail "$1" "see above"
import json, sys
d, want, sha = sys.argv[1], sys.argv[2] == "true", sys.argv[3]
j = json.load(open(d + "/sensitivity.json"))
head = open(d + "/sensitivity.md").read().split("\n\n")[0]
bad = []
if j.get("calib_held_out", "absent") is not want or j.get("calib_text_sha256") != sha: bad.append("sensitivity.json %r" % j.get("calib_held_out", "absent"))
if ("fitted on this very text: NOT held out" in head) == want or (want and "held out" in head): bad.append("sensitivity.md: " + head[-300:])
if ("calibration NOT held out" in open(d + "/sensitivity.svg").read()) == want: bad.append("sensitivity.svg title")
if bad: print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
}
expect_exit "held out: a sensitivity on the calibration's own text" 0 ./run sensitivity $M $HW --text-file "$T/own.txt" --out-dir "$T/hown"
sens_held "held out: the sensitivity on the calibration's own text says NOT held out (sensitivity.md, .json false, .svg)" "$T/hown" false
expect_exit "held out: the sensitivity on wiki.test" 0 ./run sensitivity $M $HW --text-file data/wikitext-2-raw/wiki.test.raw --out-dir "$T/hheld"
sens_held "held out: the sensitivity on wiki.test says held out (sensitivity.json true; sensitivity.md says nothing of it)" "$T/hheld" true
expect_exit "held out: sensitivity shard 0/2 on the calibration's own text" 0 ./run sensitivity $M $HW --text-file "$T/own.txt" --out-dir "$T/hown0" --shard 0/2
expect_exit "held out: sensitivity shard 1/2" 0 ./run sensitivity $M $HW --text-file "$T/own.txt" --out-dir "$T/hown1" --shard 1/2
expect_exit "held out: sweep-merge of the sensitivity's shards" 0 ./run sweep-merge "$T/hown0" "$T/hown1" --out-dir "$T/hownm"
sens_held "held out: the merged sensitivity says NOT held out, as its shards recorded" "$T/hownm" false
# allocate: what the sensitivity recorded, and --verify's own
expect_exit "held out: allocate from the sensitivity on the calibration's own text" 0 ./run allocate $M --from "$T/hown" --budget 3
grep -q "The sensitivity's calibration (sha256 [0-9a-f]\{12\}...), fitted on this very text: NOT held out." "$T/out" &&
    pass "held out: allocate says the sensitivity's calibration was NOT held out" || fail "held out: allocate says the sensitivity's calibration was NOT held out" "$(head -c 600 "$T/out")"
expect_exit "held out: allocate --verify on wiki.test" 0 ./run allocate $M --from "$T/hown" --budget 3 --verify --out-dir "$T/hv" --windows 1 --quiet --calib "$CAL"
expect_exit "held out: allocate --verify on the calibration's own text" 0 ./run allocate $M --from "$T/hown" --budget 3 --verify --out-dir "$T/hvown" \
    --windows 1 --quiet --calib "$CAL" --text-file "$T/own.txt"
expect_exit "held out: allocate from a sensitivity of before the record (tests/fixtures/sensitivity-v2)" 0 ./run allocate $M --from tests/fixtures/sensitivity-v2 --budget 3 --json
cp "$T/out" "$T/committed.json"
python3 - "$T/hv" "$T/hvown" "$T/committed.json" "$OWN_SHA" <<'PY' && pass "held out: allocation.json/md: the sensitivity's calibration NOT held out (false), --verify on wiki.test held out (true, no sentence), on the calibration's text NOT (false, a sentence); a committed sensitivity.json of before the record: null" || fail "held out: allocation.json/md" "see above"
import json, sys
hv, hvown, committed, sha = sys.argv[1:]
bad = []
for d, want in [(hv, True), (hvown, False)]:
    j = json.load(open(d + "/allocation.json"))
    md = open(d + "/allocation.md").read()
    verify_par = md.split("Held-out check")[1].split("\n\n")[0]
    if j.get("sensitivity_calib_held_out", "absent") is not False or j.get("sensitivity_calib_text_sha256") != sha: bad.append(d + ": sensitivity_calib_held_out")
    if j["verify"].get("calib_held_out", "absent") is not want or j["verify"].get("calib_text_sha256") != sha: bad.append(d + ": verify calib_held_out")
    if ("fitted on this very text: NOT held out" in verify_par) == want: bad.append(d + ": allocation.md's verify paragraph " + verify_par[-200:])
    if "fitted on this very text: NOT held out" not in md.split("\n\n")[0]: bad.append(d + ": allocation.md's header")
c = json.load(open(committed))
if c.get("sensitivity_calib_held_out", "absent") is not None or c.get("sensitivity_calib_text_sha256") != "": bad.append("committed: %r" % c.get("sensitivity_calib_held_out", "absent"))
if bad: print("\n".join(bad))
sys.exit(1 if bad else 0)
PY
expect_exit "held out: allocate from a sensitivity of before the record, as text" 0 ./run allocate $M --from tests/fixtures/sensitivity-v2 --budget 3
grep -q "The sensitivity's calibration (sha256 a20ecfdd059e...), whether fitted on this very text not recorded" "$T/out" &&
    pass "held out: ... says whether it was held out is not recorded" || fail "held out: ... says whether it was held out is not recorded" "$(head -c 600 "$T/out")"
