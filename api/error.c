/* error.c - error strings and version. */
#include <string.h>

#include "ringload.h"
#include "../common/common.h"

static const struct {
	int code;
	const char *text;
} error_texts[] = {
	{ RL_OK, "success" },
	{ RL_E_HEADER_TOO_SMALL, "file too small for a safetensors header" },
	{ RL_E_HEADER_TOO_LARGE, "safetensors header too large" },
	{ RL_E_HEADER_LENGTH, "safetensors header extends past end of file" },
	{ RL_E_HEADER_UTF8, "safetensors header is not valid UTF-8" },
	{ RL_E_HEADER_JSON, "safetensors header is not valid JSON of the expected form" },
	{ RL_E_INVALID_OFFSET, "tensor data offsets are not contiguous" },
	{ RL_E_OVERFLOW, "tensor size overflows" },
	{ RL_E_MISALIGNED, "sub-byte tensor does not fill whole bytes" },
	{ RL_E_SIZE_MISMATCH, "tensor byte length does not match shape and dtype" },
	{ RL_E_INCOMPLETE, "tensor data does not end at end of file" },
	{ RL_E_TRUNCATED, "file truncated" },
	{ RL_E_BAD_INDEX, "invalid checkpoint index" },
	{ RL_E_DUPLICATE_TENSOR, "tensor present in two files" },
	{ RL_E_MISSING_TENSOR, "tensor not found" },
	{ RL_E_SPEC, "invalid sharding spec" },
	{ RL_E_SPEC_MESH, "invalid mesh in sharding spec" },
	{ RL_E_SPEC_AXIS, "unknown or repeated mesh axis in sharding spec" },
	{ RL_E_SPEC_RANK, "partition spec longer than tensor rank" },
	{ RL_E_SPEC_REGEX, "invalid regular expression in sharding rule" },
	{ RL_E_SPEC_TARGET, "invalid target definition" },
	{ RL_E_SHAPE_MISMATCH, "shape mismatch" },
	{ RL_E_SUBBYTE_SPLIT, "shard of a sub-byte tensor does not fall on whole bytes" },
	{ RL_E_DTYPE, "dtype conversion not supported" },
	{ RL_E_INVALID_ARG, "invalid argument" },
	{ RL_E_STATE, "call not valid in this state" },
	{ RL_E_TOO_LARGE, "size limit exceeded" },
	{ RL_E_BACKEND, "I/O backend unavailable" },
	{ RL_E_CANCELED, "canceled" },
	{ RL_E_STAGING, "staging area missing or too small" },
	{ RL_E_RELEASE_TIMEOUT, "every streaming window held: no piece released in time" },
	{ RL_E_PIECE, "piece not held (released twice, or from an earlier load)" },
	{ RL_E_PIECE_TIMEOUT, "no piece within the timeout" },
	{ RL_E_FILE_UNAVAILABLE, "no process may read a file the plan needs" },
	{ RL_E_MPI, "MPI call failed or MPI not set up as needed" },
	{ RL_E_PEER, "another process of the cluster failed" },
	{ RL_E_CLUSTER_MISMATCH, "processes see different checkpoints or plans" },
	{ RL_E_FILE_CHANGED, "file changed since the checkpoint was opened or during the load" },
	{ RL_E_CHECKSUM, "SHA-256 mismatch, or whole-file checksum cannot be checked" },
	{ RL_E_CUDA, "CUDA driver call failed" },
	{ RL_E_CUDA_DRIVER, "no usable CUDA driver" },
	{ RL_E_CUDA_DEVICE, "no such CUDA device" },
	{ RL_E_CUDA_MEMORY, "out of device memory" },
	{ RL_E_CUDA_STICKY, "sticky CUDA error: the process must restart" },
};

const char *rl_strerror(int code)
{
	for (size_t i = 0; i < CM_ARRAY_SIZE(error_texts); i++)
		if (error_texts[i].code == code)
			return error_texts[i].text;
	if (code < 0 && code > -4096)
		return strerrordesc_np(-code) ? strerrordesc_np(-code)
					       : "unknown error";
	return "unknown error";
}

unsigned rl_version_number(void)
{
	return RINGLOAD_VERSION_NUMBER;
}

const char *rl_version_string(void)
{
	return RINGLOAD_VERSION_STRING;
}
