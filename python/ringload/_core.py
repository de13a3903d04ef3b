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
import contextlib
import ctypes
import functools
import gc
import importlib
import os
import re

import numpy as np

from . import _dtypes, _errors, _handles, _lib, _mapped, _sha256

Job = collections.namedtuple(
    "Job", "ckpt spec process backend options progress sha256 stats copy",
    defaults=((), None, False))
Job.__doc__ = """What to load: open Checkpoint and Spec, process, loader
backend and options, progress callable (or None), expected SHA-256 values
([(file, hex)], _sha256.resolve), a dict to fill with the load's
statistics (Loader.stats; None: not wanted), copy (True: CPU results own
their memory, the staging is freed once they are made)."""

# Caller staging at least this large is 4096-aligned so that reads can go
# straight into it (docs/engine.md); smaller areas are allocated exactly,
# since alignment would cost up to 4 KiB per tensor.
_ALIGN_FROM = 1 << 20
_ALIGN = 4096


class Loaded:
    """Shards of one run and the staging bytes of each device; copy: the
    results are to own their memory (materialize)."""

    def __init__(self, shards, device_ids, staging, copy=False, stats=None):
        self.shards = shards
        self.device_ids = device_ids
        self.staging = staging
        self.copy = copy
        self.stats = stats  # the loader's statistics (load_library)

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
        _sha256.warn_unchecked(loader, job.ckpt)
    except BaseException:
        loader.close()
        raise
    try:
        shards, devices = plan.shards(), plan.devices()
        if job.stats is not None:
            job.stats.update(loader.stats(job.ckpt))
    finally:
        plan.close()
    staging = [_library_staging(loader, d) for d in range(len(devices))]
    return Loaded(shards, [i for i, _ in devices], staging, job.copy,
                  loader.stats(job.ckpt))


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
        _sha256.warn_unchecked(loader, job.ckpt)
    finally:
        plan.close()
        if loader is not None:
            loader.close()
    return Loaded(shards, [i for i, _ in devices], staging)


def materialize(fw, loaded, devices):
    """Converts every shard of loaded with framework fw and delivers it to
    devices[device_id] (default "cpu"); returns {device_id: {name: t}}.
    With loaded.copy, CPU results are copies (fw.own) that hold nothing of
    the staging, which goes with loaded."""
    out = {i: {} for i in loaded.device_ids}
    # A framework that can (torch, numpy) views each area once and slices it.
    areas = [None if a is None or not hasattr(fw, "convert_at") else
             fw.area(a) for a in loaded.staging]
    for s in loaded.shards:
        device = devices.get(s.device_id)
        area = areas[s.device] if s.nbytes else None
        t = None if area is None else fw.convert_at(
            area, s.offset, s.nbytes, s.name, s.dtype, s.box)
        if t is None:
            t = fw.convert(loaded.raw(s), s.name, s.dtype, s.box)
        t = fw.deliver(t, device)
        if loaded.copy and device is None:
            t = fw.own(t)
        out[s.device_id][s.name] = t
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



def check_stats(stats):
    """Returns stats, None or a dict (the stats= argument: a dict the load
    fills with its statistics); ArgumentTypeError otherwise."""
    if stats is not None and not isinstance(stats, dict):
        raise _errors.ArgumentTypeError(
            _lib.RL_E_INVALID_ARG, "stats: a dict to fill with the load's "
            f"statistics, not {type(stats).__name__}")
    return stats


def check_copy(copy):
    """Returns copy, a bool (the copy= argument); ArgumentTypeError
    otherwise: bool("no") is True."""
    if not isinstance(copy, bool):
        raise _errors.ArgumentTypeError(
            _lib.RL_E_INVALID_ARG, "copy: True or False, not "
            f"{type(copy).__name__} {copy!r}")
    return copy


def run(fw, job, devices):
    """Returns fw.load(job, devices); job.stats, the caller's dict, is
    updated only once the whole load succeeded (the statistics are read
    before the tensors are made, which may still fail)."""
    stats = None if job.stats is None else {}
    out = fw.load(job._replace(stats=stats), devices)
    if stats is not None:
        job.stats.update(stats)
    return out


_NOT_FOUND = re.compile(r"(.*): cannot open: No such file or directory")


def open_dropin(filename):
    """The Checkpoint of a drop-in's filename (load_file, safe_open); a
    file that does not exist is FileNotFoundError in safetensors' words,
    "No such file or directory: NAME" (its own test compares them)."""
    try:
        return _handles.Checkpoint(filename)
    except _errors.FileNotFoundSysError as e:
        m = _NOT_FOUND.fullmatch(e.message)
        if m:
            e.message = f"No such file or directory: {m[1]}"
            e.args, e.filename = (e.errno, e.message), m[1]
        raise


_READ_MODES = {"auto": "RL_DIRECT_AUTO", "direct": "RL_DIRECT_ON",
               "buffered": "RL_DIRECT_OFF"}


def read_mode_options(read_mode):
    """The loader options of a load_file's read_mode ("auto", "direct",
    "buffered"; None: the library's default, auto): {"direct": RL_DIRECT_*};
    ArgumentError naming any other value."""
    if read_mode is None:
        return None
    if not isinstance(read_mode, str) or read_mode not in _READ_MODES:
        raise _errors.ArgumentError(
            _lib.RL_E_INVALID_ARG, f"read_mode {read_mode!r}: not one of "
            + ", ".join(_READ_MODES))
    return {"direct": _lib.NAMES[_READ_MODES[read_mode]]}


@contextlib.contextmanager
def gc_paused():
    """The cyclic garbage collector off for the block (back on after it,
    unless it was off). A load builds a few objects per tensor (the
    checkpoint's and plan's namedtuples, then the tensors); the block's
    temporaries are freed by their reference counts when it ends, but
    while they live they count towards the collector's thresholds: a load
    of 20,000 tensors set off a full collection of the whole heap (70-115
    ms after importing torch) that safetensors' load of the same file does
    not. Paused, only what the block returns is left to count."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def load_whole(fw, filename, device, sha256=None, stats=None, copy=False,
               backend="auto", dtype=None, read_mode=None):
    """Every tensor of filename, whole, with framework fw on device (the
    load_file of both frameworks): {name: tensor} in sorted name order.
    Dtypes and sha256 (see _sha256.resolve) are checked before any byte is
    read; the library checks the files' SHA-256 as it reads them. stats:
    a dict to fill with the load's statistics (check_stats); copy: CPU
    results own their memory (Job); dtype: every floating tensor
    converted to it as it loads (_dtypes.convert_to; None: as stored);
    read_mode: read_mode_options.

    A checkpoint the page cache holds whole is mapped, not read (_mapped,
    as safetensors does): for CPU results with the default backend and
    read mode, no stats, no copy and no file with an expected SHA-256 from any source,
    given or named by the Hugging Face cache layout (those are read and
    verified, never mapped unchecked)."""
    with gc_paused():
        return _load_whole(fw, filename, device, sha256, stats, copy, backend,
                           dtype, read_mode)


def _load_whole(fw, filename, device, sha256, stats, copy, backend, dtype,
                read_mode):
    check_stats(stats)
    check_copy(copy)
    to = _dtypes.convert_to(dtype)
    options = read_mode_options(read_mode)
    ckpt = open_dropin(filename)
    spec = None
    try:
        checked = set()
        for t in ckpt.tensors:  # the check depends on dtype and shape alone
            if (t.dtype, t.shape) not in checked:
                fw.check(t.name, _dtypes.loaded(t.dtype, to), t.shape)
                checked.add((t.dtype, t.shape))
        expected = _sha256.resolve(ckpt, sha256)
        hot = None
        if (device is None and stats is None and not copy and backend == "auto"
                and to is None and options is None
                and not _sha256.to_hash(ckpt, expected)):
            hot = _mapped.mapped(ckpt)
        if hot is not None:
            out = materialize(fw, Loaded(hot[0], [0], hot[1]), {})
        else:
            spec = _handles.Spec()
            spec.set_dtype(to)
            out = run(fw, Job(ckpt, spec, 0, backend, options, None,
                              expected, stats, copy), {0: device})
    finally:
        ckpt.close()
        if spec is not None:
            spec.close()
    tensors = out.get(0, {})
    return {name: tensors[name] for name in sorted(tensors)}
