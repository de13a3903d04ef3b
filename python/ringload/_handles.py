"""Python owners of the C handles (rl_ckpt, rl_spec, rl_plan, rl_loader).

Each object owns one handle and destroys it in close() or when collected;
live_handles() counts the handles created and not yet destroyed (the tests
use it to check that a failed load frees everything).
"""
import collections
import collections.abc
import contextlib
import ctypes
import json
import operator
import os
import signal
import threading

import numpy as np

from . import _errors, _lib

_live = collections.Counter()
_live_lock = threading.Lock()  # counts change from any thread's __del__


def live_handles():
    """Returns {kind: count} of C handles not yet destroyed (a test hook)."""
    with _live_lock:
        return {k: v for k, v in _live.items() if v}


class _Handle:
    """Owns one handle of kind K: rl_K_create / _destroy / _errmsg."""

    def __init_subclass__(cls, kind, **kwargs):
        super().__init_subclass__(**kwargs)
        cls._kind = f"rl_{kind}"
        cls._create = getattr(_lib, f"rl_{kind}_create")
        cls._destroy = getattr(_lib, f"rl_{kind}_destroy")
        cls._errmsg = getattr(_lib, f"rl_{kind}_errmsg")

    def __init__(self, ptr=None):
        """Creates a handle, or adopts ptr (one the library handed out)."""
        ptr = ptr or type(self)._create()
        if not ptr:
            raise MemoryError(f"ringload: {self._kind}: out of memory")
        self._ptr = ptr
        with _live_lock:
            _live[self._kind] += 1

    @property
    def ptr(self):
        """The C handle; StateError once closed."""
        if self._ptr is None:
            raise _errors.error(_lib.RL_E_STATE, f"{self._kind} is closed")
        return self._ptr

    def check(self, rc):
        """Returns rc >= 0, else raises with this handle's message."""
        return _errors.check(rc, type(self)._errmsg, self._ptr)

    def close(self):
        """Destroys the C handle now (idempotent)."""
        ptr, self._ptr = getattr(self, "_ptr", None), None
        if ptr:
            type(self)._destroy(ptr)
            with _live_lock:
                _live[self._kind] -= 1

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: modules half torn down
            pass


@contextlib.contextmanager
def _closed_on_error(handle):
    """Closes handle when the block raises: the exception's traceback would
    otherwise keep it (and its memory) alive."""
    try:
        yield
    except BaseException:
        handle.close()
        raise


def path_arg(what, path):
    """Returns path (str, bytes or os.PathLike) as bytes for C; ArgumentError
    naming what when it is empty or holds a NUL, where C would see it end."""
    b = os.fsencode(os.fspath(path))
    if not b:
        raise _errors.ArgumentError(_lib.RL_E_INVALID_ARG,
                                    f"{what}: empty path")
    if b"\0" in b:
        raise _errors.ArgumentError(
            _lib.RL_E_INVALID_ARG,
            f"{what}: embedded null byte in {os.fspath(path)!r}")
    return b


def integer(what, value, lo, hi):
    """Returns value, an integer in [lo, hi] (an int or another type whose
    __index__ gives one, bool and numpy.bool_ excepted); ArgumentTypeError
    or ArgumentError naming what otherwise: ctypes would truncate
    2**64 + 16 to 16."""
    not_integer = _errors.ArgumentTypeError(
        _lib.RL_E_INVALID_ARG, f"{what}: expected an integer, not "
        f"{type(value).__name__} {value!r}")
    if isinstance(value, (bool, np.bool_)):
        raise not_integer
    try:
        value = operator.index(value)
    except TypeError:  # np.array([3]) has __index__ and refuses it
        raise not_integer from None
    if not lo <= value <= hi:
        raise _errors.ArgumentError(_lib.RL_E_INVALID_ARG,
                                    f"{what}: {value} not in [{lo}, {hi}]")
    return value


def device_map(fw, given, max_id):
    """{device_id: device} of the device_map argument (None: {}): a mapping
    of integer ids to devices fw accepts; ArgumentTypeError naming the
    argument for anything else (a list has no ids)."""
    if given is None:
        return {}
    if not isinstance(given, collections.abc.Mapping):
        raise _errors.ArgumentTypeError(
            _lib.RL_E_INVALID_ARG, "device_map: a dict {device_id: device}, "
            f"not {type(given).__name__} {given!r}")
    return {integer("device_map key", k, 0, max_id): fw.device(v)
            for k, v in given.items()}


def _bounded(what, value, bounds_fn, param):
    lo, hi = ctypes.c_int64(), ctypes.c_int64()
    rc = bounds_fn(param, ctypes.byref(lo), ctypes.byref(hi))
    if rc < 0:  # a library older than this package's table of names
        raise _errors.error(rc, f"{what}: unknown parameter {param}")
    return integer(what, value, lo.value, hi.value)


def loader_option(key, value):
    """Returns value of loader option key, checked against its bounds
    (rl_loader_param_bounds)."""
    return _bounded(f"loader option '{key}'", value,
                    _lib.rl_loader_param_bounds, _lib.LOADER_PARAMS[key])


def loader_options(backend, options):
    """Returns {name: value} of backend and options (loader options by
    name), every one checked (loader_option); ArgumentError naming an
    unknown backend or option. The load's entry points call it before
    they open anything."""
    opts = dict(options or {})
    if backend is not None:
        if backend not in _lib.BACKENDS:
            raise _errors.ArgumentError(
                _lib.RL_E_INVALID_ARG, f"backend '{backend}': not one of "
                + ", ".join(_lib.BACKENDS))
        opts.setdefault("backend", _lib.BACKENDS[backend])
    for key, value in opts.items():
        if key not in _lib.LOADER_PARAMS:
            raise _errors.ArgumentError(
                _lib.RL_E_INVALID_ARG, f"unknown loader option '{key}' "
                "(one of " + ", ".join(_lib.LOADER_PARAMS) + ")")
        opts[key] = loader_option(key, value)
    return opts


def plan_param(key, value):
    """Returns value of plan parameter key (process, ...), checked against
    its bounds (rl_plan_param_bounds)."""
    return _bounded(key, value, _lib.rl_plan_param_bounds,
                    _lib.PLAN_PARAMS[key])


def records(struct):
    """The numpy dtype of ctypes structure struct, its pointers as
    addresses (uintp): an array of n structures, filled by one bulk query
    (rl_ckpt_tensors), is then read a column at a time."""
    names, formats, offsets = [], [], []
    for name, ctype in struct._fields_:
        pointer = ctype is ctypes.c_char_p or hasattr(ctype, "contents")
        names.append(name)
        formats.append(np.uintp if pointer else np.dtype(ctype))
        offsets.append(getattr(struct, name).offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": ctypes.sizeof(struct)})


_TENSOR_RECORDS = records(_lib.TensorInfo)
_SHARD_RECORDS = records(_lib.ShardInfo)


def _names(rec):
    """The names of records rec (a "name" column of C string addresses)."""
    at, text = ctypes.string_at, _lib.text
    return [text(at(p)) for p in rec["name"].tolist()]


def _dtype_names(codes):
    """Safetensors dtype names of rl_dtype codes."""
    return list(map(_lib.DTYPES.__getitem__, codes))


def _rows(dims, ndim):
    """Tuples of the first ndim[k] entries of each row k of dims (an n x
    RL_MAX_DIMS array). Where every row has the same count, zipped from
    columns: a list per row, tens of thousands of them alive at once, set
    off the interpreter's full garbage collections (twice the time of
    building the shards)."""
    if not len(ndim):
        return []
    lo, hi = int(ndim.min()), int(ndim.max())
    if lo == hi:
        if not hi:
            return [()] * len(ndim)
        return list(zip(*(dims[:, d].tolist() for d in range(hi))))
    return [tuple(r[:n]) for r, n in zip(dims[:, :hi].tolist(),
                                          ndim.tolist())]


TensorMeta = collections.namedtuple(
    "TensorMeta", "name dtype shape file offset nbytes")


class Checkpoint(_Handle, kind="ckpt"):
    """An open checkpoint: a .safetensors file, a directory of them or a
    model.safetensors.index.json (rl_ckpt_open)."""

    def __init__(self, path):
        encoded = path_arg("filename", path)
        super().__init__()
        self.path = os.fspath(path)
        with _closed_on_error(self):
            self.check(_lib.rl_ckpt_open(self._ptr, encoded))
            self.tensors = self._tensors()
        self.by_name = {t.name: t for t in self.tensors}

    def _tensors(self):
        """Every TensorMeta, from one rl_ckpt_tensors call: one ctypes
        call per tensor was most of opening 20,000 small tensors."""
        rec = np.empty(_lib.rl_ckpt_num_tensors(self._ptr), _TENSOR_RECORDS)
        self.check(_lib.rl_ckpt_tensors(self._ptr, 0, rec.size,
                                        rec.ctypes.data, rec.itemsize))
        col = {k: rec[k].tolist() for k in ("dtype", "ndim", "shape")}
        u64 = ctypes.c_uint64
        shapes = [tuple((u64 * n).from_address(p)) if n else ()
                  for n, p in zip(col["ndim"], col["shape"])]
        return list(map(TensorMeta, _names(rec), _dtype_names(col["dtype"]),
                        shapes, rec["file"].tolist(), rec["offset"].tolist(),
                        rec["nbytes"].tolist()))

    def files(self):
        """Returns the paths of the checkpoint's files (rl_ckpt_file_path)."""
        return [_lib.text(_lib.rl_ckpt_file_path(self.ptr, i))
                for i in range(_lib.rl_ckpt_num_files(self.ptr))]

    def metadata(self):
        """Returns __metadata__ of every file merged, as a dict."""
        out = {}
        k, v = ctypes.c_char_p(), ctypes.c_char_p()
        for i in range(_lib.rl_ckpt_num_metadata(self.ptr)):
            self.check(_lib.rl_ckpt_metadata(self._ptr, i, ctypes.byref(k),
                                             ctypes.byref(v)))
            out[_lib.text(k.value)] = _lib.text(v.value)
        return out

    def tensor(self, name):
        """Returns the TensorMeta of name, or raises TensorNotFoundError."""
        t = self.by_name.get(name)
        if t is None:
            raise _errors.TensorNotFoundError(
                _lib.RL_E_MISSING_TENSOR,
                f"{self.path}: File does not contain tensor {name}")
        return t


class Spec(_Handle, kind="spec"):
    """A sharding spec (rl_spec): empty, JSON text, a dict or a file."""

    def __init__(self, sharding=None):
        super().__init__()
        with _closed_on_error(self):
            self._parse(sharding)

    def set_dtype(self, name):
        """rl_spec_set_dtype: every plan under this spec converts its
        floating tensors to dtype name ("F16"; None: as stored)."""
        self.check(_lib.rl_spec_set_dtype(
            self._ptr, -1 if name is None else _lib.DTYPES.index(name)))

    def _parse(self, sharding):
        if sharding is None:
            return
        if isinstance(sharding, dict):
            sharding = json.dumps(sharding, ensure_ascii=False)
        if isinstance(sharding, (str, bytes)) and not sharding.strip():
            raise _errors.ArgumentError(
                _lib.RL_E_INVALID_ARG, "sharding: empty: give a dict, JSON "
                "text or a file path (None: every tensor whole on device 0)")
        if isinstance(sharding, str) and sharding.lstrip().startswith("{"):
            b = sharding.encode("utf-8", "surrogateescape")
            self.check(_lib.rl_spec_parse(self._ptr, b, len(b)))
        elif isinstance(sharding, (str, bytes, os.PathLike)):
            self.check(_lib.rl_spec_load(self._ptr,
                                         path_arg("sharding", sharding)))
        else:
            raise _errors.ArgumentError(
                _lib.RL_E_INVALID_ARG, "sharding: a dict, JSON text or a "
                f"file path, not {type(sharding).__name__}")


Shard = collections.namedtuple(
    "Shard", "index name dtype shape start stop box device device_id "
    "offset nbytes")
Shard.__doc__ = """One shard of a plan: tensor (or target) name, safetensors
dtype, full shape, box [start, stop) and its shape, device index and id,
offset in the device's staging area and byte count."""


class Plan(_Handle, kind="plan"):
    """A built plan (rl_plan); owns its handle (rl_loader_load's or ours)."""

    def set(self, **params):
        """Sets plan parameters by name (process=1, chunk_bytes=..., ...)."""
        for key, value in params.items():
            self.check(_lib.rl_plan_set(self.ptr, _lib.PLAN_PARAMS[key],
                                        plan_param(key, value)))

    def build(self, ckpt, spec):
        """rl_plan_build for ckpt under spec."""
        self.check(_lib.rl_plan_build(self.ptr, ckpt.ptr, spec.ptr))

    def devices(self):
        """Returns [(id, staging_bytes)] per device index."""
        di = _lib.DeviceInfo()
        out = []
        for d in range(_lib.rl_plan_num_devices(self.ptr)):
            self.check(_lib.rl_plan_device(self._ptr, d, ctypes.byref(di)))
            out.append((di.id, di.staging_bytes))
        return out

    def shards(self):
        """Returns every Shard of the planned process, in plan order, from
        one rl_plan_shards call."""
        ids = [i for i, _ in self.devices()]
        rec = np.empty(_lib.rl_plan_num_shards(self.ptr), _SHARD_RECORDS)
        self.check(_lib.rl_plan_shards(self._ptr, 0, rec.size,
                                       rec.ctypes.data, rec.itemsize))
        ndim = rec["ndim"]
        n = len(rec)
        dims = [_rows(rec[k], ndim) for k in ("shape", "start", "stop")]
        boxes = _rows(rec["stop"] - rec["start"], ndim)
        dev = rec["device"].tolist()
        return list(map(Shard, range(n), _names(rec),
                        _dtype_names(rec["dtype"].tolist()), *dims, boxes,
                        dev, [ids[d] for d in dev], rec["offset"].tolist(),
                        rec["nbytes"].tolist()))


class _Progress:
    """Bridges rl_progress_fn to a Python callable. An exception raised by
    the callable, or kept by the SIGINT handler (_arm_sigint) while the
    bridge is active, cancels the load and is re-raised by Loader.run()."""

    def __init__(self, fn):
        self.fn = fn
        self.exc = None
        self.active = False
        self.cfn = _lib.PROGRESS_FN(self)

    def __call__(self, user, done, total):
        if self.exc is not None:
            return 1
        try:
            if self.fn is not None:
                self.fn(done, total)
        except BaseException as e:  # noqa: B902 - re-raised after the run
            self.exc = e
        # also a Ctrl-C that the handler kept while fn ran
        return 1 if self.exc is not None else 0


_sigint_bridges = []
"""The bridges of the loads running on the main thread, outermost first
(a progress callable may load too); a SIGINT cancels all of them."""


def _sigint_handler(prev, owner):
    """Ctrl-C: a SIGINT handler that calls prev and keeps what it raises
    (KeyboardInterrupt) on every active bridge, for after the C calls. The
    interpreter runs signal handlers wherever the main thread next runs
    Python, which during a load is the entry of _Progress.__call__, before
    any try of its own, where ctypes would print the exception and return
    garbage (a cancel) instead. Once owner's load is over the handler only
    calls prev: one that a failed restore left installed stays harmless."""
    def handler(signum, frame):
        if not owner.active:
            return prev(signum, frame)
        try:
            prev(signum, frame)
        except BaseException as e:  # noqa: B902 - re-raised after the run
            # without its traceback: it holds this frame, whose frame
            # argument holds the whole stack of the load (a cycle)
            e = e.with_traceback(None)
            for bridge in _sigint_bridges:
                if bridge.active and bridge.exc is None:
                    bridge.exc = e
        return None
    handler.ringload_owner, handler.ringload_prev = owner, prev
    return handler


def _arm_sigint(bridge):
    """Activates bridge for Ctrl-C; returns the handler installed, or None.
    Only on the main thread (the only one Python runs signal handlers on)
    and when SIGINT has a Python handler (SIG_IGN and SIG_DFL stay); a load
    nested in another's progress callable uses the outer's handler; a
    sub-interpreter cannot install one (ValueError): Ctrl-C stays as is."""
    if threading.current_thread() is not threading.main_thread():
        return None
    prev = signal.getsignal(signal.SIGINT)
    outer = getattr(prev, "ringload_owner", None)
    handler = None
    if outer is None or not outer.active:
        if not callable(prev):
            return None
        handler = _sigint_handler(prev, bridge)
        try:
            signal.signal(signal.SIGINT, handler)
        except ValueError:  # not the main interpreter (mod_wsgi)
            return None
    _sigint_bridges[:] = [b for b in _sigint_bridges if b.active]
    _sigint_bridges.append(bridge)
    bridge.active = True
    return handler


def _disarm_sigint(bridge, handler):
    """Ends _arm_sigint: restores the previous handler unless another was
    installed since (the caller's own, kept)."""
    if bridge in _sigint_bridges:
        _sigint_bridges.remove(bridge)
    if handler is not None and signal.getsignal(signal.SIGINT) is handler:
        signal.signal(signal.SIGINT, handler.ringload_prev)


_FILE_MODES = {v: k for k, v in _lib.FILE_MODES.items()}
_FILE_WHYS = {v: k for k, v in _lib.FILE_WHYS.items()}
_SHA256_STATES = {0: "none", 1: "matched", 2: "partial", 3: "mismatch"}
"""rl_file_stats.sha256_state values (RL_SHA256_*) by name."""


def _fields(st):
    """The fields of a statistics structure as a dict (text decoded); of a
    size-tagged one, those the library filled, without its size and
    reserved room."""
    filled = getattr(st, "size", ctypes.sizeof(st))
    out = {}
    for name, _ in st._fields_:
        field = getattr(type(st), name)
        if name != "size" and not name.startswith("reserved") and \
                field.offset + field.size <= filled:
            v = getattr(st, name)
            out[name] = _lib.text(v) if isinstance(v, bytes) else v
    return out


class Loader(_Handle, kind="loader"):
    """A loader (rl_loader) with its options and expected SHA-256 values
    ([(file, hex)], _sha256.resolve); its library staging lives as long as
    this object."""

    def __init__(self, backend="auto", options=None, sha256=()):
        super().__init__()
        with _closed_on_error(self):
            self._configure(backend, dict(options or {}))
            for name, value in sha256 or ():
                self.check(_lib.rl_loader_expect_sha256(
                    self._ptr, os.fsencode(name), value.encode("ascii")))

    def _configure(self, backend, opts):
        for key, value in loader_options(backend, opts).items():
            self.check(_lib.rl_loader_set(self._ptr, _lib.LOADER_PARAMS[key],
                                          value))

    def _with_progress(self, progress, call):
        bridge = _Progress(progress)
        _lib.rl_loader_set_callbacks(self.ptr, _lib.SHARD_FN(), bridge.cfn,
                                     None)
        handler = _arm_sigint(bridge)
        try:
            rc = call()
        finally:
            # first, before any call, where another signal's handler may
            # raise: the handler then no longer keeps a Ctrl-C
            bridge.active = False
            _disarm_sigint(bridge, handler)
            _lib.rl_loader_set_callbacks(self._ptr, _lib.SHARD_FN(),
                                         _lib.PROGRESS_FN(), None)
        exc, bridge.exc = bridge.exc, None  # bridge <-> cfn is a cycle
        if exc is not None:
            raise exc
        return self.check(rc)

    def load(self, ckpt, spec, process=0, progress=None):
        """rl_loader_load: plans and runs; returns the Plan."""
        process = plan_param("process", process)
        plan = []

        def call():
            out = ctypes.c_void_p()
            rc = _lib.rl_loader_load(self.ptr, ckpt.ptr, spec.ptr, process,
                                     ctypes.byref(out))
            if out.value:  # adopted while Ctrl-C waits: never leaked
                plan.append(Plan(out.value))
            return rc

        self._with_progress(progress, call)
        return plan[0]

    def run(self, plan, progress=None):
        """rl_loader_run of a plan built separately."""
        self._with_progress(progress, lambda: _lib.rl_loader_run(
            self.ptr, plan.ptr))

    def set_transport(self, transport):
        """rl_loader_set_transport with transport.ops (None: none); the
        transport is kept as long as this loader, whose runs call it."""
        ops = ctypes.byref(transport.ops) if transport is not None else None
        self.check(_lib.rl_loader_set_transport(self.ptr, ops, None))
        self._transport = transport

    def set_staging(self, dev, ptr, length):
        """rl_loader_set_staging (with the option staging=1, caller)."""
        self.check(_lib.rl_loader_set_staging(self.ptr, dev, ptr, length))

    def staging(self, dev):
        """Returns (address, length) of device dev's staging, or (None, 0)."""
        n = ctypes.c_size_t()
        p = _lib.rl_loader_staging(self.ptr, dev, ctypes.byref(n))
        return p, n.value

    def request_bytes(self, ckpt):
        """rl_loader_request_bytes: the request size to plan ckpt with."""
        return self.check(_lib.rl_loader_request_bytes(self.ptr, ckpt.ptr))

    def set_window_pool(self, ptr, length):
        """rl_loader_set_window_pool: streaming windows in the caller's
        memory (ptr None: the library's); it must outlive the load."""
        self.check(_lib.rl_loader_set_window_pool(self.ptr, ptr, length))

    def set_cuda(self, device_map=None, one_gpu=None):
        """rl_loader_set_cuda: loads go to GPU memory through the library's
        CUDA sink; device_map [ordinal per spec device id] (None:
        identity), or one_gpu: every spec device, whatever its id, on that
        ordinal (RL_CUDA_ONE_GPU). Validated here, the driver touched only
        by a load."""
        dm = list(device_map or [])
        if any(not isinstance(o, int) or isinstance(o, bool) for o in dm):
            raise _errors.error(_lib.RL_E_INVALID_ARG,
                                f"device_map {device_map!r}: CUDA ordinals "
                                "(ints) by spec device id")
        arr = (ctypes.c_int32 * max(len(dm), 1))(*dm)
        opts = _lib.CudaOpts(ctypes.sizeof(_lib.CudaOpts), len(dm),
                             arr if dm else None)
        if one_gpu is not None:
            opts.flags, opts.gpu = _lib.RL_CUDA_ONE_GPU, one_gpu
        self.check(_lib.rl_loader_set_cuda(self.ptr, ctypes.byref(opts)))

    def set_cuda_dest(self, shard, ptr, nbytes):
        """rl_loader_set_cuda_dest: shard's bytes go to device address ptr
        (a tensor's data_ptr(), nbytes long)."""
        self.check(_lib.rl_loader_set_cuda_dest(self.ptr, shard, ptr, nbytes))

    def set_cuda_stream(self, ordinal, stream):
        """rl_loader_set_cuda_stream: the next loads' copies to GPU ordinal
        wait for the work queued on stream (a CUstream value: torch's
        current_stream(dev).cuda_stream; 0 the legacy default stream), which
        waits for the copies."""
        self.check(_lib.rl_loader_set_cuda_stream(self.ptr, ordinal, stream))

    def start(self, plan):
        """rl_loader_start: a streaming load of plan on a library thread."""
        self.check(_lib.rl_loader_start(self.ptr, plan.ptr))

    def next_piece(self, timeout_ms):
        """rl_loader_next_piece, blocking in C without the GIL: a Piece,
        None at the end, or False when none came within timeout_ms."""
        piece = _lib.Piece()
        rc = _lib.rl_loader_next_piece(self.ptr, ctypes.byref(piece),
                                       int(timeout_ms))
        if rc == _lib.RL_E_PIECE_TIMEOUT:
            return False
        return piece if self.check(rc) == 1 else None

    def release(self, piece):
        """rl_loader_release: piece's window may be reused (any thread)."""
        rc = _lib.rl_loader_release(self.ptr, ctypes.byref(piece))
        if rc < 0:
            raise _errors.error(rc, f"release of a piece of shard {piece.shard}")

    def finish(self, early=False):
        """rl_loader_finish; early: the consumer stopped before the end, so
        the load's RL_E_CANCELED is expected and not raised."""
        rc = _lib.rl_loader_finish(self.ptr)
        if not (early and rc == _lib.RL_E_CANCELED):
            self.check(rc)

    def stats(self, ckpt=None):
        """Returns the statistics of the last run as a dict: the fields of
        rl_load_stats (backend by name, text decoded, fallback_flags also
        as "fallback_names") and "files", one dict
        per file read (rl_file_stats; its "path" when ckpt, the run's
        checkpoint, is given)."""
        st = _lib.LoadStats(size=ctypes.sizeof(_lib.LoadStats))
        self.check(_lib.rl_loader_get_stats(self.ptr, ctypes.byref(st)))
        out = _fields(st)
        out["backend"] = _lib.text(_lib.rl_backend_name(st.backend))
        out["fallback_names"] = [n for n, bit in _lib.FALLBACKS.items()
                                 if st.fallback_flags & bit]
        out["files"] = [self._file_stats(i, ckpt) for i in
                        range(_lib.rl_loader_num_files(self._ptr))]
        return out

    def _file_stats(self, i, ckpt):
        fs = _lib.FileStats(size=ctypes.sizeof(_lib.FileStats))
        self.check(_lib.rl_loader_get_file_stats(self._ptr, i,
                                                 ctypes.byref(fs)))
        out = _fields(fs)
        if ckpt is not None:
            out["path"] = _lib.text(_lib.rl_ckpt_file_path(ckpt.ptr, fs.file))
        out["mode"] = _FILE_MODES.get(fs.mode, fs.mode)
        out["why"] = _FILE_WHYS.get(fs.why, fs.why)
        out["sha256_state"] = _SHA256_STATES.get(fs.sha256_state,
                                                 fs.sha256_state)
        return out
