#!/bin/sh
# tests/test_cli_logits.sh: `./run logits` end to end on stories260K against the reference
# (tests/fixtures/reference/stories260K.json and .logits.f32): the raw file written by --out
# within 1e-4 of the reference logits (as tests/test_forward.c), and the printed top 5 of the last position equal to
# the reference's.
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
REF=tests/fixtures/reference
IDS=$(python3 -c "import json; print(','.join(map(str, json.load(open('$REF/stories260K.json'))['tokens'])))")

./run logits data/models/stories260K --tokens "$IDS" --out "$T/l.f32" 2>"$T/err"
./run logits data/models/stories260K --tokens "$IDS" >"$T/top5.txt" 2>>"$T/err"
if [ ! -s "$T/l.f32" ] || [ ! -s "$T/top5.txt" ]; then echo "FAIL logits ran: $(cat "$T/err")"; exit 1; fi
python3 - "$T/l.f32" "$T/top5.txt" "$REF" <<'PY'
import json, struct, sys
sys.path.insert(0, "tests")
from pycheck import max_abs_diff
got_path, top_path, ref = sys.argv[1:4]
meta = json.load(open(ref + "/stories260K.json"))
rows, vocab = meta["logits_shape"]
want = struct.unpack("<%df" % (rows * vocab), open(ref + "/stories260K.logits.f32", "rb").read())
raw = open(got_path, "rb").read()
n_tok = len(meta["tokens"])
if len(raw) != 4 * n_tok * vocab:
    print("FAIL logits --out file size: %d bytes for %d x %d" % (len(raw), n_tok, vocab))
else:
    got = struct.unpack("<%df" % (n_tok * vocab), raw)[-(rows * vocab):]
    worst = max_abs_diff(got, want)
    print(("PASS" if worst <= 1e-4 else "FAIL") + " logits --out matches the reference within 1e-4" +
          ("" if worst <= 1e-4 else ": max |dlogit| %.3g" % worst))
    print("     max |dlogit| %.3g (tolerance 1e-4)" % worst)
last = open(top_path).read().strip().splitlines()[-1].split(":")[1].split()[0::2]
ok = [int(x) for x in last] == meta["top5_last"]
print(("PASS" if ok else "FAIL") + " logits prints the reference's top 5 at the last position: %s" % " ".join(last))
PY
