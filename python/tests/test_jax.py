"""ringload.jax on 8 CPU devices (XLA_FLAGS=--xla_force_host_platform_device_count
=8, set here before jax is imported): load_file equals the file (BF16 and
F8 through ml_dtypes); load with NamedShardings on 2x4 and 8x1 meshes gives
every device exactly its box, reads each distinct box once (the loader's
bytes_needed is the distinct boxes' bytes: nothing more) on every backend
with one and two workers; random shapes and partition specs; errors name
the tensor. Run by the venv of make pydeps alone (Debian has no jax)."""
import os

os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

import stfile  # noqa: E402
from conftest import BACKENDS  # noqa: E402

pytestmark = pytest.mark.venv  # jax: the venv of make pydeps
jax = pytest.importorskip("jax", reason="needs jax (the venv of make pydeps)")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="needs ml_dtypes")

import ringload  # noqa: E402
import ringload.jax as rj  # noqa: E402
from ringload import _boxes  # noqa: E402
from jax.sharding import NamedSharding, PartitionSpec as P  # noqa: E402

jax.config.update("jax_enable_x64", True)  # I64 and F64 below
if len(jax.devices()) < 8:
    pytest.skip("needs 8 JAX devices: jax was imported before "
                "XLA_FLAGS=--xla_force_host_platform_device_count=8 was set",
                allow_module_level=True)

TENSORS = {
    "w": ("F32", (8, 12), np.arange(96, dtype="<f4")),
    "emb": ("BF16", (16, 4), np.arange(64).astype(ml_dtypes.bfloat16)),
    "f8": ("F8_E4M3", (8, 8), np.linspace(-4, 4, 64).astype(
        ml_dtypes.float8_e4m3fn)),
    "f8b": ("F8_E5M2", (4,), np.arange(4).astype(ml_dtypes.float8_e5m2)),
    "bias": ("I64", (12,), np.arange(12, dtype="<i8")),
    "scalar": ("F64", (), np.array([2.5], "<f8")),
    "empty": ("I32", (0, 4), np.zeros(0, "<i4")),
}


def _write(path, tensors):
    stfile.write(path, {n: (dt, shape, a.tobytes())
                        for n, (dt, shape, a) in tensors.items()})
    return str(path)


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return _write(tmp_path_factory.mktemp("jax") / "m.safetensors", TENSORS)


def _expect(name):
    _, shape, a = TENSORS[name]
    return a.reshape(shape)


@pytest.fixture
def stats(monkeypatch):
    """The loader statistics of each load ringload.jax runs."""
    seen = []
    real = _boxes.read

    def spy(*args):
        arrays, st = real(*args)
        seen.append(st)
        return arrays, st
    monkeypatch.setattr(_boxes, "read", spy)
    return seen


def test_load_file_equals_the_file(ckpt):
    out = rj.load_file(ckpt)
    assert list(out) == sorted(TENSORS)
    for name, (dt, shape, _) in TENSORS.items():
        a = out[name]
        assert a.shape == shape and a.dtype == _expect(name).dtype, name
        assert list(a.devices()) == [jax.devices()[0]]
        np.testing.assert_array_equal(np.asarray(a), _expect(name))


def test_load_file_on_a_device_and_checked(ckpt):
    import hashlib
    with open(ckpt, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    out = rj.load_file(ckpt, jax.devices()[5], sha256=digest)
    assert list(out["w"].devices()) == [jax.devices()[5]]
    with pytest.raises(ringload.IntegrityError, match="SHA-256 mismatch"):
        rj.load_file(ckpt, sha256="0" * 64)


def _distinct_bytes(arrays):
    """Bytes of the distinct index boxes of every addressable shard."""
    seen = {}
    for name, a in arrays.items():
        for s in a.addressable_shards:
            key = (name, tuple((x.start, x.stop) for x in s.index))
            seen[key] = s.data.nbytes
    return sum(seen.values())


SPECS = {"w": P("data", "model"), "emb": P(("data", "model")),
         "f8": P(None, "model"), "f8b": P(), "bias": P("model"),
         "scalar": P(), "empty": P("data")}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("mesh_shape", [(2, 4), (8, 1)])
def test_named_sharding_reads_each_box_once(ckpt, stats, backend, workers,
                                            mesh_shape):
    mesh = jax.make_mesh(mesh_shape, ("data", "model"))
    shardings = {n: NamedSharding(mesh, p) for n, p in SPECS.items()}
    out = rj.load(ckpt, shardings, backend=backend,
                  options={"workers": workers})
    assert list(out) == sorted(TENSORS)
    for name, a in out.items():
        assert a.sharding == shardings[name]
        np.testing.assert_array_equal(np.asarray(a), _expect(name))
        for s in a.addressable_shards:
            np.testing.assert_array_equal(np.asarray(s.data),
                                          _expect(name)[s.index])
    # replicated boxes once, the sharded ones each once: nothing more
    assert [st["bytes_needed"] for st in stats] == [_distinct_bytes(out)]


def test_stats_of_the_load(ckpt):
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    shardings = {n: NamedSharding(mesh, p) for n, p in SPECS.items()}
    st = {"kept": 1}
    out = rj.load(ckpt, shardings, stats=st)
    assert st["bytes_needed"] == _distinct_bytes(out) and st["kept"] == 1
    assert st["bytes_read"] >= st["bytes_needed"]
    with pytest.raises(ringload.ArgumentTypeError, match="stats: a dict"):
        rj.load(ckpt, shardings, stats="yes")


def test_callable_and_dict_select(ckpt):
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    calls = []

    def pick(name, shape, dtype):
        calls.append((name, shape, dtype))
        return NamedSharding(mesh, SPECS[name])
    out = rj.load(ckpt, pick)
    assert sorted(n for n, _, _ in calls) == sorted(TENSORS)
    assert ("emb", (16, 4), np.dtype(ml_dtypes.bfloat16)) in calls
    assert set(out) == set(TENSORS)
    only = rj.load(ckpt, {"w": NamedSharding(mesh, P("model"))})
    assert list(only) == ["w"]
    np.testing.assert_array_equal(np.asarray(only["w"]), _expect("w"))


def test_random_shardings(tmp_path, rng):
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    tensors, specs = {}, {}
    for i in range(12):
        shape = tuple(int(x) * 8 for x in rng.integers(1, 4, rng.integers(1, 4)))
        dt = ["F32", "BF16", "I16", "U8"][int(rng.integers(4))]
        npdt = {"F32": "<f4", "BF16": ml_dtypes.bfloat16, "I16": "<i2",
                "U8": "u1"}[dt]
        a = rng.integers(0, 100, int(np.prod(shape))).astype(npdt)
        tensors[f"t{i}"] = (dt, shape, a)
        axes = [None, "data", "model", ("data", "model"), ("model", "data")]
        spec, used = [], set()
        for _ in shape:
            ax = axes[int(rng.integers(len(axes)))]
            names = set(ax if isinstance(ax, tuple) else (ax,)) - {None}
            spec.append(None if names & used else ax)
            used |= names
        specs[f"t{i}"] = NamedSharding(mesh, P(*spec))
    path = _write(tmp_path / "r.safetensors", tensors)
    out = rj.load(path, specs)
    for name, (_, shape, a) in tensors.items():
        for s in out[name].addressable_shards:
            np.testing.assert_array_equal(np.asarray(s.data),
                                          a.reshape(shape)[s.index], name)


def test_errors_name_the_tensor(ckpt, small_ckpt):
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    with pytest.raises(ringload.TensorNotFoundError, match="tensor nope"):
        rj.load(ckpt, {"nope": NamedSharding(mesh, P())})
    with pytest.raises(ringload.ArgumentError, match="tensor 'w'.*not a "
                       "jax.sharding.Sharding"):
        rj.load(ckpt, {"w": P("model")})
    with pytest.raises(ringload.ArgumentError, match="tensor 'bias'.*"
                       "divide"):
        rj.load(ckpt, {"bias": NamedSharding(mesh, P(("data", "model")))})
    with pytest.raises(ringload.ArgumentError, match="dict"):
        rj.load(ckpt, [("w", None)])
    # a spec longer than the rank: JAX's own bare IndexError before
    with pytest.raises(ringload.ArgumentError, match=r"tensor 'w' of shape "
                       r"\[8, 12\]: .* has 3 entries, more than its 2"):
        rj.load(ckpt, {"w": NamedSharding(mesh, P("data", None, "model"))})
    with pytest.raises(ringload.ArgumentError, match="tensor 'bias'"):
        rj.load(ckpt, {"bias": NamedSharding(mesh, P(None, "data"))})
    with pytest.raises(ringload.DtypeError, match="tensor 'f4': dtype F4"):
        rj.load_file(small_ckpt)
    with pytest.raises(ringload.DeviceError, match="jax.Device"):
        rj.load_file(ckpt, "cpu:0")


def test_read_once_needs_jax_distributed(ckpt):
    """read_once moves bytes through jax.distributed's key-value store:
    without it, StateError saying so (test_jax_procs.py runs it)."""
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    with pytest.raises(ringload.StateError, match="jax.distributed"):
        rj.load(ckpt, {"w": NamedSharding(mesh, P())}, read_once=True)


@pytest.mark.parametrize("kind", ["pinned_host", "unpinned_host",
                                  "device"])
def test_memory_kinds_that_device_put_accepts(ckpt, kind):
    """A sharding's memory kind, as jax.device_put takes it: each piece is
    put in that memory ("Memory kind mismatch" before for host kinds)."""
    mesh = jax.make_mesh((2, 4), ("data", "model"))
    s = NamedSharding(mesh, P("data", "model"), memory_kind=kind)
    try:
        jax.device_put(_expect("w"), s)
    except (ValueError, RuntimeError, NotImplementedError) as e:
        pytest.skip(f"this jax refuses memory kind {kind}: {e}")
    out = rj.load(ckpt, {"w": s, "emb": NamedSharding(
        mesh, P("data"), memory_kind=kind)})
    assert out["w"].sharding.memory_kind == kind
    assert out["emb"].sharding.memory_kind == kind
    np.testing.assert_array_equal(np.asarray(out["w"]), _expect("w"))
    np.testing.assert_array_equal(np.asarray(out["emb"]), _expect("emb"))
    for a, name in ((out["w"], "w"), (out["emb"], "emb")):
        for sh in a.addressable_shards:
            np.testing.assert_array_equal(np.asarray(sh.data),
                                          _expect(name)[sh.index])


def test_64_bit_types_need_x64(ckpt):
    jax.config.update("jax_enable_x64", False)
    try:
        with pytest.raises(ringload.DtypeError, match="tensor 'bias': dtype "
                           "I64 needs 64-bit JAX types"):
            rj.load_file(ckpt)
        one = jax.sharding.SingleDeviceSharding(jax.devices()[0])
        assert rj.load(ckpt, {"w": one})["w"].dtype == np.float32
    finally:
        jax.config.update("jax_enable_x64", True)
