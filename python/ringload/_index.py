"""get_slice() indexing: numpy's basic indexing with positive steps, as
safetensors' get_slice gives it with PyTorch (a torch tensor's indexing).

normalize(key, shape) splits an index into the box to read, [start, stop)
per dimension (only those bytes are read), and the index that the box then
takes: steps, integer dimensions removed, None adding one. Refused, as
torch refuses them: negative or zero steps; and not supported here:
advanced indexing (lists, arrays, booleans), which reads no box.
"""
import operator

from . import _errors, _lib


def _slice_error(msg, words):
    """The SliceError for msg, followed by safetensors' words for the same
    fault (its numpy path's: a user may match on them)."""
    return _errors.SliceError(_lib.RL_E_INVALID_ARG,
                              f"get_slice: {msg} [safetensors: {words}]")


class _SliceTypeError(_errors.SliceError, TypeError):
    """A framework's TypeError for an index (torch: a str)."""


def framework_error(e, prefix=""):
    """The SliceError for a framework's (or Python's) own IndexError,
    ValueError or TypeError about an index: its message word for word after
    prefix, and a subclass of its type too (safetensors' get_slice with
    torch raises torch's)."""
    cls = _SliceTypeError if isinstance(e, TypeError) else _errors.SliceError
    return cls(_lib.RL_E_INVALID_ARG, f"{prefix}{e}")


def _as_int(k):
    # a bool (numpy's and torch's too: a mask), or an array / tensor of one
    # element, is not an integer index
    if isinstance(k, bool) or getattr(k, "ndim", 0) or \
            "bool" in str(getattr(k, "dtype", "")):
        return None
    try:
        return operator.index(k)
    except TypeError:
        return None


def _expand(key, ndim):
    """The index as a tuple with the Ellipsis expanded and every dimension
    covered."""
    bare = not isinstance(key, tuple)  # safetensors words a bare list apart
    if bare:
        key = (key,)
    for at, k in enumerate(key):
        if not (k is None or k is Ellipsis or isinstance(k, slice) or
                _as_int(k) is not None):
            raise _slice_error(
                f"index {k!r} of type {type(k).__name__} is not supported "
                "(integers, slices with positive steps, ... and None)",
                "Non empty lists are not implemented" if bare and
                isinstance(k, list) else f"Unsupported slice index at "
                f"position {at}: expected slice, int, or ellipsis")
    if sum(k is Ellipsis for k in key) > 1:
        raise _slice_error("an index can only have a single ellipsis ('...')",
                           "Only one ellipsis (...) is allowed in slice index")
    used = sum(k is not None and k is not Ellipsis for k in key)
    if used > ndim:
        raise _slice_error(f"too many indices: {used} for a tensor of "
                           f"{ndim} dimensions", "more slicing indexes than "
                           "dimensions in tensor")
    fill = (slice(None),) * (ndim - used)
    at = [i for i, k in enumerate(key) if k is Ellipsis]
    if at:
        return key[:at[0]] + fill + key[at[0] + 1:]
    return key + fill


def _one(k, dim, size):
    """((start, stop), post index) for index k of dimension dim."""
    if isinstance(k, slice):
        if k.step is not None and _as_int(k.step) is not None and k.step <= 0:
            raise _slice_error(f"step {k.step} in dimension {dim}: steps must "
                               "be positive", "Slice step must be a positive "
                               f"integer, got {k.step}")
        start, stop, step = k.indices(size)
        n = len(range(start, stop, step))
        if n == 0:
            return (0, 0), slice(None)
        return (start, start + (n - 1) * step + 1), slice(None, None, step)
    i = _as_int(k)
    j = i + size if i < 0 else i
    if not 0 <= j < size:
        raise _slice_error(f"index {i} is out of bounds for dimension {dim} "
                           f"with size {size}", f"index {i} out of bounds for "
                           f"tensor dimension #{dim} of size {size}" if i >= 0
                           else f"Invalid index {i} for dimension {dim} of "
                           f"size {size}")
    return (j, j + 1), 0


def normalize(key, shape):
    """Returns (box, post): box [(start, stop)] per dimension of shape, and
    post, the tuple index the box (an array of the box's shape) takes."""
    if isinstance(key, list) and not key:
        key = slice(0, 0)  # safetensors 0.8: [] selects nothing of dimension 0
    try:
        key = _expand(key, len(shape))
        box, post, dim = [], [], 0
        for k in key:
            if k is None:
                post.append(None)
                continue
            b, p = _one(k, dim, shape[dim])
            box.append(b)
            post.append(p)
            dim += 1
    except (TypeError, ValueError) as e:
        if isinstance(e, _errors.Error):
            raise
        raise framework_error(e, "get_slice: ") from None
    return box, tuple(post)
