"""The hot path of load_file (ringload/_mapped.py): a checkpoint the page
cache holds whole is handed out over a private mapping of its file, as
safetensors does, and read otherwise. Whether a file is mapped is seen in
/proc/self/maps: its path appears there exactly while a tensor of it
lives. The page-cache probe under it is the public rl_file_cached_bytes."""
import errno
import gc
import os

import numpy as np
import pytest

import stfile

import ringload
import ringload.numpy as rnp
from ringload import _lib

TENSORS = {
    "f32": ("F32", (2, 3), np.arange(6, dtype="<f4").tobytes()),
    "i64": ("I64", (3,), np.arange(3, dtype="<i8").tobytes()),
    "f16": ("F16", (4,), np.arange(4, dtype="<f2").tobytes()),
    "u8": ("U8", (5,), bytes(range(5, 10))),
    "empty": ("F32", (0, 2), b""),
}


def _hot(path):
    """Reads path whole, so that the page cache holds it."""
    with open(path, "rb") as f:
        f.read()
    return str(path)


def _cold(path):
    """Drops path's pages from the page cache (its own, not the machine's):
    written back, then POSIX_FADV_DONTNEED; skips where the file system
    keeps them (tmpfs: the cache is the file)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    if _lib.rl_file_cached_bytes(os.fsencode(path), 0, os.path.getsize(path)):
        pytest.skip(f"{path}: its file system keeps its pages cached")
    return str(path)


def _maps(path):
    """The permissions of each mapping of path in this process."""
    real = os.path.realpath(path)
    out = []
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split(maxsplit=5)
            if len(fields) == 6 and fields[5].rstrip("\n") == real:
                out.append(fields[1])
    return out


def _check(got, tensors):
    assert sorted(got) == sorted(tensors)
    for name, (dtype, shape, data) in tensors.items():
        t = got[name]
        a = t.numpy() if hasattr(t, "numpy") else t
        assert tuple(a.shape) == shape, name
        assert a.tobytes() == data, name


@pytest.fixture
def ckpt(tmp_path):
    path = tmp_path / "hot.safetensors"
    stfile.write(path, TENSORS)
    return path


@pytest.fixture
def no_gc():
    """Reference counting alone must unmap the file."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def _load_file(framework):
    """load_file of framework ("numpy" or "torch"; skips without torch)."""
    if framework == "numpy":
        return rnp.load_file
    pytest.importorskip("torch", reason="needs python3-torch")
    import ringload.torch as rt
    return rt.load_file


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_hot_file_is_mapped_privately_not_read(ckpt, framework, no_gc):
    load = _load_file(framework)
    got = load(_hot(ckpt))
    _check(got, TENSORS)
    # copy-on-write: writable, private ("p"), never shared with the file
    assert _maps(ckpt) == ["rw-p"]
    del got
    assert _maps(ckpt) == []


def test_mapping_lives_as_long_as_any_tensor(ckpt, no_gc):
    got = rnp.load_file(_hot(ckpt))
    last = got.pop("i64")
    del got
    assert _maps(ckpt) == ["rw-p"]
    assert last.tolist() == [0, 1, 2]
    view = last[1:]
    del last
    assert _maps(ckpt) == ["rw-p"]
    assert view.tolist() == [1, 2]
    del view
    assert _maps(ckpt) == []


def test_torch_tensor_keeps_the_mapping(ckpt, no_gc, torch):
    import ringload.torch as rt
    got = rt.load_file(_hot(ckpt))
    t = got["f32"][1]
    del got
    assert _maps(ckpt) == ["rw-p"]
    assert t.tolist() == [3.0, 4.0, 5.0]
    del t
    assert _maps(ckpt) == []


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_writing_a_mapped_tensor_never_changes_the_file(ckpt, framework):
    load = _load_file(framework)
    got = load(_hot(ckpt))
    got["u8"][0] = 99
    got["f32"][0, 0] = -1
    assert int(got["u8"][0]) == 99
    with open(ckpt, "rb") as f:
        assert f.read() == _bytes_of(TENSORS, ckpt)
    _check(load(str(ckpt)), TENSORS)  # a second mapping sees the file


def _bytes_of(tensors, like):
    """The bytes stfile writes for tensors (the file as written)."""
    other = os.path.join(os.path.dirname(like), "again.safetensors")
    stfile.write(other, tensors)
    with open(other, "rb") as f:
        return f.read()


def test_cold_file_is_read(tmp_path, no_gc):
    # opening reads the header, so the data must reach past that page
    tensors = {"big": ("U8", (1 << 20,), bytes(range(256)) * 4096)}
    path = tmp_path / "cold.safetensors"
    stfile.write(path, tensors)
    got = rnp.load_file(_cold(path))
    assert _maps(path) == []
    _check(got, tensors)


def test_misaligned_tensor_is_read(tmp_path, no_gc):
    # U8 [1] first: the F32 after it starts at an odd offset in the file
    tensors = {"a": ("U8", (1,), b"\x07"),
               "b": ("F32", (2,), np.array([1.5, -2], "<f4").tobytes())}
    path = tmp_path / "odd.safetensors"
    stfile.write(path, tensors)
    got = rnp.load_file(_hot(path))
    assert _maps(path) == []
    _check(got, tensors)


def test_aligned_file_of_mixed_widths_is_mapped(tmp_path, no_gc):
    # every tensor at a multiple of its own width, though not of 8
    tensors = {"a": ("U8", (2,), b"\x01\x02"),
               "b": ("I16", (1,), b"\x03\x00"),
               "c": ("F32", (1,), np.array([2.5], "<f4").tobytes())}
    path = tmp_path / "mixed.safetensors"
    stfile.write(path, tensors)
    got = rnp.load_file(_hot(path))
    assert _maps(path) == ["rw-p"]
    _check(got, tensors)


def test_sha256_is_read_and_checked(ckpt, no_gc):
    import hashlib
    path = _hot(ckpt)
    with open(path, "rb") as f:
        good = hashlib.sha256(f.read()).hexdigest()
    got = rnp.load_file(path, sha256=good)
    assert _maps(ckpt) == []
    _check(got, TENSORS)
    with pytest.raises(ringload.IntegrityError):
        rnp.load_file(path, sha256="0" * 64)


@pytest.mark.parametrize("kwargs", [{"stats": {}}, {"copy": True},
                                    {"backend": "pread"}])
def test_stats_copy_and_named_backends_read(ckpt, no_gc, kwargs):
    got = rnp.load_file(_hot(ckpt), **kwargs)
    assert _maps(ckpt) == []
    _check(got, TENSORS)


def test_directory_of_hot_files_is_mapped(tmp_path, no_gc):
    one = {"x": TENSORS["f32"]}
    two = {"y": TENSORS["i64"]}
    stfile.write(tmp_path / "a.safetensors", one)
    stfile.write(tmp_path / "b.safetensors", two)
    _hot(tmp_path / "a.safetensors")
    _hot(tmp_path / "b.safetensors")
    got = rnp.load_file(str(tmp_path))
    assert _maps(tmp_path / "a.safetensors") == ["rw-p"]
    assert _maps(tmp_path / "b.safetensors") == ["rw-p"]
    _check(got, {**one, **two})


def test_one_cold_file_reads_them_all(tmp_path, no_gc):
    stfile.write(tmp_path / "a.safetensors", {"x": TENSORS["f32"]})
    # opening reads b's header, so its data must reach past that page
    big = ("U8", (1 << 20,), bytes(range(256)) * 4096)
    stfile.write(tmp_path / "b.safetensors", {"y": big})
    _hot(tmp_path / "a.safetensors")
    _cold(tmp_path / "b.safetensors")
    got = rnp.load_file(str(tmp_path))
    assert _maps(tmp_path / "a.safetensors") == []
    _check(got, {"x": TENSORS["f32"], "y": big})


def test_probe_counts_resident_bytes(ckpt):
    path = _hot(ckpt)
    size = os.path.getsize(path)
    assert _lib.rl_file_cached_bytes(os.fsencode(path), 0, size) == size
    # never more than the range asked, though it counts whole pages
    assert _lib.rl_file_cached_bytes(os.fsencode(path), 3, 5) == 5
    assert _lib.rl_file_cached_bytes(os.fsencode(path), 0, 0) == 0


def test_probe_errors(tmp_path):
    missing = os.fsencode(str(tmp_path / "none.safetensors"))
    assert _lib.rl_file_cached_bytes(missing, 0, 1) == -errno.ENOENT
    assert _lib.rl_file_cached_bytes(None, 0, 1) == -errno.EINVAL
    assert _lib.rl_file_cached_bytes(b"/", 2, (1 << 64) - 1) == -errno.EINVAL


# Past the header's pages: opening the file (reading its header) leaves
# the tensors' bytes cold.
BIG = dict(TENSORS, big=("F32", (1 << 18,), np.arange(1 << 18, dtype="<f4").tobytes()))


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("backend", ["auto", "io_uring", "libaio", "pread"])
@pytest.mark.parametrize("temp", ["hot", "cold"])
def test_read_mode_is_what_it_asks_and_the_stats_say_why(tmp_path, framework, backend,
                                                          temp, no_gc):
    """read_mode="direct" and "buffered" read the file that way, hot or
    cold, never mapped, byte-exact with its SHA-256 checked; the stats
    say the mode and why ("asked"); auto reads a cold file with O_DIRECT,
    saying "cold"."""
    import hashlib
    load = _load_file(framework)
    ckpt = tmp_path / "big.safetensors"
    stfile.write(ckpt, BIG)
    with open(ckpt, "rb") as f:
        good = hashlib.sha256(f.read()).hexdigest()
    for mode in ("direct", "buffered"):
        path = _hot(ckpt) if temp == "hot" else _cold(ckpt)
        stats = {}
        got = load(path, backend=backend, read_mode=mode, stats=stats,
                   sha256=good)
        assert _maps(ckpt) == []
        _check(got, BIG)
        [f] = stats["files"]
        assert (f["mode"], f["why"], f["sha256_state"]) == \
            (mode, "asked", "matched"), (mode, f)
        del got
    stats = {}
    path = _hot(ckpt) if temp == "hot" else _cold(ckpt)
    _check(load(path, backend=backend, read_mode="auto", stats=stats), BIG)
    [f] = stats["files"]
    want = ("cached", "hot") if temp == "hot" else ("direct", "cold")
    assert (f["mode"], f["why"]) == want, f


@pytest.mark.parametrize("bad", ["fast", "DIRECT", 1, b"direct"])
def test_read_mode_refuses_other_values(ckpt, bad):
    with pytest.raises(ringload.ArgumentError, match="read_mode"):
        rnp.load_file(str(ckpt), read_mode=bad)
