#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py: writes the small seed corpora in tests/fuzz/corpus/<target>/
from the repo's real files (configs, tokenizer, KV-cache fixture). Run from the repo
root after `make` (the compressed KV seeds come from ./run compress); the output is committed, so this only needs rerunning when the formats change.
Seeds stay small (a few KB) so libFuzzer's default input length stays small too."""
import json
import os
import shutil
import struct
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import compressed_seal  # noqa: E402  tests/compressed_seal.py: the checksums of calibration files too

OUT = "tests/fuzz/corpus"


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def read(path):
    with open(path, "rb") as f:
        return f.read()


def safetensors(tensors, meta=None):
    """tensors: list of (name, dtype, shape, bytes). Header padded to 8 like st_write."""
    header, data = {}, b""
    if meta is not None:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def kv_fixture_small(positions=4):
    """kv-mini-llama.safetensors cut down to layer 0 with 4 (or `positions`) of its 38
    positions: real header fields and metadata, real float data, 2 KB instead of 156 KB."""
    b = read("tests/fixtures/reference/kv-mini-llama.safetensors")
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = dict(h["__metadata__"], seq_len=str(positions), num_layers="1")
    meta["tokens"] = " ".join(meta["tokens"].split()[:positions])
    data = b[8 + n:]
    out = []
    for name in ("layer_0_key", "layer_0_value"):
        begin = h[name]["data_offsets"][0]
        heads, head_dim, seq = 2, 64, 38
        rows = b""
        for head in range(heads):
            at = begin + head * seq * head_dim * 4
            rows += data[at:at + positions * head_dim * 4]
        out.append((name, "F32", [1, heads, positions, head_dim], rows))
    return safetensors(out, meta), data


def run_seeds():
    """fuzz_ppl_merge: the --json of two shards of a tiny ppl run, with and without the fp32
    comparison, joined by a NUL. fuzz_sweep_dir: a tiny sweep's sweep.json, a NUL, its journal."""
    tmp = "build/fuzz-seed-runs"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    model, window = "data/models/mini-llama-brown", ["--ctx", "32", "--stride", "16", "--windows", "2"]
    for name, extra in (("compared", []), ("no-compare", ["--no-compare"])):
        shards = [subprocess.run(["./run", "ppl", model, "--kv-scheme", "int4-g32", "--shard", f"{i}/2", "--json",
                                  "--quiet"] + window + extra, capture_output=True, check=True).stdout
                  for i in range(2)]
        put("fuzz_ppl_merge", f"shards-{name}.json", shards[0] + b"\0" + shards[1])
    out = os.path.join(tmp, "sweep")
    subprocess.run(["./run", "sweep", model, "--config", "int4-g32", "--config", "int8-g64:fp16", "--out-dir", out,
                    "--quiet"] + window, stdout=subprocess.DEVNULL, check=True)
    put("fuzz_sweep_dir", "sweep-2x2", read(f"{out}/sweep.json") + b"\0" + read(f"{out}/journal.jsonl"))
    put("fuzz_sweep_dir", "settings-only", read(f"{out}/sweep.json"))
    # 'R': the target leaves the checksums as they are (else it computes them again)
    put("fuzz_sweep_dir", "raw-sweep-2x2", b"R" + read(f"{out}/sweep.json") + b"\0" + read(f"{out}/journal.jsonl"))
    shutil.rmtree(tmp)


def as_format2(raw):
    """A kvq-compressed-3 file as format 2 wrote it: no checksums, no model identity. The fuzzer
    cannot keep a CRC right, so format-2 seeds are where it explores the decoding."""
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    meta = header["__metadata__"]
    for key in [k for k in meta if k.startswith("crc32c.") or k in ("header_crc32c", "model_id", "model_sha256")]:
        del meta[key]
    meta["format"] = "kvq-compressed-2"
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + raw[8 + n:]


def calibration_seeds():
    """fuzz_calibration: a small valid calibration (2 layers, 2 heads, 1 KV head, head_dim 4; fits
    nuq2-t8, vq2-d2, rvq2x2-d2 (a per-head table of stages), nuq3-t8+prerope with keys only: fit keys
    the codecs take at head_dim 4) and variants each broken in one way, 2.4 KB each,
    sealed with their checksums (model/formats/st_checksum.h) so that each reaches its own refusal."""
    sha = "36068468f272b799b51158bdcd14dab686b173603129268c69ac30d522c60034"
    meta = {"format": "kvq-calibration", "model_sha256": sha,
            "text_sha256": "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7",
            "tokens": "64", "ctx": "32"}

    def floats(values):
        return struct.pack(f"<{len(values)}f", *values)

    def small(nan=False, unsorted=False, drop=None, extra=None):
        tensors = []
        for layer in range(2):
            for stat, heads in (("q", 2), ("kpre", 1), ("k", 1), ("v", 1)):
                vals = [((i * 7 + layer) % 11) / 4 - (1.0 if i % 3 == 0 else 0.0) for i in range(heads * 4 * 3)]
                tensors.append((f"stats.{stat}.{layer}", "F32", [heads, 4, 3], floats(vals)))
            for side in "kv":
                table = [-0.8, -0.2, 0.25, 0.75]
                if unsorted and layer == 1 and side == "v":
                    table = [-0.8, 0.25, -0.2, 0.75]
                tensors.append((f"fit.nuq2-t8.{side}.{layer}", "F32", [4], floats(table)))
                book = [((i * 5) % 13) / 6 - 1 for i in range(16)]
                if nan and layer == 0 and side == "k":
                    book[9] = float("nan")
                tensors.append((f"fit.vq2-d2.{side}.{layer}", "F32", [1, 2, 4, 2], floats(book)))
                tensors.append((f"fit.rvq2x2-d2.{side}.{layer}", "F32", [1, 2, 2, 4, 2], floats(book + book[::-1])))
            tensors.append((f"fit.nuq3-t8+prerope.k.{layer}", "F32", [8], floats([j / 4 - 0.9 for j in range(8)])))
        tensors = [t for t in tensors if t[0] != drop]
        return compressed_seal.seal(safetensors(tensors, dict(meta, **(extra or {}))))   # a calibration's checksums

    put("fuzz_calibration", "small.safetensors", small())
    put("fuzz_calibration", "small-made-by.safetensors", small(extra={"made_by": "make_seeds.py"}))
    put("fuzz_calibration", "small-nan.safetensors", small(nan=True))
    put("fuzz_calibration", "small-unsorted.safetensors", small(unsorted=True))
    put("fuzz_calibration", "small-missing-side.safetensors", small(drop="fit.nuq2-t8.v.1"))
    put("fuzz_calibration", "small-other-model.safetensors", small(extra={"model_sha256": "0" * 64}))
    put("fuzz_calibration", "small-format.safetensors", small(extra={"format": "kvq-compressed-2"}))


def main():
    configs = ["stories260K", "mini-llama-brown", "random-gqa8"]
    for m in configs:
        cfg = read(f"data/models/{m}/config.json")
        put("fuzz_config", f"{m}.json", cfg)
        put("fuzz_json", f"config-{m}.json", cfg)
    put("fuzz_config", "minimal.json", '{"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,'
        '"num_attention_heads":2,"vocab_size":4,"max_position_embeddings":8}')

    kv, kv_data = kv_fixture_small()
    put("fuzz_safetensors", "kv-mini-llama-cut.safetensors", kv)
    put("fuzz_kvfile", "kv-mini-llama-cut.safetensors", kv)
    src = os.path.join(OUT, "fuzz_kvfile", "kv-mini-llama-cut.safetensors")
    # a 10-position cut (not committed) so that a token-axis group of 8 fills one unit
    src10 = "build/kv-mini-llama-cut10.safetensors"
    os.makedirs("build", exist_ok=True)
    with open(src10, "wb") as f:
        f.write(kv_fixture_small(10)[0])
    # compressed files, as format 2 (compressed-NAME) and for two of them as written, format 3
    # (compressed-v3-NAME, checksums and all): name, input, compress flags
    for name, cut, flags in (
            ("int4-g64-lz4", src, ["--kv-scheme", "int4-g64", "--lz4"]),
            ("int8-g64-asym-lz4", src, ["--kv-scheme", "int8-g64-asym", "--lz4"]),
            ("int4-g32", src, ["--kv-scheme", "int4-g32"]),
            ("fp32", src, ["--kv-scheme", "fp32"]),
            ("int4-g32-res1-sink1", src, ["--kv-scheme", "int4-g32+res1+sink1"]),
            ("int3-g64-had-out2", src, ["--kv-scheme", "int3-g64+had+out2"]),
            ("k-int4-t8-v-int2-t8-asym", src10, ["--k-scheme", "int4-t8", "--v-scheme", "int2-t8-asym+res1"]),
            ("layered-lz4", src, ["--k-scheme", "int2-g64;0:int8-g64", "--v-scheme", "bf16", "--lz4"]),
            ("int4-g128-flat", src, ["--kv-scheme", "int4-g128"])):
        dst = os.path.join(OUT, "fuzz_kvfile", f"compressed-{name}.safetensors")
        # exit 1 only means a quality threshold failed; the file is written either way
        r = subprocess.run(["./run", "compress", "-input", cut, "-output", dst] + flags,
                           stdout=subprocess.DEVNULL, check=False)
        assert r.returncode in (0, 1) and os.path.exists(dst), f"compress {name} failed"
        for side in (dst + ".metadata.json",):
            if os.path.exists(side):
                os.remove(side)
        if name in ("int4-g64-lz4", "int4-g32-res1-sink1"):
            put("fuzz_kvfile", f"compressed-v3-{name}.safetensors", read(dst))
        v2 = as_format2(read(dst))
        with open(dst, "wb") as f:
            f.write(v2)
    # entropy-coded files, format 4, as written (compressed-v4-NAME): sections, tables, CRCs
    for name, flags in (("entropy-int4-g32", ["--kv-scheme", "int4-g32", "--entropy"]),
                        ("entropy-res-tq2", ["--k-scheme", "int4-g32+res1+sink1", "--v-scheme", "tq2", "--entropy"])):
        dst = os.path.join(OUT, "fuzz_kvfile", f"compressed-v4-{name}.safetensors")
        r = subprocess.run(["./run", "compress", "-input", src, "-output", dst] + flags, stdout=subprocess.DEVNULL,
                           check=False)
        assert r.returncode in (0, 1) and os.path.exists(dst), f"compress {name} failed"
        if os.path.exists(dst + ".metadata.json"):
            os.remove(dst + ".metadata.json")
    os.remove(src10)
    n = struct.unpack("<Q", kv[:8])[0]
    put("fuzz_json", "kv-header.json", kv[8:8 + n])
    put("fuzz_json", "metadata.json", read("tests/fixtures/reference/kv-mini-llama.safetensors.metadata.json"))
    put("fuzz_json", "escapes.json", '["a\\"b\\\\\\/\\b\\f\\n\\r\\t", "\\u00e9\\ud83d\\ude00", -0.5e-3, 1E+2, '
        'true, false, null, {"": {}}, [[[]]], "caf\xc3\xa9"]'.encode("latin-1"))
    put("fuzz_safetensors", "dtypes.safetensors", safetensors(
        [("b", "BF16", [2], b"\x80\x3f\x00\x40"), ("h", "F16", [1, 1], b"\x00\x3c"),
         ("e", "F32", [0, 3], b""), ("s", "I64", [], struct.pack("<q", -1)),
         ("u", "U8", [3], b"xyz")], {"format": "pt"}))
    put("fuzz_safetensors", "empty.safetensors", safetensors([]))

    tok = read("data/models/stories260K/tokenizer.bin")
    put("fuzz_tokenizer", "file-stories260K", b"\x00" + tok)
    put("fuzz_tokenizer", "text-plain", b"\x01Once upon a time, there was a little girl named Lily.\n")
    put("fuzz_tokenizer", "text-bos-mixed", "\x02  caf\u00e9 \u2581\u2581 <s> \U0001F600\t\n".encode() + b"\xff\xc3(")
    put("fuzz_tokenizer", "ids", b"\x03" + struct.pack("<8i", 1, 450, 4996, 13, 29871, 0, 31999, -1))

    text = read("data/models/stories260K/config.json")
    put("fuzz_lz4", "roundtrip-config", b"\x00" + text)
    put("fuzz_lz4", "roundtrip-floats", b"\x00" + kv_data[:2048])
    put("fuzz_lz4", "roundtrip-runs", b"\x00" + b"a" * 300 + b"abcabcabc" * 20 + bytes(range(40)))
    # literals "abcd", match offset 4 length 12, then 5 final literals; capacity byte 0xFF = 64 KiB
    put("fuzz_lz4", "block", b"\xff" + b"\x48abcd\x04\x00" + b"\x50XYZWV")

    # fuzz_scheme: byte 0 % 3 = mode (0 text, 1 floats, 2 unit bytes); see tests/fuzz/fuzz_scheme.c
    put("fuzz_scheme", "text-layered", b"\x00int2-g64;0:int8-g64;20-21:int4-g32-asym+had")
    put("fuzz_scheme", "text-modifiers", b"\x00int4-g32+had+prerope+out1+res16+sink2;1-3:int2-t32-asym+res128+sink4")
    put("fuzz_scheme", "text-floats", b"\x00fp16;0:bf16+had;1:fp32")
    put("fuzz_scheme", "text-refused", b"\x00int4-g64;;0:int5-g65+hadd")
    # floats: selector, width, raw (0) or small (1), then the values
    put("fuzz_scheme", "floats-kv", b"\x01\x05\x04\x00" + kv_data[:1024])
    put("fuzz_scheme", "floats-special", b"\x01\x06\x03\x00" + struct.pack(
        "<8f", float("nan"), float("inf"), -float("inf"), 1e-45, -0.0, 65504.0, 7e4, 1e-8) + kv_data[:96])
    put("fuzz_scheme", "small-values", b"\x01\x11\x04\x01" + bytes(range(256)))
    put("fuzz_scheme", "small-values-tokens", b"\x01\x17\x04\x01" + bytes(range(255, -1, -3)))
    # unit bytes: selector, width, first row, row count, then the bytes
    put("fuzz_scheme", "units", b"\x02\x05\x04\x00\x01" + kv_data[4096:4096 + 600])
    put("fuzz_scheme", "units-nan-scales", b"\x02\x09\x04\x01\x07" + b"\x9a" * 32 + b"\x00\x7e\x00\xfc\xc8")
    # fitted bases given a synthetic table (selectors 122-147 at this writing, after the plain specs):
    # 126 nuq3-g64, 144 vq12-d8, 134 nuq2-t64, 136 vq8-d4
    put("fuzz_scheme", "floats-fitted-nuq", b"\x01\x7e\x04\x00" + kv_data[:1024])
    put("fuzz_scheme", "small-values-fitted-vq", b"\x01\x90\x04\x01" + bytes(range(256)))
    put("fuzz_scheme", "small-values-fitted-tokens", b"\x01\x86\x04\x01" + bytes(range(255, -1, -3)))
    put("fuzz_scheme", "units-fitted", b"\x02\x88\x04\x00\x01" + kv_data[4096:4096 + 600])
    calibration_seeds()
    run_seeds()

if __name__ == "__main__":
    main()
