"""Load statistics from Python: stats={} is filled after a successful load
(ringload.load, both load_file, streaming) with rl_load_stats and one
dict per file read, on every backend and with
one and several workers; a failed load leaves it as it was."""
import os
import re

import numpy as np
import pytest

import stfile

import ringload
import ringload.numpy as rnp

from conftest import BACKENDS  # noqa: E402


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    """Two tensors, 1 MiB in all: (path, their bytes)."""
    path = tmp_path_factory.mktemp("stats") / "m.safetensors"
    a = np.arange(1 << 17, dtype="<f4").tobytes()
    b = np.arange(1 << 17, dtype="<i4").tobytes()
    stfile.write(path, {"a": ("F32", (1 << 17,), a), "b": ("I32", (1 << 17,), b)})
    return str(path), len(a) + len(b)


def _check(stats, path, needed, backend=None, workers=None):
    assert stats["bytes_needed"] == needed
    assert stats["bytes_read"] >= needed and stats["requests"] >= 1
    assert stats["total_seconds"] > 0 and stats["read_seconds"] > 0
    assert stats["backend"] in BACKENDS
    if backend is not None:
        assert stats["backend"] == backend
    if workers is not None:
        assert stats["workers"] == workers
    assert isinstance(stats["fallbacks"], str) and isinstance(stats["shape"], str)
    # every fallback is a flag too, named; its reason is in the text
    assert bool(stats["fallback_flags"]) == bool(stats["fallbacks"]), stats["fallbacks"]
    assert sum(ringload._lib.FALLBACKS[n] for n in stats["fallback_names"]) == \
        stats["fallback_flags"]
    assert "size" not in stats
    [f] = stats["files"]
    assert f["path"] == path and f["file"] == 0
    assert f["bytes_needed"] >= needed and f["mode"] in ("direct", "cached", "buffered")
    assert f["sha256_state"] == "none"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 2])
def test_load_fills_stats(ckpt, backend, workers):
    path, needed = ckpt
    stats = {"mine": 1}
    got = ringload.load(path, backend=backend, options={"workers": workers},
                        stats=stats)
    assert got[0]["a"].nbytes + got[0]["b"].nbytes == needed
    assert stats.pop("mine") == 1  # filled, not replaced
    _check(stats, path, needed, backend, workers)


def test_load_file_and_streaming_fill_stats(ckpt, torch):
    import ringload.torch as rt
    path, needed = ckpt
    for load in (lambda st: rnp.load_file(path, stats=st),
                 lambda st: rt.load_file(path, stats=st),
                 lambda st: ringload.load(path, framework="pt", stats=st,
                                          options={"staging_budget": 1 << 20})):
        stats = {}
        load(stats)
        _check(stats, path, needed)


@pytest.mark.parametrize("backend", BACKENDS)
def test_streaming_shape_is_in_fields_not_only_text(ckpt, backend, torch):
    """How a streaming load read its windows comes as fields (count, size,
    registration, ranges, engine set-ups) that agree with the shape text
    kept for people; a whole load has no stream fields and one engine run."""
    path, needed = ckpt
    stats = {}
    ringload.load(path, framework="pt", backend=backend, options={"staging_budget": 1 << 20},
                  stats=stats)
    _check(stats, path, needed, backend)
    m = re.search(r"streaming: (\d+) windows of (\d+) bytes, (not )?registered.*; "
                  r"(\d+) ranges, (\d+) engine set-up", stats["shape"])
    fields = (stats["stream_windows"], stats["stream_window_bytes"],
              stats["stream_registered"], stats["stream_ranges"], stats["engine_runs"])
    if m:  # the text is cut at 384 bytes: long device descriptions push it out
        assert fields == (int(m[1]), int(m[2]), int(not m[3]), int(m[4]), int(m[5]))
    assert stats["stream_windows"] >= 1 and stats["engine_runs"] >= 1
    assert stats["stream_windows"] * stats["stream_window_bytes"] <= 1 << 20
    assert stats["stream_ranges"] * stats["stream_window_bytes"] >= needed
    assert stats["stream_registered"] in (0, 1)
    if backend != "io_uring":
        assert stats["stream_registered"] == 0
    assert not any(k.startswith("reserved") for k in stats)
    whole = {}
    ringload.load(path, backend=backend, stats=whole)
    assert whole["stream_windows"] == whole["stream_ranges"] == 0
    assert whole["engine_runs"] == 1


def test_sha256_is_in_the_file_stats(ckpt):
    path, needed = ckpt
    import hashlib
    with open(path, "rb") as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    stats = {}
    rnp.load_file(path, sha256=digest, stats=stats)
    assert stats["files"][0]["sha256_state"] == "matched"
    assert stats["files"][0]["sha256"] == digest
    assert stats["files_hashed"] == 1 and stats["bytes_hashed"] == os.path.getsize(path)


def test_stats_must_be_a_dict_and_a_failed_load_leaves_it(ckpt, tmp_path):
    path, _ = ckpt
    for bad in (True, [], "stats"):
        with pytest.raises(ringload.ArgumentTypeError, match="^stats: a dict"):
            ringload.load(path, stats=bad)
        with pytest.raises(ringload.ArgumentTypeError, match="^stats: a dict"):
            rnp.load_file(path, stats=bad)
    short = tmp_path / "short.safetensors"
    with open(path, "rb") as f:
        short.write_bytes(f.read()[:-1])
    stats = {}
    with pytest.raises(ringload.HeaderError):
        ringload.load(short, stats=stats)
    assert stats == {}


def _fails_after_the_read(*args):
    raise ringload.DtypeError(ringload._lib.RL_E_INVALID_ARG, "made to fail")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 2])
def test_a_load_failing_after_the_read_leaves_stats(ckpt, monkeypatch, backend, workers):
    path, _ = ckpt
    # load_file converts with the drop-in's framework (safetensors' dtypes);
    # convert_at views the staging, convert the rest
    for fw in (rnp.FRAMEWORK, rnp.FRAMEWORK.drop_in):
        for what in ("convert", "convert_at"):
            monkeypatch.setattr(fw, what, _fails_after_the_read)
    for load in (lambda st: ringload.load(path, backend=backend, stats=st,
                                          options={"workers": workers}),
                 lambda st: rnp.load_file(path, stats=st)):
        stats = {"mine": 1}
        with pytest.raises(ringload.DtypeError, match="made to fail"):
            load(stats)
        assert stats == {"mine": 1}


def test_a_streaming_load_failing_after_the_read_leaves_stats(ckpt, monkeypatch, torch):
    import ringload.torch as rt
    path, _ = ckpt
    monkeypatch.setattr(rt, "_shaped", _fails_after_the_read)
    stats = {}
    with pytest.raises(ringload.DtypeError, match="made to fail"):
        ringload.load(path, framework="pt", stats=stats,
                      options={"staging_budget": 1 << 20})
    assert stats == {}


def test_a_dtype_torch_lacks_leaves_stats(tmp_path, torch):
    # F6 has no torch type in any torch; U16 none before torch 2.3 (Debian
    # 12's python3-torch)
    lacked = {"F6_E2M3": bytes(3)}
    if not hasattr(torch, "uint16"):
        lacked["U16"] = bytes(8)
    for dtype, data in lacked.items():
        path = tmp_path / f"{dtype}.safetensors"
        stfile.write(path, {"w": (dtype, (4,), data)})
        stats = {}
        with pytest.raises(ringload.DtypeError, match=f"tensor 'w': dtype {dtype}"):
            ringload.load(path, framework="pt", stats=stats)
        assert stats == {}, dtype
