"""Lifetimes: a load interrupted by an exception in the consumer (the
progress callback, the conversion of a shard, the delivery to a device)
frees everything: the library's handles, its staging mappings (the
process's mapped size, /proc/self/statm) and file descriptors; results keep
their staging alive exactly as long as they live, by reference counting
alone (the garbage collector off)."""
import gc
import os

import numpy as np
import pytest

import stfile

import ringload
import ringload.numpy as rnp
from ringload import _handles

MIB = 1 << 20
BIG = 64 * MIB


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """A 64 MiB checkpoint of four tensors (sparse: reads cost nothing)."""
    path = tmp_path_factory.mktemp("big") / "big.safetensors"
    n = BIG // 4
    stfile.write(path, {f"w{i}": ("F32", (n // 4,), b"") for i in range(4)})
    size = os.path.getsize(path)
    with open(path, "r+b") as f:  # header claims 4 x 16 MiB: extend sparsely
        hdr_end = size
        f.truncate(hdr_end)
    import json
    import struct
    header = {f"w{i}": {"dtype": "F32", "shape": [n // 4],
                        "data_offsets": [i * n, (i + 1) * n]} for i in range(4)}
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + BIG)
    return path


# Mapped sizes say nothing under a sanitizer: ThreadSanitizer splits and
# maps its shadow regions as the program maps memory, and AddressSanitizer
# (preloaded into the interpreter: every malloc of Python and numpy goes
# through it) keeps freed blocks mapped in its quarantine, large ones
# included. There only handles and descriptors are checked (make tsan,
# make asan); the plain build (make test) checks all three.
SIZES = os.environ.get("RL_SAN") not in ("tsan", "asan")


def _mapped():
    """Bytes of large private anonymous read-write mappings, where staging
    lives: the process's total size also moves with thread stacks that
    glibc caches (up to 40 MiB) and malloc arenas it reserves."""
    if not SIZES:
        return 0
    total = 0
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if fields[1] == "rw-p" and len(fields) == 5 and hi - lo >= BIG // 2:
                total += hi - lo
    return total


def _fds():
    return len(os.listdir("/proc/self/fd"))


class _State:
    """The process's library handles, mapped size and descriptors."""

    def __init__(self):
        gc.collect()
        self.handles, self.mapped, self.fds = (_handles.live_handles(),
                                               _mapped(), _fds())

    def assert_freed(self):
        assert _handles.live_handles() == self.handles
        assert _fds() == self.fds
        assert not SIZES or _mapped() - self.mapped < BIG // 2, \
            f"{(_mapped() - self.mapped) / MIB:.0f} MiB still mapped"


@pytest.fixture
def no_gc():
    """Reference counting alone must free everything."""
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_results_hold_the_staging_until_the_last_one_goes(big, no_gc):
    state = _State()
    got = rnp.load_file(big)
    assert not SIZES or _mapped() - state.mapped >= BIG  # the control
    w1 = got["w1"]
    del got
    assert not SIZES or _mapped() - state.mapped >= BIG  # w1 keeps it all
    assert w1.sum() == 0
    del w1
    state.assert_freed()


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_exception_in_the_progress_callback_cancels_and_frees(big, no_gc, exc):
    state = _State()
    calls = []

    def progress(done, total):
        calls.append((done, total))
        raise exc("consumer stops")

    with pytest.raises(exc, match="consumer stops") as e:
        ringload.load(big, progress=progress)
    assert len(calls) == 1 and calls[0][1] >= BIG
    assert e.value.__traceback__ is not None  # the exception is still held
    state.assert_freed()


def test_progress_reports_every_byte_in_order(big):
    calls = []
    ringload.load(big, progress=lambda d, t: calls.append((d, t)))
    assert len(calls) > 8
    assert all(a[0] <= b[0] for a, b in zip(calls, calls[1:]))
    assert all(t == calls[0][1] and d <= t for d, t in calls)


@pytest.mark.parametrize("framework", ["np", "pt"])
def test_exception_while_converting_shards_frees_the_staging(big, no_gc, framework,
                                                             monkeypatch, torch):
    fw = ringload._core.framework(framework)
    seen = []

    def failing_too(convert):
        # torch makes most shards with convert_at (views of the area)
        def failing(*args):
            seen.append(convert(*args))  # holds one result
            if len(seen) == 2:
                raise ValueError("consumer fails on the second shard")
            return seen[-1]
        return failing

    for name in ("convert", "convert_at"):
        if hasattr(fw, name):
            monkeypatch.setattr(fw, name, failing_too(getattr(fw, name)))
    state = _State()
    with pytest.raises(ValueError, match="second shard"):
        ringload.load(big, framework=framework)
    # the exception is gone (its traceback held the consumer's frame and
    # so a view of the staging, as Python keeps any frame's locals)
    seen.clear()  # and the consumer drops what it kept
    state.assert_freed()


def test_exception_while_delivering_to_a_device_frees_the_staging(big, no_gc, torch,
                                                                  monkeypatch):
    import ringload.torch as rt

    def failing(t, device):
        raise RuntimeError(f"copy to {device} failed")

    monkeypatch.setattr(rt, "_to_device", failing)
    monkeypatch.setattr(rt.FRAMEWORK, "device", lambda d: d)  # any device
    state = _State()
    with pytest.raises(RuntimeError, match="copy to fake:0 failed"):
        ringload.load(big, framework="pt", device_map={0: "fake:0"})
    state.assert_freed()


def test_dtype_error_after_loading_frees_the_staging(tmp_path, no_gc, torch):
    # ringload.load checks dtypes as it converts (targets' dtypes are known
    # only from the plan): an F6 shard (no torch has F6) fails after the read.
    path = tmp_path / "f6.safetensors"
    stfile.write(path, {"a": ("F32", (4 * MIB,), bytes(16 * MIB)),
                        "b": ("F6_E2M3", (16 * MIB,), bytes(12 * MIB))})
    state = _State()
    with pytest.raises(ringload.DtypeError, match="tensor 'b': dtype F6_E2M3") as e:
        ringload.load(path, framework="pt")
    # freed while the exception (and its traceback) is still held: ringload
    # keeps nothing in the frames it leaves
    assert e.value.__traceback__ is not None
    state.assert_freed()


def test_failed_reads_free_everything(tmp_path, no_gc):
    path = tmp_path / "t.safetensors"
    stfile.write(path, {"w": ("F32", (MIB,), bytes(4 * MIB))})
    state = _State()
    os.truncate(path, os.path.getsize(path) - 1)  # after the header check
    with pytest.raises(ringload.HeaderError):
        rnp.load_file(path)
    state.assert_freed()


def test_safe_open_results_own_their_memory(big, no_gc):
    state = _State()
    with ringload.safe_open(big, "np") as f:
        w = f.get_tensor("w2")
        s = f.get_slice("w3")[5:10]
    assert _handles.live_handles() == state.handles  # nothing of the library
    assert w.shape == (BIG // 16,) and s.shape == (5,)
    del w, s
    state.assert_freed()


def test_every_backend_frees_everything(big, no_gc):
    state = _State()
    for backend in ("io_uring", "libaio", "pread"):
        got = ringload.load(big, backend=backend)
        assert got[0]["w3"].shape == (BIG // 16,)
        del got
    state.assert_freed()


def test_load_file_results_are_independent_writes_stay_in_their_tensor(tmp_path, torch):
    # Zero-copy views of one staging area: safetensors hands out independent
    # tensors, so a write to one must change neither another result nor a
    # later load's.
    import ringload.torch as rt
    path = tmp_path / "t.safetensors"
    stfile.write(path, {"vec": ("F32", (13,), np.arange(13, dtype="<f4").tobytes()),
                        "mat": ("I16", (3, 5), np.arange(15, dtype="<i2").tobytes())})
    for load in (rnp.load_file, rt.load_file):
        first, second = load(path), load(path)
        spans = sorted((a.ctypes.data if isinstance(a, np.ndarray) else a.data_ptr(),
                        a.nbytes if isinstance(a, np.ndarray) else
                        a.numel() * a.element_size()) for a in first.values())
        assert all(p + n <= q for (p, n), (q, _) in zip(spans, spans[1:])), spans
        first["vec"][:] = 0
        first["mat"][:] = -1
        assert first["vec"].tolist() == [0] * 13
        assert second["vec"].tolist() == list(range(13))
        assert second["mat"].tolist() == np.arange(15).reshape(3, 5).tolist()
        assert load(path)["mat"].tolist() == second["mat"].tolist()
