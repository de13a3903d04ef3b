"""What a load must give, computed independently of ringload: expected
dtypes per framework, and each device's box of each tensor under a sharding
spec (docs/sharding-spec.md: chunks of ceil(dim / n), the device's chunk
index its row-major mesh coordinate over the dimension's axes)."""
import hashlib
import math
import re

import numpy as np

from stfile import DTYPES

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

_ML = {"BF16": "bfloat16", "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
       "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
       "F8_E5M2FNUZ": "float8_e5m2fnuz"}
_TORCH = {"BOOL": "bool", "U8": "uint8", "I8": "int8", "I16": "int16",
          "U16": "uint16", "F16": "float16", "BF16": "bfloat16",
          "I32": "int32", "U32": "uint32", "F32": "float32", "F64": "float64",
          "I64": "int64", "U64": "uint64", "C64": "complex64",
          "F8_E5M2": "float8_e5m2", "F8_E4M3": "float8_e4m3fn",
          "F8_E8M0": "float8_e8m0fnu", "F8_E4M3FNUZ": "float8_e4m3fnuz",
          "F8_E5M2FNUZ": "float8_e5m2fnuz"}


def numpy_expect(dtype, shape):
    """(numpy dtype, shape) that ringload.numpy must give, or None when
    numpy cannot hold it (a packed last dimension off whole bytes)."""
    bits, raw = DTYPES[dtype]
    if raw is None:  # F4 / F6: packed bytes along the last dimension
        if not shape or shape[-1] * bits % 8:
            return None
        return np.dtype(np.uint8), tuple(shape[:-1]) + (shape[-1] * bits // 8,)
    ml = getattr(ml_dtypes, _ML.get(dtype, ""), None) if ml_dtypes else None
    return np.dtype(ml if ml is not None else raw), tuple(shape)


def torch_expect(torch, dtype, shape=None):
    """The torch dtype ringload.torch must give, or None (DtypeError). F4
    (torch 2.x's float4_e2m1fn_x2, two values an element) only with a
    shape whose last dimension is even."""
    if dtype == "F4":
        if not shape or shape[-1] % 2:
            return None
        return getattr(torch, "float4_e2m1fn_x2", None)
    return getattr(torch, _TORCH.get(dtype, "-"), None)


def torch_shape(dtype, shape):
    """The shape of ringload.torch's tensor: F4's last dimension halved."""
    shape = tuple(shape)
    return shape[:-1] + (shape[-1] // 2,) if dtype == "F4" else shape


def as_bytes(t):
    """The bytes of a numpy array or torch tensor, C order."""
    if isinstance(t, np.ndarray):
        return np.ascontiguousarray(t).tobytes() if t.ndim else t.tobytes()
    t = t.detach().cpu().contiguous()
    try:
        return t.numpy().tobytes()
    except TypeError:  # bfloat16, float8: numpy has no such type
        import torch
        same = {1: torch.uint8, 2: torch.int16}[t.element_size()]
        return t.view(same).numpy().tobytes()


def sha256(b):
    return hashlib.sha256(b).hexdigest()


def _coords(mesh, index):
    """Row-major mesh coordinates of the device at position index."""
    out = []
    for size in reversed(mesh["shape"]):
        out.append(index % size)
        index //= size
    return dict(zip(mesh["axes"], reversed(out)))


def _partition(spec, name):
    for rule in spec.get("rules", []):
        if re.fullmatch(rule["match"], name):
            return rule["spec"]
    return []


def boxes(spec, name, shape):
    """{device_id: [(start, stop)] per dimension} for every device."""
    mesh = spec.get("mesh", {"shape": [1], "axes": ["_"]})
    ndev = math.prod(mesh["shape"])
    ids = mesh.get("devices", list(range(ndev)))
    part = _partition(spec, name)
    out = {}
    for pos, dev in enumerate(ids):
        coord = _coords(mesh, pos)
        box = []
        for d, size in enumerate(shape):
            axes = part[d] if d < len(part) else None
            axes = [] if axes is None else [axes] if isinstance(axes, str) else axes
            n = math.prod(mesh["shape"][mesh["axes"].index(a)] for a in axes)
            chunk = -(-size // n)
            i = 0
            for a in axes:
                i = i * mesh["shape"][mesh["axes"].index(a)] + coord[a]
            box.append((min(i * chunk, size), min((i + 1) * chunk, size)))
        out[dev] = box
    return out


def devices_of(spec, process):
    """Device ids of process, in mesh order."""
    mesh = spec.get("mesh", {"shape": [1]})
    ndev = math.prod(mesh["shape"])
    ids = mesh.get("devices", list(range(ndev)))
    procs = mesh.get("process_of_device", [0] * ndev)
    return [d for d, p in zip(ids, procs) if p == process]


def numpy_refuses(dtype):
    """True when the numpy drop-ins (ringload.numpy.load_file, safe_open
    "np") refuse dtype, as safetensors: BF16 / F8 without ml_dtypes."""
    return dtype in _ML and getattr(ml_dtypes, _ML[dtype], None) is None


def numpy_load_file(path):
    """ringload.numpy.load_file(path) where numpy holds every dtype (with
    ml_dtypes), else ringload.load's numpy results in name order (BF16 / F8
    as raw unsigned arrays): the same bytes either way, for the tests that
    check bytes (test_errors checks the drop-ins' refusal)."""
    import ringload
    import ringload.numpy
    try:
        return ringload.numpy.load_file(path)
    except ringload.DtypeError as e:
        if "ml_dtypes" not in str(e):
            raise
    got = ringload.load(path, framework="np")[0]
    return {name: got[name] for name in sorted(got)}
