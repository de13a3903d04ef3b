/*
 * ringload_types.h - the values every layer of ringload shares with the
 * public API: error codes, element types, the dimension limit and one
 * dimension of a partition spec. Plain data only: no function. api/ringload.h
 * re-exports it (include that one); common/, planner/ and engine/ include
 * it through common.h, so that nothing below api/ includes ringload.h.
 * `make install` installs it beside ringload.h.
 */
#ifndef RINGLOAD_TYPES_H
#define RINGLOAD_TYPES_H

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/*
 * ringload's own error codes. Values are fixed forever and lie below
 * -4096 so they never collide with -errno. New codes are only appended.
 */
enum rl_error {
	RL_OK = 0,

	/* safetensors header, in the reference implementation's order */
	RL_E_HEADER_TOO_SMALL = -5001,  /* file shorter than 8 bytes */
	RL_E_HEADER_TOO_LARGE = -5002,  /* header length over 100,000,000 */
	RL_E_HEADER_LENGTH = -5003,     /* header extends past end of file */
	RL_E_HEADER_UTF8 = -5004,       /* header is not valid UTF-8 */
	RL_E_HEADER_JSON = -5005,       /* header is not JSON of the right form */
	RL_E_INVALID_OFFSET = -5006,    /* data offsets not contiguous from 0 */
	RL_E_OVERFLOW = -5007,          /* element or byte count overflow */
	RL_E_MISALIGNED = -5008,        /* sub-byte dtype not filling whole bytes */
	RL_E_SIZE_MISMATCH = -5009,     /* byte length != shape x dtype size */
	RL_E_INCOMPLETE = -5010,        /* bytes left after the last tensor's data */
	RL_E_TRUNCATED = -5011,         /* file shorter than its header declares */

	/* checkpoints of several files */
	RL_E_BAD_INDEX = -5020,         /* index.json malformed */
	RL_E_DUPLICATE_TENSOR = -5021,  /* one tensor name in two files */
	RL_E_MISSING_TENSOR = -5022,    /* a named tensor does not exist */

	/* sharding spec and plan */
	RL_E_SPEC = -5030,              /* spec is not JSON of the right form */
	RL_E_SPEC_MESH = -5031,         /* mesh shape/devices/processes inconsistent */
	RL_E_SPEC_AXIS = -5032,         /* unknown axis, or an axis used twice */
	RL_E_SPEC_RANK = -5033,         /* partition spec longer than tensor rank */
	RL_E_SPEC_REGEX = -5034,        /* a rule's regex does not compile */
	RL_E_SPEC_TARGET = -5035,       /* a target definition is invalid */
	RL_E_SHAPE_MISMATCH = -5036,    /* declared target shape/dtype != sources */
	RL_E_SUBBYTE_SPLIT = -5037,     /* shard of F4/F6 not on whole bytes */
	RL_E_DTYPE = -5038,             /* a dtype conversion ringload does not make */

	/* arguments and state */
	RL_E_INVALID_ARG = -5040,       /* a parameter value out of bounds */
	RL_E_STATE = -5041,             /* call not valid in the handle's state */
	RL_E_TOO_LARGE = -5042,         /* a size limit of ringload exceeded */

	/* loading */
	RL_E_BACKEND = -5050,           /* requested I/O backend unavailable */
	RL_E_CANCELED = -5051,          /* a callback asked to stop */
	RL_E_STAGING = -5052,           /* caller staging missing or too small */

	/* streaming staging (RL_STAGING_STREAM) */
	RL_E_RELEASE_TIMEOUT = -5080,   /* every window held: no piece released in time */
	RL_E_PIECE = -5081,             /* a piece not held: released twice, or stale */
	RL_E_PIECE_TIMEOUT = -5082,     /* rl_loader_next_piece(): no piece within the timeout */

	/* several processes (read once, files_of_process, MPI) */
	RL_E_FILE_UNAVAILABLE = -5090,  /* no process may read a file the plan needs */
	RL_E_MPI = -5091,               /* an MPI call failed, or MPI is not set up as needed */
	RL_E_PEER = -5092,              /* another process of the cluster failed */
	RL_E_CLUSTER_MISMATCH = -5093,  /* processes see different checkpoints or plans */

	/* integrity (docs/validation.md) */
	RL_E_FILE_CHANGED = -5065,      /* a file changed since its checkpoint was opened or during the load */
	RL_E_CHECKSUM = -5066,          /* a file's SHA-256 differs from the expected one, or cannot be checked */

	/* Delivering to CUDA devices (rl_loader_set_cuda) */
	RL_E_CUDA = -5100,              /* a CUDA driver call failed (a copy, a stream, a context) */
	RL_E_CUDA_DRIVER = -5101,       /* no usable CUDA driver: libcuda.so.1 missing or cuInit failed */
	RL_E_CUDA_DEVICE = -5102,       /* no such CUDA device, or the device map names none */
	RL_E_CUDA_MEMORY = -5103,       /* out of device memory, or a destination too small */
	RL_E_CUDA_STICKY = -5104,       /* a sticky CUDA error (a launch failure, an illegal
					 * address): the GPU's context is unusable until the
					 * process restarts */
};

/* ------------------------------------------------------------------ */
/* Data types and shapes                                               */
/* ------------------------------------------------------------------ */

/* Element types of the safetensors format. Values are fixed forever. */
typedef enum rl_dtype {
	RL_DTYPE_BOOL = 0,
	RL_DTYPE_U8,
	RL_DTYPE_I8,
	RL_DTYPE_F8_E5M2,
	RL_DTYPE_F8_E4M3,
	RL_DTYPE_F8_E8M0,
	RL_DTYPE_I16,
	RL_DTYPE_U16,
	RL_DTYPE_F16,
	RL_DTYPE_BF16,
	RL_DTYPE_I32,
	RL_DTYPE_U32,
	RL_DTYPE_F32,
	RL_DTYPE_F64,
	RL_DTYPE_I64,
	RL_DTYPE_U64,
	RL_DTYPE_F4,
	RL_DTYPE_F6_E2M3,
	RL_DTYPE_F6_E3M2,
	RL_DTYPE_C64,
	RL_DTYPE_F8_E4M3FNUZ,
	RL_DTYPE_F8_E5M2FNUZ,
	RL_DTYPE_COUNT /* not a dtype */
} rl_dtype;

/* The most dimensions a tensor may have. */
#define RL_MAX_DIMS 16

/* One dimension of a partition spec: naxes == 0 means not split. */
typedef struct rl_dim_spec {
	unsigned naxes;
	const char *const *axes;
} rl_dim_spec;

#ifdef __cplusplus
}
#endif

#endif /* RINGLOAD_TYPES_H */
