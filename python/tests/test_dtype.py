"""dtype= on load (RL_PLAN_DTYPE): every convertible source to F32, F16 and
BF16 compared bit for bit with torch's own .to() on the CPU, over every
bit pattern of the 8- and 16-bit sources and seeded random F32 bits with
the edge cases: ringload.torch.load_file and load(bytes), ringload.numpy
(numpy and ml_dtypes dtypes), ringload.load whole, streaming and sharded
by columns (strided runs), on every backend; the CLI's --dtype with
--verify and --out; what is refused."""
import json
import os
import subprocess

import numpy as np
import pytest

from conftest import fake_device_areas

import ringload
import ringload.numpy as rnp

pytestmark = pytest.mark.venv

torch = pytest.importorskip("torch", reason="needs torch (make pydeps)")
stt = pytest.importorskip("safetensors.torch", reason="needs safetensors (make pydeps)")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="needs ml_dtypes (make pydeps)")
import ringload.torch as rpt  # noqa: E402

SEED = 20261128
DESTS = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}
BACKENDS = ("io_uring", "libaio", "pread")
F32_EDGES = [0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x33000000,
             0x33000001, 0x33400000, 0x387fe000, 0x387fffff, 0x38800000, 0x38801000,
             0x477fefff, 0x477ff000, 0x477ff001, 0x7f7fffff, 0x7f7f8000, 0x3f808000,
             0x3f818000, 0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0xffc00001,
             0x7fa00000, 0xff812345, 0x7fffffff, 0xffffffff]


def _bits(t):
    """t's raw bits, as an integer tensor of its width."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def _same(got, want, what):
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    g, w = _bits(got.contiguous()), _bits(want.contiguous())
    bad = (g != w).nonzero()
    assert not len(bad), (f"{what}: {len(bad)} elements differ, first at "
                          f"{tuple(bad[0].tolist())}: {hex(int(g[tuple(bad[0])]))} "
                          f"!= torch {hex(int(w[tuple(bad[0])]))}")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """(path, tensors): every F16 and BF16 pattern (256 x 256), every F8
    pattern (16 x 16), seeded random F32 bits with the edges (520 x 300,
    written so), I32 and bool that stay as stored."""
    print(f"seed {SEED}")
    g = torch.Generator().manual_seed(SEED)
    every16 = torch.arange(65536, dtype=torch.int32).to(torch.int16).reshape(256, 256)
    every8 = torch.arange(256, dtype=torch.int32).to(torch.uint8).reshape(16, 16)
    f32 = torch.randint(-2**31, 2**31 - 1, (520, 300), dtype=torch.int32, generator=g)
    f32.view(-1)[:len(F32_EDGES)] = torch.tensor(
        [e - (1 << 32) if e >= 1 << 31 else e for e in F32_EDGES], dtype=torch.int32)
    t = {"f16": every16.view(torch.float16), "bf16": every16.clone().view(torch.bfloat16),
         "e4m3": every8.view(torch.float8_e4m3fn),
         "e5m2": every8.clone().view(torch.float8_e5m2),
         "f32": f32.view(torch.float32),
         "i32": torch.arange(-50, 50, dtype=torch.int32).reshape(10, 10),
         "flags": torch.arange(12).reshape(3, 4) % 3 == 0}
    path = tmp_path_factory.mktemp("dtype") / "all.safetensors"
    stt.save_file(t, str(path))
    return str(path), t


def _want(t, to):
    return t.to(to) if t.is_floating_point() else t


@pytest.mark.parametrize("backend", ("auto", "pread"))
@pytest.mark.parametrize("dest", sorted(DESTS))
def test_torch_load_file(src, dest, backend):
    path, tensors = src
    for dt in (DESTS[dest], dest):
        got = rpt.load_file(path, dtype=dt, backend=backend)
        assert sorted(got) == sorted(tensors)
        for name, t in tensors.items():
            _same(got[name], _want(t, DESTS[dest]), f"{name} to {dest}")


@pytest.mark.parametrize("dest", sorted(DESTS))
def test_torch_load_bytes(src, dest):
    path, tensors = src
    with open(path, "rb") as f:
        got = rpt.load(f.read(), dtype=DESTS[dest])
    for name, t in tensors.items():
        _same(got[name], _want(t, DESTS[dest]), f"load(bytes): {name} to {dest}")


@pytest.mark.parametrize("dt", (np.float32, np.float16, ml_dtypes.bfloat16, "bfloat16",
                                np.dtype("float16")))
def test_numpy_load_file(src, dt):
    path, tensors = src
    dest = {"float32": "F32", "float16": "F16", "bfloat16": "BF16"}[np.dtype(dt).name]
    got = rnp.load_file(path, dtype=dt)
    for name, t in tensors.items():
        want = _want(t, DESTS[dest])
        g = got[name]
        assert g.dtype.itemsize == want.element_size() and g.shape == tuple(want.shape)
        assert g.tobytes() == _bits(want).numpy().tobytes(), f"numpy: {name} to {dest}"


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dest", sorted(DESTS))
def test_load_whole_streaming_sharded(src, dest, backend):
    """ringload.load: whole, streamed through 64 KiB windows, and every
    2-D tensor split by columns over two devices (strided runs), on
    each backend with 1 and 3 workers."""
    path, tensors = src
    spec = {"mesh": {"shape": [2], "axes": ["m"]},
            "rules": [{"match": "f16|bf16|e4m3|e5m2|f32|i32|flags", "spec": [None, "m"]}]}
    for workers in (1, 3):
        for sharding, opts in ((None, {}), (None, {"staging_budget": 64 << 10}),
                               (spec, {}), (spec, {"staging_budget": 64 << 10})):
            out = ringload.load(path, sharding, framework="pt", backend=backend,
                                options=dict(opts, workers=workers), dtype=dest)
            for dev, ts in out.items():
                for name, t in tensors.items():
                    want = _want(t, DESTS[dest])
                    if sharding:
                        half = t.shape[1] // 2
                        want = want[:, dev * half:(dev + 1) * half]
                    _same(ts[name], want, f"{backend}/{workers}w/{name} to {dest} "
                          f"sharded={bool(sharding)} {opts}")


@pytest.mark.parametrize("dest", sorted(DESTS))
def test_cli_dtype_verify_out(src, dest, tmp_path):
    path, tensors = src
    out = tmp_path / "out"
    exe = os.path.join(os.environ.get("RL_BUILD", "build"), "ringload")
    r = subprocess.run([exe, "load", path, "--dtype", dest, "--verify", "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert f"{len(tensors)} shards match the file, 0 differ" in r.stdout
    man = json.loads((out / "0" / "manifest.json").read_text())
    for s in man["shards"]:
        t = tensors[s["name"]]
        want = _want(t, DESTS[dest])
        assert s["dtype"] == ("BOOL" if t.dtype == torch.bool else "I32"
                              if t.dtype == torch.int32 else dest)
        assert s["nbytes"] == want.numel() * want.element_size()
        got = (out / "0" / s["bin"]).read_bytes()
        assert got == _bits(want).numpy().tobytes(), s["name"]


def test_cli_streaming_out(src, tmp_path):
    path, tensors = src
    out = tmp_path / "out"
    exe = os.path.join(os.environ.get("RL_BUILD", "build"), "ringload")
    r = subprocess.run([exe, "load", path, "--dtype", "BF16", "--staging-budget", "64K",
                        "--out", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for s in json.loads((out / "0" / "manifest.json").read_text())["shards"]:
        want = _want(tensors[s["name"]], torch.bfloat16)
        assert (out / "0" / s["bin"]).read_bytes() == _bits(want).numpy().tobytes()


def test_refused(src, tmp_path):
    path, _ = src
    for bad in (torch.int32, np.float64, "F8_E4M3", "float64", 3):
        with pytest.raises(ringload.ArgumentError, match="F32, F16 or BF16"):
            rpt.load_file(path, dtype=bad)
    f64 = tmp_path / "f64.safetensors"
    stt.save_file({"w": torch.ones(3, dtype=torch.float64)}, str(f64))
    with pytest.raises(ringload.SpecError, match='"w": F64 to F16') as e:
        rpt.load_file(str(f64), dtype=torch.float16)
    assert e.value.code_name == "RL_E_DTYPE"
    assert rpt.load_file(str(f64))["w"].dtype == torch.float64


def test_cuda_sink_gets_converted_bytes(src, monkeypatch):
    """The CUDA path (StreamingLoad.run_cuda, the library's CUDA sink) on
    the fake driver of tests/fakecuda, whose device memory is host memory:
    each shard's device bytes are torch's .to(torch.bfloat16)."""
    import ctypes

    from conftest import build_dir
    from ringload import _core, _handles, _stream
    fake_path = os.path.join(build_dir(), "tests", "fakecuda", "libcuda.so.1")
    if not os.path.exists(fake_path):
        pytest.skip(f"needs {fake_path} (make builds it with the tests)")
    monkeypatch.setenv("RL_LIBCUDA", fake_path)
    monkeypatch.setenv("FAKECUDA_DEVICES", "1")
    fake = ctypes.CDLL(fake_path)
    fake.fakecuda_reset()
    fake.fakecuda_host.restype = ctypes.c_void_p
    fake.fakecuda_host.argtypes = [ctypes.c_ulonglong]
    ctx = ctypes.c_void_p()
    assert fake.cuInit(0) == 0
    assert fake.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), 0) == 0
    assert fake.cuCtxPushCurrent_v2(ctx) == 0
    path, tensors = src
    spec = _handles.Spec()
    spec.set_dtype("BF16")
    job = _core.Job(_handles.Checkpoint(path), spec, 0, "auto", None, None)
    ptrs = []
    try:
        with _stream.StreamingLoad(job, budget=64 << 10) as load:
            fake_device_areas(fake, load.shards, ptrs)
            load.run_cuda([0], [(p, s.nbytes) for p, s in zip(ptrs, load.shards)])
            for p, s in zip(ptrs, load.shards):
                want = _bits(_want(tensors[s.name], torch.bfloat16)).numpy().tobytes()
                assert s.dtype == ("BF16" if tensors[s.name].is_floating_point() else s.dtype)
                assert ctypes.string_at(fake.fakecuda_host(p), s.nbytes) == want, s.name
    finally:
        for p in ptrs:
            fake.cuMemFree_v2(ctypes.c_ulonglong(p))
        job.ckpt.close()
        spec.close()
        fake.cuCtxPopCurrent_v2(ctypes.byref(ctx))
        fake.cuDevicePrimaryCtxRelease_v2(0)
