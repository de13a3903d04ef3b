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
import re
from ctypes import (CFUNCTYPE, POINTER, Structure, c_char, c_char_p, c_double,
                    c_int, c_int32, c_int64, c_long, c_size_t, c_uint, c_uint32,
                    c_uint64, c_void_p)

SONAME = "libringload.so.0"


def _candidates():
    env = os.environ.get("RINGLOAD_LIB")
    if env:
        return [env]
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), SONAME)
    return [here, SONAME] if os.path.exists(here) else [SONAME]


# Debian's packages of the libraries libringload.so.0 links (make deps),
# for the message that names a missing one.
_PROVIDERS = {"liburing.so.2": "liburing2", "libaio.so.1": "libaio1",
              "libcjson.so.1": "libcjson1", "libcrypto.so.3": "libssl3"}


def _missing_dependency(path, error):
    """The message for a library that path needs and the loader cannot
    load (dlerror names it: "liburing.so.2: cannot open shared object
    file..."), or None when the error is about path itself."""
    m = re.match(r"^(.+?\.so[.\d]*): (.+)$", str(error))
    if not m or os.path.basename(m.group(1)) == os.path.basename(path):
        return None
    soname = os.path.basename(m.group(1))
    debian = _PROVIDERS.get(re.sub(r"(\.so\.\d+).*", r"\1", soname))
    return (f"ringload: {path} needs {soname}, which the dynamic loader cannot "
            f"load ({m.group(2)}): install it" +
            (f" (Debian: apt-get install {debian})" if debian else "") +
            ", or install ringload's manylinux wheel, which carries it")


def _open():
    errors = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            missing = _missing_dependency(path, e)
            if missing:
                raise ImportError(missing) from e
            errors.append(f"{path}: {e}")
    raise ImportError("ringload: cannot load libringload.so (set RINGLOAD_LIB "
                      "to its path, or run make / make install): " +
                      "; ".join(errors))


CDLL, PATH = _open()


# --- constants: the library's own table (rl_name_get), no second list ---

def _names():
    """{NAME: value} of every public constant (rl_name_get)."""
    get = CDLL.rl_name_get
    get.restype, get.argtypes = c_int, [c_size_t, POINTER(c_char_p), POINTER(c_int64)]
    out, name, value = {}, c_char_p(), c_int64()
    while get(len(out), ctypes.byref(name), ctypes.byref(value)) == 1:
        out[name.value.decode("ascii")] = value.value
    return out


def _by_lower_name(prefix):
    return {k[len(prefix):].lower(): v for k, v in NAMES.items() if k.startswith(prefix)}


NAMES = _names()
"""Every public constant of api/ringload.h by name, from the library."""
globals().update(NAMES)
ERROR_CODES = {k: v for k, v in NAMES.items() if k.startswith("RL_E_")}
"""RL_E_* codes by name."""


def _dtype_names():
    fn = CDLL.rl_dtype_name
    fn.restype, fn.argtypes = c_char_p, [c_int]
    return tuple(fn(i).decode("ascii") for i in range(NAMES["RL_DTYPE_COUNT"]))


DTYPES = _dtype_names()
"""Safetensors dtype names by rl_dtype value (RL_DTYPE_<name> = index)."""
FALLBACKS = _by_lower_name("RL_FALLBACK_")
"""RL_FALLBACK_<NAME> flags of rl_load_stats.fallback_flags by lower-case name."""
PLAN_PARAMS = _by_lower_name("RL_PLAN_")
"""rl_plan_param values by lower-case name (RL_PLAN_<NAME>)."""
LOADER_PARAMS = _by_lower_name("RL_OPT_")
"""rl_loader_param values by lower-case name (RL_OPT_<NAME>)."""
FILE_MODES = _by_lower_name("RL_FILE_")
"""rl_file_stats.mode values by lower-case name (RL_FILE_<NAME>)."""
FILE_WHYS = _by_lower_name("RL_WHY_")
"""rl_file_stats.why values by lower-case name (RL_WHY_<NAME>)."""


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
                ("why", c_int), ("reserved32", c_int),
                ("reserved", c_uint64 * 7)]


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


RL_CUDA_ONE_GPU = 1
"""rl_cuda_opts.flags: every spec device on CUDA device `gpu`."""


class CudaOpts(Structure):
    """rl_cuda_opts: delivery to CUDA devices (spec device id -> ordinal)"""
    _fields_ = [("size", c_uint32), ("ndevs", c_uint32), ("device_map", POINTER(c_int32)),
                ("flags", c_uint32), ("gpu", c_int32), ("reserved", c_uint64 * 3)]


RL_TRANSPORT_V1 = 1
"""rl_transport_ops.version."""

TRANSPORT_SEND_FN = CFUNCTYPE(c_int, c_void_p, c_int, c_uint64, c_void_p, c_size_t)
TRANSPORT_RECV_FN = CFUNCTYPE(c_int, c_void_p, c_int, c_uint64, c_void_p, c_size_t)
TRANSPORT_WAIT_FN = CFUNCTYPE(c_int, c_void_p)
TRANSPORT_AGREE_FN = CFUNCTYPE(c_int, c_void_p, POINTER(c_int))
TRANSPORT_PROGRESS_FN = CFUNCTYPE(c_int, c_void_p)


class TransportOps(Structure):
    """rl_transport_ops: read once over the caller's transport (version-tagged)"""
    _fields_ = [("version", c_uint32), ("size", c_uint32), ("send", TRANSPORT_SEND_FN),
                ("recv", TRANSPORT_RECV_FN), ("wait", TRANSPORT_WAIT_FN),
                ("agree", TRANSPORT_AGREE_FN), ("progress", TRANSPORT_PROGRESS_FN)]


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
    "rl_transport_ops": TransportOps,
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
    "rl_dtype_convert": (c_int, [c_int, c_int, c_void_p, c_void_p, c_size_t]),
    "rl_spec_set_dtype": (c_int, [_V, c_int]),

    "rl_ckpt_create": (_V, []),
    "rl_ckpt_open": (c_int, [_V, c_char_p]),
    "rl_ckpt_errmsg": (c_char_p, [_V]),
    "rl_ckpt_destroy": (None, [_V]),
    "rl_ckpt_num_files": (c_size_t, [_V]),
    "rl_ckpt_file_path": (c_char_p, [_V, c_size_t]),
    "rl_ckpt_file_size": (c_uint64, [_V, c_size_t]),
    "rl_ckpt_num_tensors": (c_size_t, [_V]),
    "rl_ckpt_tensor": (c_int, [_V, c_size_t, POINTER(TensorInfo)]),
    "rl_ckpt_tensors": (c_long, [_V, c_size_t, c_size_t, _V, c_size_t]),
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
    "rl_plan_shards": (c_long, [_V, c_size_t, c_size_t, _V, c_size_t]),
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
    "rl_backend_at": (c_int, [c_size_t]),
    "rl_backend_by_name": (c_int, [c_char_p]),
    "rl_backend_caps": (c_uint, [c_int]),
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
    "rl_loader_budget": (c_int64, [_V]),
    "rl_loader_expect_sha256": (c_int, [_V, c_char_p, c_char_p]),

    # CUDA devices (docs/cuda.md): the C sink copies to device memory
    "rl_loader_set_cuda": (c_int, [_V, POINTER(CudaOpts)]),
    "rl_loader_set_cuda_dest": (c_int, [_V, c_size_t, c_uint64, c_uint64]),
    "rl_loader_set_cuda_stream": (c_int, [_V, c_int32, c_uint64]),
    # read once over the caller's transport (docs/architecture.md, "A transport")
    "rl_loader_set_transport": (c_int, [_V, POINTER(TransportOps), _V]),
    "rl_loader_cuda_area": (c_int, [_V, c_uint32, POINTER(c_uint64), POINTER(c_uint64)]),
    "rl_loader_cuda_shard": (c_int, [_V, c_size_t, POINTER(c_uint64)]),
    "rl_loader_cuda_read_back": (c_int, [_V, c_uint32, c_uint64, _V, c_size_t]),
    # any device kind of the library's registry (the CUDA names wrap these)
    "rl_device_kind_at": (c_char_p, [c_size_t]),
    "rl_loader_set_device": (c_int, [_V, c_char_p, POINTER(c_int32), c_uint32, c_uint32]),
    "rl_loader_device_kind": (c_char_p, [_V]),
    "rl_loader_set_device_dest": (c_int, [_V, c_size_t, c_uint64, c_uint64]),
    "rl_loader_set_device_stream": (c_int, [_V, c_int32, c_uint64]),
    "rl_loader_device_area": (c_int, [_V, c_uint32, POINTER(c_uint64), POINTER(c_uint64)]),
    "rl_loader_device_shard": (c_int, [_V, c_size_t, POINTER(c_uint64)]),
    "rl_loader_device_read_back": (c_int, [_V, c_uint32, c_uint64, _V, c_size_t]),
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
    # which file an expected value names, and Hugging Face blob names
    "rl_expect_create": (_V, [_V, c_char_p]),
    "rl_expect_given": (c_int, [_V, c_char_p, c_char_p]),
    "rl_expect_sums": (c_int, [_V, c_char_p, _V]),
    "rl_expect_errmsg": (c_char_p, [_V]),
    "rl_expect_warnings": (c_char_p, [_V]),
    "rl_expect_get": (c_int, [_V, c_size_t, c_char_p]),
    "rl_expect_destroy": (None, [_V]),
    "rl_loader_expect": (c_int, [_V, _V]),
    "rl_hf_blob_sha256": (c_int, [c_char_p, POINTER(ctypes.c_uint8 * 32)]),
    # the page-cache probe (load_file maps a file it says is resident)
    "rl_file_cached_bytes": (c_int64, [c_char_p, c_uint64, c_uint64]),
    # the public constants by name
    "rl_name_get": (c_int, [c_size_t, POINTER(c_char_p), POINTER(c_int64)]),
    "rl_error_name": (c_char_p, [c_int]),
}

# Functions of newer libraries, bound when present (None otherwise).
_OPTIONAL = {}


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


_bind(CDLL)


def _backends():
    """The library's backends by name, "auto" first, then its fallback
    order (rl_backend_at): the library's table is the one list."""
    names = {CDLL.rl_backend_name(0).decode(): 0}
    i = 0
    while CDLL.rl_backend_at(i) >= 0:
        b = CDLL.rl_backend_at(i)
        names[CDLL.rl_backend_name(b).decode()] = b
        i += 1
    return names


BACKENDS = _backends()
"""rl_backend ids by name, from the library: "auto", then the order it tries."""


def _device_kinds():
    """The library's device kinds (rl_device_kind_at), in registry order:
    what rl_loader_set_device accepts."""
    kinds, i = [], 0
    while CDLL.rl_device_kind_at(i) is not None:
        kinds.append(CDLL.rl_device_kind_at(i).decode())
        i += 1
    return tuple(kinds)


DEVICE_KINDS = _device_kinds()
"""Device kinds by name, from the library's registry ("cuda"; the test
build adds "testdev")."""
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
