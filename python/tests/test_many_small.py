"""Checkpoints of many small tensors (issue 33: 20,000 x 64 KiB): the torch
load_file builds each tensor as a view of its staging area, not one tensor
per shard from numpy (torch.from_numpy, view, reshape per shard were most
of the Python side of such a load), and every tensor is still its bytes,
its dtype and its shape, aligned or not (a misaligned one is copied, as
before)."""
import numpy as np
import pytest

import stfile

torch = pytest.importorskip("torch", reason="needs torch (make pydeps)")
import ringload.torch as rpt  # noqa: E402

SEED = 3301
N = 1500
KINDS = [("F32", torch.float32, 4), ("F16", torch.float16, 2),
         ("I64", torch.int64, 8), ("BF16", torch.bfloat16, 2)]


def _tensors(rng, misalign):
    """{name: (dtype, shape, bytes)}; misalign: a 1-byte U8 tensor first, so
    that every later one sits at an odd offset."""
    out = {}
    if misalign:
        out["a.odd"] = ("U8", (1,), bytes([7]))
    for i in range(N):
        name, _, size = KINDS[i % len(KINDS)]
        shape = (1 + i % 3, 8 + i % 5) if i % 2 else (4 + i % 7,)
        n = int(np.prod(shape)) * size
        data = rng.integers(0, 256, n, np.uint8).tobytes()
        out[f"t{i:05d}"] = (name, shape, data)
    out["z.empty"] = ("F32", (0, 3), b"")
    return out


def _counting(monkeypatch):
    calls = [0]
    real = torch.from_numpy

    def counted(a):
        calls[0] += 1
        return real(a)
    monkeypatch.setattr(torch, "from_numpy", counted)
    return calls


@pytest.mark.parametrize("read_mode", ["direct", "buffered", None])
@pytest.mark.parametrize("misalign", [False, True])
def test_many_small_tensors_are_views_of_staging(tmp_path, monkeypatch,
                                                 read_mode, misalign):
    print(f"seed {SEED}")
    rng = np.random.default_rng(SEED)
    tensors = _tensors(rng, misalign)
    path = tmp_path / "many.safetensors"
    stfile.write(path, tensors)
    calls = _counting(monkeypatch)
    kw = {} if read_mode is None else {"read_mode": read_mode}
    out = rpt.load_file(path, **kw)
    assert list(out) == sorted(tensors)
    want = {k: dt for k, dt, _ in KINDS}
    want["U8"] = torch.uint8
    for name, (dtype, shape, data) in tensors.items():
        t = out[name]
        assert t.dtype == want[dtype] and tuple(t.shape) == shape, name
        assert t.contiguous().view(torch.uint8).numpy().tobytes() == data, name
    # one torch view of the staging area (before: one per tensor); a
    # tensor misaligned where it lies (a mapped file) is copied through
    # numpy, as before
    if misalign:
        assert calls[0] <= len(tensors), calls[0]
    else:
        assert calls[0] == 1, calls[0]
    del out
