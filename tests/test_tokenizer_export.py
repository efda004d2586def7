#!/usr/bin/env python3
"""tests/test_tokenizer_export.py: tests of export/tokenizer_export.py (run from the repo root;
prints PASS/FAIL lines).

- TinyLlama's tokenizer.model and tokenizer.json export to equivalent files: same header, piece
  texts and types, and same scores for every piece of two or more characters (the only scores
  BPE ever compares; tokenizer.json does not carry the others);
- the committed data/models/*/tokenizer.bin equal a fresh export of their sources in the repo
  (mini-llama-brown uses TinyLlama's tokenizer.model; stories260K and random-gqa8 use the 512-piece
  model that tests/fixtures/export/single/tokenizer.model is a byte-identical copy of);
- the protobuf fields as read (ids, flags, normalizer) and refusals of unsupported tokenizers;
- export_tokenizer's source preference and its temp-file-then-rename output.
Standard library only; scratch files go to a temp dir.
"""
import json
import os
import shutil
import struct
import sys
import tempfile

sys.path.insert(0, os.path.join(os.getcwd(), "export"))
import tokenizer_export as te  # noqa: E402
import pycheck  # noqa: E402  (tests/pycheck.py: this script's folder is on sys.path)
from pycheck import check  # noqa: E402

TINYLLAMA = "data/tinyllama-1.1b-chat-v1.0"
SMALL_MODEL = "tests/fixtures/export/single/tokenizer.model"


def test_model_vs_json():
    a = te.read_tokenizer(os.path.join(TINYLLAMA, "tokenizer.model"))
    b = te.read_tokenizer(os.path.join(TINYLLAMA, "tokenizer.json"))
    header = ("bos_id", "eos_id", "unk_id", "pad_id", "add_dummy_prefix", "byte_fallback",
              "remove_extra_whitespaces")
    diff = [k for k in header if a[k] != b[k]]
    check(not diff, "tinyllama model/json: same header", "differ in %s" % diff)
    same_len = len(a["pieces"]) == len(b["pieces"]) == 32000
    check(same_len, "tinyllama model/json: 32000 pieces each",
          "%d vs %d" % (len(a["pieces"]), len(b["pieces"])))
    if not same_len:
        return
    text_type = [i for i, (x, y) in enumerate(zip(a["pieces"], b["pieces"])) if x[0] != y[0] or x[2] != y[2]]
    check(not text_type, "tinyllama model/json: same piece texts and types", "first differences %s" % text_type[:5])
    merged_scores = [i for i, (x, y) in enumerate(zip(a["pieces"], b["pieces"]))
                     if len(x[0]) > 1 and x[1] != y[1]]
    check(not merged_scores, "tinyllama model/json: same scores for all multi-character pieces",
          "first differences %s" % [(i, a["pieces"][i], b["pieces"][i]) for i in merged_scores[:3]])
    single = [i for i, (x, y) in enumerate(zip(a["pieces"], b["pieces"])) if x[1] != y[1]]
    print("  files differ only in the scores of %d single-character piece(s): %s" %
          (len(single), [a["pieces"][i][0] for i in single[:5]]))


def test_committed_files():
    sources = {"mini-llama-brown": os.path.join(TINYLLAMA, "tokenizer.model"),
               "stories260K": SMALL_MODEL, "random-gqa8": SMALL_MODEL}
    for model, src in sources.items():
        committed = os.path.join("data", "models", model, "tokenizer.bin")
        try:
            with open(committed, "rb") as f:
                data = f.read()
        except OSError as e:
            check(False, "committed %s tokenizer.bin equals a fresh export" % model, str(e))
            continue
        fresh = te.tokenizer_bin_bytes(te.read_tokenizer(src))
        check(data == fresh, "committed %s tokenizer.bin equals a fresh export" % model,
              "%d vs %d bytes" % (len(data), len(fresh)))


def test_fields():
    tok = te.read_tokenizer(os.path.join(TINYLLAMA, "tokenizer.model"))
    check(tok["normalizer_name"] == "identity" and tok["add_dummy_prefix"] and not tok["remove_extra_whitespaces"],
          "tinyllama normalizer: identity, dummy prefix, whitespace kept",
          "name %r %r %r" % (tok["normalizer_name"], tok["add_dummy_prefix"], tok["remove_extra_whitespaces"]))
    check((tok["unk_id"], tok["bos_id"], tok["eos_id"], tok["pad_id"], tok["byte_fallback"]) == (0, 1, 2, -1, True),
          "tinyllama ids and byte fallback", "got %r" % [tok[k] for k in ("unk_id", "bos_id", "eos_id", "pad_id")])
    pieces = tok["pieces"]
    check(pieces[13] == ("<0x0A>", 0.0, te.BYTE) and pieces[260] == ("\u2581t", -1.0, te.NORMAL),
          "tinyllama pieces 13 and 260", "got %r %r" % (pieces[13], pieces[260]))
    small = te.read_tokenizer(SMALL_MODEL)
    check(len(small["pieces"]) == 512 and small["pieces"][511][1] == -252.0,
          "stories260K: 512 pieces, last score -252", "got %d" % len(small["pieces"]))
    data = te.tokenizer_bin_bytes(small)
    n, bos, eos, unk, pad, flags = struct.unpack_from("<6i", data, 8)
    check(data[:8] == b"KVQTOK01" and (n, bos, eos, unk, pad, flags) == (512, 1, 2, 0, -1, 3),
          "tokenizer.bin header layout", "got %r" % ((n, bos, eos, unk, pad, flags),))


def _varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        out.append((v & 0x7F) | (0x80 if v > 0x7F else 0))
        v >>= 7
        if not v:
            return bytes(out)


def _field(num, payload):
    """A length-delimited protobuf field (wire type 2)."""
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _proto(model_type, charsmap=b""):
    """A minimal ModelProto: <unk>, <s>, </s>, a, b, ab; trainer_spec model_type; normalizer."""
    pieces = [("<unk>", 2), ("<s>", 3), ("</s>", 3), ("a", 1), ("b", 1), ("ab", 1)]
    out = b""
    for i, (text, ptype) in enumerate(pieces):
        body = _field(1, text.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", -i) + _varint(3 << 3) + _varint(ptype)
        out += _field(1, body)
    out += _field(2, _varint(3 << 3) + _varint(model_type) + _varint(43 << 3) + _varint(-1))
    normalizer = _field(1, b"identity") + (_field(2, charsmap) if charsmap else b"")
    normalizer += _varint(4 << 3) + _varint(0)
    return out + _field(3, normalizer)


def expect_refusal(path, words, name):
    try:
        te.read_tokenizer(path)
    except te.TokenizerExportError as e:
        check(path in str(e) and all(w in str(e) for w in words), name, "message %r" % str(e))
        return
    check(False, name, "accepted")


def test_refusals(tmp):
    model = os.path.join(tmp, "tokenizer.model")
    with open(model, "wb") as f:
        f.write(_proto(2))
    tok = te.read_tokenizer(model)
    check([p[0] for p in tok["pieces"]] == ["<unk>", "<s>", "</s>", "a", "b", "ab"] and tok["pad_id"] == -1
          and tok["add_dummy_prefix"] and not tok["remove_extra_whitespaces"] and not tok["byte_fallback"],
          "hand-made protobuf read (defaults, negative int32)", "got %r" % tok)
    with open(model, "wb") as f:
        f.write(_proto(1))
    expect_refusal(model, ["unigram"], "unigram tokenizer.model refused")
    with open(model, "wb") as f:
        f.write(_proto(2, charsmap=b"\x01\x02"))
    expect_refusal(model, ["identity"], "normalizer with a charsmap refused")
    with open(model, "wb") as f:
        f.write(_proto(2)[:-3])
    expect_refusal(model, ["truncated"], "truncated tokenizer.model refused")
    js = os.path.join(tmp, "tokenizer.json")
    with open(js, "w") as f:
        json.dump({"model": {"type": "Unigram", "vocab": []}}, f)
    expect_refusal(js, ["Unigram"], "unigram tokenizer.json refused")
    with open(os.path.join(TINYLLAMA, "tokenizer.json"), encoding="utf-8") as f:
        j = json.load(f)
    j["pre_tokenizer"] = {"type": "ByteLevel"}
    with open(js, "w") as f:
        json.dump(j, f)
    expect_refusal(js, ["pre_tokenizer"], "tokenizer.json with a pre_tokenizer refused")
    del j["pre_tokenizer"]
    j["model"]["merges"] = list(reversed(j["model"]["merges"]))
    with open(js, "w") as f:
        json.dump(j, f)
    expect_refusal(js, ["order"], "tokenizer.json with merges out of score order refused")


def test_export_entry_point(tmp):
    out = os.path.join(tmp, "out", "tokenizer.bin")
    os.makedirs(os.path.dirname(out))
    summary = te.export_tokenizer(TINYLLAMA, out)
    check(summary == {"n_pieces": 32000, "source": "tokenizer.model"}, "export_tokenizer prefers tokenizer.model",
          "got %r" % summary)
    check(os.listdir(os.path.dirname(out)) == ["tokenizer.bin"], "export leaves no temp file",
          "found %r" % os.listdir(os.path.dirname(out)))
    only_json = os.path.join(tmp, "only-json")
    os.makedirs(only_json)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(TINYLLAMA, name), only_json)
    summary = te.export_tokenizer(only_json, out)
    check(summary == {"n_pieces": 32000, "source": "tokenizer.json"}, "export_tokenizer falls back to tokenizer.json",
          "got %r" % summary)
    back = te.read_tokenizer_bin(out)
    check(back["pieces"] == te.read_tokenizer(os.path.join(only_json, "tokenizer.json"))["pieces"],
          "tokenizer.bin reads back", "pieces differ")
    try:
        te.export_tokenizer(os.path.join(tmp, "empty-dir-missing"), out)
        check(False, "export_tokenizer without a tokenizer refused", "accepted")
    except te.TokenizerExportError as e:
        check("no tokenizer.model or tokenizer.json" in str(e), "export_tokenizer without a tokenizer refused", str(e))


def main():
    test_model_vs_json()
    test_committed_files()
    test_fields()
    with tempfile.TemporaryDirectory() as tmp:
        test_refusals(tmp)
        test_export_entry_point(tmp)
    return pycheck.exit_code()


if __name__ == "__main__":
    sys.exit(main())
