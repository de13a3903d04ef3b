/*
 * planner.h - the planner layer: safetensors reading and validation,
 * multi-file checkpoints, sharding specs, and plans (read requests with
 * scatter lists, see common/plan_io.h). Uses libc and cJSON only; never
 * includes engine/.
 */
#ifndef PLANNER_PLANNER_H
#define PLANNER_PLANNER_H

#include <stdint.h>
#include <stddef.h>

#include "common.h"
#include "plan_io.h"
#include "fileid.h"

/* ---------------------------------------------------------------- */
/* dtypes (planner/dtype.c)                                          */
/* ---------------------------------------------------------------- */

/* Bits per element of dt, 0 if dt is invalid. */
unsigned pl_dtype_bits(int dt);
/* The safetensors name of dt ("BF16"), NULL if dt is invalid. */
const char *pl_dtype_name(int dt);
/* The dtype named by the len bytes at name (exact match), or -1. */
int pl_dtype_lookup(const char *name, size_t len);

/* ---------------------------------------------------------------- */
/* Checkpoints (planner/safetensors.c, planner/checkpoint.c)         */
/* ---------------------------------------------------------------- */

struct pl_file {
	char *path;
	uint64_t size;       /* bytes, from fstat at open */
	uint64_t data_start; /* 8 + header length: offset of the data buffer */
	struct cm_file_id id; /* statx at open: a load compares (item 5 of issue 11) */
};

struct pl_tensor {
	char *name;
	uint64_t *shape;     /* ndim entries (NULL when ndim == 0) */
	uint64_t offset;     /* absolute offset of the data in its file */
	uint64_t nbytes;
	uint32_t file;
	uint8_t dtype;       /* rl_dtype */
	uint8_t ndim;        /* safetensors allows any rank; planner caps at RL_MAX_DIMS */
};

struct pl_meta {
	char *key;
	char *value;
};

struct pl_ckpt {
	struct pl_file *files;
	size_t nfiles;
	struct pl_tensor *tensors; /* ordered by file, then offset */
	size_t ntensors;
	uint32_t *by_name;         /* tensor indices sorted by name */
	struct pl_meta *meta;      /* sorted by key, later file wins */
	size_t nmeta;
};

/*
 * Opens a file, directory or index (see rl_ckpt_open). Returns 0 and sets
 * *out, or a negative code with e set.
 */
int pl_ckpt_open(const char *path, struct pl_ckpt **out, struct cm_err *e);
void pl_ckpt_free(struct pl_ckpt *ck);
/* A file given by its header bytes (read elsewhere): the n bytes after
 * the 8-byte length. */
struct pl_file_header {
	const char *path;
	uint64_t size;
	const char *header;
	uint64_t len;
};
/* Builds a checkpoint from files[0..n)'s headers, validated as
 * pl_ckpt_open validates files; nothing is opened. */
int pl_ckpt_from_headers(const struct pl_file_header *files, size_t n, struct pl_ckpt **out,
			 struct cm_err *e);
/* Index of the tensor named name, or -1. */
long pl_ckpt_find(const struct pl_ckpt *ck, const char *name);

/*
 * Parses and validates one safetensors header buffer the way the reference
 * does (UTF-8, JSON form, offsets, overflow, sub-byte alignment, sizes, end
 * of file). buf holds the whole header (hlen bytes, after the 8-byte
 * length; the caller has checked hlen <= PL_MAX_HEADER and 8 + hlen <=
 * file_size); file_size is the size of the whole file. Fills *out afresh:
 * tensors in offset order with absolute offsets and file index file,
 * metadata sorted by key (a repeated key keeps its last value). Returns 0,
 * or a negative code with e set (*out then empty). Used by pl_ckpt_open and
 * by the fuzz target.
 */
struct pl_header {
	struct pl_tensor *tensors;
	size_t ntensors;
	struct pl_meta *meta;
	size_t nmeta;
};
int pl_header_parse(const char *buf, size_t hlen, uint64_t file_size,
		    uint32_t file, struct pl_header *out, struct cm_err *e);
void pl_header_free(struct pl_header *h);

/*
 * Size limits (docs/validation.md lists them all). The header length is the
 * reference's (larger: RL_E_HEADER_TOO_LARGE); the counts are ringload's
 * (RL_E_TOO_LARGE), far above real checkpoints, and keep every index in 32
 * bits. pl_limit() reads a count limit; tests lower one with
 * pl_limit_set_for_tests() to reach it cheaply.
 */
#define PL_MAX_HEADER 100000000u
#define PL_MAX_FILES 65536u            /* files of one checkpoint */
#define PL_MAX_TENSORS (1u << 24)      /* tensors of a checkpoint, items of a plan */
#define PL_MAX_DEVICES (1u << 24)      /* devices of a mesh */
/* Regex attempts of one plan's rule matching: this many, plus
 * PL_MATCH_TRIES_PER_TENSOR for each tensor and target (rule_index.c). */
#define PL_MAX_MATCH_TRIES (1u << 22)
#define PL_MATCH_TRIES_PER_TENSOR 128u

enum pl_limit_kind { PL_LIMIT_FILES, PL_LIMIT_TENSORS, PL_LIMIT_DEVICES, PL_LIMIT_MATCH_TRIES,
		     PL_LIMIT_KINDS };
uint64_t pl_limit(enum pl_limit_kind k);
/* Sets limit k to v (0: back to its default). Single-threaded tests only. */
void pl_limit_set_for_tests(enum pl_limit_kind k, uint64_t v);

/*
 * Writes a printable, NUL-terminated form of the len bytes at s into dst
 * (control bytes and '\\' as \xNN, cut with "..." past ~100 bytes), for
 * error messages. Returns the length written.
 */
size_t pl_quote(char *dst, size_t cap, const char *s, size_t len);

/* ---------------------------------------------------------------- */
/* Sharding specs (planner/spec.c)                                   */
/* ---------------------------------------------------------------- */

struct pl_spec; /* opaque to api/: built by spec.c */

struct pl_spec *pl_spec_new(void);
void pl_spec_free(struct pl_spec *s);
int pl_spec_parse(struct pl_spec *s, const char *json, size_t len, struct cm_err *e);
int pl_spec_set_mesh(struct pl_spec *s, unsigned ndim, const uint32_t *shape,
		     const char *const *axes, const uint32_t *devices,
		     const uint32_t *process_of_device, struct cm_err *e);
int pl_spec_add_rule(struct pl_spec *s, const char *regex, unsigned ndims,
		     const rl_dim_spec *dims, struct cm_err *e);
int pl_spec_add_target_json(struct pl_spec *s, const char *json, size_t len,
			    struct cm_err *e);
/* Every plan of s converts floating tensors to dtype (rl_dtype; -1: as
 * stored): RL_E_DTYPE unless F32, F16 or BF16 (planner/convert.c). */
int pl_spec_set_dtype(struct pl_spec *s, int dtype, struct cm_err *e);

/* ---------------------------------------------------------------- */
/* Plans (planner/plan.c and friends)                                */
/* ---------------------------------------------------------------- */

struct pl_opts {
	int process;
	uint64_t min_gap;       /* default 4096 */
	double ratio;           /* 0: automatic, else >= 1 */
	uint64_t chunk;         /* default 4 MiB */
	uint64_t shard_align;   /* default 4096 */
	int align_all;          /* 1: every shard to shard_align (the caller set it);
				 * 0: small ones packed (default) */
	int congruent;          /* default 1 */
	int all_stats;          /* default 1 */
	int read_once;          /* default 0 */
	uint64_t batch_bytes;   /* default 1 GiB */
	uint64_t transfer_align; /* cut transfers here; 0: the file's alignment */
	uint64_t max_memory;    /* default 4 GiB; 0: no limit */
	int no_memo;            /* 1: every slot's shard the long way (tests); default 0 */
	int convert;            /* 0: dtypes as stored (default); else 1 + the rl_dtype
				 * every floating tensor is converted to */
	int stats_only;         /* 1: the planned process's statistics without its
				 * requests, copies and layout (none with read once or
				 * files_of_process, which need them); default 0 */
};

void pl_opts_default(struct pl_opts *o);

/* Per-file alignment, probed by the caller (api/) before planning. */
struct pl_align {
	uint32_t offset_align;  /* O_DIRECT file offset alignment; 1 = buffered */
	uint32_t mem_align;     /* O_DIRECT memory alignment */
};

/* Shards placed congruently with their file offset are so modulo this
 * (layout.c; the payloads of a batch of transfers, exec/transfers.c). */
#define PL_CONGRUENT_ALIGN 4096u

struct pl_shard {
	uint32_t tensor;        /* index into plan->names / tensor table */
	uint32_t dev;           /* process-local device slot */
	uint64_t offset;        /* in the device's staging area */
	uint64_t nbytes;
	/* the box is recomputed on demand from the spec (pl_plan_shard_box) */
};

struct pl_stats {
	uint64_t devices, needed_bytes, read_bytes, blocks, requests, files_opened;
};

struct pl_plan;             /* owned by planner/ */

/*
 * Builds the plan for o->process. align has ck->nfiles entries. Returns 0
 * and *out, or a negative code with e naming the rule and tensor.
 */
int pl_plan_build(const struct pl_ckpt *ck, const struct pl_spec *spec,
		  const struct pl_align *align, const struct pl_opts *o,
		  struct pl_plan **out, struct cm_err *e);
void pl_plan_free(struct pl_plan *p);

/*
 * What the engine glue (api/) needs, as plain arrays owned by the plan:
 * files (paths and sizes), reads (file and offset order) with their
 * copies, per-device staging sizes, and per-shard byte counts.
 */
struct pl_exec {
	size_t nfiles;
	const char *const *paths;
	const uint64_t *file_sizes;
	size_t nreads;
	const struct cm_read *reads;
	size_t ncopies;
	const struct cm_copy *copies;
	unsigned ndevs;
	const uint32_t *dev_ids;
	const uint64_t *staging_bytes;
	size_t nshards;
	const struct pl_shard *shards;
	uint64_t max_read;          /* largest read length */
	uint64_t needed_bytes;
	/* Read once: per shard, 1 when transfers fill it rather than the
	 * reads (its copies bring 0 bytes); NULL when no shard is received. */
	const uint8_t *received;
	/* Reads name files by their index in paths; this gives the
	 * checkpoint's index of each (rl_plan_request). */
	const uint32_t *file_index;
	/* Per file: its identity when the checkpoint was opened (NULL: not
	 * recorded) and where its data starts (8 + header length). */
	const struct cm_file_id *file_ids;
	const uint64_t *data_starts;
	/* Per shard: its elements' dtype in the file and in staging (rl_dtype;
	 * equal: as stored). The plan's copies of a converted shard take
	 * whole elements, len in the file's bytes and dst in staging's; the
	 * transform pass (exec/transform.c) gives them their operation.
	 * NULL when no shard converts. */
	const struct pl_convert *convert;
};
struct pl_convert {
	uint8_t from, to;
};
void pl_plan_exec(const struct pl_plan *p, struct pl_exec *out);

/* Queries for api/plan_handle.c. */
unsigned pl_plan_nprocs(const struct pl_plan *p);
/* Stats of process proc, or of all with proc < 0. Returns 0, -EINVAL (no
 * such process) or RL_E_STATE (not computed: all_stats was off). */
int pl_plan_stats(const struct pl_plan *p, int proc, struct pl_stats *out);
/* Loaded tensor it: name, dtype, rank and shape (owned by the plan). */
size_t pl_plan_ntensors(const struct pl_plan *p);
void pl_plan_tensor(const struct pl_plan *p, size_t it, const char **name,
		    int *dtype, unsigned *ndim, const uint64_t **shape);
/*
 * Transfers (read once, files_of_process) the planned process takes part
 * in, as root or receiver, in the cluster's order (planner/transfer_query.c).
 */
struct pl_xfer_info {
	uint32_t file;
	uint64_t offset, length;
	int32_t root;
	uint64_t batch, index;
	size_t nreceivers;
	const int32_t *receivers;
	size_t ncopies;
	const struct cm_copy *copies; /* src: offset in the payload */
};
size_t pl_plan_nxfers(const struct pl_plan *p);
void pl_plan_xfer(const struct pl_plan *p, size_t i, struct pl_xfer_info *out);
/* The cluster: transfers, batches and a digest of the list. */
void pl_plan_xsummary(const struct pl_plan *p, uint64_t *transfers, uint64_t *batches,
		      uint64_t *digest);
struct pl_xstats {
	uint64_t transfers, payload, read, sent, received, files, max_read, max_files;
};
/* Transfer statistics of process proc, or of all (proc < 0; max_* only
 * there). Returns 0, -EINVAL or RL_E_STATE. */
int pl_plan_xstats(const struct pl_plan *p, int proc, struct pl_xstats *out);
/* The planned process (pl_opts.process). */
int pl_plan_process(const struct pl_plan *p);
/* 1 when p holds statistics only (pl_opts.stats_only took effect): nothing
 * to load. */
int pl_plan_stats_only(const struct pl_plan *p);
/* What reading transfers needs, per file of the checkpoint (nfiles): its
 * size, and the alignment the transfers were cut and are read with (align
 * NULL in a plan without transfers). */
struct pl_xfiles {
	size_t nfiles;
	const uint64_t *sizes;
	const struct pl_align *align;
};
void pl_plan_xfiles(const struct pl_plan *p, struct pl_xfiles *out);

/*
 * How a root reads its payloads of one batch (planner/transfer_spans.c):
 * spans of a file that touch after alignment merge, each cut into
 * requests of at most chunk bytes (as scatter.c cuts). The planner's
 * statistics count so and exec/transfers.c reads so: one rule, so that
 * predicted and actual bytes read agree.
 */
struct pl_xread {
	uint32_t file;
	uint64_t start, end;    /* aligned */
	uint64_t last;          /* end of the last payload byte */
};
/* Adds payload [off, off + len) of file (payloads in file and offset
 * order) to the spans out[0 .. *ns): merged into the last, or a new one. */
void pl_xread_add(struct pl_xread *out, size_t *ns, uint32_t file, uint64_t off, uint64_t len,
		  const struct pl_align *align);
/* The largest request for a file aligned so: chunk, on the alignment. */
uint64_t pl_xread_request_max(const struct pl_align *a, uint64_t chunk);
/* Bytes (and requests, chunked) that reading span r of a file aligned so costs. */
void pl_xread_cost(const struct pl_xread *r, const struct pl_align *a, uint64_t file_size,
		   uint64_t chunk, uint64_t *bytes, uint64_t *requests);

/*
 * A plan of one process and one device assembled from parts computed
 * elsewhere (planner/plan_parts.c; exec/transfers.c builds the plan of a
 * batch of transfers so): the files of `files_of`; shard k a 1-D U8
 * tensor named names[k] of nbytes[k] bytes at offset[k] of the device's
 * staging (staging bytes in all); the reads (in file and offset order)
 * and their copies, which the plan takes over (plain cm_malloc blocks,
 * freed by pl_plan_free, also on failure); stats, the process's.
 * Returns 0 and *out, or -ENOMEM with e set.
 */
struct pl_parts {
	size_t nshards;
	const char *const *names;
	const uint64_t *nbytes, *offset;
	uint64_t staging;
	struct cm_read *reads;
	size_t nreads;
	struct cm_copy *copies;
	size_t ncopies;
	uint64_t max_read;
	struct pl_stats stats;
};
int pl_plan_from_parts(const struct pl_plan *files_of, struct pl_parts *parts,
		       struct pl_plan **out, struct cm_err *e);
/* Whether process may read file f (files_of_process of spec). */
int pl_avail_may_read(const struct pl_spec *s, const struct pl_ckpt *ck, uint32_t process,
		      uint32_t f);
int pl_avail_set(struct pl_spec *s, uint32_t process, size_t n, const char *const *pat,
		 struct cm_err *e);
/* Box [start, stop) of shard i (ndim entries each). */
void pl_plan_shard_box(const struct pl_plan *p, size_t i, uint64_t *start,
		       uint64_t *stop);

#endif /* PLANNER_PLANNER_H */
