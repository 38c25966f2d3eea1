#!/usr/bin/env python3
"""Rewrites a cost model file of format version 1 as version 2 (learned/src/tensor_reader.hpp):
each tensor's values padded to start on a 64-byte line of the file, so that waco-hybrid uses them
where they lie in the file's mapping instead of copying them into fresh memory. The header's
"format_version" becomes 2; names, shapes and every value stay byte for byte. A version-2 file is
left as it is. Written to FILE.tmp, then renamed.

usage: scripts/model_file_v2.py FILE.model ..."""

import json
import os
import struct
import sys

MAGIC = b"WACOCOST"


def convert(path):
    b = open(path, "rb").read()
    if b[:8] != MAGIC:
        sys.exit(f"{path}: not a cost model file")
    version = struct.unpack_from("<I", b, 8)[0]
    if version == 2:
        print(f"{path}: already version 2")
        return
    if version != 1:
        sys.exit(f"{path}: format version {version}, not 1")
    at = 12
    n = struct.unpack_from("<I", b, at)[0]
    h = b[at + 4:at + 4 + n]
    at += 4 + n
    # The header's own text, its version alone changed (json.dumps would write some numbers
    # otherwise than the file has them).
    if json.loads(h).get("format_version") != 1 or h.count(b'"format_version":1') != 1:
        sys.exit(f"{path}: the header does not say format_version 1 once")
    h = h.replace(b'"format_version":1', b'"format_version":2')
    out = bytearray(MAGIC + struct.pack("<I", 2) + struct.pack("<I", len(h)) + h)
    count = struct.unpack_from("<I", b, at)[0]
    out += b[at:at + 4]
    at += 4
    for _ in range(count):
        ln = struct.unpack_from("<I", b, at)[0]
        ndim = struct.unpack_from("<I", b, at + 4 + ln)[0]
        end = at + 8 + ln + 8 * ndim
        sizes = struct.unpack_from(f"<{ndim}q", b, at + 8 + ln)
        out += b[at:end]
        numel = 1
        for s in sizes:
            numel *= s
        pad = (64 - (len(out) + 4) % 64) % 64
        out += struct.pack("<I", pad) + bytes(pad)
        out += b[end:end + 4 * numel]
        at = end + 4 * numel
    if b[at:] != b"END!":
        sys.exit(f"{path}: no end marker where expected")
    out += b"END!"
    with open(path + ".tmp", "wb") as f:
        f.write(out)
    os.replace(path + ".tmp", path)
    print(f"{path}: version 1 -> 2 ({len(b)} -> {len(out)} bytes)")


for p in sys.argv[1:]:
    convert(p)
