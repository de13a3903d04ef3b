#!/usr/bin/env python3
"""regressions.py - writes the regression inputs of the fuzz corpora.

Every hang, crash or misbehaviour found (by a fuzzer or by hand) becomes a
named input here, written into tests/fuzz/corpus/<target>/regress-<name>:
`make test` replays them with the normal build, and the CI fuzz runs start
from them. Run it from the repository root after adding a case; it only
(re)writes the regress-* files.
"""
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def header(tensors, meta=None):
    """A safetensors header's JSON text for [(name, dtype, shape, nbytes)]."""
    parts, off = [], 0
    if meta is not None:
        parts.append('"__metadata__":{%s}' % ",".join('"%s":"%s"' % kv for kv in meta))
    for name, dtype, shape, nbytes in tensors:
        parts.append('"%s":{"dtype":"%s","shape":[%s],"data_offsets":[%d,%d]}'
                     % (name, dtype, ",".join(map(str, shape)), off, off + nbytes))
        off += nbytes
    return ("{" + ",".join(parts) + "}").encode(), off


def st_file(tensors):
    """A whole safetensors file (8-byte length, header, zero data)."""
    h, n = header(tensors)
    return struct.pack("<Q", len(h)) + h + bytes(n)


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "regress-" + name), "wb") as f:
        f.write(data)


SEP = b"\n--\n"
SHARD = st_file([("a", "U8", [2], 2)])

# Issue 11.1: a NUL in an index hung the NUL check (the value skipper's
# strchr matched the string terminator); NUL between tokens was whitespace.
for i, text in enumerate([
        b'{"metadata": {"x": \0 1}, "weight_map": {}}',
        b'{"metadata": [\0 1], "weight_map": {}}',
        b'{"weight_map": {"a": [\0]}}',
        b'{"metadata": {"x": [[[\0]]]}, "weight_map": {}}',
        b'{"a": 1 \0, "weight_map": {}}',
        b'{"weight_map": {"a": \0"s0.safetensors"}}']):
    write("ckpt", "index-nul-%d" % (i + 1), text + SEP + SHARD)

# Issue 11.2: stacked stars made regcomp explode (3 s at 109, 45 s at 200).
for n in (109, 200, 400):
    write("spec", "regex-stars-%d" % n,
          b'{"rules":[{"match":"[a-c]' + b"*" * n + b'","spec":[]}]}')
for name, rx in [("backref", rb"(a)\\1"), ("nesting", b"(" * 9 + b"a" + b")" * 9),
                 ("bounds", b"((a{10}){10}){11}"), ("atoms", b"(.{0,1000}x)" * 5),
                 ("long", b"a" * 1025)]:
    write("spec", "regex-" + name, b'{"rules":[{"match":"' + rx + b'","spec":[]}]}')

# Issue 11.3: huge meshes asked for 17-24 GB; now refused from the counts.
SMALL = header([("embed", "BF16", [4000, 64], 512000), ("w", "BF16", [64, 64], 8192),
                ("n", "BF16", [64], 128)])[0]
for name, mesh in [("mesh-4096x4096", b'{"shape":[4096,4096],"axes":["a","b"]}'),
                   ("mesh-16777216", b'{"shape":[16777216],"axes":["a"]}')]:
    write("spec", name, b'{"mesh":' + mesh + b"}")
    write("plan", name, b'{"mesh":' + mesh + b"}" + SEP + SMALL)
# The fuzz targets lower the device limit to 65,536 and fuzz_plan's memory
# limit to 4 MiB: these pass the first and are refused by the estimate.
write("plan", "mesh-256x256", b'{"mesh":{"shape":[256,256],"axes":["a","b"]}}' + SEP + SMALL)
write("plan", "mesh-65536-rows", b'{"mesh":{"shape":[65536],"axes":["a"]},'
      b'"rules":[{"match":".*","spec":["a"]}]}' + SEP + SMALL)

# Issue 11.6: a mesh axis of 2^40 is "too large", naming the limit; a text
# file is "not a safetensors file".
write("spec", "mesh-axis-2pow40", b'{"mesh":{"shape":[1099511627776],"axes":["a"]}}')
write("header", "text-file", b"This is a text file, not a checkpoint.\n")

# Strict spec JSON: NUL and control bytes between tokens, U+0000 in strings.
write("spec", "nul-between-tokens", b'{"rules": [] \0}')
write("spec", "nul-escape-in-rule", b'{"rules":[{"match":"a\\u0000.*","spec":[]}]}')

# Issue 11.8: the cases of the mutants the suite let through.
# A slice listed before an alias of the same tensor: the dedupe key must
# hold the run length, or the alias's bytes are dropped.
write("plan", "dedupe-slice-then-alias",
      b'{"targets":[{"name":"s","source":"w","slice":[[0,1]]},{"name":"a","source":"w"}]}'
      + SEP + header([("w", "F32", [4, 4], 64)])[0])
# A gap of exactly min_gap (4096) between neighbouring shards' runs.
write("plan", "gap-exactly-min-gap",
      b'{"mesh":{"shape":[2],"axes":["x"]},"rules":[{"match":"w","spec":[null,"x"]}]}'
      + SEP + header([("w", "U8", [4, 8194], 4 * 8194)])[0])

# fuzz_plan (20 min run): its own checker compared a 32 KB tensor over 8
# devices bit by bit and ran past the 5 s limit; it compares bytes now and
# executes plans of at most 1 MiB.
write("plan", "checker-slow-8-devices",
      b'{"mesh":{"shape":[8],"axes":["x"]},"rules":[{"match":"w","spec":[null,"x"]}]}'
      + SEP + b'{"w.":{"dtype":"U8","shape":[4,8194],"data_offsets":[0,32776]}}')

# fuzz_spec (10 min run): glibc reads "{,n}" as "{0,n}", which the rule
# checks did not take for a repetition: 2.4 s in regcomp.
write("spec", "regex-interval-without-minimum", b'{"rules":[{"match":"00(.{,10000}8)","spec":[]}]}')
