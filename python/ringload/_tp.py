"""Read once across the ranks of a torch.distributed group, for loaders
that give every rank every tensor (vLLM's tensor parallelism: each
rank's load_weights cuts its own part out of the whole tensor).

Files go to ranks balanced by bytes (largest first, each to the rank
with the fewest bytes so far; all ranks compute the same). Each rank
streams its files (_weights._Stream) and the tensors travel by broadcast
in rounds: round k broadcasts the k-th tensor of every rank, so all ranks
read at once. Before a round the ranks all-reduce one status; when one
failed, every rank raises its error (_dist.agree), so nobody waits in a
broadcast for a rank that gave up. The last round is followed by each
rank reading its stream to the end (checksums are known then) and one
more status exchange.
"""
import torch
import torch.distributed as dist

from . import _dist, _errors, _lib, _weights


def assign_files(sizes, nranks):
    """[rank of each file]: largest first, to the rank with the fewest
    bytes so far (the lowest such rank)."""
    owner, load = [0] * len(sizes), [0] * nranks
    for f in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = min(range(nranks), key=lambda r: (load[r], r))
        owner[f] = r
        load[r] += sizes[f]
    return owner


def schedule(src, nranks):
    """[[names of rank r in read order] per rank]: its files' tensors."""
    ckpt = src.ckpt
    sizes = [0] * len(ckpt.files())
    for n in src.names:
        t = ckpt.tensor(n)
        sizes[t.file] += t.nbytes
    owner = assign_files(sizes, nranks)
    out = [[] for _ in range(nranks)]
    for n in src.names:
        out[owner[ckpt.tensor(n).file]].append(n)
    return out


def _agree_headers(src, group):
    """Raises on every rank unless all opened the same checkpoint."""
    digests = [None] * dist.get_world_size(group)
    _dist.collective("header digest exchange", dist.all_gather_object,
                     digests, _weights.header_digest(src), group=group)
    for r, d in enumerate(digests):
        if d != digests[0]:
            raise _errors.CheckpointError(
                _lib.RL_E_INVALID_ARG, f"{src.ckpt.path}: rank {r} opened "
                f"other files or headers than rank 0 (header digest {d[:16]} "
                f"!= {digests[0][:16]}): every rank must load the same "
                "checkpoint")


def _sync(group, err, dev):
    """Every rank's status after a step; raises on every rank when one
    failed (the failing rank its own error)."""
    flag = torch.tensor([1 if err is not None else 0], dtype=torch.int32,
                        device=dev)
    _dist.collective("status all_reduce", dist.all_reduce, flag,
                     op=dist.ReduceOp.MAX, group=group)
    if flag.item():
        def fail():
            if err is not None:
                raise err
        _dist.agree(group, fail)


def _take(stream, name):
    """(tensor, None) or (None, the exception)."""
    try:
        return stream.take(name), None
    except Exception as e:  # noqa: BLE001 - told to every rank
        return None, e


def iterate(src, opts, device, group, stats=None):
    """_weights.iterate with a group: yields (name, tensor) for every
    wanted tensor, each read by one rank and broadcast."""
    me, n = dist.get_rank(group), dist.get_world_size(group)
    dev = device if _weights.uses_cuda_sink(device) else "cpu"
    _agree_headers(src, group)
    plan = schedule(src, n)
    stream, counts = None, {"sent_bytes": 0, "received_bytes": 0}
    try:
        stream = _dist.agree(group, lambda: _weights.open_stream(
            src, plan[me], opts, device))
        for k in range(max(map(len, plan), default=0)):
            mine, err = (None, None)
            if k < len(plan[me]):
                mine, err = _take(stream, plan[me][k])
            _sync(group, err, dev)
            for r in range(n):
                if k >= len(plan[r]):
                    continue
                name = plan[r][k]
                t = mine if r == me else _weights.empty_like_meta(
                    src.ckpt.tensor(name), dev)
                if t.numel():  # as bytes: gloo has no float8 or float4
                    _dist.collective(f"broadcast of {name}", dist.broadcast,
                                     t.reshape(-1).view(torch.uint8),
                                     _global(group, r), group=group)
                    nbytes = t.numel() * t.element_size()
                    if r == me:
                        counts["sent_bytes"] += nbytes * (n - 1)
                    else:
                        counts["received_bytes"] += nbytes
                yield name, t
        err = None
        try:
            stream.finish()
        except Exception as e:  # noqa: BLE001 - told to every rank
            err = e
        _sync(group, err, dev)
        if stats is not None:
            stats.update(stream.stats, **counts)
    finally:
        if stream is not None:
            stream.close()


def _global(group, r):
    return dist.get_global_rank(group, r) if group is not None and \
        group != dist.group.WORLD else r
