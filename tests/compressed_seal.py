#!/usr/bin/env python3
"""tests/compressed_seal.py FILE...: computes the checksums of compressed KV files
(kvq-compressed-3, model/formats/compress.h) and of calibration files (model/formats/st_checksum.h,
the same scheme) again, in place: each tensor's crc32c.NAME from its bytes, then header_crc32c
from the header's content. For tests that edit a file on purpose and want kvq's checks past the
CRCs (a malformed calib_sha256, a NaN scale, an unsorted table) to answer. The CRC-32C and the
header's canonical text are restated here from compress.h and compress.c's header_crc,
independently of the C code: a file this script seals that kvq refuses is a disagreement.
(tests/fixtures/reference/kv-calib-mini-llama-brown-outliers.safetensors was sealed by it.)"""
import json
import struct
import sys

TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    TABLE.append(c)


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def counted(s):
    b = s.encode()
    return b"%d:" % len(b) + b


def header_crc(header):
    """Every metadata pair but header_crc32c, then every tensor's name, dtype, shape and byte
    range, in header order."""
    text = b""
    for key, value in header.get("__metadata__", {}).items():
        if key != "header_crc32c":
            text += b"m " + counted(key) + b" " + counted(value) + b"\n"
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        text += b"t " + counted(name) + b" %s %d" % (t["dtype"].encode(), len(t["shape"]))
        text += b"".join(b" %d" % d for d in t["shape"]) + b" @%d+%d\n" % (begin, end - begin)
    return crc32c(text)


def seal(raw):
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.setdefault("__metadata__", {})
    for name, t in header.items():
        if name != "__metadata__":
            begin, end = t["data_offsets"]
            meta["crc32c." + name] = "%08x" % crc32c(data[begin:end])
    meta["header_crc32c"] = "%08x" % header_crc(header)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


assert crc32c(b"123456789") == 0xE3069283
if __name__ == "__main__":
    for path in sys.argv[1:]:
        with open(path, "rb") as f:
            raw = f.read()
        with open(path, "wb") as f:
            f.write(seal(raw))
