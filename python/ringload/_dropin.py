"""What the safetensors drop-ins take beyond ringload.load's arguments:

- load(data) of ringload.numpy and ringload.torch: a safetensors file
  given as bytes, as safetensors.numpy.load / safetensors.torch.load take
  it. The bytes go into an anonymous memory file (memfd_create), which the
  library opens by its /proc/self/fd path like any file (O_DIRECT does not
  apply there: it reads buffered); an error names it "load(bytes)". The
  results own their memory (the library's staging), not the memory file,
  which is closed on return.
- backend=, as safetensors 0.8's load_file and safe_open take it.
- metadata() of safe_open: {} for an empty __metadata__ object, as
  safetensors, which the library cannot tell from none (has_metadata).
"""
import json
import os

from . import _core, _errors, _lib


# safetensors' backends (mmap: ringload reads, it never maps) and ringload's
_BACKENDS = {"mmap": "auto", "pread": "pread", "auto": "auto",
             "io_uring": "io_uring", "libaio": "libaio"}


def type_error(arg, value, want="str"):
    """safetensors' TypeError for argument arg given value, not a want."""
    what = "'None'" if value is None else f"'{type(value).__name__}' object"
    return TypeError(f"argument '{arg}': {what} is not an instance of '{want}'")


def str_arg(arg, value):
    """Returns value, a str, or raises safetensors' TypeError for arg."""
    if not isinstance(value, str):
        raise type_error(arg, value)
    return value


def backend(name):
    """Returns ringload's backend for a drop-in's backend= (safetensors'
    "mmap" or "pread", or ringload's "auto", "io_uring", "libaio"), with
    safetensors' TypeError for a non-str and its words for a bad name."""
    if str_arg("backend", name) not in _BACKENDS:
        raise _errors.ArgumentError(
            _lib.RL_E_INVALID_ARG, f'backend "{name}" is invalid (expected one '
            "of: " + ", ".join(f'"{b}"' for b in _BACKENDS) + ")")
    return _BACKENDS[name]


def load_bytes(fw, data, dtype=None):
    """Loads every tensor of data (bytes, bytearray or memoryview: a whole
    safetensors file) with framework fw on the CPU; {name: tensor}
    (floating ones converted to dtype, _core.load_whole). TypeError, as
    safetensors', for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise type_error("bytes", data, "bytes")
    fd = os.memfd_create("ringload-bytes", os.MFD_CLOEXEC)
    path = f"/proc/self/fd/{fd}"
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view):]
        return _core.load_whole(fw, path, None, None, dtype=dtype)
    except _errors.Error as e:  # named as the caller knows it
        e.message = e.message.replace(path, "load(bytes)")
        e.args = (e.message,)
        raise
    finally:
        os.close(fd)


def has_metadata(paths):
    """Whether the header of a file of paths holds a __metadata__ object:
    safetensors' metadata() is {} for an empty one and None where there is
    none or it is null; the library merges the files' metadata and cannot
    tell those apart. Reads a header (checked by the library on open) only
    where its bytes name __metadata__."""
    for path in paths:
        with open(path, "rb") as f:
            header = f.read(int.from_bytes(f.read(8), "little"))
        if b'"__metadata__"' in header and \
                isinstance(json.loads(header).get("__metadata__"), dict):
            return True
    return False
