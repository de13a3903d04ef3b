"""ringload.jax: safetensors checkpoints as jax.Arrays, each device's shard
read from exactly its box.

    import ringload.jax as rj
    params = rj.load_file("model.safetensors")                # one device
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    params = rj.load("ckpt/", lambda name, shape, dtype:
                     NamedSharding(mesh, P(None, "model")))

For every tensor, the sharding's addressable_devices_indices_map gives
each local device's index box; the distinct boxes are read in one load
through slice targets (_boxes: exactly the box's bytes, coalesced), each is
put on its devices (jax.device_put) and the array assembled with
jax.make_array_from_single_device_arrays. A replicated box is read once
and put on each of its devices. In a multi-process job each process reads
only its addressable devices' boxes; with read_once=True each byte that
several processes need is read by one of them and sent to the others
through JAX's coordination service (the library's read-once plan run by
_dist over _kv's group: see load). BF16 and the F8 types arrive through
ml_dtypes (a dependency of jax); F4/F6 (packed) have no JAX type and raise
DtypeError, and so do 64-bit types while jax_enable_x64 is off (JAX would
silently narrow them). docs/python.md has the guide.
"""
import jax
import numpy as np

from . import _boxes, _core, _dtypes, _errors, _handles, _lib, _sha256


def _arg_error(msg):
    return _errors.ArgumentError(_lib.RL_E_INVALID_ARG, msg)


def _dtype(meta):
    """The numpy (ml_dtypes) dtype of tensor meta; DtypeError when JAX has
    none (packed F4/F6)."""
    dt = _dtypes.numpy_dtype(meta.dtype)
    raw = dt is not None and dt.kind == "u" and not meta.dtype.startswith("U")
    if dt is None or raw:  # packed, or ml_dtypes lacks the type
        raise _dtypes.dtype_error(meta.name, meta.dtype,
                                  "has no JAX type (packed, or ml_dtypes "
                                  "lacks it)")
    if dt.itemsize == 8 and dt.kind in "iuf" and \
            not jax.config.read("jax_enable_x64"):
        raise _dtypes.dtype_error(meta.name, meta.dtype,
                                  "needs 64-bit JAX types: jax.config."
                                  "update('jax_enable_x64', True)")
    return dt


def _box(meta, index):
    """The box ((start, stop), ...) of index (a device's tuple of slices
    from devices_indices_map) in tensor meta."""
    if len(index) != len(meta.shape):
        raise _arg_error(f"tensor '{meta.name}': the sharding gives an index "
                         f"of {len(index)} dimensions for shape "
                         f"{list(meta.shape)}")
    box = []
    for sl, dim in zip(index, meta.shape):
        start, stop, step = sl.indices(dim)
        if step != 1:
            raise _arg_error(f"tensor '{meta.name}': the sharding's index "
                             f"{index} has a step other than 1")
        box.append((start, max(start, stop)))
    return tuple(box)


def _sharding(shardings, meta):
    """The Sharding of tensor meta: shardings[name] or shardings(name,
    shape, dtype)."""
    if callable(shardings):
        s = shardings(meta.name, meta.shape, _dtype(meta))
    else:
        s = shardings[meta.name]
    if not isinstance(s, jax.sharding.Sharding):
        raise _arg_error(f"tensor '{meta.name}': sharding {s!r} is not a "
                         "jax.sharding.Sharding")
    return s


def _names(ckpt, shardings):
    """The tensors to load: the dict's keys, or every tensor of ckpt."""
    if callable(shardings):
        return [t.name for t in ckpt.tensors]
    if not isinstance(shardings, dict):
        raise _arg_error("shardings must be a dict {name: Sharding} or a "
                         f"callable (name, shape, dtype), not "
                         f"{type(shardings).__name__}")
    return list(shardings)


def _layout(ckpt, shardings):
    """[(meta, sharding, {device: Box})] of every tensor to load."""
    out = []
    for name in _names(ckpt, shardings):
        meta = ckpt.tensor(name)
        _dtype(meta)
        s = _sharding(shardings, meta)
        spec = getattr(s, "spec", None)
        if isinstance(s, jax.sharding.NamedSharding) and \
                len(spec) > len(meta.shape):
            raise _arg_error(f"tensor '{name}' of shape {list(meta.shape)}: "
                             f"the sharding's {spec} has {len(spec)} "
                             f"entries, more than its {len(meta.shape)} "
                             "dimensions")
        try:
            index = s.addressable_devices_indices_map(meta.shape)
        except (ValueError, IndexError) as e:  # IndivisibleError among them
            raise _arg_error(f"tensor '{name}' of shape {list(meta.shape)}: "
                             f"{type(e).__name__}: {e}") from None
        out.append((meta, s, {d: _boxes.Box(name, _box(meta, i))
                              for d, i in index.items()}))
    return out


def _entries(meta, s, mesh, axes):
    """The spec entries of tensor meta's sharding s over mesh (axes: JAX
    axis name -> the spec's), or None where the spec cannot say it:
    another kind of sharding or mesh, an axis it does not know
    (P.UNCONSTRAINED), a dimension its axes do not divide (JAX's boxes
    are then not the spec's ceil chunks)."""
    if not isinstance(s, jax.sharding.NamedSharding) or s.mesh != mesh:
        return None
    sizes, out = dict(mesh.shape), []
    for d, e in enumerate(s.spec):
        names = e if isinstance(e, tuple) else (() if e is None else (e,))
        if any(n not in axes for n in names):
            return None
        n = 1
        for x in names:
            n *= sizes[x]
        if meta.shape[d] % n:
            return None
        out.append(None if not names else axes[names[0]]
                   if len(names) == 1 else [axes[x] for x in names])
    while out and out[-1] is None:
        out.pop()
    return out


def _mesh_spec(layout):
    """(spec, own) of layout for read once: the sharding spec of its
    NamedShardings over one mesh (the first one's; device ids and
    processes as JAX numbers them), a rule per PartitionSpec, or None
    when no tensor has one; and the names of the other tensors, which
    each process reads itself (_entries)."""
    mesh = next((s.mesh for _, s, _ in layout
                 if isinstance(s, jax.sharding.NamedSharding)), None)
    if mesh is None:
        return None, [m.name for m, _, _ in layout]
    axes = {n: f"a{i}" for i, n in enumerate(mesh.axis_names)}
    items = [(m.name, _entries(m, s, mesh, axes)) for m, s, _ in layout]
    own = [n for n, e in items if e is None]
    if len(own) == len(items):
        return None, own
    devices = list(mesh.devices.flat)
    return {"mesh": {"shape": list(mesh.devices.shape),
                     "axes": list(axes.values()),
                     "devices": [d.id for d in devices],
                     "process_of_device": [d.process_index
                                           for d in devices]},
            "rules": _boxes.rules(items),
            "tensors": [n for n, e in items if e is not None]}, own


def _read_plain(filename, shardings, job):
    """(layout, {(name, device id): array}, statistics or None): each of
    this process's distinct boxes read by itself."""
    backend, options, sha256 = job
    ckpt = _handles.Checkpoint(filename)
    try:
        layout = _layout(ckpt, shardings)
        arrays, st = _own(ckpt, layout, {m.name for m, _, _ in layout}, (
            backend, options, _sha256.resolve(ckpt, sha256)))
    finally:
        ckpt.close()
    return layout, arrays, st


def _own(ckpt, layout, own, job):
    """({(name, device id): array}, statistics or None) of the tensors
    in own (a set of names), read by this process itself."""
    boxes = list(dict.fromkeys(b for m, _, bo in layout if m.name in own
                               for b in bo.values()))
    arrays, st = _boxes.read(ckpt, boxes, job)
    return {(m.name, d.id): arrays[b] for m, _, bo in layout
            if m.name in own for d, b in bo.items()}, st


def _shard_arrays(loaded, layout):
    """{(name, device id): array} of loaded's shards, each checked to be
    the box JAX gives its device."""
    boxes = {(m.name, d.id): b.box for m, _, bo in layout
             for d, b in bo.items()}
    out = {}
    for s in loaded.shards:
        key, box = (s.name, s.device_id), tuple(zip(s.start, s.stop))
        if boxes.get(key, box) != box:
            raise _arg_error(f"tensor '{s.name}': the mesh spec gives "
                             f"device {s.device_id} the box {box}, JAX "
                             f"{boxes[key]}")
        out[key] = _dtypes.to_numpy(loaded.raw(s), s.name, s.dtype, s.box)
    for m, _, bo in layout:  # boxes the plan holds no shard of: empty
        for d, b in bo.items():
            if (m.name, d.id) not in out and \
                    not _boxes.box_nbytes(m, b.box):
                out[(m.name, d.id)] = _dtypes.to_numpy(
                    np.empty(0, np.uint8), m.name, m.dtype,
                    _boxes.box_shape(b.box))
    return out


def _read_once(filename, shardings, group, job, batch_bytes):
    """(layout, {(name, device id): array}, statistics): the tensors of
    one mesh read once in the job (_dist.run_group over group, a
    _kv.Group), the others by each process itself (_own)."""
    from . import _dist
    meta = {}

    def layout():
        ckpt = _handles.Checkpoint(filename)
        try:
            meta["layout"] = _layout(ckpt, shardings)
        finally:
            ckpt.close()
        meta["spec"], meta["own"] = _mesh_spec(meta["layout"])
    _dist.agree(group, layout)
    spec, own, lay = meta["spec"], set(meta["own"]), meta["layout"]

    def own_read(ckpt, _expected):  # the files were hashed whole: _dist
        if not own:
            return {}, None
        return _dist.agree(group, lambda: _own(
            ckpt, lay, own, (job[0], job[1], ())))
    if spec is None:  # nothing to read once: each process its own
        lay, arrays, st = _dist.agree(group, lambda: _read_plain(
            filename, shardings, job))
        return lay, arrays, dict(st or {}, unique_bytes=sum(
            m.nbytes for m, _, _ in lay))
    loaded, st, (arrays, ost) = _dist.run_group(
        filename, spec, group, (job, batch_bytes, True),
        lambda p: {"shardings": (spec, sorted(own), _dist.summary(p))},
        own_read)
    arrays.update(_shard_arrays(loaded, lay))
    for key in ("bytes_needed", "bytes_read"):  # of the tensors read here
        st[key] += (ost or {}).get(key, 0)
    st["unique_bytes"] += sum(m.nbytes for m, _, _ in lay if m.name in own)
    return lay, arrays, st


@_core.frees_on_error
def load(filename, shardings, *, sha256=None, options=None, backend="auto",
         stats=None, read_once=False, batch_bytes=64 << 20, timeout=600.0):
    """Loads tensors of filename (a .safetensors file, a directory of them or
    a model.safetensors.index.json) as jax.Arrays sharded as given.

    shardings: {name: jax.sharding.Sharding} (loads those tensors) or a
    callable (name, shape, dtype) -> Sharding (every tensor; dtype is the
    numpy/ml_dtypes dtype). Each addressable device receives exactly its
    box, read from the file and nothing more. sha256: as ringload.load
    (a whole-file value needs the whole file read by this process, with
    read_once too: IntegrityError before reading otherwise). options,
    backend: the loader's, as ringload.load. stats: a
    dict to fill with the load's statistics (bytes_needed: the bytes of
    this process's distinct boxes; untouched when nothing is read).
    Returns {name: jax.Array} in sorted name order.

    read_once (a multi-process job, after jax.distributed.initialize;
    collective: every process calls it with the same arguments): each
    byte that several processes need is read by one of them and sent to
    the others through the coordination service's key-value store (_kv),
    in batches of at most batch_bytes (what the coordinator holds at
    most); tensors with NamedShardings over one mesh (the first tensor's
    mesh, dimensions divided evenly) are read once, the others by each
    process itself. Pays for tensors replicated across processes when
    the store's rate (10-37 MB/s on localhost, depending on the bytes)
    beats the reads it saves. A failure on any process raises the same error on every
    process; a process that stops answering fails the others after
    timeout seconds. stats then also holds sent_bytes, received_bytes,
    transport_messages and the job's unique_bytes.
    """
    group = None
    if read_once:  # first: every process counts the load alike
        from . import _kv
        group = _kv.Group(timeout)
    _core.check_stats(stats)
    job = (backend, options, sha256)
    if group is None:
        layout, arrays, st = _read_plain(filename, shardings, job)
    else:
        layout, arrays, st = _read_once(filename, shardings, group, job,
                                        batch_bytes)
    out = {}
    for meta, s, boxes_of in layout:
        # each single in the sharding's memory (pinned_host, ...): the
        # assembled array's memory kind must be its pieces'
        kind = getattr(s, "memory_kind", None)
        singles = [jax.device_put(arrays[(meta.name, d.id)],
                                  jax.sharding.SingleDeviceSharding(
                                      d, memory_kind=kind))
                   for d in boxes_of]
        out[meta.name] = jax.make_array_from_single_device_arrays(
            meta.shape, s, singles)
    if stats is not None and st is not None:
        stats.update(st)
    return {name: out[name] for name in sorted(out)}


def load_file(filename, device=None, *, sha256=None):
    """Loads every tensor of filename whole onto device (a jax.Device;
    None: jax.devices()[0]): {name: jax.Array} in sorted name order, as
    safetensors.flax.load_file. sha256: as ringload.load."""
    if device is None:
        device = jax.devices()[0]
    if not isinstance(device, jax.Device):
        raise _errors.DeviceError(_lib.RL_E_INVALID_ARG,
                                  f"device {device!r} is invalid: give a "
                                  "jax.Device")
    one = jax.sharding.SingleDeviceSharding(device)
    return load(filename, lambda name, shape, dtype: one, sha256=sha256)
