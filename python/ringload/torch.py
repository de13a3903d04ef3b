"""ringload.torch: safetensors.torch's load_file on ringload, and the
PyTorch adapter of safe_open and ringload.load.

    from ringload.torch import load_file
    tensors = load_file("model.safetensors", device="cpu")

CPU tensors are zero-copy views of the library's staging (any one keeps the
whole area alive; clone() one to keep it alone). Importing this module
imports torch but nothing that needs a GPU.

Devices: "cpu", "cuda", "cuda:N", an int N (cuda:N, as safetensors), a
torch.device, or another torch device type, which torch's .to() handles.
A CUDA device is loaded through host staging and then copied with .to():
correct, not yet streaming (docs/python.md). _deliver() is the one place
where the streaming path (pinned window pool, copy stream, release on the
copy's event) plugs in once the C streaming API exists.
"""
import torch

from . import _core, _dtypes, _errors, _lib


def _device_error(device, why):
    return _errors.DeviceError(_lib.RL_E_INVALID_ARG, f"device {device!r} {why}")


def parse_device(device):
    """Returns the torch.device for a device argument (str, int,
    torch.device), checking that a CUDA device exists; DeviceError if not."""
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise _device_error(device, "is invalid (negative index)")
        dev = torch.device("cuda", device)
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as e:
            raise _device_error(device, f"is invalid ({e})") from None
    else:
        raise _device_error(device, "is invalid: give a str, an int or a "
                            "torch.device")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise _device_error(device, "is not available: "
                                "torch.cuda.is_available() is False")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise _device_error(device, f"is not available: "
                                f"{torch.cuda.device_count()} CUDA devices")
    return dev


def _to_device(t, device):
    """Copies a host tensor to device (not streaming: see _deliver)."""
    return t.to(device)


def _deliver(job, devices):
    """Loads job and delivers every shard to its device (devices: device
    id -> torch.device; absent: CPU). Returns {device_id: {name: tensor}}.

    Today: the whole process's shards land in host staging, CPU shards are
    zero-copy views of it, others are copied with .to(device); the host
    staging is freed once those copies are done and no CPU view remains.
    The streaming path replaces this body for CUDA targets: windows pinned
    by torch (rl_loader_set_window_pool), rl_loader_next_piece() in a loop,
    copy_(non_blocking=True) into preallocated device tensors on a copy
    stream, rl_loader_release() when the copy's event fires.
    """
    return _core.materialize(FRAMEWORK, _core.load_library(job), devices)


class _Torch:
    """The PyTorch adapter: dtypes, devices and delivery."""
    name = "torch"

    def check(self, name, dtype, shape):
        """Raises DtypeError when this torch has no dtype for tensor name
        (ArgumentError when its shape is too large)."""
        _dtypes.torch_check(torch, name, dtype, shape)

    def convert(self, raw, name, dtype, shape):
        """Returns raw (uint8 bytes) as a CPU tensor of dtype and shape."""
        return _dtypes.to_torch(torch, raw, name, dtype, shape)

    def device(self, device):
        """Parses a device argument (parse_device); None for the CPU."""
        dev = parse_device(device)
        return None if dev.type == "cpu" else dev

    def deliver(self, t, device):
        """Returns t on device (None: stays on the CPU)."""
        return t if device is None else _to_device(t, device)

    def contiguous(self, t):
        """Returns t, or a contiguous copy of it."""
        return t.contiguous()

    def load(self, job, devices):
        """Loads job; returns {device_id: {name: tensor}} (see _deliver)."""
        return _deliver(job, devices)


FRAMEWORK = _Torch()


@_core.frees_on_error
def load_file(filename, device="cpu"):
    """Loads every tensor of a safetensors file (or a directory of them, or
    a model.safetensors.index.json) as torch tensors on device.

    Same signature and result as safetensors.torch.load_file: a dict
    {name: torch.Tensor} in sorted name order; device is "cpu", "cuda",
    "cuda:N", an int or a torch.device. Raises a ringload.Error subclass
    carrying the C error code and message; DtypeError (before reading) for
    a dtype this torch lacks (torch 1.13: U16/U32/U64, F8_*, F4, F6_*);
    DeviceError for an invalid or absent device.
    """
    return _core.load_whole(FRAMEWORK, filename, FRAMEWORK.device(device))
