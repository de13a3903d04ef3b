"""ringload.torch: safetensors.torch's load_file on ringload, and the
PyTorch adapter of safe_open and ringload.load.

    from ringload.torch import load_file
    tensors = load_file("model.safetensors", device="cpu")

CPU tensors are zero-copy views of the library's staging (any one keeps the
whole area alive; clone() one to keep it alone), or with copy=True tensors
that own their memory (the staging is freed before load_file returns).
Importing this module imports torch but nothing that needs a GPU.

Devices: "cpu", "cuda", "cuda:N", an int N (cuda:N, as safetensors), a
torch.device, or another torch device type, which torch's .to() handles.
A CUDA device streams (_deliver_streaming, docs/cuda.md): the tensors are
allocated with torch.empty(device=...) and the library's CUDA sink fills
them in C (pinned windows, one async copy per piece, a window reused only
after its copies finished); no copy loop runs in Python, and host memory
stays within the budget. The loads of a torch.distributed group
(load_dtensors, load(process_group=...)) onto GPUs do the same, read once
too: the bytes a rank receives are copied to its GPU from the same pinned
windows (_to_gpus). The loader option staging_budget
(ringload.load(..., options={"staging_budget": N})) streams CPU targets
the same way, into tensors torch owns.
"""
import torch

from . import (_core, _dropin, _dtypes, _errors, _handles, _index, _lib,
               _stream)


def _device_error(device, why):
    # safetensors' words ("device foo is invalid"), and the value as given
    msg = f"device {device} {why}"
    if repr(device) not in msg:
        msg += f" (given {device!r})"
    return _errors.DeviceError(_lib.RL_E_INVALID_ARG, msg)


def parse_device(device):
    """Returns the torch.device for a device argument (str, int,
    torch.device), checking that a CUDA device exists; DeviceError if not."""
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise _device_error(device, "is invalid (negative index)")
        try:
            dev = torch.device("cuda", device)
        except (RuntimeError, ValueError, OverflowError) as e:  # 2**70
            raise _device_error(device, f"is invalid ({e})") from None
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as e:
            raise _device_error(device, f"is invalid ({e})") from None
    else:
        raise _device_error(device, "is invalid: give a str, an int or a "
                            "torch.device")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise _device_error(device, "is not available: "
                                "torch.cuda.is_available() is False")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise _device_error(device, f"is not available: "
                                f"{torch.cuda.device_count()} CUDA devices")
    return dev


def _to_device(t, device):
    """Copies a host tensor to device (the non-streaming path)."""
    return t.to(device)


def _release_each(load, pieces, dst):
    """The CPU streaming loop: each piece copied into its shard's bytes and
    released at once (host memory: the budget)."""
    for piece in pieces:
        end = piece.offset + piece.length
        dst[piece.shard][piece.offset:end].copy_(
            torch.from_numpy(_stream.piece_array(piece)))
        load.release(piece)


def _cuda_ordinal(dev):
    """The CUDA ordinal of a torch.device of type cuda."""
    return torch.cuda.current_device() if dev.index is None else dev.index


def _shaped(u8, shard):
    """The shard's bytes (a uint8 tensor) as its dtype and box shape."""
    tdt = _dtypes.torch_dtype(torch, shard.name, shard.dtype)
    shape = _dtypes.torch_shape(shard.name, shard.dtype, shard.box)
    if not u8.numel():
        return torch.empty(shape, dtype=tdt, device=u8.device)
    return u8.view(tdt).reshape(shape)


def _cuda_empty(nbytes, device):
    """(uint8 tensor of nbytes on CUDA device, its device address): the
    one place that allocates what the library's CUDA sink fills
    (torch.empty: torch's caching allocator; the tests put the fake
    driver's memory here)."""
    t = torch.empty(nbytes, dtype=torch.uint8, device=device)
    return t, t.data_ptr()


def _cuda_stream(ordinal):
    """torch's current stream on GPU ordinal, as a CUstream value."""
    return torch.cuda.current_stream(ordinal).cuda_stream


def _to_gpus(loader, ids, shards, devices):
    """Sets loader (a _handles.Loader) to fill every shard on its GPU
    (ids: the plan's device ids; devices: spec device id -> CUDA
    torch.device, every id of ids in it) in C, through the
    library's CUDA sink (docs/cuda.md: the pinned window pool, one async
    copy per piece, a window reused only after its copies' event; with a
    transport, the received bytes too): each shard's tensor allocated
    first (_cuda_empty), its address given as the shard's destination.
    Returns the uint8 tensors, by shard index."""
    ords = {i: _cuda_ordinal(devices[i]) for i in ids}
    one = set(ords.values())
    one = one.pop() if len(one) == 1 else None  # any ids: no map
    dmap = None
    if one is None:
        dmap = [0] * (max(ids) + 1 if ids else 0)
        for i in ids:
            dmap[i] = ords[i]
    loader.set_cuda(dmap, one)
    # torch.empty's blocks may still be used by kernels queued on torch's
    # current stream: the copies wait for it, it for them
    for o in set(ords.values()):
        loader.set_cuda_stream(o, _cuda_stream(o))
    dst = [None] * len(shards)
    for s in shards:
        dst[s.index], ptr = _cuda_empty(s.nbytes, devices[s.device_id])
        if s.nbytes:
            loader.set_cuda_dest(s.index, ptr, s.nbytes)
    return dst


def _on_devices(ids, shards, dst):
    """{device_id: {name: tensor}} of devices ids (in order), each shard's
    bytes in dst (by shard index) as its dtype and shape."""
    out = {i: {} for i in ids}
    for s in shards:
        out[s.device_id][s.name] = _shaped(dst[s.index], s)
    return out


def _deliver_streaming(job, devices, cuda):
    """The streaming delivery (docs/streaming.md): with CUDA targets, the
    library's CUDA sink fills tensors allocated on their GPUs first
    (_to_gpus); else the pieces are copied into CPU tensors here; host
    memory stays within the budget (loader option staging_budget, else the
    library's default: rl_loader_budget), and the library sizes the window
    pool (what a CUDA load pins) to the load's staging when that is smaller."""
    with _stream.StreamingLoad(job) as load:
        for s in load.shards:
            _dtypes.torch_check(torch, s.name, s.dtype, s.box)
        ids = [i for i, _ in load.devices]
        if cuda and all(i in devices for i in ids):  # GPU only, to the else
            dst = _to_gpus(load.loader, ids, load.shards, devices)
            load.run()
        else:  # CPU targets (a mix: the GPU shards moved after, by torch)
            dst = [torch.empty(s.nbytes, dtype=torch.uint8)
                   for s in load.shards]
            _release_each(load, load.pieces(), dst)
            dst = [t.to(devices[s.device_id]) if s.device_id in devices
                   else t for s, t in zip(load.shards, dst)]
        if job.stats is not None:
            job.stats.update(load.stats(job.ckpt))
    return _on_devices(ids, load.shards, dst)


def _deliver(job, devices):
    """Loads job and delivers every shard to its device (devices: device
    id -> torch.device; absent: CPU). Returns {device_id: {name: tensor}}.

    With a CUDA target, or the loader option staging_budget, the load
    streams (_deliver_streaming): host memory stays within the budget.
    Otherwise the whole process's shards land in host staging and CPU
    shards are zero-copy views of it (the staging lives while they do).
    """
    types = {getattr(d, "type", None) for d in devices.values()}
    cuda = types == {"cuda"}  # every device a GPU: the C sink fills them
    if cuda or "staging_budget" in (job.options or {}):
        return _deliver_streaming(job, devices, cuda)
    return _core.materialize(FRAMEWORK, _core.load_library(job), devices)


class _Torch:
    """The PyTorch adapter: dtypes, devices and delivery."""
    name = "torch"

    def check(self, name, dtype, shape):
        """Raises DtypeError when this torch has no dtype for tensor name
        (ArgumentError when its shape is too large)."""
        _dtypes.torch_check(torch, name, dtype, shape)

    def convert(self, raw, name, dtype, shape):
        """Returns raw (uint8 bytes) as a CPU tensor of dtype and shape."""
        return _dtypes.to_torch(torch, raw, name, dtype, shape)

    def area(self, staging):
        """A whole staging area (a numpy uint8 array) seen by torch, for
        convert_at."""
        return _dtypes.TorchArea(torch, staging)

    def convert_at(self, area, offset, nbytes, name, dtype, shape):
        """The CPU tensor of dtype and shape at offset in area (area()'s),
        or None where convert must copy it (misaligned)."""
        return area.at(offset, nbytes, name, dtype, shape)

    def device(self, device):
        """Parses a device argument (parse_device); None for the CPU, which
        None also means (as in safetensors)."""
        if device is None:
            return None
        dev = parse_device(device)
        return None if dev.type == "cpu" else dev

    def deliver(self, t, device):
        """Returns t on device (None: stays on the CPU)."""
        return t if device is None else _to_device(t, device)

    def contiguous(self, t):
        """Returns t, or a contiguous copy of it."""
        return t.contiguous()

    def own(self, t):
        """Returns a copy of t that owns its memory."""
        return t.clone()

    advanced_indexing = True  # get_slice takes what torch takes

    def index_check(self, shape, key):
        """Raises torch's own error for an index a tensor of shape refuses
        (as a SliceError): indexes a zero-stride tensor of that shape,
        which holds no memory."""
        try:
            torch.empty((), dtype=torch.uint8).expand(tuple(shape))[key]
        except (IndexError, ValueError, TypeError) as e:
            raise _index.framework_error(e) from None

    def load(self, job, devices):
        """Loads job; returns {device_id: {name: tensor}} (see _deliver)."""
        return _deliver(job, devices)


FRAMEWORK = _Torch()


@_core.frees_on_error
def load_file(filename, device="cpu", *, backend="mmap", sha256=None,
              stats=None, copy=False, dtype=None, read_mode=None):
    """Loads every tensor of a safetensors file (or a directory of them, or
    a model.safetensors.index.json) as torch tensors on device.

    Same signature and result as safetensors.torch.load_file: a dict
    {name: torch.Tensor} in sorted name order; device is "cpu", "cuda",
    "cuda:N", an int or a torch.device. Raises a ringload.Error subclass
    carrying the C error code and message; DtypeError (before reading) for
    a dtype this torch lacks (torch 1.13: U16/U32/U64, F8_*, F4, F6_*);
    DeviceError for an invalid or absent device.

    backend: safetensors' "mmap" (ringload reads: its "auto") or "pread",
    or ringload's "auto", "io_uring", "libaio".

    sha256 (keyword only, not in safetensors): {file: hex}, 64 hex digits
    (one-file checkpoints) or a SHA256SUMS path, as ringload.load; checked
    by the library as it reads (IntegrityError, RL_E_CHECKSUM, on a
    mismatch), CUDA devices (streaming loads) too.

    stats (keyword only): a dict, filled with the load's statistics, as
    ringload.load fills it. copy (keyword only): True gives CPU tensors
    that own their memory (the staging is freed before load_file returns).

    dtype (keyword only): torch.float32, torch.float16 or torch.bfloat16
    (numpy's and the names "F32", "F16", "BF16" too): every floating
    tensor (F32, F16, BF16, F8_E4M3, F8_E5M2) is converted to it as it
    loads, bit for bit as its .to(dtype) on the CPU; on a CUDA device in
    the pinned window before the copy. Integers and bool stay as stored;
    F64 and the other floating types raise SpecError (RL_E_DTYPE).

    read_mode (keyword only): "auto", "direct" or "buffered", as
    ringload.numpy.load_file's (RL_OPT_DIRECT); a given mode always reads
    (a hot file is not mapped), and stats say per file "mode" and "why".
    """
    return _core.load_whole(FRAMEWORK, filename, FRAMEWORK.device(device),
                            sha256, stats, copy, _dropin.backend(backend),
                            dtype, read_mode)


# ---- Loads across the ranks of a torch.distributed group (_dist) ----
# _dist imports torch.distributed, so only these functions import it.

from . import _boxes, _handles, _sha256  # noqa: E402


def _placement_box(meta, mesh_shape, placements, coord):
    """The box of tensor meta on the mesh coordinate coord under
    placements (Shard(dim) cuts as DTensor does: chunks of ceil(size/n),
    later mesh dimensions within earlier ones' chunks)."""
    box = [[0, d] for d in meta.shape]
    for n, p, i in zip(mesh_shape, placements, coord):
        if p.is_shard():
            a, b = box[p.dim]
            size, chunk = b - a, -(-(b - a) // n)
            box[p.dim] = [a + min(i * chunk, size), a + min((i + 1) * chunk,
                                                            size)]
    return tuple(tuple(r) for r in box)


def _placements(placements, meta, ndim):
    """The checked placements of tensor meta on a mesh of ndim dimensions:
    placements[name] (Replicate where not named) or placements(name,
    shape, dtype); Shard dims normalized."""
    from torch.distributed.tensor import Replicate, Shard
    from . import _dist
    tdt = _dtypes.torch_dtype(torch, meta.name, meta.dtype)
    if callable(placements):
        given = placements(meta.name, meta.shape, tdt)
    else:
        given = placements.get(meta.name, [Replicate()] * ndim)
    given = list(given) if isinstance(given, (list, tuple)) else [given]
    if len(given) != ndim:
        raise _dist.arg_error(f"tensor '{meta.name}': {len(given)} placements"
                              f" for a mesh of {ndim} dimensions")
    out = []
    for p in given:
        if type(p) is Shard and -len(meta.shape) <= p.dim < len(meta.shape):
            out.append(Shard(p.dim % len(meta.shape)))
        elif isinstance(p, Replicate):
            out.append(p)
        else:
            raise _dist.arg_error(f"tensor '{meta.name}' of shape "
                                  f"{list(meta.shape)}: placement {p} is "
                                  "not Replicate() or Shard(dim) of a "
                                  "dimension it has")
    return out


def _dtensor_layout(ckpt, device_mesh, placements):
    """[(meta, placements, this rank's box)] of every tensor."""
    import itertools
    from . import _dist
    if not callable(placements) and not isinstance(placements, dict):
        raise _dist.arg_error("placements must be a dict {name: [Placement]}"
                              " or a callable (name, shape, dtype)")
    for name in () if callable(placements) else placements:
        ckpt.tensor(name)  # TensorNotFoundError naming it
    shape = tuple(device_mesh.mesh.shape)
    me = torch.distributed.get_rank()
    coord = next(c for c in itertools.product(*map(range, shape))
                 if int(device_mesh.mesh[c]) == me)
    layout = []
    for meta in ckpt.tensors:
        _dtypes.torch_check(torch, meta.name, meta.dtype, meta.shape)
        pl = _placements(placements, meta, len(shape))
        layout.append((meta, pl, _placement_box(meta, shape, pl, coord)))
    return layout


def _cuts_as_torch(meta, shape, pl, d):
    """Whether the spec's boxes of dimension d (chunks of ceil(size/n) over
    the mesh dimensions sharding it, row-major) are DTensor's (nested:
    each mesh dimension cuts the previous one's chunk). They differ only
    where several mesh dimensions cut d unevenly."""
    import itertools
    dims = [m for m, q in enumerate(pl) if q.is_shard() and q.dim == d]
    if len(dims) < 2:
        return True
    size, n = meta.shape[d], 1
    for m in dims:
        n *= shape[m]
    chunk = -(-size // n)
    for idx, sub in enumerate(itertools.product(*(range(shape[m])
                                                  for m in dims))):
        coord = [0] * len(shape)
        for m, i in zip(dims, sub):
            coord[m] = i
        want = (min(idx * chunk, size), min((idx + 1) * chunk, size))
        if _placement_box(meta, shape, pl, coord)[d] != want:
            return False
    return True


def _dtensor_spec(device_mesh, layout):
    """The sharding spec of layout's placements on device_mesh (device id
    and process: the rank), and the tensors it cannot express (several
    mesh dimensions cutting one dimension unevenly), which each rank then
    reads itself (_own_boxes)."""
    shape = tuple(device_mesh.mesh.shape)
    ranks = device_mesh.mesh.flatten().tolist()
    axes = [f"mesh{m}" for m in range(len(shape))]
    items, own = [], []
    for meta, pl, _ in layout:
        if not all(_cuts_as_torch(meta, shape, pl, d)
                   for d in range(len(meta.shape))):
            own.append(meta.name)
            items.append((meta.name, None))
            continue
        entries = [[axes[m] for m, q in enumerate(pl)
                    if q.is_shard() and q.dim == d]
                   for d in range(len(meta.shape))]
        while entries and not entries[-1]:
            entries.pop()
        items.append((meta.name, [e[0] if len(e) == 1 else (e or None)
                                  for e in entries]))
    spec = {"mesh": {"shape": list(shape), "axes": axes, "devices": ranks,
                     "process_of_device": ranks},
            "rules": _boxes.rules(items)}
    if own:
        spec["tensors"] = [n for n, e in items if e is not None]
    return spec, own


def _mesh_device(device_mesh):
    """The device of this rank's local shards: the CPU, or the current
    device of the mesh's device type."""
    if device_mesh.device_type == "cpu":
        return None
    mod = getattr(torch, device_mesh.device_type)
    return torch.device(device_mesh.device_type, mod.current_device())


def _run_group(filename, sharding, group, job, batch_bytes, read_once,
               plan_values, after=None, to=None, devices=None):
    """_dist.run_group, every tensor checked as a torch tensor (of dtype
    to when given: the library converts). devices (spec device id ->
    torch.device): when each of this rank's plan devices is a GPU, the
    run fills tensors allocated there (_to_gpus). Returns (Loaded,
    statistics, after's result, those tensors by shard index: empty
    when the run was not onto GPUs)."""
    from . import _dist
    gpu = []

    def device(p, loader):
        ids = [i for i, _ in p.devices()]
        if ids and all(getattr(devices.get(i), "type", None) == "cuda"
                       for i in ids):
            gpu.extend(_to_gpus(loader, ids, p.shards(), devices))
    loaded, st, extra = _dist.run_group(
        filename, sharding, group, (job, batch_bytes, read_once),
        plan_values, after, to, lambda ckpt: [_dtypes.torch_check(
            torch, t.name, _dtypes.loaded(t.dtype, to), t.shape)
            for t in ckpt.tensors], device if devices else None)
    return loaded, st, extra, gpu


def _own_boxes(ckpt, layout, own, job):
    """({Box: CPU tensor of this rank's box}, loader statistics or None)
    of the tensors in own, read by this rank itself (_boxes.read)."""
    boxes = [_boxes.Box(m.name, b) for m, _, b in layout if m.name in own]
    return _boxes.read(ckpt, boxes, job, _to_torch_raw)


def _to_torch_raw(raw, name, dtype, shape):
    return _dtypes.to_torch(torch, raw, name, dtype, shape)


def _local_tensors(loaded, gpu, own, device):
    """{name: this rank's local tensor on device (None: the CPU)}: the
    plan's shards as the library filled them on the GPU (gpu: by shard
    index, _to_gpus), else views of the host staging that torch copies
    to device; the tensors this rank read outside the plan (own: {Box:
    CPU tensor}, _own_boxes) copied by torch."""
    if gpu:
        (tensors,) = _on_devices(loaded.device_ids, loaded.shards,
                                 gpu).values()
    else:
        tensors = {s.name: _to_torch_raw(loaded.raw(s), s.name, s.dtype,
                                         s.box) for s in loaded.shards}
        tensors = {n: t if device is None else t.to(device)
                   for n, t in tensors.items()}
    tensors.update({b.name: t if device is None else t.to(device)
                    for b, t in own.items()})
    return tensors


@_core.frees_on_error
def load_dtensors(filename, device_mesh, placements, *, read_once=True,
                  sha256=None, backend="auto", options=None,
                  batch_bytes=256 << 20, stats=None):
    """Loads every tensor of filename as a DTensor on device_mesh (which
    spans the default process group; collective: every rank calls it).

    placements: {name: [Placement]} (unnamed tensors are Replicate) or a
    callable (name, shape, torch dtype) -> [Placement], one Replicate() or
    Shard(dim) per mesh dimension. The placements become a sharding spec
    (one process and device per rank) that the library plans: read_once,
    each byte that several ranks need is read by one of them and sent to
    the others (the plan's transfers, which rl_loader_run moves over the
    group: _dist, _transport), in batches of at most batch_bytes; False:
    each rank reads its own boxes. A tensor dimension that several mesh
    dimensions cut unevenly (DTensor's nested chunks are not the spec's)
    is read by each rank itself. sha256, backend, options: as
    ringload.load, for each rank's reads. stats: a dict to fill with this
    rank's bytes_needed, bytes_read, sent_bytes, received_bytes,
    transport_messages and the group's unique_bytes. Ranks that disagree
    (on the placements, the files) or a failure on any rank raise on
    every rank. Returns {name: DTensor} in sorted name order.

    Local tensors: on the CPU for a cpu mesh; on a cuda mesh, on the
    rank's current GPU, allocated there first and filled by the library
    (_to_gpus: its own reads and the bytes it receives copied from the
    pinned windows; no host staging, no .to()), except the tensors read
    by each rank itself, loaded to the host and copied with .to(), as
    every tensor for another device type.
    """
    from torch.distributed.tensor import DTensor
    from . import _dist
    dist = torch.distributed
    if device_mesh.mesh.numel() != dist.get_world_size():
        raise _dist.arg_error(f"device_mesh has {device_mesh.mesh.numel()} "
                              f"ranks: it must span the default group "
                              f"({dist.get_world_size()} ranks)")
    meta = {}

    def spec_of():
        ckpt = _handles.Checkpoint(filename)
        try:
            meta["layout"] = _dtensor_layout(ckpt, device_mesh, placements)
        finally:
            ckpt.close()
        meta["spec"], meta["own"] = _dtensor_spec(device_mesh,
                                                  meta["layout"])
        return meta["spec"]
    _dist.agree(None, spec_of)
    job = (backend, options, sha256)
    device = _mesh_device(device_mesh)
    loaded, st, own, gpu = _run_group(
        filename, meta["spec"], None, job, batch_bytes, bool(read_once),
        lambda p: {"device_mesh": meta["spec"]["mesh"], "placements": (
            meta["spec"]["rules"], meta["own"], _dist.summary(p))},
        lambda ckpt, expected: _dist.agree(None, lambda: _own_boxes(
            ckpt, meta["layout"], meta["own"],
            (backend, options, expected))) if meta["own"] else ({}, None),
        devices={torch.distributed.get_rank(): device} if device else None)
    for key in ("bytes_needed", "bytes_read"):  # of the tensors read here
        st[key] += (own[1] or {}).get(key, 0)
    st["unique_bytes"] += sum(m.nbytes for m, _, _ in meta["layout"]
                              if m.name in meta["own"])
    if stats is not None:
        stats.update(st)
    tensors = _local_tensors(loaded, gpu, own[0], device)
    out = {}
    for m, pl, _ in meta["layout"]:
        out[m.name] = DTensor.from_local(
            tensors[m.name], device_mesh, pl, run_check=False,
            shape=torch.Size(m.shape),
            stride=torch.empty(m.shape, device="meta").stride())
    return {name: out[name] for name in sorted(out)}


def _spec_json(sharding):
    """The spec as a dict when it is one, JSON text or a JSON file; {}
    otherwise (the library then reports what is wrong with it)."""
    import json
    import os
    if isinstance(sharding, dict):
        return sharding
    try:
        if isinstance(sharding, str) and sharding.lstrip().startswith("{"):
            return json.loads(sharding)
        with open(os.fspath(sharding), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, TypeError, ValueError):
        return {}


def _canonical(sharding):
    """The spec as the ranks compare it: its JSON with sorted keys."""
    import json
    return json.dumps(_spec_json(sharding), sort_keys=True)


def load(data, sharding=None, **kwargs):
    """Two forms. load(data, *, dtype=None), data a whole safetensors file
    as bytes (bytearray and memoryview too), is safetensors.torch.load:
    {name: CPU tensor} in sorted name order, the errors and dtype of
    load_file. load(filename,
    sharding=None, *, process_group=None, read_once=False, ...) is the
    sharded load of a torch.distributed group (_load_group). Anything else
    (None, a number) is safetensors' TypeError."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        if sharding is not None or set(kwargs) - {"dtype"}:
            raise _errors.ArgumentError(
                _lib.RL_E_INVALID_ARG, "load(bytes) takes no other argument "
                "than dtype")
        return _load_bytes(data, kwargs.get("dtype"))
    if data is None or isinstance(data, (int, float)):
        return _dropin.load_bytes(FRAMEWORK, data)  # safetensors' TypeError
    return _load_group(data, sharding, **kwargs)


@_core.frees_on_error
def _load_bytes(data, dtype=None):
    return _dropin.load_bytes(FRAMEWORK, data, dtype)


@_core.frees_on_error
def _load_group(filename, sharding=None, *, process_group=None,
                read_once=False, device_map=None, backend="auto",
                options=None, progress=None, sha256=None,
                batch_bytes=256 << 20, stats=None, dtype=None):
    """ringload.load(framework="pt") for the ranks of a torch.distributed
    group: the spec's process is the rank in process_group (None: the
    default group; without torch.distributed set up, process 0).
    Collective: every rank of the group calls it.

    read_once: the library's read-once plan (rl_plan_transfer): each byte
    several ranks need is read by one rank and sent to the others (_dist),
    at most batch_bytes of payloads per batch; targets and
    files_of_process work as in the plan (a target is read by each rank
    that needs it; a rank reads no file files_of_process denies it, though
    it opens every file's header); progress is not called; dtype converts
    as ringload.load's (the transfers move the file's bytes, their copies
    into the shards convert). Ranks that disagree (sharding, files, dtype)
    or a failure on any rank raise on every rank. stats (read once): a
    dict to fill with this rank's statistics,
    as load_dtensors'. Returns {device_id: {name: tensor}} for this rank's
    devices, as ringload.load. When device_map puts every device of the
    rank on CUDA, the library fills tensors allocated on the GPUs
    (_to_gpus: the received bytes too, from the pinned windows); a mix
    of CPU and GPU devices loads to the host, and torch copies the GPU
    shards (.to()).
    """
    import ringload
    dist = getattr(torch, "distributed", None)
    if dist is None or not dist.is_available() or not dist.is_initialized():
        if process_group is not None:
            raise _errors.StateError(_lib.RL_E_STATE, "process_group given "
                                     "but torch.distributed is not "
                                     "initialized")
        return ringload.load(filename, sharding, 0, "pt", device_map,
                             backend=backend, options=options,
                             progress=progress, sha256=sha256, dtype=dtype)
    from . import _dist
    if read_once:
        devices = {_handles.integer("device_map key", k, 0, 2**32 - 1):
                   FRAMEWORK.device(v) for k, v in (device_map or {}).items()}
        loaded, st, _, gpu = _run_group(
            filename, sharding, process_group, (backend, options, sha256),
            batch_bytes, True, lambda p: {"sharding": (
                _canonical(sharding), _dist.summary(p))},
            to=_dtypes.convert_to(dtype), devices=devices)
        if stats is not None:
            stats.update(st)
        if gpu:  # filled on the GPUs by the library (_to_gpus)
            return _on_devices(loaded.device_ids, loaded.shards, gpu)
        return _core.materialize(FRAMEWORK, loaded, devices)
    rank = dist.get_rank(process_group)
    return _dist.agree(process_group, lambda: ringload.load(
        filename, sharding, rank, "pt", device_map, backend=backend,
        options=options, progress=progress, sha256=sha256, dtype=dtype))
