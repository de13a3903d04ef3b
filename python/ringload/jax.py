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
only its addressable devices' boxes. BF16 and the F8 types arrive through
ml_dtypes (a dependency of jax); F4/F6 (packed) have no JAX type and raise
DtypeError, and so do 64-bit types while jax_enable_x64 is off (JAX would
silently narrow them). docs/python.md has the guide.
"""
import jax

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


@_core.frees_on_error
def load(filename, shardings, *, sha256=None, options=None, backend="auto",
         stats=None):
    """Loads tensors of filename (a .safetensors file, a directory of them or
    a model.safetensors.index.json) as jax.Arrays sharded as given.

    shardings: {name: jax.sharding.Sharding} (loads those tensors) or a
    callable (name, shape, dtype) -> Sharding (every tensor; dtype is the
    numpy/ml_dtypes dtype). Each addressable device receives exactly its
    box, read from the file and nothing more. sha256: as ringload.load
    (a whole-file value needs the whole file read by this process).
    options, backend: the loader's, as ringload.load. stats: a dict to
    fill with the load's statistics (bytes_needed: the bytes of this
    process's distinct boxes; untouched when nothing is read). Returns
    {name: jax.Array} in sorted name order.
    """
    _core.check_stats(stats)
    ckpt = _handles.Checkpoint(filename)
    try:
        layout = _layout(ckpt, shardings)
        expected = _sha256.resolve(ckpt, sha256)
        boxes = list(dict.fromkeys(b for _, _, m in layout
                                   for b in m.values()))
        arrays, st = _boxes.read(ckpt, boxes, (backend, options, expected))
    finally:
        ckpt.close()
    out = {}
    for meta, s, boxes_of in layout:
        # each single in the sharding's memory (pinned_host, ...): the
        # assembled array's memory kind must be its pieces'
        kind = getattr(s, "memory_kind", None)
        singles = [jax.device_put(arrays[b], jax.sharding.SingleDeviceSharding(
            d, memory_kind=kind)) for d, b in boxes_of.items()]
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
