#!/usr/bin/env python3
"""tests/test_cli_entropy.py: the entropy bits per value (SCHEMES.md §9) of real runs through ./run (from the
repo root; prints PASS/FAIL lines).

- On both bundled models, one sweep of many schemes over one window of wiki.test: every configuration's keys
  and values carry an entropy figure above 0 and at most their effective bits (+1e-9): entropy coding never
  costs more than the fixed-rate codes; fp16 is exactly 16 (no code streams: its stored bits).
- ./run ppl of one scheme gives the sweep's figure for it (the same window, the same cache).
- ppl --shard 0/2 and 1/2 merged by ppl-merge give the unsharded run's figure (sums of bits and values,
  each window's cache counted apart).
- A sensitivity cell's entropy bits are its own layer's: from ppl --k-scheme 'fp32;L:C', whose other layers
  are fp32 (32 bits a value), the same figure by arithmetic.
"""
import json
import os
import subprocess
import sys
import tempfile

from pycheck import check

RUN = "./run"
TEXT = "data/wikitext-2-raw/wiki.test.raw"
WINDOW = ["--text-file", TEXT, "--ctx", "512", "--stride", "512", "--quiet", "--no-layer-error"]
SCHEMES = ["int4-g64", "q4_0+had", "tq3", "nuq3-g64", "vq8-d4", "fp8-e4m3", "q8_0", "iq4_nl", "nf4-g64+sink4",
           "int2-t32-asym+res128", "int3-g64+out1", "tq2:int2-g64+had", "fp16"]


def run(args):
    return subprocess.run([RUN] + args, capture_output=True, text=True, timeout=600)


def sweep_json(model, out):
    args = ["sweep", model, "--windows", "1", "--out-dir", out] + WINDOW
    for s in SCHEMES:
        args += ["--config", s]
    p = run(args)
    if p.returncode != 0:
        return None, p.stderr
    return json.load(open(os.path.join(out, "results.json"))), ""


def check_bounds(model, res):
    name = os.path.basename(model)
    bad, fp16 = [], None
    for c in res["configs"]:
        for side in "kv":
            e, eff = c[f"{side}_entropy_bits"], c[f"{side}_effective_bits"]
            if not (0 < e <= eff + 1e-9):
                bad.append(f"{c['k_scheme']}:{c['v_scheme']} {side} entropy {e} effective {eff}")
        if c["k_scheme"] == "fp16":
            fp16 = (c["k_entropy_bits"], c["v_entropy_bits"])
    check(not bad and len(res["configs"]) == len(SCHEMES),
          f"entropy: {name}: 0 < entropy bits <= effective bits for {len(SCHEMES)} configurations, keys and values",
          "; ".join(bad[:3]))
    check(fp16 == (16.0, 16.0), f"entropy: {name}: fp16 counts exactly 16 bits", str(fp16))
    return {(c["k_scheme"], c["v_scheme"]): c for c in res["configs"]}


def ppl_json(model, extra):
    p = run(["ppl", model, "--json"] + WINDOW + extra)
    return (json.loads(p.stdout), "") if p.returncode == 0 else (None, p.stderr)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


def main():
    models = ["data/models/mini-llama-brown", "data/models/mini-llama-brown-outliers"]
    configs = None
    with tempfile.TemporaryDirectory() as tmp:
        for i, m in enumerate(models):
            res, why = sweep_json(m, os.path.join(tmp, f"sweep{i}"))
            check(res is not None, f"entropy: the sweep on {os.path.basename(m)} runs", why[:300])
            if res is not None:
                got = check_bounds(m, res)
                configs = configs or got
        m = models[0]
        one, why = ppl_json(m, ["--windows", "1", "--kv-scheme", "vq8-d4"])
        want = configs and configs.get(("vq8-d4", "vq8-d4"))
        check(one is not None and want is not None and
              rel(one["k_entropy_bits"], want["k_entropy_bits"]) < 1e-12 and
              rel(one["v_entropy_bits"], want["v_entropy_bits"]) < 1e-12,
              "entropy: ppl's figure for vq8-d4 is the sweep's", why[:300] or f"{one and one['k_entropy_bits']} vs {want and want['k_entropy_bits']}")
        whole, why = ppl_json(m, ["--windows", "2", "--kv-scheme", "tq3", "--no-compare"])
        paths = []
        for shard in range(2):
            part, why2 = ppl_json(m, ["--windows", "2", "--kv-scheme", "tq3", "--no-compare", "--shard", f"{shard}/2"])
            if part is not None:
                paths.append(os.path.join(tmp, f"shard{shard}.json"))
                json.dump(part, open(paths[-1], "w"))
        p = run(["ppl-merge", "--json"] + paths) if len(paths) == 2 else None
        merged = json.loads(p.stdout) if p is not None and p.returncode == 0 else None
        check(whole is not None and merged is not None and
              all(rel(merged[k], whole[k]) < 1e-12 for k in ("k_entropy_bits", "v_entropy_bits")) and
              whole["k_entropy_bits"] != whole["v_entropy_bits"],
              "entropy: two shards merged give the whole run's figure (tq3, 2 windows)",
              (why + (p.stderr if p else ""))[:300] or f"{merged and merged['k_entropy_bits']} vs {whole['k_entropy_bits']}")
        sens_dir = os.path.join(tmp, "sens")
        p = run(["sensitivity", m, "--candidates", "tq3", "--windows", "1", "--out-dir", sens_dir] + WINDOW[:-1])
        cells = json.load(open(os.path.join(sens_dir, "sensitivity.json")))["cells"] if p.returncode == 0 else []
        layers = len(cells) // 2
        cell = next((c for c in cells if c["side"] == "K" and c["layer"] == 2), None)
        layer_ppl, why = ppl_json(m, ["--windows", "1", "--k-scheme", "fp32;2:tq3"])
        ok = cell is not None and layer_ppl is not None
        if ok:
            want_cell = layers * layer_ppl["k_entropy_bits"] - 32 * (layers - 1)
            ok = rel(cell["entropy_bits"], want_cell) < 1e-9 and 0 < cell["entropy_bits"] < 3.25
        check(ok, "entropy: a sensitivity cell's figure is its layer's (ppl --k-scheme 'fp32;2:tq3')",
              (p.stderr + why)[:300] or f"{cell and cell['entropy_bits']}")
    return 0


if __name__ == "__main__":
    main()
    import pycheck
    sys.exit(1 if pycheck.failures else 0)
