"""Read once with vLLM's tensor parallelism: 2 ranks on gloo
(vllm_tp_worker.py each) load vLLM's Llama with TP 2; each rank reads a
share of the files and receives the rest by broadcast."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import vllm_util as vu

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    """[result of rank 0, of rank 1] (the worker's JSON)."""
    import safetensors.torch as st
    import torch
    tmp = tmp_path_factory.mktemp("tp")
    model = vu.write_llama(tmp / "m", torch.bfloat16)
    other = tmp / "other"  # one shard's tensors renamed: other headers
    shutil.copytree(model, other)
    victim = other / "model-00002-of-00007.safetensors"
    t = st.load_file(str(victim))
    st.save_file({k + "_x": v for k, v in t.items()}, str(victim))
    index = json.loads((other / "model.safetensors.index.json").read_text())
    index["weight_map"] = {(k + "_x" if k in t else k): v
                           for k, v in index["weight_map"].items()}
    (other / "model.safetensors.index.json").write_text(json.dumps(index))
    missing = tmp / "missing"  # a shard the index names is not there
    shutil.copytree(model, missing)
    os.unlink(missing / "model-00006-of-00007.safetensors")
    port = vu.free_port()
    procs, outs = [], []
    for r in range(2):
        outs.append(tmp / f"rank{r}.json")
        procs.append(subprocess.Popen(
            [sys.executable, os.path.join(vu.HERE, "vllm_tp_worker.py"),
             str(r), str(port), model, str(other), str(missing),
             str(outs[r])],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [p.communicate(timeout=900)[0] for p in procs]
    for r, p in enumerate(procs):
        assert p.returncode == 0, f"rank {r}:\n{logs[r][-4000:]}"
    return [json.loads(o.read_text()) for o in outs], model


def test_tp_weights_equal_safetensors(ranks):
    """Each rank's TP shard of every parameter equals the one vLLM's own
    safetensors loader gives it."""
    res, _ = ranks
    for r in res:
        assert r["differences"] == []
        assert r["shard_shape"] == [64, 64]  # down_proj cut in 2 by TP


def test_tp_each_rank_reads_a_share(ranks):
    """Read once: the two ranks' reads add up to the checkpoint's tensor
    bytes, neither reads it all, and what one sends the other receives."""
    res, model = ranks
    import ringload
    from ringload import _handles
    ck = _handles.Checkpoint(os.path.join(model, "model.safetensors.index.json"))
    try:
        total = sum(t.nbytes for t in ck.tensors)
    finally:
        ck.close()
    st = [r["ringload_stats"] for r in res]
    assert st[0]["bytes_needed"] + st[1]["bytes_needed"] == total
    assert all(0 < s["bytes_needed"] < total for s in st)
    assert st[0]["sent_bytes"] == st[1]["received_bytes"] > 0
    assert st[1]["sent_bytes"] == st[0]["received_bytes"] > 0
    assert ringload.__version__


def test_tp_failure_raises_on_every_rank(ranks):
    """A checksum mismatch on rank 1 alone fails both ranks (rank 0 names
    rank 1 and the file), and the group stays usable; ranks that opened
    different headers fail before anything is read."""
    res, _ = ranks
    assert "SHA-256 mismatch" in res[1]["checksum"]
    assert res[0]["checksum"].startswith("RuntimeError: ringload: rank 1: ")
    assert ".safetensors: SHA-256 mismatch" in res[0]["checksum"]
    assert res[0]["after_error"] == res[1]["after_error"] == res[0]["pairs"]
    for r in res:
        assert "every rank must load the same checkpoint" in r["headers"]
    assert "model-00006-of-00007.safetensors" in res[1]["missing"]
    assert res[0]["missing"].startswith("RuntimeError: ringload: rank 1: ")
    assert "model-00006-of-00007.safetensors" in res[0]["missing"]
