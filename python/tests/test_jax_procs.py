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
error). With read_once=True the same shards, each byte read once in the
job and sent through JAX's key-value store, and a failure on one process
raises the same error on both."""
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
    "wide": ("<f4", (128, 1024), [None, "model"]),  # the same on both
    "scalar": ("<f4", (), []),
    # another mesh (all 8 devices on one axis): read once leaves it to
    # each process (its own half)
    "flat": ("<i4", (64, 16), {"flat": ["all"]}),
}
MESHES = [(2, 4), (4, 2)]
SLACK = 64 << 10  # O_DIRECT alignment and coalesced gaps of a few runs


def _nbytes(name):
    dt, shape, _ = TENSORS[name]
    return int(np.prod(shape)) * np.dtype(dt).itemsize


def _own_bytes():
    """A process's bytes: on both meshes it holds half of the "data" axis
    and all of "model", so half of what is sharded over "data"."""
    return sum(_nbytes(n) // (PROCESSES if "data" in spec or "flat" in spec
                              else 1)
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


def run(tmp_path, ckpt, timeout=300, **extra):
    """Runs the job (extra: more ARGS of jax_worker.py); returns each
    process's result, skipping where jax.distributed cannot start."""
    args = json.dumps(dict({"meshes": MESHES, "specs": {
        n: spec for n, (_, _, spec) in TENSORS.items()}}, **extra))
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
    for r in res:
        if "init_error" in r:
            pytest.skip(f"jax.distributed cannot start: {r['init_error']}")
    return res


def test_each_process_reads_its_shards(tmp_path, ckpt):
    res = run(tmp_path, ckpt)
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


def test_read_once_reads_each_byte_once(tmp_path, ckpt):
    """read_once=True: the same shards, byte for byte (jax_worker checks
    them against safetensors), every mesh, backend and worker count;
    each byte several processes need is read by one and sent through
    the key-value store: the processes' bytes_read together are at most
    1.10x the checkpoint's tensors (each reading its own boxes, over
    1.15x: "wide" twice), what one sends the other receives, and the
    job's unique_bytes are every tensor's bytes; the coordinator holds
    no message afterwards, and under 4 KiB in all."""
    res = run(tmp_path, ckpt, read_once=True, kv_timeout=60)
    assert all(r["ok"] for r in res), [r["error"] for r in res]
    total = sum(_nbytes(n) for n in TENSORS)
    assert _own_bytes() * PROCESSES > total * 1.15  # what each reads alone
    for r in res:  # the payloads' parts were taken and deleted
        left = r["runs"].pop("kv_left")
        assert not [k for k, _ in left if "/m/" in k], left
        assert sum(n for _, n in left) < 4096, left
    combos = res[0]["runs"]
    assert len(combos) == len(MESHES) * 3 * 2
    for key in combos:
        st = [r["runs"][key]["stats"] for r in res]
        read = sum(s["bytes_read"] for s in st)
        assert total <= read <= total * 1.10, (key, read, total)
        assert all(s["unique_bytes"] == total for s in st), (key, st)
        assert st[0]["sent_bytes"] == st[1]["received_bytes"] > 0, st
        assert st[1]["sent_bytes"] == st[0]["received_bytes"] > 0, st


@pytest.mark.parametrize("how", ["missing", "send", "callable"])
def test_read_once_failure_fails_every_process(tmp_path, ckpt, how):
    """One process fails (its checkpoint path does not exist; its
    transport's sends raise; its shardings callable raises): both
    processes raise the failing process's error (the other's message
    starts with "rank 1: "; the callable's own exception is a LoadError
    there), within seconds (no wait for the 600 s timeout), and the next
    read-once load of the job succeeds."""
    res = run(tmp_path, ckpt, fail={"process": 1, "how": how})
    assert all(r["ok"] for r in res), [r["error"] for r in res]
    errors = [r["runs"]["error"] for r in res]
    assert errors[1] is not None, errors
    if how == "callable":
        assert errors[1] == ["ValueError", None,
                             "injected failure at big"], errors
        assert errors[0] == ["LoadError", -5092, "rank 1: ValueError: "
                             "injected failure at big"], errors
        return
    assert errors[0] == errors[1][:2] + ["rank 1: " + errors[1][2]], errors
    cls, _, msg = errors[1]
    if how == "missing":
        assert cls == "FileNotFoundError" or "gone" in msg, errors
    else:
        assert "injected send failure" in msg, errors
    assert all(r["runs"]["seconds"] < 60 for r in res), res


def test_read_once_a_dead_process_fails_the_other(tmp_path, ckpt):
    """Process 1 leaves at its first send: process 0 raises LoadError
    (RL_E_PEER) naming the process it waited for after the load's
    timeout (3 s here), not later, and does not hang."""
    res = run(tmp_path, ckpt, fail={"process": 1, "how": "dead",
                                    "timeout": 3})
    assert res[1]["runs"].get("dead"), res[1]
    assert res[0]["ok"], res[0]["error"]
    err, seconds = res[0]["runs"]["error"], res[0]["runs"]["seconds"]
    assert err is not None and err[:2] == ["LoadError", -5092], err
    assert "process 1" in err[2] and "alive" in err[2], err
    assert 3 <= seconds < 30, seconds
