"""safe_open as safetensors has it: framework names, device forms, keys,
metadata, context manager, get_tensor, and get_slice, whose indexing
matches numpy's (and torch's) on the whole tensor and reads only the box
the index needs."""
import os

import numpy as np
import pytest

import oracle
import stfile

import ringload
from ringload import _handles


@pytest.fixture
def ckpt(tmp_path, rng):
    """A small checkpoint: w F32 (5, 7, 6), b BF16 (9,), s I32 scalar,
    big F32 (600, 1000), e F16 (0, 3)."""
    def t(dtype, shape):
        bits = stfile.DTYPES[dtype][0]
        return (dtype, shape, rng.bytes(int(np.prod(shape)) * bits // 8))
    tensors = {"w": t("F32", (5, 7, 6)), "b": t("BF16", (9,)), "s": t("I32", ()),
               "big": t("F32", (600, 1000)), "e": t("F16", (0, 3))}
    path = tmp_path / "c.safetensors"
    stfile.write(path, tensors, {"format": "pt", "note": "x"})
    return path, tensors


def _full(tensors, name):
    dtype, shape, data = tensors[name]
    return np.frombuffer(data, np.dtype(stfile.DTYPES[dtype][1])).reshape(shape)


@pytest.mark.parametrize("framework", ["pt", "torch", "pytorch", "np", "numpy"])
def test_every_framework_name_and_the_basic_methods(ckpt, torch, framework):
    path, tensors = ckpt
    with ringload.safe_open(path, framework, device="cpu") as f:
        assert f.keys() == sorted(tensors)
        assert f.offset_keys() == list(tensors)
        assert f.metadata() == {"format": "pt", "note": "x"}
        for name, (dtype, shape, data) in tensors.items():
            if framework in ("np", "numpy") and oracle.numpy_refuses(dtype):
                with pytest.raises(TypeError, match="data type 'bfloat16' not "
                                   "understood"):
                    f.get_tensor(name)
                continue
            t = f.get_tensor(name)
            assert isinstance(t, np.ndarray) == (framework in ("np", "numpy"))
            assert tuple(t.shape) == shape and oracle.as_bytes(t) == data
            sl = f.get_slice(name)
            assert sl.get_shape() == list(shape) and sl.get_dtype() == dtype
    for call in (f.keys, f.metadata, lambda: f.get_tensor("w"), lambda: f.get_slice("w")):
        with pytest.raises(ringload.StateError, match="File is closed"):
            call()


def test_metadata_is_none_without_metadata(tmp_path):
    path = tmp_path / "n.safetensors"
    stfile.write(path, {"a": ("U8", (2,), b"ab")})
    assert ringload.safe_open(path, "np").metadata() is None


def test_a_slice_stays_usable_after_the_file_is_closed(ckpt):
    path, tensors = ckpt
    with ringload.safe_open(path, "np") as f:
        sl = f.get_slice("w")
    assert oracle.as_bytes(sl[1]) == _full(tensors, "w")[1].tobytes()


INDEXES = [
    (slice(None),), (Ellipsis,), (1,), (-1,), (slice(1, 3),), (slice(None), 2),
    (slice(None), slice(None, None, 2)), (slice(None, None, 2), slice(1, 6, 3), -2),
    (Ellipsis, 1), (None,), (1, None, slice(2, None)), (slice(2, 2),),
    (slice(10, None),), (slice(-3, None),), (slice(None), slice(-100, 100)),
    (np.int64(1),), (1, 2, 3), (4, Ellipsis, slice(5, 1)), (slice(None, None, 7),),
    (0, slice(None), None, slice(1, 5, 3)),
]


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_get_slice_matches_numpy_indexing(ckpt, index):
    path, tensors = ckpt
    expect = _full(tensors, "w")[index]
    with ringload.safe_open(path, "np") as f:
        got = f.get_slice("w")[index if len(index) > 1 else index[0]]
    assert isinstance(got, np.ndarray)  # a 0-d array, never a numpy scalar
    assert got.shape == expect.shape and got.dtype == expect.dtype
    assert got.flags.c_contiguous
    assert oracle.as_bytes(got) == np.ascontiguousarray(expect).tobytes()


@pytest.mark.parametrize("index", INDEXES, ids=repr)
def test_get_slice_matches_torch_indexing(ckpt, torch, index):
    path, tensors = ckpt
    full = torch.from_numpy(_full(tensors, "w").copy())
    expect = full[tuple(torch.tensor(int(k)) if isinstance(k, np.integer) else k
                        for k in index)]
    with ringload.safe_open(path, "pt") as f:
        got = f.get_slice("w")[index]
    assert got.shape == expect.shape and got.dtype == expect.dtype
    assert got.is_contiguous() and oracle.as_bytes(got) == oracle.as_bytes(expect)


def test_get_slice_of_bf16_scalar_and_empty_tensors(ckpt, torch):
    path, tensors = ckpt
    with ringload.safe_open(path, "pt") as f:
        b = f.get_slice("b")[2:7:2]
        assert b.dtype == torch.bfloat16
        assert oracle.as_bytes(b) == _full(tensors, "b")[2:7:2].tobytes()
        assert oracle.as_bytes(f.get_slice("s")[...]) == tensors["s"][2]
        assert f.get_slice("s")[()].shape == ()
        assert tuple(f.get_slice("e")[:, 1:].shape) == (0, 2)


REFUSED = [
    (slice(None, None, -1), "steps must be positive"),
    (slice(None, None, 0), "steps must be positive"),
    ([0, 1], "not supported"), (np.array([0]), "not supported"), (True, "not supported"),
    (1.5, "not supported"), ("a", "not supported"), ((0, 0, 0, 0), "too many indices"),
    ((Ellipsis, Ellipsis), "single ellipsis"), (5, "out of bounds for dimension 0"),
    (-6, "out of bounds"), ((0, 7), "out of bounds for dimension 1 with size 7"),
    (slice(0.5, 2), "slice indices must be integers"),
]


@pytest.mark.parametrize("index,why", REFUSED, ids=repr)
def test_get_slice_refuses_what_torch_and_safetensors_refuse(ckpt, index, why):
    path, _ = ckpt
    with ringload.safe_open(path, "np") as f:
        with pytest.raises(ringload.SliceError, match=why) as e:
            f.get_slice("w")[index]
    assert isinstance(e.value, IndexError) and e.value.code_name == "RL_E_INVALID_ARG"


def test_get_slice_reads_only_the_needed_bytes(ckpt, monkeypatch):
    path, tensors = ckpt
    needed = []
    run = _handles.Loader.run

    def counting(self, plan, progress=None):
        run(self, plan, progress)
        needed.append(self.stats()["bytes_needed"])

    monkeypatch.setattr(_handles.Loader, "run", counting)
    with ringload.safe_open(path, "np") as f:
        rows = f.get_slice("big")[100:103]
        cols = f.get_slice("big")[:, 10:12]
        one = f.get_slice("big")[599, 999]
        whole = f.get_tensor("big")
    assert needed == [3 * 4000, 600 * 2 * 4, 4, 600 * 4000]
    full = _full(tensors, "big")
    assert rows.tobytes() == full[100:103].tobytes()
    assert cols.tobytes() == np.ascontiguousarray(full[:, 10:12]).tobytes()
    assert one.tobytes() == full[599, 999].tobytes()
    assert whole.tobytes() == full.tobytes()


def test_empty_name_tensor_gets_sliced_too(tmp_path):
    path = tmp_path / "e.safetensors"
    stfile.write(path, {"": ("U8", (4,), b"abcd"), " slice": ("U8", (1,), b"z")})
    with ringload.safe_open(path, "np") as f:
        assert f.get_tensor("").tobytes() == b"abcd"
        assert f.get_slice("")[1:3].tobytes() == b"bc"
        assert f.get_slice(" slice")[:].tobytes() == b"z"


def test_torch_device_forms(ckpt, torch):
    path, _ = ckpt
    for device in ("cpu", torch.device("cpu"), "cpu:0", None):  # None: as safetensors
        with ringload.safe_open(path, "pt", device=device) as f:
            assert f.get_tensor("w").device == torch.device("cpu")
            assert f.get_slice("w")[0].device == torch.device("cpu")
        assert ringload.torch.load_file(path, device=device)["w"].device.type == "cpu"
    for device in ("bogus", "cuda:x", -1, 1.5, True, b"cpu"):
        with pytest.raises(ringload.DeviceError, match="is invalid") as e:
            ringload.safe_open(path, "pt", device=device)
        assert repr(device) in str(e.value) and isinstance(e.value, ValueError)
    if torch.cuda.is_available():
        pytest.skip("CUDA is available: the CUDA forms are tested in test_gpu.py")
    for device in (0, 3, "cuda", "cuda:0", torch.device("cuda", 1)):
        with pytest.raises(ringload.DeviceError, match="is not available"):
            ringload.safe_open(path, "pt", device=device)
        with pytest.raises(ringload.DeviceError, match="is not available"):
            ringload.torch.load_file(path, device=device)
        with pytest.raises(ringload.DeviceError, match="is not available"):
            ringload.load(path, framework="pt", device_map={0: device})


def test_numpy_takes_only_the_cpu(ckpt):
    path, _ = ckpt
    for device in ("cuda", 0, "cuda:0", "meta"):
        with pytest.raises(ringload.DeviceError, match="not supported for framework numpy"):
            ringload.safe_open(path, "np", device=device)
        with pytest.raises(ringload.DeviceError):
            ringload.load(path, framework="np", device_map={0: device})
    assert ringload.safe_open(path, "np", device="cpu").get_tensor("s").shape == ()


def test_device_map_of_other_processes_devices_is_ignored(ckpt):
    path, tensors = ckpt
    got = ringload.load(path, framework="np", device_map={0: "cpu", 9: "cpu"})
    assert list(got) == [0] and sorted(got[0]) == sorted(tensors)


def test_torch_results_need_no_cuda(ckpt, torch):
    path, _ = ckpt
    ringload.torch.load_file(path)
    with ringload.safe_open(path, "pt") as f:
        f.get_slice("w")[1:2]
    assert not torch.cuda.is_initialized()
