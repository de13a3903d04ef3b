"""ringload.jax.load in a multi-process JAX job on the CPU: 2 processes of
4 devices each (jax.distributed on a localhost coordinator, one
jax_worker.py each), NamedShardings over the global 2x4 and 4x2 meshes,
every backend with one and two workers. Each process's addressable
shards equal safetensors' load byte for byte, and each process reads only
its own boxes: the loader's bytes_needed is exactly the bytes of its
distinct boxes (half of every tensor sharded over "data", all of the
others), and bytes_read stays within alignment of that, far from the other
process's half. Skipped where jax or safetensors is not importable
(Debian's Python), or where jax.distributed cannot start (with its
error)."""
import json
import os
import socket
import subprocess
import sys

import numpy as np
import pytest

from procs import communicate_all

pytestmark = pytest.mark.venv  # jax: the venv of make pydeps
pytest.importorskip("jax", reason="needs jax (the venv of make pydeps)")
ml_dtypes = pytest.importorskip("ml_dtypes", reason="needs ml_dtypes")
st_numpy = pytest.importorskip("safetensors.numpy", reason="needs "
                               "safetensors (the venv of make pydeps)")

HERE = os.path.dirname(os.path.abspath(__file__))
PROCESSES = 2

# name: (numpy dtype, shape, PartitionSpec as a list)
TENSORS = {
    "big": ("<f4", (512, 1024), ["data"]),
    "rows": ("<f4", (64, 256), ["data", None]),
    "grid": ("<f4", (32, 32), ["data", "model"]),
    "cols": (ml_dtypes.bfloat16, (16, 64), [None, "model"]),
    "rep": ("<i4", (100,), []),
}
MESHES = [(2, 4), (4, 2)]
SLACK = 64 << 10  # O_DIRECT alignment and coalesced gaps of a few runs


def _nbytes(name):
    dt, shape, _ = TENSORS[name]
    return int(np.prod(shape)) * np.dtype(dt).itemsize


def _own_bytes():
    """A process's bytes: on both meshes it holds half of the "data" axis
    and all of "model", so half of what is sharded over "data"."""
    return sum(_nbytes(n) // (PROCESSES if "data" in spec else 1)
               for n, (_, _, spec) in TENSORS.items())


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    rng = np.random.default_rng(23)
    path = tmp_path_factory.mktemp("jaxprocs") / "m.safetensors"
    st_numpy.save_file({n: rng.standard_normal(shape).astype(dt)
                        for n, (dt, shape, _) in TENSORS.items()}, str(path))
    return str(path)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(tmp_path, ckpt, timeout=300):
    """Runs the job; returns each process's result."""
    args = json.dumps({"meshes": MESHES, "specs": {
        n: spec for n, (_, _, spec) in TENSORS.items()}})
    port, procs, outs = _free_port(), [], []
    env = dict(os.environ, OMP_NUM_THREADS="1")
    for i in range(PROCESSES):
        outs.append(tmp_path / f"process{i}.json")
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(HERE, "jax_worker.py"), str(i),
             str(PROCESSES), str(port), ckpt, str(outs[i]), args], env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = communicate_all(procs, timeout)
    res = []
    for i, out in enumerate(outs):
        assert out.exists(), f"process {i} wrote nothing:\n{logs[i][-4000:]}"
        res.append(json.loads(out.read_text()))
    return res


def test_each_process_reads_its_shards(tmp_path, ckpt):
    res = run(tmp_path, ckpt)
    for r in res:
        if "init_error" in r:
            pytest.skip(f"jax.distributed cannot start: {r['init_error']}")
    assert all(r["ok"] for r in res), [r["error"] for r in res]
    assert sorted(r["process"] for r in res) == list(range(PROCESSES))
    assert all(r["local_devices"] == 4 for r in res)
    total = sum(_nbytes(n) for n in TENSORS)
    combos = res[0]["runs"]
    assert len(combos) == len(MESHES) * 3 * 2
    for key in combos:
        for r in res:
            run_ = r["runs"][key]
            needed = run_["stats"]["bytes_needed"]
            read = run_["stats"]["bytes_read"]
            assert needed == run_["distinct_bytes"] == _own_bytes(), \
                (key, r["process"], needed, run_["distinct_bytes"])
            assert needed <= read <= needed + SLACK, (key, needed, read)
            assert read < total - _nbytes("big") // 4, (key, read, total)
