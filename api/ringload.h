/*
 * ringload.h - load safetensors checkpoints from local NVMe into per-device
 * staging areas, reading exactly the bytes a target sharding needs.
 *
 * This is the one public header. It is self-contained (C99, no other
 * ringload header) and is the reference: every prototype states its contract.
 *
 * Conventions (as in liburing):
 *  - Functions that can fail return an int: >= 0 on success (or a count),
 *    a negative code on failure. System errors are -errno (-ENOMEM, -EIO,
 *    -ENOENT, ...); ringload's own errors are the RL_E_* codes below, whose
 *    values never change. No function touches errno on purpose.
 *  - Every fallible call on a handle records a one-line detailed message
 *    (naming the file, tensor, rule or offset) retrievable with the handle's
 *    _errmsg() function until the next fallible call on that handle.
 *  - Handles are opaque, created with _create() and freed with _destroy();
 *    _destroy(NULL) is a no-op; other functions given a NULL handle or a
 *    NULL required pointer return -EINVAL (NULL for pointers, 0 for counts),
 *    and _errmsg(NULL) is "". Queries of a plan not built yet return
 *    RL_E_STATE (0 for counts). Any function that allocates may also
 *    return -ENOMEM. tests/test_api.c checks each of these promises.
 *    A handle may be used by one thread at a time.
 *  - The library never prints, never exits, never aborts.
 */
#ifndef RINGLOAD_H
#define RINGLOAD_H

#include <stddef.h>
#include <stdint.h>

/* The error codes, dtypes and dimension limits that every layer of the
 * library shares, in their own header (installed beside this one). */
#include "../common/ringload_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Everything declared here is the exported interface of libringload.so. */
#if defined(__GNUC__)
#pragma GCC visibility push(default)
#endif

/* ------------------------------------------------------------------ */
/* Version                                                             */
/* ------------------------------------------------------------------ */

/* The one version of ringload: the Makefile (ringload.pc), the Python
 * package (pyproject.toml, ringload.__version__), ringload --version and
 * rlperf --version read these three lines; CHANGELOG.md's latest entry
 * names the same (test_version checks them all). */
#define RINGLOAD_VERSION_MAJOR 0
#define RINGLOAD_VERSION_MINOR 2
#define RINGLOAD_VERSION_PATCH 0
#define RINGLOAD_VERSION_NUMBER \
	(RINGLOAD_VERSION_MAJOR * 10000 + RINGLOAD_VERSION_MINOR * 100 + \
	 RINGLOAD_VERSION_PATCH)
#define RINGLOAD_STR_(x) #x
#define RINGLOAD_STR(x) RINGLOAD_STR_(x)
#define RINGLOAD_VERSION_STRING RINGLOAD_STR(RINGLOAD_VERSION_MAJOR) "." \
	RINGLOAD_STR(RINGLOAD_VERSION_MINOR) "." RINGLOAD_STR(RINGLOAD_VERSION_PATCH)

/* Returns RINGLOAD_VERSION_NUMBER of the library actually linked. */
unsigned rl_version_number(void);
/* Returns RINGLOAD_VERSION_STRING of the library actually linked. */
const char *rl_version_string(void);

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* The RL_E_* codes (enum rl_error) are in ringload_types.h. */

/*
 * Returns a short static description of code: an RL_E_* value, a negative
 * errno, or 0. Never returns NULL (unknown codes give "unknown error").
 */
const char *rl_strerror(int code);

/*
 * The public constants of this header by name, for bindings that must not
 * keep a second list: error codes (RL_E_*, RL_OK), RL_PLAN_*, RL_OPT_*,
 * RL_STAGING_*, RL_DIRECT_*, RL_EXPECT_*, RL_FALLBACK_*, RL_FILE_*,
 * RL_SHA256_*, RL_MAX_DIMS, RL_TOTAL, RL_DTYPE_COUNT (dtype names:
 * rl_dtype_name; backends: the backend table). rl_name_get() sets the
 * i-th name and value and returns 1; 0 past the last; -EINVAL (NULL).
 * rl_error_name() returns "RL_E_CHECKSUM" for an RL_E_* code ("RL_OK"
 * for 0), NULL for anything else (a -errno: its errno name is the C
 * library's).
 */
int rl_name_get(size_t i, const char **name, int64_t *value);
const char *rl_error_name(int code);

/* ------------------------------------------------------------------ */
/* Checksums: SHA-256 and SHA256SUMS files                             */
/* ------------------------------------------------------------------ */

/*
 * The library's one SHA-256 (the one loads compute on the read path), for
 * callers that hash bytes themselves. rl_sha256_create() returns a fresh
 * context or NULL; rl_sha256_update() adds len bytes (data may be NULL
 * when len is 0); rl_sha256_final() writes the digest of everything added
 * since creation or the last final, and starts the context afresh.
 * Return 0, -EINVAL (h NULL, data NULL with len > 0, out NULL) or -ENOMEM.
 * rl_sha256_destroy(NULL) is a no-op.
 */
typedef struct rl_sha256 rl_sha256;
rl_sha256 *rl_sha256_create(void);
int rl_sha256_update(rl_sha256 *h, const void *data, size_t len);
int rl_sha256_final(rl_sha256 *h, uint8_t out[32]);
void rl_sha256_destroy(rl_sha256 *h);

/*
 * The SHA-256 of the whole file at path, read 8 MiB at a time with
 * read(2). Returns 0, -EINVAL (path or out NULL), -errno of open or read
 * (-EISDIR for a directory), or -ENOMEM.
 */
int rl_sha256_file(const char *path, uint8_t out[32]);

/* Parses exactly 64 hex digits (either case) into out: 0, or
 * RL_E_INVALID_ARG (anything else; out unchanged), -EINVAL (NULL). */
int rl_sha256_from_hex(const char *hex, uint8_t out[32]);

/*
 * A SHA256SUMS file in sha256sum's format, parsed once: each line
 * "<64 hex digits>  <name>" or "<64 hex digits> *<name>"; a line that
 * starts with a backslash has its name unescaped (sha256sum writes
 * "\\", "\n" and "\r" so for a name holding them); empty lines and lines
 * starting with '#' are skipped; a CRLF line ending counts as LF.
 *
 * rl_sums_open() reads path (a regular file of at most 16 MiB; opened
 * without blocking, so a FIFO is refused, not waited on) and parses it;
 * rl_sums_parse() parses len bytes of text, naming them name in messages.
 * Either returns the number of entries, or a negative code with the
 * detail in rl_sums_errmsg() ("PATH: ..." or "PATH:LINE: ..."):
 * RL_E_INVALID_ARG (not a regular file of at most 16 MiB, text of more
 * than 16 MiB, a line not in that format, a bad escape, a NUL byte in a line), -errno of open or
 * read, -EINVAL (sums or path NULL; text NULL with len > 0), RL_E_STATE
 * (sums already holds a parsed file). A failed call changes nothing.
 */
typedef struct rl_sums rl_sums;

typedef struct rl_sums_entry {
	size_t size;            /* in: sizeof(rl_sums_entry); out: bytes filled */
	const char *name;       /* as the line names it, unescaped; owned by sums */
	uint8_t sha256[32];
	char hex[65];           /* the 64 digits as the line writes them, and a NUL */
	unsigned line;          /* 1 for the first line of the file */
	uint64_t reserved[4];   /* room to grow: zero */
} rl_sums_entry;

/* Returns an empty handle, or NULL when out of memory. */
rl_sums *rl_sums_create(void);
int rl_sums_open(rl_sums *sums, const char *path);
int rl_sums_parse(rl_sums *sums, const char *name, const void *text, size_t len);
/* The last error message of sums ("" if none). Never NULL. */
const char *rl_sums_errmsg(const rl_sums *sums);
/* Frees sums and its entries. NULL is a no-op. */
void rl_sums_destroy(rl_sums *sums);

/* Number of entries, in line order (0 for NULL or a handle not parsed). */
size_t rl_sums_count(const rl_sums *sums);
/*
 * Entry i, size-tagged like rl_load_stats: set out->size =
 * sizeof(*out); the library fills min(out->size, its own size) bytes and
 * sets out->size to what it filled. Returns 0, or -EINVAL (sums or out
 * NULL, size too small to hold size, i out of range).
 */
int rl_sums_get(const rl_sums *sums, size_t i, rl_sums_entry *out);
/* The index of the last entry whose name is exactly name, or -ENOENT
 * (none), -EINVAL (sums or name NULL). */
long rl_sums_find(const rl_sums *sums, const char *name);

/* ------------------------------------------------------------------ */
/* Data types                                                          */
/* ------------------------------------------------------------------ */

/* The element types (enum rl_dtype) and RL_MAX_DIMS are in ringload_types.h. */

/* Returns the safetensors name ("BF16"), or NULL for an invalid value. */
const char *rl_dtype_name(rl_dtype dt);
/* Returns the size of one element in bits (F4: 4, F6_*: 6), 0 if invalid. */
unsigned rl_dtype_bits(rl_dtype dt);
/* Returns the dtype for an exact (case-sensitive) name, or -1 (also for NULL). */
int rl_dtype_from_name(const char *name);
/*
 * Converts n elements of dtype from at src into dtype to at dst, the rule
 * RL_PLAN_DTYPE loads by (torch's .to() on the CPU, bit for bit; from F32,
 * F16, BF16, F8_E4M3, F8_E5M2 to F32, F16, BF16; from != to). src and dst
 * may be unaligned and must not overlap. Returns 0, RL_E_DTYPE (no such
 * conversion; n 0 asks only that) or -EINVAL (dst or src NULL, n > 0).
 */
int rl_dtype_convert(rl_dtype from, rl_dtype to, void *dst, const void *src, size_t n);

/* ------------------------------------------------------------------ */
/* Checkpoints                                                         */
/* ------------------------------------------------------------------ */

typedef struct rl_ckpt rl_ckpt;

/* Returns an empty checkpoint handle, or NULL when out of memory. */
rl_ckpt *rl_ckpt_create(void);

/*
 * Opens path: a .safetensors file, a directory (every *.safetensors in it,
 * sorted by name) or an HF model.safetensors.index.json. Every header is
 * read and validated exactly as the safetensors reference does, and every
 * file's size is checked against its header before any data is read.
 * Returns 0, or a negative code with the detail in rl_ckpt_errmsg():
 * -EINVAL (ck or path NULL), RL_E_INVALID_ARG (empty path), -errno, or
 * the RL_E_* code of what is wrong with the files (docs/validation.md).
 * A handle can be opened once; a call after a successful open returns
 * RL_E_STATE. A failed open changes nothing: the handle may be opened again.
 */
int rl_ckpt_open(rl_ckpt *ck, const char *path);

/* Returns the last error message of ck ("" if none). Never NULL. */
const char *rl_ckpt_errmsg(const rl_ckpt *ck);

/* One file of a checkpoint, described by bytes read elsewhere. */
typedef struct rl_file_header {
	const char *path;       /* the file's path (it need not exist here) */
	uint64_t size;          /* the file's size in bytes */
	const void *header;     /* its JSON header: the bytes after the 8-byte length */
	uint64_t header_len;    /* their count (the little-endian length itself) */
} rl_file_header;

/*
 * Opens a checkpoint from the headers of its files, read elsewhere (for
 * example gathered from the processes of a cluster, each of which holds
 * only some files): files[0..nfiles) in that order, each header validated
 * exactly as rl_ckpt_open() validates a file's (including its size); no
 * file is opened. Tensors are ordered by file, then data offset; a tensor
 * in two files is RL_E_DUPLICATE_TENSOR. Returns 0, a negative code with
 * the file named in rl_ckpt_errmsg(), -EINVAL (ck NULL, or files NULL with
 * nfiles > 0), or RL_E_STATE after a successful open. Nothing is kept of
 * files[] but copies.
 */
int rl_ckpt_open_headers(rl_ckpt *ck, size_t nfiles, const rl_file_header *files);

/* Frees ck and everything it owns. NULL is a no-op. */
void rl_ckpt_destroy(rl_ckpt *ck);

/* Number of files (0 when ck is NULL or not open), and each file's path
 * (NULL) and size in bytes (0) when file is out of range. */
size_t rl_ckpt_num_files(const rl_ckpt *ck);
const char *rl_ckpt_file_path(const rl_ckpt *ck, size_t file);
uint64_t rl_ckpt_file_size(const rl_ckpt *ck, size_t file);

typedef struct rl_tensor_info {
	const char *name;       /* owned by the checkpoint */
	rl_dtype dtype;
	unsigned ndim;
	const uint64_t *shape;  /* ndim entries, owned by the checkpoint */
	size_t file;            /* index for rl_ckpt_file_path() */
	uint64_t offset;        /* absolute byte offset of the data in file */
	uint64_t nbytes;        /* byte count of the data */
} rl_tensor_info;

/* Number of tensors (0 when ck is NULL or not open); tensors are ordered by
 * file, then by data offset. */
size_t rl_ckpt_num_tensors(const rl_ckpt *ck);

/* Fills *out for tensor i. Returns 0, or -EINVAL (ck or out NULL, ck not
 * open, i out of range). */
int rl_ckpt_tensor(const rl_ckpt *ck, size_t i, rl_tensor_info *out);

/*
 * Tensors first .. first + n - 1 in one call, each as rl_ckpt_tensor()
 * fills it (a caller of many tensors makes one call, not one each): out
 * is an array of entries size bytes apart, size being the caller's
 * sizeof(rl_tensor_info); each entry gets this library's structure (the
 * bytes past it, from a newer header, are left as they are). Returns the
 * number filled, min(n, rl_ckpt_num_tensors() - first) (0 for n = 0 or
 * first at the end), or -EINVAL (ck NULL or not open, out NULL with n > 0,
 * size smaller than this header's structure, first past the end, or
 * entries that do not fit in the address space).
 */
long rl_ckpt_tensors(const rl_ckpt *ck, size_t first, size_t n,
		     rl_tensor_info *out, size_t size);

/* Returns the index of the tensor named name, RL_E_MISSING_TENSOR (none,
 * or ck not open), or -EINVAL (ck or name NULL). */
long rl_ckpt_find(const rl_ckpt *ck, const char *name);

/*
 * __metadata__ of all files merged (a later file wins on a repeated key),
 * ordered by key; rl_ckpt_num_metadata() is 0 for NULL or a handle not open.
 * rl_ckpt_metadata() fills key/value (owned by ck; either may be NULL) for
 * entry i and returns 0, or -EINVAL (ck NULL or not open, i out of range).
 * rl_ckpt_metadata_get() returns the value for key, or NULL (no such key,
 * ck or key NULL).
 */
size_t rl_ckpt_num_metadata(const rl_ckpt *ck);
int rl_ckpt_metadata(const rl_ckpt *ck, size_t i, const char **key,
		     const char **value);
const char *rl_ckpt_metadata_get(const rl_ckpt *ck, const char *key);

/* ------------------------------------------------------------------ */
/* Sharding specs                                                      */
/* ------------------------------------------------------------------ */

typedef struct rl_spec rl_spec;

/* Returns an empty spec (one device, every tensor replicated), or NULL. */
rl_spec *rl_spec_create(void);

/*
 * Parses the JSON sharding spec of docs/sharding-spec.md (mesh, rules,
 * optional targets and tensors). Replaces whatever spec held. Returns 0,
 * -EINVAL (spec or json NULL), an RL_E_SPEC* code (RL_E_SPEC for text
 * that is not strict JSON of the right form, nesting over 64 levels
 * included) with the rule or field named in rl_spec_errmsg(), or
 * RL_E_TOO_LARGE over a bound of docs/sharding-spec.md (2^20 JSON values,
 * counted before any tree is built; 4096 rules and 64 rules without
 * literal text, before a rule is compiled); a failed parse leaves the spec
 * as it was. The regex attempts of matching the rules are bounded when a
 * plan is built (rl_plan_build(): RL_E_TOO_LARGE).
 */
int rl_spec_parse(rl_spec *spec, const char *json, size_t len);

/*
 * Reads and parses a spec file: a regular file or a pipe (`<(...)`, a FIFO;
 * read to its end, so one with no writer yet reads as empty), at most
 * 64 MiB. Returns as rl_spec_parse(), -EINVAL (spec or path NULL), -errno,
 * RL_E_SPEC for another kind of file or an empty pipe, or RL_E_TOO_LARGE.
 */
int rl_spec_load(rl_spec *spec, const char *path);

/*
 * Sets the mesh from C structures: ndim axes with sizes shape[] and names
 * axes[]; devices[] lists device ids in row-major mesh order (NULL: 0..N-1);
 * process_of_device[] maps each listed device to its process (NULL: all 0);
 * process ids are dense, 0..P-1, each owning a device; at most 2^24 devices.
 * Returns 0, -EINVAL (spec NULL, or shape or axes NULL with ndim > 0),
 * RL_E_SPEC_MESH (a gap names the first missing process) or RL_E_SPEC_AXIS.
 */
int rl_spec_set_mesh(rl_spec *spec, unsigned ndim, const uint32_t *shape,
		     const char *const *axes, const uint32_t *devices,
		     const uint32_t *process_of_device);


/*
 * Appends a rule: tensors whose whole name matches the POSIX extended
 * regex get the partition spec dims[0..ndims). Rules are tried in order.
 * The regex is restricted so that compiling it cannot explode (at most
 * 1 KiB, no back-references, no stacked repetitions, docs/sharding-spec.md).
 * Returns 0, -EINVAL (spec or regex NULL, dims NULL with ndims > 0),
 * RL_E_SPEC_REGEX, RL_E_SPEC_AXIS, RL_E_SPEC_RANK (ndims over 16) or
 * RL_E_TOO_LARGE (the spec holds 4096 rules, or 64 rules without literal
 * text and this is another).
 */
int rl_spec_add_rule(rl_spec *spec, const char *regex, unsigned ndims,
		     const rl_dim_spec *dims);

/*
 * Appends a target tensor assembled from sources, given as the JSON of one
 * element of the spec's "targets" list (docs/sharding-spec.md). Returns 0,
 * -EINVAL (spec or json NULL) or RL_E_SPEC_TARGET.
 */
int rl_spec_add_target_json(rl_spec *spec, const char *json, size_t len);

/*
 * Every plan built under spec converts its floating tensors to dtype
 * (RL_DTYPE_F32, _F16 or _BF16; -1, the default: as stored), as
 * RL_PLAN_DTYPE does (which, when set on a plan, wins): also the plans
 * rl_loader_load() makes. The spec text's "dtype" field sets the same
 * (docs/sharding-spec.md); a text without it keeps this call's value. Returns 0, -EINVAL (spec NULL) or RL_E_DTYPE
 * (another dtype, named in rl_spec_errmsg()).
 */
int rl_spec_set_dtype(rl_spec *spec, int dtype);

/*
 * Says which files process may read (files_of_process in the JSON; for
 * checkpoints on node-local drives): files[0..n) are file names or
 * fnmatch(3) patterns, matched against each file's name (its whole path
 * when the pattern holds a '/'); files NULL means every file (the
 * default for every process). A plan then has every byte read by a
 * process that may read its file and sent to the others (see
 * RL_PLAN_READ_ONCE); a needed file no process may read fails the plan
 * with RL_E_FILE_UNAVAILABLE naming it. Returns 0, -EINVAL (spec NULL),
 * RL_E_INVALID_ARG (a NULL name, or process past the mesh's limit) or
 * -ENOMEM.
 */
int rl_spec_set_files_of_process(rl_spec *spec, unsigned process, size_t n,
				 const char *const *files);

/* Returns the last error message of spec ("" if none). Never NULL. */
const char *rl_spec_errmsg(const rl_spec *spec);

/* Frees spec. NULL is a no-op. */
void rl_spec_destroy(rl_spec *spec);

/* ------------------------------------------------------------------ */
/* Plans                                                               */
/* ------------------------------------------------------------------ */

typedef struct rl_plan rl_plan;

/* Plan parameters, set with rl_plan_set() before rl_plan_build(). */
typedef enum rl_plan_param {
	RL_PLAN_PROCESS = 1,      /* process to plan for (default 0) */
	RL_PLAN_MIN_GAP = 2,      /* coalesce gaps <= this (default 4096) */
	RL_PLAN_RATIO_MILLI = 3,  /* ratio x 1000, >= 1000; 0 = automatic (default) */
	RL_PLAN_CHUNK_BYTES = 4,  /* max bytes per read request (default 4 MiB) */
	RL_PLAN_SHARD_ALIGN = 5,  /* staging alignment of shards (>= 64, power of 2). Left
				   * at its default (4096): shards of at least 4096 bytes
				   * get it, smaller ones are packed, aligned to their size
				   * rounded up to a power of two, at most 16 (an empty one
				   * takes no room, at a multiple of 16). Set: every shard
				   * gets it (congruent ones excepted, below) */
	RL_PLAN_CONGRUENT = 6,    /* 1: place shards that are one contiguous file run of
				   * >= 64 KiB + alignment so that staging offset == file
				   * offset mod 4096, allowing direct reads of their aligned
				   * middles; such shards are aligned like their file offset,
				   * not to RL_PLAN_SHARD_ALIGN. Shorter such shards (with
				   * RL_PLAN_SHARD_ALIGN left unset) are placed so too where
				   * that keeps them aligned to 8 (below 8 bytes: to their
				   * size rounded up to a power of two) and pads at most an
				   * eighth of their size: neighbours in the file then follow
				   * each other in staging and are read straight as one
				   * (default 1) */
	RL_PLAN_ALL_STATS = 7,    /* 1: also compute statistics of every other process (default 1) */
	RL_PLAN_READ_ONCE = 8,    /* 1: read replicated data once in the cluster and list
				   * broadcasts (default 0) */
	RL_PLAN_BATCH_BYTES = 9,  /* transfers in flight at once, in payload bytes (default 1 GiB) */
	RL_PLAN_TRANSFER_ALIGN = 10, /* transfers are cut at multiples of this (a power of
				      * two); 0: each file's O_DIRECT alignment (default).
				      * Every process of a cluster must use the same. */
	RL_PLAN_MAX_MEMORY = 11,  /* bytes a plan may need, estimated from its counts
				   * before it is built: over it, rl_plan_build()
				   * returns RL_E_TOO_LARGE at once (default 4 GiB;
				   * 0: no limit; docs/validation.md) */
	RL_PLAN_DTYPE = 12,       /* dtype conversion on load: -1 (default) loads every
				   * tensor as stored; RL_DTYPE_F32, _F16 or _BF16 converts
				   * every floating tensor to it (integers and BOOL as
				   * stored): sources F32, F16, BF16, F8_E4M3, F8_E5M2,
				   * rounded to nearest even exactly as torch's .to() on
				   * the CPU (NaN, infinities, subnormals, signs;
				   * docs/architecture.md, "Transforms"). Shards are sized,
				   * laid out and reported (rl_plan_shard's dtype and
				   * nbytes) in the destination dtype; every load of the
				   * plan (whole, streaming, CUDA) converts as bytes leave
				   * the read buffer. Another floating source (F64, F8_E8M0,
				   * F4, F6, the FNUZ kinds, C64), data not on a whole
				   * element of the file, or read once and
				   * files_of_process fail rl_plan_build() with RL_E_DTYPE;
				   * another destination fails rl_plan_set() so */
	RL_PLAN_STATS_ONLY = 13,  /* 1: statistics only: rl_plan_get_stats() of the
				   * planned process (and, with RL_PLAN_ALL_STATS, of
				   * every other) as a full build gives them, without
				   * its requests, copies, shards or staging layout, at
				   * a fraction of the time and memory (how the CLI's
				   * over-read warning replans). Such a plan cannot be
				   * loaded: rl_loader_run() and rl_loader_start()
				   * return RL_E_STATE. Ignored with RL_PLAN_READ_ONCE
				   * or files_of_process, whose transfers need the
				   * layout (default 0) */
} rl_plan_param;

/* Returns an empty plan with default parameters, or NULL. */
rl_plan *rl_plan_create(void);

/* Sets a parameter. Returns 0, -EINVAL (plan NULL), RL_E_STATE (plan
 * already built), or RL_E_INVALID_ARG naming the bound. */
int rl_plan_set(rl_plan *plan, rl_plan_param param, int64_t value);

/* Reports the valid range of param (lo, hi may be NULL). Returns 0 or
 * -EINVAL (unknown param). */
int rl_plan_param_bounds(rl_plan_param param, int64_t *lo, int64_t *hi);

/* The value of param in *value. Returns 0 or -EINVAL. */
int rl_plan_get(const rl_plan *plan, rl_plan_param param, int64_t *value);

/*
 * Builds the plan of the configured process for checkpoint ck under spec
 * (NULL: every tensor whole on one device, id 0). File alignment is probed
 * here (statx DIOALIGN, else the logical block size). Returns 0, or a
 * negative code naming the rule and tensor in rl_plan_errmsg(): -EINVAL
 * (plan or ck NULL), RL_E_STATE (plan already built, ck not open),
 * RL_E_TOO_LARGE (estimated to need more than RL_PLAN_MAX_MEMORY, or over
 * another limit of docs/validation.md), an RL_E_SPEC* code, -errno. A plan
 * can be built once; ck and spec may be destroyed afterwards.
 */
int rl_plan_build(rl_plan *plan, const rl_ckpt *ck, const rl_spec *spec);

/* Returns the last error message of plan ("" if none). Never NULL. */
const char *rl_plan_errmsg(const rl_plan *plan);

/* Frees plan. NULL is a no-op. */
void rl_plan_destroy(rl_plan *plan);

typedef struct rl_plan_stats {
	uint64_t devices;       /* devices of the process (sum for the total) */
	uint64_t needed_bytes;  /* unique file bytes its devices need */
	uint64_t read_bytes;    /* bytes its requests read */
	uint64_t blocks;        /* coalesced blocks */
	uint64_t requests;      /* read requests after alignment and chunking */
	uint64_t files_opened;  /* files with at least one request */
} rl_plan_stats;

#define RL_TOTAL (-1)

/* Number of processes in the spec's mesh (0: plan NULL or not built). */
unsigned rl_plan_num_processes(const rl_plan *plan);

/*
 * Statistics of process p, or of all processes with p == RL_TOTAL. Other
 * processes than the planned one need RL_PLAN_ALL_STATS. Returns 0,
 * -EINVAL (plan or out NULL, no such process) or RL_E_STATE (not built,
 * or that process's statistics not computed).
 */
int rl_plan_get_stats(const rl_plan *plan, int p, rl_plan_stats *out);

/*
 * Devices, shards, requests, copies and broadcasts of a built plan: each
 * count is 0 for a plan NULL or not built; each getter fills *out and
 * returns 0, -EINVAL (plan or out NULL, index out of range) or RL_E_STATE
 * (plan not built).
 */

/* Devices of the planned process, in mesh order. */
typedef struct rl_device_info {
	uint32_t id;            /* device id from the mesh */
	uint64_t staging_bytes; /* size of its staging area */
	size_t nshards;
} rl_device_info;

unsigned rl_plan_num_devices(const rl_plan *plan);
int rl_plan_device(const rl_plan *plan, unsigned dev, rl_device_info *out);


/* One shard: what one device holds of one loaded tensor. */
typedef struct rl_shard_info {
	const char *name;        /* tensor (or target) name, owned by the plan */
	rl_dtype dtype;
	unsigned ndim;
	uint64_t shape[RL_MAX_DIMS]; /* shape of the full tensor */
	uint64_t start[RL_MAX_DIMS]; /* box [start, stop) of this shard */
	uint64_t stop[RL_MAX_DIMS];
	unsigned device;         /* index for rl_plan_device() */
	uint64_t offset;         /* offset in the device's staging area */
	uint64_t nbytes;         /* bytes of the shard, C order of its box */
} rl_shard_info;

/* Shards of the planned process, ordered by device, then tensor. */
size_t rl_plan_num_shards(const rl_plan *plan);
int rl_plan_shard(const rl_plan *plan, size_t shard, rl_shard_info *out);
/*
 * Shards first .. first + n - 1 in one call, each as rl_plan_shard()
 * fills it, into entries size bytes apart (size: the caller's
 * sizeof(rl_shard_info); as rl_ckpt_tensors()). Returns the number
 * filled, min(n, rl_plan_num_shards() - first), -EINVAL (plan NULL, out
 * NULL with n > 0, size too small, first past the end, entries that do
 * not fit in the address space) or RL_E_STATE (plan not built).
 */
long rl_plan_shards(const rl_plan *plan, size_t first, size_t n,
		    rl_shard_info *out, size_t size);

typedef struct rl_request_info {
	size_t file;          /* index for rl_ckpt_file_path() */
	uint64_t offset;      /* aligned file offset */
	uint64_t length;      /* bytes to read */
	uint64_t min_length;  /* bytes that must arrive (the rest may be past EOF) */
	size_t ncopies;
	int direct;           /* 1: read straight into staging (its copies tile it) */
} rl_request_info;

/* Read requests of the planned process, in file and offset order. */
size_t rl_plan_num_requests(const rl_plan *plan);
int rl_plan_request(const rl_plan *plan, size_t req, rl_request_info *out);

/*
 * Copy j of request req: count runs of len bytes, the k-th starting at
 * src + k*src_stride in the request's bytes, land contiguously at
 * dst + k*len in device's staging area and belong to shard. A shard of
 * a plan with RL_PLAN_DTYPE whose dtype differs from its tensor's in
 * the file (rl_ckpt_tensor) converts: a run's len file bytes hold
 * len / (file element size) elements, landing as that many elements of
 * the shard's dtype at dst + k * (converted run's bytes); dst counts
 * staging bytes. rl_copy_runs moves bytes as they are.
 */
typedef struct rl_copy_info {
	uint64_t src;
	uint64_t len;
	uint64_t count;
	uint64_t src_stride;
	unsigned device;
	uint64_t dst;
	size_t shard;
} rl_copy_info;

int rl_plan_copy(const rl_plan *plan, size_t req, size_t j, rl_copy_info *out);

/*
 * The runs of copy c, by the library's one copy rule (the one its own
 * loads scatter by): calls run(arg, src, dst, len) for each run in order,
 * src the run's offset in the request's (or transfer's) bytes, dst its
 * offset in the device's staging area; runs contiguous on both sides come
 * as one. A receiver copies each run, or lists it to receive in place.
 * Stops at run's first nonzero return and returns it; -EINVAL when c or
 * run is NULL.
 */
typedef int (*rl_copy_run_fn)(void *arg, uint64_t src, uint64_t dst, uint64_t len);
int rl_copy_runs(const rl_copy_info *c, rl_copy_run_fn run, void *arg);

/*
 * Transfers (RL_PLAN_READ_ONCE, or files_of_process): the bytes a process
 * reads for others. With RL_PLAN_READ_ONCE, every byte that devices of
 * several processes need is read once in the cluster: the file bytes
 * processes share are cut into contiguous ranges, one share per reader,
 * balanced by bytes (counting what each already reads), cut at
 * RL_PLAN_TRANSFER_ALIGN, a small range going whole to the least-loaded
 * reader (preferring one that already opens the file). With
 * files_of_process, bytes a process needs from a file it may not read
 * travel the same way. A transfer moves the file bytes [offset, offset +
 * nbytes) (its payload): the root reads them (rl_plan_build_batch) and
 * sends them whole to each receiver; every process that needs some of
 * them, the root included, copies them into its shards with its own
 * scatter list (rl_plan_transfer_copy). Shards that transfers fill get no
 * bytes from the plan's reads (rl_loader_run() does not report them).
 * Transfers are listed in the cluster's order (the same on every process),
 * only those the planned process takes part in; consecutive ones form
 * batches whose payloads total at most RL_PLAN_BATCH_BYTES.
 */
typedef struct rl_transfer_info {
	size_t file;            /* index for rl_ckpt_file_path() */
	uint64_t offset;        /* file offset of the payload's first byte */
	uint64_t nbytes;        /* payload bytes (at most 64 MiB) */
	int root;               /* process that reads and sends it */
	size_t nreceivers;
	const int *receivers;   /* ascending, the root excluded; owned by the plan */
	size_t batch;
	uint64_t index;         /* position in the cluster's order */
	size_t ncopies;         /* the planned process's copies (0: it needs none) */
} rl_transfer_info;

/* Transfers of the planned process (0 before the build). */
size_t rl_plan_num_transfers(const rl_plan *plan);
/* Fills *out for transfer i. Returns 0, -EINVAL (NULL, i out of range) or
 * RL_E_STATE (plan not built). */
int rl_plan_transfer(const rl_plan *plan, size_t i, rl_transfer_info *out);
/*
 * Copy j of transfer i into the planned process's staging, as
 * rl_plan_copy() describes a request's: src is an offset in the payload.
 * Returns 0, -EINVAL (NULL, i or j out of range) or RL_E_STATE.
 */
int rl_plan_transfer_copy(const rl_plan *plan, size_t i, size_t j, rl_copy_info *out);

/*
 * The cluster's transfers: their count, the number of batches, and a
 * digest of the whole list (files, ranges, roots, receivers, batches):
 * processes that built the same plan have the same digest. Any pointer
 * may be NULL. Returns 0, -EINVAL (plan NULL) or RL_E_STATE (not built).
 */
int rl_plan_transfer_summary(const rl_plan *plan, uint64_t *transfers, uint64_t *batches,
			     uint64_t *digest);

/*
 * Builds plan (created, not built; its RL_PLAN_CHUNK_BYTES applies): the
 * reads of the payloads of the transfers that from's process roots in
 * batch, into one device whose shards are those payloads, in from's
 * order (shard k: the k-th such transfer of rl_plan_transfer(from)),
 * named "transfer <index>". Run it with a loader to read them. Returns 0
 * (a plan with no shards when the process roots none in batch), -EINVAL
 * (plan or from NULL), RL_E_STATE (plan built, or from not), or -ENOMEM.
 * from may be destroyed afterwards.
 */
int rl_plan_build_batch(rl_plan *plan, const rl_plan *from, size_t batch);

/* What transfers cost a process, or the cluster (RL_TOTAL). */
typedef struct rl_plan_xstats {
	size_t size;            /* in: sizeof(rl_plan_xstats); out: bytes filled */
	uint64_t transfers;     /* transfers it roots (RL_TOTAL: all) */
	uint64_t payload_bytes; /* payload bytes it reads for them */
	uint64_t transfer_read_bytes; /* bytes those reads read (aligned; part of read_bytes) */
	uint64_t sent_bytes;    /* payload bytes it sends: payload x receivers */
	uint64_t received_bytes; /* payload bytes it receives */
	uint64_t files_opened;  /* files it reads, own reads and transfers (RL_TOTAL: sum) */
	uint64_t max_read_bytes; /* RL_TOTAL: the largest read_bytes of one process */
	uint64_t max_files_opened; /* RL_TOTAL: the most files one process opens */
	uint64_t reserved[8];   /* room to grow: zero */
} rl_plan_xstats;

/*
 * For process p or RL_TOTAL, with the availability of rl_plan_get_stats();
 * size-tagged like rl_load_stats (set out->size = sizeof(*out); the
 * library fills min(out->size, its own size) bytes and sets out->size to
 * what it filled). Returns 0, -EINVAL (NULL, size too small to hold size,
 * p out of range) or RL_E_STATE.
 */
int rl_plan_get_xstats(const rl_plan *plan, int p, rl_plan_xstats *out);

/*
 * Deprecated since 0.2: read-once plans move contiguous file ranges
 * (rl_plan_transfer), not whole shards. rl_plan_num_broadcasts() returns
 * the number of transfers; rl_plan_broadcast() returns RL_E_STATE, so
 * that a runtime written for the old form fails loudly rather than
 * leaving received shards empty.
 */
typedef struct rl_broadcast_info {
	const char *name;
	uint64_t src_offset;
	uint64_t nbytes;
	int root;
	size_t nreceivers;
	const int *receivers;
	size_t batch;
	size_t shard;
} rl_broadcast_info;

size_t rl_plan_num_broadcasts(const rl_plan *plan);
int rl_plan_broadcast(const rl_plan *plan, size_t i, rl_broadcast_info *out);

/* ------------------------------------------------------------------ */
/* Loading                                                             */
/* ------------------------------------------------------------------ */

/* The backends' ids, fixed forever; the library's table (rl_backend_at)
 * says which it has, in what order RL_BACKEND_AUTO tries them, their
 * names and what each can do: ask it rather than list them again. */
typedef enum rl_backend {
	RL_BACKEND_AUTO = 0,     /* each of rl_backend_at's, in its order */
	RL_BACKEND_IO_URING = 1,
	RL_BACKEND_LIBAIO = 2,
	RL_BACKEND_PREAD = 3,
} rl_backend;

/* What a backend can do (rl_backend_caps). */
enum {
	RL_BACKEND_CAP_FIXED_BUFFERS = 1u << 0,  /* reads into registered memory */
	RL_BACKEND_CAP_FIXED_FILES = 1u << 1,    /* registered files */
	RL_BACKEND_CAP_POLL = 1u << 2,           /* polled completions */
	RL_BACKEND_CAP_SQ_THREAD = 1u << 3,      /* a kernel thread submits */
	RL_BACKEND_CAP_IOPRIO = 1u << 4,         /* an I/O priority per read */
	RL_BACKEND_CAP_KERNEL_QUEUE = 1u << 5,   /* the kernel queues the reads (no reader threads) */
};

/* Returns "auto" or the backend's name ("io_uring", "libaio", "pread");
 * "?" for an id the library does not have. */
const char *rl_backend_name(rl_backend b);

/* The i-th backend in RL_BACKEND_AUTO's order (0: io_uring, 1: libaio,
 * 2: pread in this release): its id, or -1 when i is past the last. */
int rl_backend_at(size_t i);

/* The id of the backend called name ("auto" included), or
 * RL_E_INVALID_ARG when the library has none of that name. */
int rl_backend_by_name(const char *name);

/* RL_BACKEND_CAP_* bits of b; 0 for RL_BACKEND_AUTO or an unknown id. */
unsigned rl_backend_caps(rl_backend b);

typedef struct rl_loader rl_loader;

/* Loader parameters, set with rl_loader_set() before rl_loader_run(). */
typedef enum rl_loader_param {
	RL_OPT_BACKEND = 1,        /* rl_backend (default RL_BACKEND_AUTO) */
	RL_OPT_QUEUE_DEPTH = 2,    /* reads in flight at most, all workers together, split
				    * evenly over them (default: automatic, twice the
				    * workers and at least 16) */
	RL_OPT_REQUEST_BYTES = 3,  /* max bytes per read for plans the loader builds
				    * (default: automatic, see rl_loader_request_bytes()) */
	RL_OPT_INFLIGHT_BYTES = 4, /* bound on bytes submitted and not yet scattered, all
				    * workers together (default 128 MiB) */
	RL_OPT_BUFFERS = 5,        /* bounce buffers in total, split over the workers */
	RL_OPT_REGISTER = 6,       /* 1: register buffers and files with io_uring (default 1) */
	RL_OPT_DIRECT = 7,         /* RL_DIRECT_AUTO (default), RL_DIRECT_ON or RL_DIRECT_OFF */
	RL_OPT_STAGING = 8,        /* RL_STAGING_LIBRARY (default), RL_STAGING_CALLER or
				    * RL_STAGING_STREAM */
	RL_OPT_THREADS = 9,        /* superseded by RL_OPT_WORKERS: the pread backend's reader
				    * threads of all workers together (0, default: one per
				    * read in flight, which RL_OPT_QUEUE_DEPTH sets) */
	RL_OPT_WORKERS = 10,       /* workers, each with its own io_uring ring, libaio
				    * context or pread pool, its buffers and its share of
				    * the reads, on every backend (0, default: automatic:
				    * the CPUs the calling thread may run on, at most one
				    * per 16 MiB of reads; 1: the calling thread alone) */
	RL_OPT_SHA256_HF = 11,     /* 1 (default): a file that is a symlink to
				    * .../blobs/<64 hex digits> (the Hugging Face cache)
				    * is expected to have that SHA-256; 0: only values
				    * given with rl_loader_expect_sha256() */
	RL_OPT_STAGING_BUDGET = 12, /* RL_STAGING_STREAM: bytes of the window pool the
				    * library allocates (rounded down to pages, raised
				    * to 64 KiB; 0, default: rl_loader_budget());
				    * at most: a load whose staging (every device's,
				    * rounded up to pages) or whose medium needs less
				    * gets a pool of that size (what a CUDA load pins;
				    * rl_load_stats.stream_pool_*); a pool from
				    * rl_loader_set_window_pool() is the budget instead */
	RL_OPT_RELEASE_TIMEOUT_MS = 13, /* RL_STAGING_STREAM: how long the load waits for
				    * a release while every window is held before it fails
				    * with RL_E_RELEASE_TIMEOUT (default 60000; 0: forever) */
} rl_loader_param;

#define RL_STAGING_LIBRARY 0
#define RL_STAGING_CALLER 1
#define RL_STAGING_STREAM 2  /* pieces through a bounded window pool (see "Streaming") */

/* RL_OPT_DIRECT */
#define RL_DIRECT_OFF 0   /* buffered reads through the page cache */
#define RL_DIRECT_ON 1    /* O_DIRECT wherever the file system allows it */
#define RL_DIRECT_AUTO 2  /* O_DIRECT, except files whose needed bytes are >= 90%
			   * in the page cache already (cachestat(2); mincore before
			   * Linux 6.5 and on overlayfs, where cachestat sees 0;
			   * ranges past 64 MiB measured at 64 samples): those are
			   * read buffered, at memory speed. tmpfs files, always
			   * resident, are not measured: O_DIRECT where allowed */

/* Returns a loader with default parameters, or NULL. */
rl_loader *rl_loader_create(void);

/* Sets a parameter. Returns 0, -EINVAL (ld NULL), or RL_E_INVALID_ARG
 * naming the bound. */
int rl_loader_set(rl_loader *ld, rl_loader_param param, int64_t value);

/* The value of param as set (RL_OPT_STAGING_BUDGET 0: the default,
 * rl_loader_default_budget()). Returns 0 or -EINVAL. */
int rl_loader_get(const rl_loader *ld, rl_loader_param param, int64_t *value);

/* Reports the valid range of param (lo, hi may be NULL). Returns 0 or -EINVAL. */
int rl_loader_param_bounds(rl_loader_param param, int64_t *lo, int64_t *hi);

/*
 * Called exactly once per shard, when every byte of the shard arrived
 * (zero-byte shards: at the end of a successful run). Threads: on one of
 * the load's worker threads or on the thread running rl_loader_run(),
 * never two calls at once (calls are serialized, so the callback needs no
 * lock of its own against itself), and never after rl_loader_run()
 * returned. It must not call the loader. If the run later fails, the
 * shards already reported were complete and their staging stays mapped
 * until the next rl_loader_run() or rl_loader_destroy()
 * (rl_loader_staging() returns NULL after a failure); no other shard is
 * reported. Plans with transfers: a shard that transfers fill gets no
 * bytes from the reads and is never reported; it is complete once the
 * runtime's transfers and copies are done. Keep it short (the worker that
 * calls it reads nothing meanwhile; a worker thread has a 4 MiB stack): a
 * runtime typically queues a host-to-device copy.
 */
typedef void (*rl_shard_fn)(void *user, size_t shard);

/*
 * Called from time to time (about every 1/128 of the total; after every
 * read when the plan has no more than 128) on the thread
 * running rl_loader_run(), with the bytes of the plan's reads done and
 * their total; a non-zero return cancels the load (rl_loader_run() returns
 * RL_E_CANCELED after draining what is in flight).
 */
typedef int (*rl_progress_fn)(void *user, uint64_t done, uint64_t total);

/* Sets the callbacks (either may be NULL). Returns 0, or -EINVAL (ld NULL). */
int rl_loader_set_callbacks(rl_loader *ld, rl_shard_fn on_shard,
			    rl_progress_fn on_progress, void *user);

/*
 * With RL_STAGING_CALLER: supplies the staging area of device dev (index
 * of rl_plan_device()) for the next run; len must be at least the device's
 * staging_bytes (checked by the run: RL_E_STAGING). Memory aligned to 4096
 * allows direct reads; memory from rl_staging_alloc() is what the loader
 * fills fastest (huge pages, the right NUMA node, not yet touched).
 * Returns 0, -EINVAL (ld NULL) or RL_E_STAGING (ptr NULL, dev 2^20 or
 * more).
 */
int rl_loader_set_staging(rl_loader *ld, unsigned dev, void *ptr, size_t len);

/*
 * Executes plan: every request of the planned process is read and scattered
 * into the staging areas. Returns 0 when every shard is complete; otherwise
 * a negative code (file, offset, length and errno text in
 * rl_loader_errmsg()), with nothing in flight and no shard reported as
 * complete that is not: -EINVAL (ld or plan NULL), RL_E_STATE (plan not
 * built), RL_E_STAGING (caller staging missing or too small),
 * RL_E_FILE_CHANGED (a file's identity or change times, recorded by
 * statx when the checkpoint was opened, differ when the load opens it or
 * after its last read: "file changed during load"), RL_E_CHECKSUM (a
 * file's SHA-256 differs from the expected one, naming the file and both
 * values; or a given value cannot be checked because the run reads only
 * part of the file), ... Library staging from a previous run is freed.
 */
int rl_loader_run(rl_loader *ld, const rl_plan *plan);

/*
 * Read once over a transport. A plan built with RL_PLAN_READ_ONCE (or
 * files_of_process) lists transfers: bytes one process reads for others.
 * With a transport set, rl_loader_run() and rl_loader_load() also run them:
 * after the process's own reads, for each batch of the cluster's transfer
 * list, the process posts the receives of the payloads it receives, then
 * reads the payloads it roots into one buffer (on a thread of the
 * library's), sending each to its receivers and copying it into its own
 * shards as soon as it is read, calling the progress op meanwhile; the
 * payloads it receives are copied into its shards (the host sink's copy,
 * the rule of rl_copy_runs; a plan converting dtypes converts them: the
 * transfers move the file's bytes). on_shard reports a received shard
 * once its last bytes came and every process agreed on the batch (on a
 * device, once its copies finished). Every process of the plan must run
 * its own plan (same checkpoint, spec and plan parameters) with the same
 * transport, at the same time: each agrees with the others on success
 * (the agree op) after its own reads and twice per batch, so that a
 * failure anywhere fails the run on every process (this one's error, or
 * "another process failed" with that process's code) and nobody waits on
 * a process that failed.
 * Whole loads (RL_STAGING_LIBRARY or RL_STAGING_CALLER) and device loads
 * (rl_loader_set_device: the own reads stream to the device as without a
 * transport, then each received copy is staged in the loader's pinned
 * window pool, converted there if it converts, and copied to the device
 * asynchronously, half the pool at a time; a late copy error fails every
 * process); and streaming loads (RL_STAGING_STREAM with a piece
 * callback): the own reads stream through the windows, then each copy of
 * a payload, read here or received, is handed to the same callback, on
 * the same thread, one call at a time: contiguous runs as one piece
 * pointing into the payload, strided or converted runs packed, up to
 * 1 MiB (and the budget) of whole runs per piece. These pieces have token
 * 0 (nothing to release) and data valid only until the callback returns;
 * every byte of every shard arrives in exactly one piece (own or
 * transfer); a non-zero return fails the run on every process
 * (RL_E_CANCELED, agreed). on_shard is not called, as in any streaming
 * load.
 * Memory: the batch's payloads, read or received, at most
 * RL_PLAN_BATCH_BYTES, one batch at a time (and a device load's window
 * pool).
 *
 * The ops (user is passed to each; every call on the thread that runs
 * the load; a return other than 0 is a failure, a negative code is kept):
 *   send      posts a send of len bytes at buf to process peer, tagged
 *             tag (the transfer's cluster index); buf stays valid and
 *             unchanged until wait returns;
 *   recv      posts a receive of exactly len bytes from peer with tag tag
 *             into buf (valid until wait returns); one message per (peer,
 *             tag) per batch;
 *   wait      returns once every send and receive posted since the last
 *             wait completed (0), or with a failure; it is called also
 *             after a failed post;
 *   agree     collective over every process: *status in is this
 *             process's (0 or a negative code); out, 0 when every process
 *             gave 0, else one failed process's code, the same on every
 *             process;
 *   progress  optional (NULL: none): moves what was posted along without
 *             blocking, for transports whose messages move only inside
 *             their calls (MPI over shared memory); returns 1 when every
 *             send and receive posted since the last wait completed, 0
 *             when some are pending, a negative code on failure (wait is
 *             still called after it). Called on the thread of the load
 *             between sends while the batch is read; wait still ends
 *             each batch.
 * A process whose reads fail still sends each payload it roots (bytes
 * that the agreement after the batch discards), so that every posted
 * receive completes. version is RL_TRANSPORT_V1 and size
 * sizeof(rl_transport_ops) of the caller's build: a larger size from a
 * newer header is accepted, and so is RL_TRANSPORT_V1_SIZE (a table that
 * ends before progress, from a header without it: no progress op).
 */
#define RL_TRANSPORT_V1 1

typedef struct rl_transport_ops {
	uint32_t version;
	uint32_t size;
	int (*send)(void *user, int peer, uint64_t tag, const void *buf, size_t len);
	int (*recv)(void *user, int peer, uint64_t tag, void *buf, size_t len);
	int (*wait)(void *user);
	int (*agree)(void *user, int *status);
	int (*progress)(void *user);
} rl_transport_ops;

/* The size of version 1's first table (send, recv, wait, agree). */
#define RL_TRANSPORT_V1_SIZE (offsetof(rl_transport_ops, agree) + sizeof(int (*)(void *, int *)))

/*
 * Sets the transport of ld's next runs (ops is copied; NULL: none, the
 * transfers are the caller's, as before). Returns 0, -EINVAL (ld NULL) or
 * RL_E_INVALID_ARG (an unknown version, a size below version 1's, or an
 * op missing), with rl_loader_errmsg() saying which.
 */
int rl_loader_set_transport(rl_loader *ld, const rl_transport_ops *ops, void *user);

/*
 * Expects the file `file` of the checkpoint to have the SHA-256 `hex` (64
 * hex digits, either case) in the next runs. file is a path as
 * rl_ckpt_file_path() gives it, or its end after a '/' (a name relative to
 * the checkpoint's directory); a later call for the same name replaces the
 * value, and a file's own path wins over its ends: it names that file
 * alone, not also another whose path ends with it (ck/m.safetensors and
 * ck/sub/ck/m.safetensors). A name that ends two
 * files of a run, or two names that end one file (a.safetensors and
 * sub/a.safetensors), make the run fail with RL_E_INVALID_ARG naming both
 * before reading: give paths. A run that reads such a file whole
 * computes its SHA-256 from the bytes as they arrive (the header and any
 * byte the plan skips are read too) and fails with RL_E_CHECKSUM when it
 * differs; a run that reads only part of the file fails with RL_E_CHECKSUM
 * before reading (a whole-file checksum cannot be checked without reading
 * what the load does not need); files the run does not read are not
 * checked. rl_loader_expect_sha256(ld, NULL, NULL) forgets every value.
 * Returns 0, -EINVAL (ld NULL), RL_E_INVALID_ARG (file NULL or empty, or
 * hex not 64 hex digits; or exactly one of them NULL) or -ENOMEM. Not
 * while a run of ld is in progress.
 */
int rl_loader_expect_sha256(rl_loader *ld, const char *file, const char *hex);

/*
 * Which file of a checkpoint an expected SHA-256 names: the one set of
 * rules the CLI's --sha256 / --sha256-file and Python's sha256= follow.
 * Names are compared by identity (device and inode of the path the file
 * system resolves), so "./", ".." and symlinked directories spell the
 * same file.
 *
 * rl_expect_create(ck, ck_path) starts an empty set for the open ck
 * (which must outlive it), ck_path the path it was opened with (a file,
 * a directory or an index: names are also relative to its directory);
 * NULL when out of memory or an argument is NULL.
 * rl_expect_given(x, name, hex): name is a path of one of ck's files or
 * a name relative to the checkpoint's directory; one naming two files
 * that way, or no file of ck, is RL_E_INVALID_ARG.
 * rl_expect_sums(x, path, plan) reads the SHA256SUMS file at path
 * (rl_sums_open): each name is relative to path's directory, as
 * sha256sum -c reads it, or, when it is nothing there (not even a
 * dangling symlink), to the checkpoint's; lines naming no file of ck are
 * skipped (a warning line for a *.safetensors name); a file plan reads
 * (NULL: every file of ck) that no line names gets a warning line. It
 * returns the number of lines naming a file of ck (> 0), or
 * RL_E_INVALID_ARG (none; a malformed file: rl_sums_open's codes).
 * In both, a second, different value for a file, however spelled, is
 * RL_E_INVALID_ARG naming both; the same value again is kept once.
 * Errors: -EINVAL (NULL), -ENOMEM, with the detail in rl_expect_errmsg()
 * (no prefix: callers add the option's name). A failed call may have
 * set values of its earlier lines.
 * rl_expect_warnings(): the warning lines of every call so far, each
 * ending in '\n' ("" none; never NULL).
 * rl_expect_get(x, file, hex) writes file's value ("" none) and returns
 * its source: RL_EXPECT_NONE, _GIVEN or _SUMS; -EINVAL (bad file).
 * rl_loader_expect(ld, x) gives ld every value under its file's path
 * (rl_loader_expect_sha256). rl_expect_destroy(NULL) is a no-op.
 */
typedef struct rl_expect rl_expect;

#define RL_EXPECT_NONE 0
#define RL_EXPECT_GIVEN 1
#define RL_EXPECT_SUMS 2

rl_expect *rl_expect_create(const rl_ckpt *ck, const char *ck_path);
int rl_expect_given(rl_expect *x, const char *name, const char *hex);
int rl_expect_sums(rl_expect *x, const char *path, const rl_plan *plan);
const char *rl_expect_errmsg(const rl_expect *x);
const char *rl_expect_warnings(const rl_expect *x);
int rl_expect_get(const rl_expect *x, size_t file, char hex[65]);
int rl_loader_expect(rl_loader *ld, const rl_expect *x);
void rl_expect_destroy(rl_expect *x);

/*
 * The SHA-256 the Hugging Face cache layout names for path: a snapshot
 * file that is a symlink to .../blobs/<64 hex digits> (the etag of a
 * git LFS file is the SHA-256 of its contents; a 40-digit git SHA-1
 * names nothing). Returns 1 with out set, 0 (none), -EINVAL (NULL). The
 * loader expects it of each file it reads (RL_OPT_SHA256_HF).
 */
int rl_hf_blob_sha256(const char *path, uint8_t out[32]);

/*
 * Convenience: builds the plan of ck under spec (NULL: whole tensors on one
 * device) for process, with rl_loader_request_bytes() as chunk size, and
 * runs it. On success *planp receives the plan (caller destroys it), for
 * shard queries; on failure *planp is NULL. Returns as rl_plan_build() and
 * rl_loader_run(); -EINVAL when ld or planp is NULL.
 */
int rl_loader_load(rl_loader *ld, const rl_ckpt *ck, const rl_spec *spec,
		   int process, rl_plan **planp);

/*
 * The request size rl_loader_load() plans ck with (for callers that build
 * their own plan: RL_PLAN_CHUNK_BYTES): RL_OPT_REQUEST_BYTES when set;
 * else 8 MiB rounded down to a whole number of the largest request the
 * block devices under ck's files take without splitting (max_sectors_kb,
 * followed through partitions, device-mapper and loop devices), so that
 * the pieces the block layer cuts a read into are all full; never above
 * RL_OPT_INFLIGHT_BYTES; with RL_STAGING_STREAM never above a 32nd of the
 * budget (a read at a window's edge is read for both windows). Returns the size (> 0), or -EINVAL (NULL
 * argument). Any file it cannot probe counts as having no limit.
 */
int64_t rl_loader_request_bytes(rl_loader *ld, const rl_ckpt *ck);

/*
 * Staging area of device dev after a successful run (library-allocated or
 * the caller's). Returns NULL if none. *len receives its size.
 */
void *rl_loader_staging(const rl_loader *ld, unsigned dev, size_t *len);

/*
 * Statistics of the last run. Size-tagged, as every structure of this
 * header that grows: set out->size = sizeof(*out) before the call; the
 * library fills the first min(out->size, its own size) bytes and sets
 * out->size to what it filled. New fields take the room of reserved[]
 * (then at the end), so a binary built against an older header gets what
 * it knows. Returns 0, -EINVAL (NULL, or size too small to hold size), or
 * RL_E_STATE before any run.
 */
typedef struct rl_load_stats {
	size_t size;               /* in: sizeof(rl_load_stats); out: bytes filled */
	uint64_t bytes_needed;     /* unique bytes the plan needs */
	uint64_t bytes_read;       /* bytes read from files */
	uint64_t bytes_direct;     /* bytes read straight into staging */
	uint64_t bytes_buffered;   /* bytes read through the page cache */
	uint64_t requests;         /* reads submitted (retries included) */
	uint64_t retries;          /* short-read and -EAGAIN resubmissions */
	uint64_t peak_inflight;    /* max bytes in flight seen */
	uint64_t request_bytes;    /* the largest read of the plan */
	double plan_seconds;       /* building the plan (rl_loader_load only) */
	double setup_seconds;      /* files, page-cache and device probes, rings and
				    * buffers: before the first read (wall) */
	double read_seconds;       /* first submit to last completion (all workers) */
	double prepare_seconds;    /* pre-faulting staging, summed over the workers */
	double scatter_seconds;    /* copying out of bounce buffers, summed over workers */
	double total_seconds;      /* the whole run */
	double gbps;               /* bytes_read / read_seconds / 1e9 */
	rl_backend backend;        /* backend that ran */
	unsigned workers;          /* workers that ran */
	unsigned queue_depth;      /* reads in flight at most, all workers together */
	unsigned buffers;          /* bounce buffers used */
	unsigned registered_buffers; /* of which registered with io_uring */
	int registered_files;      /* 1 if files were registered */
	int direct_io;             /* 1 if every file was read with O_DIRECT */
	unsigned files_cached;     /* files read buffered because the page cache held them */
	int numa_node;             /* node library staging was placed on; -1: none (one
				    * node, or the caller's CPUs span several) */
	/* SHA-256 on the I/O path (rl_loader_expect_sha256()) */
	unsigned files_hashed;     /* files whose SHA-256 was computed and compared */
	unsigned files_unchecked;  /* files with an expected SHA-256 this run read but
				    * did not check: RL_SHA256_PARTIAL */
	uint64_t bytes_hashed;     /* bytes hashed, whole files (headers included) */
	double hash_seconds;       /* hashing, summed over the workers */
	uint64_t hash_held_peak;   /* most bytes held (copied) while waiting for the
				    * bytes before them: reads complete out of order */
	/* RL_STAGING_STREAM (0 otherwise) */
	unsigned stream_windows;   /* windows of the pool */
	int stream_registered;     /* 1: the pool was registered with io_uring */
	uint64_t stream_window_bytes; /* bytes of each window */
	uint64_t stream_ranges;    /* ranges read, each at most one window */
	unsigned engine_runs;      /* engine set-ups of the run (1 unless streaming) */
	unsigned fallback_flags;   /* RL_FALLBACK_* of the run, OR-ed */
	uint64_t reads_fixed;      /* reads straight into staging registered with
				    * io_uring (streaming's windows), READ_FIXED */
	/* For people, not for parsing (the fields above say the same): */
	char fallbacks[256];       /* every fallback and why ("" if none) */
	char shape[384];           /* workers, queue depth, request size and the device
				    * limits: what was chosen and why */
	/* RL_STAGING_STREAM: how the window pool was sized (0 otherwise) */
	uint64_t stream_pool_bytes; /* mapped (a CUDA load pins them): the smallest
				    * of the budget (or the caller's pool), the
				    * load's staging and the medium's */
	unsigned stream_pool_limit; /* RL_POOL_BY_*: which of the three it is */
	unsigned stream_pool_reads; /* the medium's: reads a window holds (a few,
				    * 2 per worker, and on a block device half
				    * the queue depth in device-sized requests) */
	uint64_t stream_pool_medium; /* the medium's: 2 windows of stream_pool_reads
				    * reads of request_bytes (at least 64 KiB) */
	unsigned stream_pool_depth; /* the queue depth it assumed (the engine's) */
	unsigned stream_pool_workers; /* the workers it assumed (the engine's) */
	uint64_t reserved[12];     /* room to grow: zero */
} rl_load_stats;

/* rl_load_stats.stream_pool_limit: what sized a streaming load's pool. */
#define RL_POOL_BY_BUDGET 1   /* RL_OPT_STAGING_BUDGET, or the caller's pool */
#define RL_POOL_BY_STAGING 2  /* the load's staging (every device's, rounded up to pages) */
#define RL_POOL_BY_MEDIUM 3   /* what keeps the medium busy (stream_pool_medium) */

int rl_loader_get_stats(const rl_loader *ld, rl_load_stats *out);

/* rl_load_stats.fallback_flags: what the run did other than what was asked
 * or best, each also said with its reason in rl_load_stats.fallbacks.
 * Values are fixed; new ones are appended. */
#define RL_FALLBACK_BACKEND (1u << 0)      /* a backend was unavailable: the next ran */
#define RL_FALLBACK_URING_FLAGS (1u << 1)  /* io_uring refused set-up flags: fewer used */
#define RL_FALLBACK_FILES_UNREGISTERED (1u << 2) /* io_uring refused to register the files */
#define RL_FALLBACK_BUFFERS_UNREGISTERED (1u << 3) /* io_uring registered some bounce
						     * buffers, or none */
#define RL_FALLBACK_BUFFERS_UNLOCKED (1u << 4) /* bounce buffers not mlock'ed (refused, or
						 * over the worker's RLIMIT_MEMLOCK share) */
#define RL_FALLBACK_NOT_PREFAULTED (1u << 5) /* staging not pre-faulted */
#define RL_FALLBACK_FEWER_WORKERS (1u << 6) /* a worker did not start: fewer ran */
#define RL_FALLBACK_CUDA_HOST_ALLOC (1u << 7) /* CUDA: cuMemHostRegister refused the pool:
					       * copies through cuMemHostAlloc memory */
#define RL_FALLBACK_CUDA_PAGEABLE (1u << 8) /* CUDA: cuMemHostAlloc refused too: synchronous
					     * copies from pageable memory */

/* How one file was read (rl_file_stats.mode). */
#define RL_FILE_UNUSED 0    /* no reads */
#define RL_FILE_DIRECT 1    /* O_DIRECT from its device */
#define RL_FILE_CACHED 2    /* buffered: the page cache held its needed bytes */
#define RL_FILE_BUFFERED 3  /* buffered: RL_DIRECT_OFF, or the file system refuses O_DIRECT */

/*
 * Statistics of the i-th file the last run read (i < rl_loader_num_files();
 * `file` gives its index for rl_ckpt_file_path()), size-tagged like
 * rl_load_stats. Returns 0, -EINVAL (NULL, size too small, or i out of
 * range) or RL_E_STATE before any run.
 */
typedef struct rl_file_stats {
	size_t size;               /* in: sizeof(rl_file_stats); out: bytes filled */
	size_t file;               /* index for rl_ckpt_file_path() */
	int mode;                  /* RL_FILE_* */
	uint64_t bytes_needed;     /* bytes of the file the reads take */
	uint64_t bytes_resident;   /* of which in the page cache before the load
				    * (measured under RL_DIRECT_AUTO only, not on
				    * tmpfs; an estimate from samples for ranges
				    * past 64 MiB) */
	char device[64];           /* the block devices under the file, "vda1 -> vda",
				    * "loop0 -> (no block device)"; "" when none (tmpfs) */
	uint32_t max_request_bytes;/* largest request its device takes unsplit (0: unknown) */
	uint32_t max_segments;     /* memory segments per request (0: unknown) */
	uint32_t optimal_io_bytes; /* the device's optimal request size (0: none) */
	int sha256_state;          /* RL_SHA256_* */
	char sha256[65];           /* the file's SHA-256 in hex when computed, else "" */
	int why;                   /* RL_WHY_*: why the file was read in this mode */
	int reserved32;            /* zero */
	uint64_t reserved[7];      /* room to grow: zero */
} rl_file_stats;

/* rl_file_stats.why: the mode alone does not say whether it was asked
 * for (RL_OPT_DIRECT ON or OFF) or chosen (RL_DIRECT_AUTO). */
#define RL_WHY_NONE 0    /* RL_FILE_UNUSED: no reads */
#define RL_WHY_ASKED 1   /* RL_DIRECT_ON (O_DIRECT) or RL_DIRECT_OFF (buffered) */
#define RL_WHY_COLD 2    /* auto: under 90% of its needed bytes cached: O_DIRECT */
#define RL_WHY_HOT 3     /* auto: >= 90% of its needed bytes cached: buffered */
#define RL_WHY_MEDIUM 4  /* auto: tmpfs, whose pages are its medium: not probed, O_DIRECT */
#define RL_WHY_REFUSED 5 /* the file system refuses O_DIRECT: buffered */

/* rl_file_stats.sha256_state */
#define RL_SHA256_NONE 0     /* no SHA-256 expected of the file */
#define RL_SHA256_MATCHED 1  /* computed from the bytes read, equal to the expected value */
#define RL_SHA256_PARTIAL 2  /* expected, but the run read only part of the file: not checked */
#define RL_SHA256_MISMATCH 3 /* computed and different: the run failed with RL_E_CHECKSUM */
#define RL_SHA256_STREAMED 4 /* no longer reported: streaming runs hash (kept
			      * so that the value is never reused) */

/* Files the last run read (0 before any run). */
size_t rl_loader_num_files(const rl_loader *ld);
int rl_loader_get_file_stats(const rl_loader *ld, size_t file, rl_file_stats *out);

/*
 * Bytes of [off, off + len) of the file at path that the page cache holds
 * now: the probe RL_DIRECT_AUTO makes (cachestat(2), else mincore(2); no
 * byte is read), in whole pages, at most len. Returns that count, -EINVAL
 * (path NULL, range overflows), -errno of open(2), or -ENOSYS when the
 * kernel can tell nothing.
 */
int64_t rl_file_cached_bytes(const char *path, uint64_t off, uint64_t len);

/*
 * Memory for caller staging (RL_STAGING_CALLER), as the loader wants it:
 * page-aligned (2 MiB-aligned from 2 MiB on), backed by transparent huge
 * pages where the kernel has them (a read into 4 KiB pages is split into
 * many device requests, and faulting in 4 KiB pages costs more), on the
 * NUMA node of the calling thread's CPUs when the machine has several and
 * those CPUs lie on one, and not touched: the load's workers fault it in
 * as they fill it, in parallel. A runtime that pins it for its GPU
 * (cudaHostRegister) best does so after the load (pinning touches every
 * page on one thread). Returns NULL when len is 0 or memory is short. Any
 * thread. Free with rl_staging_free(p, len), len as allocated;
 * rl_staging_free(NULL, len) is a no-op.
 */
void *rl_staging_alloc(size_t len);
void rl_staging_free(void *p, size_t len);

/* Returns the last error message of ld ("" if none). Never NULL. */
const char *rl_loader_errmsg(const rl_loader *ld);

/* Frees ld and library-allocated staging (and the window pool: every
 * piece still held becomes invalid). NULL is a no-op. */
void rl_loader_destroy(rl_loader *ld);

/* ------------------------------------------------------------------ */
/* Streaming (RL_STAGING_STREAM)                                       */
/* ------------------------------------------------------------------ */

/*
 * With RL_OPT_STAGING = RL_STAGING_STREAM the loader never holds a whole
 * staging area: it keeps a pool of windows (the budget, RL_OPT_STAGING_BUDGET,
 * allocated once per loader and kept for the next load of the same size:
 * page-aligned, transparent huge pages; or the caller's memory,
 * rl_loader_set_window_pool()), never more than the load's staging (every
 * device's, rounded up to pages, at least 64 KiB) nor than keeps the medium
 * busy (two windows of a few reads: at least 4, 2 per worker, and on a block
 * device half the engine's queue depth of device requests; at least 8 MiB each;
 * docs/streaming.md),
 * cut into two windows (one under 2 MiB when the budget or the staging
 * sized it). The staging space of every device
 * is read in ranges of at most one window, in device then offset order;
 * when a range has arrived, every shard's bytes in it are handed to the
 * runtime as pieces. A window is filled again only after every piece from
 * it was released (rl_loader_release()), so a load needs nothing of the
 * runtime but releases, and a budget of 64 KiB cannot deadlock (a range
 * needs one free window). The byte limiter (RL_OPT_INFLIGHT_BYTES, capped
 * at a quarter of the budget or the largest read) still bounds reads in
 * flight; bounce buffers are the only memory beyond the budget. Reads at
 * the edge of a range are read once for each range they reach: plan a
 * streaming load with rl_loader_request_bytes() as RL_PLAN_CHUNK_BYTES
 * (rl_loader_load() and the CLI do), since a plan whose reads are larger
 * than a window reads each of them once per window it reaches (a 64 MiB
 * request under a 64 KiB budget: the file hundreds of times over; the
 * shape text of rl_load_stats then says "reads up to N over
 * rl_loader_request_bytes() M: read per window"). A plan
 * with transfers (read once) streams the process's own reads: shards that
 * transfers fill get no pieces from them; with a transport set
 * (rl_loader_set_transport) the transfers' pieces follow, as received or
 * read, else moving them is the caller's. Expected SHA-256 values
 * (rl_loader_expect_sha256) are checked as in a whole load: each file the
 * plan reads whole is hashed across windows, in offset order, and the load
 * fails with RL_E_CHECKSUM (pieces already handed out stay valid until
 * released, but the load is not reported as done). on_shard is not called
 * in this mode; on_progress is (done and total in the plan's read bytes).
 *
 * Two ways to receive the pieces:
 *  - rl_loader_run() / rl_loader_load() with a piece callback
 *    (rl_loader_set_piece_callback()): the pieces are delivered on the
 *    thread running rl_loader_run(), one at a time, in range order; the
 *    run returns when every piece was delivered (not necessarily
 *    released).
 *  - rl_loader_start(), then rl_loader_next_piece() until it returns 0 or
 *    an error, then rl_loader_finish(): the load runs on a library thread
 *    and the consumer pulls the pieces (a Python binding needs no
 *    callback into Python); the callback is not used.
 * Either way the memory a piece points at is never reused before its
 * release, and a new load (rl_loader_run/load/start) is refused
 * (RL_E_STATE) while pieces of the last one are held.
 */

/* One delivered piece: length bytes of shard `shard`, from byte `offset`
 * of the shard (C order of its box) on. Zero-byte shards arrive as one
 * piece of length 0 (data NULL, token 0) at the end. */
typedef struct rl_piece {
	size_t shard;       /* index for rl_plan_shard() */
	unsigned device;    /* its device (index for rl_plan_device()) */
	uint64_t offset;    /* of data[0] in the shard */
	uint64_t length;    /* bytes at data */
	void *data;         /* in a window: valid (and never reused) until released */
	uint64_t token;     /* names the piece for rl_loader_release() */
} rl_piece;

/* Called once per piece on the thread running rl_loader_run(), never two
 * calls at once. It may call rl_loader_release() (of this or any earlier
 * piece), nothing else of the loader. A non-zero return cancels the load:
 * rl_loader_run() returns RL_E_CANCELED after draining its reads. */
typedef int (*rl_piece_fn)(void *user, const rl_piece *piece);

/* Sets the piece callback of rl_loader_run() in streaming mode (NULL
 * removes it). Returns 0 or -EINVAL (ld NULL). Not during a load. */
int rl_loader_set_piece_callback(rl_loader *ld, rl_piece_fn fn, void *user);

/*
 * Streaming windows in the caller's memory (e.g. pinned for a GPU) instead
 * of the library's: len bytes at ptr (>= 64 KiB; page-aligned memory
 * allows direct reads into it) are the budget. The caller keeps it mapped
 * until the load finished and every piece was released, or until
 * rl_loader_destroy(). ptr NULL goes back to the library's pool. Returns
 * 0, -EINVAL (ld NULL), RL_E_STAGING (len under 64 KiB) or RL_E_STATE
 * (pieces of the last load still held, or a load running). Not during a
 * load.
 */
int rl_loader_set_window_pool(rl_loader *ld, void *ptr, size_t len);

/*
 * Gives a piece back: once every piece of a window is back, the window
 * is filled again. Any thread, any time while ld exists, concurrently
 * with the load and with other releases (the Python binding releases
 * from a CUDA event's callback thread, or after a copy). Pieces of length
 * 0 (token 0) need no release. Returns 0, -EINVAL (NULL) or RL_E_PIECE
 * (not held: released twice, or from an earlier load; rl_loader_errmsg()
 * names the piece, its window, shard, offset and length).
 */
int rl_loader_release(rl_loader *ld, const rl_piece *piece);

/*
 * Starts the streaming load of plan on a library thread (the
 * RL_OPT_STAGING must be RL_STAGING_STREAM). On a loader with a device
 * (rl_loader_set_device, rl_loader_set_cuda) the pieces are in device
 * memory: data is the device address (rl_loader_device_shard() +
 * offset), each handed out once the copies of its window finished (its
 * bytes are there), token 0 (no window held: releasing it is accepted
 * and optional); the bytes stay the loader's until its next load,
 * rl_loader_set_device or destroy; when the load failed or was canceled
 * (rl_loader_finish() before the last piece), rl_loader_finish() frees
 * them. Returns 0, or what
 * rl_loader_run() returns for a plan it cannot start (-EINVAL, RL_E_STATE:
 * not streaming, plan not built, a load running, pieces
 * held, a transport set (a started load moves no transfer: the error is
 * agreed with the other processes, whose runs fail with it; use
 * rl_loader_run); -ENOMEM, RL_E_STAGING: the window pool). Threads: start, next and
 * finish are called by one consumer thread at a time; release by any.
 */
int rl_loader_start(rl_loader *ld, const rl_plan *plan);

/*
 * The next piece of the started load, waiting up to timeout_ms (< 0:
 * forever; 0: only what is there) in C, holding no lock of the caller.
 * Returns 1 with *piece filled; 0 when the load ended and every piece was
 * handed out; RL_E_PIECE_TIMEOUT when none came in time (call again); or
 * the load's error code (message: rl_loader_errmsg()) once it failed; then
 * rl_loader_finish(). -EINVAL (NULL) or RL_E_STATE (not started).
 */
int rl_loader_next_piece(rl_loader *ld, rl_piece *piece, int timeout_ms);

/*
 * Ends the started load: when pieces were still to come it cancels the
 * load (the consumer stopped early); waits for the library thread and
 * returns the load's result (0, its error, or RL_E_CANCELED when it was
 * cut short here). Statistics are then available. Pieces handed out stay
 * valid until released. Returns RL_E_STATE when no load was started.
 */
int rl_loader_finish(rl_loader *ld);

/*
 * The budget a streaming loader uses when none is set: a quarter of the
 * least of the cgroup's memory.max (less memory.current), MemAvailable
 * and RLIMIT_MEMLOCK (when limited and the process lacks CAP_IPC_LOCK,
 * which root in a container may), at most 1 GiB, at least 64 KiB. Any
 * thread.
 */
int64_t rl_loader_default_budget(void);

/*
 * The budget ld's streaming load uses: RL_OPT_STAGING_BUDGET when set,
 * else rl_loader_default_budget(), at most 256 MiB for a loader with a
 * device (CUDA) set (two windows of 128 MiB keep the copies and the reads overlapped;
 * more only costs pinned host memory). The one default: the CLI, MPI and
 * Python ask it. Returns the bytes, or -EINVAL (ld NULL).
 */
int64_t rl_loader_budget(const rl_loader *ld);

/*
 * Delivering to devices (docs/cuda.md, docs/architecture.md "A device").
 * A device kind is a sink of the library's registry ("cuda"; a test build
 * adds "testdev"), named by a string; rl_device_kind_at(i) lists them in
 * registry order (i = 0, 1, ...; NULL past the last), which the CLI's
 * --device and Python read. A loader with a device set runs every load
 * as a streaming load whose pieces are copied to device memory; what
 * follows for CUDA holds for every kind, with the kind's own codes.
 */
const char *rl_device_kind_at(size_t i);

/* rl_loader_set_device flags: every spec device, whatever its id (0 ..
 * 2^32-1), on ordinals[0] (n must be 1); no device map. The value of
 * RL_CUDA_ONE_GPU. */
#define RL_DEVICE_ONE (1u << 0)

/*
 * Sets delivery to devices of kind `kind` (NULL: removes it, freeing the
 * device memory of the last load and unpinning the pool). Spec device id
 * d goes to ordinal ordinals[d] (n entries, copied; n 0: the identity,
 * where an id that is no ordinal, 2^31 and above, fails the load naming
 * it), or every one to ordinals[0] (RL_DEVICE_ONE); a plan device the map
 * does not cover fails the load. Nothing touches the device until a
 * load. With a transport (rl_loader_set_transport), a read-once run
 * delivers the received shards to the devices too. Returns 0, -EINVAL
 * (ld NULL), RL_E_INVALID_ARG (no such kind: the message lists the
 * library's; n without ordinals, unknown flags, RL_DEVICE_ONE with
 * n != 1) or the kind's no-such-device code (RL_E_CUDA_DEVICE) for a
 * negative ordinal. Not during a load.
 * rl_loader_set_cuda(), rl_loader_set_cuda_dest(), ..._stream(),
 * rl_loader_cuda_area(), _shard() and _read_back() are these functions
 * for the kind "cuda".
 */
int rl_loader_set_device(rl_loader *ld, const char *kind, const int32_t *ordinals, uint32_t n,
			 uint32_t flags);
/* The kind rl_loader_set_device set on ld ("cuda", ...), or NULL: none
 * (or ld NULL). Valid while the device is set. libringload_mpi asks it:
 * a device loader's rl_mpi_load runs the read-once executor. */
const char *rl_loader_device_kind(const rl_loader *ld);
/* As rl_loader_set_cuda_dest, for any kind. */
int rl_loader_set_device_dest(rl_loader *ld, size_t shard, uint64_t device_ptr, uint64_t bytes);
/* As rl_loader_set_cuda_stream, for any kind (a kind without queues
 * ignores them). */
#define RL_DEVICE_NO_STREAM UINT64_MAX
int rl_loader_set_device_stream(rl_loader *ld, int32_t ordinal, uint64_t stream);
/* As rl_loader_cuda_area, rl_loader_cuda_shard, rl_loader_cuda_read_back,
 * for any kind. */
int rl_loader_device_area(rl_loader *ld, uint32_t device, uint64_t *device_ptr, uint64_t *bytes);
int rl_loader_device_shard(rl_loader *ld, size_t shard, uint64_t *device_ptr);
int rl_loader_device_read_back(rl_loader *ld, uint32_t device, uint64_t offset, void *dst,
			       size_t len);

/*
 * Delivering to CUDA devices (docs/cuda.md). A loader with CUDA set runs
 * every load as a streaming load (RL_OPT_STAGING becomes
 * RL_STAGING_STREAM; the budget bounds the window pool's size, which is
 * at most the load's staging) whose pieces go to GPU memory instead of to
 * a piece callback: the pool is page-locked once (cuMemHostRegister: a
 * load pins at most its own staging, not the budget; the caller's pool of
 * rl_loader_set_window_pool may be pinned already), each piece is one
 * cuMemcpyHtoDAsync on one stream per GPU, and a window is read again
 * only after the event recorded behind its copies completed, while the
 * next window is read. The driver is libcuda.so.1, loaded with dlopen at
 * the first CUDA load (the environment variable RL_LIBCUDA names another
 * file); the caller's primary context of each GPU is used, so device
 * pointers of PyTorch or JAX are valid destinations. The shard callback
 * (rl_loader_set_callbacks) fires once a shard's copies finished, on the
 * thread running the load. rl_loader_run() delivers no piece (no piece
 * callback is needed); rl_loader_start() hands out pieces in device
 * memory (see rl_loader_start).
 *
 * A failure anywhere (no driver: RL_E_CUDA_DRIVER; a device that does not
 * exist: RL_E_CUDA_DEVICE; out of device memory: RL_E_CUDA_MEMORY; a failed
 * copy or driver call: RL_E_CUDA) fails the whole load with a one-line
 * message (rl_loader_errmsg), frees the load's library device memory and
 * returns only when no copy is in flight. A sticky error (a launch
 * failure, an illegal address: the driver's context, shared with the
 * framework, is unusable until the process exits) is RL_E_CUDA_STICKY,
 * for that load and every later one on that GPU: the process must
 * restart.
 */
typedef struct rl_cuda_opts {
	uint32_t size;              /* sizeof(rl_cuda_opts): later versions append */
	uint32_t ndevs;             /* entries of device_map; 0: identity */
	const int32_t *device_map;  /* spec device id -> CUDA ordinal (copied);
				     * several ids may share one GPU */
	uint32_t flags;             /* RL_CUDA_ONE_GPU, or 0 */
	int32_t gpu;                /* RL_CUDA_ONE_GPU: the CUDA ordinal */
	uint64_t reserved[3];       /* room to grow: zero */
} rl_cuda_opts;

/* rl_cuda_opts.flags: every spec device, whatever its id (0 .. 2^32-1),
 * on CUDA device `gpu` (`ringload load --device cuda:N`); no device map. */
#define RL_CUDA_ONE_GPU (1u << 0)

/*
 * Sets (opts) or removes (NULL) delivery to CUDA devices. Spec device id
 * d goes to CUDA device device_map[d] (identity without a map: an id
 * that is no CUDA ordinal, such as 2^31 and above, fails the load with
 * RL_E_CUDA_DEVICE naming it), or every one to `gpu` (RL_CUDA_ONE_GPU);
 * a plan device the map does not cover fails the load with
 * RL_E_CUDA_DEVICE. Nothing touches the driver until a load. Returns 0,
 * -EINVAL (ld NULL), RL_E_INVALID_ARG (size smaller than the first
 * version's, a map without entries, a map with RL_CUDA_ONE_GPU, unknown
 * flags) or RL_E_CUDA_DEVICE (a negative ordinal). Not during a load. Removing it
 * frees the device memory of the last load and unpins the pool.
 */
int rl_loader_set_cuda(rl_loader *ld, const rl_cuda_opts *opts);

/*
 * Destination of shard `shard` (rl_plan_shard's index) in the next loads:
 * bytes bytes of device memory at device_ptr on the shard's GPU (a torch
 * tensor's data_ptr()), filled in C order of the shard's box. Once any
 * shard has a pointer, every non-empty shard of the plan needs one (else
 * the load fails with RL_E_STAGING), each at least the shard's size
 * (RL_E_CUDA_MEMORY). device_ptr 0 removes it. Without pointers the
 * library allocates one area per plan device (cuMemAlloc, its staging
 * size; rl_loader_cuda_area). Returns 0, -EINVAL, -ENOMEM or RL_E_STATE
 * (no rl_loader_set_cuda).
 */
int rl_loader_set_cuda_dest(rl_loader *ld, size_t shard, uint64_t device_ptr, uint64_t bytes);

/*
 * The caller's stream on CUDA device `ordinal` (a CUstream value, such as
 * torch.cuda.current_stream(dev).cuda_stream; 0 is the legacy default
 * stream) in the next loads: the library's copies to that GPU start only
 * after the work queued on it before rl_loader_run() (an event recorded
 * there, waited for by the library's stream with cuStreamWaitEvent: a
 * caching allocator's block may still be in use by kernels), and work
 * queued on it after rl_loader_run() returns runs after the copies (an
 * event recorded behind them, waited for on the caller's stream), after
 * a failed load too. The stream must live until rl_loader_run()
 * returns. RL_CUDA_NO_STREAM removes it; rl_loader_set_cuda() removes
 * all. Returns 0, -EINVAL, -ENOMEM, RL_E_STATE (no rl_loader_set_cuda)
 * or RL_E_CUDA_DEVICE (a negative ordinal).
 */
#define RL_CUDA_NO_STREAM UINT64_MAX
int rl_loader_set_cuda_stream(rl_loader *ld, int32_t ordinal, uint64_t stream);

/*
 * After a CUDA load into library memory: plan device `device`'s area,
 * holding its shards in shard order, each at a multiple of 256 bytes
 * (rl_loader_cuda_shard gives each one's address; not its staging
 * offset). The loader owns it until its next load, rl_loader_set_cuda or
 * destroy. Returns 0, -EINVAL or RL_E_STATE (no such area).
 */
int rl_loader_cuda_area(rl_loader *ld, uint32_t device, uint64_t *device_ptr, uint64_t *bytes);

/*
 * After a CUDA load: the device address of shard `shard` (rl_plan_shard's
 * index): in its device's library area, 256-byte aligned, or the
 * caller's pointer (rl_loader_set_cuda_dest). Returns 0, -EINVAL or
 * RL_E_STATE (no CUDA load, or no such shard in it).
 */
int rl_loader_cuda_shard(rl_loader *ld, size_t shard, uint64_t *device_ptr);

/*
 * Copies len bytes of plan device `device`'s destination back to host
 * memory dst, from offset (in its library area; with the caller's
 * pointers, offset is a device address): what `ringload load --verify`
 * compares with the file. Returns 0, -EINVAL, RL_E_STATE (no CUDA load)
 * or RL_E_CUDA.
 */
int rl_loader_cuda_read_back(rl_loader *ld, uint32_t device, uint64_t offset, void *dst,
			     size_t len);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif

#endif /* RINGLOAD_H */
