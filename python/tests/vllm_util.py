"""Helpers of the vLLM and transformers tests (the venv of make
pydeps-vllm): tiny Llama checkpoints written by transformers'
save_pretrained in several shards with an index, and vLLM's own model
loading on the CPU.

vLLM from PyPI is built for CUDA; VLLM_TARGET_DEVICE=cpu makes it take
its CPU platform, where it builds a model and loads its weights (set here
before vllm is imported, unless a GPU is present)."""
import json
import os
import socket

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def llama_config(tied=False):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128,
                       num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, max_position_embeddings=128,
                       tie_word_embeddings=tied)


def write_llama(path, dtype, tied=False, seed=0, shard="40KB"):
    """A tiny random Llama saved by save_pretrained in shards of at most
    shard bytes with model.safetensors.index.json; returns path."""
    from transformers import LlamaForCausalLM
    torch.manual_seed(seed)
    model = LlamaForCausalLM(llama_config(tied)).to(dtype)
    model.save_pretrained(str(path), max_shard_size=shard)
    return str(path)


def to_fp8(path):
    """Rewrites the Llama at path as a tiny FP8 checkpoint in the layout
    of vLLM's "fp8" quantization (compressed per-tensor): every linear
    weight of the layers as float8_e4m3fn with a float32 weight_scale."""
    import safetensors.torch as st
    with open(os.path.join(path, "model.safetensors.index.json")) as f:
        index = json.load(f)
    files = sorted(set(index["weight_map"].values()))
    for name in files:
        full = os.path.join(path, name)
        tensors = st.load_file(full)
        out = {}
        for k, t in tensors.items():
            if ".layers." in k and k.endswith("proj.weight"):
                scale = t.float().abs().max().clamp(min=1e-6) / 448.0
                out[k] = (t.float() / scale).to(torch.float8_e4m3fn)
                out[k[:-len("weight")] + "weight_scale"] = scale.reshape(())
                index["weight_map"][k[:-len("weight")] + "weight_scale"] = name
            else:
                out[k] = t
        st.save_file(out, full, metadata={"format": "pt"})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    cfg_path = os.path.join(path, "config.json")
    with open(cfg_path) as f:
        cfg = json.load(f)
    cfg["quantization_config"] = {"quant_method": "fp8",
                                  "activation_scheme": "dynamic"}
    with open(cfg_path, "w") as f:
        json.dump(cfg, f)
    return path


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_DIST = {"up": False}


def vllm_config(model, load_format, extra=None, dtype="auto", tp=1):
    from vllm.config import (DeviceConfig, LoadConfig, ModelConfig,
                             ParallelConfig, VllmConfig)
    mc = ModelConfig(model=str(model), dtype=dtype, skip_tokenizer_init=True)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    return VllmConfig(model_config=mc, load_config=LoadConfig(
        load_format=load_format, model_loader_extra_config=extra or {}),
        device_config=DeviceConfig(device=device),
        parallel_config=ParallelConfig(tensor_parallel_size=tp))


def init_dist(rank=0, world=1, port=None):
    """vLLM's distributed state on gloo (once per process)."""
    from vllm.distributed import (init_distributed_environment,
                                  initialize_model_parallel)
    if _DIST["up"]:
        return
    init_distributed_environment(
        world_size=world, rank=rank, local_rank=rank, backend="gloo",
        distributed_init_method=f"tcp://127.0.0.1:{port or free_port()}")
    initialize_model_parallel(world)
    _DIST["up"] = True


def load_model(model, load_format, extra=None, dtype="auto"):
    """(vLLM's model with its weights loaded by load_format, the loader)."""
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.model_loader import get_model_loader
    vc = vllm_config(model, load_format, extra, dtype)
    with set_current_vllm_config(vc):
        init_dist()
        loader = get_model_loader(vc.load_config)
        return loader.load_model(vllm_config=vc,
                                 model_config=vc.model_config), loader


def as_bytes(t):
    """t's bytes as a flat uint8 tensor (any dtype, 0-dim too)."""
    return t.detach().cpu().contiguous().reshape(-1).view(torch.uint8)


def same_tensors(a, b):
    """[what differs] between two {name: tensor}: names, dtypes, shapes,
    bytes."""
    bad = []
    if set(a) != set(b):
        bad.append(f"names: only in one: {sorted(set(a) ^ set(b))}")
    for k in sorted(set(a) & set(b)):
        x, y = a[k], b[k]
        if x.dtype != y.dtype or x.shape != y.shape:
            bad.append(f"{k}: {x.dtype}{tuple(x.shape)} != "
                       f"{y.dtype}{tuple(y.shape)}")
        elif not torch.equal(as_bytes(x), as_bytes(y)):
            bad.append(f"{k}: bytes differ")
    return bad
