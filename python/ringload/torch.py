"""ringload.torch: safetensors.torch's load_file on ringload, and the
PyTorch adapter of safe_open and ringload.load.

    from ringload.torch import load_file
    tensors = load_file("model.safetensors", device="cpu")

CPU tensors are zero-copy views of the library's staging (any one keeps the
whole area alive; clone() one to keep it alone). Importing this module
imports torch but nothing that needs a GPU.

Devices: "cpu", "cuda", "cuda:N", an int N (cuda:N, as safetensors), a
torch.device, or another torch device type, which torch's .to() handles.
A CUDA device streams (_deliver_streaming, docs/streaming.md): a window
pool pinned by torch, pieces pulled from the library, copy_(non_blocking=
True) on a copy stream, each piece released when its copy's event fired;
host memory stays within the budget. The loader option staging_budget
(ringload.load(..., options={"staging_budget": N})) streams CPU targets
the same way, into tensors torch owns.
"""
import collections

import torch

from . import _core, _dropin, _dtypes, _errors, _index, _lib, _stream


def _device_error(device, why):
    # safetensors' words ("device foo is invalid"), and the value as given
    msg = f"device {device} {why}"
    if repr(device) not in msg:
        msg += f" (given {device!r})"
    return _errors.DeviceError(_lib.RL_E_INVALID_ARG, msg)


def parse_device(device):
    """Returns the torch.device for a device argument (str, int,
    torch.device), checking that a CUDA device exists; DeviceError if not."""
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, int) and not isinstance(device, bool):
        if device < 0:
            raise _device_error(device, "is invalid (negative index)")
        dev = torch.device("cuda", device)
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError) as e:
            raise _device_error(device, f"is invalid ({e})") from None
    else:
        raise _device_error(device, "is invalid: give a str, an int or a "
                            "torch.device")
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise _device_error(device, "is not available: "
                                "torch.cuda.is_available() is False")
        if dev.index is not None and dev.index >= torch.cuda.device_count():
            raise _device_error(device, f"is not available: "
                                f"{torch.cuda.device_count()} CUDA devices")
    return dev


def _to_device(t, device):
    """Copies a host tensor to device (the non-streaming path)."""
    return t.to(device)


class _Copier:
    """Copies pieces into their shards' byte tensors and releases each piece
    once its copy is done: at once for a CPU target; for a CUDA target, the
    copy is copy_(non_blocking=True) from the pinned window on a copy stream
    and the piece is released when the copy's event has fired."""

    def __init__(self, load, cuda):
        self.load = load
        self.pending = collections.deque()
        self.stream = torch.cuda.Stream() if cuda else None  # GPU only

    def copy(self, dst, piece):
        """Copies piece into dst (a uint8 tensor of its length)."""
        src = torch.from_numpy(_stream.piece_array(piece))
        if self.stream is None or not dst.is_cuda:
            dst.copy_(src)
            self.load.release(piece)
            return
        with torch.cuda.stream(self.stream):  # GPU only, to the end
            dst.copy_(src, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        self.pending.append((event, piece))
        self.poll()

    def poll(self):
        """Releases the pieces whose copies finished; True if any."""
        freed = False
        while self.pending and self.pending[0][0].query():  # GPU only
            self.load.release(self.pending.popleft()[1])
            freed = True
        return freed

    def idle(self):
        """No piece is ready: waits for the oldest copy (its window may be
        the one the loader needs). True when it released something."""
        if not self.pending:
            return False
        if self.poll():  # GPU only, to the end
            return True
        event, piece = self.pending.popleft()
        event.synchronize()
        self.load.release(piece)
        return True

    def drain(self):
        """Waits for every copy and releases its piece; later work on the
        current stream sees the copies."""
        while self.pending:  # GPU only, to the end
            event, piece = self.pending.popleft()
            event.synchronize()
            self.load.release(piece)
        if self.stream is not None:
            torch.cuda.current_stream().wait_stream(self.stream)


def _shaped(u8, shard):
    """The shard's bytes (a uint8 tensor) as its dtype and box shape."""
    tdt = _dtypes.torch_dtype(torch, shard.name, shard.dtype)
    shape = _dtypes.torch_shape(shard.name, shard.dtype, shard.box)
    if not u8.numel():
        return torch.empty(shape, dtype=tdt, device=u8.device)
    return u8.view(tdt).reshape(shape)


def _deliver_streaming(job, devices, cuda):
    """The streaming delivery (docs/streaming.md): every shard's tensor is
    allocated on its device first; the pieces are pulled from a window pool
    of the budget (loader option staging_budget, else the library's default)
    -- pinned by torch when a target is CUDA -- copied into place and
    released; host memory stays within the budget."""
    budget = int((job.options or {}).get("staging_budget") or
                 _lib.rl_loader_default_budget())
    pool = None
    if cuda:  # GPU only: pinned windows for copy_(non_blocking=True)
        pool = torch.empty(budget, dtype=torch.uint8, pin_memory=True)
    with _stream.StreamingLoad(job, budget, None if pool is None else
                               (pool.data_ptr(), budget)) as load:
        for s in load.shards:
            _dtypes.torch_check(torch, s.name, s.dtype, s.box)
        dst = [torch.empty(s.nbytes, dtype=torch.uint8,
                           device=devices.get(s.device_id) or "cpu")
               for s in load.shards]
        copier = _Copier(load, cuda)
        try:
            for piece in load.pieces(copier.idle if cuda else None):
                end = piece.offset + piece.length
                copier.copy(dst[piece.shard][piece.offset:end], piece)
        finally:
            copier.drain()
        out = {i: {} for i, _ in load.devices}
    for s in load.shards:
        out[s.device_id][s.name] = _shaped(dst[s.index], s)
    return out


def _deliver(job, devices):
    """Loads job and delivers every shard to its device (devices: device
    id -> torch.device; absent: CPU). Returns {device_id: {name: tensor}}.

    With a CUDA target, or the loader option staging_budget, the load
    streams (_deliver_streaming): host memory stays within the budget.
    Otherwise the whole process's shards land in host staging and CPU
    shards are zero-copy views of it (the staging lives while they do).
    """
    cuda = any(getattr(d, "type", None) == "cuda" for d in devices.values())
    if cuda or "staging_budget" in (job.options or {}):
        return _deliver_streaming(job, devices, cuda)
    return _core.materialize(FRAMEWORK, _core.load_library(job), devices)


class _Torch:
    """The PyTorch adapter: dtypes, devices and delivery."""
    name = "torch"

    def check(self, name, dtype, shape):
        """Raises DtypeError when this torch has no dtype for tensor name
        (ArgumentError when its shape is too large)."""
        _dtypes.torch_check(torch, name, dtype, shape)

    def convert(self, raw, name, dtype, shape):
        """Returns raw (uint8 bytes) as a CPU tensor of dtype and shape."""
        return _dtypes.to_torch(torch, raw, name, dtype, shape)

    def device(self, device):
        """Parses a device argument (parse_device); None for the CPU."""
        dev = parse_device(device)
        return None if dev.type == "cpu" else dev

    def deliver(self, t, device):
        """Returns t on device (None: stays on the CPU)."""
        return t if device is None else _to_device(t, device)

    def contiguous(self, t):
        """Returns t, or a contiguous copy of it."""
        return t.contiguous()

    advanced_indexing = True  # get_slice takes what torch takes

    def index_check(self, shape, key):
        """Raises torch's own error for an index a tensor of shape refuses
        (as a SliceError): indexes a zero-stride tensor of that shape,
        which holds no memory."""
        try:
            torch.empty((), dtype=torch.uint8).expand(tuple(shape))[key]
        except (IndexError, ValueError, TypeError) as e:
            raise _index.framework_error(e) from None

    def load(self, job, devices):
        """Loads job; returns {device_id: {name: tensor}} (see _deliver)."""
        return _deliver(job, devices)


FRAMEWORK = _Torch()


@_core.frees_on_error
def load_file(filename, device="cpu", *, backend="mmap", sha256=None):
    """Loads every tensor of a safetensors file (or a directory of them, or
    a model.safetensors.index.json) as torch tensors on device.

    Same signature and result as safetensors.torch.load_file: a dict
    {name: torch.Tensor} in sorted name order; device is "cpu", "cuda",
    "cuda:N", an int or a torch.device. Raises a ringload.Error subclass
    carrying the C error code and message; DtypeError (before reading) for
    a dtype this torch lacks (torch 1.13: U16/U32/U64, F8_*, F4, F6_*);
    DeviceError for an invalid or absent device.

    backend: safetensors' "mmap" (ringload reads: its "auto") or "pread",
    or ringload's "auto", "io_uring", "libaio".

    sha256 (keyword only, not in safetensors): {file: hex}, 64 hex digits
    (one-file checkpoints) or a SHA256SUMS path, as ringload.load; checked
    by the library as it reads (IntegrityError, RL_E_CHECKSUM, on a
    mismatch). Not with a CUDA device: streaming loads do not hash
    (StateError).
    """
    return _core.load_whole(FRAMEWORK, filename, FRAMEWORK.device(device),
                            sha256, _dropin.backend(backend))


@_core.frees_on_error
def load(data):
    """Loads every tensor of a safetensors file given as bytes (bytearray
    and memoryview too) as CPU torch tensors, as safetensors.torch.load:
    {name: torch.Tensor} in sorted name order, the errors of load_file."""
    return _dropin.load_bytes(FRAMEWORK, data)
