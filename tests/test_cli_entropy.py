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
        check_files(tmp)
    return 0


def check_files(tmp):
    """compress --entropy on ~1,000 positions of wiki.test (both models): decompress gives the fixed-rate file's
    output byte for byte; coded bits within 2% of the entropy figure; the scalar schemes' whole files smaller;
    --entropy with --lz4, and a damaged file, exit 2 with one line and nothing written."""
    text = open(TEXT, encoding="utf-8").read(3550)   # 1,017 tokens on the bundled tokenizer
    rows, bad, bigger = 0, [], []
    for m in ["mini-llama-brown", "mini-llama-brown-outliers"]:
        model, cache = f"data/models/{m}", os.path.join(tmp, f"{m}.st")
        calib = ["--calib", f"{model}/kv-calib.safetensors"]
        p = run(["kv-extract", model, "-i", text, "-o", cache])
        if p.returncode != 0:
            bad.append(p.stderr[:200])
            continue
        for scheme in ["int4-g64", "q4_0+had", "tq3", "nuq3-g64", "vq8-d4", "pca2+aw"]:
            out = {}
            for mode in ["fixed", "entropy"]:
                f = os.path.join(tmp, f"{mode}.st")
                p = run(["compress", "-input", cache, "-output", f, "--kv-scheme", scheme] + calib +
                        (["--entropy"] if mode == "entropy" else []))
                d = run(["decompress", "-input", f, "-output", f + ".out"] + calib)
                out[mode] = (json.loads(p.stdout) if p.stdout.startswith("{") else None, d.returncode,
                             open(f + ".out", "rb").read() if d.returncode == 0 else b"", os.path.getsize(f))
            (fj, fd, fo, fsize), (ej, ed, eo, esize) = out["fixed"], out["entropy"]
            if ej is None or fd or ed or fo != eo:
                bad.append(f"{m} {scheme}: decompress differs or failed")
                continue
            rows += 1
            if not ej["coded_bits_per_value"] <= 1.02 * ej["entropy_bits_per_value"]:
                bad.append(f"{m} {scheme}: coded {ej['coded_bits_per_value']} vs entropy {ej['entropy_bits_per_value']}")
            if scheme in ("int4-g64", "q4_0+had", "tq3") and esize >= fsize:
                bigger.append(f"{m} {scheme}: {esize} >= {fsize}")
    check(rows == 12 and not bad, "entropy: compress --entropy on 1,017 positions, 6 schemes x 2 models: decompress "
          "byte-identical to the fixed-rate file's, coded bits within 2% of the entropy figure", "; ".join(bad[:3]))
    check(rows == 12 and not bigger, "entropy: int4-g64, q4_0+had, tq3: the entropy-coded file, tables included, is "
          "smaller than the fixed-rate one", "; ".join(bigger))
    cache = os.path.join(tmp, "mini-llama-brown.st")
    target = os.path.join(tmp, "both.st")
    p = run(["compress", "-input", cache, "-output", target, "--entropy", "--lz4"])
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and not os.path.exists(target),
          "entropy: --entropy with --lz4 exits 2, one line, nothing written", p.stderr[:200])
    good = os.path.join(tmp, "good.st")
    made = run(["compress", "-input", cache, "-output", good, "--entropy"])
    info = run(["kv-info", good, "--json"])
    ok = made.stdout.startswith("{") and info.returncode == 0
    if ok:
        c, bits = json.loads(made.stdout), json.loads(info.stdout)["bits"]
        mean = lambda key: sum(b[f"k_{key}"] + b[f"v_{key}"] for b in bits) / (2 * len(bits))
        ok = (abs(mean("entropy") - c["entropy_bits_per_value"]) < 1e-9 and
              abs(mean("coded") - c["coded_bits_per_value"]) < 1e-9 and
              all(b["k_entropy"] <= b["k_coded"] < b["k_stored"] for b in bits))
    check(ok, "entropy: kv-info's per-layer bits of an entropy-coded file average to compress's figures "
          "(entropy <= coded < stored)", info.stderr[:200])
    data = bytearray(open(good, "rb").read())
    data[len(data) - 100] ^= 0x04   # inside the last tensor's entropy-coded sections
    damaged, target = os.path.join(tmp, "damaged.st"), os.path.join(tmp, "from-damaged.st")
    open(damaged, "wb").write(bytes(data))
    p = run(["decompress", "-input", damaged, "-output", target])
    check(p.returncode == 2 and p.stderr.count("\n") == 1 and "CRC-32C" in p.stderr and not os.path.exists(target),
          "entropy: a damaged entropy-coded file: exit 2, one line naming the CRC, nothing written", p.stderr[:200])


if __name__ == "__main__":
    main()
    import pycheck
    sys.exit(1 if pycheck.failures else 0)
