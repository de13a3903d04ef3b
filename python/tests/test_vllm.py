"""The vLLM load format "ringload" (ringload/vllm.py) against vLLM 0.33's
own safetensors loader, on tiny Llamas that transformers' save_pretrained
writes in several shards with an index. Run by python-vllm-tests.sh with
the venv of make pydeps-vllm (vLLM on its CPU platform: vllm_util)."""
import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch

import vllm_util as vu

pytestmark = pytest.mark.vllm

BACKENDS = ("io_uring", "libaio", "pread")
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


@pytest.fixture(scope="module")
def llamas(tmp_path_factory):
    """{"bf16": dir, "fp16": dir, "fp8": dir}: 7 shards and an index each."""
    out = {}
    for key, dt in DTYPES.items():
        out[key] = vu.write_llama(tmp_path_factory.mktemp(key), dt)
    out["fp8"] = vu.to_fp8(vu.write_llama(tmp_path_factory.mktemp("fp8"),
                                          torch.bfloat16))
    return out


def _files(folder):
    """The files vLLM's DefaultModelLoader reads for folder, as it chooses."""
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader import DefaultModelLoader
    ld = DefaultModelLoader(LoadConfig(load_format="safetensors"))
    return ld._prepare_weights(folder, None, None, False, None)[1]


def _vllm_pairs(folder):
    """{name: tensor} of vLLM's own safetensors iterator."""
    from vllm.model_executor.model_loader import weight_utils
    return {n: t.clone() for n, t in
            weight_utils.safetensors_weights_iterator(_files(folder), False)}


def _ringload_pairs(folder, **extra):
    import ringload.vllm as rv
    opts, _, _ = rv.parse_extra_config(extra, folder)
    out, stats = {}, {}
    for n, t in rv.weights(folder, _files(folder), opts, stats=stats):
        assert n not in out, f"{n} yielded twice"
        out[n] = t
    return out, stats


def test_plugin_found_by_name(tmp_path):
    """pyproject.toml's entry point, installed as a distribution's
    metadata, is what vLLM's load_general_plugins() runs: afterwards
    get_model_loader finds "ringload"."""
    import importlib
    import vllm.plugins
    from vllm.config.load import LoadConfig
    from vllm.model_executor import model_loader as ml
    import tomllib
    with open(os.path.join(vu.ROOT, "pyproject.toml"), "rb") as f:
        eps = tomllib.load(f)["project"]["entry-points"]
    assert eps["vllm.general_plugins"] == {"ringload": "ringload.vllm:register"}
    info = tmp_path / "ringload_ep-0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: "
                                   "ringload-ep\nVersion: 0.0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\nringload = ringload.vllm:register\n")
    ml._LOAD_FORMAT_TO_MODEL_LOADER.pop("ringload", None)
    sys.path.insert(0, str(tmp_path))
    importlib.invalidate_caches()
    try:
        vllm.plugins.plugins_loaded = False
        vllm.plugins.load_general_plugins()
    finally:
        sys.path.remove(str(tmp_path))
    loader = ml.get_model_loader(LoadConfig(load_format="ringload"))
    import ringload.vllm as rv
    assert type(loader) is rv.RingloadModelLoader
    rv.register()  # again, as vLLM may: no second registration
    assert ml._LOAD_FORMAT_TO_MODEL_LOADER["ringload"] is \
        rv.RingloadModelLoader


@pytest.mark.parametrize("key", ["bf16", "fp16", "fp8"])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("workers", [1, 3])
def test_pairs_equal_vllm_iterator(llamas, key, backend, workers):
    """The (name, tensor) pairs: names, dtypes, shapes and bytes of vLLM's
    safetensors iterator, on every backend, one and several workers, with
    a 64 KiB budget (many windows); one load reads every file."""
    folder = llamas[key]
    want = _vllm_pairs(folder)
    got, stats = _ringload_pairs(folder, staging_budget="64K",
                                 backend=backend, workers=workers)
    assert vu.same_tensors(want, got) == []
    if key == "fp8":
        assert any(t.dtype == torch.float8_e4m3fn for t in got.values())
    assert stats["backend"] == backend
    assert len(stats["files"]) == len(_files(folder)) == 7
    needed = sum(os.path.getsize(f) for f in _files(folder))
    assert stats["bytes_needed"] <= needed


def test_pairs_are_owned_and_budget_bounds_windows(llamas):
    """Each tensor owns its memory (released windows are reused, so a view
    would change under the consumer): all pairs kept to the end still
    equal vLLM's; the stream never held a finished tensor back."""
    import ringload.vllm as rv
    from ringload import _weights
    folder = llamas["bf16"]
    opts, _, _ = rv.parse_extra_config({"staging_budget": 65536}, folder)
    src = _weights.open_source(folder, _files(folder))
    try:
        stream = _weights.open_stream(src, src.names, opts)
        kept = {n: stream.take(n) for n in src.names}
        stream.finish()
        assert stream.waited == 0
        assert stream.stats["stream_window_bytes"] * \
            stream.stats["stream_windows"] <= 65536
    finally:
        src.close()
    assert vu.same_tensors(_vllm_pairs(folder), kept) == []


@pytest.mark.parametrize("key", ["bf16", "fp16"])
def test_model_weights_equal_safetensors_loader(llamas, key):
    """vLLM's Llama loaded with load_format="ringload" has the state dict,
    byte for byte, of the one loaded with "safetensors"."""
    import ringload.vllm as rv
    rv.register()
    a, _ = vu.load_model(llamas[key], "safetensors")
    b, loader = vu.load_model(llamas[key], "ringload",
                              {"staging_budget": "128K"})
    assert isinstance(loader, rv.RingloadModelLoader)
    assert vu.same_tensors(a.state_dict(), b.state_dict()) == []
    assert loader.rl_stats["bytes_read"] > 0


def test_model_fp8(llamas):
    """An FP8 checkpoint (float8_e4m3fn weights, weight_scale): vLLM's CPU
    platform loads it with "safetensors" and "ringload" alike, or refuses
    both the same way (this build's fp8 kernels)."""
    import ringload.vllm as rv
    rv.register()
    try:
        a, _ = vu.load_model(llamas["fp8"], "safetensors")
    except Exception as e:  # noqa: BLE001 - what vLLM's CPU build refuses
        with pytest.raises(type(e)):
            vu.load_model(llamas["fp8"], "ringload")
        pytest.skip(f"vLLM's CPU platform cannot load FP8 here: "
                    f"{type(e).__name__}: {str(e).splitlines()[0][:120]} "
                    "(the pairs are compared in test_pairs_equal_vllm_iterator)")
    b, _ = vu.load_model(llamas["fp8"], "ringload", {"staging_budget": "64K"})
    assert vu.same_tensors(a.state_dict(), b.state_dict()) == []


def _copy(src, dst):
    shutil.copytree(src, dst)
    return str(dst)


def test_checksum_mismatch_names_file(llamas, tmp_path):
    """A SHA256SUMS line that does not match: RuntimeError naming the file;
    the right values load."""
    folder = _copy(llamas["bf16"], tmp_path / "m")
    files = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    lines = []
    for f in files:
        with open(f, "rb") as fh:
            lines.append(f"{hashlib.sha256(fh.read()).hexdigest()}  "
                         f"{os.path.basename(f)}\n")
    with open(os.path.join(folder, "SHA256SUMS"), "w") as f:
        f.writelines(lines)
    got, stats = _ringload_pairs(folder, sha256="SHA256SUMS")
    assert {fs["sha256_state"] for fs in stats["files"]} == {"matched"}
    bad = os.path.basename(files[3])
    lines[3] = "0" * 64 + f"  {bad}\n"
    with open(os.path.join(folder, "SHA256SUMS"), "w") as f:
        f.writelines(lines)
    with pytest.raises(RuntimeError, match=f"{bad}: SHA-256 mismatch"):
        _ringload_pairs(folder, sha256="SHA256SUMS")


def test_hf_blob_names_checked_by_default(llamas, tmp_path):
    """The Hugging Face cache layout (snapshot symlinks to blobs/<sha256>)
    is checked with no option: a flipped byte in a blob fails naming the
    file; sha256: false reads it unchecked."""
    snap = tmp_path / "hub" / "snapshots" / "abc"
    blobs = tmp_path / "hub" / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    for f in os.listdir(llamas["bf16"]):
        with open(os.path.join(llamas["bf16"], f), "rb") as fh:
            data = fh.read()
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        os.symlink(os.path.relpath(blobs / digest, snap), snap / f)
    got, stats = _ringload_pairs(str(snap))
    assert {fs["sha256_state"] for fs in stats["files"]} == {"matched"}
    victim = snap / "model-00004-of-00007.safetensors"
    blob = os.path.realpath(victim)
    with open(blob, "r+b") as fh:
        fh.seek(-1, os.SEEK_END)
        last = fh.read(1)
        fh.seek(-1, os.SEEK_END)
        fh.write(bytes([last[0] ^ 1]))
    with pytest.raises(RuntimeError, match="model-00004-of-00007.safetensors"
                       ": SHA-256 mismatch"):
        _ringload_pairs(str(snap))
    _ringload_pairs(str(snap), sha256=False)


def test_missing_shard_names_file(llamas, tmp_path):
    """A shard the index names and the folder lacks: vLLM's RuntimeError
    naming it, before anything is read."""
    import ringload.vllm as rv
    folder = _copy(llamas["bf16"], tmp_path / "m")
    files = _files(folder)
    gone = os.path.join(folder, "model-00005-of-00007.safetensors")
    os.unlink(gone)
    opts, _, _ = rv.parse_extra_config({}, folder)
    with pytest.raises(RuntimeError, match="model-00005-of-00007"):
        next(rv.weights(folder, [f for f in files if f != gone], opts))


def test_file_changed_during_load_names_file(llamas, tmp_path):
    """A file rewritten while the load runs (after the first tensor came):
    RuntimeError naming the file (RL_E_FILE_CHANGED)."""
    import ringload.vllm as rv
    folder = _copy(llamas["bf16"], tmp_path / "m")
    files = _files(folder)
    last = sorted(files)[-1]
    opts, _, _ = rv.parse_extra_config({"staging_budget": "64K"}, folder)
    it = rv.weights(folder, files, opts)
    next(it)
    with open(last, "rb") as f:
        data = f.read()
    os.unlink(last)  # another file under the same name
    with open(last, "wb") as f:
        f.write(data)
    with pytest.raises(RuntimeError, match=os.path.basename(last)):
        for _ in it:
            pass


@pytest.mark.parametrize("extra, words", [
    ({"staging_budget": "lots"}, "staging_budget 'lots'"),
    ({"backend": "mmap"}, "backend 'mmap'"),
    ({"read_once": "yes"}, "read_once 'yes'"),
    ({"sha256": 5}, "sha256 5"),
    ({"workers": 100000}, "workers"),
    ({"num_threads": 4}, "unknown model_loader_extra_config keys"),
])
def test_bad_extra_config(extra, words):
    """A bad --model-loader-extra-config: vLLM's ValueError naming it,
    when the loader is made (before vLLM builds the model)."""
    import ringload.vllm as rv
    from vllm.config.load import LoadConfig
    with pytest.raises(ValueError, match=words.replace("(", r"\(")):
        rv.RingloadModelLoader(LoadConfig(load_format="ringload",
                                          model_loader_extra_config=extra))


def test_cuda_selection():
    """Which path the tensors take (the GPU path itself needs a GPU:
    perf/gpu_check.sh): CUDA parameters go through the CUDA sink, one file
    per load; anything else is read to host tensors; the TP group is the
    device group (NCCL) for CUDA and the CPU group (gloo) otherwise."""
    import ringload.vllm as rv
    from ringload import _weights
    assert rv.uses_cuda_sink(torch.device("cuda", 0))
    assert rv.uses_cuda_sink("cuda:1")
    assert not rv.uses_cuda_sink(torch.device("cpu"))
    assert not rv.uses_cuda_sink(None)
    assert rv.tp_group(torch.device("cpu"), read_once=False) is None

    class Src:
        class ckpt:
            @staticmethod
            def tensor(n):
                return type("T", (), {"file": int(n[1])})
    assert _weights._cuda_file_groups(Src, ["f1a", "f0a", "f1b", "f0b"]) == \
        [["f0a", "f0b"], ["f1a", "f1b"]]
    stream = _weights.open_stream(Src, ["f0a"], _weights.Options(),
                                  torch.device("cuda", 0))
    assert isinstance(stream, _weights._CudaStream)


def test_generate_same_tokens(llamas):
    """LLM(model, load_format="ringload") generates the tokens of
    load_format="safetensors" (greedy), where vLLM's CPU build runs the
    model; docs/python.md says why it does not here."""
    script = os.path.join(vu.HERE, "vllm_generate.py")
    env = dict(os.environ)
    r = subprocess.run([sys.executable, script, llamas["bf16"]], env=env,
                       capture_output=True, text=True, timeout=900)
    if r.returncode == 77:
        cause = re.findall(r"ERROR.*?\] (\w+Error: .*)", r.stdout + r.stderr)
        pytest.skip(r.stdout.strip().splitlines()[-1] +
                    (f" (in the worker: {cause[0]})" if cause else ""))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
