"""ringload.transformers: from_pretrained with the weights read by ringload.

    from ringload.transformers import from_pretrained
    model = from_pretrained(AutoModelForCausalLM, "path/to/model",
                            dtype=torch.bfloat16)

is model_class.from_pretrained("path/to/model", dtype=...) except that
the checkpoint's tensors are read by one ringload load (every shard of
the index, coalesced) instead of transformers' safe_open. transformers
then does everything else as it does for a path: the config (and the
kwargs that change it), dtype, device_map, weight renaming, tied weights,
the generation config. It gets the tensors through its public
state_dict argument, with the config given as the path
(from_pretrained(None, config=path, state_dict=...), which loads the
config exactly as from a path); an Auto* class is first resolved to its
concrete class for the config, as the Auto class does.
"""
import os

from . import _errors, _lib

# from_pretrained's arguments that name where to find files on the Hub.
_HUB = ("cache_dir", "force_download", "local_files_only", "proxies",
        "revision", "subfolder", "token")


def _arg_error(msg):
    return _errors.ArgumentError(_lib.RL_E_INVALID_ARG, msg)


def local_dir(path, kwargs):
    """The local directory of path: itself, or a Hub repository's
    snapshot (its safetensors and JSON files, downloaded if needed)."""
    path = os.fspath(path)
    sub = kwargs.get("subfolder") or ""
    if os.path.isdir(path):
        return os.path.join(path, sub)
    from huggingface_hub import snapshot_download
    hub = {k: kwargs[k] for k in ("cache_dir", "force_download",
                                  "local_files_only", "proxies", "revision",
                                  "token") if k in kwargs}
    pattern = (sub + "/" if sub else "")
    root = snapshot_download(path, allow_patterns=[pattern + "*.safetensors",
                                                   pattern + "*.json"], **hub)
    return os.path.join(root, sub)


def checkpoint_path(folder, variant=None):
    """What transformers would read in folder: model[.variant].safetensors,
    else its index (model[.variant].safetensors.index.json)."""
    stem = "model" + (f".{variant}" if variant else "")
    for name in (f"{stem}.safetensors", f"{stem}.safetensors.index.json"):
        if os.path.isfile(os.path.join(folder, name)):
            return os.path.join(folder, name)
    raise _errors.CheckpointError(
        _lib.RL_E_INVALID_ARG, f"{folder}: no {stem}.safetensors or "
        f"{stem}.safetensors.index.json (ringload reads safetensors only)")


def _concrete(model_class, folder, kwargs):
    """model_class, or the class an Auto* class picks for folder's config."""
    mapping = getattr(model_class, "_model_mapping", None)
    if mapping is None:
        return model_class
    from transformers import AutoConfig
    hub = {k: kwargs[k] for k in ("trust_remote_code", "code_revision")
           if k in kwargs}
    config = AutoConfig.from_pretrained(folder, **hub)
    if type(config) in mapping.keys():
        return mapping[type(config)]
    raise _arg_error(f"{model_class.__name__}: no model class for "
                     f"{type(config).__name__} ({folder}; remote code is "
                     "not supported: give the concrete class)")


def _single_device(kwargs):
    """The one device of device_map when it names a single CUDA device
    ("cuda:0", 0, torch.device, {"": ...}), which the CUDA sink fills;
    else None (the CPU, transformers moves what device_map says)."""
    import torch
    dm = kwargs.get("device_map")
    if isinstance(dm, dict) and set(dm) == {""}:
        dm = dm[""]
    if isinstance(dm, int) and not isinstance(dm, bool):
        dm = torch.device("cuda", dm)
    if isinstance(dm, str) and dm.startswith("cuda"):
        dm = torch.device(dm)
    if isinstance(dm, torch.device) and dm.type == "cuda":
        return dm
    return None


def from_pretrained(model_class, path, *model_args, sha256=None,
                    backend="auto", **kwargs):
    """model_class.from_pretrained(path, *model_args, **kwargs) with the
    weights read by one ringload load of the checkpoint (module doc).

    model_class: an Auto* class or a concrete PreTrainedModel class. path:
    a local directory or a Hub repository id (its snapshot). sha256
    (keyword only): expected SHA-256 values as ringload.load takes them
    (the Hugging Face cache's blob names are checked without it). backend:
    ringload's I/O backend. A device_map of one CUDA device reads into it
    through the CUDA sink; any other is transformers' own. Raises a
    ringload.Error naming the file for what is wrong with the checkpoint.
    """
    if kwargs.get("state_dict") is not None:
        raise _arg_error("state_dict: ringload reads the checkpoint; give "
                         "the path only")
    if kwargs.get("gguf_file") is not None:
        raise _arg_error("gguf_file: ringload reads safetensors only")
    folder = local_dir(path, kwargs)
    target = checkpoint_path(folder, kwargs.get("variant"))
    import ringload.torch as rt
    device = _single_device(kwargs)
    state = rt.load_file(target, device=device or "cpu", sha256=sha256,
                         backend=backend)
    cls = _concrete(model_class, folder, kwargs)
    kw = {k: v for k, v in kwargs.items() if k not in _HUB and k != "variant"}
    kw.setdefault("generation_config", _generation_config(folder))
    if kw["generation_config"] is None:
        del kw["generation_config"]
    model = cls.from_pretrained(None, *model_args, config=folder,
                                state_dict=state, **kw)
    del state
    model.config.name_or_path = os.fspath(path)
    return model


def _generation_config(folder):
    """folder's generation_config.json as transformers reads it for a
    path, or None (it then makes one from the model's config, as for a
    path without the file)."""
    if not os.path.isfile(os.path.join(folder, "generation_config.json")):
        return None
    from transformers import GenerationConfig
    return GenerationConfig.from_pretrained(folder)


__all__ = ["from_pretrained"]
