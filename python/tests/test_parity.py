"""Parity with safetensors itself (the PyPI package of make pydeps): every
reading function gives the same results, exception types and the messages
a user matches on, on fixtures that safetensors' own writer makes here:

    safetensors.torch   load_file, load(bytes)
    safetensors.numpy   load_file, load(bytes)
    safe_open           keys, offset_keys, metadata, get_tensor, get_slice

Where ringload gives more than safetensors, the test says so and checks
that safetensors indeed refuses (EXTENSIONS; docs/python.md lists them).
"""
import json
import re
import struct

import numpy as np
import pytest

import ringload
import ringload.numpy as rnp

pytestmark = pytest.mark.venv

st = pytest.importorskip("safetensors", reason="needs safetensors (make pydeps)")
torch = pytest.importorskip("torch", reason="needs torch (make pydeps)")
import safetensors.numpy as stn  # noqa: E402
import safetensors.torch as stt  # noqa: E402
import ringload.torch as rpt  # noqa: E402

SEED = 20261126

# Every torch dtype safetensors writes (torch 2.x names; those this torch
# lacks are left out).
TORCH_DTYPES = [n for n in (
    "bool", "uint8", "int8", "int16", "uint16", "float16", "bfloat16", "int32",
    "uint32", "float32", "float64", "int64", "uint64", "complex64",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2") if hasattr(torch, n)]
NUMPY_DTYPES = ["bool", "uint8", "int8", "int16", "uint16", "float16", "int32",
                "uint32", "float32", "float64", "int64", "uint64", "complex64"]
SHAPES = [(), (0, 3), (7,), (2, 3, 4)]


def _random_tensor(g, dtype, shape):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    size = torch.empty((), dtype=dtype).element_size()
    raw = torch.randint(0, 256, shape + (size,), dtype=torch.uint8, generator=g)
    return raw.view(dtype).reshape(shape)


@pytest.fixture(scope="module")
def pt_file(tmp_path_factory):
    """Every torch dtype in every shape of SHAPES (F4: not 0-d), random
    bytes, written by safetensors.torch.save_file with metadata."""
    print(f"seed {SEED}")
    g = torch.Generator().manual_seed(SEED)
    tensors = {f"{n}.{len(s)}d": _random_tensor(g, getattr(torch, n), s)
               for n in TORCH_DTYPES for s in SHAPES
               if not (n == "float4_e2m1fn_x2" and s == ())}
    path = tmp_path_factory.mktemp("parity") / "pt.safetensors"
    stt.save_file(tensors, str(path), metadata={"format": "pt", "note": "parity"})
    return str(path)


@pytest.fixture(scope="module")
def np_file(tmp_path_factory):
    """Every numpy dtype safetensors.numpy writes, in every shape of
    SHAPES, without metadata."""
    rng = np.random.default_rng(SEED)
    tensors = {}
    for n in NUMPY_DTYPES:
        for s in SHAPES:
            dt = np.dtype(n)
            raw = rng.integers(0, 2 if n == "bool" else 256,
                               size=int(np.prod(s)) * dt.itemsize, dtype=np.uint8)
            tensors[f"{n}.{len(s)}d"] = raw.view(dt).reshape(s)
    path = tmp_path_factory.mktemp("parity") / "np.safetensors"
    stn.save_file(tensors, str(path))
    return str(path)


def _outcome(fn):
    """("ok", value) or ("err", exception)."""
    try:
        return "ok", fn()
    except Exception as e:  # noqa: BLE001 - compared below
        return "err", e


def _bytes(t):
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t).view(np.uint8).tobytes()
    t = t.contiguous()
    return t.view(torch.uint8).numpy().tobytes() if t.dim() else \
        t.reshape(1).view(torch.uint8).numpy().tobytes()


def _same_tensor(ours, theirs, what):
    assert type(ours) is type(theirs), what
    assert ours.dtype == theirs.dtype, what
    assert tuple(ours.shape) == tuple(theirs.shape), what
    assert _bytes(ours) == _bytes(theirs), what
    if isinstance(ours, np.ndarray):
        assert ours.flags.c_contiguous, what
    else:
        assert ours.is_contiguous() and ours.device == theirs.device, what


_BUILTIN_TYPES = (FileNotFoundError, PermissionError, OSError, KeyError, IndexError,
                  TypeError, ValueError, AttributeError, RuntimeError)


def _same_failure(ours, theirs, what, message=True):
    """ours fails as theirs: a ringload.Error, of every builtin exception
    type of theirs (safetensors' own SafetensorError derives from
    Exception only), and with safetensors' words in its message."""
    assert isinstance(ours, ringload.Error), (what, ours)
    for cls in _BUILTIN_TYPES:
        if isinstance(theirs, cls):
            assert isinstance(ours, cls), (what, cls, ours)
    if message:
        assert str(theirs) in str(ours), (what, str(theirs), str(ours))


# Where ringload gives a result and safetensors fails: (framework, dtype)
# -> why. numpy's BF16 works in safetensors only once something imported
# ml_dtypes; ringload imports it.
EXTENSIONS = {
    ("np", "F8_E4M3"): "ml_dtypes' float8_e4m3fn (safetensors: AttributeError)",
    ("np", "F8_E5M2"): "ml_dtypes' float8_e5m2 (safetensors: AttributeError)",
    ("np", "F8_E4M3FNUZ"): "ml_dtypes' float8_e4m3fnuz",
    ("np", "F8_E5M2FNUZ"): "ml_dtypes' float8_e5m2fnuz",
    ("np", "F8_E8M0"): "ml_dtypes' float8_e8m0fnu",
    ("np", "F4"): "packed bytes as uint8 (safetensors: AttributeError)",
}


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_safe_open_keys_offset_keys_metadata(pt_file, np_file, framework):
    for path in (pt_file, np_file):
        with ringload.safe_open(path, framework) as ours, \
                st.safe_open(path, framework) as theirs:
            assert ours.keys() == theirs.keys()
            assert ours.offset_keys() == theirs.offset_keys()
            assert ours.metadata() == theirs.metadata()
    assert ringload.safe_open(np_file, framework).metadata() is None


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_safe_open_get_tensor_every_dtype_and_shape(pt_file, framework):
    extended = 0
    with ringload.safe_open(pt_file, framework) as ours, \
            st.safe_open(pt_file, framework) as theirs:
        for name in theirs.keys():
            dtype = theirs.get_slice(name).get_dtype()
            assert ours.get_slice(name).get_dtype() == dtype
            assert ours.get_slice(name).get_shape() == theirs.get_slice(name).get_shape()
            a = _outcome(lambda: ours.get_tensor(name))
            b = _outcome(lambda: theirs.get_tensor(name))
            if (framework, dtype) in EXTENSIONS:
                assert (a[0], b[0]) == ("ok", "err"), (name, a, b)
                extended += 1
            elif b[0] == "ok":
                assert a[0] == "ok", (name, a[1])
                _same_tensor(a[1], b[1], name)
            else:
                assert a[0] == "err", (name, b[1])
                _same_failure(a[1], b[1], name, message=False)
    assert extended == (0 if framework == "pt" else 4 * sum(
        1 for f, _ in EXTENSIONS if f == "np") - 1)  # F4 has no 0-d tensor


@pytest.mark.parametrize("framework", ["pt", "np"])
def test_safe_open_get_tensors(pt_file, np_file, framework):
    path = pt_file if framework == "pt" else np_file
    with ringload.safe_open(path, framework) as ours, \
            st.safe_open(path, framework) as theirs:
        got, expect = ours.get_tensors(), theirs.get_tensors()
    assert list(got) == list(expect)  # file order, as safetensors
    for name in expect:
        _same_tensor(got[name], expect[name], name)


def _same_dicts(ours, theirs):
    assert list(ours) == sorted(theirs)
    for name in theirs:
        _same_tensor(ours[name], theirs[name], name)


def _load_file_and_load_bytes(path, ours, theirs):
    """ours.load_file and ours.load (bytes, bytearray, memoryview) give
    what theirs.load_file gives."""
    expect = theirs.load_file(path)
    _same_dicts(ours.load_file(path), expect)
    with open(path, "rb") as f:
        data = f.read()
    for form in (data, bytearray(data), memoryview(data)):
        _same_dicts(ours.load(form), expect)
    return expect


def test_torch_load_file_and_load_bytes(pt_file):
    theirs = _load_file_and_load_bytes(pt_file, rpt, stt)
    # safetensors.torch.load(bytes) itself fails with KeyError 'F4' and
    # 'F8_E8M0' (its _TYPES lacks them, load_file has them): the others
    # must agree with it too.
    kept = {n: t for n, t in theirs.items()
            if t.dtype not in (getattr(torch, "float4_e2m1fn_x2", None),
                               getattr(torch, "float8_e8m0fnu", None))}
    buf = stt.save(kept)
    _same_dicts(rpt.load(buf), stt.load(buf))


def test_numpy_load_file_and_load_bytes(np_file):
    _load_file_and_load_bytes(np_file, rnp, stn)
    with open(np_file, "rb") as f:
        data = f.read()
    _same_dicts(rnp.load(data), stn.load(data))
    # safetensors.numpy.load(bytes) itself fails with KeyError 'BF16' and
    # 'F8_*' (its table lacks them, load_file has BF16): ringload's loads
    # them as load_file does (an extension, docs/python.md)
    import ml_dtypes
    for dtype in (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2):
        buf = stn.save({"x": np.arange(6).astype(dtype).reshape(2, 3)})
        with pytest.raises(KeyError):
            stn.load(buf)
        got = rnp.load(buf)["x"]
        assert got.dtype == dtype and np.array_equal(got, np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("load", [rpt.load, rnp.load], ids=["torch", "numpy"])
def test_load_bytes_refuses_what_safetensors_refuses(load, np_file):
    theirs_load = stt.load if load is rpt.load else stn.load
    with open(np_file, "rb") as f:
        good = f.read()
    bad = {"empty": b"", "short": b"\x01\x02", "truncated": good[:100],
           "json": (5).to_bytes(8, "little") + b"{nope",
           "incomplete": good[:-4]}
    for what, data in bad.items():
        a, b = _outcome(lambda: load(data)), _outcome(lambda: theirs_load(data))
        assert (a[0], b[0]) == ("err", "err"), what
        _same_failure(a[1], b[1], what, message=False)
        assert isinstance(a[1], ringload.HeaderError), what
        # named as the caller knows it, not by its memory file's path
        assert str(a[1]).startswith("load(bytes): ") and "/proc/" not in str(a[1]), what
    # ringload.torch.load also takes a file name (its sharded form), so a
    # str is a path there, not safetensors' TypeError
    for data in (None, 3) if load is rpt.load else ("text", None, 3):
        a, b = _outcome(lambda: load(data)), _outcome(lambda: theirs_load(data))
        assert type(a[1]) is type(b[1]) is TypeError and str(a[1]) == str(b[1])
    assert ringload._handles.live_handles() == {}


# get_slice: every index form; with torch, safetensors indexes a torch
# tensor, so its results and errors are torch's.
INDEXES = [
    0, -1, 1, 2, -3, slice(None), slice(0, 1), slice(None, None, 2),
    slice(None, None, -1), slice(None, None, 0), Ellipsis, (Ellipsis, 1),
    (0, Ellipsis, 1), (Ellipsis, Ellipsis), None, (None, 0), (0, 0, 0),
    (0, 0, 0, 0), (), [0], [0, 1], [-1, 0, 1], np.int64(1), np.array([1]),
    True, False, 1.0, "x", slice(1, 100), slice(5, 10), slice(-100, 100),
    slice(2, 1), (0, slice(-1, None)), (slice(None), [True, False, True]),
    (0, [0, 2]), (Ellipsis, None), (slice(None), slice(1, 3), slice(None, None, 3)),
    (1, slice(0, 3, 2), -1), (slice(0.5, 2),), np.bool_(True), np.int8(-1),
    [], ([],), (0, []),  # safetensors 0.8 takes an empty list alone
]
SCALAR_INDEXES = [(), Ellipsis, 0, slice(None), None, (None, Ellipsis)]
# torch tensors as indexes (a 0-d bool one is a mask, not the integer 1)
TORCH_INDEXES = [torch.tensor(True), torch.tensor(False), torch.tensor(1),
                 torch.tensor([1, 0]), (0, torch.tensor(-1))]


def _index_ids(idx):
    return re.sub(r"\s+", "", repr(idx))


def _torch_index(idx):
    """The index as torch takes it (numpy arrays become tensors)."""
    if isinstance(idx, np.ndarray):
        return torch.from_numpy(idx)
    return idx


def _both_slices(path, framework, name, index):
    """(outcome of ringload's get_slice(name)[index], safetensors')."""
    their_index = _torch_index(index) if framework == "pt" else index
    with ringload.safe_open(path, framework) as ours, \
            st.safe_open(path, framework) as theirs:
        return (_outcome(lambda: ours.get_slice(name)[index]),
                _outcome(lambda: theirs.get_slice(name)[their_index]))


@pytest.mark.parametrize("open_", [
    lambda p: rnp.load_file(p), lambda p: rpt.load_file(p),
    lambda p: ringload.safe_open(p, "pt"), lambda p: ringload.safe_open(p, "np")])
def test_a_missing_file_is_file_not_found_in_safetensors_words(tmp_path, open_, monkeypatch):
    """safetensors' own test_file_not_found: FileNotFoundError, str()
    "No such file or directory: notafile" (regression: ringload said
    "notafile: cannot open: ...")."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(FileNotFoundError) as theirs:
        st.safe_open("notafile", "pt")
    with pytest.raises(FileNotFoundError) as ours:
        open_("notafile")
    assert str(ours.value) == str(theirs.value) == "No such file or directory: notafile"
    assert ours.value.errno == 2 and ours.value.filename == "notafile"


@pytest.mark.parametrize("index", INDEXES + TORCH_INDEXES, ids=_index_ids)
def test_get_slice_with_torch_as_safetensors(pt_file, index):
    for name in ("float32.3d", "bfloat16.3d", "int8.3d"):
        a, b = _both_slices(pt_file, "pt", name, index)
        if b[0] == "ok":
            assert a[0] == "ok", (name, a[1])
            _same_tensor(a[1], b[1], name)
        else:
            assert a[0] == "err", (name, b[1])
            _same_failure(a[1], b[1], name)
            assert isinstance(a[1], ringload.SliceError)


@pytest.mark.parametrize("index", SCALAR_INDEXES, ids=_index_ids)
def test_get_slice_of_a_scalar_with_torch_as_safetensors(pt_file, index):
    a, b = _both_slices(pt_file, "pt", "float32.0d", index)
    assert a[0] == b[0], (a, b)
    if b[0] == "ok":
        _same_tensor(a[1], b[1], index)
    else:
        _same_failure(a[1], b[1], index)


# numpy: safetensors slices itself (no torch); ringload takes numpy's basic
# indexing. Where they differ, ringload takes more (None, a slice past the
# end or from a negative start, as numpy does) or refuses a bool, which
# safetensors reads as 1 but numpy as a new axis.
NUMPY_EXTENSIONS = {"None", "(None,0)", "slice(5,10,None)", "slice(2,1,None)",
                    "(Ellipsis,None)", "slice(1,100,None)", "slice(-100,100,None)",
                    "(0,slice(-1,None,None))"}
NUMPY_REFUSED = {"True", "False"}


@pytest.mark.parametrize("index", INDEXES, ids=_index_ids)
def test_get_slice_with_numpy_as_safetensors(np_file, index):
    a, b = _both_slices(np_file, "np", "float32.3d", index)
    full = stn.load_file(np_file)["float32.3d"]
    key = _index_ids(index)
    if key in NUMPY_EXTENSIONS:
        assert (a[0], b[0]) == ("ok", "err"), (a, b)
        assert np.array_equal(a[1], full[index])
    elif key in NUMPY_REFUSED:
        assert (a[0], b[0]) == ("err", "ok"), (a, b)
        assert isinstance(a[1], ringload.SliceError)
    elif b[0] == "ok":
        assert a[0] == "ok", a[1]
        _same_tensor(a[1], b[1], key)
    else:
        assert a[0] == "err", b[1]
        _same_failure(a[1], b[1], key, message=False)
        if isinstance(b[1], TypeError):  # Python's own, worded otherwise
            return
        # safetensors' words, less "Error during slicing [i] with shape [s]: "
        words = re.sub(r"^Error during slicing .*?: ", "", str(b[1]))
        assert f"[safetensors: {words}]" in str(a[1]), (key, str(b[1]), str(a[1]))


def _header(obj, data_bytes):
    text = json.dumps(obj).encode()
    return struct.pack("<Q", len(text)) + text + bytes(data_bytes)


def _f32(offsets, shape=(1,), dtype="F32"):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


# Malformed files, one per fault the header check finds.
BAD_FILES = {
    "too_small": b"\x01\x02",
    "too_large": struct.pack("<Q", 1 << 40) + b"{}",
    "length": struct.pack("<Q", 100) + b"{}",
    "json": struct.pack("<Q", 5) + b"{nope",
    "utf8": struct.pack("<Q", 9) + b'{"\xff": 1}',
    "offset_gap": _header({"a": _f32((4, 8))}, 8),
    "offset_back": _header({"a": _f32((0, 4)), "b": _f32((0, 4))}, 4),
    "overflow": _header({"a": _f32((0, 4), (2 ** 62, 8))}, 4),
    "misaligned": _header({"a": _f32((0, 2), (3,), "F4")}, 2),
    "size": _header({"a": _f32((0, 8), (3,))}, 8),
    "truncated": _header({"a": _f32((0, 16), (4,))}, 8),
    "extra": _header({"a": _f32((0, 4))}, 8),
}


@pytest.mark.parametrize("case", sorted(BAD_FILES))
def test_header_errors_carry_safetensors_words(case, tmp_path):
    path = str(tmp_path / f"{case}.safetensors")
    with open(path, "wb") as f:
        f.write(BAD_FILES[case])
    for ours, theirs in ((lambda: ringload.safe_open(path, "pt"),
                          lambda: st.safe_open(path, "pt")),
                         (lambda: rnp.load(BAD_FILES[case]),
                          lambda: stn.load(BAD_FILES[case]))):
        a, b = _outcome(ours), _outcome(theirs)
        assert (a[0], b[0]) == ("err", "err"), case
        assert isinstance(a[1], ringload.HeaderError), case
        # safetensors' words, less the tensor it names and where in the JSON
        words = re.split(r" `| at line |: (?=[a-z])", str(b[1]).split(": ", 1)[1])[0]
        assert words in str(a[1]), (case, str(b[1]), str(a[1]))


@pytest.mark.parametrize("backend", ["mmap", "pread", "io_uring", "libaio"])
def test_backend_keyword(pt_file, np_file, backend):
    theirs = "mmap" if backend in ("io_uring", "libaio") else backend
    # (safetensors 0.8's pread backend fails on F4: its mmap reads alike)
    _same_dicts(rpt.load_file(pt_file, backend=backend), stt.load_file(pt_file))
    _same_dicts(rnp.load_file(np_file, backend=backend),
                stn.load_file(np_file, backend=theirs))
    with ringload.safe_open(pt_file, "pt", backend=backend) as ours, \
            st.safe_open(pt_file, "pt", backend=theirs) as them:
        _same_tensor(ours.get_tensor("int16.3d"), them.get_tensor("int16.3d"), backend)
        _same_tensor(ours.get_slice("int16.3d")[1:, 2], them.get_slice("int16.3d")[1:, 2],
                     backend)


def test_bad_backend_as_safetensors(pt_file):
    for call in (lambda m, b: m.safe_open(pt_file, "pt", backend=b),
                 lambda m, b: (rpt if m is ringload else stt).load_file(pt_file, backend=b),
                 lambda m, b: (rnp if m is ringload else stn).load_file(pt_file, backend=b)):
        a, b = _outcome(lambda: call(ringload, "foo")), _outcome(lambda: call(st, "foo"))
        assert 'backend "foo" is invalid (expected one of: "mmap", "pread"' in str(a[1])
        assert str(b[1]).startswith('backend "foo" is invalid')
        assert isinstance(a[1], ringload.ArgumentError)
        for bad in (3, None):
            a, b = _outcome(lambda: call(ringload, bad)), _outcome(lambda: call(st, bad))
            assert type(a[1]) is type(b[1]) is TypeError and str(a[1]) == str(b[1])
    assert ringload._handles.live_handles() == {}


def test_arguments_of_other_types_as_safetensors(pt_file):
    """device=None is the CPU; a tensor name or framework that is not a str
    is safetensors' TypeError, word for word."""
    for device in (None, "cpu", 0):
        a = _outcome(lambda: rpt.load_file(pt_file, device=device))
        b = _outcome(lambda: stt.load_file(pt_file, device=device))
        assert a[0] == b[0], (device, a, b)
        a = _outcome(lambda: ringload.safe_open(pt_file, "pt", device).get_tensor("int8.1d"))
        b = _outcome(lambda: st.safe_open(pt_file, "pt", device).get_tensor("int8.1d"))
        assert a[0] == b[0], (device, a, b)
        if b[0] == "ok":
            _same_tensor(a[1], b[1], device)
    calls = (lambda m, bad: m.safe_open(pt_file, bad),
             lambda m, bad: m.safe_open(pt_file, "pt").get_tensor(bad),
             lambda m, bad: m.safe_open(pt_file, "np").get_slice(bad))
    for bad in (1, None, b"int8.1d", 1.5):
        for call in calls:
            a = _outcome(lambda: call(ringload, bad))
            b = _outcome(lambda: call(st, bad))
            assert type(a[1]) is type(b[1]) is TypeError, (bad, a, b)
            assert str(a[1]) == str(b[1])


@pytest.mark.parametrize("metadata", [{}, None, {"k": "v"}, "null"])
def test_metadata_as_safetensors(tmp_path, metadata):
    """metadata() is {} for an empty __metadata__ (safetensors' writer
    writes one for metadata={}), None for none or a null one."""
    path = str(tmp_path / "m.safetensors")
    if metadata == "null":
        with open(path, "wb") as f:
            f.write(_header({"__metadata__": None, "a": _f32((0, 4))}, 4))
    else:
        stt.save_file({"a": torch.zeros(1)}, path, metadata=metadata)
    expect = st.safe_open(path, "pt").metadata()
    for framework in ("pt", "np"):
        got = ringload.safe_open(path, framework).metadata()
        assert got == expect and type(got) is type(expect), (metadata, got, expect)


def test_errors_as_safetensors(pt_file, tmp_path):
    absent = str(tmp_path / "absent.safetensors")
    for ours, theirs in ((lambda: ringload.safe_open(absent, "pt"),
                          lambda: st.safe_open(absent, "pt")),
                         (lambda: rpt.load_file(absent), lambda: stt.load_file(absent)),
                         (lambda: rnp.load_file(absent), lambda: stn.load_file(absent))):
        a, b = _outcome(ours), _outcome(theirs)
        _same_failure(a[1], b[1], "absent", message=False)
        assert "No such file or directory" in str(a[1]) and absent in str(a[1])
    cases = [
        (lambda m: m.safe_open(pt_file, "pt").get_tensor("nope"), True),
        (lambda m: m.safe_open(pt_file, "np").get_slice("nope"), True),
        (lambda m: m.safe_open(pt_file, "xx"), True),
        (lambda m: m.safe_open(pt_file, "pt", device="foo"), True),
        (lambda m: m.safe_open(pt_file, "np", device="cuda:0"), True),
    ]
    for i, (call, message) in enumerate(cases):
        a, b = _outcome(lambda: call(ringload)), _outcome(lambda: call(st))
        assert (a[0], b[0]) == ("err", "err"), i
        _same_failure(a[1], b[1], i, message)
    for framework in ("pt", "np"):
        for m in (ringload, st):
            f = m.safe_open(pt_file, framework)
            sl = f.get_slice("float32.3d")
            f.__exit__(None, None, None)
            for call in (f.keys, f.offset_keys, f.metadata,
                         lambda: f.get_tensor("int8.1d"), lambda: f.get_slice("int8.1d")):
                with pytest.raises(Exception, match="File is closed"):
                    call()
            assert tuple(sl[0].shape) == (3, 4)  # a slice outlives its file
