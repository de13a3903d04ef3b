"""Safetensors dtypes in numpy and torch (docs/python.md has the table).

numpy holds BF16 and the F8 types only through ml_dtypes: when it is
installed they get its types. Without it the safetensors drop-ins
(numpy.load_file, numpy.load, safe_open "np") raise DtypeError as
safetensors fails there (a TypeError "data type 'bfloat16' not
understood", an AttributeError "module 'numpy' has no attribute
'float8_e4m3fn'"), never raw integers that look like numbers; ringload.load
(framework "np", its own API) gives raw unsigned views of the same width
(BF16 -> uint16, F8_* -> uint8), as documented there. F4 and F6
(sub-byte, packed) have no numpy type: numpy gets the packed bytes as uint8
along the last dimension.

torch gets its own dtype where the running torch has it (torch 1.13 has
bfloat16 but no float8 and no uint16/32/64; torch 2.x has them all, and F4
as float4_e2m1fn_x2, two values per element, as safetensors gives it);
otherwise DtypeError naming the tensor and the dtype. F6 has no torch type.
"""
import numpy as np

from . import _errors, _lib

try:  # optional: numpy types for bfloat16 and float8
    import ml_dtypes as _ml_dtypes
except ImportError:
    _ml_dtypes = None

_NUMPY = {
    "BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "I16": np.int16,
    "U16": np.uint16, "F16": np.float16, "I32": np.int32, "U32": np.uint32,
    "F32": np.float32, "F64": np.float64, "I64": np.int64, "U64": np.uint64,
    "C64": np.complex64,
}

# dtype -> (ml_dtypes attribute, raw fallback of the same width)
_NUMPY_ML = {
    "BF16": ("bfloat16", np.uint16),
    "F8_E5M2": ("float8_e5m2", np.uint8),
    "F8_E4M3": ("float8_e4m3fn", np.uint8),
    "F8_E8M0": ("float8_e8m0fnu", np.uint8),
    "F8_E4M3FNUZ": ("float8_e4m3fnuz", np.uint8),
    "F8_E5M2FNUZ": ("float8_e5m2fnuz", np.uint8),
}

SUBBYTE_BITS = {"F4": 4, "F6_E2M3": 6, "F6_E3M2": 6}

_TORCH = {
    "BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
    "U16": "uint16", "F16": "float16", "BF16": "bfloat16", "I32": "int32",
    "U32": "uint32", "F32": "float32", "F64": "float64", "I64": "int64",
    "U64": "uint64", "C64": "complex64", "F8_E5M2": "float8_e5m2",
    "F8_E4M3": "float8_e4m3fn", "F8_E8M0": "float8_e8m0fnu",
    "F8_E4M3FNUZ": "float8_e4m3fnuz", "F8_E5M2FNUZ": "float8_e5m2fnuz",
    "F4": "float4_e2m1fn_x2",
}


def dtype_error(name, dtype, why):
    """Returns the DtypeError for tensor name of safetensors dtype."""
    return _errors.DtypeError(_lib.RL_E_INVALID_ARG,
                              f"tensor '{name}': dtype {dtype} {why}")


class _NumpyAttributeError(_errors.DtypeError, AttributeError):
    """safetensors' AttributeError for an F8 dtype numpy lacks."""


def _ml_dtype(dtype):
    """The ml_dtypes type of dtype, or None (no ml_dtypes, or too old)."""
    return getattr(_ml_dtypes, _NUMPY_ML[dtype][0], None) if _ml_dtypes else None


def numpy_dtype(dtype):
    """Returns the numpy dtype that holds safetensors dtype (a name such as
    "BF16"): ml_dtypes' for BF16 and F8, or without it an unsigned type of
    the same width (element sizes only: numpy_shape refuses them); None for
    sub-byte dtypes (F4, F6_*)."""
    if dtype in _NUMPY:
        return np.dtype(_NUMPY[dtype])
    if dtype in _NUMPY_ML:
        ml = _ml_dtype(dtype)
        return np.dtype(ml if ml is not None else _NUMPY_ML[dtype][1])
    return None


def _numpy_lacks(name, dtype):
    """The DtypeError for a BF16 / F8 tensor without ml_dtypes' type for it:
    safetensors' exception type and words, and what to install."""
    attr = _NUMPY_ML[dtype][0]
    hint = "install ml_dtypes for numpy's bfloat16 and float8 types"
    if dtype == "BF16":
        return dtype_error(name, dtype, f"data type '{attr}' not understood "
                           f"({hint})")
    return _NumpyAttributeError(_lib.RL_E_INVALID_ARG, f"tensor '{name}': dtype "
                                f"{dtype}: module 'numpy' has no attribute "
                                f"'{attr}' ({hint})")


_MAX = 1 << 63  # numpy's and torch's sizes are signed 64-bit


def _too_large(name, shape, framework):
    return _errors.error(_lib.RL_E_TOO_LARGE, f"tensor '{name}': shape "
                         f"{list(shape)} is too large for {framework}")


def numpy_shape(name, dtype, shape, raw=True):
    """Returns the numpy shape of a tensor: its own, or for sub-byte dtypes
    the packed bytes along the last dimension. Raises DtypeError when numpy
    cannot hold it (with raw false, also for BF16 / F8 without ml_dtypes),
    ArgumentError (RL_E_TOO_LARGE) when the shape exceeds numpy's limits
    (every dimension, and the bytes of the non-zero ones, under 2^63)."""
    bits = SUBBYTE_BITS.get(dtype)
    if not raw and dtype in _NUMPY_ML and _ml_dtype(dtype) is None:
        raise _numpy_lacks(name, dtype)
    if bits is None:
        out, size = tuple(shape), numpy_dtype(dtype).itemsize
    elif not shape or shape[-1] * bits % 8:
        raise dtype_error(name, dtype, f"with shape {list(shape)}: its last "
                          "dimension does not fill whole bytes, so numpy cannot "
                          "hold its packed bytes")
    else:
        out, size = tuple(shape[:-1]) + (shape[-1] * bits // 8,), 1
    for d in out:
        size *= d or 1
        if d >= _MAX or size >= _MAX:
            raise _too_large(name, shape, "numpy")
    return out


def torch_dtype(torch, name, dtype):
    """Returns the torch dtype for tensor name of safetensors dtype, or
    raises DtypeError when the running torch has none."""
    attr = _TORCH.get(dtype)
    tdt = getattr(torch, attr, None) if attr else None
    if tdt is None:
        what = f"torch.{attr}" if attr else "a packed sub-byte type"
        raise dtype_error(name, dtype, f"has no torch dtype: torch "
                          f"{torch.__version__} lacks {what}")
    return tdt


def torch_shape(name, dtype, shape):
    """Returns the torch shape of a tensor: its own, or for F4 (torch's
    float4_e2m1fn_x2) the packed bytes along the last dimension, as
    safetensors gives it; DtypeError when they are not whole bytes."""
    if dtype in SUBBYTE_BITS:
        return numpy_shape(name, dtype, shape)
    return tuple(shape)


def torch_check(torch, name, dtype, shape):
    """Raises DtypeError when the running torch has no dtype for tensor
    name, ArgumentError (RL_E_TOO_LARGE) for a dimension of 2^63 or more."""
    torch_dtype(torch, name, dtype)
    if any(d >= _MAX for d in shape):
        raise _too_large(name, shape, "torch")
    torch_shape(name, dtype, shape)


def element_bytes(dtype):
    """Bytes per element of safetensors dtype (1 for the packed F4 and F6,
    whose arrays are bytes): the alignment a view of it needs."""
    if dtype in SUBBYTE_BITS:
        return 1
    npdt = _NUMPY.get(dtype) or _NUMPY_ML[dtype][1]
    return np.dtype(npdt).itemsize


def _aligned(raw, itemsize):
    """raw (uint8 bytes) itself when its address suits itemsize, else a
    copy: numpy and torch expect aligned elements."""
    if raw.size and raw.ctypes.data % itemsize:
        return raw.copy()
    return raw


def to_numpy(raw, name, dtype, shape, raw_ml=True):
    """Interprets raw (a uint8 array of the tensor's bytes, C order) as a
    numpy array of the tensor's shape; a view when aligned. raw_ml: see
    numpy_shape."""
    npdt = numpy_dtype(dtype)
    shape = numpy_shape(name, dtype, shape, raw_ml)
    if npdt is None:
        return raw.reshape(shape)
    return _aligned(raw, npdt.itemsize).view(npdt).reshape(shape)


def to_torch(torch, raw, name, dtype, shape):
    """Interprets raw (a uint8 array) as a CPU torch tensor of the tensor's
    shape, sharing raw's memory when aligned."""
    torch_check(torch, name, dtype, shape)
    tdt = torch_dtype(torch, name, dtype)
    shape = torch_shape(name, dtype, shape)
    if not raw.size:
        return torch.empty(shape, dtype=tdt)
    # numpy's holder of the dtype has torch's element size (every dtype
    # torch holds is whole bytes); asking torch would build a tensor per
    # call, the larger part of building a checkpoint's tensors.
    npdt = numpy_dtype(dtype)
    t = torch.from_numpy(_aligned(raw, npdt.itemsize if npdt else 1))
    return t.view(tdt).reshape(shape)


class NumpyArea:
    """A whole staging area (a uint8 array): a shard's array is then one
    numpy.ndarray over it (at), not a slice, a view and a reshape (three
    arrays) per shard; what arrays of one dtype and shape share is worked
    out once. raw: as numpy_shape's."""

    def __init__(self, staging, raw):
        self.staging = staging
        self.base = staging.ctypes.data
        self.raw = raw
        self.kinds = {}

    def at(self, offset, nbytes, name, dtype, shape):
        """The array of dtype and shape in the nbytes bytes at offset, as
        to_numpy makes it from them; None where to_numpy must make it
        (empty, or misaligned for its dtype: a copy)."""
        kind = self.kinds.get((dtype, shape))
        if kind is None:
            npdt = numpy_dtype(dtype)
            kind = self.kinds[dtype, shape] = (
                np.dtype(np.uint8) if npdt is None else npdt,
                numpy_shape(name, dtype, shape, self.raw))
        npdt, nshape = kind
        if not nbytes or (self.base + offset) % npdt.itemsize:
            return None
        return np.ndarray(nshape, npdt, self.staging, offset)


class TorchArea:
    """A whole staging area (a numpy uint8 array) seen by torch once, and
    once per dtype: a shard's tensor is then one as_strided of it (at),
    where building one from numpy per shard (from_numpy, view, reshape)
    was most of materializing a checkpoint of 20,000 small tensors."""

    def __init__(self, torch, staging):
        self.torch = torch
        self.u8 = torch.from_numpy(staging)
        self.base = self.u8.data_ptr()
        self.typed = {}
        self.kinds = {}

    def _typed(self, tdt):
        t = self.typed.get(tdt)
        if t is None:
            size = self.torch.empty((), dtype=tdt).element_size()
            n = self.u8.numel() // size * size
            view = self.u8[:n].view(tdt)
            t = self.typed[tdt] = (view, size, view.storage_offset())
        return t

    def _kind(self, name, dtype, shape):
        """What every tensor of dtype and shape shares: torch dtype and
        shape, C-order strides, the area's typed view; raises as to_torch
        for a dtype or shape torch cannot hold."""
        tdt = torch_dtype(self.torch, name, dtype)
        if any(d >= _MAX for d in shape):
            raise _too_large(name, shape, "torch")
        tshape = torch_shape(name, dtype, shape)
        strides, step = [0] * len(tshape), 1
        for d in range(len(tshape) - 1, -1, -1):
            strides[d] = step
            step *= tshape[d]
        return (tdt, tshape, strides) + self._typed(tdt)

    def at(self, offset, nbytes, name, dtype, shape):
        """The CPU tensor of dtype and shape in the nbytes bytes at offset,
        as to_torch makes it from them; None when its address does not
        suit its dtype (to_torch copies it). What tensors of one dtype and
        shape share is worked out once (many small tensors mostly share
        a few)."""
        kind = self.kinds.get((dtype, shape))
        if kind is None:
            kind = self.kinds[dtype, shape] = self._kind(name, dtype, shape)
        tdt, tshape, strides, typed, size, first = kind
        if not nbytes:
            return self.torch.empty(tshape, dtype=tdt)
        if (self.base + offset) % size or offset % size:
            return None
        return self.torch.as_strided(typed, tshape, strides,
                                     first + offset // size)


# ---- dtype= of the loads: conversion on load (RL_PLAN_DTYPE) ----

_CONVERT_NAMES = {"f32": "F32", "float32": "F32", "float": "F32",
                  "f16": "F16", "float16": "F16", "half": "F16",
                  "bf16": "BF16", "bfloat16": "BF16"}


def convert_to(dtype):
    """The safetensors name ("F32", "F16", "BF16") a dtype= argument asks
    every floating tensor to be converted to, or None (as stored). Takes
    torch dtypes, numpy and ml_dtypes dtypes (and their types) and the
    names ("F16", "float16", "bfloat16", ...); ArgumentError otherwise."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        key = dtype
    elif type(dtype).__module__ == "torch":  # torch.float16 -> "torch.float16"
        key = str(dtype)
    else:
        try:
            key = np.dtype(dtype).name
        except TypeError:
            key = repr(dtype)
    key = key.lower()
    key = key[len("torch."):] if key.startswith("torch.") else key
    if key in _CONVERT_NAMES:
        return _CONVERT_NAMES[key]
    raise _errors.ArgumentError(
        _lib.RL_E_INVALID_ARG, f"dtype={dtype!r}: ringload converts floating "
        "tensors to F32, F16 or BF16 (torch.float32/float16/bfloat16, numpy "
        "float32/float16, ml_dtypes.bfloat16, or those names)")


def loaded(dtype, to):
    """The dtype a tensor of safetensors dtype has once loaded with
    dtype=to: to where the library converts it, else its own (the
    library's rule, rl_dtype_convert; other floating types fail the plan
    with RL_E_DTYPE)."""
    if to is None or dtype == to:
        return dtype
    code = _lib.DTYPES.index
    if _lib.rl_dtype_convert(code(dtype), code(to), None, None, 0) == 0:
        return to
    return dtype

