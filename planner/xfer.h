/*
 * xfer.h - transfers between processes, private to planner/: which files
 * each process may read (avail.c), who reads what once in the cluster
 * (readonce.c, assign.c), the transfers and their scatter lists (xfer.c),
 * and the plans that read a batch of transfers (xbatch.c).
 *
 * A transfer moves the file bytes [off, off + len) of one file: its root
 * reads them and sends them to its receivers; every process that needs
 * some of them (root included) copies them into its shards with its own
 * scatter list. Shards that transfers fill get no bytes from the plan's
 * own reads (pl_plan.received).
 */
#ifndef RL_XFER_H
#define RL_XFER_H

#include "pl_private.h"

/* ---------------------------------------------------------------- */
/* files_of_process (avail.c)                                        */
/* ---------------------------------------------------------------- */

struct pl_avail_proc {
	int any;                /* 1: every file (the default) */
	char **pat;             /* file names or fnmatch(3) patterns */
	size_t npat;
};

struct pl_avail {
	uint32_t n;             /* processes listed (the rest: every file) */
	struct pl_avail_proc *proc;
};

struct cJSON;
void pl_avail_free(struct pl_avail *a);
/* Parses the spec's "files_of_process" (a list, one entry per process:
 * null or a list of strings) into s->avail. */
int pl_avail_parse(struct pl_spec *s, const struct cJSON *j, struct rl_err *e);
/* pl_avail_set() (the files a process may read; pat NULL: every file)
 * and pl_avail_may_read() are declared in planner.h, for api/. */
/*
 * *out: a bitmap, bit proc * nfiles + f set when proc may read file f, or
 * NULL when every process may read every file. Returns 0, RL_E_SPEC_MESH
 * (more entries than processes) or -ENOMEM.
 */
int pl_avail_resolve(const struct pl_spec *s, const struct pl_ckpt *ck, uint8_t **out,
		     struct rl_err *e);

static inline int pl_bit(const uint8_t *map, size_t b)
{
	return (map[b / 8] >> (b % 8)) & 1;
}

static inline void pl_set_bit(uint8_t *map, size_t b)
{
	map[b / 8] |= (uint8_t)(1u << (b % 8));
}

/* ---------------------------------------------------------------- */
/* Sets of processes, interned (readonce.c)                          */
/* ---------------------------------------------------------------- */

struct pl_sets {
	uint32_t *pool;         /* members, ascending, set after set */
	size_t npool, cappool;
	struct pl_set_ent {
		uint64_t hash;
		size_t off;
		uint32_t n;
	} *ent;
	size_t nent, capent;
	uint32_t *table;        /* open addressing: entry index + 1 */
	size_t tcap;
};

/* Returns the id of the set v[0..n) (ascending), or UINT32_MAX (no memory). */
uint32_t pl_set_intern(struct pl_sets *ss, const uint32_t *v, uint32_t n);
static inline const uint32_t *pl_set(const struct pl_sets *ss, uint32_t id, uint32_t *n)
{
	*n = ss->ent[id].n;
	return ss->pool + ss->ent[id].off;
}
void pl_sets_free(struct pl_sets *ss);
/* The first run of r that ends past a (runs ascend in C order). */
uint64_t pl_runs_first_after(const struct pl_runs *r, uint64_t a);
/* qsort comparison of uint32_t. */
int pl_u32_cmp(const void *a, const void *b);

/* ---------------------------------------------------------------- */
/* Who reads what (readonce.c, assign.c)                             */
/* ---------------------------------------------------------------- */

/*
 * A piece: contiguous file bytes of one loaded tensor that travel by
 * transfer, needed by the processes of set needers and read by one of
 * readers. whole: the piece is the whole tensor, whose boxes differ in who
 * needs them (receivers are found box by box).
 */
struct pl_piece {
	uint64_t off, len;
	uint32_t file, item;
	uint32_t needers, readers;
	uint8_t whole;
};

/* A contiguous segment of file bytes, for cutting (assign.c): cuts fall
 * on multiples of align (a power of two, 1: anywhere). */
struct pl_seg {
	uint64_t off, len, align;
};

/*
 * Cuts the bytes of segs (in order) into one contiguous share per reader
 * (readers ascending; reader i gets positions [cut[i], cut[i+1]) of the
 * segments' concatenation), balancing bytes by water-filling over the
 * readers' load (least loaded first, ties to the lowest), each cut at the
 * nearest multiple of its segment's alignment in file offsets (ties down)
 * within the segment. load[reader] grows by its share. cut has nr + 1
 * entries. Returns 0 or -ENOMEM.
 */
int pl_waterfill(const struct pl_seg *seg, size_t nseg, const uint32_t *readers,
		 uint32_t nr, uint64_t *load, uint64_t *cut);

/* ---------------------------------------------------------------- */
/* Transfers (xfer.c)                                                */
/* ---------------------------------------------------------------- */

/* The largest payload of one transfer: sends start per transfer, so that
 * they overlap the batch's reads. */
#define PL_XFER_MAX (64ull << 20)

struct pl_xfer {
	uint64_t off, len;
	uint64_t first_recv;    /* receivers: pl_xplan.recv[first_recv ..] */
	uint64_t first_copy;    /* the planned process's copies */
	uint64_t gidx;          /* index in the cluster's order */
	uint32_t file, batch, nrecv, ncopies;
	int32_t root;
	uint32_t piece;         /* first piece (pl_xwork) while building */
};

/* Per process: what transfers cost it. */
struct pl_xstat {
	uint64_t transfers;     /* transfers it roots */
	uint64_t payload;       /* payload bytes it reads for them */
	uint64_t read;          /* bytes its transfer reads read (aligned) */
	uint64_t requests;
	uint64_t sent, received;
	uint64_t files;         /* files opened for transfers and own reads */
	uint64_t needed;        /* payload bytes, counted at the root */
	uint64_t spans;         /* contiguous spans its transfer reads cover */
};

/* What the planner keeps of the assignment while building (xfer.c). */
struct pl_xwork;

struct pl_xplan {
	struct pl_xfer *x;      /* the planned process's transfers, cluster order */
	size_t nx;
	int32_t *recv;
	size_t nrecv;
	struct rl_copy *copies; /* src: offset in the payload */
	size_t ncopies;
	uint64_t ntotal;        /* transfers in the cluster */
	uint64_t nbatches;
	uint64_t digest;        /* of the cluster's transfer list */
	struct pl_xstat *st;    /* per process (statistics of every process) */
	uint8_t *have;          /* st[p] computed */
	struct pl_xstat total;
	uint64_t max_read, max_files;
	struct pl_align *align; /* per file, for the batch plans */
	uint64_t chunk;
	struct pl_xwork *w;     /* NULL once the plan is built */
};

void pl_xplan_free(struct pl_xplan *xp);

/*
 * Read once (or files_of_process): decides, for every byte some process
 * needs, the one process that reads it; sets *skip to a bitmap (item x
 * mesh device: 1 when that device's box arrives by transfer), marks the
 * planned process's received shards and keeps the assignment in p->xp.
 * avail: pl_avail_resolve()'s bitmap (may be NULL).
 */
int pl_read_once(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_spec *s,
		 const struct pl_align *align, const struct pl_opts *o, uint8_t **skip,
		 struct rl_err *e);

/*
 * After the layout and the statistics: the transfers of the cluster (with
 * receivers and batches), the planned process's list and scatter lists,
 * and every process's transfer statistics added to p->stats.
 */
int pl_xfer_finish(struct pl_plan *p, const struct pl_ckpt *ck, struct rl_err *e);

/* ---------------------------------------------------------------- */
/* Reading a batch of transfers (xbatch.c)                           */
/* ---------------------------------------------------------------- */

/* One contiguous span a root reads for transfers of one batch. */
struct pl_xread {
	uint32_t file;
	uint64_t start, end;    /* aligned */
	uint64_t last;          /* end of the last payload byte */
};

/*
 * The aligned spans covering payloads [a, b) of one root and batch
 * (sorted by file and offset): adjacent or overlapping spans merge.
 * Returns their count (at most n), written to out.
 */
size_t pl_xread_spans(const struct pl_xfer *const *x, size_t n, const struct pl_align *align,
		      struct pl_xread *out);

/* The largest request for a file aligned so: chunk, on the alignment. */
uint64_t pl_xread_request_max(const struct pl_align *a, uint64_t chunk);
/* Bytes (and requests, chunked) that reading span r of a file aligned so costs. */
void pl_xread_cost(const struct pl_xread *r, const struct pl_align *a, uint64_t file_size,
		   uint64_t chunk, uint64_t *bytes, uint64_t *requests);

/*
 * pl_plan_build_batch() (planner.h): the plan that reads the payloads of
 * the transfers p's process roots in batch b, into one device whose
 * shards are those payloads, in p's order; o gives the chunk size.
 */

#endif /* RL_XFER_H */
