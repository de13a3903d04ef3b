#!/usr/bin/env python3
"""gen_ckpt.py - writes a benchmark checkpoint: one .safetensors file shaped
like a decoder LLM (embeddings, attention and MLP weights per layer, BF16)
of at least --size bytes, filled with random bytes (so no layer of the
storage stack can compress or skip it). Standard library only.

usage: gen_ckpt.py PATH [--size BYTES] [--hidden N]
"""
import argparse
import json
import os
import struct
import sys


def layout(size, hidden):
    """Tensors (name, shape) in file order, until their bytes reach size."""
    inter = hidden * 11 // 4 // 64 * 64
    vocab = 32000
    tensors = [("model.embed_tokens.weight", [vocab, hidden])]
    total = vocab * hidden * 2
    layer = 0
    while total < size:
        p = f"model.layers.{layer}."
        for n, shape in (("self_attn.q_proj.weight", [hidden, hidden]),
                         ("self_attn.k_proj.weight", [hidden, hidden]),
                         ("self_attn.v_proj.weight", [hidden, hidden]),
                         ("self_attn.o_proj.weight", [hidden, hidden]),
                         ("mlp.gate_proj.weight", [inter, hidden]),
                         ("mlp.up_proj.weight", [inter, hidden]),
                         ("mlp.down_proj.weight", [hidden, inter]),
                         ("input_layernorm.weight", [hidden]),
                         ("post_attention_layernorm.weight", [hidden])):
            tensors.append((p + n, shape))
            nb = 2
            for d in shape:
                nb *= d
            total += nb
        layer += 1
    tensors.append(("lm_head.weight", [vocab, hidden]))
    return tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("path")
    ap.add_argument("--size", type=int, default=4 << 30)
    ap.add_argument("--hidden", type=int, default=4096)
    a = ap.parse_args()

    header = {"__metadata__": {"format": "pt", "generator": "ringload perf/gen_ckpt.py"}}
    off = 0
    for name, shape in layout(a.size, a.hidden):
        nb = 2
        for d in shape:
            nb *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + nb]}
        off += nb
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)  # data starts 8-byte aligned
    tmp = a.path + ".part"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        left, chunk = off, 64 << 20
        while left:
            n = min(left, chunk)
            f.write(os.urandom(n))
            left -= n
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, a.path)
    print(f"{a.path}: {len(header) - 1} tensors, {off} data bytes, "
          f"{8 + len(h) + off} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
