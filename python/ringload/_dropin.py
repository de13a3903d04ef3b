"""What the safetensors drop-ins take beyond ringload.load's arguments:

- load(data) of ringload.numpy and ringload.torch: a safetensors file
  given as bytes, as safetensors.numpy.load / safetensors.torch.load take
  it. The bytes go into an anonymous memory file (memfd_create), which the
  library opens by its /proc/self/fd path like any file (O_DIRECT does not
  apply there: it reads buffered). The results own their memory (the
  library's staging), not the memory file, which is closed on return.
- backend=, as safetensors 0.8's load_file and safe_open take it.
"""
import os

from . import _core, _errors, _lib


# safetensors' backends (mmap: ringload reads, it never maps) and ringload's
_BACKENDS = {"mmap": "auto", "pread": "pread", "auto": "auto",
             "io_uring": "io_uring", "libaio": "libaio"}


def backend(name):
    """Returns ringload's backend for a drop-in's backend= (safetensors'
    "mmap" or "pread", or ringload's "auto", "io_uring", "libaio"), with
    safetensors' TypeError for a non-str and its words for a bad name."""
    if not isinstance(name, str):
        what = "'None'" if name is None else f"'{type(name).__name__}' object"
        raise TypeError(f"argument 'backend': {what} is not an instance of 'str'")
    if name not in _BACKENDS:
        raise _errors.ArgumentError(
            _lib.RL_E_INVALID_ARG, f'backend "{name}" is invalid (expected one '
            "of: " + ", ".join(f'"{b}"' for b in _BACKENDS) + ")")
    return _BACKENDS[name]


def load_bytes(fw, data):
    """Loads every tensor of data (bytes, bytearray or memoryview: a whole
    safetensors file) with framework fw on the CPU; {name: tensor}.
    TypeError, as safetensors', for anything else."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        what = "'None'" if data is None else \
            f"'{type(data).__name__}' object"
        raise TypeError(f"argument 'bytes': {what} is not an instance of "
                        "'bytes'")
    fd = os.memfd_create("ringload-bytes", os.MFD_CLOEXEC)
    try:
        view = memoryview(data).cast("B")
        while view:
            view = view[os.write(fd, view):]
        return _core.load_whole(fw, f"/proc/self/fd/{fd}", None, None)
    finally:
        os.close(fd)
