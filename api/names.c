/*
 * names.c - the public constants by name (rl_name_get, rl_error_name):
 * Python and other bindings read them here instead of keeping a second
 * list; test_api checks the table against every constant of ringload.h.
 * Backend names are the backend table's (not listed here).
 */
#include <errno.h>
#include <string.h>

#include "ringload.h"
#include "../common/common.h"

#define N(c) { #c, (int64_t)(c) }

static const struct {
	const char *name;
	int64_t value;
} names[] = {
	N(RL_OK),
	N(RL_E_HEADER_TOO_SMALL), N(RL_E_HEADER_TOO_LARGE), N(RL_E_HEADER_LENGTH),
	N(RL_E_HEADER_UTF8), N(RL_E_HEADER_JSON), N(RL_E_INVALID_OFFSET), N(RL_E_OVERFLOW),
	N(RL_E_MISALIGNED), N(RL_E_SIZE_MISMATCH), N(RL_E_INCOMPLETE), N(RL_E_TRUNCATED),
	N(RL_E_BAD_INDEX), N(RL_E_DUPLICATE_TENSOR), N(RL_E_MISSING_TENSOR),
	N(RL_E_SPEC), N(RL_E_SPEC_MESH), N(RL_E_SPEC_AXIS), N(RL_E_SPEC_RANK),
	N(RL_E_SPEC_REGEX), N(RL_E_SPEC_TARGET), N(RL_E_SHAPE_MISMATCH),
	N(RL_E_SUBBYTE_SPLIT), N(RL_E_DTYPE), N(RL_E_INVALID_ARG), N(RL_E_STATE), N(RL_E_TOO_LARGE),
	N(RL_E_BACKEND), N(RL_E_CANCELED), N(RL_E_STAGING), N(RL_E_RELEASE_TIMEOUT),
	N(RL_E_PIECE), N(RL_E_PIECE_TIMEOUT), N(RL_E_FILE_UNAVAILABLE), N(RL_E_MPI),
	N(RL_E_PEER), N(RL_E_CLUSTER_MISMATCH), N(RL_E_FILE_CHANGED), N(RL_E_CHECKSUM),
	N(RL_E_CUDA), N(RL_E_CUDA_DRIVER), N(RL_E_CUDA_DEVICE), N(RL_E_CUDA_MEMORY),
	N(RL_E_CUDA_STICKY),
	N(RL_MAX_DIMS), N(RL_TOTAL), N(RL_DTYPE_COUNT),
	N(RL_PLAN_PROCESS), N(RL_PLAN_MIN_GAP), N(RL_PLAN_RATIO_MILLI), N(RL_PLAN_CHUNK_BYTES),
	N(RL_PLAN_SHARD_ALIGN), N(RL_PLAN_CONGRUENT), N(RL_PLAN_ALL_STATS),
	N(RL_PLAN_READ_ONCE), N(RL_PLAN_BATCH_BYTES), N(RL_PLAN_TRANSFER_ALIGN),
	N(RL_PLAN_MAX_MEMORY), N(RL_PLAN_DTYPE),
	N(RL_OPT_BACKEND), N(RL_OPT_QUEUE_DEPTH), N(RL_OPT_REQUEST_BYTES),
	N(RL_OPT_INFLIGHT_BYTES), N(RL_OPT_BUFFERS), N(RL_OPT_REGISTER), N(RL_OPT_DIRECT),
	N(RL_OPT_STAGING), N(RL_OPT_THREADS), N(RL_OPT_WORKERS), N(RL_OPT_SHA256_HF),
	N(RL_OPT_STAGING_BUDGET), N(RL_OPT_RELEASE_TIMEOUT_MS),
	N(RL_STAGING_LIBRARY), N(RL_STAGING_CALLER), N(RL_STAGING_STREAM),
	N(RL_DIRECT_OFF), N(RL_DIRECT_ON), N(RL_DIRECT_AUTO),
	N(RL_EXPECT_NONE), N(RL_EXPECT_GIVEN), N(RL_EXPECT_SUMS),
	N(RL_FALLBACK_BACKEND), N(RL_FALLBACK_URING_FLAGS), N(RL_FALLBACK_FILES_UNREGISTERED),
	N(RL_FALLBACK_BUFFERS_UNREGISTERED), N(RL_FALLBACK_BUFFERS_UNLOCKED),
	N(RL_FALLBACK_NOT_PREFAULTED), N(RL_FALLBACK_FEWER_WORKERS),
	N(RL_FALLBACK_CUDA_HOST_ALLOC), N(RL_FALLBACK_CUDA_PAGEABLE), N(RL_CUDA_ONE_GPU),
	N(RL_FILE_UNUSED), N(RL_FILE_DIRECT), N(RL_FILE_CACHED), N(RL_FILE_BUFFERED),
	N(RL_SHA256_NONE), N(RL_SHA256_MATCHED), N(RL_SHA256_PARTIAL), N(RL_SHA256_MISMATCH),
	N(RL_SHA256_STREAMED),
};

int rl_name_get(size_t i, const char **name, int64_t *value)
{
	if (!name || !value)
		return -EINVAL;
	if (i >= CM_ARRAY_SIZE(names))
		return 0;
	*name = names[i].name;
	*value = names[i].value;
	return 1;
}

const char *rl_error_name(int code)
{
	for (size_t i = 0; i < CM_ARRAY_SIZE(names); i++)
		if (names[i].value == code && (code == 0 || !strncmp(names[i].name, "RL_E_", 5)))
			return names[i].name;
	return NULL;
}
