#!/usr/bin/env python3
"""tests/journal_seal.py FILE...: seals a sweep's files again, as kvq writes them: each line of a
journal (model/formats/checked_line.h: the line's `, "crc32c": "..."}` member dropped and the
CRC-32C of what is left before it written anew), or a sweep.json or sensitivity.json (a FILE
named so: its last member `  "crc32c": "..."` over the text before it, model/formats/checked_json.h). For tests that edit a record
or the settings on purpose and want kvq's checks past the CRC (a count out of range, a missing
model_id) to answer, not the CRC. CRC-32C restated here from its definition (reflected
polynomial 0x82f63b78), independent of model/formats/crc32c.c."""
import re
import sys


def crc32c(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def seal(line):
    body = re.sub(rb', "crc32c": "[0-9a-f]{8}"\}$', b"", line)
    if body == line:   # not sealed yet: the object's own closing brace goes
        body = line[:-1]
    return body + b', "crc32c": "%08x"}' % crc32c(body)


def seal_settings(text):
    at = text.rfind(b'  "crc32c": "')
    body = text[:at] if at >= 0 else text[:text.rstrip().rfind(b"]") + 1] + b",\n"
    return body + b'  "crc32c": "%08x"\n}\n' % crc32c(body)


assert crc32c(b"123456789") == 0xE3069283
for path in sys.argv[1:]:
    with open(path, "rb") as f:
        text = f.read()
    if path.endswith(("sweep.json", "sensitivity.json")):
        with open(path, "wb") as f:
            f.write(seal_settings(text))
        continue
    lines = text.split(b"\n")
    out = [seal(l) if l else l for l in lines[:-1]] + [lines[-1]]   # a torn last line stays torn
    with open(path, "wb") as f:
        f.write(b"\n".join(out))
