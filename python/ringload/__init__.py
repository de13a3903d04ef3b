"""ringload: load safetensors checkpoints from local NVMe as fast as the
drive allows, reading exactly the bytes a target sharding needs.

Pure Python over libringload.so (ctypes); numpy is required, torch optional
(imported only by ringload.torch and framework="pt"). docs/python.md is the
guide.

    import ringload
    from ringload.torch import load_file          # safetensors drop-ins
    from ringload.numpy import load_file
    with ringload.safe_open("m.safetensors", "pt") as f: ...
    shards = ringload.load("ckpt/", sharding=spec, process=0, framework="pt")
"""
import importlib
import os

from . import _core, _dtypes, _handles, _lib, _sha256
from ._errors import (ArgumentError, CanceledError, CheckpointError,
                      DeviceError, DtypeError, Error, FrameworkError,
                      HeaderError, IntegrityError, LoadError, SliceError,
                      SpecError,
                      StateError, SysError, TensorNotFoundError)
from ._errors import ArgumentTypeError
from ._safe_open import SafeSlice, safe_open

# api/ringload.h's version, as the library (built from it, and shipped
# with the package by pip and make install) reports it.
__version__ = _lib.text(_lib.rl_version_string())

_MAX_DEVICE_ID = 2**32 - 1  # rl_device_info.id is a uint32_t

__all__ = [
    "load", "safe_open", "SafeSlice", "library_path", "library_version",
    "Error", "HeaderError", "CheckpointError", "TensorNotFoundError",
    "SpecError", "ArgumentError", "FrameworkError", "DeviceError",
    "SliceError", "StateError", "LoadError", "CanceledError", "DtypeError",
    "SysError", "IntegrityError",
    "ArgumentTypeError",
]


@_core.frees_on_error
def load(filename, sharding=None, process=0, framework="np", device_map=None,
         *, backend="auto", options=None, progress=None, sha256=None,
         stats=None, copy=False, dtype=None):
    """Loads the shards that process P's devices need.

    filename: a .safetensors file, a directory of them or a
    model.safetensors.index.json. sharding: the sharding spec
    (docs/sharding-spec.md) as a dict, JSON text or a file path; None puts
    every tensor whole on device 0. framework: "np"/"numpy" or
    "pt"/"torch"/"pytorch". device_map: {device_id: device} for the
    results ("cpu", "cuda:N", an int or a torch.device; numpy: "cpu"); ids
    not given stay on the CPU, ids of other processes are ignored.
    backend: "auto", "io_uring", "libaio" or "pread"; options: loader
    options by name ({"queue_depth": 32, "inflight_bytes": ...}, the
    RL_OPT_* of api/ringload.h); progress: called as progress(done, total)
    in bytes during the read, an exception it raises cancels the load and
    propagates. sha256: expected SHA-256 values of the checkpoint's
    files ({file: hex}, 64 hex digits for a one-file checkpoint, or a
    SHA256SUMS path), checked by the library as it reads: a mismatch
    raises IntegrityError (RL_E_CHECKSUM), as does a value for a file this
    process reads only in part (a whole-file hash cannot be checked);
    streaming loads (a CUDA device, options staging_budget) check them
    too. stats: a dict, filled after a successful load with its
    statistics (rl_load_stats and "files", one dict per
    file read; docs/python.md). copy: True gives CPU results that own
    their memory (a copy each; the staging is freed before load returns).
    dtype: "F32", "F16" or "BF16" (or a torch, numpy or ml_dtypes dtype):
    every floating tensor converted to it as it loads, bit for bit as
    torch's .to() on the CPU (api/ringload.h, RL_PLAN_DTYPE); shards then
    have that dtype; None: as stored.

    Returns {device_id: {name: tensor}} with every device of the process
    (shards of the device's box, C order). CPU results are zero-copy views
    of the library's staging, one area per device: any of them keeps its
    device's whole area alive (unless copy=True). Raises an Error subclass
    with the C code and message; on any error everything the load
    allocated is freed.
    """
    process = _handles.plan_param("process", process)
    to = _dtypes.convert_to(dtype)
    _handles.loader_options(backend, options)
    _core.check_stats(stats)
    _core.check_copy(copy)
    fw = _core.framework(framework)
    devices = _handles.device_map(fw, device_map, _MAX_DEVICE_ID)
    ckpt = _handles.Checkpoint(filename)
    spec = None
    try:
        expected = _sha256.resolve(ckpt, sha256)
        spec = _handles.Spec(sharding)
        spec.set_dtype(to)
        return _core.run(fw, _core.Job(ckpt, spec, process, backend, options,
                                       progress, expected, stats, copy),
                         devices)
    finally:
        ckpt.close()
        if spec is not None:
            spec.close()


def library_path():
    """Returns the path of the libringload.so this package loaded."""
    return os.path.realpath(_lib.loaded_path())


def library_version():
    """Returns the loaded library's version string (rl_version_string)."""
    return _lib.text(_lib.rl_version_string())


def __getattr__(name):
    # ringload.torch is imported on first use: importing ringload must not
    # import torch.
    if name in ("numpy", "torch"):
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'ringload' has no attribute {name!r}")
