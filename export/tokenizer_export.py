#!/usr/bin/env python3
"""export/tokenizer_export.py: converts a Llama-style tokenizer into kvq's tokenizer.bin.

Sources: a SentencePiece `tokenizer.model` (a protobuf ModelProto, parsed here by hand)
or a Hugging Face `tokenizer.json` (BPE with byte fallback, Llama's normalizer).
Only SentencePiece-style BPE with identity normalization is supported; anything else is
refused with a message, because the C tokenizer would silently encode it differently.
The output format is described in tokenizer/README.md. Python 3 standard library only.

CLI (for debugging):  python3 export/tokenizer_export.py SRC(tokenizer.model|tokenizer.json) OUT.bin
"""

import json
import os
import re
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from atomic import atomic_output  # noqa: E402

MAGIC = b"KVQTOK01"
MAX_PIECE_BYTES = 64          # the C reader's limit (tokenizer_piece_bytes writes into 64 bytes)

# sentencepiece's ModelProto.SentencePiece.Type
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# sentencepiece's TrainerSpec.ModelType
MODEL_TYPES = {1: "unigram", 2: "bpe", 3: "word", 4: "char"}

FLAG_ADD_DUMMY_PREFIX = 1
FLAG_BYTE_FALLBACK = 2
FLAG_REMOVE_EXTRA_WHITESPACES = 4

TAIL_SCORE = -1e9             # see _json_scores
BYTE_PIECE = re.compile(r"<0x[0-9A-F]{2}>\Z")


class TokenizerExportError(Exception):
    """A tokenizer this exporter cannot (or will not) convert; the message names the file."""


# ---------------------------------------------------------------- protobuf wire format

def _varint(buf, pos, path):
    """Reads a base-128 varint at pos; returns (value, new_pos)."""
    value = 0
    for shift in range(0, 70, 7):
        if pos >= len(buf):
            raise TokenizerExportError(f"{path}: truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & 0xFFFFFFFFFFFFFFFF, pos
    raise TokenizerExportError(f"{path}: varint longer than 10 bytes")


def _fields(buf, path):
    """Yields (field_number, wire_type, value) of one message; value is int or bytes."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos, path)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos, path)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            n, pos = _varint(buf, pos, path)
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise TokenizerExportError(f"{path}: unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise TokenizerExportError(f"{path}: truncated protobuf field {field}")
        yield field, wire, value


def _int32(value):
    """A varint read as protobuf int32 (negative numbers are sign-extended to 64 bits)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _float(value, path):
    if not isinstance(value, bytes) or len(value) != 4:
        raise TokenizerExportError(f"{path}: a float field is not 4 bytes")
    return struct.unpack("<f", value)[0]


def _text(value, path, what):
    if not isinstance(value, bytes):
        raise TokenizerExportError(f"{path}: {what} is not a string")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise TokenizerExportError(f"{path}: {what} is not valid UTF-8") from None


# ---------------------------------------------------------------- tokenizer.model

def _parse_piece(buf, path):
    piece, score, ptype = "", 0.0, NORMAL          # proto2 defaults
    for field, _, value in _fields(buf, path):
        if field == 1:
            piece = _text(value, path, "a piece")
        elif field == 2:
            score = _float(value, path)
        elif field == 3:
            ptype = _int32(value)
    return piece, score, ptype


def _parse_trainer_spec(buf, path):
    spec = {"model_type": 1, "byte_fallback": False, "unk_id": 0, "bos_id": 1, "eos_id": 2,
            "pad_id": -1, "treat_whitespace_as_suffix": False}
    ints = {3: "model_type", 40: "unk_id", 41: "bos_id", 42: "eos_id", 43: "pad_id"}
    for field, wire, value in _fields(buf, path):
        if field in ints and wire == 0:
            spec[ints[field]] = _int32(value)
        elif field == 35 and wire == 0:
            spec["byte_fallback"] = bool(value)
        elif field == 24 and wire == 0:
            spec["treat_whitespace_as_suffix"] = bool(value)
    return spec


def _parse_normalizer_spec(buf, path):
    spec = {"name": "", "precompiled_charsmap": b"", "add_dummy_prefix": True,
            "remove_extra_whitespaces": True, "escape_whitespaces": True, "rule_tsv": ""}
    for field, wire, value in _fields(buf, path):
        if field == 1 and wire == 2:
            spec["name"] = _text(value, path, "normalizer name")
        elif field == 2 and wire == 2:
            spec["precompiled_charsmap"] = bytes(value)
        elif field == 3 and wire == 0:
            spec["add_dummy_prefix"] = bool(value)
        elif field == 4 and wire == 0:
            spec["remove_extra_whitespaces"] = bool(value)
        elif field == 5 and wire == 0:
            spec["escape_whitespaces"] = bool(value)
        elif field == 6 and wire == 2:
            spec["rule_tsv"] = _text(value, path, "normalization_rule_tsv")
    return spec


def read_sentencepiece_model(path):
    """Parses a SentencePiece tokenizer.model into the dict write_tokenizer_bin takes."""
    with open(path, "rb") as f:
        buf = f.read()
    pieces, trainer, normalizer = [], None, None
    for field, wire, value in _fields(buf, path):
        if wire != 2:
            continue
        if field == 1:
            pieces.append(_parse_piece(value, path))
        elif field == 2:
            trainer = _parse_trainer_spec(value, path)
        elif field == 3:
            normalizer = _parse_normalizer_spec(value, path)
    trainer = trainer or _parse_trainer_spec(b"", path)
    normalizer = normalizer or _parse_normalizer_spec(b"", path)
    _check_sentencepiece_supported(path, trainer, normalizer)
    tok = {
        "source": "tokenizer.model",
        "pieces": pieces,
        "bos_id": trainer["bos_id"], "eos_id": trainer["eos_id"],
        "unk_id": trainer["unk_id"], "pad_id": trainer["pad_id"],
        "add_dummy_prefix": normalizer["add_dummy_prefix"],
        "byte_fallback": trainer["byte_fallback"],
        "remove_extra_whitespaces": normalizer["remove_extra_whitespaces"],
        "normalizer_name": normalizer["name"],
    }
    validate(tok, path)
    return tok


def _check_sentencepiece_supported(path, trainer, normalizer):
    model_type = MODEL_TYPES.get(trainer["model_type"], str(trainer["model_type"]))
    if model_type != "bpe":
        raise TokenizerExportError(f"{path}: model_type {model_type} is not supported (only BPE)")
    if normalizer["precompiled_charsmap"] or normalizer["rule_tsv"]:
        raise TokenizerExportError(
            f"{path}: normalizer '{normalizer['name']}' has a character map; only identity "
            "normalization is supported")
    if not normalizer["escape_whitespaces"]:
        raise TokenizerExportError(f"{path}: escape_whitespaces=false is not supported")
    if trainer["treat_whitespace_as_suffix"]:
        raise TokenizerExportError(f"{path}: treat_whitespace_as_suffix is not supported")


# ---------------------------------------------------------------- tokenizer.json

def _token_content(value):
    """special_tokens_map / tokenizer_config give a token as a string or {"content": ...}."""
    if isinstance(value, dict):
        return value.get("content")
    return value if isinstance(value, str) else None


def _json_normalizer_flags(normalizer, path):
    """Recognises Llama's normalizer: Prepend("▁") (dummy prefix) + Replace(" ", "▁")."""
    steps = []
    if normalizer is not None:
        steps = normalizer.get("normalizers", []) if normalizer.get("type") == "Sequence" \
            else [normalizer]
    add_prefix, replaced = False, False
    for step in steps:
        kind = step.get("type")
        if kind == "Prepend" and step.get("prepend") == "\u2581":
            add_prefix = True
        elif kind == "Replace" and step.get("pattern") == {"String": " "} \
                and step.get("content") == "\u2581":
            replaced = True
        else:
            raise TokenizerExportError(f"{path}: normalizer step {kind} is not supported")
    if not replaced:
        raise TokenizerExportError(f"{path}: expected Llama's normalizer (Replace ' ' by U+2581)")
    return add_prefix


def _first_merge_ranks(vocab, merges, path):
    """Rank of the first merge producing each merged piece."""
    first = {}
    for rank, merge in enumerate(merges):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        merged = left + right
        if merged not in vocab:
            raise TokenizerExportError(f"{path}: merge {rank} gives '{merged}', not in vocab")
        first.setdefault(merged, rank)
    return first


def _json_scores(pieces_text, types, vocab, merges, path):
    """Rebuilds sentencepiece's scores of NORMAL pieces from the merges' order.

    sentencepiece's BPE trainer stores pieces best first with score -(index among NORMAL
    pieces), and HF's converter lists merges stably sorted by the merged piece's score.
    So merges must come in id order, except for one trailing block of pieces that were
    given a score below all others (Llama's 15 runs of U+2581, score -1e9, merge leftmost
    first as a tie). Those get TAIL_SCORE, a shared score (the value Llama uses). Any other
    order cannot be represented and is refused."""
    first = _first_merge_ranks(vocab, merges, path)
    by_rank = sorted((rank, vocab[p]) for p, rank in first.items())
    split = len(by_rank)
    for k in range(1, len(by_rank)):
        if by_rank[k][1] < by_rank[k - 1][1]:
            split = k
            break
    tail = [i for _, i in by_rank[split:]]
    if any(b < a for a, b in zip(tail, tail[1:])) or \
            any(types[i] != NORMAL for _, i in by_rank):
        raise TokenizerExportError(f"{path}: merges are not in sentencepiece score order")
    tail = set(tail)
    normal_ids = [i for i, t in enumerate(types) if t == NORMAL]
    first_normal = normal_ids[0] if normal_ids else 0
    scores = [0.0] * len(pieces_text)
    for i in normal_ids:
        scores[i] = TAIL_SCORE if i in tail else -float(i - first_normal)
    return scores


def read_hf_tokenizer_json(path):
    """Parses a HF tokenizer.json (Llama-style BPE) into the dict write_tokenizer_bin takes."""
    with open(path, "rb") as f:
        try:
            j = json.loads(f.read().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TokenizerExportError(f"{path}: not valid JSON ({e})") from None
    model = j.get("model") if isinstance(j, dict) else None
    if not isinstance(model, dict) or model.get("type") != "BPE":
        kind = model.get("type") if isinstance(model, dict) else None
        raise TokenizerExportError(f"{path}: model type {kind} is not supported (only BPE)")
    if j.get("pre_tokenizer") is not None:
        raise TokenizerExportError(f"{path}: a pre_tokenizer is not supported (Llama has none)")
    add_prefix = _json_normalizer_flags(j.get("normalizer"), path)
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(isinstance(i, int) for i in vocab.values()):
        raise TokenizerExportError(f"{path}: model.vocab is not a map of piece to id")
    ids = sorted(vocab.values())
    if ids != list(range(len(ids))):
        raise TokenizerExportError(f"{path}: vocab ids are not 0..n-1")
    pieces_text = [None] * len(ids)
    for text, i in vocab.items():
        pieces_text[i] = text
    byte_fallback = bool(model.get("byte_fallback"))
    added = {t["id"]: t for t in j.get("added_tokens", [])}
    unk_text = model.get("unk_token")
    types = []
    for i, text in enumerate(pieces_text):
        if text == unk_text:
            ptype = UNKNOWN
        elif i in added:
            ptype = CONTROL if added[i].get("special") else USER_DEFINED
        elif byte_fallback and BYTE_PIECE.match(text):
            ptype = BYTE
        else:
            ptype = NORMAL
        types.append(ptype)
    scores = _json_scores(pieces_text, types, vocab, model.get("merges") or [], path)
    pieces = list(zip(pieces_text, scores, types))
    special = _special_tokens_beside(path)
    tok = {
        "source": "tokenizer.json",
        "pieces": pieces,
        "bos_id": vocab.get(special.get("bos_token") or "<s>", -1),
        "eos_id": vocab.get(special.get("eos_token") or "</s>", -1),
        "unk_id": vocab.get(unk_text, -1) if unk_text else -1,
        "pad_id": vocab.get("<pad>", -1),
        "add_dummy_prefix": add_prefix,
        "byte_fallback": byte_fallback,
        "remove_extra_whitespaces": False,
    }
    validate(tok, path)
    return tok


def _special_tokens_beside(path):
    """bos/eos names from tokenizer_config.json in the same folder, when there is one."""
    config = os.path.join(os.path.dirname(os.path.abspath(path)), "tokenizer_config.json")
    try:
        with open(config, encoding="utf-8") as f:
            c = json.load(f)
    except (OSError, ValueError):
        return {}
    return {k: _token_content(c.get(k)) for k in ("bos_token", "eos_token")}


# ---------------------------------------------------------------- checks and output

def validate(tok, path):
    """Applies the C reader's rules here too, so a bad source fails at export time."""
    pieces = tok["pieces"]
    n = len(pieces)
    if n == 0:
        raise TokenizerExportError(f"{path}: no pieces")
    for name in ("bos_id", "eos_id", "unk_id", "pad_id"):
        if not -1 <= tok[name] < n:
            raise TokenizerExportError(f"{path}: {name} {tok[name]} out of range")
    if tok["unk_id"] < 0 or pieces[tok["unk_id"]][2] != UNKNOWN:
        raise TokenizerExportError(f"{path}: unk_id does not name an UNKNOWN piece")
    seen = {}
    n_bytes = 0
    for i, (text, _, ptype) in enumerate(pieces):
        if ptype not in (NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE):
            raise TokenizerExportError(f"{path}: piece {i} has unknown type {ptype}")
        size = len(text.encode("utf-8"))
        if size == 0 or size > MAX_PIECE_BYTES:
            raise TokenizerExportError(f"{path}: piece {i} is {size} bytes (1..{MAX_PIECE_BYTES} allowed)")
        if ptype == BYTE:
            if not BYTE_PIECE.match(text):
                raise TokenizerExportError(f"{path}: byte piece {i} '{text}' is malformed")
            n_bytes += 1
        # sentencepiece keeps pieces used for merging and reserved pieces in two maps.
        key = (text, ptype in (NORMAL, USER_DEFINED, UNUSED))
        if key in seen:
            raise TokenizerExportError(f"{path}: piece {i} '{text}' repeats piece {seen[key]}")
        seen[key] = i
    if tok["byte_fallback"] and n_bytes != 256:
        raise TokenizerExportError(f"{path}: byte_fallback needs 256 byte pieces, found {n_bytes}")


def tokenizer_bin_bytes(tok):
    """The tokenizer.bin file as bytes (format: tokenizer/README.md)."""
    flags = (FLAG_ADD_DUMMY_PREFIX * bool(tok["add_dummy_prefix"])
             | FLAG_BYTE_FALLBACK * bool(tok["byte_fallback"])
             | FLAG_REMOVE_EXTRA_WHITESPACES * bool(tok["remove_extra_whitespaces"]))
    out = [MAGIC, struct.pack("<6i", len(tok["pieces"]), tok["bos_id"], tok["eos_id"],
                              tok["unk_id"], tok["pad_id"], flags)]
    for text, score, ptype in tok["pieces"]:
        data = text.encode("utf-8")
        out.append(struct.pack("<fii", score, ptype, len(data)))
        out.append(data)
    return b"".join(out)


def read_tokenizer_bin(path):
    """Reads a tokenizer.bin back (for tests and debugging); raises TokenizerExportError."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 32 or data[:8] != MAGIC:
        raise TokenizerExportError(f"{path}: not a kvq tokenizer file")
    n, bos, eos, unk, pad, flags = struct.unpack_from("<6i", data, 8)
    pos, pieces = 32, []
    for i in range(max(n, 0)):
        if pos + 12 > len(data):
            raise TokenizerExportError(f"{path}: truncated at piece {i}")
        score, ptype, size = struct.unpack_from("<fii", data, pos)
        pos += 12
        if size < 0 or pos + size > len(data):
            raise TokenizerExportError(f"{path}: bad length of piece {i}")
        pieces.append((_text(data[pos:pos + size], path, f"piece {i}"), score, ptype))
        pos += size
    if pos != len(data):
        raise TokenizerExportError(f"{path}: {len(data) - pos} bytes after the last piece")
    tok = {"source": os.path.basename(path), "pieces": pieces, "bos_id": bos, "eos_id": eos,
           "unk_id": unk, "pad_id": pad, "add_dummy_prefix": bool(flags & FLAG_ADD_DUMMY_PREFIX),
           "byte_fallback": bool(flags & FLAG_BYTE_FALLBACK),
           "remove_extra_whitespaces": bool(flags & FLAG_REMOVE_EXTRA_WHITESPACES)}
    validate(tok, path)
    return tok


def write_tokenizer_bin(path, tok):
    """Writes tok to path through a temp file in the same folder and a rename."""
    data = tokenizer_bin_bytes(tok)
    with atomic_output(path) as f:
        f.write(data)


def read_tokenizer(src):
    """Reads tokenizer.model or tokenizer.json, chosen by the file's name."""
    if src.endswith(".json"):
        return read_hf_tokenizer_json(src)
    return read_sentencepiece_model(src)


def export_tokenizer(hf_dir, out_path):
    """Exports hf_dir's tokenizer.model (preferred) or tokenizer.json to out_path.
    Returns {"n_pieces": int, "source": file name}; raises TokenizerExportError."""
    for name in ("tokenizer.model", "tokenizer.json"):
        src = os.path.join(hf_dir, name)
        if os.path.exists(src):
            tok = read_tokenizer(src)
            write_tokenizer_bin(out_path, tok)
            return {"n_pieces": len(tok["pieces"]), "source": name}
    raise TokenizerExportError(f"{hf_dir}: no tokenizer.model or tokenizer.json")


def main(argv):
    if len(argv) != 3:
        print("usage: tokenizer_export.py SRC(tokenizer.model|tokenizer.json) OUT.bin", file=sys.stderr)
        return 2
    try:
        tok = read_tokenizer(argv[1])
        write_tokenizer_bin(argv[2], tok)
    except (OSError, TokenizerExportError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"{argv[2]}: {len(tok['pieces'])} pieces from {argv[1]} (bos {tok['bos_id']}, "
          f"eos {tok['eos_id']}, unk {tok['unk_id']}, byte_fallback {tok['byte_fallback']}, "
          f"add_dummy_prefix {tok['add_dummy_prefix']})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
