"""The ctypes bindings of libringload.so: every structure, enum value and
function prototype of api/ringload.h that Python uses, in one module.

Extending: a new field of a C structure goes into its _fields_ here and
into python/tests/struct_layout.c (test_bindings reads every member of every
structure from api/ringload.h and fails until both have it, in the
header's order; the layout test compares each with the C compiler's
offsetof and sizeof); a new function goes into _PROTOTYPES, optional ones (newer
libraries) into _OPTIONAL, and is then present as ``lib.rl_name`` or None.

The library is found, in this order, through
  1. the RINGLOAD_LIB environment variable (a path to the .so),
  2. ``libringload.so.0`` next to this package (make links the build tree's
     library there; make install links the installed one),
  3. the soname ``libringload.so.0`` through the dynamic loader's search
     (LD_LIBRARY_PATH, ld.so.cache).
"""
import ctypes
import os
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double,
                    c_int, c_int32, c_int64, c_long, c_size_t, c_uint, c_uint32,
                    c_uint64, c_void_p)

SONAME = "libringload.so.0"

# --- enum values (api/ringload.h; checked against C by the layout test) ---

RL_OK = 0
ERROR_CODES = {
    "RL_E_HEADER_TOO_SMALL": -5001, "RL_E_HEADER_TOO_LARGE": -5002,
    "RL_E_HEADER_LENGTH": -5003, "RL_E_HEADER_UTF8": -5004,
    "RL_E_HEADER_JSON": -5005, "RL_E_INVALID_OFFSET": -5006,
    "RL_E_OVERFLOW": -5007, "RL_E_MISALIGNED": -5008,
    "RL_E_SIZE_MISMATCH": -5009, "RL_E_INCOMPLETE": -5010,
    "RL_E_TRUNCATED": -5011,
    "RL_E_BAD_INDEX": -5020, "RL_E_DUPLICATE_TENSOR": -5021,
    "RL_E_MISSING_TENSOR": -5022,
    "RL_E_SPEC": -5030, "RL_E_SPEC_MESH": -5031, "RL_E_SPEC_AXIS": -5032,
    "RL_E_SPEC_RANK": -5033, "RL_E_SPEC_REGEX": -5034,
    "RL_E_SPEC_TARGET": -5035, "RL_E_SHAPE_MISMATCH": -5036,
    "RL_E_SUBBYTE_SPLIT": -5037,
    "RL_E_INVALID_ARG": -5040, "RL_E_STATE": -5041, "RL_E_TOO_LARGE": -5042,
    "RL_E_BACKEND": -5050, "RL_E_CANCELED": -5051, "RL_E_STAGING": -5052,
    "RL_E_RELEASE_TIMEOUT": -5080, "RL_E_PIECE": -5081,
    "RL_E_PIECE_TIMEOUT": -5082,
    "RL_E_FILE_UNAVAILABLE": -5090, "RL_E_MPI": -5091, "RL_E_PEER": -5092,
    "RL_E_CLUSTER_MISMATCH": -5093,
    "RL_E_FILE_CHANGED": -5065, "RL_E_CHECKSUM": -5066,
    "RL_E_CUDA": -5100, "RL_E_CUDA_DRIVER": -5101, "RL_E_CUDA_DEVICE": -5102,
    "RL_E_CUDA_MEMORY": -5103,
}
globals().update(ERROR_CODES)

DTYPES = ("BOOL", "U8", "I8", "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16",
          "F16", "BF16", "I32", "U32", "F32", "F64", "I64", "U64", "F4",
          "F6_E2M3", "F6_E3M2", "C64", "F8_E4M3FNUZ", "F8_E5M2FNUZ")
"""Safetensors dtype names by rl_dtype value (RL_DTYPE_<name> = index)."""

FALLBACKS = {
    "backend": 1 << 0, "uring_flags": 1 << 1, "files_unregistered": 1 << 2,
    "buffers_unregistered": 1 << 3, "buffers_unlocked": 1 << 4,
    "not_prefaulted": 1 << 5, "fewer_workers": 1 << 6,
}
"""RL_FALLBACK_<NAME> flags of rl_load_stats.fallback_flags by lower-case name."""

PLAN_PARAMS = {
    "process": 1, "min_gap": 2, "ratio_milli": 3, "chunk_bytes": 4,
    "shard_align": 5, "congruent": 6, "all_stats": 7, "read_once": 8,
    "batch_bytes": 9, "transfer_align": 10, "max_memory": 11,
}
"""rl_plan_param values by lower-case name (RL_PLAN_<NAME>)."""

LOADER_PARAMS = {
    "backend": 1, "queue_depth": 2, "request_bytes": 3, "inflight_bytes": 4,
    "buffers": 5, "register": 6, "direct": 7, "staging": 8, "threads": 9,
    "workers": 10, "sha256_hf": 11, "staging_budget": 12, "release_timeout_ms": 13,
}
"""rl_loader_param values by lower-case name (RL_OPT_<NAME>)."""

BACKENDS = {"auto": 0, "io_uring": 1, "libaio": 2, "pread": 3}
RL_STAGING_LIBRARY = 0
RL_STAGING_CALLER = 1
RL_STAGING_STREAM = 2
RL_SHA256_PARTIAL = 2   # rl_file_stats.sha256_state of files a run did not check
RL_SHA256_STREAMED = 4
RL_DIRECT_OFF, RL_DIRECT_ON, RL_DIRECT_AUTO = 0, 1, 2
FILE_MODES = {"unused": 0, "direct": 1, "cached": 2, "buffered": 3}
"""rl_file_stats.mode values by lower-case name (RL_FILE_<NAME>)."""
RL_MAX_DIMS = 16
RL_TOTAL = -1

# --- structures ---


class TensorInfo(Structure):
    """rl_tensor_info"""
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_uint),
                ("shape", POINTER(c_uint64)), ("file", c_size_t),
                ("offset", c_uint64), ("nbytes", c_uint64)]


class DimSpec(Structure):
    """rl_dim_spec"""
    _fields_ = [("naxes", c_uint), ("axes", POINTER(c_char_p))]


class PlanStats(Structure):
    """rl_plan_stats"""
    _fields_ = [("devices", c_uint64), ("needed_bytes", c_uint64),
                ("read_bytes", c_uint64), ("blocks", c_uint64),
                ("requests", c_uint64), ("files_opened", c_uint64)]


class DeviceInfo(Structure):
    """rl_device_info"""
    _fields_ = [("id", c_uint32), ("staging_bytes", c_uint64),
                ("nshards", c_size_t)]


class ShardInfo(Structure):
    """rl_shard_info"""
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_uint),
                ("shape", c_uint64 * RL_MAX_DIMS),
                ("start", c_uint64 * RL_MAX_DIMS),
                ("stop", c_uint64 * RL_MAX_DIMS),
                ("device", c_uint), ("offset", c_uint64), ("nbytes", c_uint64)]


class RequestInfo(Structure):
    """rl_request_info"""
    _fields_ = [("file", c_size_t), ("offset", c_uint64), ("length", c_uint64),
                ("min_length", c_uint64), ("ncopies", c_size_t),
                ("direct", c_int)]


class CopyInfo(Structure):
    """rl_copy_info"""
    _fields_ = [("src", c_uint64), ("len", c_uint64), ("count", c_uint64),
                ("src_stride", c_uint64), ("device", c_uint),
                ("dst", c_uint64), ("shard", c_size_t)]


class BroadcastInfo(Structure):
    """rl_broadcast_info"""
    _fields_ = [("name", c_char_p), ("src_offset", c_uint64),
                ("nbytes", c_uint64), ("root", c_int),
                ("nreceivers", c_size_t), ("receivers", POINTER(c_int)),
                ("batch", c_size_t), ("shard", c_size_t)]


class LoadStats(Structure):
    """rl_load_stats (size-tagged: set size = sizeof before the call)"""
    _fields_ = [("size", c_size_t), ("bytes_needed", c_uint64), ("bytes_read", c_uint64),
                ("bytes_direct", c_uint64), ("bytes_buffered", c_uint64),
                ("requests", c_uint64), ("retries", c_uint64),
                ("peak_inflight", c_uint64), ("request_bytes", c_uint64),
                ("plan_seconds", c_double), ("setup_seconds", c_double),
                ("read_seconds", c_double), ("prepare_seconds", c_double),
                ("scatter_seconds", c_double), ("total_seconds", c_double),
                ("gbps", c_double), ("backend", c_int), ("workers", c_uint),
                ("queue_depth", c_uint), ("buffers", c_uint),
                ("registered_buffers", c_uint), ("registered_files", c_int),
                ("direct_io", c_int), ("files_cached", c_uint), ("numa_node", c_int),
                ("files_hashed", c_uint), ("files_unchecked", c_uint),
                ("bytes_hashed", c_uint64), ("hash_seconds", c_double),
                ("hash_held_peak", c_uint64),
                ("stream_windows", c_uint), ("stream_registered", c_int),
                ("stream_window_bytes", c_uint64), ("stream_ranges", c_uint64),
                ("engine_runs", c_uint), ("fallback_flags", c_uint),
                ("reads_fixed", c_uint64),
                ("fallbacks", c_char * 256), ("shape", c_char * 384),
                ("stream_pool_bytes", c_uint64), ("stream_pool_limit", c_uint),
                ("stream_pool_reads", c_uint), ("stream_pool_medium", c_uint64),
                ("stream_pool_depth", c_uint), ("stream_pool_workers", c_uint),
                ("reserved", c_uint64 * 12)]


class FileStats(Structure):
    """rl_file_stats (size-tagged)"""
    _fields_ = [("size", c_size_t), ("file", c_size_t), ("mode", c_int),
                ("bytes_needed", c_uint64), ("bytes_resident", c_uint64),
                ("device", c_char * 64), ("max_request_bytes", c_uint32),
                ("max_segments", c_uint32), ("optimal_io_bytes", c_uint32),
                ("sha256_state", c_int), ("sha256", c_char * 65),
                ("reserved", c_uint64 * 8)]


class FileHeader(Structure):
    """rl_file_header"""
    _fields_ = [("path", c_char_p), ("size", c_uint64), ("header", c_void_p),
                ("header_len", c_uint64)]


class TransferInfo(Structure):
    """rl_transfer_info"""
    _fields_ = [("file", c_size_t), ("offset", c_uint64), ("nbytes", c_uint64),
                ("root", c_int), ("nreceivers", c_size_t),
                ("receivers", POINTER(c_int)), ("batch", c_size_t),
                ("index", c_uint64), ("ncopies", c_size_t)]


class PlanXStats(Structure):
    """rl_plan_xstats (size-tagged: set size = sizeof before the call)"""
    _fields_ = [("size", c_size_t), ("transfers", c_uint64), ("payload_bytes", c_uint64),
                ("transfer_read_bytes", c_uint64), ("sent_bytes", c_uint64),
                ("received_bytes", c_uint64), ("files_opened", c_uint64),
                ("max_read_bytes", c_uint64), ("max_files_opened", c_uint64),
                ("reserved", c_uint64 * 8)]


class Piece(Structure):
    """rl_piece: one streamed piece of a shard (valid until released)"""
    _fields_ = [("shard", c_size_t), ("device", c_uint), ("offset", c_uint64),
                ("length", c_uint64), ("data", c_void_p), ("token", c_uint64)]


class CudaOpts(Structure):
    """rl_cuda_opts: delivery to CUDA devices (spec device id -> ordinal)"""
    _fields_ = [("size", c_uint32), ("ndevs", c_uint32), ("device_map", POINTER(c_int32)),
                ("reserved", c_uint64 * 4)]


class SumsEntry(Structure):
    """rl_sums_entry: one line of a SHA256SUMS file (size-tagged)"""
    _fields_ = [("size", c_size_t), ("name", c_char_p), ("sha256", ctypes.c_uint8 * 32),
                ("hex", c_char * 65), ("line", c_uint), ("reserved", c_uint64 * 4)]


STRUCTURES = {
    "rl_tensor_info": TensorInfo, "rl_dim_spec": DimSpec,
    "rl_plan_stats": PlanStats, "rl_device_info": DeviceInfo,
    "rl_shard_info": ShardInfo, "rl_request_info": RequestInfo,
    "rl_copy_info": CopyInfo, "rl_broadcast_info": BroadcastInfo,
    "rl_load_stats": LoadStats,
    "rl_file_stats": FileStats, "rl_file_header": FileHeader,
    "rl_transfer_info": TransferInfo, "rl_plan_xstats": PlanXStats,
    "rl_piece": Piece, "rl_cuda_opts": CudaOpts, "rl_sums_entry": SumsEntry,
}
"""Every bound structure by its C name (the layout test walks this)."""

SHARD_FN = CFUNCTYPE(None, c_void_p, c_size_t)
PROGRESS_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint64)
PIECE_FN = CFUNCTYPE(c_int, c_void_p, POINTER(Piece))
COPY_RUN_FN = CFUNCTYPE(c_int, c_void_p, c_uint64, c_uint64, c_uint64)

# --- functions: name -> (restype, argtypes) ---

_V = c_void_p
_PROTOTYPES = {
    "rl_version_number": (c_uint, []),
    "rl_version_string": (c_char_p, []),
    "rl_strerror": (c_char_p, [c_int]),
    "rl_dtype_name": (c_char_p, [c_int]),
    "rl_dtype_bits": (c_uint, [c_int]),
    "rl_dtype_from_name": (c_int, [c_char_p]),

    "rl_ckpt_create": (_V, []),
    "rl_ckpt_open": (c_int, [_V, c_char_p]),
    "rl_ckpt_errmsg": (c_char_p, [_V]),
    "rl_ckpt_destroy": (None, [_V]),
    "rl_ckpt_num_files": (c_size_t, [_V]),
    "rl_ckpt_file_path": (c_char_p, [_V, c_size_t]),
    "rl_ckpt_file_size": (c_uint64, [_V, c_size_t]),
    "rl_ckpt_num_tensors": (c_size_t, [_V]),
    "rl_ckpt_tensor": (c_int, [_V, c_size_t, POINTER(TensorInfo)]),
    "rl_ckpt_find": (c_long, [_V, c_char_p]),
    "rl_ckpt_num_metadata": (c_size_t, [_V]),
    "rl_ckpt_metadata": (c_int, [_V, c_size_t, POINTER(c_char_p),
                                 POINTER(c_char_p)]),
    "rl_ckpt_metadata_get": (c_char_p, [_V, c_char_p]),
    "rl_ckpt_open_headers": (c_int, [_V, c_size_t, POINTER(FileHeader)]),

    "rl_spec_create": (_V, []),
    "rl_spec_parse": (c_int, [_V, c_char_p, c_size_t]),
    "rl_spec_load": (c_int, [_V, c_char_p]),
    "rl_spec_set_mesh": (c_int, [_V, c_uint, POINTER(c_uint32),
                                 POINTER(c_char_p), POINTER(c_uint32),
                                 POINTER(c_uint32)]),
    "rl_spec_add_rule": (c_int, [_V, c_char_p, c_uint, POINTER(DimSpec)]),
    "rl_spec_add_target_json": (c_int, [_V, c_char_p, c_size_t]),
    "rl_spec_errmsg": (c_char_p, [_V]),
    "rl_spec_destroy": (None, [_V]),
    "rl_spec_set_files_of_process": (c_int, [_V, c_uint, c_size_t,
                                             POINTER(c_char_p)]),

    "rl_plan_create": (_V, []),
    "rl_plan_set": (c_int, [_V, c_int, c_int64]),
    "rl_plan_param_bounds": (c_int, [c_int, POINTER(c_int64),
                                     POINTER(c_int64)]),
    "rl_plan_build": (c_int, [_V, _V, _V]),
    "rl_plan_errmsg": (c_char_p, [_V]),
    "rl_plan_destroy": (None, [_V]),
    "rl_plan_num_processes": (c_uint, [_V]),
    "rl_plan_get_stats": (c_int, [_V, c_int, POINTER(PlanStats)]),
    "rl_plan_num_devices": (c_uint, [_V]),
    "rl_plan_device": (c_int, [_V, c_uint, POINTER(DeviceInfo)]),
    "rl_plan_num_shards": (c_size_t, [_V]),
    "rl_plan_shard": (c_int, [_V, c_size_t, POINTER(ShardInfo)]),
    "rl_plan_num_requests": (c_size_t, [_V]),
    "rl_plan_request": (c_int, [_V, c_size_t, POINTER(RequestInfo)]),
    "rl_plan_copy": (c_int, [_V, c_size_t, c_size_t, POINTER(CopyInfo)]),
    "rl_copy_runs": (c_int, [POINTER(CopyInfo), COPY_RUN_FN, _V]),
    "rl_plan_num_broadcasts": (c_size_t, [_V]),
    "rl_plan_broadcast": (c_int, [_V, c_size_t, POINTER(BroadcastInfo)]),
    "rl_plan_get": (c_int, [_V, c_int, POINTER(c_int64)]),
    "rl_plan_get_xstats": (c_int, [_V, c_int, POINTER(PlanXStats)]),
    "rl_plan_num_transfers": (c_size_t, [_V]),
    "rl_plan_transfer": (c_int, [_V, c_size_t, POINTER(TransferInfo)]),
    "rl_plan_transfer_copy": (c_int, [_V, c_size_t, c_size_t,
                                      POINTER(CopyInfo)]),
    "rl_plan_transfer_summary": (c_int, [_V, POINTER(c_uint64),
                                         POINTER(c_uint64), POINTER(c_uint64)]),
    "rl_plan_build_batch": (c_int, [_V, _V, c_size_t]),

    "rl_backend_name": (c_char_p, [c_int]),
    "rl_loader_create": (_V, []),
    "rl_loader_set": (c_int, [_V, c_int, c_int64]),
    "rl_loader_get": (c_int, [_V, c_int, POINTER(c_int64)]),
    "rl_loader_param_bounds": (c_int, [c_int, POINTER(c_int64),
                                       POINTER(c_int64)]),
    "rl_loader_set_callbacks": (c_int, [_V, SHARD_FN, PROGRESS_FN, _V]),
    "rl_loader_set_staging": (c_int, [_V, c_uint, _V, c_size_t]),
    "rl_loader_run": (c_int, [_V, _V]),
    "rl_loader_load": (c_int, [_V, _V, _V, c_int, POINTER(_V)]),
    "rl_loader_staging": (_V, [_V, c_uint, POINTER(c_size_t)]),
    "rl_loader_get_stats": (c_int, [_V, POINTER(LoadStats)]),
    "rl_loader_errmsg": (c_char_p, [_V]),
    "rl_loader_destroy": (None, [_V]),
    "rl_loader_num_files": (c_size_t, [_V]),
    "rl_loader_get_file_stats": (c_int, [_V, c_size_t, POINTER(FileStats)]),
    "rl_loader_request_bytes": (c_int64, [_V, _V]),
    "rl_staging_alloc": (_V, [c_size_t]),
    "rl_staging_free": (None, [_V, c_size_t]),

    # streaming (docs/streaming.md); rl_loader_next_piece blocks in C with
    # the GIL released (ctypes releases it around every foreign call)
    "rl_loader_set_piece_callback": (c_int, [_V, PIECE_FN, _V]),
    "rl_loader_set_window_pool": (c_int, [_V, _V, c_size_t]),
    "rl_loader_release": (c_int, [_V, POINTER(Piece)]),
    "rl_loader_start": (c_int, [_V, _V]),
    "rl_loader_next_piece": (c_int, [_V, POINTER(Piece), c_int]),
    "rl_loader_finish": (c_int, [_V]),
    "rl_loader_default_budget": (c_int64, []),
    "rl_loader_expect_sha256": (c_int, [_V, c_char_p, c_char_p]),

    # CUDA devices (docs/cuda.md): the C sink copies to device memory
    "rl_loader_set_cuda": (c_int, [_V, POINTER(CudaOpts)]),
    "rl_loader_set_cuda_dest": (c_int, [_V, c_size_t, c_uint64, c_uint64]),
    "rl_loader_cuda_area": (c_int, [_V, c_uint32, POINTER(c_uint64), POINTER(c_uint64)]),
    "rl_loader_cuda_read_back": (c_int, [_V, c_uint32, c_uint64, _V, c_size_t]),
    # checksums: the library's SHA-256 and SHA256SUMS parser
    "rl_sha256_create": (_V, []),
    "rl_sha256_update": (c_int, [_V, c_void_p, c_size_t]),
    "rl_sha256_final": (c_int, [_V, POINTER(ctypes.c_uint8 * 32)]),
    "rl_sha256_destroy": (None, [_V]),
    "rl_sha256_file": (c_int, [c_char_p, POINTER(ctypes.c_uint8 * 32)]),
    "rl_sha256_from_hex": (c_int, [c_char_p, POINTER(ctypes.c_uint8 * 32)]),
    "rl_sums_create": (_V, []),
    "rl_sums_open": (c_int, [_V, c_char_p]),
    "rl_sums_parse": (c_int, [_V, c_char_p, c_char_p, c_size_t]),
    "rl_sums_errmsg": (c_char_p, [_V]),
    "rl_sums_destroy": (None, [_V]),
    "rl_sums_count": (c_size_t, [_V]),
    "rl_sums_get": (c_int, [_V, c_size_t, POINTER(SumsEntry)]),
    "rl_sums_find": (c_long, [_V, c_char_p]),
    # the page-cache probe (load_file maps a file it says is resident)
    "rl_file_cached_bytes": (c_int64, [c_char_p, c_uint64, c_uint64]),
}

# Functions of newer libraries, bound when present (None otherwise).
_OPTIONAL = {}


def _candidates():
    env = os.environ.get("RINGLOAD_LIB")
    if env:
        return [env]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    return [here, SONAME] if os.path.exists(here) else [SONAME]


def _open():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            errors.append(f"{path}: {e}")
    raise ImportError("ringload: cannot load libringload.so (set RINGLOAD_LIB "
                      "to its path, or run make / make install): " +
                      "; ".join(errors))


def _bind(cdll):
    for name, (restype, argtypes) in _PROTOTYPES.items():
        fn = getattr(cdll, name)
        fn.restype, fn.argtypes = restype, argtypes
        globals()[name] = fn
    for name, (restype, argtypes) in _OPTIONAL.items():
        fn = getattr(cdll, name, None)
        if fn is not None:
            fn.restype, fn.argtypes = restype, argtypes
        globals()[name] = fn


CDLL, PATH = _open()
_bind(CDLL)
BOUND = sorted(_PROTOTYPES) + sorted(_OPTIONAL)
"""Names of every function this module binds."""


def text(b):
    """Decodes a C string from the library (UTF-8; None stays None)."""
    return None if b is None else b.decode("utf-8", "surrogateescape")


class _DlInfo(Structure):
    _fields_ = [("dli_fname", c_char_p), ("dli_fbase", c_void_p),
                ("dli_sname", c_char_p), ("dli_saddr", c_void_p)]


def loaded_path():
    """Returns the file the dynamic loader mapped for CDLL (dladdr of one
    of its functions), whichever way it was found."""
    dladdr = ctypes.CDLL(None).dladdr
    dladdr.argtypes = [c_void_p, POINTER(_DlInfo)]
    info = _DlInfo()
    if not dladdr(ctypes.cast(rl_version_string, c_void_p), ctypes.byref(info)):
        return PATH
    return text(info.dli_fname)
