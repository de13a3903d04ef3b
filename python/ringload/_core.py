"""Runs loads and turns the plan's shards into host arrays.

Two ways to run, both giving a Loaded (shards + each device's staging bytes
as a uint8 numpy array):

- load_library(): rl_loader_load with library staging (huge-page backed,
  one area per device). The arrays are zero-copy views of that staging: the
  uint8 array's base is a ctypes buffer that holds the Loader, so the
  staging lives exactly as long as any array made from it.
- load_into_numpy(): plans first, then runs with caller staging in memory
  numpy allocates: for single-tensor loads (safe_open), whose results then
  need nothing of the library and hold no mapping of their own.
"""
import collections
import ctypes
import functools
import importlib
import os

import numpy as np

from . import _errors, _handles, _lib, _sha256

Job = collections.namedtuple(
    "Job", "ckpt spec process backend options progress sha256", defaults=((),))
Job.__doc__ = """What to load: open Checkpoint and Spec, process, loader
backend and options, progress callable (or None), expected SHA-256 values
([(file, hex)], _sha256.resolve)."""

# Caller staging at least this large is 4096-aligned so that reads can go
# straight into it (docs/engine.md); smaller areas are allocated exactly,
# since alignment would cost up to 4 KiB per tensor.
_ALIGN_FROM = 1 << 20
_ALIGN = 4096


class Loaded:
    """Shards of one run and the staging bytes of each device."""

    def __init__(self, shards, device_ids, staging):
        self.shards = shards
        self.device_ids = device_ids
        self.staging = staging

    def raw(self, shard):
        """Returns the bytes of shard as a uint8 array (a view)."""
        if not shard.nbytes:
            return np.empty(0, np.uint8)
        area = self.staging[shard.device]
        return area[shard.offset:shard.offset + shard.nbytes]


def _library_staging(loader, dev):
    ptr, n = loader.staging(dev)
    if not ptr:
        return None
    buf = (ctypes.c_uint8 * n).from_address(ptr)
    buf.ringload_loader = loader  # the staging lives while buf does
    return np.frombuffer(buf, np.uint8)


def load_library(job):
    """Runs job with library staging; returns a Loaded whose arrays keep
    the loader (and so its staging) alive."""
    loader = _handles.Loader(job.backend, job.options, job.sha256)
    try:
        plan = loader.load(job.ckpt, job.spec, job.process, job.progress)
    except BaseException:
        loader.close()
        raise
    try:
        shards, devices = plan.shards(), plan.devices()
    finally:
        plan.close()
    staging = [_library_staging(loader, d) for d in range(len(devices))]
    return Loaded(shards, [i for i, _ in devices], staging)


def _numpy_area(n):
    if n < _ALIGN_FROM:
        return np.empty(max(n, 1), np.uint8)
    buf = np.empty(n + _ALIGN, np.uint8)
    off = -buf.ctypes.data % _ALIGN
    return buf[off:off + n]


def load_into_numpy(job):
    """Runs job for process 0 with caller staging that numpy owns; the
    library's handles are gone when this returns."""
    plan = _handles.Plan()
    loader = None
    try:
        plan.build(job.ckpt, job.spec)
        shards, devices = plan.shards(), plan.devices()
        staging = [_numpy_area(n) for _, n in devices]
        options = dict(job.options or {}, staging=_lib.RL_STAGING_CALLER)
        loader = _handles.Loader(job.backend, options, job.sha256)
        for d, area in enumerate(staging):
            loader.set_staging(d, area.ctypes.data, area.size)
        loader.run(plan, job.progress)
    finally:
        plan.close()
        if loader is not None:
            loader.close()
    return Loaded(shards, [i for i, _ in devices], staging)


def materialize(fw, loaded, devices):
    """Converts every shard of loaded with framework fw and delivers it to
    devices[device_id] (default "cpu"); returns {device_id: {name: t}}."""
    out = {i: {} for i in loaded.device_ids}
    for s in loaded.shards:
        t = fw.convert(loaded.raw(s), s.name, s.dtype, s.box)
        out[s.device_id][s.name] = fw.deliver(t, devices.get(s.device_id))
    return out


_FRAMEWORKS = {"pt": "torch", "torch": "torch", "pytorch": "torch",
               "np": "numpy", "numpy": "numpy"}


def framework(name):
    """Returns the framework adapter (ringload.numpy or ringload.torch's
    FRAMEWORK) for a safetensors framework name."""
    mod = _FRAMEWORKS.get(name) if isinstance(name, str) else None
    if mod is None:
        raise _errors.FrameworkError(
            _lib.RL_E_INVALID_ARG, f"framework {name} is invalid (given "
            f"{name!r}): use one of " + ", ".join(_FRAMEWORKS) +
            " (tensorflow, flax/jax, mlx and paddle are not implemented)")
    return importlib.import_module(f"ringload.{mod}").FRAMEWORK


_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _clear_own_frames(tb):
    """Drops the locals of this package's finished frames in tb: a caller
    holding the exception (an interactive session, pytest.raises) must not
    keep a failed load's staging alive through them."""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_PKG_DIR):
            try:
                tb.tb_frame.clear()
            except RuntimeError:  # still executing (a caller's frame)
                pass
        tb = tb.tb_next


def frees_on_error(fn):
    """Decorates a public entry point: on an exception, every partial
    result and staging area of the failed call is freed before it
    propagates (see _clear_own_frames)."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except BaseException as e:
            _clear_own_frames(e.__traceback__.tb_next)
            raise
    return wrapper



def load_whole(fw, filename, device, sha256=None, backend="auto"):
    """Every tensor of filename, whole, with framework fw on device (the
    load_file of both frameworks): {name: tensor} in sorted name order.
    Dtypes and sha256 (see _sha256.resolve) are checked before any byte is
    read; the library checks the files' SHA-256 as it reads them."""
    ckpt = _handles.Checkpoint(filename)
    spec = None
    try:
        for t in ckpt.tensors:
            fw.check(t.name, t.dtype, t.shape)
        expected = _sha256.resolve(ckpt, sha256)
        spec = _handles.Spec()
        out = fw.load(Job(ckpt, spec, 0, backend, None, None, expected),
                      {0: device})
    finally:
        ckpt.close()
        if spec is not None:
            spec.close()
    tensors = out.get(0, {})
    return {name: tensors[name] for name in sorted(tensors)}
