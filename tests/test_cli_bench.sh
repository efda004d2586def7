#!/bin/sh
# tests/test_cli_bench.sh: `./run bench` end to end on the bundled mini-llama-brown (tiny sizes,
# one repeat: this checks what the bench reports, not how fast anything is) and its bad-input
# paths: exit 2 with one line on stderr.
. tests/cli_helpers.sh
M=data/models/mini-llama-brown

SMALL="-p 32 -n 4 --ctx 64 --repeat 1"

# --- JSON, with the machine probes: every figure present and sane, the weight bytes as the
# config says (counted here from config.json, independently of the C code)
expect_exit "bench --json" 0 ./run bench $M $SMALL --json
cp "$T/out" "$T/probed.json"
expect_exit "bench --json --no-probe" 0 ./run bench $M $SMALL --json --no-probe
cp "$T/out" "$T/unprobed.json"
python3 - "$T/probed.json" "$T/unprobed.json" "$M/config.json" <<'PY'
import json, math, sys
probed, unprobed, cfg = (json.load(open(p)) for p in sys.argv[1:4])

def check(ok, name, why=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + why))

phases = ["prefill", "decode", "decode_long_fp32", "decode_long_quant"]
for name, r in (("probed", probed), ("--no-probe", unprobed)):
    ok = all(p in r and math.isfinite(r[p]["tok_s"]) and 0 < r[p]["tok_s_min"] <= r[p]["tok_s"] <= r[p]["tok_s_max"]
             for p in phases)
    check(ok, f"bench {name}: every phase has tokens/s with min <= median <= max", json.dumps(r)[:300])
    check(r["prompt"] == 32 and r["gen"] == 4 and r["long_ctx"] == 64, f"bench {name}: the sizes asked for")
    check(r["peak_rss_mib"] > 0, f"bench {name}: peak RSS reported")

d, h, L, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"], cfg["vocab_size"]
kv = d // cfg["num_attention_heads"] * cfg["num_key_value_heads"]
want = (L * (2 * d * d + 2 * d * kv + 3 * d * h) + V * d) * 2   # BF16: 2 bytes per weight
check(probed["weight_bytes"] == want, "bench: weight bytes = every layer matrix + lm_head",
      f"{probed['weight_bytes']} vs {want}")

check(probed["peak_f32_gflops"] > 0 and probed["peak_read_gbytes"] > 0, "bench: machine probes measured")
# No phase can beat the FMA units: a probe that reads below their rate (one that kept its sums on the
# stack read 0.45 of it on Zen 3) would make a phase's share of the peak pass 1 once the phase nears it.
ok = all(0 < probed[p]["gflops_frac"] <= 1.0 for p in phases)
check(ok, "bench: every phase's GFLOP/s within the FMA probe's peak", str([probed[p]["gflops_frac"] for p in phases]))
ok = all(probed[p]["gbytes_alongside_frac"] > 0 and math.isfinite(probed[p]["gbytes_alongside_frac"])
         for p in phases[1:])
check(ok, "bench: every decode phase has its rate next to a read pass of the same weights")
check(probed["prefill"]["gbytes_alongside_frac"] == 0, "bench: prefill has no paired read rate (compute-bound)")
ok = unprobed["peak_f32_gflops"] == 0 and unprobed["peak_read_gbytes"] == 0 and \
     all(unprobed[p]["gbytes_alongside_frac"] == 0 for p in phases)
check(ok, "bench --no-probe: no probe figures")
PY

# --- text output: the paired figure and its legend
expect_exit "bench text" 0 ./run bench $M $SMALL
grep -q "alongside\]" "$T/out" && grep -q "^           \[alongside\]: " "$T/out" && pass "bench text: paired read figure and its legend" \
    || fail "bench text: paired read figure" "$(cat "$T/out")"
# peak RSS says what it measures: the runs' high-water mark, before the memory probe's 512 MiB,
# which the whole process's peak (its rusage from wait4, as /usr/bin/time -v reads it) includes
python3 - "$M" "$SMALL" <<'PY'
import os, re, subprocess, sys
p = subprocess.Popen(["./run", "bench", sys.argv[1]] + sys.argv[2].split(), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
out = p.stdout.read().decode()
_, status, usage = os.wait4(p.pid, 0)
whole = usage.ru_maxrss / 1024.0
m = re.search(r"^peak RSS:  (\d+) MiB of the runs \(the process's high-water mark before the memory probe's 512 MiB "
              r"buffer, which /usr/bin/time -v counts too\)$", out, re.M)
ok = status == 0 and m is not None and whole - int(m.group(1)) >= 400
print(("PASS" if ok else "FAIL") + " bench text: peak RSS is the runs' (before the probe's 512 MiB), the whole process's "
      "peak that plus the probe" + ("" if ok else ": %s; whole process %.0f MiB" % (m and m.group(0), whole)))
PY

# --- bad input
expect_exit "bench -p 0" 2 ./run bench $M -p 0
expect_exit "bench: prompt + gen past the model's positions" 2 ./run bench $M -p 1000 -n 100
expect_exit "bench: unknown flag" 2 ./run bench $M --bogus
expect_exit "bench: missing model directory" 2 ./run bench "$T/nowhere"
expect_exit "bench: --random with an unknown name" 2 ./run bench --random gpt5

# --- --random CONFIG: a config.json, or the directory that holds it, gives random weights of
# that shape: the same weight bytes as the real model's in that dtype
TINY="-p 8 -n 2 --ctx 0 --repeat 1 --no-probe --json"
expect_exit "bench --random DIR" 0 ./run bench --random $M --dtype f32 $TINY
cp "$T/out" "$T/random_dir.json"
expect_exit "bench --random CONFIG.json" 0 ./run bench --random $M/config.json --dtype f32 $TINY
cp "$T/out" "$T/random_file.json"
expect_exit "bench MODEL_DIR (for --random's weight bytes)" 0 ./run bench $M $TINY
python3 - "$T/random_dir.json" "$T/random_file.json" "$T/out" <<'PY'
import json, sys
d, f, real = (json.load(open(p)) for p in sys.argv[1:4])
real_f32 = real["weight_bytes"] * 4 // {"F32": 4, "F16": 2, "BF16": 2}[real["dtype"]]
ok = d["dtype"] == f["dtype"] == "F32" and d["weight_bytes"] == f["weight_bytes"] == real_f32
print(("PASS" if ok else "FAIL") + " bench --random DIR and --random CONFIG.json: the real model's shape"
      + ("" if ok else f": {d['weight_bytes']} {f['weight_bytes']} {real_f32}"))
PY

# --- the ppl path (--ppl): its rates, its ratio to prefill and the projection, all consistent
expect_exit "bench --ppl --json" 0 ./run bench $M -p 32 -n 4 --ctx 128 --repeat 1 --no-probe --ppl --ppl-windows 3 --json
# Every figure is checked at the resolution it is printed with (a ratio of 0.0193 printed as %.4f
# is 0.5% uncertain): tests/pycheck.py's Printed carries each figure's half unit, and a ratio must
# agree with the quotient of its printed parts over the whole range they stand for.
python3 - "$T/out" <<'PY'
import json, math, sys
sys.path.insert(0, "tests")
from pycheck import Printed, agrees, bounds, quotient_bounds
r = json.load(open(sys.argv[1]), parse_float=Printed)
p = r.get("ppl", {})

def ratio_ok(ratio, num, den):
    return agrees(p[ratio], *quotient_bounds(p[num], p[den]))

def pooled_ok(nums, dens):
    lo = sum(bounds(p[k])[0] for k in nums) / sum(bounds(p[k])[1] for k in dens)
    hi = sum(bounds(p[k])[1] for k in nums) / sum(bounds(p[k])[0] for k in dens)
    return agrees(p["pooled_ratio_to_prefill"], lo, hi)

def seconds_ok(seconds, positions, rate):   # full_pass_s = positions / positions/s
    lo, hi = quotient_bounds(positions, p[rate])
    return agrees(p[seconds], lo, hi)

ok = p.get("ctx") == 128 and p.get("stride") == 128 and p.get("windows") == 3 and p.get("batch") == 512 \
    and p["positions_per_s"] > 0 and p["compared_positions_per_s"] > 0 \
    and p["prefill_alongside_tok_s"] > 0 and p["prefill_alongside_compared_tok_s"] > 0 \
    and ratio_ok("ratio_to_prefill", "positions_per_s", "prefill_alongside_tok_s") \
    and ratio_ok("compared_ratio_to_prefill", "compared_positions_per_s", "prefill_alongside_compared_tok_s") \
    and p["full_pass_positions"] == 128 * (math.ceil((341469 - 128) / 128) + 1) \
    and seconds_ok("full_pass_s", p["full_pass_positions"], "positions_per_s") \
    and seconds_ok("full_pass_compared_s", 2 * p["full_pass_positions"], "compared_positions_per_s") \
    and r["long_kv_scheme"] == "int4-g64" and p["scheme_compared_positions_per_s"] > 0 \
    and p["prefill_alongside_scheme_tok_s"] > 0 \
    and ratio_ok("scheme_compared_ratio_to_prefill", "scheme_compared_positions_per_s", "prefill_alongside_scheme_tok_s")
ok = ok and pooled_ok(["positions_per_s", "compared_positions_per_s", "scheme_compared_positions_per_s"],
                      ["prefill_alongside_tok_s", "prefill_alongside_compared_tok_s", "prefill_alongside_scheme_tok_s"])
print(("PASS " if ok else "FAIL ") + "bench --ppl: positions/s alone, compared and with the long scheme's cache compared, ratios to the prefills timed between each run's windows and pooled over the runs, full-pass projection (each at its printed resolution)" +
      ("" if ok else ": " + json.dumps(p)))
PY
# its progress on stderr: a line per repetition and per ppl window, each with the time left, which
# the last line puts at zero only if the positions counted as done add up to the positions planned
python3 - "$T/err" 3 <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
runs = int(sys.argv[2])
names = ["fp32 cache", "fp32 cache compared", "long scheme compared"][:runs]
want = ["repetition 1/1 done"] + [f"ppl {i + 1}/{runs}, {n}, window {w}/3" for i, n in enumerate(names) for w in (1, 2, 3)]
form = re.compile(r"^bench: (.*) \((\d+h)?\d+m\d\ds in\), about ((\d+h)?\d+m\d\ds|\?) left$")
got = [form.match(l) for l in lines]
ok = len(lines) == len(want) and all(got) and [g.group(1) for g in got] == want and lines[-1].endswith("about 0m00s left")
print(("PASS " if ok else "FAIL ") + "bench --ppl: a line per repetition and ppl window on stderr, the last with no time left" +
      ("" if ok else ": " + repr(lines)))
PY
expect_exit "bench --ppl --quiet" 0 ./run bench $M -p 32 -n 4 --ctx 128 --repeat 1 --no-probe --ppl --ppl-windows 2 --quiet --json
[ ! -s "$T/err" ] && pass "bench --quiet: nothing on stderr" || fail "bench --quiet: nothing on stderr" "$(head -c 300 "$T/err")"
expect_exit "bench --ppl with a long scheme the model cannot hold" 0 ./run bench $M -p 32 -n 4 --ctx 128 --repeat 1 --no-probe --ppl --ppl-windows 2 --long-scheme int4-g128 --json
python3 - "$T/out" <<'PY'
import json, sys
sys.path.insert(0, "tests")
from pycheck import Printed, agrees, bounds
p = json.load(open(sys.argv[1]), parse_float=Printed)["ppl"]
nums, dens = ["positions_per_s", "compared_positions_per_s"], ["prefill_alongside_tok_s", "prefill_alongside_compared_tok_s"]
lo = sum(bounds(p[k])[0] for k in nums) / sum(bounds(p[k])[1] for k in dens)
hi = sum(bounds(p[k])[1] for k in nums) / sum(bounds(p[k])[0] for k in dens)
ok = p["compared_positions_per_s"] > 0 and p["scheme_compared_positions_per_s"] == 0 and p["prefill_alongside_scheme_tok_s"] == 0 \
    and agrees(p["pooled_ratio_to_prefill"], lo, hi)
print(("PASS " if ok else "FAIL ") + "bench --ppl: no scheme run when the long scheme does not fit the heads (reported as 0, the pooled ratio of the other two)" + ("" if ok else ": " + json.dumps(p)))
PY
expect_exit "bench --ppl-windows 1: exit 2" 2 ./run bench $M $SMALL --ppl-windows 1
