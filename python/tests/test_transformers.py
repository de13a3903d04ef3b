"""ringload.transformers.from_pretrained against transformers' own
from_pretrained on tiny sharded Llamas (save_pretrained with an index):
the same model (logits, state dict, config, generation config, tied
weights), its weights read by one ringload load and never by safe_open.
Run by python-vllm-tests.sh (transformers from PyPI, in the venv of make
pydeps-vllm)."""
import pytest
import torch

import vllm_util as vu

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return {
        "bf16": vu.write_llama(tmp_path_factory.mktemp("bf16"), torch.bfloat16),
        "fp32": vu.write_llama(tmp_path_factory.mktemp("fp32"), torch.float32),
        "tied": vu.write_llama(tmp_path_factory.mktemp("tied"), torch.float32,
                               tied=True),
    }


@pytest.fixture
def no_safe_open(monkeypatch):
    """Fails the test if transformers opens a file with safe_open."""
    import transformers.modeling_utils as mu

    def refuse(*a, **k):
        raise AssertionError(f"safe_open({a[0] if a else ''}) was called")
    monkeypatch.setattr(mu, "safe_open", refuse)


def _logits(model):
    ids = torch.tensor([[1, 5, 9, 42, 7, 200, 3]])
    with torch.no_grad():
        return model(ids).logits


def _same_model(a, b):
    assert type(a) is type(b)
    assert vu.same_tensors(a.state_dict(), b.state_dict()) == []
    assert a.config.to_dict() == b.config.to_dict()
    assert a.generation_config.to_dict() == b.generation_config.to_dict()
    assert a.dtype == b.dtype and a.device == b.device
    assert torch.equal(_logits(a), _logits(b))


@pytest.mark.parametrize("key", ["bf16", "fp32"])
@pytest.mark.parametrize("auto", [True, False], ids=["Auto", "concrete"])
def test_same_model(models, key, auto, monkeypatch):
    """The same model and logits as from_pretrained, Auto or concrete."""
    from transformers import AutoModelForCausalLM, LlamaForCausalLM
    import ringload.transformers as rtf
    cls = AutoModelForCausalLM if auto else LlamaForCausalLM
    want = cls.from_pretrained(models[key])
    import transformers.modeling_utils as mu
    real = mu.safe_open
    monkeypatch.setattr(mu, "safe_open", lambda *a, **k: pytest.fail(
        f"safe_open({a[0]})"))
    got = rtf.from_pretrained(cls, models[key])
    monkeypatch.setattr(mu, "safe_open", real)
    _same_model(want, got)


@pytest.mark.parametrize("kwargs", [
    {"dtype": torch.float32}, {"dtype": "auto"}, {"device_map": "cpu"},
    {"dtype": torch.bfloat16, "device_map": {"": "cpu"}},
    {"output_hidden_states": True},  # a config attribute, as a path takes it
], ids=["dtype-f32", "dtype-auto", "device_map", "both", "config-kwarg"])
def test_kwargs_as_transformers(models, kwargs, no_safe_open):
    """dtype, device_map and config kwargs act as they do on a path."""
    from transformers import AutoModelForCausalLM
    import ringload.transformers as rtf
    got = rtf.from_pretrained(AutoModelForCausalLM, models["bf16"], **kwargs)
    import transformers.modeling_utils as mu
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mu, "safe_open", __import__("safetensors").safe_open)
        want = AutoModelForCausalLM.from_pretrained(models["bf16"], **kwargs)
    _same_model(want, got)
    if "output_hidden_states" in kwargs:
        assert got.config.output_hidden_states is True


def test_tied_weights(models, no_safe_open):
    """A checkpoint without lm_head (tie_word_embeddings): lm_head is the
    embedding, as transformers ties it."""
    from transformers import AutoModelForCausalLM
    import ringload.transformers as rtf
    got = rtf.from_pretrained(AutoModelForCausalLM, models["tied"])
    assert got.lm_head.weight.data_ptr() == \
        got.model.embed_tokens.weight.data_ptr()
    import transformers.modeling_utils as mu
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(mu, "safe_open", __import__("safetensors").safe_open)
        want = AutoModelForCausalLM.from_pretrained(models["tied"])
    _same_model(want, got)


def test_one_load_reads_every_shard(models, monkeypatch, no_safe_open):
    """The weights come from one ringload load of the index: one call of
    ringload.torch.load_file, for the index, reading all 7 shards."""
    import ringload.torch as rt
    import ringload.transformers as rtf
    from transformers import AutoModelForCausalLM
    calls, real = [], rt.load_file

    def spy(path, *a, **k):
        k["stats"] = stats = {}
        out = real(path, *a, **k)
        calls.append((path, stats))
        return out
    monkeypatch.setattr(rt, "load_file", spy)
    rtf.from_pretrained(AutoModelForCausalLM, models["bf16"])
    assert len(calls) == 1
    path, stats = calls[0]
    assert path.endswith("model.safetensors.index.json")
    assert len(stats["files"]) == 7


def test_errors(models, tmp_path):
    """No safetensors, a state_dict given, a shard missing: ringload's
    errors naming what is wrong."""
    import shutil
    import os
    import ringload
    import ringload.transformers as rtf
    from transformers import AutoModelForCausalLM
    with pytest.raises(ringload.ArgumentError, match="state_dict"):
        rtf.from_pretrained(AutoModelForCausalLM, models["bf16"],
                            state_dict={})
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ringload.CheckpointError, match="no model.safetensors"):
        rtf.from_pretrained(AutoModelForCausalLM, str(empty))
    gone = tmp_path / "gone"
    shutil.copytree(models["bf16"], gone)
    os.unlink(gone / "model-00003-of-00007.safetensors")
    with pytest.raises(ringload.Error, match="model-00003-of-00007"):
        rtf.from_pretrained(AutoModelForCausalLM, str(gone))


def test_cuda_device_map_selection():
    """A device_map of one CUDA device is read into it by the CUDA sink
    (a GPU runs that: perf/gpu_check.sh); anything else on the CPU."""
    import ringload.transformers as rtf
    cuda0 = torch.device("cuda", 0)
    assert rtf._single_device({"device_map": "cuda:0"}) == cuda0
    assert rtf._single_device({"device_map": 0}) == cuda0
    assert rtf._single_device({"device_map": {"": "cuda:0"}}) == cuda0
    assert rtf._single_device({"device_map": cuda0}) == cuda0
    for other in ("cpu", "auto", {"model": 0, "lm_head": "cpu"}, None):
        assert rtf._single_device({"device_map": other}) is None
    assert rtf._single_device({}) is None
