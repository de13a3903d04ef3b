"""Python owners of the C handles (rl_ckpt, rl_spec, rl_plan, rl_loader).

Each object owns one handle and destroys it in close() or when collected;
live_handles() counts the handles created and not yet destroyed (the tests
use it to check that a failed load frees everything).
"""
import collections
import contextlib
import ctypes
import json
import os
import threading

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


def _fspath(path):
    return os.fsencode(os.fspath(path))


TensorMeta = collections.namedtuple(
    "TensorMeta", "name dtype shape file offset nbytes")


class Checkpoint(_Handle, kind="ckpt"):
    """An open checkpoint: a .safetensors file, a directory of them or a
    model.safetensors.index.json (rl_ckpt_open)."""

    def __init__(self, path):
        super().__init__()
        self.path = os.fspath(path)
        with _closed_on_error(self):
            self.check(_lib.rl_ckpt_open(self._ptr, _fspath(path)))
            self.tensors = [self._tensor(i) for i in
                            range(_lib.rl_ckpt_num_tensors(self._ptr))]
        self.by_name = {t.name: t for t in self.tensors}

    def _tensor(self, i):
        ti = _lib.TensorInfo()
        self.check(_lib.rl_ckpt_tensor(self._ptr, i, ctypes.byref(ti)))
        return TensorMeta(_lib.text(ti.name), _lib.DTYPES[ti.dtype],
                          tuple(ti.shape[d] for d in range(ti.ndim)),
                          ti.file, ti.offset, ti.nbytes)

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

    def _parse(self, sharding):
        if sharding is None:
            return
        if isinstance(sharding, dict):
            sharding = json.dumps(sharding, ensure_ascii=False)
        if isinstance(sharding, str) and sharding.lstrip().startswith("{"):
            b = sharding.encode("utf-8", "surrogateescape")
            self.check(_lib.rl_spec_parse(self._ptr, b, len(b)))
        elif isinstance(sharding, (str, bytes, os.PathLike)):
            self.check(_lib.rl_spec_load(self._ptr, _fspath(sharding)))
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
                                        int(value)))

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
        """Returns every Shard of the planned process, in plan order."""
        ids = [i for i, _ in self.devices()]
        si = _lib.ShardInfo()
        out = []
        for s in range(_lib.rl_plan_num_shards(self.ptr)):
            self.check(_lib.rl_plan_shard(self._ptr, s, ctypes.byref(si)))
            n = si.ndim
            start, stop = tuple(si.start[:n]), tuple(si.stop[:n])
            out.append(Shard(s, _lib.text(si.name), _lib.DTYPES[si.dtype],
                             tuple(si.shape[:n]), start, stop,
                             tuple(b - a for a, b in zip(start, stop)),
                             si.device, ids[si.device], si.offset, si.nbytes))
        return out


class _Progress:
    """Bridges rl_progress_fn to a Python callable. An exception raised by
    the callable (KeyboardInterrupt included: signals are handled here, in
    the only Python code that runs during a load) cancels the load and is
    re-raised by Loader.run()."""

    def __init__(self, fn):
        self.fn = fn
        self.exc = None
        self.cfn = _lib.PROGRESS_FN(self)

    def __call__(self, user, done, total):
        try:
            if self.fn is not None:
                self.fn(done, total)
            return 0
        except BaseException as e:  # noqa: B902 - re-raised after the run
            self.exc = e
            return 1


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
            self.check(_lib.rl_loader_set(self._ptr, _lib.LOADER_PARAMS[key],
                                          int(value)))

    def _with_progress(self, progress, call):
        bridge = _Progress(progress)
        _lib.rl_loader_set_callbacks(self.ptr, _lib.SHARD_FN(), bridge.cfn,
                                     None)
        try:
            rc = call()
        finally:
            _lib.rl_loader_set_callbacks(self._ptr, _lib.SHARD_FN(),
                                         _lib.PROGRESS_FN(), None)
        if bridge.exc is not None:
            raise bridge.exc
        return self.check(rc)

    def load(self, ckpt, spec, process=0, progress=None):
        """rl_loader_load: plans and runs; returns the Plan."""
        out = ctypes.c_void_p()
        self._with_progress(progress, lambda: _lib.rl_loader_load(
            self.ptr, ckpt.ptr, spec.ptr, int(process), ctypes.byref(out)))
        return Plan(out.value)

    def run(self, plan, progress=None):
        """rl_loader_run of a plan built separately."""
        self._with_progress(progress, lambda: _lib.rl_loader_run(
            self.ptr, plan.ptr))

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

    def stats(self):
        """Returns the statistics of the last run as a dict."""
        st = _lib.LoadStats()
        self.check(_lib.rl_loader_get_stats(self.ptr, ctypes.byref(st)))
        out = {name: getattr(st, name) for name, _ in st._fields_}
        out["backend"] = _lib.text(_lib.rl_backend_name(st.backend))
        out["fallbacks"] = _lib.text(st.fallbacks)
        return out
