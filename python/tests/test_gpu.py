"""CUDA devices (marked gpu; skipped when torch.cuda.is_available() is
false, failed instead under RL_NO_SKIP=1, as perf/gpu_check.sh runs them):
load_file and load stream to cuda:N (pinned windows, copy stream, release
on the copy's event), safe_open copies with .to(); torch.distributed
read-once loads (two gloo ranks, this file as their worker) land on the
GPU through the library's CUDA sink; bytes equal to the written ones and
to the CPU results. The checkpoints are written here (stfile, no
safetensors needed), so that the tests run on a machine with only torch
and a copy of the tree."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import oracle
import stfile

import ringload

pytestmark = pytest.mark.gpu

# Names as in a Mixtral-like checkpoint, so that MOE_SPEC's rules apply.
MOE = {  # name: (dtype, shape, file)
    "model.embed_tokens.weight": ("F32", (16, 8), 1),
    "model.layers.0.self_attn.o_proj.weight": ("BF16", (8, 8), 1),
    "model.layers.0.mlp.experts.0.gate_proj.weight": ("F16", (6, 8), 1),
    "model.layers.0.mlp.experts.0.down_proj.weight": ("F32", (8, 6), 2),
    "model.layers.1.mlp.experts.1.up_proj.weight": ("I32", (5, 3), 2),
    "model.layers.1.self_attn.o_proj.weight": ("F32", (256, 512), 2),
    "model.norm.weight": ("F32", (8,), 2),
}
MOE_SPEC = {
    "mesh": {"shape": [2, 2], "axes": ["data", "model"], "devices": [7, 5, 3, 1],
             "process_of_device": [0, 0, 1, 1]},
    "rules": [
        {"match": r"model\.layers\.[0-9]+\.mlp\.experts\.[0-9]+\.(gate|up)_proj\.weight",
         "spec": ["model", None]},
        {"match": r"model\.layers\.[0-9]+\.mlp\.experts\.[0-9]+\.down_proj\.weight",
         "spec": [None, ["data", "model"]]},
        {"match": r"model\.embed_tokens\.weight", "spec": [["model", "data"]]},
        {"match": r"model\.layers\.[0-9]+\.self_attn\.o_proj\.weight",
         "spec": ["data", "model"]},
    ],
}


@pytest.fixture(autouse=True)
def cuda(torch):
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA: torch.cuda.is_available() is False")


@pytest.fixture(scope="session")
def ckpt(tmp_path_factory):
    """(directory of a two-file checkpoint with its index, a one-file
    checkpoint "shapes", {name: (dtype, shape, bytes)} of both)."""
    rng = np.random.default_rng(31)
    d = tmp_path_factory.mktemp("gpu")
    moe = d / "moe"
    moe.mkdir()
    tensors, files = {}, {1: {}, 2: {}}
    for name, (dtype, shape, k) in MOE.items():
        n = int(np.prod(shape)) * stfile.DTYPES[dtype][0] // 8
        tensors[name] = files[k][name] = (dtype, shape, rng.bytes(n))
    weight_map = {}
    for k, part in files.items():
        fname = f"model-{k:05d}-of-00002.safetensors"
        stfile.write(moe / fname, part, metadata={"format": "pt"})
        weight_map.update({name: fname for name in part})
    (moe / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    shapes = {"cube": ("F32", (4, 6, 8), rng.bytes(4 * 6 * 8 * 4)),
              "row": ("I16", (7,), rng.bytes(14)),
              "empty": ("F32", (0, 3), b"")}
    stfile.write(d / "shapes.safetensors", shapes, metadata={"format": "pt"})
    tensors.update(shapes)
    return str(moe), str(d / "shapes.safetensors"), tensors


@pytest.mark.parametrize("device", ["cuda", "cuda:0", 0])
def test_load_file_to_cuda_equals_the_written_bytes(ckpt, torch, device):
    moe, _, written = ckpt
    cpu = ringload.torch.load_file(moe)
    gpu = ringload.torch.load_file(moe, device=device)
    assert list(gpu) == list(cpu) and sorted(gpu) == sorted(MOE)
    for name, t in gpu.items():
        assert t.device == torch.device("cuda", 0)
        assert t.dtype == cpu[name].dtype and tuple(t.shape) == written[name][1]
        assert oracle.as_bytes(t) == written[name][2], name


def test_safe_open_on_cuda(ckpt, torch):
    _, path, written = ckpt
    with ringload.safe_open(path, "pt", device=torch.device("cuda:0")) as f, \
            ringload.safe_open(path, "pt") as c:
        assert sorted(f.keys()) == ["cube", "empty", "row"]
        for name in f.keys():
            t = f.get_tensor(name)
            assert t.is_cuda and oracle.as_bytes(t) == written[name][2], name
        s = f.get_slice("cube")[1:3, ::2]
        assert s.is_cuda and oracle.as_bytes(s) == oracle.as_bytes(c.get_slice("cube")[1:3, ::2])


def _check_shards(got, written, devices, want_cuda):
    """Every device's shards hold the oracle's boxes of the written bytes."""
    assert sorted(got) == sorted(devices)
    for dev, tensors in got.items():
        assert sorted(tensors) == sorted(MOE)
        for name, t in tensors.items():
            dtype, shape, data = written[name]
            box = oracle.boxes(MOE_SPEC, name, shape)[dev]
            assert t.is_cuda == want_cuda(dev), (dev, name)
            assert tuple(t.shape) == tuple(b - a for a, b in box), (dev, name)
            assert oracle.as_bytes(t) == stfile.box_bytes(dtype, shape, data, box), (dev, name)


def test_sharded_load_to_cuda_and_cpu(ckpt, torch):
    moe, _, written = ckpt
    got = ringload.load(moe, sharding=MOE_SPEC, process=0, framework="pt",
                        device_map={7: "cuda:0", 5: "cpu"})
    _check_shards(got, written, [7, 5], lambda dev: dev == 7)


def test_absent_cuda_device_is_a_device_error(ckpt, torch):
    n = torch.cuda.device_count()
    with pytest.raises(ringload.DeviceError, match=f"{n} CUDA devices"):
        ringload.torch.load_file(ckpt[1], device=n)


def test_streaming_to_cuda_equals_the_written_bytes(ckpt, torch):
    """Pinned windows, copies on a copy stream, each piece released on its
    copy's event; a 64 KiB budget recycles the windows many times (the
    512 KiB tensor alone fills eight), 1 MiB a few."""
    moe, _, written = ckpt
    for process, devices in ((0, [7, 5]), (1, [3, 1])):
        for budget in (64 << 10, 1 << 20):
            got = ringload.load(moe, sharding=MOE_SPEC, process=process, framework="pt",
                                device_map={d: "cuda:0" for d in devices},
                                options={"staging_budget": budget})
            _check_shards(got, written, devices, lambda dev: True)
            torch.cuda.synchronize()


def test_a_small_cuda_load_pins_its_own_size(ckpt, torch):
    """The default budget (up to 1 GiB) bounds the pinned window pool; a
    checkpoint of about 600 KB pins about its own size."""
    moe, _, written = ckpt
    staging = sum(len(data) for _, _, data in (written[n] for n in MOE))
    stats = {}
    got = ringload.load(moe, sharding=MOE_SPEC, process=0, framework="pt",
                        device_map={7: "cuda:0", 5: "cuda:0"}, stats=stats)
    _check_shards(got, written, [7, 5], lambda dev: True)
    pool = stats["stream_windows"] * stats["stream_window_bytes"]
    assert 0 < pool <= staging + (64 << 10), (pool, staging)


def test_results_survive_torch_work_on_the_same_device(ckpt, torch):
    """The tensors handed back are complete for kernels on torch's current
    stream: a reduction right after the load sees every byte."""
    moe, _, written = ckpt
    name = "model.layers.1.self_attn.o_proj.weight"
    want = int(np.frombuffer(written[name][2], "<i4").astype(np.int64).sum())
    for _ in range(3):
        t = ringload.torch.load_file(moe, device="cuda:0")[name]
        assert int(t.view(torch.int32).sum().item()) == want


def _dist_worker(how, rank, init, moe, out):
    """One of two gloo ranks (python test_gpu.py how rank init moe out):
    a read-once load of moe onto cuda:0, "load" (MOE_SPEC, process =
    rank, every device on cuda:0) or "dtensors" (a 1-D CUDA mesh, o_proj
    Shard(0), the rest replicated); writes {"cuda": every tensor on the
    GPU, "sha256": {"device/name": digest}, "stats"} to out."""
    import datetime
    import torch
    import torch.distributed as dist
    import ringload.torch as rt
    dist.init_process_group("gloo", init_method=f"file://{init}", rank=rank,
                            world_size=2,
                            timeout=datetime.timedelta(seconds=60))
    stats = {}
    if how == "load":
        got = rt.load(moe, MOE_SPEC, read_once=True, batch_bytes=4096,
                      device_map={d: "cuda:0" for d in MOE_SPEC["mesh"]["devices"]},
                      stats=stats)
    else:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import Shard
        mesh = init_device_mesh("cuda", (2,))
        got = {rank: {n: t.to_local() for n, t in rt.load_dtensors(
            moe, mesh, {O_PROJ: [Shard(0)]}, batch_bytes=4096,
            stats=stats).items()}}
    torch.cuda.synchronize()
    res = {"cuda": all(t.is_cuda for ts in got.values() for t in ts.values()),
           "sha256": {f"{d}/{n}": oracle.sha256(oracle.as_bytes(t))
                      for d, ts in got.items() for n, t in ts.items()},
           "stats": stats}
    with open(out, "w") as f:
        json.dump(res, f)
    os._exit(0)  # no teardown collectives


O_PROJ = "model.layers.1.self_attn.o_proj.weight"


@pytest.mark.parametrize("how", ["load", "dtensors"])
def test_read_once_group_onto_the_gpu(ckpt, tmp_path, how):
    """Two gloo ranks, read once onto cuda:0: the library's CUDA sink fills
    tensors allocated on the GPU (ringload.torch._to_gpus), received bytes
    too, each rank's boxes equal to the written bytes."""
    from procs import communicate_all
    if how == "dtensors":
        pytest.importorskip("torch.distributed.tensor", reason="needs torch "
                            ">= 2.4 (DTensor)")
    moe, _, written = ckpt
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), how, str(r),
         str(tmp_path / "init"), moe, str(tmp_path / f"{r}.json")], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for r in range(2)]
    logs = communicate_all(procs, 240)
    res = []
    for r, p in enumerate(procs):
        assert p.returncode == 0 and (tmp_path / f"{r}.json").exists(), logs[r]
        res.append(json.loads((tmp_path / f"{r}.json").read_text()))
    assert sum(x["stats"]["received_bytes"] for x in res) > 0, res
    for r, x in enumerate(res):
        assert x["cuda"], (r, x)
        for key, digest in x["sha256"].items():
            dev, name = key.split("/", 1)
            dtype, shape, data = written[name]
            if how == "load":
                box = oracle.boxes(MOE_SPEC, name, shape)[int(dev)]
            else:
                box = [(0, n) for n in shape]
                if name == O_PROJ:
                    box[0] = (r * shape[0] // 2, (r + 1) * shape[0] // 2)
            want = stfile.box_bytes(dtype, shape, data, box)
            assert digest == oracle.sha256(want), (r, key)


if __name__ == "__main__":
    _dist_worker(sys.argv[1], int(sys.argv[2]), *sys.argv[3:6])
