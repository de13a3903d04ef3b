"""Expected SHA-256 values of a checkpoint's files (the sha256= argument),
as the CLI's --sha256 FILE=HEX and --sha256-file SUMS give them.

resolve(ckpt, sha256) turns the argument into [(file, hex)] for
rl_loader_expect_sha256, which the library checks on the I/O path
(RL_E_CHECKSUM: "<file>: SHA-256 mismatch: expected X, got Y"). Which
file a name means is the library's rule (rl_expect, the CLI's too):

- a dict {file: hex}: file is a path of the checkpoint or its name
  relative to the checkpoint's directory (rl_expect_given);
- 64 hex digits (a str): the value of a one-file checkpoint's file;
- any other str, bytes or path: a SHA256SUMS file in sha256sum's format,
  read and resolved by the library (rl_expect_sums): its warning lines
  (a *.safetensors line naming no file, a file with no line) become
  UserWarnings; its errors (no file named, two values for one file, a
  malformed line naming SUMS:LINE) ArgumentError.

Values that are not 64 hex digits are ArgumentError before anything is
read. Each value goes to the library under its file's own path, so what
resolve accepts the library checks for exactly that file; a Hugging Face
cache file's expected value is its blob's name (rl_hf_blob_sha256).
"""
import ctypes
import os
import re
import sys
import warnings

from . import _errors, _lib

_HEX64 = re.compile(r"[0-9a-fA-F]{64}")


def _warn(msg):
    """A UserWarning attributed to the user's call: the first frame outside
    this package (a fixed stacklevel points inside ringload for some entry
    points, and Python shows such a warning once per process)."""
    pkg, frame, level = os.path.dirname(__file__) + os.sep, sys._getframe(1), 2
    while frame is not None and frame.f_code.co_filename.startswith(pkg):
        frame, level = frame.f_back, level + 1
    warnings.warn(msg, stacklevel=level)


def _arg_error(msg):
    return _errors.ArgumentError(_lib.RL_E_INVALID_ARG, f"sha256: {msg}")


def _hex(name, value):
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise _arg_error(f"{name}: expected SHA-256 {value!r} is not 64 hex digits")
    return value


class _Expect:
    """The library's resolver (rl_expect): which file of ckpt each value
    names, by its rules (the CLI's too)."""

    def __init__(self, ckpt):
        self.ptr = _lib.rl_expect_create(ckpt.ptr, os.fsencode(ckpt.path))
        if not self.ptr:
            raise MemoryError("sha256: out of memory")
        self.n = len(ckpt.files())
        self.paths = ckpt.files()

    def check(self, rc):
        if rc < 0:
            raise _errors.error(rc, "sha256: " + _lib.text(_lib.rl_expect_errmsg(self.ptr)))
        return rc

    def warn(self):
        for line in _lib.text(_lib.rl_expect_warnings(self.ptr)).splitlines():
            _warn(f"sha256: {line}")

    def values(self):
        """[(checkpoint path, hex)] of the files with a value."""
        out = []
        for i in range(self.n):
            hexbuf = ctypes.create_string_buffer(65)
            if self.check(_lib.rl_expect_get(self.ptr, i, hexbuf)):
                out.append((self.paths[i], hexbuf.value.decode("ascii")))
        return out

    def close(self):
        _lib.rl_expect_destroy(self.ptr)


def _c_name(name):
    """name as a C string: a NUL cannot be in a path."""
    name = os.fsencode(name)
    if b"\0" in name:
        raise _arg_error(f"embedded null byte in {os.fsdecode(name)!r}")
    return name


def _from_dict(x, given):
    for name, value in given.items():
        if not isinstance(name, (str, bytes, os.PathLike)):
            raise _errors.ArgumentTypeError(
                _lib.RL_E_INVALID_ARG, f"sha256: key {name!r}: a file name (str, "
                f"bytes or os.PathLike), not {type(name).__name__}")
        name = os.fsdecode(name)
        x.check(_lib.rl_expect_given(x.ptr, _c_name(name), _hex(name, value).encode()))


def _from_sums(x, sums):
    try:
        x.check(_lib.rl_expect_sums(x.ptr, _c_name(os.fspath(sums)), None))
    finally:
        x.warn()


def _resolve(ckpt, how, arg):
    x = _Expect(ckpt)
    try:
        how(x, arg)
        return x.values()
    finally:
        x.close()


def resolve(ckpt, sha256):
    """Returns [(file name, hex)] for sha256 (None: [])."""
    if sha256 is None:
        return []
    paths = ckpt.files()
    if isinstance(sha256, dict):
        if not sha256:
            raise _arg_error("an empty dict expects nothing: give {file: hex} "
                             "or leave sha256 out")
        return _resolve(ckpt, _from_dict, sha256)
    if isinstance(sha256, (str, bytes)) and not sha256.strip():
        raise _arg_error("empty: give {file: hex}, 64 hex digits or a "
                         "SHA256SUMS path (None: nothing to check)")
    if isinstance(sha256, bytes) and _HEX64.fullmatch(sha256.strip().decode("latin-1")):
        sha256 = sha256.decode("latin-1")
    if isinstance(sha256, str) and _HEX64.fullmatch(sha256.strip()):
        sha256 = sha256.strip()  # as read from a file, newline and all
        if len(paths) != 1:
            raise _arg_error(f"one value for a checkpoint of {len(paths)} files: "
                             "give {file: hex} or a SHA256SUMS file")
        return [(paths[0], sha256)]
    if isinstance(sha256, (str, bytes, os.PathLike)):
        return _resolve(ckpt, _from_sums, sha256)
    raise _arg_error("give {file: hex}, 64 hex digits or a SHA256SUMS path, "
                     f"not {type(sha256).__name__}")


# rl_file_stats.sha256_state of a file whose expected value was not checked
_UNCHECKED = {_lib.RL_SHA256_PARTIAL: "this load reads only part of the file"}


def warn_unchecked(loader, ckpt):
    """After a load: a warning naming each file of ckpt with an expected
    SHA-256 (the Hugging Face cache's blob name) that the load read but
    could not check, as the CLI's warning lines: a flipped byte must not
    load without a word."""
    x = _lib.LoadStats(size=ctypes.sizeof(_lib.LoadStats))
    if _lib.rl_loader_get_stats(loader.ptr, ctypes.byref(x)) < 0 or not x.files_unchecked:
        return
    paths = ckpt.files()
    for i in range(_lib.rl_loader_num_files(loader.ptr)):
        fs = _lib.FileStats(size=ctypes.sizeof(_lib.FileStats))
        if (_lib.rl_loader_get_file_stats(loader.ptr, i, ctypes.byref(fs)) == 0
                and fs.sha256_state in _UNCHECKED and fs.file < len(paths)):
            _warn(f"{paths[fs.file]}: expected SHA-256 (Hugging Face cache) not "
                  f"checked: {_UNCHECKED[fs.sha256_state]}")


def hf_expected(path):
    """The SHA-256 the Hugging Face cache layout names for path, or None
    (the library's rule, rl_hf_blob_sha256, as RL_OPT_SHA256_HF)."""
    digest = (ctypes.c_uint8 * 32)()
    if _lib.rl_hf_blob_sha256(os.fsencode(path), digest) != 1:
        return None
    return bytes(digest).hex()


def to_hash(ckpt, expected):
    """{file index: hex} of the files safe_open hashes whole before it
    reads from them (its reads are partial: the library checks only files
    a load reads whole): those with an expected value, given or named by
    the Hugging Face cache layout."""
    out = {}
    for i, path in enumerate(ckpt.files()):
        # the last value given for the file: resolve() names files by their
        # paths (ck/m.safetensors is not the end of ck/sub/ck/m.safetensors)
        want = next((v for n, v in reversed(expected) if n == path), None)
        if want is None:
            want = hf_expected(path)
        if want is not None:
            out[i] = want
    return out


def verify_file(path, want):
    """Hashes path whole with the library's SHA-256 (rl_sha256_file: 8 MiB
    at a time, the GIL released) and raises IntegrityError (RL_E_CHECKSUM,
    the library's wording) unless its SHA-256 is want."""
    digest = (ctypes.c_uint8 * 32)()
    rc = _lib.rl_sha256_file(os.fsencode(path), digest)
    if rc < 0:
        raise _errors.error(rc, f"{path}: {os.strerror(-rc)}")  # -errno only
    got = bytes(digest).hex()
    if got != want.lower():
        raise _errors.error(_lib.RL_E_CHECKSUM, f"{path}: SHA-256 mismatch: "
                            f"expected {want.lower()}, got {got}")
