"""Bulk queries (issue 33 item 3): a checkpoint's tensors and a plan's
shards come from one C call each (rl_ckpt_tensors, rl_plan_shards), so a
load makes the same number of ctypes calls whatever its tensor count (one
call per tensor and per shard were most of the Python side of loading
20,000 small tensors), and they equal the per-item queries."""
import ctypes
from errno import EINVAL

import numpy as np
import pytest

import stfile
from ringload import _handles, _lib
import ringload
import ringload.numpy as rnp

SEED = 3302
KINDS = [("F32", 4), ("F16", 2), ("I64", 8), ("U8", 1), ("BOOL", 1)]


def _tensors(rng, n):
    """{name: (dtype, shape, bytes)} of n tensors of 0 to 3 dimensions,
    some empty."""
    out = {}
    for i in range(n):
        dtype, size = KINDS[i % len(KINDS)]
        shape = [(), (3 + i % 4,), (1 + i % 3, 5), (2, i % 3, 2)][i % 4]
        nbytes = int(np.prod(shape, dtype=np.int64)) * size
        data = rng.integers(0, 2 if dtype == "BOOL" else 256, nbytes,
                            np.uint8).tobytes()
        out[f"t{i:05d}.r{len(shape)}"] = (dtype, shape, data)
    return out


def _file(tmp_path, n):
    print(f"seed {SEED}")
    tensors = _tensors(np.random.default_rng(SEED), n)
    path = tmp_path / f"bulk{n}.safetensors"
    stfile.write(path, tensors)
    return path, tensors


def _counting(monkeypatch):
    """Counts every call of a function _lib binds (module attributes: what
    the package calls through _lib.rl_*)."""
    calls = {}
    for name in _lib.BOUND:
        fn = getattr(_lib, name)
        if fn is None:
            continue

        def counted(*args, _fn=fn, _name=name):
            calls[_name] = calls.get(_name, 0) + 1
            return _fn(*args)
        monkeypatch.setattr(_lib, name, counted)
    return calls


def _load_calls(monkeypatch, load, path, tensors, **kw):
    calls = _counting(monkeypatch)
    out = load(path, **kw)
    monkeypatch.undo()
    assert sorted(out) == sorted(tensors)
    for name, (dtype, shape, data) in tensors.items():
        got = np.asarray(out[name])
        assert got.shape == shape, name
        assert got.tobytes() == data, name
    return calls


def _loaders():
    out = [("numpy", rnp.load_file)]
    try:
        import ringload.torch as rpt
    except ImportError:  # no torch: numpy alone
        return out
    return out + [("torch", lambda p, **kw: {k: v.numpy() for k, v in
                                           rpt.load_file(p, **kw).items()})]


@pytest.mark.parametrize("read_mode", ["buffered", "direct", None])
@pytest.mark.parametrize("which", [name for name, _ in _loaders()])
def test_ctypes_calls_per_load_do_not_grow_with_tensors(tmp_path, monkeypatch,
                                                         which, read_mode):
    load = dict(_loaders())[which]
    kw = {} if read_mode is None else {"read_mode": read_mode}
    counts = []
    for n in (8, 400):
        path, tensors = _file(tmp_path, n)
        calls = _load_calls(monkeypatch, load, path, tensors, **kw)
        counts.append(sum(calls.values()))
        print(f"{n} tensors: {counts[-1]} ctypes calls {sorted(calls.items())}")
    assert counts[0] == counts[1] and counts[1] < 64, counts


def _per_item_tensor(ckpt, i):
    ti = _lib.TensorInfo()
    assert _lib.rl_ckpt_tensor(ckpt.ptr, i, ctypes.byref(ti)) == 0
    return _handles.TensorMeta(_lib.text(ti.name), _lib.DTYPES[ti.dtype],
                               tuple(ti.shape[d] for d in range(ti.ndim)),
                               ti.file, ti.offset, ti.nbytes)


def _per_item_shard(plan, s, ids):
    si = _lib.ShardInfo()
    assert _lib.rl_plan_shard(plan.ptr, s, ctypes.byref(si)) == 0
    n = si.ndim
    start, stop = tuple(si.start[:n]), tuple(si.stop[:n])
    return _handles.Shard(s, _lib.text(si.name), _lib.DTYPES[si.dtype],
                          tuple(si.shape[:n]), start, stop,
                          tuple(b - a for a, b in zip(start, stop)),
                          si.device, ids[si.device], si.offset, si.nbytes)


# every tensor whole; split over 3 devices (boxes of 1 and 2 dimensions,
# short and empty chunks, mixed ranks: the rows of unequal counts)
SPECS = [None, {"mesh": {"shape": [3], "axes": ["x"]},
                "rules": [{"match": ".*\\.r[12]", "spec": ["x"]},
                          {"match": ".*\\.r3", "spec": [None, "x"]}]}]


@pytest.mark.parametrize("spec", SPECS)
def test_bulk_queries_equal_the_per_item_ones(tmp_path, spec):
    path, _ = _file(tmp_path, 37)
    ckpt = _handles.Checkpoint(path)
    sp = _handles.Spec(spec)
    plan = _handles.Plan()
    try:
        assert ckpt.tensors == [_per_item_tensor(ckpt, i) for i in
                                range(_lib.rl_ckpt_num_tensors(ckpt.ptr))]
        assert len(ckpt.tensors) == 37
        plan.build(ckpt, sp)
        ids = [i for i, _ in plan.devices()]
        shards = plan.shards()
        assert shards == [_per_item_shard(plan, s, ids) for s in
                          range(_lib.rl_plan_num_shards(plan.ptr))]
        assert len(shards) == 37 * len(ids)
        assert len({len(s.box) for s in shards}) == 4  # 0 to 3 dimensions
    finally:
        plan.close()
        sp.close()
        ckpt.close()


def test_bulk_query_bounds(tmp_path):
    """Through the bindings, the C contract's bounds: short size, first
    past the end, first + n past the end, n = 0 with NULL, a plan not
    built."""
    path, _ = _file(tmp_path, 5)
    ckpt = _handles.Checkpoint(path)
    plan = _handles.Plan()
    rec = np.empty(8, _handles._TENSOR_RECORDS)
    at, size = rec.ctypes.data, rec.itemsize
    try:
        assert size == ctypes.sizeof(_lib.TensorInfo)
        assert _lib.rl_ckpt_tensors(ckpt.ptr, 0, 5, at, size - 1) == -EINVAL
        assert _lib.rl_ckpt_tensors(ckpt.ptr, 6, 1, at, size) == -EINVAL
        assert _lib.rl_ckpt_tensors(ckpt.ptr, 3, 8, at, size) == 2
        assert _lib.rl_ckpt_tensors(ckpt.ptr, 5, 1, at, size) == 0
        assert _lib.rl_ckpt_tensors(ckpt.ptr, 0, 0, None, size) == 0
        assert _lib.rl_ckpt_tensors(None, 0, 1, at, size) == -EINVAL
        srec = np.empty(2, _handles._SHARD_RECORDS)
        assert srec.itemsize == ctypes.sizeof(_lib.ShardInfo)
        assert _lib.rl_plan_shards(plan.ptr, 0, 2, srec.ctypes.data,
                                   srec.itemsize) == _lib.RL_E_STATE
        assert _lib.rl_plan_shards(None, 0, 0, None, srec.itemsize) == -EINVAL
    finally:
        plan.close()
        ckpt.close()


@pytest.mark.parametrize("read_mode", ["buffered", None])
@pytest.mark.parametrize("misalign", [False, True])
def test_numpy_arrays_are_views_of_one_area(tmp_path, read_mode, misalign):
    """numpy load_file makes each array as one ndarray over its staging
    area (or its file's mapping, read_mode None on a hot file): every
    array is its bytes, dtype and shape, the aligned ones views of one
    area; one misaligned where it lies is a copy."""
    print(f"seed {SEED}")
    tensors = _tensors(np.random.default_rng(SEED), 300)
    if misalign:  # a 1-byte tensor first: later ones at odd file offsets
        tensors = dict({"a.odd": ("U8", (1,), b"\x07")}, **tensors)
    path = tmp_path / "views.safetensors"
    stfile.write(path, tensors)
    kw = {} if read_mode is None else {"read_mode": read_mode}
    out = rnp.load_file(path, **kw)
    assert list(out) == sorted(tensors)
    bases = set()
    for name, (dtype, shape, data) in tensors.items():
        a = out[name]
        assert a.shape == shape and a.tobytes() == data, name
        if data and a.base is not None and a.base.base is not None:
            bases.add(id(a.base))
    assert len(bases) == 1, len(bases)


@pytest.mark.parametrize("read_mode", ["buffered", None])
@pytest.mark.parametrize("which", [name for name, _ in _loaders()])
def test_no_garbage_collection_during_a_load(tmp_path, which, read_mode):
    """load_file pauses the cyclic collector (_core.gc_paused): the few
    objects it builds per tensor set off collections, and after importing
    torch a load of 20,000 tensors paid a full one (70-115 ms) that
    safetensors does not. The collector is on again after the load, also
    after a failed one, and stays off when the caller had it off."""
    import gc
    if which == "torch":
        import ringload.torch as rpt
        load = rpt.load_file
    else:
        load = rnp.load_file
    kw = {} if read_mode is None else {"read_mode": read_mode}
    path, tensors = _file(tmp_path, 3000)
    runs = []

    def seen(phase, info):
        if phase == "start":
            runs.append(info["generation"])
    gc.collect()
    gc.callbacks.append(seen)
    try:
        assert gc.isenabled()
        out = load(path, **kw)
        during = list(runs)
        assert gc.isenabled()
        gc.disable()
        try:
            load(path, **kw)
            assert not gc.isenabled()
        finally:
            gc.enable()
        with pytest.raises(ringload.Error):
            load(tmp_path / "absent.safetensors", **kw)
        assert gc.isenabled()
    finally:
        gc.callbacks.remove(seen)
    print(f"{len(tensors)} tensors: collections during the load {during}")
    assert len(out) == len(tensors)
    # at most the one that the tensors returned call for (before: 40 or
    # more for 3,000 tensors, some of generation 1)
    assert len(during) <= 1, during
