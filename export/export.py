#!/usr/bin/env python3
"""export/export.py: turn a Hugging Face Llama checkpoint into the model directory the C runtime reads.

    python3 export/export.py SRC OUT_DIR [--revision REV] [--dtype f32|f16|bf16] [--check]
    python3 export/export.py --check OUT_DIR

SRC is a local directory in HF layout or a hub id "owner/name" (downloaded by export/hub.py into
OUT_DIR/.hf-download/, resumable). OUT_DIR receives config.json (copied), model.safetensors (one file) and
tokenizer.bin (export/tokenizer_export.py). Weights may be one or several safetensors files or
pytorch_model*.bin (read by export/torch_bin.py, which never runs code from the file).

The output is deterministic: tensors in sorted name order, packed back to back, a compact JSON header padded
with spaces to a multiple of 8, so the same weights give the same bytes whatever the source layout.
A checkpoint the runtime cannot run is refused before anything is written. Tensors are read, converted and
written one at a time, so memory holds at most one tensor (twice, while converting).
Exit status 0 on success, 2 on any error with one line "export: <what>" on stderr.
Python 3 standard library only.
"""
import argparse
import array
import json
import math
import os
import re
import shutil
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hub  # noqa: E402
import torch_bin  # noqa: E402
from atomic import atomic_output  # noqa: E402

DTYPE_SIZES = {"F32": 4, "F16": 2, "BF16": 2}
ST_MAX_HEADER = 100 * 1024 * 1024
DOWNLOAD_DIR = ".hf-download"
CONVERT_CHUNK = 1 << 20   # elements converted at a time
# Tensors HF checkpoints carry that the runtime recomputes or does not need.
DROPPABLE = re.compile(r"^model\.layers\.\d+\.self_attn\.rotary_emb\.inv_freq$")


class ExportError(Exception):
    pass


# ---------------------------------------------------------------- config


def load_config(path):
    try:
        with open(path, "rb") as f:
            cfg = json.loads(f.read())
    except FileNotFoundError:
        raise ExportError("%s: missing" % path) from None
    except ValueError as e:
        raise ExportError("%s: not valid JSON (%s)" % (path, e)) from None
    if not isinstance(cfg, dict):
        raise ExportError("%s: not a JSON object" % path)
    return cfg


def _positive_int(cfg, key):
    v = cfg.get(key)
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
        raise ExportError("config.json: %s must be a positive integer, got %r" % (key, v))
    return v


def check_config(cfg):
    """Refuses what the runtime cannot run; returns the dimensions it needs."""
    archs = cfg.get("architectures")
    if archs is not None and archs != ["LlamaForCausalLM"]:
        raise ExportError("config.json: architectures %r, the runtime runs only LlamaForCausalLM" % (archs,))
    if cfg.get("model_type") != "llama":
        raise ExportError("config.json: model_type %r, the runtime runs only llama" % (cfg.get("model_type"),))
    if cfg.get("rope_scaling") is not None:
        raise ExportError("config.json: rope_scaling %s is not supported (the runtime implements plain RoPE)"
                          % json.dumps(cfg["rope_scaling"]))
    for key in ("attention_bias", "mlp_bias"):
        if cfg.get(key):
            raise ExportError("config.json: %s is true, the runtime has no bias terms" % key)
    if cfg.get("hidden_act", "silu") != "silu":
        raise ExportError("config.json: hidden_act %r, the runtime implements silu only" % cfg["hidden_act"])
    dims = {k: _positive_int(cfg, k) for k in ("hidden_size", "intermediate_size", "num_hidden_layers",
                                               "num_attention_heads", "vocab_size")}
    dims["num_key_value_heads"] = (_positive_int(cfg, "num_key_value_heads")
                                   if cfg.get("num_key_value_heads") is not None else dims["num_attention_heads"])
    if dims["hidden_size"] % dims["num_attention_heads"]:
        raise ExportError("config.json: hidden_size %d is not a multiple of num_attention_heads %d"
                          % (dims["hidden_size"], dims["num_attention_heads"]))
    if dims["num_attention_heads"] % dims["num_key_value_heads"]:
        raise ExportError("config.json: num_attention_heads %d is not a multiple of num_key_value_heads %d"
                          % (dims["num_attention_heads"], dims["num_key_value_heads"]))
    head_dim = dims["hidden_size"] // dims["num_attention_heads"]
    if cfg.get("head_dim") not in (None, head_dim):
        raise ExportError("config.json: head_dim %r differs from hidden_size / num_attention_heads = %d"
                          % (cfg["head_dim"], head_dim))
    dims["head_dim"] = head_dim
    dims["tied"] = bool(cfg.get("tie_word_embeddings", False))  # LlamaConfig's default
    return dims


def expected_shapes(dims):
    """Every tensor the runtime reads, with its shape."""
    h, i, v = dims["hidden_size"], dims["intermediate_size"], dims["vocab_size"]
    q, kv = dims["num_attention_heads"] * dims["head_dim"], dims["num_key_value_heads"] * dims["head_dim"]
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,)}
    if not dims["tied"]:
        shapes["lm_head.weight"] = (v, h)
    for layer in range(dims["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        shapes.update({
            p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
            p + "self_attn.q_proj.weight": (q, h), p + "self_attn.k_proj.weight": (kv, h),
            p + "self_attn.v_proj.weight": (kv, h), p + "self_attn.o_proj.weight": (h, q),
            p + "mlp.gate_proj.weight": (i, h), p + "mlp.up_proj.weight": (i, h),
            p + "mlp.down_proj.weight": (h, i),
        })
    return shapes


# ---------------------------------------------------------------- reading weights


class SourceTensor:
    """One tensor of the checkpoint: its dtype, shape and a way to read its raw little-endian bytes."""

    def __init__(self, name, dtype, shape, read):
        self.name, self.dtype, self.shape, self.read = name, dtype, tuple(shape), read

    @property
    def numel(self):
        return math.prod(self.shape)


def read_safetensors_header(path):
    """Validated header of a safetensors file: ({name: (dtype, shape, begin, end)} absolute offsets, size)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise ExportError("%s: too short for a safetensors file" % path)
        n = struct.unpack("<Q", head)[0]
        if n > ST_MAX_HEADER or 8 + n > size:
            raise ExportError("%s: header length %d past end of file" % (path, n))
        try:
            header = json.loads(f.read(n))
        except ValueError as e:
            raise ExportError("%s: header is not JSON (%s)" % (path, e)) from None
    if not isinstance(header, dict):
        raise ExportError("%s: header is not a JSON object" % path)
    tensors, base = {}, 8 + n
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
        except (TypeError, KeyError, ValueError):
            raise ExportError("%s: tensor %s has a malformed entry" % (path, name)) from None
        if dtype not in DTYPE_SIZES:
            raise ExportError("%s: tensor %s has dtype %r (only F32, F16, BF16 weights are supported)"
                              % (path, name, dtype))
        if not (isinstance(shape, list) and all(isinstance(d, int) and d >= 0 for d in shape)):
            raise ExportError("%s: tensor %s has a malformed shape" % (path, name))
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end <= size - base
                and end - begin == math.prod(shape) * DTYPE_SIZES[dtype]):
            raise ExportError("%s: tensor %s has data offsets inconsistent with its shape or the file size"
                              % (path, name))
        tensors[name] = (dtype, tuple(shape), base + begin, base + end)
    return tensors, size


def _safetensors_sources(path):
    def reader(begin, end):
        def read():
            with open(path, "rb") as f:
                f.seek(begin)
                return f.read(end - begin)
        return read
    header, _ = read_safetensors_header(path)
    return {name: SourceTensor(name, dt, shape, reader(b, e)) for name, (dt, shape, b, e) in header.items()}


def _torch_bin_sources(path):
    try:
        tb = torch_bin.open_torch_bin(path)
    except torch_bin.TorchBinError as e:
        raise ExportError(str(e)) from None
    for name, t in tb.tensors.items():
        if t.dtype not in DTYPE_SIZES:
            raise ExportError("%s: tensor %s has dtype %s" % (path, name, t.dtype))
    return {name: SourceTensor(name, t.dtype, t.shape, (lambda n=name: tb.read(n)))
            for name, t in tb.tensors.items()}


def weight_files(names):
    """Which of a repo's files hold the weights: [files], kind. Prefers safetensors to pytorch .bin."""
    for index, single, kind in (("model.safetensors.index.json", "model.safetensors", "safetensors"),
                                ("pytorch_model.bin.index.json", "pytorch_model.bin", "bin")):
        if index in names:
            return [index], kind      # the shards are named inside the index
        if single in names:
            return [single], kind
    loose = sorted(n for n in names if n.endswith(".safetensors"))
    if len(loose) == 1:
        return loose, "safetensors"
    raise ExportError("no model.safetensors(.index.json) or pytorch_model.bin(.index.json) found")


def shard_names(index_path):
    index = load_config(index_path)
    weight_map = index.get("weight_map")
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ExportError("%s: no weight_map of tensor -> file" % index_path)
    shards = sorted(set(weight_map.values()))
    for s in shards:
        if "/" in s or s.startswith("."):
            raise ExportError("%s: shard name %r is not a plain file name" % (index_path, s))
    return shards, weight_map


def open_weights(src_dir):
    """All tensors of the checkpoint in src_dir, by name, across shards."""
    files, kind = weight_files(set(os.listdir(src_dir)))
    open_one = _safetensors_sources if kind == "safetensors" else _torch_bin_sources
    weight_map = None
    if files[0].endswith(".index.json"):
        files, weight_map = shard_names(os.path.join(src_dir, files[0]))
    tensors = {}
    for fname in files:
        for name, t in open_one(os.path.join(src_dir, fname)).items():
            if name in tensors:
                raise ExportError("%s: tensor %s appears in two files" % (fname, name))
            if weight_map is not None and weight_map.get(name) != fname:
                raise ExportError("%s: tensor %s is not where the index says" % (fname, name))
            tensors[name] = t
    if weight_map is not None and set(weight_map) - set(tensors):
        raise ExportError("index lists tensors no shard holds, e.g. %s" % sorted(set(weight_map) - set(tensors))[0])
    return tensors


def plan_tensors(dims, tensors):
    """Checks names and shapes against the config; returns (sorted names to write, notes about dropped ones)."""
    want = expected_shapes(dims)
    for name, shape in want.items():
        if name not in tensors:
            raise ExportError("missing tensor %s" % name)
        if tensors[name].shape != shape:
            raise ExportError("tensor %s has shape %s, the config implies %s"
                              % (name, list(tensors[name].shape), list(shape)))
    notes = []
    extra = sorted(set(tensors) - set(want))
    for name in extra:
        if DROPPABLE.match(name):
            continue
        if name == "lm_head.weight" and dims["tied"]:
            notes.append("dropped lm_head.weight (tie_word_embeddings: the runtime uses embed_tokens)")
            continue
        raise ExportError("unexpected tensor %s: the runtime would ignore it and compute a different model" % name)
    dropped = [n for n in extra if DROPPABLE.match(n)]
    if dropped:
        notes.append("dropped %d rotary_emb.inv_freq tensors (the runtime computes RoPE itself)" % len(dropped))
    return sorted(want), notes


# ---------------------------------------------------------------- dtype conversion


def _native(arr):
    """array of little-endian data -> native order (and back: the swap is its own inverse)."""
    if sys.byteorder == "big":
        arr.byteswap()
    return arr


def _to_floats(data, dtype):
    """Raw bytes -> Python floats (exact: every F32/F16/BF16 value is a double)."""
    if dtype == "F16":
        return struct.unpack("<%de" % (len(data) // 2), data)
    if dtype == "BF16":
        data = bf16_to_f32_bytes(data)
    return _native(array.array("f", data)).tolist()


def bf16_to_f32_bytes(data):
    """A bf16 is the top half of an f32: put its two bytes above two zero bytes."""
    out = bytearray(len(data) * 2)
    out[2::4] = data[0::2]
    out[3::4] = data[1::2]
    return bytes(out)


def f32_to_bf16_bytes(data):
    """Round each f32 to bf16, nearest with ties to even; NaN stays NaN (quiet bit set)."""
    words = _native(array.array("I", data))
    out = array.array("H", ((u + 0x7FFF + ((u >> 16) & 1)) >> 16 if (u & 0x7FFFFFFF) <= 0x7F800000
                            else (u >> 16) | 0x40 for u in words))
    return _native(out).tobytes()


F16_OVERFLOW = 65520.0   # halfway between the largest half (65504) and 65536: rounds to infinity


def floats_to_f16_bytes(values):
    """Round to IEEE half, nearest with ties to even (struct's 'e' does that); overflow gives infinity."""
    try:
        return struct.pack("<%de" % len(values), *values)
    except OverflowError:   # 'e' refuses finite values past the half range; IEEE says infinity
        values = [math.copysign(math.inf, x) if abs(x) >= F16_OVERFLOW else x for x in values]
        return struct.pack("<%de" % len(values), *values)


def convert(data, src, dst):
    """Raw bytes of dtype src -> raw bytes of dtype dst (all little-endian)."""
    if src == dst:
        return data
    if dst == "F16":
        return floats_to_f16_bytes(_to_floats(data, src))
    if src == "BF16":            # dst F32: exact
        return bf16_to_f32_bytes(data)
    if src == "F16":             # to F32 exactly, then (for BF16) one rounding
        data = _native(array.array("f", _to_floats(data, src))).tobytes()
        return data if dst == "F32" else f32_to_bf16_bytes(data)
    return f32_to_bf16_bytes(data)   # F32 -> BF16


# ---------------------------------------------------------------- writing


def safetensors_header(entries):
    """entries: [(name, dtype, shape)] in file order -> header bytes (length prefix included)."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, dtype, shape in entries:
        nbytes = math.prod(shape) * DTYPE_SIZES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text


def write_model(path, names, tensors, out_dtype):
    """Writes tensors[names] to path via a temp file, one tensor at a time; returns bytes written."""
    dtypes = {n: out_dtype or tensors[n].dtype for n in names}
    head = safetensors_header([(n, dtypes[n], tensors[n].shape) for n in names])
    with atomic_output(path) as out:
        out.write(head)
        for n in names:
            t = tensors[n]
            data = t.read()
            if len(data) != t.numel * DTYPE_SIZES[t.dtype]:
                raise ExportError("tensor %s: short read" % n)
            step = CONVERT_CHUNK * DTYPE_SIZES[t.dtype]   # bounded memory: Python floats are big
            for i in range(0, len(data), step):
                out.write(convert(data[i:i + step], t.dtype, dtypes[n]))
    return os.path.getsize(path)


def copy_file(src, dst):
    with open(src, "rb") as f, atomic_output(dst) as out:
        shutil.copyfileobj(f, out)


# ---------------------------------------------------------------- tokenizer


def tokenizer_source(src_dir):
    for name in ("tokenizer.model", "tokenizer.json"):
        if os.path.exists(os.path.join(src_dir, name)):
            return name
    raise ExportError("%s: no tokenizer.model or tokenizer.json" % src_dir)


def export_tokenizer(src_dir, out_path):
    tokenizer_source(src_dir)
    try:
        import tokenizer_export
    except ImportError as e:
        raise ExportError("tokenizer: cannot load export/tokenizer_export.py (%s)" % e) from None
    try:
        return tokenizer_export.export_tokenizer(src_dir, out_path)
    except Exception as e:  # its own errors: report them in our one-line form
        raise ExportError("tokenizer: %s" % e) from None


def tokenizer_pieces(summary):
    for key in ("pieces", "n_pieces", "vocab_size", "n_vocab"):
        if isinstance(summary, dict) and isinstance(summary.get(key), int):
            return summary[key]
    return None


# ---------------------------------------------------------------- hub


HUB_EXTRAS = ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json")


def fetch_from_hub(repo, revision, out_dir):
    """Downloads what the export needs into out_dir/.hf-download and returns that folder."""
    cache = os.path.join(out_dir, DOWNLOAD_DIR)
    os.makedirs(cache, exist_ok=True)
    files = hub.list_files(repo, revision)
    if "config.json" not in files:
        raise ExportError("%s@%s has no config.json" % (repo, revision))
    tok = [n for n in ("tokenizer.model", "tokenizer.json") if n in files][:1]
    weights, _ = weight_files(set(files))
    wanted = ["config.json"] + tok + [n for n in HUB_EXTRAS if n in files] + weights
    for name in wanted:
        hub.download(repo, revision, files[name], cache)
    if weights[0].endswith(".index.json"):
        shards, _ = shard_names(os.path.join(cache, weights[0]))
        for name in shards:
            if name not in files:
                raise ExportError("%s names shard %s, which the repo does not have" % (weights[0], name))
            hub.download(repo, revision, files[name], cache)
    return cache


def looks_like_hub_id(src):
    return not os.path.exists(src) and re.fullmatch(r"[\w.-]+/[\w.-]+", src) is not None


# ---------------------------------------------------------------- commands


def export(src, out_dir, revision, out_dtype):
    if os.path.isdir(src):
        src_dir = src
    elif looks_like_hub_id(src):
        src_dir = fetch_from_hub(src, revision, out_dir)
    else:
        raise ExportError("%s: not a directory and not a hub id owner/name" % src)
    cfg = load_config(os.path.join(src_dir, "config.json"))
    dims = check_config(cfg)
    tensors = open_weights(src_dir)
    names, notes = plan_tensors(dims, tensors)
    tokenizer_source(src_dir)
    os.makedirs(out_dir, exist_ok=True)
    tok = export_tokenizer(src_dir, os.path.join(out_dir, "tokenizer.bin"))
    size = write_model(os.path.join(out_dir, "model.safetensors"), names, tensors, out_dtype)
    copy_file(os.path.join(src_dir, "config.json"), os.path.join(out_dir, "config.json"))
    for note in notes:
        print("note: " + note)
    if src_dir != src:
        print("note: the download cache %s can be deleted" % src_dir)
    dtypes = sorted({out_dtype or tensors[n].dtype for n in names})
    params = sum(tensors[n].numel for n in names)
    print_summary("exported %s -> %s" % (src, out_dir), out_dir, params, dtypes, size, tokenizer_pieces(tok))


def check(out_dir):
    dims = check_config(load_config(os.path.join(out_dir, "config.json")))
    path = os.path.join(out_dir, "model.safetensors")
    if not os.path.exists(path):
        raise ExportError("%s: missing" % path)
    header, size = read_safetensors_header(path)
    want = expected_shapes(dims)
    for name, shape in want.items():
        if name not in header:
            raise ExportError("%s: missing tensor %s" % (path, name))
        if header[name][1] != shape:
            raise ExportError("%s: tensor %s has shape %s, the config implies %s"
                              % (path, name, list(header[name][1]), list(shape)))
    extra = sorted(set(header) - set(want))
    if extra:
        raise ExportError("%s: unexpected tensor %s" % (path, extra[0]))
    pieces = check_tokenizer(os.path.join(out_dir, "tokenizer.bin"), dims["vocab_size"])
    params = sum(math.prod(header[n][1]) for n in want)
    print_summary("checked %s: ok" % out_dir, out_dir, params, sorted({header[n][0] for n in want}), size, pieces)


def check_tokenizer(path, vocab_size):
    """Reads tokenizer.bin through (format: tokenizer/README.md): magic "KVQTOK01", six int32
    (n_pieces, bos, eos, unk, pad, flags), then per piece f32 score, int32 type, int32 length, UTF-8 bytes.
    Returns the piece count."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ExportError("%s: %s" % (path, e.strerror)) from None
    if data[:8] != b"KVQTOK01" or len(data) < 32:
        raise ExportError("%s: not a kvq tokenizer file" % path)
    n, bos, eos = struct.unpack_from("<3i", data, 8)
    if not 0 < n <= vocab_size or not (0 <= bos < n and 0 <= eos < n):
        raise ExportError("%s: %d pieces (bos %d, eos %d) do not fit the model's vocab_size %d"
                          % (path, n, bos, eos, vocab_size))
    pos = 32
    for i in range(n):
        if pos + 12 > len(data):
            raise ExportError("%s: truncated at piece %d" % (path, i))
        length = struct.unpack_from("<i", data, pos + 8)[0]
        pos += 12
        if length < 0 or pos + length > len(data):
            raise ExportError("%s: piece %d has a bad length" % (path, i))
        try:
            data[pos:pos + length].decode("utf-8")
        except UnicodeDecodeError:
            raise ExportError("%s: piece %d is not UTF-8" % (path, i)) from None
        pos += length
    if pos != len(data):
        raise ExportError("%s: %d bytes of trailing data" % (path, len(data) - pos))
    return n


def print_summary(title, out_dir, params, dtypes, size, pieces):
    print(title)
    print("  parameters:        %s" % format(params, ","))
    print("  dtype:             %s" % ", ".join(dtypes))
    print("  model.safetensors: %s bytes (%.1f MB)" % (format(size, ","), size / 1e6))
    print("  tokenizer.bin:     %s" % ("%d pieces" % pieces if pieces is not None else "present"))
    print("next:")
    print('  ./run generate %s -i "Once upon a time"' % out_dir)
    print("  ./run --validate --model %s" % out_dir)


def parse_args(argv):
    p = argparse.ArgumentParser(prog="export.py", description=__doc__.split("\n\n")[0])
    p.add_argument("paths", nargs="+", metavar="SRC OUT_DIR", help="source and output (--check: OUT_DIR only)")
    p.add_argument("--revision", default="main", help="hub revision (branch, tag or commit), default main")
    p.add_argument("--dtype", choices=("f32", "f16", "bf16"), help="convert weights (default: keep)")
    p.add_argument("--check", action="store_true", help="verify OUT_DIR (after exporting, if SRC is given)")
    args = p.parse_args(argv)
    if len(args.paths) > 2 or (len(args.paths) == 1 and not args.check):
        p.error("expected SRC OUT_DIR, or --check OUT_DIR")
    return args


def main(argv=None):
    args = parse_args(argv)
    try:
        if len(args.paths) == 2:
            export(args.paths[0], args.paths[1], args.revision, args.dtype and args.dtype.upper())
        if args.check:
            check(args.paths[-1])
    except (ExportError, hub.HubError) as e:
        print("export: %s" % e, file=sys.stderr)
        return 2
    except OSError as e:
        print("export: %s: %s" % (e.filename or "", e.strerror or e), file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nexport: interrupted (a rerun resumes downloads)", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
