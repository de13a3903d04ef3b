"""An independent safetensors reader and writer for the tests: a few lines
of struct + json + numpy, sharing nothing with ringload (the reference
fixtures' MANIFEST.json checks this reader in turn)."""
import json
import struct

import numpy as np

# dtype -> (element bits, numpy dtype of the raw elements)
DTYPES = {
    "BOOL": (8, "bool"), "U8": (8, "uint8"), "I8": (8, "int8"),
    "F8_E5M2": (8, "uint8"), "F8_E4M3": (8, "uint8"), "F8_E8M0": (8, "uint8"),
    "F8_E4M3FNUZ": (8, "uint8"), "F8_E5M2FNUZ": (8, "uint8"),
    "I16": (16, "int16"), "U16": (16, "uint16"), "F16": (16, "float16"),
    "BF16": (16, "uint16"), "I32": (32, "int32"), "U32": (32, "uint32"),
    "F32": (32, "float32"), "F64": (64, "float64"), "I64": (64, "int64"),
    "U64": (64, "uint64"), "C64": (64, "complex64"),
    "F4": (4, None), "F6_E2M3": (6, None), "F6_E3M2": (6, None),
}


def read(path):
    """Returns (tensors, metadata): {name: (dtype, shape, bytes)} and the
    __metadata__ dict (or None)."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in header.items():
        a, b = info["data_offsets"]
        out[name] = (info["dtype"], tuple(info["shape"]), blob[base + a:base + b])
    return out, meta


def write(path, tensors, metadata=None, pad=True):
    """Writes {name: (dtype, shape, bytes)} in the given order; pad: the
    header is padded with spaces to a multiple of 8 (as safetensors does)."""
    header, off = {}, 0
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [off, off + len(data)]}
        off += len(data)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, _, data in tensors.values():
            f.write(data)


def write_sparse(path, name, dtype, shape):
    """Writes one tensor of zeros as a sparse file: its bytes take no disk
    and read at memory speed."""
    nbytes = int(np.prod(shape, dtype=np.uint64)) * DTYPES[dtype][0] // 8
    h = json.dumps({name: {"dtype": dtype, "shape": list(shape),
                           "data_offsets": [0, nbytes]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        f.truncate(8 + len(h) + nbytes)


def elements(dtype, shape, data):
    """The tensor's bytes as a numpy array of shape + (element bytes,), for
    slicing boxes bytewise (dtypes of whole bytes only)."""
    bits, _ = DTYPES[dtype]
    return np.frombuffer(data, np.uint8).reshape(tuple(shape) + (bits // 8,))


def box_bytes(dtype, shape, data, box):
    """The bytes of box [(start, stop)] of a tensor, C order."""
    e = elements(dtype, shape, data)
    return e[tuple(slice(a, b) for a, b in box)].tobytes()
