#!/usr/bin/env python3
"""export/random_gguf.py: a GGUF file with a model's exact shape and random BF16 weights, for llama.cpp.

    python3 export/random_gguf.py DIR OUT.gguf [--seed N]

DIR holds config.json and a tokenizer (tokenizer.bin, tokenizer.model or tokenizer.json); for TinyLlama's
shape use data/tinyllama-1.1b-chat-v1.0. The file is what `./run bench --random` runs, in the format
llama.cpp reads, so that both can be timed on the same machine in the same minute:

    llama-bench -m OUT.gguf -t 2 -p 512 -n 64 -d 512     # beside  ./run bench --random tinyllama

(On a shared VM the memory bandwidth moves within minutes, so a figure measured elsewhere or earlier is not
a comparison.) The weights are N(0, 0.02) values in BF16, the norms 1.0; their values do not matter for speed,
so one pool of 2M values is reused at shifting offsets. The vocabulary is the real one (llama.cpp refuses a
model without one). Written through a temp file and a rename; exit status 0 on success, 2 with one line
"random_gguf: <what>" on any error. GGUF version 3 as in ggml's docs/gguf.md. Python 3 standard library only.
"""
import argparse
import math
import os
import random
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import export  # noqa: E402  (config checks and the tensor list, shared with the exporter)
import tokenizer_export  # noqa: E402
from atomic import atomic_output  # noqa: E402

ALIGNMENT = 64
POOL_VALUES = 1 << 21
# GGUF metadata value types and ggml tensor types used here
GGUF_UINT32, GGUF_INT32, GGUF_FLOAT32, GGUF_STRING, GGUF_ARRAY = 4, 5, 6, 8, 9
GGML_F32, GGML_BF16 = 0, 30
LLAMA_FTYPE_MOSTLY_BF16 = 32

# HF tensor names -> llama.cpp's, for the parts that differ
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight"}
LAYER_NAMES = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
               "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
               "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
               "mlp.down_proj": "ffn_down"}


class GgufError(Exception):
    pass


def gguf_name(hf_name):
    if hf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf_name]
    _, _, layer, rest = hf_name.split(".", 3)          # model.layers.N.<part>.weight
    return "blk.%s.%s.weight" % (layer, LAYER_NAMES[rest[:-len(".weight")]])


def read_vocab(folder):
    """(text, score, type) of every piece; sentencepiece's piece types are GGUF's token types."""
    for name in ("tokenizer.bin", "tokenizer.model", "tokenizer.json"):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            read = tokenizer_export.read_tokenizer_bin if name.endswith(".bin") else tokenizer_export.read_tokenizer
            return read(path)
    raise GgufError("%s: no tokenizer.bin, tokenizer.model or tokenizer.json" % folder)


# ---------------------------------------------------------------- GGUF encoding

def gguf_string(s):
    data = s.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def kv_uint32(key, v):
    return gguf_string(key) + struct.pack("<II", GGUF_UINT32, v)


def kv_float32(key, v):
    return gguf_string(key) + struct.pack("<If", GGUF_FLOAT32, v)


def kv_string(key, v):
    return gguf_string(key) + struct.pack("<I", GGUF_STRING) + gguf_string(v)


def kv_array(key, elem_type, items):
    if elem_type == GGUF_STRING:
        body = b"".join(gguf_string(s) for s in items)
    else:
        body = struct.pack("<%d%s" % (len(items), "f" if elem_type == GGUF_FLOAT32 else "i"), *items)
    return gguf_string(key) + struct.pack("<IIQ", GGUF_ARRAY, elem_type, len(items)) + body


def metadata(cfg, dims, tok):
    pieces = tok["pieces"]
    items = [
        kv_string("general.architecture", "llama"), kv_string("general.name", "random weights"),
        kv_uint32("general.file_type", LLAMA_FTYPE_MOSTLY_BF16), kv_uint32("general.alignment", ALIGNMENT),
        kv_uint32("llama.context_length", cfg.get("max_position_embeddings", 2048)),
        kv_uint32("llama.embedding_length", dims["hidden_size"]),
        kv_uint32("llama.block_count", dims["num_hidden_layers"]),
        kv_uint32("llama.feed_forward_length", dims["intermediate_size"]),
        kv_uint32("llama.rope.dimension_count", dims["head_dim"]),
        kv_uint32("llama.attention.head_count", dims["num_attention_heads"]),
        kv_uint32("llama.attention.head_count_kv", dims["num_key_value_heads"]),
        kv_uint32("llama.vocab_size", dims["vocab_size"]),
        kv_float32("llama.attention.layer_norm_rms_epsilon", cfg.get("rms_norm_eps", 1e-6)),
        kv_float32("llama.rope.freq_base", cfg.get("rope_theta", 10000.0)),
        kv_string("tokenizer.ggml.model", "llama"),
        kv_array("tokenizer.ggml.tokens", GGUF_STRING, [p[0] for p in pieces]),
        kv_array("tokenizer.ggml.scores", GGUF_FLOAT32, [p[1] for p in pieces]),
        kv_array("tokenizer.ggml.token_type", GGUF_INT32, [p[2] for p in pieces]),
    ]
    for key, tok_key in (("bos", "bos_id"), ("eos", "eos_id"), ("unknown", "unk_id")):
        if tok[tok_key] >= 0:
            items.append(kv_uint32("tokenizer.ggml.%s_token_id" % key, tok[tok_key]))
    return items


def tensor_plan(dims):
    """(gguf name, ggml dims innermost first, ggml type, bytes, offset) in file order."""
    plan, offset = [], 0
    for hf_name, shape in export.expected_shapes(dims).items():
        ggml_type = GGML_F32 if len(shape) == 1 else GGML_BF16
        size = math.prod(shape) * (4 if ggml_type == GGML_F32 else 2)
        plan.append((gguf_name(hf_name), tuple(reversed(shape)), ggml_type, size, offset))
        offset += -(-size // ALIGNMENT) * ALIGNMENT
    return plan


def tensor_info(name, ggml_dims, ggml_type, offset):
    return (gguf_string(name) + struct.pack("<I", len(ggml_dims)) + struct.pack("<%dQ" % len(ggml_dims), *ggml_dims)
            + struct.pack("<IQ", ggml_type, offset))


def bf16_pool(seed):
    """POOL_VALUES random BF16 values (truncated f32 N(0, 0.02)), as bytes."""
    rng = random.Random(seed)
    f32 = struct.pack("<%df" % POOL_VALUES, *(rng.gauss(0.0, 0.02) for _ in range(POOL_VALUES)))
    out = bytearray(2 * POOL_VALUES)
    out[0::2], out[1::2] = f32[2::4], f32[3::4]      # the high half of each little-endian f32
    return bytes(out)


def write_data(f, plan, pool):
    start, shift = f.tell(), 0
    for name, _, ggml_type, size, offset in plan:
        f.write(b"\0" * (start + offset - f.tell()))
        if ggml_type == GGML_F32:
            f.write(struct.pack("<f", 1.0) * (size // 4))
            continue
        left = size
        while left:
            shift = (shift + 8198) % len(pool)          # an even step: every slice starts on a value
            piece = pool[shift:shift + min(left, len(pool) - shift)]
            f.write(piece)
            left -= len(piece)


def write_gguf(folder, out_path, seed):
    cfg = export.load_config(os.path.join(folder, "config.json"))
    dims = export.check_config(cfg)
    tok = read_vocab(folder)
    if len(tok["pieces"]) != dims["vocab_size"]:
        raise GgufError("%s: the tokenizer has %d pieces, config.json says vocab_size %d"
                        % (folder, len(tok["pieces"]), dims["vocab_size"]))
    meta, plan = metadata(cfg, dims, tok), tensor_plan(dims)
    with atomic_output(out_path) as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(plan), len(meta)))
        for item in meta:
            f.write(item)
        for name, ggml_dims, ggml_type, _, offset in plan:
            f.write(tensor_info(name, ggml_dims, ggml_type, offset))
        f.write(b"\0" * (-f.tell() % ALIGNMENT))
        write_data(f, plan, bf16_pool(seed))
    return sum(p[3] for p in plan)


def main(argv):
    ap = argparse.ArgumentParser(prog="random_gguf.py", description=__doc__.split("\n")[0])
    ap.add_argument("dir", help="folder with config.json and a tokenizer")
    ap.add_argument("out", help="the .gguf file to write")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv[1:])
    try:
        size = write_gguf(args.dir, args.out, args.seed)
    except (OSError, GgufError, export.ExportError, tokenizer_export.TokenizerExportError) as e:
        print("random_gguf: %s" % e, file=sys.stderr)
        return 2
    print("%s: %.2f GB of random weights with the shape of %s" % (args.out, size / 1e9, args.dir))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
