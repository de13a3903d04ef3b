"""Loads across the processes of a job: the engine of ringload.torch's
load_dtensors and load(process_group=...) over a torch.distributed group,
and of ringload.jax's load(read_once=True) over JAX's coordination
service (_kv). A group is an object with rank, size, gather(what, obj)
(every process's obj, in rank order) and transport() (a _callback
transport of the group); a torch.distributed group (None: the default
one) is wrapped as one (_TorchGroup), so torch.distributed and JAX drive
the same checks and the same run. Below, "rank" is the process in the
group.

The library plans and loads: each rank builds the plan of its process (its
rank in the group) for the same spec (load_dtensors makes one from the
mesh and placements), with read once (RL_PLAN_READ_ONCE) its transfers
too: every byte several ranks need is read by one of them, in contiguous
file ranges balanced by bytes, and sent whole to the others. One
rl_loader_run over a transport of the group (_transport: isend/irecv,
wait, all_reduce) does the rank's reads, the transfers' reads, moves and
copies; this module keeps the checks before the load and the collective
calls around it. A framework may set the loader's device delivery before
the run (run's device hook; ringload.torch onto CUDA): the same run then
copies the rank's bytes, received ones too, to the device from the
pinned windows, with no host staging. Memory in transit: a batch's
payloads, at most batch_bytes (RL_PLAN_BATCH_BYTES).

Agreement: before any byte moves the ranks exchange what they are about
to do (same_plan): each file's name, size, header and identity (machine,
device, inode, mtime), a sample of its bytes where identities differ, and
a digest of the sharding or placements; any difference ends every rank
with the same ArgumentError naming it, before a collective whose sizes it
could change (all_gather_object agrees on sizes first).

Failures: the library agrees after the rank's own reads and twice per
batch, so a failure anywhere stops every rank there; then every rank
tells the others its status (all_gather_object) and every rank raises
the same rank's error (same class and code; the message starts with
"rank N: "; agree prefers a rank's own failure). A
rank that dies or hangs makes the others' collectives fail at the group's
timeout: they raise RL_E_PEER (LoadError) naming the collective.
"""
import ctypes
import hashlib
import os
import socket
import struct

import numpy as np

from . import _core, _errors, _handles, _lib, _sha256


def arg_error(msg):
    """The ArgumentError (RL_E_INVALID_ARG) of msg."""
    return _errors.ArgumentError(_lib.RL_E_INVALID_ARG, msg)


def _peer_error(msg):
    return _errors.error(_lib.RL_E_PEER, msg)


def _status(err):
    """What a rank tells the others: None, or (class name, code, message,
    rank of the failure: 0 its own, 1 a collective's (a peer gone or
    late), 2 only another rank's (the library's "another process
    failed"))."""
    if err is None:
        return None
    if getattr(err, "ringload_secondary", False):
        how = 2
    else:
        how = 1 if getattr(err, "code", None) == _lib.RL_E_PEER else 0
    if isinstance(err, _errors.Error):
        return (type(err).__name__, err.code, err.message, how)
    return (None, _lib.RL_E_PEER, f"{type(err).__name__}: {err}", how)


def _rebuild(status, rank):
    """The error a rank raises for another rank's failure status."""
    cls_name, code, message = status[:3]
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


class _TorchGroup:
    """A torch.distributed group (None: the default group) as _dist's
    group: all_gather_object, and _transport's ops."""

    def __init__(self, group):
        import torch.distributed as dist
        self.dist, self.group = dist, group
        self.rank = dist.get_rank(group)
        self.size = dist.get_world_size(group)

    def gather(self, what, obj):
        """Every rank's obj, in rank order (all_gather_object: sizes
        agreed first, so objects of any size never abort the collective
        library)."""
        out = [None] * self.size
        collective(what, self.dist.all_gather_object, out, obj,
                   group=self.group)
        return out

    def transport(self):
        from . import _transport
        return _transport.Transport(self.group)


def _group(group):
    """group as _dist's group: itself when it is one (gather, transport),
    else a torch.distributed group wrapped."""
    if hasattr(group, "gather") and hasattr(group, "transport"):
        return group
    return _TorchGroup(group)


def agree(group, fn):
    """Runs fn() on every rank of group, then the ranks compare statuses:
    if any failed, every rank raises the same rank's error (its own
    exception on that rank): the lowest rank that failed of its own,
    else of a collective, else the lowest that failed (_status). Returns
    fn()'s result."""
    group = _group(group)
    err, result = None, None
    try:
        result = fn()
    except Exception as e:  # noqa: BLE001 - told to every rank, re-raised
        err = e
    statuses = group.gather("status exchange", _status(err))
    failed = [(s[3], r) for r, s in enumerate(statuses) if s is not None]
    if not failed:
        return result
    rank = min(failed)[1]
    if err is not None and rank == group.rank:
        raise err
    raise _rebuild(statuses[rank], rank) from None


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
    group = _group(group)
    views = group.gather("plan exchange", mine)
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
    samples = group.gather("sample exchange", {"samples": agree(
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


def plan(ckpt, spec, group, batch_bytes, read_once, chunk_bytes):
    """This rank's plan of spec (its process: the rank in group), with
    read_once its transfers cut and batched alike on every rank (transfer
    alignment 4096, as rl_mpi_load sets, whatever each rank's file
    system). The mesh must have one process per rank of the group."""
    group = _group(group)
    world = group.size
    p = _handles.Plan()
    try:
        p.set(process=group.rank, read_once=int(read_once),
              transfer_align=4096, batch_bytes=batch_bytes,
              chunk_bytes=chunk_bytes)
        p.build(ckpt, spec)
        n = _lib.rl_plan_num_processes(p.ptr)
        if n != world:
            raise arg_error(f"the sharding's mesh has {n} processes but the "
                            f"group {world} ranks (process = rank in the "
                            "group)")
        if read_once:
            p.unique_bytes = _needed(p)
        else:  # what read once would read: the group's distinct bytes
            q = plan(ckpt, spec, group, batch_bytes, True, chunk_bytes)
            p.unique_bytes = q.unique_bytes
            q.close()
    except BaseException:
        p.close()
        raise
    return p


def _needed(p):
    """The bytes every process of p needs, together (rl_plan_get_stats)."""
    total = _lib.PlanStats()
    p.check(_lib.rl_plan_get_stats(p.ptr, _lib.RL_TOTAL, ctypes.byref(total)))
    return total.needed_bytes


def summary(p):
    """(transfers, batches, digest) of the cluster's transfers: equal on
    ranks that built the same plan (rl_plan_transfer_summary)."""
    t, b, d = ctypes.c_uint64(), ctypes.c_uint64(), ctypes.c_uint64()
    p.check(_lib.rl_plan_transfer_summary(p.ptr, ctypes.byref(t),
                                          ctypes.byref(b), ctypes.byref(d)))
    return t.value, b.value, d.value


def _area(loader, dev):
    """Device dev's library staging as a uint8 array that keeps loader
    (and so the staging) alive."""
    ptr, n = loader.staging(dev)
    if not ptr:
        return np.empty(0, np.uint8)
    buf = (ctypes.c_uint8 * n).from_address(ptr)
    buf.ringload_loader = loader
    return np.frombuffer(buf, np.uint8)


def _xstats(p, process):
    """rl_plan_get_xstats of process (this rank's: what it roots)."""
    x = _lib.PlanXStats(size=ctypes.sizeof(_lib.PlanXStats))
    p.check(_lib.rl_plan_get_xstats(p.ptr, process, ctypes.byref(x)))
    return x


def _check_whole(loader, ckpt, expected):
    """Hashes each file with an expected SHA-256 ([(file, hex)]) that this
    rank's reads did not check (read once reads parts of files, or none):
    whole, with rl_sha256_file; IntegrityError naming it on a mismatch."""
    matched = {f["path"] for f in loader.stats(ckpt)["files"]
               if f["sha256_state"] == "matched"}
    for path in ckpt.files():
        want = [h for name, h in expected if name == path or
                os.path.basename(name) == os.path.basename(path)]
        if not want or path in matched:
            continue
        got = (ctypes.c_uint8 * 32)()
        rc = _lib.rl_sha256_file(os.fsencode(path), ctypes.byref(got))
        if rc < 0:
            raise _errors.error(rc, f"{path}: cannot hash it")
        if bytes(got).hex() != want[0].lower():
            raise _errors.error(_lib.RL_E_CHECKSUM, f"{path}: SHA-256 "
                                f"mismatch: expected {want[0].lower()}, "
                                f"got {bytes(got).hex()}")


def _load(ckpt, p, group, loader, expected, device):
    """device(p, loader) when given (it sets loader's device delivery),
    then loader.run(p) over a transport of group when p has transfers (the
    library reads, moves and copies them), then _check_whole; returns
    the transport (None without transfers). A failure of the run raises
    what a transport op kept, or the run's error marked secondary when
    only another rank failed (agree then prefers that rank's)."""
    tp = None
    if device is not None:
        device(p, loader)
    if summary(p)[0]:
        tp = group.transport()
        loader.set_transport(tp)
    try:
        loader.run(p)
    except _errors.Error as e:
        if tp is None:
            raise
        e.ringload_secondary = tp.peer_failed and not tp.own_failed
        tp.raise_kept(e)
    _check_whole(loader, ckpt, expected)
    return tp


def run(ckpt, p, group, loader, expected=(), device=None):
    """Runs plan p (plan()) on this rank with loader (its expected SHA-256
    values set: [(file, hex)], each file its reads did not check then
    hashed whole): its own reads and, with read once, the transfers,
    which rl_loader_run reads, moves over the group (_transport) and
    copies (the loader's backend and options read the transfers too).
    device: None, or device(p, loader), called on every rank before the
    run (a failure there fails every rank), which may set loader's device
    delivery and give every shard its destination (rl_loader_set_device
    and _dest, or the CUDA ones): the one run then copies the rank's
    reads and the bytes it receives to the device from the pinned
    windows, and no host staging is made (rl_loader_device_kind says
    which). Returns (shards, device ids, staging arrays of the devices
    (views that keep loader; none on a device), statistics: the loader's
    bytes needed (with the payloads this rank roots) and read, the bytes
    and messages the transport moved, the group's distinct bytes)."""
    group = _group(group)
    try:
        tp = agree(group, lambda: _load(ckpt, p, group, loader, expected,
                                        device))
        _sha256.warn_unchecked(loader, ckpt)
        st = loader.stats()
        devices = p.devices()
        on_device = _lib.rl_loader_device_kind(loader.ptr) is not None
        staging = [] if on_device else [_area(loader, d)
                                        for d in range(len(devices))]
    except BaseException:
        loader.close()
        raise
    if on_device:  # the bytes are in the caller's destinations
        loader.close()
    roots = _xstats(p, group.rank).payload_bytes if tp else 0
    counts = {"bytes_needed": st["bytes_needed"] + roots,
              "bytes_read": st["bytes_read"],
              "sent_bytes": tp.sent if tp else 0,
              "received_bytes": tp.received if tp else 0,
              "transport_messages": tp.messages if tp else 0,
              "unique_bytes": p.unique_bytes}
    return p.shards(), [i for i, _ in devices], staging, counts


def _prepare(filename, sharding, group, load_args, plan_values, to, check):
    """Opens the checkpoint, check(ckpt) (the caller's checks of its
    tensors), plans this rank's process of sharding (a spec dict, JSON or
    file; None: every tensor whole on device 0) with plan(), every
    floating tensor converted to the library dtype to (None: as stored;
    read once, the transfers' copies convert); returns (ckpt, plan,
    loader, expected, view). load_args: ((backend, options, sha256),
    batch_bytes, read_once); plan_values(plan): the values the ranks must
    agree on (view())."""
    (backend, options, sha256), batch_bytes, read_once = load_args
    ckpt = _handles.Checkpoint(filename)
    spec = loader = p = None
    try:
        if check is not None:
            check(ckpt)
        expected = _sha256.resolve(ckpt, sha256)
        loader = _handles.Loader(backend, options, expected)
        spec = _handles.Spec(sharding)
        if to is not None:  # else the spec text's, if it names one
            spec.set_dtype(to)
        p = plan(ckpt, spec, group, batch_bytes, read_once,
                 loader.request_bytes(ckpt))
        mine = view(ckpt, dict(plan_values(p), read_once=read_once,
                               batch_bytes=batch_bytes, dtype=to))
    except BaseException:
        for h in (p, loader, ckpt):
            if h is not None:
                h.close()
        raise
    finally:
        if spec is not None:
            spec.close()
    return ckpt, p, loader, expected, mine


def run_group(filename, sharding, group, load_args, plan_values, after=None,
              to=None, check=None, device=None):
    """Prepares (_prepare) on every rank, checks that the ranks agree
    (same_plan), runs the plan (run, with device: onto the device it
    sets); returns (core.Loaded, statistics, after(ckpt, expected) or
    None)."""
    group = _group(group)
    ckpt, p, loader, expected, mine = agree(group, lambda: _prepare(
        filename, sharding, group, load_args, plan_values, to, check))
    try:
        try:
            same_plan(group, ckpt, mine)
        except BaseException:
            loader.close()  # no staging made yet: nothing refers to it
            raise
        shards, ids, staging, st = run(ckpt, p, group, loader, expected,
                                       device)
        extra = after(ckpt, expected) if after else None
    finally:
        p.close()
        ckpt.close()
    return _core.Loaded(shards, ids, staging), st, extra
