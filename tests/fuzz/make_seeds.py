#!/usr/bin/env python3
"""tests/fuzz/make_seeds.py: writes the small seed corpora in tests/fuzz/corpus/<target>/
from the repo's real files (configs, tokenizer, KV-cache fixture). Run from the repo
root after `make` (the compressed KV seeds come from ./run compress); the output is committed, so this only needs rerunning when the formats change.
Seeds stay small (a few KB) so libFuzzer's default input length stays small too."""
import json
import os
import struct
import subprocess

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


def kv_fixture_small():
    """kv-mini-llama.safetensors cut down to layer 0 with 4 of its 38 positions:
    real header fields and metadata, real float data, 2 KB instead of 156 KB."""
    b = read("tests/fixtures/reference/kv-mini-llama.safetensors")
    n = struct.unpack("<Q", b[:8])[0]
    h = json.loads(b[8:8 + n])
    meta = dict(h["__metadata__"], seq_len="4", num_layers="1")
    meta["tokens"] = " ".join(meta["tokens"].split()[:4])
    data = b[8 + n:]
    out = []
    for name in ("layer_0_key", "layer_0_value"):
        begin = h[name]["data_offsets"][0]
        heads, head_dim, seq = 2, 64, 38
        rows = b""
        for head in range(heads):
            at = begin + head * seq * head_dim * 4
            rows += data[at:at + 4 * head_dim * 4]
        out.append((name, "F32", [1, heads, 4, head_dim], rows))
    return safetensors(out, meta), data


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
    for scheme, lz4 in (("int4-g64", True), ("int8-g64-asym", True), ("int4-g32", False), ("fp32", False)):
        dst = os.path.join(OUT, "fuzz_kvfile", f"compressed-{scheme}{'-lz4' if lz4 else ''}.safetensors")
        # exit 1 only means a quality threshold failed; the file is written either way
        subprocess.run(["./run", "compress", "-input", src, "-output", dst, "--kv-scheme", scheme]
                       + (["--lz4"] if lz4 else []), stdout=subprocess.DEVNULL, check=False)
        for side in (dst + ".metadata.json",):
            if os.path.exists(side):
                os.remove(side)
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

    put("fuzz_quant", "floats-kv", b"\x00" + kv_data[:1024])
    put("fuzz_quant", "floats-special", b"\x00" + struct.pack("<8f", float("nan"), float("inf"), -float("inf"),
        1e-45, -0.0, 65504.0, 7e4, 1e-8) + kv_data[:96])
    put("fuzz_quant", "small-values", b"\x02" + bytes(range(256)))
    put("fuzz_quant", "packed", b"\x01" + kv_data[4096:4096 + 600])


if __name__ == "__main__":
    main()
