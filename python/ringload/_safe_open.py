"""safe_open: safetensors' lazy reader, on ringload.

Each get_tensor() / get_slice()[...] plans and reads only that tensor (or
that box of it) into memory numpy allocates: results own their memory and
hold nothing of the library.
"""
import numpy as np

from . import _core, _dropin, _dtypes, _errors, _handles, _index, _lib, _sha256


def _single(ckpt, spec_dict, backend):
    """Loads the one shard spec_dict selects; returns (Loaded, shard). The
    Hugging Face cache's blob names were checked before the first read of
    the file (this partial read could not check them: no warning)."""
    spec = _handles.Spec(spec_dict)
    try:
        loaded = _core.load_into_numpy(
            _core.Job(ckpt, spec, 0, backend, {"sha256_hf": 0}, None))
    finally:
        spec.close()
    return loaded, loaded.shards[0]


class safe_open:  # noqa: N801 - safetensors' name
    """Opens a checkpoint lazily: safe_open(filename, framework,
    device="cpu"), as safetensors.safe_open.

    framework: "pt", "torch", "pytorch" (torch tensors) or "np", "numpy"
    (numpy arrays); another str raises FrameworkError, a non-str
    safetensors' TypeError. device: "cpu" (or None), "cuda", "cuda:N", an
    int N or a torch.device (torch only; numpy takes "cpu"). filename may
    also be a directory of .safetensors files or a
    model.safetensors.index.json. Use it as a context manager; after the
    with block (or close()) the methods raise StateError. backend (keyword
    only): safetensors' "mmap" (ringload reads: its "auto") or "pread", or
    ringload's "auto", "io_uring", "libaio".

    sha256 (keyword only, not in safetensors): expected SHA-256 values of
    the checkpoint's files ({file: hex}, 64 hex digits for a one-file
    checkpoint, or a SHA256SUMS path), resolved here (ArgumentError at
    open). get_tensor reads only part of a file, where a whole-file hash
    cannot be checked, so a named file is hashed whole, once, on the first
    get_tensor or get_slice of a tensor of it (the library's SHA-256,
    rl_sha256_file, 8 MiB at a time):
    a mismatch raises IntegrityError (RL_E_CHECKSUM, the library's
    wording) from that call and every later one of that file. So is,
    without sha256, a Hugging Face cache file (a snapshot symlink to
    blobs/<its SHA-256>), as a whole load checks it: a blob with a flipped
    byte never loads silently; this costs one read of the file before its
    first tensor (keys() and metadata() read none). A later change of a
    file is caught by the reads (RL_E_FILE_CHANGED: the library compares
    each file with its state when opened, which was before the hash).
    """

    def __init__(self, filename, framework, device="cpu", *, backend="mmap",
                 sha256=None):
        fw = _core.framework(_dropin.str_arg("framework", framework))
        self._fw = getattr(fw, "drop_in", fw)  # numpy: safetensors' dtypes
        self._device = self._fw.device(device)
        self._backend = _dropin.backend(backend)
        self._ckpt = _core.open_dropin(filename)
        try:
            self._to_hash = _sha256.to_hash(self._ckpt, _sha256.resolve(self._ckpt, sha256))
        except BaseException:
            self._ckpt.close()
            raise

    def _open(self):
        if self._ckpt is None:
            raise _errors.StateError(_lib.RL_E_STATE, "File is closed")
        return self._ckpt

    def _tensor(self, name):
        """Tensor name's metadata, its file hashed first if it has an
        expected value not yet checked."""
        ckpt = self._open()
        meta = ckpt.tensor(_dropin.str_arg("name", name))
        want = self._to_hash.get(meta.file)
        if want is not None:
            _sha256.verify_file(ckpt.files()[meta.file], want)
            self._to_hash.pop(meta.file, None)
        return meta

    def __enter__(self):
        """Returns self."""
        return self

    def __exit__(self, *exc):
        """Closes the checkpoint."""
        self.close()

    def close(self):
        """Closes the checkpoint: its handle goes with the last slice
        taken from it (those stay usable, as in safetensors)."""
        self._ckpt = None

    def keys(self):
        """Returns the tensor names, sorted."""
        return sorted(self._open().by_name)

    def offset_keys(self):
        """Returns the tensor names in file and data-offset order."""
        return [t.name for t in self._open().tensors]

    def metadata(self):
        """Returns the __metadata__ dict ({} when it is empty), or None when
        there is none, as safetensors."""
        ckpt = self._open()
        meta = ckpt.metadata()
        return meta if meta or _dropin.has_metadata(ckpt.files()) else None

    @_core.frees_on_error
    def get_tensor(self, name):
        """Returns tensor name, whole, in the framework and on the device
        given to safe_open. Reads only that tensor's bytes. Raises
        TensorNotFoundError, DtypeError (before reading), or the load's
        error."""
        meta = self._tensor(name)
        self._fw.check(name, meta.dtype, meta.shape)
        loaded, shard = _single(self._open(), {"tensors": [name]},
                                self._backend)
        t = self._fw.convert(loaded.raw(shard), name, shard.dtype, shard.box)
        return self._fw.deliver(t, self._device)

    @_core.frees_on_error
    def get_tensors(self):
        """Returns every tensor, {name: tensor} in file order (offset_keys),
        as safetensors' get_tensors: one load for them all, every dtype
        checked before reading."""
        ckpt = self._open()
        for t in ckpt.tensors:
            self._fw.check(t.name, t.dtype, t.shape)
        for t in ckpt.tensors:
            self._tensor(t.name)  # each file with an expected value hashed
        spec = _handles.Spec()
        try:
            job = _core.Job(ckpt, spec, 0, self._backend, None, None)
            got = self._fw.load(job, {0: self._device}).get(0, {})
        finally:
            spec.close()
        return {name: got[name] for name in self.offset_keys()}

    def get_slice(self, name):
        """Returns a slice object for tensor name: get_shape(), get_dtype()
        and [index], which reads only the box the index needs."""
        meta = self._tensor(name)
        return SafeSlice(self._fw, self._device, self._open(), meta,
                         self._backend)


class SafeSlice:
    """A tensor to index: ``f.get_slice("w")[:, 2:4]`` reads only the box
    [0, rows) x [2, 4). Basic indexing (integers, negative ones too, slices
    with positive steps, ..., None) reads only its box. With torch, every
    index torch takes is taken, as safetensors does: advanced indexing
    (lists, arrays, tensors, booleans) reads the whole tensor and indexes
    it, and a refused index raises torch's error word for word (SliceError,
    also of torch's exception type). numpy refuses negative or zero steps
    and advanced indexing (SliceError). Packed sub-byte dtypes (F4, F6)
    cannot be sliced (DtypeError)."""

    def __init__(self, fw, device, ckpt, meta, backend="auto"):
        self._fw, self._device, self._ckpt, self._meta = fw, device, ckpt, meta
        self._backend = backend

    def get_shape(self):
        """Returns the full tensor's shape as a list."""
        return list(self._meta.shape)

    def get_dtype(self):
        """Returns the safetensors dtype name ("F32", "BF16", ...)."""
        return self._meta.dtype

    def _target(self):
        """A target name that no checkpoint tensor has (the tensor's own
        name, unless it is empty: targets need a name)."""
        name = self._meta.name or " slice"
        while name != self._meta.name and name in self._ckpt.by_name:
            name += "'"
        return name

    @_core.frees_on_error
    def __getitem__(self, key):
        """Returns the indexed part of the tensor, contiguous, in the
        framework and on the device of safe_open."""
        m, fw = self._meta, self._fw
        fw.check(m.name, m.dtype, m.shape)
        if m.dtype in _dtypes.SUBBYTE_BITS:
            raise _dtypes.dtype_error(m.name, m.dtype, "is packed: it cannot "
                                      "be sliced")
        fw.index_check(m.shape, key)
        try:
            box, post = _index.normalize(key, m.shape)
        except _errors.SliceError:
            if not fw.advanced_indexing:
                raise
            # an index torch takes and no box holds: the whole tensor
            return fw.deliver(fw.contiguous(self._read_whole()[key]),
                              self._device)
        shape = tuple(b - a for a, b in box)
        if not shape:  # a scalar
            t = self._read_whole()
        elif 0 in shape:  # nothing to read
            t = fw.convert(np.empty(0, np.uint8), m.name, m.dtype, shape)
        else:
            t = self._read_box(box, shape)
        # the Ellipsis keeps an all-integer index a 0-d array, not a scalar
        return fw.deliver(fw.contiguous(t[post + (Ellipsis,)]), self._device)

    def _read_whole(self):
        loaded, s = _single(self._ckpt, {"tensors": [self._meta.name]},
                            self._backend)
        return self._fw.convert(loaded.raw(s), s.name, s.dtype, s.box)

    def _read_box(self, box, shape):
        name = self._target()
        target = {"name": name, "source": self._meta.name,
                  "slice": [list(b) for b in box]}
        loaded, s = _single(self._ckpt, {"targets": [target],
                                         "tensors": [name]}, self._backend)
        return self._fw.convert(loaded.raw(s), self._meta.name, s.dtype, shape)
