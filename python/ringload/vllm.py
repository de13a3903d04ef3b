"""ringload.vllm: the vLLM load format "ringload".

    vllm serve DIR --load-format ringload \\
        --model-loader-extra-config '{"staging_budget": "512M"}'

The package's entry point (group vllm.general_plugins, pyproject.toml)
is register(), which vLLM calls in every process it starts; it registers
RingloadModelLoader under the name "ringload". The loader is vLLM's
DefaultModelLoader (the same files: the index's, else every
*.safetensors; the same filters, names and strict check of loaded
weights) with one difference: the (name, tensor) pairs given to the
model's load_weights come from ringload (_weights): one coalesced
streaming load within a staging budget instead of safetensors' tensor by
tensor reads. With tensor parallelism each rank of vLLM's TP group reads
a share of the files and broadcasts it (_tp). docs/python.md, "vLLM".
"""
import dataclasses
import os
import re
import time

from vllm.model_executor.model_loader import (DefaultModelLoader,
                                              register_model_loader)
from vllm.model_executor.model_loader import weight_utils

from . import _errors, _lib, _tp, _weights

LOAD_FORMAT = "ringload"

# --model-loader-extra-config keys of ringload, and DefaultModelLoader's
# own that still apply (enable_weights_track: the strict check).
_KEYS = ("staging_budget", "backend", "sha256", "sha256_hf", "workers",
         "read_once")
_DEFAULT_KEYS = ("enable_weights_track",)
# The staging budget when none is given: two 64 MiB windows, so that
# vLLM's weight loaders copy one window's tensors while the other is read.
# A window the size of a small model reads it all before the first tensor
# is handed out: on a 238 MiB Llama (4 shards, cold, 2 busy cores) 512M
# took 2.4 s, 32M-128M 1.0-1.1 s (safetensors' safe_open + clone 1.1-1.3 s).
DEFAULT_BUDGET = 128 << 20
_SIZE = re.compile(r"(\d+)\s*([KMGT]?)i?B?", re.IGNORECASE)


def _size(value):
    """Bytes of an int or a str such as "512M", "1GiB"."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    m = _SIZE.fullmatch(value.strip()) if isinstance(value, str) else None
    if m is None:
        raise ValueError(f"ringload: staging_budget {value!r}: give bytes "
                         "(an int) or a size such as \"512M\" or \"2G\"")
    return int(m.group(1)) << (10 * " KMGT".index(m.group(2).upper() or " "))


def _flag(key, value):
    if not isinstance(value, bool):
        raise ValueError(f"ringload: {key} {value!r}: true or false")
    return value


def parse_extra_config(extra, folder=None):
    """(_weights.Options, read_once, {DefaultModelLoader's keys}) of the
    --model-loader-extra-config dict. sha256: a SHA256SUMS path (relative
    to the model folder when not absolute) or {file: hex}; false turns the
    Hugging Face blob check off too. ValueError names a bad key or value."""
    if not isinstance(extra, dict):
        raise ValueError("ringload: model_loader_extra_config must be a "
                         f"dict, not {type(extra).__name__}")
    unknown = sorted(set(extra) - set(_KEYS) - set(_DEFAULT_KEYS))
    if unknown:
        raise ValueError(f"ringload: unknown model_loader_extra_config keys "
                         f"{unknown} (ringload's: {', '.join(_KEYS)}; and "
                         f"{', '.join(_DEFAULT_KEYS)})")
    opts = _weights.Options(staging_budget=DEFAULT_BUDGET)
    if extra.get("staging_budget") is not None:
        opts.staging_budget = _size(extra["staging_budget"])
    opts.backend = extra.get("backend", "auto")
    if opts.backend not in _lib.BACKENDS:
        raise ValueError(f"ringload: backend {opts.backend!r}: one of "
                         + ", ".join(_lib.BACKENDS))
    sha = extra.get("sha256")
    opts.sha256_hf = _flag("sha256_hf", extra.get("sha256_hf", sha is not
                                                  False))
    if isinstance(sha, str) and folder and not os.path.isabs(sha):
        sha = os.path.join(folder, sha)
    if sha is not None and sha is not False and not isinstance(sha, (str,
                                                                     dict)):
        raise ValueError(f"ringload: sha256 {sha!r}: a SHA256SUMS path, "
                         "{file: hex} or false")
    opts.sha256 = sha or None
    if extra.get("workers") is not None:
        opts.workers = extra["workers"]
    try:
        opts.loader_options()  # bounds of every value, before any read
    except _errors.Error as e:
        raise ValueError(f"ringload: {e}") from None
    read_once = _flag("read_once", extra.get("read_once", True))
    return opts, read_once, {k: extra[k] for k in _DEFAULT_KEYS if k in extra}


def uses_cuda_sink(device):
    """True when the tensors go to the GPU through ringload's CUDA sink
    (the model's parameters are on a CUDA device); else they are CPU
    tensors that vLLM's weight loaders copy."""
    return _weights.uses_cuda_sink(device)


def tp_group(device, read_once=True):
    """vLLM's tensor parallel group to read once over, or None (no group,
    one rank, or read_once off): its device group (NCCL) when the tensors
    are on the GPU, else its CPU group (gloo)."""
    if not read_once:
        return None
    from vllm.distributed import parallel_state as ps
    if not ps.model_parallel_is_initialized():
        return None
    tp = ps.get_tp_group()
    if tp.world_size < 2:
        return None
    return tp.device_group if uses_cuda_sink(device) else tp.cpu_group


class RingloadModelLoader(DefaultModelLoader):
    """vLLM's DefaultModelLoader reading through ringload (module doc)."""

    def __init__(self, load_config):
        extra = dict(load_config.model_loader_extra_config or {})
        self.rl_extra = extra
        _, _, rest = parse_extra_config(extra)
        # DefaultModelLoader picks files by load format: ringload reads
        # what "safetensors" picks.
        super().__init__(dataclasses.replace(
            load_config, load_format="safetensors",
            model_loader_extra_config=rest))
        self.rl_device = None
        self.rl_stats = {}

    def load_weights(self, model, model_config):
        param = next(model.parameters(), None)
        self.rl_device = param.device if param is not None else None
        super().load_weights(model, model_config)

    def _files(self, source):
        """(folder, safetensors files) of source, as DefaultModelLoader
        chooses and filters them."""
        folder, files, use_st, index_file = self._prepare_weights(
            source.model_or_path, source.subfolder, source.revision,
            source.fall_back_to_pt, source.allow_patterns_overrides)
        if not use_st:
            raise RuntimeError(f"ringload: {source.model_or_path} has no "
                               "safetensors weights (ringload reads only "
                               "safetensors; use --load-format auto)")
        if self._encoder_only_lm_prefixes is not None and files:
            files = weight_utils.filter_mm_encoder_only_safetensors_files(
                files, folder, index_file, self._encoder_only_lm_prefixes,
                weights_mapper=self._encoder_only_weights_mapper)
        if source.is_unused_weight is not None:
            files = weight_utils.filter_safetensors_files_by_weight_name(
                files, source.is_unused_weight)
        return folder, files

    def _get_weights_iterator(self, source):
        folder, files = self._files(source)
        opts, read_once, _ = parse_extra_config(self.rl_extra, folder)
        skip = None
        if self.local_expert_ids is not None:  # EP: ranks differ
            from vllm.model_executor.model_loader.ep_weight_filter import \
                should_skip_weight
            ids = self.local_expert_ids
            read_once, skip = False, (lambda n: should_skip_weight(n, ids))
        if self.counter_before_loading_weights == 0.0:
            self.counter_before_loading_weights = time.perf_counter()
        pairs = weights(folder, files, opts, self.rl_device,
                        tp_group(self.rl_device, read_once), skip,
                        self.rl_stats)
        return ((source.prefix + n, t) for n, t in pairs)


def weights(folder, files, opts, device=None, group=None, skip=None,
            stats=None):
    """Yields (name, tensor) of files (paths in folder) for load_weights;
    a ringload error becomes vLLM's RuntimeError naming the file. skip(name)
    true: not read. group: read once over it (every rank calls this; an
    open that fails on one rank fails on all). stats: a dict given the
    load's statistics."""
    def open_():
        src = _weights.open_source(folder, files)
        if skip is not None:
            src.names = [n for n in src.names if not skip(n)]
        return src
    try:
        if group is None:
            src = open_()
        else:
            from . import _dist
            src = _dist.agree(group, open_)
    except _errors.Error as e:
        raise RuntimeError(f"ringload: {e}") from e
    try:
        if group is None:
            yield from _weights.iterate(src, opts, device, stats)
        else:  # each rank a share of the files, the rest by broadcast
            yield from _tp.iterate(src, opts, device, group, stats)
    except _errors.Error as e:
        raise RuntimeError(f"ringload: {e}") from e
    finally:
        src.close()


def register():
    """The vllm.general_plugins entry point: registers the load format
    "ringload" (once per process: vLLM may call plugins again)."""
    from vllm.model_executor import model_loader as ml
    table = getattr(ml, "_LOAD_FORMAT_TO_MODEL_LOADER", {})
    if table.get(LOAD_FORMAT) is not RingloadModelLoader:
        register_model_loader(LOAD_FORMAT)(RingloadModelLoader)


__all__ = ["register", "RingloadModelLoader", "parse_extra_config",
           "weights", "LOAD_FORMAT"]
