"""The C path ringload.torch takes to CUDA devices (StreamingLoad.run_cuda:
the library's CUDA sink fills tensors it is given by device address),
run against the fake driver of tests/fakecuda (RL_LIBCUDA): device memory
is host memory, so the bytes each shard got are compared with a CPU load.
The torch side (torch.empty on a GPU) needs a real GPU: test_gpu.py."""
import ctypes
import os

import pytest

import oracle
import ringload
from conftest import build_dir, fake_device_areas
from ringload import _core, _handles, _stream
from test_reference import MOE_SPEC

FAKE = os.path.join(build_dir(), "tests", "fakecuda", "libcuda.so.1")


@pytest.fixture
def fake(monkeypatch):
    """The fake driver, loaded where the library will find it, with two
    devices and a current context on device 0 (for its cuMemAlloc)."""
    if not os.path.exists(FAKE):
        pytest.skip(f"needs {FAKE} (make builds it with the tests)")
    monkeypatch.setenv("RL_LIBCUDA", FAKE)
    monkeypatch.setenv("FAKECUDA_DEVICES", "2")
    monkeypatch.setenv("FAKECUDA_DELAY_US", "50")
    lib = ctypes.CDLL(FAKE)
    lib.fakecuda_reset()
    lib.fakecuda_host.restype = ctypes.c_void_p
    lib.fakecuda_host.argtypes = [ctypes.c_ulonglong]
    assert lib.cuInit(0) == 0
    ctx = ctypes.c_void_p()
    assert lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert lib.cuCtxPushCurrent_v2(ctx) == 0
    yield lib
    lib.cuCtxPopCurrent_v2(ctypes.byref(ctx))
    lib.cuDevicePrimaryCtxRelease_v2(0)


def _job(path, spec):
    return _core.Job(_handles.Checkpoint(path), _handles.Spec(spec), 0, "auto",
                     None, None)


def test_run_cuda_fills_the_given_device_memory(testdata, fake):
    path = os.path.join(testdata, "reference", "tiny-moe")
    whole = ringload.load(path, sharding=MOE_SPEC, process=0, framework="np")
    job = _job(path, MOE_SPEC)
    ptrs = []
    try:
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            fake_device_areas(fake, load.shards, ptrs)
            ids = [i for i, _ in load.devices]
            load.run_cuda([0] * (max(ids) + 1),  # every spec device on GPU 0
                          [(p, s.nbytes) for p, s in zip(ptrs, load.shards)])
            for s, p in zip(load.shards, ptrs):
                got = ctypes.string_at(fake.fakecuda_host(p), s.nbytes)
                assert got == oracle.as_bytes(whole[s.device_id][s.name]), s.name
    finally:
        for p in ptrs:
            fake.cuMemFree_v2(ctypes.c_ulonglong(p))
        job.ckpt.close()
        job.spec.close()


def test_run_cuda_errors_name_the_cause(testdata, fake, monkeypatch):
    path = os.path.join(testdata, "reference", "tiny-moe")
    job = _job(path, MOE_SPEC)
    try:
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            with pytest.raises(ringload.ArgumentError, match="device_map"):
                load.run_cuda(["0"], [])
            with pytest.raises(ringload.LoadError, match="no CUDA device 7") as e:
                load.run_cuda([7] * 8, [])
            assert e.value.code_name == "RL_E_CUDA_DEVICE"
    finally:
        job.ckpt.close()
        job.spec.close()


def _order_ok(log, cs):
    """The library's stream waits for an event recorded on cs before its
    first copy, and cs waits for one recorded after its last copy."""
    ours = ev = ev2 = None
    copied = after = False
    for line in log.splitlines():
        op, *args = line.split()
        if op == "record" and args[1] == cs and ours is None:
            ev = args[0]
        elif op == "wait" and args[0] != cs and args[1] == ev and ours is None:
            ours = args[0]
        elif op == "copy" and args[0] != cs:
            assert ours == args[0], f"a copy before waiting for {cs}: {log}"
            copied, after = True, False
        elif op == "record" and copied and args[1] == ours:
            ev2 = args[0]
        elif op == "wait" and args[0] == cs and args[1] == ev2:
            after = True
    return copied and after


@pytest.mark.parametrize("legacy", [False, True])
def test_run_cuda_orders_with_the_callers_stream(testdata, fake, legacy):
    """torch's path passes torch.cuda.current_stream(dev).cuda_stream:
    the copies wait for it and it waits for them (the fake's call log)."""
    path = os.path.join(testdata, "reference", "tiny-moe")
    job = _job(path, MOE_SPEC)
    stream = ctypes.c_void_p()
    if not legacy:
        assert fake.cuStreamCreate(ctypes.byref(stream), 0) == 0
    ptrs = []
    try:
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            fake_device_areas(fake, load.shards, ptrs)
            ids = [i for i, _ in load.devices]
            fake.fakecuda_reset()
            load.run_cuda([0] * (max(ids) + 1),
                          [(p, s.nbytes) for p, s in zip(ptrs, load.shards)],
                          {0: stream.value or 0})
        buf = ctypes.create_string_buffer(1 << 16)
        fake.fakecuda_log(buf, len(buf))
        cs = "(nil)" if legacy else hex(stream.value)
        assert _order_ok(buf.value.decode(), cs), buf.value.decode()
    finally:
        for p in ptrs:
            fake.cuMemFree_v2(ctypes.c_ulonglong(p))
        if stream.value:
            fake.cuStreamDestroy_v2(stream)
        job.ckpt.close()
        job.spec.close()


BIG_IDS = dict(MOE_SPEC, mesh=dict(MOE_SPEC["mesh"],
                                   devices=[4294967295, 2147483648, 5000, 3],
                                   process_of_device=[0, 0, 0, 0]))


def test_run_cuda_large_device_ids(testdata, fake):
    """Spec ids up to 2^32-1: under the identity map one names the device
    (RL_E_CUDA_DEVICE; it was EPERM: the id came back as error -1); with
    one_gpu every device lands on that GPU, whatever its id."""
    path = os.path.join(testdata, "reference", "tiny-moe")
    whole = ringload.load(path, sharding=BIG_IDS, process=0, framework="np")
    job = _job(path, BIG_IDS)
    ptrs = []
    try:
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            with pytest.raises(ringload.LoadError,
                               match="no CUDA device 4294967295") as e:
                load.run_cuda(None, [])
            assert e.value.code_name == "RL_E_CUDA_DEVICE"
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            fake_device_areas(fake, load.shards, ptrs)
            load.run_cuda(None, [(p, s.nbytes) for p, s in zip(ptrs, load.shards)],
                          one_gpu=0)
            for s, p in zip(load.shards, ptrs):
                got = ctypes.string_at(fake.fakecuda_host(p), s.nbytes)
                assert got == oracle.as_bytes(whole[s.device_id][s.name]), s.name
    finally:
        for p in ptrs:
            fake.cuMemFree_v2(ctypes.c_ulonglong(p))
        job.ckpt.close()
        job.spec.close()
