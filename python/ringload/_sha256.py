"""Expected SHA-256 values of a checkpoint's files (the sha256= argument),
as the CLI's --sha256 FILE=HEX and --sha256-file SUMS give them.

resolve(ckpt, sha256) turns the argument into [(file, hex)] for
rl_loader_expect_sha256, which the library checks on the I/O path
(RL_E_CHECKSUM: "<file>: SHA-256 mismatch: expected X, got Y"):

- a dict {file: hex}: file is a path of the checkpoint or its name
  relative to the checkpoint's directory; a file that is not one of the
  checkpoint's, or one naming two of them, is ArgumentError;
- 64 hex digits (a str): the value of a one-file checkpoint's file;
- any other str, bytes or path: a SHA256SUMS file in sha256sum's format
  ("<64 hex>  <name>" or "<64 hex> *<name>"; read by the library's parser,
  rl_sums_open, as the CLI reads it), names relative to the sums
  file's directory, or to the checkpoint's when nothing of that name is
  there; an escaped line (a leading backslash, as sha256sum writes a name
  with a backslash, newline or CR) has its name unescaped; lines naming no
  file of the checkpoint (config.json, ...) are skipped (a warning for a
  *.safetensors name), a file with no line is warned of, two values for
  one file and a malformed line (naming SUMS:LINE) are ArgumentError.

Values that are not 64 hex digits are ArgumentError before anything is
read. Names and files are compared by identity (device and inode, the
path resolved by the file system: "./", ".." and a symlinked directory
spell the same file), as the CLI compares them, and each value goes to the
library under its file's own path, so what resolve accepts the library
checks for exactly that file.
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


def _path_in(base, name):
    """name relative to base (None: the working directory), as the file
    system resolves it (symlinked directories and ".." as sha256sum -c)."""
    return os.path.join(base, name) if base else name


def _ckpt_dir(ckpt):
    """The checkpoint's directory: its path when that is one, else the
    directory of its file or index."""
    path = os.fsdecode(ckpt.path)  # a bytes path too, as every name here is str
    return path if os.path.isdir(path) else os.path.dirname(path)


def _stat(path):
    try:
        return os.stat(path)
    except (OSError, ValueError):  # ValueError: a NUL in the name
        return None


def _file_of(paths, base, name):
    """The checkpoint path that name, relative to base, is: the same file
    (device and inode) however the path spells it; or None."""
    want = _stat(_path_in(base, name))
    return next((p for p in paths if want and (st := _stat(p))
                 and os.path.samestat(st, want)), None)


def _hex(name, value):
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise _arg_error(f"{name}: expected SHA-256 {value!r} is not 64 hex digits")
    return value


def _from_dict(paths, ckdir, given):
    """[(checkpoint path, hex)]: each name a path, or a name relative to the
    checkpoint's directory; one that is both, of two files, is ambiguous,
    and so is a second, different value for a file however spelled."""
    got = {}
    for name, value in given.items():
        name = os.fsdecode(name)
        found = {f for f in (_file_of(paths, None, name), _file_of(paths, ckdir, name)) if f}
        if not found:
            raise _arg_error(f"'{name}' is not a file of the checkpoint (its files: "
                             + ", ".join(paths) + ")")
        if len(found) > 1:
            raise _arg_error(f"'{name}' names both " + " and ".join(sorted(found))
                             + ": give its path")
        path, value = found.pop(), _hex(name, value)
        if path in got and got[path][1].lower() != value.lower():
            raise _arg_error(f"'{name}' has another value from '{got[path][0]}'")
        got.setdefault(path, (name, value))
    return [(p, v) for p, (_, v) in got.items()]


def _parse_sums(sums):
    """[(line, name, hex)] of the sums file, parsed by the library's one
    SHA256SUMS parser (rl_sums_open: the CLI's too, with its messages)."""
    sums = os.fsdecode(os.fspath(sums))
    if "\0" in sums:
        raise _arg_error(f"embedded null byte in {sums!r}")
    handle = _lib.rl_sums_create()
    if not handle:
        raise MemoryError("sha256: out of memory")
    try:
        rc = _lib.rl_sums_open(handle, os.fsencode(sums))
        if rc < 0:
            raise _errors.error(rc, "sha256: " + _lib.text(_lib.rl_sums_errmsg(handle)))
        out = []
        for i in range(_lib.rl_sums_count(handle)):
            e = _lib.SumsEntry(size=ctypes.sizeof(_lib.SumsEntry))
            _errors.check(_lib.rl_sums_get(handle, i, ctypes.byref(e)))
            out.append((e.line, _lib.text(e.name), e.hex.decode("ascii")))
        return out
    finally:
        _lib.rl_sums_destroy(handle)


def _sums_file_of(paths, base, ckdir, name):
    """The checkpoint path a sums name is: relative to the sums file's
    directory base (as sha256sum -c reads it there), or, when it is no file
    there, to the checkpoint's (a sums file kept elsewhere)."""
    path = _file_of(paths, base, name)
    if path is None and _absent(_path_in(base, name)):
        path = _file_of(paths, ckdir, name)
    return path


def _absent(path):
    """path is nothing at all (as the CLI: lstat fails with ENOENT; a
    dangling symlink is something, and so is what cannot be looked at)."""
    try:
        os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        pass
    return False


def _from_sums(paths, ckdir, sums):
    """[(checkpoint path, hex)] of the lines naming a file of the checkpoint:
    exact, so one file never gets another's value."""
    sums = os.fsdecode(os.fspath(sums))
    base, got = os.path.dirname(sums), {}
    for i, name, value in _parse_sums(sums):
        path = _sums_file_of(paths, base, ckdir, name)
        if path is None:
            if name.endswith(".safetensors"):
                _warn(f"sha256: {sums}:{i}: {name} is no file of the checkpoint: skipped")
        elif path in got and got[path][1].lower() != value.lower():
            raise _arg_error(f"{sums}:{i}: {name} has another value on line {got[path][0]}")
        else:
            got[path] = (i, value)
    if not got:
        raise _arg_error(f"{sums} names none of the checkpoint's files ("
                         + ", ".join(paths) + ")")
    for p in paths:
        if p not in got:
            _warn(f"sha256: {p}: no line in {sums}: its SHA-256 is not checked")
    return [(p, v) for p, (_, v) in got.items()]


def resolve(ckpt, sha256):
    """Returns [(file name, hex)] for sha256 (None: [])."""
    if sha256 is None:
        return []
    paths = ckpt.files()
    if isinstance(sha256, dict):
        if not sha256:
            raise _arg_error("an empty dict expects nothing: give {file: hex} "
                             "or leave sha256 out")
        return _from_dict(paths, _ckpt_dir(ckpt), sha256)
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
        return _from_sums(paths, _ckpt_dir(ckpt), sha256)
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
    """The SHA-256 the Hugging Face cache layout names for path, or None:
    a snapshot file that is a symlink to .../blobs/<64 hex digits> (the
    library's rule, RL_OPT_SHA256_HF; a 40-digit git SHA-1 names nothing)."""
    try:
        link = os.readlink(path)
    except OSError:
        return None
    parent, base = os.path.split(link)
    if os.path.basename(parent) != "blobs" or not _HEX64.fullmatch(base):
        return None
    return base


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
