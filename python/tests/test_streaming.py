"""Streaming loads from Python on the CPU (the loop the CUDA path runs,
without the GPU's copy stream): ringload.load with the loader option
staging_budget streams into tensors torch owns, equal to the whole-staging
load on every backend and budgets from 64 KiB; StreamingLoad's pieces
assembled in numpy with releases from another thread (the GIL is released
while next_piece waits in C); an exception in the consumer cancels the
load and frees everything; a consumer that never releases gets the
library's RL_E_RELEASE_TIMEOUT as LoadError."""
import os
import queue
import threading

import numpy as np
import pytest

import oracle
from conftest import BACKENDS

import ringload
from ringload import _core, _handles, _lib, _stream
from test_reference import MOE_SPEC


def _ref(testdata, rel):
    return os.path.join(testdata, "reference", rel)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("budget", [64 << 10, 1 << 20])
def test_streamed_torch_load_equals_whole_staging(testdata, torch, monkeypatch,
                                                  backend, budget):
    path = _ref(testdata, "tiny-moe")
    whole = ringload.load(path, sharding=MOE_SPEC, process=0, framework="pt",
                          backend=backend)
    pieces = []
    real = _stream.StreamingLoad.release
    monkeypatch.setattr(_stream.StreamingLoad, "release",
                        lambda self, p: (pieces.append(p.length), real(self, p)))
    streamed = ringload.load(path, sharding=MOE_SPEC, process=0, framework="pt",
                             backend=backend, options={"staging_budget": budget})
    assert sum(pieces) > 0  # it streamed: every piece came and was released
    assert whole.keys() == streamed.keys()
    for dev, tensors in whole.items():
        assert tensors.keys() == streamed[dev].keys()
        for name, t in tensors.items():
            s = streamed[dev][name]
            assert s.dtype == t.dtype and s.shape == t.shape, name
            assert oracle.as_bytes(s) == oracle.as_bytes(t), name


def test_streamed_dtypes_and_shapes(testdata, torch):
    for rel in ("dtypes.safetensors", "shapes.safetensors"):
        path = _ref(testdata, rel)
        try:
            whole = ringload.load(path, framework="pt")
        except ringload.DtypeError as e:  # torch 1.13 lacks some dtypes
            with pytest.raises(ringload.DtypeError, match=str(e).split(":")[0]):
                ringload.load(path, framework="pt",
                              options={"staging_budget": 64 << 10})
            continue
        streamed = ringload.load(path, framework="pt",
                                 options={"staging_budget": 64 << 10})
        for name, t in whole[0].items():
            assert oracle.as_bytes(streamed[0][name]) == oracle.as_bytes(t), name


def _job(path, spec=None, options=None):
    ckpt = _handles.Checkpoint(path)
    return _core.Job(ckpt, _handles.Spec(spec), 0, "auto", options, None)


def _close(job):
    job.ckpt.close()
    job.spec.close()


def test_pieces_released_from_another_thread(testdata):
    path = _ref(testdata, "tiny-moe")
    whole = ringload.load(path, sharding=MOE_SPEC, process=0, framework="np")
    job = _job(path, MOE_SPEC)
    done = queue.Queue()
    released = []

    def releaser(load):
        while (piece := done.get()) is not None:
            load.release(piece)
            released.append(piece.shard)

    try:
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            out = [np.zeros(s.nbytes, np.uint8) for s in load.shards]
            t = threading.Thread(target=releaser, args=(load,))
            t.start()
            try:
                n = 0
                for piece in load.pieces():
                    out[piece.shard][piece.offset:piece.offset + piece.length] = \
                        _stream.piece_array(piece)
                    done.put(piece)
                    n += 1
            finally:
                done.put(None)
                t.join()
            assert len(released) == n > len(load.shards) // 2
            for s in load.shards:
                want = whole[s.device_id][s.name]
                assert out[s.index].tobytes() == want.tobytes(), s.name
    finally:
        _close(job)


def test_exception_in_the_consumer_cancels_and_frees(testdata, torch):
    path = _ref(testdata, "tiny-moe")
    job = _job(path, MOE_SPEC)
    try:
        with pytest.raises(RuntimeError, match="consumer"):
            with _stream.StreamingLoad(job, budget=64 << 10) as load:
                for i, piece in enumerate(load.pieces()):
                    load.release(piece)
                    if i == 2:
                        raise RuntimeError("the consumer failed")
    finally:
        _close(job)
    assert load.loader is None and load.plan is None
    # and the same checkpoint streams again at once
    got = ringload.load(path, sharding=MOE_SPEC, framework="pt",
                        options={"staging_budget": 64 << 10})
    assert got


def test_never_releasing_is_a_load_error_after_the_timeout(testdata):
    path = _ref(testdata, "tiny-moe")
    job = _job(path, MOE_SPEC, {"release_timeout_ms": 200})
    try:
        with pytest.raises(ringload.LoadError) as e:
            with _stream.StreamingLoad(job, budget=64 << 10) as load:
                for _ in load.pieces():
                    pass  # never released
        assert e.value.code == _lib.RL_E_RELEASE_TIMEOUT
        assert "rl_loader_release" in str(e.value)
    finally:
        _close(job)
