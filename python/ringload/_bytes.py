"""load(data) of ringload.numpy and ringload.torch: a safetensors file
given as bytes, as safetensors.numpy.load / safetensors.torch.load take it.

The bytes go into an anonymous memory file (memfd_create), which the
library opens by its /proc/self/fd path like any file (O_DIRECT does not
apply there: it reads buffered). The results own their memory (the
library's staging), not the memory file, which is closed on return.
"""
import os

from . import _core


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
