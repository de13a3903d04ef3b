"""load_file's hot path: tensors over a private mapping of each file.

safetensors hands out tensors over a mapping of the file, so a checkpoint
the page cache holds costs it page-table entries, not copies; reading it
would copy every byte. When every byte the tensors need is resident (the
library's probe, rl_file_cached_bytes) and every tensor sits at an offset
aligned for its dtype, load_file maps each file MAP_PRIVATE with
PROT_READ | PROT_WRITE: copy-on-write, so a tensor may be written and the
file never changes. Each file's mapping is a uint8 array whose base is the
mmap object; every tensor is a view of it and so holds it: the mapping
lives exactly as long as any tensor of the file (the staging contract of
_core.load_library).

mapped() returns None (the caller reads) when a file is not wholly
resident, a tensor is misaligned, or a file's size is not the one its
header declares (the read then reports the change).
"""
import mmap
import os

import numpy as np

from . import _dtypes, _handles, _lib


def _extent(tensors):
    """[first, end) of the bytes tensors take in their file."""
    used = [t for t in tensors if t.nbytes]
    if not used:
        return 0, 0
    return (min(t.offset for t in used),
            max(t.offset + t.nbytes for t in used))


def _resident(path, first, end):
    """True when the page cache holds every byte of [first, end) of path."""
    n = _lib.rl_file_cached_bytes(os.fsencode(path), first, end - first)
    return n == end - first


def _map(path, end):
    """A uint8 array over a private mapping of path, or None when the file
    is not end bytes long (it changed since the header was read)."""
    with open(path, "rb") as f:
        if os.fstat(f.fileno()).st_size != end:
            return None
        m = mmap.mmap(f.fileno(), end, flags=mmap.MAP_PRIVATE,
                      prot=mmap.PROT_READ | mmap.PROT_WRITE)
    return np.frombuffer(m, np.uint8)  # holds m: no close while viewed


def _plan(ckpt):
    """[(file, path, end)] of the files to map, or None when one is cold or
    holds a misaligned tensor."""
    by_file = {}
    for t in ckpt.tensors:
        if t.nbytes and t.offset % _dtypes.element_bytes(t.dtype):
            return None
        by_file.setdefault(t.file, []).append(t)
    paths = ckpt.files()
    out = []
    for i, tensors in sorted(by_file.items()):
        first, end = _extent(tensors)
        if end and not _resident(paths[i], first, end):
            return None
        out.append((i, paths[i], end))
    return out


def mapped(ckpt):
    """(shards, staging) of every tensor of ckpt, as one device per file
    whose staging is that file's private mapping (for _core.Loaded), or
    None: read instead (see the module's docstring)."""
    plan = _plan(ckpt)
    if plan is None:
        return None
    areas = {}
    for i, path, end in plan:
        if end:
            areas[i] = _map(path, end)
            if areas[i] is None:
                return None
    shards = [_handles.Shard(k, t.name, t.dtype, t.shape, (0,) * len(t.shape),
                             t.shape, t.shape, t.file, 0, t.offset, t.nbytes)
              for k, t in enumerate(ckpt.tensors)]
    staging = [areas.get(i) for i in range(max(areas, default=-1) + 1)]
    return shards, staging
