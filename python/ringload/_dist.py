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

Failures: after the read every rank tells the others its status
(all_gather_object); when any failed, every rank raises that rank's
error (same class and code; the message starts with "rank N: "). A
rank that dies or hangs makes the others' collectives fail at the group's
timeout: they raise RL_E_PEER (LoadError) naming the collective.
"""
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
