#!/usr/bin/env python3
"""tests/test_random_gguf.py: export/random_gguf.py writes a GGUF that llama.cpp can load.

The file is read back here with a reader written from ggml's GGUF spec (version 3: header, metadata,
tensor infos, aligned data), and checked against the source config and tokenizer: every tensor llama.cpp's
llama architecture loads, with its shape reversed into ggml order, BF16 matrices and F32 norms, offsets
aligned and back to back, the file ending at the last tensor; the hyperparameters and the vocabulary as given;
weights finite with a standard deviation near 0.02. Bad input exits 2 with one line and leaves no file."""
import json
import math
import os
import shutil
import struct
import subprocess
import sys
import tempfile

import pycheck  # tests/pycheck.py: this script's folder is on sys.path
from pycheck import check

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "export", "random_gguf.py")
MINI = os.path.join(ROOT, "data", "models", "mini-llama-brown")
TINYLLAMA = os.path.join(ROOT, "data", "tinyllama-1.1b-chat-v1.0")
sys.path.insert(0, os.path.join(ROOT, "export"))
import tokenizer_export  # noqa: E402

SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.data, self.pos)[0]
        self.pos += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.data[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def value(self, vtype):
        if vtype == 8:
            return self.string()
        if vtype == 9:
            elem, n = self.take("<I"), self.take("<Q")
            return [self.value(elem) for _ in range(n)]
        return self.take(SCALARS[vtype])


def read_gguf(path):
    with open(path, "rb") as f:
        data = f.read()
    r = Reader(data)
    magic = data[:4]
    r.pos = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    meta = {}
    for _ in range(n_kv):
        key = r.string()
        meta[key] = r.value(r.take("<I"))
    tensors = []
    for _ in range(n_tensors):
        name = r.string()
        dims = [r.take("<Q") for _ in range(r.take("<I"))]
        tensors.append((name, dims, r.take("<I"), r.take("<Q")))
    align = meta.get("general.alignment", 32)
    start = -(-r.pos // align) * align
    return magic, version, meta, tensors, start, data


def run(*args):
    return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True)


def expected_tensors(cfg):
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = h // cfg["num_attention_heads"]
    kv = cfg["num_key_value_heads"] * hd
    want = {"token_embd.weight": [h, v], "output_norm.weight": [h]}
    if not cfg.get("tie_word_embeddings", False):
        want["output.weight"] = [h, v]
    for layer in range(cfg["num_hidden_layers"]):
        b = "blk.%d." % layer
        want.update({b + "attn_norm.weight": [h], b + "ffn_norm.weight": [h], b + "attn_q.weight": [h, h],
                     b + "attn_k.weight": [h, kv], b + "attn_v.weight": [h, kv], b + "attn_output.weight": [h, h],
                     b + "ffn_gate.weight": [h, f], b + "ffn_up.weight": [h, f], b + "ffn_down.weight": [f, h]})
    return want


def check_file(path, cfg, tok, label):
    magic, version, meta, tensors, start, data = read_gguf(path)
    check(magic == b"GGUF" and version == 3, label + " header", "%r v%d" % (magic, version))
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    want_meta = {"general.architecture": "llama", "llama.embedding_length": cfg["hidden_size"],
                 "llama.block_count": cfg["num_hidden_layers"], "llama.feed_forward_length": cfg["intermediate_size"],
                 "llama.attention.head_count": cfg["num_attention_heads"],
                 "llama.attention.head_count_kv": cfg["num_key_value_heads"], "llama.rope.dimension_count": hd,
                 "llama.context_length": cfg["max_position_embeddings"], "tokenizer.ggml.model": "llama",
                 "tokenizer.ggml.bos_token_id": tok["bos_id"], "tokenizer.ggml.eos_token_id": tok["eos_id"]}
    wrong = {k: (meta.get(k), v) for k, v in want_meta.items() if meta.get(k) != v}
    check(not wrong, label + " hyperparameters", repr(wrong))
    check(math.isclose(meta.get("llama.attention.layer_norm_rms_epsilon", 0), cfg["rms_norm_eps"], rel_tol=1e-6)
          and meta.get("llama.rope.freq_base") == cfg["rope_theta"], label + " eps and rope base",
          "%r %r" % (meta.get("llama.attention.layer_norm_rms_epsilon"), meta.get("llama.rope.freq_base")))
    texts = [p[0] for p in tok["pieces"]]
    check(meta.get("tokenizer.ggml.tokens") == texts, label + " tokens", "differ from the tokenizer's pieces")
    check(meta.get("tokenizer.ggml.token_type") == [p[2] for p in tok["pieces"]], label + " token types")
    scores = meta.get("tokenizer.ggml.scores") or []
    check(len(scores) == len(texts) and all(math.isclose(a, p[1], rel_tol=1e-6, abs_tol=1e-6)
                                             for a, p in zip(scores, tok["pieces"])), label + " scores")

    want = expected_tensors(cfg)
    got = {name: dims for name, dims, _, _ in tensors}
    check(got == want, label + " tensor names and ggml shapes",
          "missing %s, extra %s" % (sorted(set(want) - set(got))[:3], sorted(set(got) - set(want))[:3]))
    types_ok = all(t == (0 if len(dims) == 1 else 30) for _, dims, t, _ in tensors)
    check(types_ok, label + " F32 norms, BF16 matrices")
    align, end, layout_ok = meta.get("general.alignment", 32), 0, True
    for name, dims, t, off in sorted(tensors, key=lambda x: x[3]):
        size = math.prod(dims) * (4 if t == 0 else 2)
        layout_ok &= off % align == 0 and off >= end
        end = off + size
    check(layout_ok and start + end <= len(data) < start + end + align, label + " aligned, non-overlapping, in bounds",
          "data from %d, tensors end %d, file %d" % (start, start + end, len(data)))

    by_name = {name: off for name, _, _, off in tensors}
    norm = data[start + by_name["output_norm.weight"]:][:4 * cfg["hidden_size"]]
    check(set(struct.unpack("<%df" % cfg["hidden_size"], norm)) == {1.0}, label + " norms are 1.0")
    q = data[start + by_name["blk.0.attn_q.weight"]:][:2 * 65536]
    vals = [struct.unpack("<f", b"\0\0" + q[i:i + 2])[0] for i in range(0, len(q), 2)]
    mean = sum(vals) / len(vals)
    std = math.sqrt(sum((x - mean) ** 2 for x in vals) / len(vals))
    check(all(math.isfinite(x) for x in vals) and 0.018 < std < 0.022 and abs(mean) < 0.001,
          label + " weights finite, N(0, 0.02)", "mean %.5f std %.5f" % (mean, std))


def test_bad_inputs(tmp):
    out = os.path.join(tmp, "bad.gguf")
    cases = {"missing folder": [os.path.join(tmp, "nope"), out]}
    no_tok = os.path.join(tmp, "no_tokenizer")
    os.makedirs(no_tok)
    shutil.copy(os.path.join(MINI, "config.json"), no_tok)
    cases["no tokenizer"] = [no_tok, out]
    wrong_vocab = os.path.join(tmp, "wrong_vocab")
    os.makedirs(wrong_vocab)
    with open(os.path.join(MINI, "config.json")) as f:
        cfg = json.load(f)
    cfg["vocab_size"] = 32001
    with open(os.path.join(wrong_vocab, "config.json"), "w") as f:
        json.dump(cfg, f)
    shutil.copy(os.path.join(MINI, "tokenizer.bin"), wrong_vocab)
    cases["vocab size differs"] = [wrong_vocab, out]
    bad_heads = os.path.join(tmp, "bad_heads")
    os.makedirs(bad_heads)
    cfg["vocab_size"], cfg["num_attention_heads"] = 32000, 3
    with open(os.path.join(bad_heads, "config.json"), "w") as f:
        json.dump(cfg, f)
    shutil.copy(os.path.join(MINI, "tokenizer.bin"), bad_heads)
    cases["heads do not divide hidden"] = [bad_heads, out]
    cases["output folder missing"] = [MINI, os.path.join(tmp, "no", "such", "dir.gguf")]
    for name, args in cases.items():
        p = run(*args)
        lines = p.stderr.strip().splitlines()
        check(p.returncode == 2 and len(lines) == 1 and lines[0].startswith("random_gguf: ")
              and not os.path.exists(out) and not [n for n in os.listdir(tmp) if ".tmp." in n],
              "bad input: " + name, "rc %d, stderr %r" % (p.returncode, p.stderr[-300:]))


def main():
    tmp = tempfile.mkdtemp(prefix="kvq-gguf-")
    try:
        with open(os.path.join(MINI, "config.json")) as f:
            cfg = json.load(f)
        out = os.path.join(tmp, "mini.gguf")
        p = run(MINI, out, "--seed", "3")
        check(p.returncode == 0, "mini-llama-brown (tied embeddings, tokenizer.bin) written", p.stderr[-300:])
        if p.returncode == 0:
            check_file(out, cfg, tokenizer_export.read_tokenizer_bin(os.path.join(MINI, "tokenizer.bin")), "mini")

        # TinyLlama's tokenizer.model beside a small untied config: the sentencepiece path, output.weight
        spm = os.path.join(tmp, "spm")
        os.makedirs(spm)
        shutil.copy(os.path.join(TINYLLAMA, "tokenizer.model"), spm)
        cfg_untied = dict(cfg, tie_word_embeddings=False, num_hidden_layers=2)
        with open(os.path.join(spm, "config.json"), "w") as f:
            json.dump(cfg_untied, f)
        out2 = os.path.join(tmp, "spm.gguf")
        p = run(spm, out2)
        check(p.returncode == 0, "untied config with tokenizer.model written", p.stderr[-300:])
        if p.returncode == 0:
            tok = tokenizer_export.read_tokenizer(os.path.join(TINYLLAMA, "tokenizer.model"))
            check_file(out2, cfg_untied, tok, "spm")
        os.remove(out)
        os.remove(out2)
        test_bad_inputs(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pycheck.exit_code()


if __name__ == "__main__":
    sys.exit(main())
