"""Exceptions: every failure of the library raises an Error subclass that
carries the C error code (``code``, an RL_E_* value or -errno), its name
(``code_name``), rl_strerror()'s text (``strerror``) and the handle's
one-line message (``message``, also ``str(e)``), exactly as the C library
and the CLI report it.

Errors found in Python (a framework name, a device, a dtype the framework
cannot hold, an index) use the existing codes RL_E_INVALID_ARG and
RL_E_STATE, as the CLI does.
"""
import errno as _errno

from . import _lib


class Error(Exception):
    """Base class of every ringload error: ``code``, ``code_name``,
    ``strerror`` and ``message`` (the C library's one-line message)."""

    def __init__(self, code, message=None):
        strerror = _lib.text(_lib.rl_strerror(code))
        super().__init__(message or strerror)
        self.code = code
        self.strerror = strerror  # after OSError.__init__, which resets it
        self.message = message or strerror
        self.code_name = code_name(code)

    def __str__(self):
        return self.message

    def __reduce__(self):
        return (type(self), (self.code, self.message))


class HeaderError(Error):
    """A safetensors file is malformed or truncated (RL_E_HEADER_*, offsets,
    overflow, sizes, RL_E_TRUNCATED): the safetensors reference rejects the
    same files. str() adds safetensors' words for the same fault (what a
    user matches on) to the library's message."""

    def __str__(self):
        words = _SAFETENSORS_WORDS.get(self.code_name)
        if words is None:
            return self.message
        return (f"{self.message} [safetensors: Error while deserializing "
                f"header: {words}]")


# safetensors 0.8's words for the header faults (test_parity compares them)
_SAFETENSORS_WORDS = {
    "RL_E_HEADER_TOO_SMALL": "header too small",
    "RL_E_HEADER_TOO_LARGE": "header too large",
    "RL_E_HEADER_LENGTH": "invalid header length",
    "RL_E_HEADER_UTF8": "invalid UTF-8 in header",
    "RL_E_HEADER_JSON": "invalid JSON in header",
    "RL_E_INVALID_OFFSET": "invalid offset for tensor",
    "RL_E_OVERFLOW": "overflow computing buffer size from shape and/or element type",
    "RL_E_MISALIGNED": "The slice is slicing for subbytes dtypes, and the slice "
                       "does not end up at a byte boundary, this is invalid.",
    "RL_E_SIZE_MISMATCH": "invalid shape, data type, or offset for tensor",
    "RL_E_INCOMPLETE": "incomplete metadata, file not fully covered",
    "RL_E_TRUNCATED": "incomplete metadata, file not fully covered",
}


class CheckpointError(Error):
    """A checkpoint of several files is inconsistent (bad index.json, a
    tensor in two files)."""


class TensorNotFoundError(CheckpointError):
    """A named tensor does not exist (RL_E_MISSING_TENSOR)."""


class SpecError(Error):
    """The sharding spec or a target is invalid (RL_E_SPEC*, shape
    mismatch, a sub-byte shard off whole bytes)."""


class ArgumentError(Error, ValueError):
    """A parameter out of bounds or a size limit (RL_E_INVALID_ARG,
    RL_E_TOO_LARGE), also a bad argument found in Python."""


class ArgumentTypeError(Error, TypeError):
    """An argument of the wrong type (a str, float or bool for an integer),
    named with the type it has (code RL_E_INVALID_ARG)."""


class FrameworkError(ArgumentError):
    """An unsupported framework name."""


class DeviceError(ArgumentError):
    """An invalid or unusable device."""


class SliceError(ArgumentError, IndexError):
    """An index get_slice() refuses or one out of range."""


class StateError(Error):
    """A call not valid in this state (RL_E_STATE), e.g. a closed file."""


class LoadError(Error):
    """Loading failed: backend unavailable, staging missing (RL_E_BACKEND,
    RL_E_STAGING, and engine codes of newer libraries)."""


class CanceledError(LoadError):
    """A callback canceled the load (RL_E_CANCELED)."""


class IntegrityError(LoadError):
    """A file changed since its checkpoint was opened or during the load
    (RL_E_FILE_CHANGED), or its SHA-256 differs from the expected one or
    cannot be checked (RL_E_CHECKSUM)."""


class DtypeError(Error, TypeError):
    """The framework cannot hold a tensor's dtype; names tensor and dtype."""


class SysError(Error, OSError):
    """A system error (-errno): ``errno`` is set, and the classes for ENOENT
    and EACCES/EPERM also derive from FileNotFoundError / PermissionError."""

    def __init__(self, code, message=None):
        Error.__init__(self, code, message)
        self.errno = -code
        self.args = (self.errno, self.message)


class FileNotFoundSysError(SysError, FileNotFoundError):
    """ENOENT: a file of the checkpoint does not exist."""


class PermissionSysError(SysError, PermissionError):
    """EACCES / EPERM."""


_BY_CODE = {
    _lib.RL_E_BAD_INDEX: CheckpointError,
    _lib.RL_E_DUPLICATE_TENSOR: CheckpointError,
    _lib.RL_E_MISSING_TENSOR: TensorNotFoundError,
    _lib.RL_E_INVALID_ARG: ArgumentError,
    _lib.RL_E_TOO_LARGE: ArgumentError,
    _lib.RL_E_STATE: StateError,
    _lib.RL_E_CANCELED: CanceledError,
    _lib.RL_E_FILE_CHANGED: IntegrityError,
    _lib.RL_E_CHECKSUM: IntegrityError,
    -_errno.ENOENT: FileNotFoundSysError,
    -_errno.EACCES: PermissionSysError,
    -_errno.EPERM: PermissionSysError,
}

# Code ranges (api/ringload.h and the briefing's allocation): codes a newer
# library appends land in their group's class.
_BY_RANGE = (
    (-5019, -5001, HeaderError),
    (-5029, -5020, CheckpointError),
    (-5039, -5030, SpecError),
    (-5049, -5040, ArgumentError),
    (-5059, -5050, LoadError),
    (-5069, -5060, HeaderError),      # hostile input, file integrity
    (-5099, -5070, LoadError),        # engine, streaming, cluster
    (-5109, -5100, LoadError),        # CUDA devices
)

def code_name(code):
    """Returns "RL_E_HEADER_JSON" (the library's name, rl_error_name),
    "ENOENT", ... for an error code."""
    name = _lib.rl_error_name(code) if -2**31 <= code < 2**31 else None
    if name is not None:
        return name.decode("ascii")
    if -4096 < code < 0:
        return _errno.errorcode.get(-code, f"errno {-code}")
    return f"error {code}"


def error_class(code):
    """Returns the Error subclass raised for a C error code."""
    if code in _BY_CODE:
        return _BY_CODE[code]
    for lo, hi, cls in _BY_RANGE:
        if lo <= code <= hi:
            return cls
    if -4096 < code < 0:
        return SysError
    return Error


def error(code, message=None):
    """Returns (does not raise) the exception for code and message."""
    return error_class(code)(code, message)


def check(rc, errmsg_fn=None, handle=None):
    """Returns rc when it is >= 0; otherwise raises the error for rc with
    the handle's message (errmsg_fn(handle))."""
    if rc >= 0:
        return rc
    msg = _lib.text(errmsg_fn(handle)) if errmsg_fn else None
    raise error(rc, msg)
