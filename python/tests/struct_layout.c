/*
 * struct_layout.c - prints the layout of every structure of api/ringload.h and the
 * values of its enums, as the C compiler sees them, for the Python
 * bindings' layout test (python/tests/test_bindings.py):
 *   struct NAME SIZE
 *   field NAME MEMBER OFFSET SIZE
 *   const NAME VALUE
 */
#include <stddef.h>
#include <stdio.h>

#include "ringload.h"

#define STRUCT(s) printf("struct %s %zu\n", #s, sizeof(s))
#define FIELD(s, m) \
	printf("field %s %s %zu %zu\n", #s, #m, offsetof(s, m), sizeof(((s *)0)->m))
#define CONST(c) printf("const %s %lld\n", #c, (long long)(c))

/* The structures added since 0.1. */
static void structs_new(void)
{
	STRUCT(rl_file_stats);
	FIELD(rl_file_stats, size); FIELD(rl_file_stats, file); FIELD(rl_file_stats, mode);
	FIELD(rl_file_stats, bytes_needed); FIELD(rl_file_stats, bytes_resident);
	FIELD(rl_file_stats, device); FIELD(rl_file_stats, max_request_bytes);
	FIELD(rl_file_stats, max_segments); FIELD(rl_file_stats, optimal_io_bytes);
	FIELD(rl_file_stats, sha256_state); FIELD(rl_file_stats, sha256);
	FIELD(rl_file_stats, why); FIELD(rl_file_stats, reserved32);
	FIELD(rl_file_stats, reserved);
	STRUCT(rl_file_header);
	FIELD(rl_file_header, path); FIELD(rl_file_header, size);
	FIELD(rl_file_header, header); FIELD(rl_file_header, header_len);
	STRUCT(rl_transfer_info);
	FIELD(rl_transfer_info, file); FIELD(rl_transfer_info, offset);
	FIELD(rl_transfer_info, nbytes); FIELD(rl_transfer_info, root);
	FIELD(rl_transfer_info, nreceivers); FIELD(rl_transfer_info, receivers);
	FIELD(rl_transfer_info, batch); FIELD(rl_transfer_info, index);
	FIELD(rl_transfer_info, ncopies);
	STRUCT(rl_plan_xstats);
	FIELD(rl_plan_xstats, size); FIELD(rl_plan_xstats, transfers); FIELD(rl_plan_xstats, payload_bytes);
	FIELD(rl_plan_xstats, transfer_read_bytes); FIELD(rl_plan_xstats, sent_bytes);
	FIELD(rl_plan_xstats, received_bytes); FIELD(rl_plan_xstats, files_opened);
	FIELD(rl_plan_xstats, max_read_bytes); FIELD(rl_plan_xstats, max_files_opened);
	FIELD(rl_plan_xstats, reserved);
	STRUCT(rl_sums_entry);
	FIELD(rl_sums_entry, size); FIELD(rl_sums_entry, name); FIELD(rl_sums_entry, sha256);
	FIELD(rl_sums_entry, hex); FIELD(rl_sums_entry, line); FIELD(rl_sums_entry, reserved);
	STRUCT(rl_piece);
	FIELD(rl_piece, shard); FIELD(rl_piece, device); FIELD(rl_piece, offset);
	FIELD(rl_piece, length); FIELD(rl_piece, data); FIELD(rl_piece, token);
	STRUCT(rl_cuda_opts);
	FIELD(rl_cuda_opts, size); FIELD(rl_cuda_opts, ndevs); FIELD(rl_cuda_opts, device_map);
	FIELD(rl_cuda_opts, flags); FIELD(rl_cuda_opts, gpu); FIELD(rl_cuda_opts, reserved);
	STRUCT(rl_transport_ops);
	FIELD(rl_transport_ops, version); FIELD(rl_transport_ops, size); FIELD(rl_transport_ops, send);
	FIELD(rl_transport_ops, recv); FIELD(rl_transport_ops, wait); FIELD(rl_transport_ops, agree);
	FIELD(rl_transport_ops, progress);
	STRUCT(rl_transport_ops);
	FIELD(rl_transport_ops, version); FIELD(rl_transport_ops, size);
	FIELD(rl_transport_ops, send); FIELD(rl_transport_ops, recv);
	FIELD(rl_transport_ops, wait); FIELD(rl_transport_ops, agree);
	FIELD(rl_transport_ops, progress);
}

static void structs(void)
{
	STRUCT(rl_tensor_info);
	FIELD(rl_tensor_info, name); FIELD(rl_tensor_info, dtype);
	FIELD(rl_tensor_info, ndim); FIELD(rl_tensor_info, shape);
	FIELD(rl_tensor_info, file); FIELD(rl_tensor_info, offset);
	FIELD(rl_tensor_info, nbytes);
	STRUCT(rl_dim_spec);
	FIELD(rl_dim_spec, naxes); FIELD(rl_dim_spec, axes);
	STRUCT(rl_plan_stats);
	FIELD(rl_plan_stats, devices); FIELD(rl_plan_stats, needed_bytes);
	FIELD(rl_plan_stats, read_bytes); FIELD(rl_plan_stats, blocks);
	FIELD(rl_plan_stats, requests); FIELD(rl_plan_stats, files_opened);
	STRUCT(rl_device_info);
	FIELD(rl_device_info, id); FIELD(rl_device_info, staging_bytes);
	FIELD(rl_device_info, nshards);
	STRUCT(rl_shard_info);
	FIELD(rl_shard_info, name); FIELD(rl_shard_info, dtype);
	FIELD(rl_shard_info, ndim); FIELD(rl_shard_info, shape);
	FIELD(rl_shard_info, start); FIELD(rl_shard_info, stop);
	FIELD(rl_shard_info, device); FIELD(rl_shard_info, offset);
	FIELD(rl_shard_info, nbytes);
	STRUCT(rl_request_info);
	FIELD(rl_request_info, file); FIELD(rl_request_info, offset);
	FIELD(rl_request_info, length); FIELD(rl_request_info, min_length);
	FIELD(rl_request_info, ncopies); FIELD(rl_request_info, direct);
	STRUCT(rl_copy_info);
	FIELD(rl_copy_info, src); FIELD(rl_copy_info, len);
	FIELD(rl_copy_info, count); FIELD(rl_copy_info, src_stride);
	FIELD(rl_copy_info, device); FIELD(rl_copy_info, dst);
	FIELD(rl_copy_info, shard);
	STRUCT(rl_broadcast_info);
	FIELD(rl_broadcast_info, name); FIELD(rl_broadcast_info, src_offset);
	FIELD(rl_broadcast_info, nbytes); FIELD(rl_broadcast_info, root);
	FIELD(rl_broadcast_info, nreceivers); FIELD(rl_broadcast_info, receivers);
	FIELD(rl_broadcast_info, batch); FIELD(rl_broadcast_info, shard);
	STRUCT(rl_load_stats);
	FIELD(rl_load_stats, size); FIELD(rl_load_stats, bytes_needed);
	FIELD(rl_load_stats, bytes_read); FIELD(rl_load_stats, bytes_direct);
	FIELD(rl_load_stats, bytes_buffered); FIELD(rl_load_stats, requests);
	FIELD(rl_load_stats, retries); FIELD(rl_load_stats, peak_inflight);
	FIELD(rl_load_stats, request_bytes); FIELD(rl_load_stats, plan_seconds);
	FIELD(rl_load_stats, setup_seconds); FIELD(rl_load_stats, read_seconds);
	FIELD(rl_load_stats, prepare_seconds); FIELD(rl_load_stats, scatter_seconds);
	FIELD(rl_load_stats, total_seconds); FIELD(rl_load_stats, gbps);
	FIELD(rl_load_stats, backend); FIELD(rl_load_stats, workers);
	FIELD(rl_load_stats, queue_depth); FIELD(rl_load_stats, buffers);
	FIELD(rl_load_stats, registered_buffers); FIELD(rl_load_stats, registered_files);
	FIELD(rl_load_stats, direct_io); FIELD(rl_load_stats, files_cached);
	FIELD(rl_load_stats, numa_node); FIELD(rl_load_stats, files_hashed);
	FIELD(rl_load_stats, files_unchecked); FIELD(rl_load_stats, bytes_hashed);
	FIELD(rl_load_stats, hash_seconds); FIELD(rl_load_stats, hash_held_peak);
	FIELD(rl_load_stats, stream_windows); FIELD(rl_load_stats, stream_registered);
	FIELD(rl_load_stats, stream_window_bytes); FIELD(rl_load_stats, stream_ranges);
	FIELD(rl_load_stats, engine_runs); FIELD(rl_load_stats, fallback_flags);
	FIELD(rl_load_stats, reads_fixed);
	FIELD(rl_load_stats, fallbacks); FIELD(rl_load_stats, shape);
	FIELD(rl_load_stats, stream_pool_bytes); FIELD(rl_load_stats, stream_pool_limit);
	FIELD(rl_load_stats, stream_pool_reads); FIELD(rl_load_stats, stream_pool_medium);
	FIELD(rl_load_stats, stream_pool_depth); FIELD(rl_load_stats, stream_pool_workers);
	FIELD(rl_load_stats, reserved);
	structs_new();
}

static void errors(void)
{
	CONST(RL_E_HEADER_TOO_SMALL); CONST(RL_E_HEADER_TOO_LARGE);
	CONST(RL_E_HEADER_LENGTH); CONST(RL_E_HEADER_UTF8); CONST(RL_E_HEADER_JSON);
	CONST(RL_E_INVALID_OFFSET); CONST(RL_E_OVERFLOW); CONST(RL_E_MISALIGNED);
	CONST(RL_E_SIZE_MISMATCH); CONST(RL_E_INCOMPLETE); CONST(RL_E_TRUNCATED);
	CONST(RL_E_BAD_INDEX); CONST(RL_E_DUPLICATE_TENSOR); CONST(RL_E_MISSING_TENSOR);
	CONST(RL_E_SPEC); CONST(RL_E_SPEC_MESH); CONST(RL_E_SPEC_AXIS);
	CONST(RL_E_SPEC_RANK); CONST(RL_E_SPEC_REGEX); CONST(RL_E_SPEC_TARGET);
	CONST(RL_E_SHAPE_MISMATCH); CONST(RL_E_SUBBYTE_SPLIT); CONST(RL_E_DTYPE);
	CONST(RL_E_INVALID_ARG); CONST(RL_E_STATE); CONST(RL_E_TOO_LARGE);
	CONST(RL_E_BACKEND); CONST(RL_E_CANCELED); CONST(RL_E_STAGING);
	CONST(RL_E_RELEASE_TIMEOUT); CONST(RL_E_PIECE); CONST(RL_E_PIECE_TIMEOUT);
	CONST(RL_E_FILE_UNAVAILABLE); CONST(RL_E_MPI); CONST(RL_E_PEER);
	CONST(RL_E_CLUSTER_MISMATCH);
	CONST(RL_E_FILE_CHANGED); CONST(RL_E_CHECKSUM);
	CONST(RL_E_CUDA); CONST(RL_E_CUDA_DRIVER); CONST(RL_E_CUDA_DEVICE); CONST(RL_E_CUDA_MEMORY);
	CONST(RL_E_CUDA_STICKY);
}

static void params(void)
{
	CONST(RL_PLAN_PROCESS); CONST(RL_PLAN_MIN_GAP); CONST(RL_PLAN_RATIO_MILLI);
	CONST(RL_PLAN_CHUNK_BYTES); CONST(RL_PLAN_SHARD_ALIGN); CONST(RL_PLAN_CONGRUENT);
	CONST(RL_PLAN_ALL_STATS); CONST(RL_PLAN_READ_ONCE); CONST(RL_PLAN_BATCH_BYTES);
	CONST(RL_PLAN_TRANSFER_ALIGN); CONST(RL_PLAN_MAX_MEMORY); CONST(RL_PLAN_DTYPE);
	CONST(RL_PLAN_STATS_ONLY);
	CONST(RL_OPT_BACKEND); CONST(RL_OPT_QUEUE_DEPTH); CONST(RL_OPT_REQUEST_BYTES);
	CONST(RL_OPT_INFLIGHT_BYTES); CONST(RL_OPT_BUFFERS); CONST(RL_OPT_REGISTER);
	CONST(RL_OPT_DIRECT); CONST(RL_OPT_STAGING); CONST(RL_OPT_THREADS);
	CONST(RL_OPT_WORKERS); CONST(RL_OPT_SHA256_HF); CONST(RL_OPT_STAGING_BUDGET); CONST(RL_OPT_RELEASE_TIMEOUT_MS);
	CONST(RL_BACKEND_AUTO); CONST(RL_BACKEND_IO_URING); CONST(RL_BACKEND_LIBAIO);
	CONST(RL_BACKEND_PREAD);
	CONST(RL_STAGING_LIBRARY); CONST(RL_STAGING_CALLER); CONST(RL_STAGING_STREAM);
	CONST(RL_SHA256_PARTIAL); CONST(RL_SHA256_STREAMED);
	CONST(RL_FALLBACK_BACKEND); CONST(RL_FALLBACK_URING_FLAGS);
	CONST(RL_FALLBACK_FILES_UNREGISTERED); CONST(RL_FALLBACK_BUFFERS_UNREGISTERED);
	CONST(RL_FALLBACK_BUFFERS_UNLOCKED); CONST(RL_FALLBACK_NOT_PREFAULTED);
	CONST(RL_FALLBACK_FEWER_WORKERS); CONST(RL_FALLBACK_CUDA_HOST_ALLOC);
	CONST(RL_FALLBACK_CUDA_PAGEABLE);
	CONST(RL_MAX_DIMS); CONST(RL_TOTAL);
	printf("const sizeof_enum %zu\n", sizeof(rl_dtype));
}

int main(void)
{
	structs();
	errors();
	params();
	/* dtypes by value: their names come from the library itself */
	printf("const RL_DTYPE_COUNT %d\n", (int)RL_DTYPE_COUNT);
	return 0;
}
