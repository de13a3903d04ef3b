"""ringload.numpy: safetensors.numpy's load_file on ringload.

    from ringload.numpy import load_file
    tensors = load_file("model.safetensors")   # {name: numpy.ndarray}

The arrays are zero-copy views of the library's staging (one area for the
whole checkpoint): any one of them keeps that whole area alive; copy() an
array to keep it alone, or pass copy=True for arrays that own their memory
(the staging is freed before load_file returns). BF16 and F8 tensors are
ml_dtypes arrays when ml_dtypes is installed; without it load_file and load
raise DtypeError as safetensors does (ringload.load gives raw uint16 /
uint8 arrays); F4 / F6 give their packed bytes (docs/python.md).
"""
from . import _core, _dropin, _dtypes, _errors, _lib


class _Numpy:
    """The numpy adapter: conversion from staging bytes, devices (CPU).
    raw: BF16 / F8 without ml_dtypes as raw unsigned arrays (ringload.load)
    rather than safetensors' errors (the drop-ins: drop_in)."""
    name = "numpy"

    def __init__(self, raw):
        self.raw = raw
        self.drop_in = self if not raw else _Numpy(raw=False)

    def check(self, name, dtype, shape):
        """Raises DtypeError when numpy cannot hold tensor name
        (ArgumentError when its shape is too large)."""
        _dtypes.numpy_shape(name, dtype, shape, self.raw)

    def convert(self, raw, name, dtype, shape):
        """Returns raw (uint8 bytes) as an array of dtype and shape."""
        return _dtypes.to_numpy(raw, name, dtype, shape, self.raw)

    def area(self, staging):
        """A whole staging area (a uint8 array), for convert_at."""
        return _dtypes.NumpyArea(staging, self.raw)

    def convert_at(self, area, offset, nbytes, name, dtype, shape):
        """The array of dtype and shape at offset in area (area()'s), or
        None where convert must make it (empty, misaligned)."""
        return area.at(offset, nbytes, name, dtype, shape)

    def device(self, device):
        """Validates a device argument: numpy arrays live on the CPU."""
        if device is None or device == "cpu":
            return None
        raise _errors.DeviceError(  # safetensors' words first
            _lib.RL_E_INVALID_ARG, f"Device {device} is not supported for "
            f"framework numpy (given {device!r}: numpy arrays live on the CPU)")

    def deliver(self, t, device):
        """Returns t: numpy results stay on the host."""
        return t

    def contiguous(self, t):
        """Returns t, or a C-contiguous copy of it."""
        return t if t.flags.c_contiguous else t.copy(order="C")

    def own(self, t):
        """Returns a copy of t that owns its memory."""
        return t.copy()

    advanced_indexing = False  # get_slice: basic indexing only

    def index_check(self, shape, key):
        """Nothing: _index.normalize checks numpy's indexes."""

    def load(self, job, devices):
        """Loads job; returns {device_id: {name: array}} (zero-copy)."""
        return _core.materialize(self, _core.load_library(job), devices)


FRAMEWORK = _Numpy(raw=True)


@_core.frees_on_error
def load_file(filename, *, backend="mmap", sha256=None, stats=None,
              copy=False, dtype=None, read_mode=None):
    """Loads every tensor of a safetensors file (or a directory of them, or
    a model.safetensors.index.json) as numpy arrays.

    Same signature and result as safetensors.numpy.load_file: a dict
    {name: numpy.ndarray} in sorted name order. Raises an ringload.Error
    subclass carrying the C error code and message (HeaderError for a
    malformed file, FileNotFoundError-derived SysError, DtypeError for an
    F4/F6 tensor whose last dimension does not fill whole bytes, and for
    BF16 / F8 without ml_dtypes, as safetensors).

    backend: safetensors' "mmap" (ringload reads: its "auto") or "pread",
    or ringload's "auto", "io_uring", "libaio".

    sha256 (keyword only, not in safetensors): the expected SHA-256 of the
    checkpoint's files, as ringload.load takes it; a mismatch raises
    IntegrityError (RL_E_CHECKSUM) naming the file and both values.

    stats (keyword only): a dict, filled with the load's statistics, as
    ringload.load fills it. copy (keyword only): True gives arrays that own
    their memory (the staging is freed before load_file returns).

    dtype (keyword only): numpy.float32, numpy.float16, ml_dtypes.bfloat16
    (or "F32", "F16", "BF16", torch's dtypes): every floating tensor is
    converted to it as it loads, bit for bit as torch's .to() (integers
    and bool as stored; ringload.load's dtype).

    read_mode (keyword only): "auto" (the library's default: O_DIRECT,
    buffered for files the page cache holds), "direct" (O_DIRECT where
    the file system allows it) or "buffered" (through the page cache,
    with the kernel's readahead); RL_OPT_DIRECT. The load's stats say per
    file how it was read ("mode") and why ("why").
    """
    return _core.load_whole(FRAMEWORK.drop_in, filename, None, sha256,
                            stats, copy, _dropin.backend(backend), dtype,
                            read_mode)


@_core.frees_on_error
def load(data, *, dtype=None):
    """Loads every tensor of a safetensors file given as bytes (bytearray
    and memoryview too) as numpy arrays, as safetensors.numpy.load:
    {name: numpy.ndarray} in sorted name order, the errors of load_file;
    dtype as load_file's."""
    return _dropin.load_bytes(FRAMEWORK.drop_in, data, dtype)
