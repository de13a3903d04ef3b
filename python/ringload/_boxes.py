"""Reads given boxes of checkpoint tensors, exactly, in one load: the
engine under ringload.jax and ringload.torch's distributed loads.

A box is ((start, stop), ...) per dimension of a tensor. Each box not the
whole tensor becomes a slice target of the sharding spec (the target of
safe_open's get_slice), so the planner reads exactly the box's bytes,
coalesced with its neighbours', into one staging area of the process:

    {"targets": [{"name": "w[0:4,0:8]", "source": "w",
                  "slice": [[0, 4], [0, 8]]}],
     "tensors": ["w[0:4,0:8]", "b"]}        # b: wanted whole

Whole tensors are named as themselves, empty boxes read nothing. rules()
writes a mesh spec's rules for a framework's per-tensor partition specs
(ringload.torch's DTensor placements, ringload.jax's PartitionSpecs).
"""
import collections

import numpy as np

from . import _core, _dtypes, _handles

Box = collections.namedtuple("Box", "name box")
Box.__doc__ = "A box of tensor name: ((start, stop), ...) per dimension."


def box_shape(box):
    """The shape of box ((start, stop), ...)."""
    return tuple(b - a for a, b in box)


def box_nbytes(meta, box):
    """Bytes of box of tensor meta (a _handles tensor: dtype, shape)."""
    n = int(np.prod(box_shape(box), dtype=np.int64))
    bits = _dtypes.SUBBYTE_BITS.get(meta.dtype)
    if bits is not None:
        return n * bits // 8
    return n * _dtypes.numpy_dtype(meta.dtype).itemsize


def whole(meta):
    """The box of all of tensor meta."""
    return tuple((0, d) for d in meta.shape)


def _target_name(ckpt, b, taken):
    """A target name for box b that no checkpoint tensor or other target
    has: the tensor's name and the box, "w[0:4,0:8]"."""
    name = b.name + "[" + ",".join(f"{x}:{y}" for x, y in b.box) + "]"
    while name in ckpt.by_name or name in taken:
        name += "'"
    return name


def spec_of(ckpt, boxes):
    """The sharding spec (a dict) that reads boxes (non-empty, distinct);
    returns (spec, {loaded name: Box})."""
    targets, tensors, names = [], [], {}
    for b in boxes:
        meta = ckpt.tensor(b.name)
        if b.box == whole(meta):
            name = b.name
        else:
            name = _target_name(ckpt, b, names)
            targets.append({"name": name, "source": b.name,
                            "slice": [list(r) for r in b.box]})
        names[name] = b
        tensors.append(name)
    return {"targets": targets, "tensors": tensors}, names


def read(ckpt, boxes, job_args, convert=_dtypes.to_numpy):
    """Reads boxes (Box, distinct) of ckpt in one load; returns
    ({Box: array of the box}, loader statistics or None).

    job_args: (backend, options, expected sha256) of the load. convert
    (raw uint8 bytes, name, dtype, shape) makes each array: numpy's by
    default, views of the library's staging (each keeps it alive); empty
    boxes get empty arrays and are not read.
    """
    out = {}
    wanted = []
    for b in boxes:
        meta = ckpt.tensor(b.name)
        if box_nbytes(meta, b.box):
            wanted.append(b)
        else:
            out[b] = convert(np.empty(0, np.uint8), b.name, meta.dtype,
                             box_shape(b.box))
    if not wanted:
        return out, None
    spec_dict, names = spec_of(ckpt, wanted)
    spec = _handles.Spec(spec_dict)
    try:
        backend, options, expected = job_args
        loaded = _core.load_library(_core.Job(ckpt, spec, 0, backend, options,
                                              None, expected))
    finally:
        spec.close()
    for s in loaded.shards:
        b = names[s.name]
        out[b] = convert(loaded.raw(s), b.name, s.dtype, s.box)
    return out, loaded.stats


def escape(text):
    """text as a POSIX ERE matching it literally."""
    return "".join("\\" + ch if ch in ".[]()*+?{}|^$\\" else ch
                   for ch in text)


def rules(items):
    """Rules giving each (name, spec entries) of items its entries
    (None: not loaded, no rule): one rule per name pattern (each run of
    digits as [0-9]+: a layer's tensors share one) when every tensor of
    the pattern has the same entries, else one rule per tensor.
    Replicated tensors ([]) need no rule."""
    import re
    groups = {}
    for name, entries in items:
        pattern = "".join("[0-9]+" if k % 2 else escape(part) for k, part
                          in enumerate(re.split(r"([0-9]+)", name)))
        groups.setdefault(pattern, []).append((name, entries))
    rules = []
    for pattern, members in groups.items():
        if len({repr(e) for _, e in members}) == 1:
            if members[0][1]:
                rules.append({"match": pattern, "spec": members[0][1]})
            continue
        rules += [{"match": escape(name), "spec": e}
                  for name, e in members if e]
    return rules
