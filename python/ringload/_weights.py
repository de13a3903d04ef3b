"""(name, tensor) pairs of a whole checkpoint, as a runtime's load_weights
takes them: the engine under ringload.vllm and ringload.transformers.

iterate() reads the chosen tensors in one streaming load (the coalesced
reads of the plan, through the window pool of a staging budget) and
yields each tensor as soon as its last byte arrived, as a CPU tensor that
owns its memory: pieces are copied out of their window and the window is
released at once, so host memory is the budget plus the tensors the
consumer still holds. On CUDA, the tensors of one file at a time go
through ringload.torch's device path (the library's CUDA sink: pinned
windows, async copies) and are yielded on the GPU.

With a torch.distributed group (tensor parallelism in a node), each rank
reads a share of the files, balanced by bytes, and every tensor reaches
the other ranks by broadcast from the rank that read it. The ranks first
agree that they opened the same checkpoint (a digest of the headers);
before each round of broadcasts they exchange one status, so a failure on
any rank (a checksum, a file changed) raises on every rank rather than
leaving the others waiting.
"""
import hashlib
import json
import os

import torch

from . import _core, _dtypes, _errors, _handles, _lib, _sha256, _stream


class Source:
    """What to load: an open Checkpoint and the tensor names wanted (in the
    checkpoint's order: file, then offset). close() closes it."""

    def __init__(self, ckpt, names):
        self.ckpt, self.names = ckpt, names

    def close(self):
        self.ckpt.close()


def _index_of(folder):
    """The Hugging Face index in folder, or None."""
    path = os.path.join(folder, "model.safetensors.index.json")
    return path if os.path.isfile(path) else None


def open_source(path, files=None):
    """Opens the checkpoint at path and keeps the tensors of files (paths;
    None: all). A directory opens as its index when it has one and files
    are all the index's (so that a shard the index names and the
    directory lacks is an error naming it), else as every *.safetensors
    in it; a file or an index opens as itself. A file of files that is
    not the checkpoint's is CheckpointError naming it."""
    targets = [path]
    if os.path.isdir(path) and _index_of(path):
        targets = [_index_of(path), path]
    for i, target in enumerate(targets):
        ckpt = _handles.Checkpoint(target)
        try:
            keep = _files_of(ckpt, target, files)
        except _errors.CheckpointError:
            ckpt.close()
            if i + 1 < len(targets):
                continue  # a file the index lacks: the directory's
            raise
        except BaseException:
            ckpt.close()
            raise
        break
    try:
        names = [t.name for t in ckpt.tensors if t.file in keep]
        for t in ckpt.tensors:
            if t.file in keep:
                _dtypes.torch_check(torch, t.name, t.dtype, t.shape)
    except BaseException:
        ckpt.close()
        raise
    return Source(ckpt, names)


def _files_of(ckpt, target, files):
    """{file index} of files (None: all) in ckpt."""
    paths = ckpt.files()
    if files is None:
        return set(range(len(paths)))
    ids = {_stat_id(p): i for i, p in enumerate(paths)}
    keep = set()
    for f in files:
        i = ids.get(_stat_id(f))
        if i is None:
            raise _errors.CheckpointError(
                _lib.RL_E_INVALID_ARG, f"{f}: not a file of the checkpoint "
                f"{target} (its files: " + ", ".join(paths) + ")")
        keep.add(i)
    return keep


def _stat_id(path):
    try:
        st = os.stat(path)
    except OSError:
        return ("missing", os.path.abspath(path))
    return (st.st_dev, st.st_ino)


def header_digest(src):
    """SHA-256 of what the ranks must agree on: each file's name and size
    and each wanted tensor's name, dtype, shape, file and offset."""
    ckpt = src.ckpt
    files = [(os.path.basename(p), _lib.rl_ckpt_file_size(ckpt.ptr, i))
             for i, p in enumerate(ckpt.files())]
    tensors = [(t.name, t.dtype, list(t.shape), t.file, t.offset, t.nbytes)
               for t in (ckpt.tensor(n) for n in src.names)]
    text = json.dumps([files, tensors], separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _shaped(u8, meta):
    """The tensor of meta over u8, its bytes."""
    tdt = _dtypes.torch_dtype(torch, meta.name, meta.dtype)
    shape = _dtypes.torch_shape(meta.name, meta.dtype, meta.shape)
    if not u8.numel():
        return torch.empty(shape, dtype=tdt)
    return u8.view(tdt).reshape(shape)


def empty_like_meta(meta, device=None):
    """An uninitialized tensor of meta's dtype and shape on device."""
    tdt = _dtypes.torch_dtype(torch, meta.name, meta.dtype)
    shape = _dtypes.torch_shape(meta.name, meta.dtype, meta.shape)
    return torch.empty(shape, dtype=tdt, device=device)


class Options:
    """How to read: staging budget (bytes; None: the library's default),
    backend name, expected SHA-256 values (the sha256= argument of
    ringload.load: {file: hex} or a SHA256SUMS path; None: none given),
    sha256_hf (the Hugging Face blob names checked, the library's
    default), workers (None: the library's choice)."""

    def __init__(self, staging_budget=None, backend="auto", sha256=None,
                 sha256_hf=True, workers=None):
        self.staging_budget = staging_budget
        self.backend = backend
        self.sha256 = sha256
        self.sha256_hf = sha256_hf
        self.workers = workers

    def loader_options(self):
        """The loader options by name (checked by _handles)."""
        opts = {"sha256_hf": int(bool(self.sha256_hf))}
        if self.workers is not None:
            opts["workers"] = self.workers
        if self.staging_budget is not None:
            opts["staging_budget"] = self.staging_budget
        _handles.loader_options(self.backend, opts)
        return opts


def _spec(src, names):
    """The spec of names (every tensor of the checkpoint: None)."""
    if len(names) == len(src.ckpt.tensors):
        return _handles.Spec()
    return _handles.Spec({"tensors": list(names)})


class _Stream:
    """One streaming load of names (CPU tensors that own their memory),
    pulled one tensor at a time by take(name); tensors completed before
    they are asked for wait in a dict (none when the stream's order is
    the names' order, which the plan's is)."""

    def __init__(self, src, names, opts):
        self.src, self.spec, self.load = src, _spec(src, names), None
        self.stats = {}
        try:
            expected = _sha256.resolve(src.ckpt, opts.sha256)
            budget = opts.staging_budget or int(
                _lib.rl_loader_default_budget())
            job = _core.Job(src.ckpt, self.spec, 0, opts.backend,
                            opts.loader_options(), None, expected)
            self.load = _stream.StreamingLoad(job, budget)
        except BaseException:
            self.close()
            raise
        self.shards = {s.index: s for s in self.load.shards}
        self.bufs, self.left, self.done = {}, {}, {}
        self.waited = 0  # most tensors complete before asked for (tests)
        self.pieces = self.load.pieces()

    def _accept(self, piece):
        s = self.shards[piece.shard]
        buf = self.bufs.get(s.index)
        if buf is None:
            buf = self.bufs[s.index] = torch.empty(s.nbytes, dtype=torch.uint8)
            self.left[s.index] = s.nbytes
        if piece.length:
            end = piece.offset + piece.length
            buf[piece.offset:end].copy_(torch.from_numpy(
                _stream.piece_array(piece)))
        self.load.release(piece)
        self.left[s.index] -= piece.length
        if self.left[s.index] == 0:
            del self.left[s.index]
            meta = self.src.ckpt.tensor(s.name)
            self.done[s.name] = _shaped(self.bufs.pop(s.index), meta)
            self.waited = max(self.waited, len(self.done) - 1)

    def take(self, name):
        """The tensor name, reading on until it is complete (an empty
        one at once: its piece comes at the end of the load)."""
        meta = self.src.ckpt.tensor(name)
        if not meta.nbytes:
            self.done.pop(name, None)
            return _shaped(torch.empty(0, dtype=torch.uint8), meta)
        while name not in self.done:
            piece = next(self.pieces, None)
            if piece is None:
                raise _errors.error(_lib.RL_E_STATE, f"ringload: tensor "
                                    f"{name} never arrived in the load")
            self._accept(piece)
        return self.done.pop(name)

    def finish(self):
        """Reads to the end: raises the load's error (a file's checksum is
        known only after its last byte), then closes."""
        for piece in self.pieces:
            self._accept(piece)
        self.stats = self.load.stats(self.src.ckpt)
        self.close()

    def close(self):
        load, self.load = self.load, None
        try:
            if load is not None:
                load.close()
        finally:
            spec, self.spec = self.spec, None
            if spec is not None:
                spec.close()


def _cuda_file_groups(src, names):
    """names grouped by file, in file order: the unit of a GPU load."""
    groups = {}
    for n in names:
        groups.setdefault(src.ckpt.tensor(n).file, []).append(n)
    return [groups[f] for f in sorted(groups)]


def _cuda_load(src, names, opts, device):
    """{name: tensor on device} of names (one file's) through
    ringload.torch's CUDA path, one load: the library's CUDA sink fills
    tensors allocated on the GPU (GPU only)."""
    import ringload
    opts_by_name = dict(opts.loader_options())
    opts_by_name.setdefault("staging_budget",
                            int(_lib.rl_loader_default_budget()))
    out = ringload.load(src.ckpt.path, {"tensors": list(names)}, 0, "pt",
                        {0: device}, backend=opts.backend,
                        options=opts_by_name, sha256=opts.sha256)
    return out.get(0, {})


def uses_cuda_sink(device):
    """True when tensors for device go through the CUDA sink: a torch
    device of type cuda (the host path serves every other device, whose
    loader copies from the CPU)."""
    if device is None:
        return False
    return torch.device(device).type == "cuda"


class _CudaStream:
    """take(name) for a GPU: one file's tensors loaded at a time."""

    def __init__(self, src, names, opts, device):
        self.src, self.opts, self.device = src, opts, device
        self.groups = _cuda_file_groups(src, names)
        self.done, self.stats = {}, {}

    def take(self, name):
        while name not in self.done:
            if not self.groups:
                raise _errors.error(_lib.RL_E_STATE, f"ringload: tensor "
                                    f"{name} never arrived in the load")
            self.done.update(_cuda_load(self.src, self.groups.pop(0),
                                        self.opts, self.device))
        return self.done.pop(name)

    def finish(self):
        pass

    def close(self):
        self.done.clear()


class _Nothing:
    """The stream of no tensor (a rank with no file to read)."""
    stats = {}

    def take(self, name):
        raise _errors.error(_lib.RL_E_STATE, f"ringload: tensor {name} is "
                            "not read here")

    def finish(self):
        pass

    def close(self):
        pass


def open_stream(src, names, opts, device=None):
    """The stream of names: on the GPU (uses_cuda_sink) or host tensors."""
    if not names:
        return _Nothing()
    if uses_cuda_sink(device):  # GPU only
        return _CudaStream(src, names, opts, device)
    return _Stream(src, names, opts)


def iterate(src, opts, device=None, stats=None):
    """Yields (name, tensor) for every wanted tensor of src, this process
    reading everything (_tp.iterate: the ranks of a group each a share).
    The tensors are on device when it is CUDA, else on the CPU. stats: a
    dict, given this process's load statistics at the end (bytes_read...)."""
    stream = open_stream(src, src.names, opts, device)
    try:
        for name in src.names:
            yield name, stream.take(name)
        stream.finish()
        if stats is not None:
            stats.update(stream.stats)
    finally:
        stream.close()
