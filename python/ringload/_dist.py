"""Loads across the ranks of a torch.distributed process group: the engine
of ringload.torch's load_dtensors and load(process_group=...).

Every rank computes, from the checkpoint's header alone, the same table of
boxes: each distinct box of a tensor and the ranks that need it. Without
read once every rank reads the boxes it needs. With read once each box
has one owner, the needing rank with the fewest bytes so far (boxes taken
in table order: all ranks agree), which reads it; the other needing ranks
receive it from the owner by point-to-point send/recv (gloo or NCCL),
straight into their result tensors, in batches of at most batch_bytes in
flight. The owner needs the box itself, so read once costs no memory
beyond the results.

Agreement: before any byte moves the ranks exchange what they are about
to do (same_plan): each file's name, size, header and identity (machine,
device, inode, mtime), a sample of its bytes where identities differ, and
a digest of the sharding or placements; any difference ends every rank
with the same ArgumentError naming it, before a collective whose sizes it
could change (all_gather_object agrees on sizes first).

Failures: after the read every rank tells the others its status
(all_gather_object); when any failed, every rank raises that rank's
error (same class and code; the message starts with "rank N: "). A
rank that dies or hangs makes the others' collectives fail at the group's
timeout: they raise RL_E_PEER (LoadError) naming the collective.
"""
import hashlib
import os
import socket
import struct

import torch
import torch.distributed as dist

from . import _boxes, _dtypes, _errors, _lib

def arg_error(msg):
    """The ArgumentError (RL_E_INVALID_ARG) of msg."""
    return _errors.ArgumentError(_lib.RL_E_INVALID_ARG, msg)


def _peer_error(msg):
    return _errors.error(_lib.RL_E_PEER, msg)


def _status(err):
    """What a rank tells the others: None, or (class name, code, message)."""
    if err is None:
        return None
    if isinstance(err, _errors.Error):
        return (type(err).__name__, err.code, err.message)
    return (None, _lib.RL_E_PEER, f"{type(err).__name__}: {err}")


def _rebuild(status, rank):
    """The error a rank raises for another rank's failure status."""
    cls_name, code, message = status
    cls = getattr(_errors, cls_name or "", None)
    if not (isinstance(cls, type) and issubclass(cls, _errors.Error)):
        cls = _errors.error_class(code)
    return cls(code, f"rank {rank}: {message}")


def collective(what, fn, *args, **kwargs):
    """Runs a torch.distributed call; its failure (a peer gone, the
    group's timeout) becomes RL_E_PEER naming what was exchanged."""
    try:
        return fn(*args, **kwargs)
    except (RuntimeError, ValueError) as e:
        raise _peer_error(f"{what}: {type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}") \
            from e


def agree(group, fn):
    """Runs fn() on every rank of group, then the ranks compare statuses:
    if any failed, every rank raises the lowest failing rank's error (its
    own exception on that rank). Returns fn()'s result."""
    err, result = None, None
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - told to every rank, re-raised
        err = e
    statuses = [None] * dist.get_world_size(group)
    collective("status exchange", dist.all_gather_object, statuses,
               _status(err), group=group)
    for rank, status in enumerate(statuses):
        if status is None:
            continue
        if err is not None and rank == dist.get_rank(group):
            raise err
        raise _rebuild(status, rank) from None
    return result


def _machine():
    """What tells two machines apart: the boot id (one per running kernel),
    else the host name."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return socket.gethostname()


# A content check where identities differ reads SAMPLES blocks of
# SAMPLE_BYTES, evenly spaced over the file: 1 MiB, next to nothing
# against a checkpoint, and any tensor larger than 1/255 of the file
# holds a block. A difference no block covers is not seen: give sha256.
SAMPLES = 256
SAMPLE_BYTES = 4096


def _file_view(path):
    """What the ranks compare about one file of the checkpoint: its name,
    size, a digest of its header, and its identity."""
    st = os.stat(path)
    with open(path, "rb") as f:
        head = f.read(8)  # the library validated the header already
        header = f.read(struct.unpack("<Q", head)[0]) if len(head) == 8 \
            else b""
    return {"name": os.path.basename(path), "size": st.st_size,
            "header": hashlib.sha256(head + header).hexdigest(),
            "id": (_machine(), st.st_dev, st.st_ino, st.st_size,
                   st.st_mtime_ns)}


def _sample(path, size):
    """A digest of SAMPLES blocks evenly spaced over the file (all of a
    file no larger than them)."""
    h = hashlib.sha256()
    span = SAMPLES * SAMPLE_BYTES
    with open(path, "rb", buffering=0) as f:
        if size <= span:
            h.update(f.read())
            return h.hexdigest()
        for i in range(SAMPLES):
            h.update(os.pread(f.fileno(), SAMPLE_BYTES,
                              (size - SAMPLE_BYTES) * i // (SAMPLES - 1)))
    return h.hexdigest()


def _gather(group, what, mine):
    """Every rank's mine, in rank order (all_gather_object: sizes agreed
    first, so views of any size never abort the collective library)."""
    views = [None] * dist.get_world_size(group)
    collective(what, dist.all_gather_object, views, mine, group=group)
    return views


def view(ckpt, plan):
    """This rank's view of a load, for same_plan: its files (_file_view)
    and plan, {name: value} of what must be the same on every rank (the
    name is what an error reports: "sharding", "placements", ...)."""
    return {"files": [_file_view(p) for p in ckpt.files()],
            "plan": {k: _digest(v) for k, v in plan.items()}}


def _digest(value):
    return hashlib.sha256(repr(value).encode()).hexdigest()


def _file_error(views, f):
    """The message of file f's first difference between ranks, or None."""
    files = [v["files"][f] for v in views]
    for key, what in (("name", "another file"), ("size", "another size"),
                      ("header", "another header")):
        r = next((r for r, x in enumerate(files) if x[key] != files[0][key]),
                 None)
        if r is not None:
            return (f"read_once: the ranks' checkpoints differ: rank {r}'s "
                    f"file {f} ({files[r]['name']}) has {what} than rank "
                    f"0's ({files[0]['name']})")
    return None


def _plan_error(views, keys):
    """The message of the first of keys whose value differs between ranks,
    or None."""
    for key in keys:
        r = next((r for r, v in enumerate(views)
                  if v["plan"].get(key) != views[0]["plan"].get(key)), None)
        if r is not None:
            return (f"the ranks disagree on the {key}: rank {r}'s is not "
                    f"rank 0's")
    return None


def same_plan(group, ckpt, mine):
    """Checks that every rank of group is about to do what this one is
    (mine: view()): the same plan values, and with read once the same
    files (name, size, header; where identities differ, a sample of their
    bytes). Any difference raises the same ArgumentError on every rank,
    naming the value or the file."""
    views = _gather(group, "plan exchange", mine)
    msg = _plan_error(views, ["read_once"])
    if msg:
        raise arg_error(msg)
    if not mine["plan"].get("read_once") == _digest(True):
        return
    if len({len(v["files"]) for v in views}) > 1:
        r = next(r for r, v in enumerate(views)
                 if len(v["files"]) != len(views[0]["files"]))
        raise arg_error(f"read_once: the ranks' checkpoints differ: rank {r} "
                        f"has {len(views[r]['files'])} files, rank 0 "
                        f"{len(views[0]['files'])}")
    for f in range(len(views[0]["files"])):
        msg = _file_error(views, f)
        if msg:
            raise arg_error(msg)
    msg = _plan_error(views, sorted(mine["plan"]))
    if msg:
        raise arg_error("read_once: " + msg)
    _same_bytes(group, ckpt, views)


def _same_bytes(group, ckpt, views):
    """Files whose identity differs between ranks (node-local copies, or a
    stale one) are compared by a sample of their bytes (_sample)."""
    paths = ckpt.files()
    check = [f for f in range(len(paths))
             if len({v["files"][f]["id"] for v in views}) > 1]
    if not check:
        return
    samples = _gather(group, "sample exchange", {"samples": agree(
        group, lambda: [_sample(paths[f], views[0]["files"][f]["size"])
                        for f in check])})
    for i, f in enumerate(check):
        r = next((r for r, s in enumerate(samples)
                  if s["samples"][i] != samples[0]["samples"][i]), None)
        if r is not None:
            name = views[0]["files"][f]["name"]
            raise arg_error(f"read_once: the ranks' checkpoints differ: rank "
                            f"{r}'s copy of file {f} ({name}) holds other "
                            f"bytes than rank 0's (same header: a stale "
                            f"copy?)")


def owners(ckpt, needs, read_once):
    """{Box: rank that reads it}, or None for a box every needing rank
    reads itself (all boxes without read once; empty boxes, which nothing
    reads). needs: {Box: sorted needing ranks}, in table order."""
    load, out = {}, {}
    for b, ranks in needs.items():
        n = _boxes.box_nbytes(ckpt.tensor(b.name), b.box)
        if not (read_once and n):
            out[b] = None
            continue
        owner = min(ranks, key=lambda r: (load.get(r, 0), r))
        load[owner] = load.get(owner, 0) + n
        out[b] = owner
    return out


def _to_torch(raw, name, dtype, shape):
    return _dtypes.to_torch(torch, raw, name, dtype, shape)


def _pieces(t, batch_bytes):
    """Contiguous row ranges of t (a C-order box) of at most batch_bytes
    each (at least one row), as flat uint8 views."""
    flat = t.reshape(-1).view(torch.uint8) if t.dim() else \
        t.reshape(1).view(torch.uint8)
    if t.dim() == 0 or not t.numel():
        return [flat]
    row = flat.numel() // t.shape[0]
    rows = max(1, batch_bytes // max(row, 1))
    return [flat[i * row:min(i + rows, t.shape[0]) * row]
            for i in range(0, t.shape[0], rows)]


def _sends(needs, owner):
    """[(box, owner, [other needing ranks])] of every box that travels, in
    table order (the same on every rank)."""
    return [(b, owner[b], [r for r in ranks if r != owner[b]])
            for b, ranks in needs.items()
            if owner[b] is not None and len(ranks) > 1]


def _exchange(group, sends, tensors, batch_bytes, counts):
    """Sends each shared box from its owner to the other ranks that need
    it, piece by piece, batch_bytes in flight at most per batch."""
    me = dist.get_rank(group)
    batch, in_batch = [], 0
    for b, src, dsts in sends:
        if me != src and me not in dsts:
            continue
        for piece in _pieces(tensors[b], batch_bytes):
            for dst in dsts:
                if me not in (src, dst):
                    continue
                if in_batch and in_batch + piece.numel() > batch_bytes:
                    _run(group, batch)
                    batch, in_batch = [], 0
                peer = dst if me == src else src
                batch.append((me == src, piece, peer))
                in_batch += piece.numel()
                counts["sent_bytes" if me == src else "received_bytes"] += \
                    piece.numel()
    _run(group, batch)


def _run(group, batch):
    """Posts one batch of sends and receives and waits for all of them."""
    if not batch:
        return
    ops = [dist.P2POp(dist.isend if send else dist.irecv, piece,
                      dist.get_global_rank(group, peer) if group else peer,
                      group) for send, piece, peer in batch]
    for work in collective("send/recv", dist.batch_isend_irecv, ops):
        collective("send/recv", work.wait)


def run(ckpt, needs, group, read_once, job_args, batch_bytes):
    """Reads and exchanges the boxes of needs ({Box: sorted ranks}, in the
    same order on every rank) that this rank needs; returns ({Box: CPU
    tensor of the box}, statistics).

    job_args: (backend, options, expected sha256) of this rank's read.
    """
    me = dist.get_rank(group)
    owner = owners(ckpt, needs, read_once)
    mine = [b for b, ranks in needs.items()
            if me in ranks and owner[b] in (None, me)]
    tensors, stats = agree(group, lambda: _boxes.read(ckpt, mine, job_args,
                                                      _to_torch))
    counts = {"sent_bytes": 0, "received_bytes": 0}
    sends = _sends(needs, owner)
    for b, _, dsts in sends:
        if me in dsts:
            meta = ckpt.tensor(b.name)
            tensors[b] = torch.empty(_boxes.box_shape(b.box), dtype=
                                     _dtypes.torch_dtype(torch, b.name,
                                                         meta.dtype))
    _exchange(group, sends, tensors, batch_bytes, counts)
    unique = sum(_boxes.box_nbytes(ckpt.tensor(b.name), b.box) for b in needs)
    return tensors, dict(stats or {"bytes_needed": 0, "bytes_read": 0},
                         unique_bytes=unique, **counts)
