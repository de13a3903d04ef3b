/*
 * pl_private.h - what the planner's own files share: the spec's parsed
 * form, boxes and byte runs, the coalescer, layout and plan internals.
 * Nothing outside planner/ (and the planner's unit tests) includes it.
 */
#ifndef PLANNER_PL_PRIVATE_H
#define PLANNER_PL_PRIVATE_H

#include <regex.h>

#include "planner.h"

#define PL_MAX_AXES 16          /* mesh axes */
#define PL_MAX_STACK 4          /* nesting depth of a stacked target */

/* ---------------------------------------------------------------- */
/* Spec (spec.c, targets.c)                                          */
/* ---------------------------------------------------------------- */

/* One dimension of a partition spec: the mesh axes it is split over. */
struct pl_dimspec {
	uint8_t naxes;
	uint8_t axes[PL_MAX_AXES];  /* mesh axis indices, in listed order */
};

#define PL_RULE_PREFIX 64      /* bytes of a rule's literal prefix kept, + 1 */

struct pl_rule {
	char *pattern;
	regex_t re;
	char prefix[PL_RULE_PREFIX]; /* every name it matches starts so (rule_index.c) */
	char must[PL_RULE_PREFIX];   /* and contains this */
	uint8_t plen, mlen;
	uint32_t next;              /* next rule of the same prefix; UINT32_MAX: none */
	unsigned ndims;
	struct pl_dimspec dims[RL_MAX_DIMS];
	char **names;               /* axis names of every dim, flattened */
	unsigned nnames;
};

enum pl_target_kind { PL_T_ALIAS, PL_T_SLICE, PL_T_STACK };

struct pl_target {
	char *name;
	enum pl_target_kind kind;
	char **sources;             /* ALIAS/SLICE: one; STACK: row-major */
	size_t nsources;
	unsigned nstack;            /* STACK: nesting depth */
	uint64_t stack_shape[PL_MAX_STACK];
	unsigned nslice;            /* SLICE: entries given */
	uint64_t slice_start[RL_MAX_DIMS];
	uint64_t slice_stop[RL_MAX_DIMS]; /* UINT64_MAX: to the end (null) */
	int has_shape;
	unsigned shape_ndim;
	uint64_t shape[RL_MAX_DIMS];
	char *dtype;                /* declared dtype name, or NULL */
};

struct pl_spec {
	unsigned ndim;
	uint32_t shape[PL_MAX_AXES];
	char *axes[PL_MAX_AXES];
	uint32_t ndev;
	uint32_t *devices;          /* ndev ids, row-major mesh order */
	uint32_t *proc;             /* ndev process ids */
	uint32_t nprocs;            /* max process id + 1 */
	struct pl_rule *rules;
	size_t nrules;
	struct pl_prefix_slot *ptab; /* rules by key, pcap slots (rule_index.c) */
	size_t pcap;
	uint64_t mlens;             /* bit l: some rule's key is a run of l bytes */
	unsigned nplain;            /* rules without literal text */
	struct pl_target *targets;
	size_t ntargets;
	char **tensors;             /* optional selection */
	size_t ntensors;
	int has_tensors;
	struct pl_avail *avail;     /* files_of_process (avail.h), or NULL */
	int convert;                /* as pl_opts.convert (rl_spec_set_dtype); the
				     * plan's own, when set, wins */
};

/*
 * Rules are POSIX extended regexes restricted so that regcomp() cannot
 * explode (regex_limits.c): at most PL_MAX_RULE_BYTES long, no
 * back-references, no stacked repetitions, groups at most
 * PL_MAX_RULE_DEPTH deep, {m,n} counts multiplying to at most
 * PL_MAX_RULE_REPEAT and expanding to at most PL_MAX_RULE_ATOMS atoms.
 * Returns 0 or RL_E_SPEC_REGEX naming rule idx.
 */
#define PL_MAX_RULE_BYTES 1024u
#define PL_MAX_RULE_DEPTH 8u
#define PL_MAX_RULE_REPEAT 1000u
#define PL_MAX_RULE_ATOMS 4096u
int pl_regex_check(const char *re, size_t idx, struct cm_err *e);

/*
 * Bounds of a spec, checked before anything grows with them: each compiled
 * rule costs ~6 KB in glibc (174k trivial rules took 1.07 GB), and every
 * tensor is tried against the rules (42k rules x 25k tensors took 119 s).
 * JSON text is walked for nesting and its count of values before cJSON
 * builds a tree (~64 bytes per value).
 */
#define PL_MAX_RULES 4096u
#define PL_MAX_PLAIN_RULES 64u  /* of them without literal text (rule_index.c) */
#define PL_SPEC_MAX_DEPTH 64
#define PL_SPEC_MAX_VALUES (1u << 20)

/* Index of the first rule matching name, or -1 (replicated). */
long pl_spec_match(const struct pl_spec *s, const char *name);
/* The same, each rule tried taken from *tries; PL_MATCH_OVER when they
 * run out (a hostile rule set: many rules sharing one key, or names that
 * find more than 256 keys, try many rules on every name). */
#define PL_MATCH_OVER (-2l)
long pl_spec_match_tries(const struct pl_spec *s, const char *name, uint64_t *tries);

/* A key of the rule index: its hash, first and last rule. */
struct pl_prefix_slot {
	uint64_t hash;
	uint32_t head, tail;
	int used;
};
/* Indexes the last rule of s by its literal text. 0, -ENOMEM or
 * RL_E_TOO_LARGE (over PL_MAX_PLAIN_RULES rules without literal text). */
int pl_rule_index_add(struct pl_spec *s, struct cm_err *e);
/* The literal text every name re matches starts with, and a literal run
 * every one contains (regex_limits.c). */
size_t pl_regex_prefix(const char *re, char *out, size_t cap);
size_t pl_regex_must(const char *re, char *out, size_t cap);
/* Parses one target object; appends it to s. */
struct cJSON;
int pl_target_parse(struct pl_spec *s, const struct cJSON *j, size_t idx,
		    struct cm_err *e);
void pl_target_clear(struct pl_target *t);

/* ---------------------------------------------------------------- */
/* Boxes and runs (box.c)                                            */
/* ---------------------------------------------------------------- */

struct pl_box {
	uint64_t start[RL_MAX_DIMS];
	uint64_t stop[RL_MAX_DIMS];
};

/*
 * Box of a tensor of shape[0..ndim) for mesh device index di (row-major
 * mesh position) under rule (NULL: replicated): the ceil-division rule.
 */
void pl_box_of(const struct pl_spec *s, const struct pl_rule *rule,
	       unsigned ndim, const uint64_t *shape, uint32_t di,
	       struct pl_box *b);

/* The same in two steps: mesh coordinates of di (once per device), then
 * the box from them. */
void pl_mesh_coords(const struct pl_spec *s, uint32_t di, uint32_t *coord);
void pl_box_at(const struct pl_spec *s, const struct pl_rule *rule, unsigned ndim,
	       const uint64_t *shape, const uint32_t *coord, struct pl_box *b);

/*
 * Byte runs of a box, compact: count * ... runs of len bytes; run k (in
 * C order of the box) starts at off + sum(digit_i * stride[i]) where the
 * digits are k in mixed radix count[0..nlev) (outermost first). nlev 0: one
 * run. nruns 0 when the box is empty.
 */
struct pl_runs {
	uint64_t off;
	uint64_t len;
	uint64_t nruns;
	unsigned nlev;
	uint64_t count[RL_MAX_DIMS];
	uint64_t stride[RL_MAX_DIMS];
};

/*
 * Computes the runs of box b of a tensor (shape, bits per element, data at
 * base). Returns 0, or RL_E_SUBBYTE_SPLIT when a sub-byte dtype's runs do
 * not fall on whole bytes.
 */
int pl_box_runs(unsigned ndim, const uint64_t *shape, unsigned bits,
		uint64_t base, const struct pl_box *b, struct pl_runs *r);
/* Offset of run k. */
uint64_t pl_run_off(const struct pl_runs *r, uint64_t k);

/* ---------------------------------------------------------------- */
/* Coalescing (coalesce.c)                                           */
/* ---------------------------------------------------------------- */

/*
 * A coalescing item: a contiguous extent, or (strided) a solid-equivalent
 * set of runs whose gaps are all <= min_gap, with needed < end - start.
 * Strided items never overlap other items (the plan expands them first).
 */
struct pl_citem {
	uint64_t start, end;
	uint64_t needed;
	uint32_t ref;               /* caller's reference */
	uint32_t strided;
	uint64_t k;                 /* caller's run index */
};

struct pl_block {
	uint64_t start, end;        /* [start, end): first to last needed byte */
	uint64_t needed;
	size_t first, n;            /* member items */
};

/* A ratio as an exact fraction num/den (>= 1). */
struct pl_ratio {
	uint64_t num, den;
};

/*
 * Coalesces items (sorted by start) into blocks: merge when the gap is
 * <= min_gap, or when the merged span <= ratio x needed (both inclusive);
 * overlapping items always merge. ratio NULL: automatic. Writes blocks to
 * out (at least n entries) and returns their count.
 */
size_t pl_coalesce(const struct pl_citem *it, size_t n, uint64_t min_gap,
		   const struct pl_ratio *ratio, struct pl_block *out);
/* The automatic ratio for items (see DESIGN.md). */
void pl_auto_ratio(const struct pl_citem *it, size_t n, uint64_t min_gap,
		   struct pl_ratio *r);

/* ---------------------------------------------------------------- */
/* Plans (plan.c, layout.c, targets.c)                               */
/* ---------------------------------------------------------------- */

/* A loaded tensor: a checkpoint tensor or a target. */
struct pl_item {
	char *name;
	uint64_t *shape;
	uint8_t ndim;
	uint8_t dtype;
	uint16_t bits;
	uint8_t to;                 /* the dtype in staging (convert.c): dtype unless converted */
	uint16_t to_bits;           /* its bits */
	int32_t rule;               /* -1: replicated */
	uint32_t src;               /* plain: source tensor */
	uint32_t first_part, nparts; /* targets: parts (nparts 0: plain) */
};

/* A target's part: one source tensor placed in the target. */
struct pl_part {
	uint32_t src;
	uint32_t nlead;             /* stacked dims before the source's */
	uint64_t lead;              /* flat index over the stacked dims */
	uint64_t slice[RL_MAX_DIMS]; /* start in the source, per source dim */
};

/* Builds the loaded items of ck under s. */
int pl_items_build(const struct pl_ckpt *ck, const struct pl_spec *s,
		   struct pl_item **items, size_t *nitems,
		   struct pl_part **parts, size_t *nparts, struct cm_err *e);
void pl_items_free(struct pl_item *items, size_t n, struct pl_part *parts);

struct pl_plan {
	struct pl_spec *spec;       /* private copy of the mesh and rules */
	struct pl_item *items;
	size_t nitems;
	struct pl_part *parts;
	size_t nparts;
	int process;
	unsigned nslots;
	uint32_t *slot_dev;         /* mesh index of each local slot */
	uint32_t *dev_ids;
	uint64_t *staging;
	struct pl_shard *shards;    /* nslots x nitems, device-major */
	size_t nshards;
	size_t nfiles;
	char **paths;
	uint64_t *file_sizes;
	struct cm_file_id *file_ids; /* per file; NULL in batch plans (not recorded) */
	uint64_t *data_starts;       /* per file; NULL in batch plans */
	struct cm_read *reads;
	size_t nreads;
	struct cm_copy *copies;
	size_t ncopies;
	/* Capacities of reads and copies, for cm_free_big(); 0 where they are
	 * plain blocks (batch plans). */
	size_t capreads, capcopies;
	uint64_t max_read;
	struct pl_stats *stats;     /* nprocs entries, per process */
	uint8_t *have_stats;
	struct pl_stats total;
	int all_stats;
	/* read once, files_of_process: transfers (transfer_assign.h) */
	struct pl_xplan *xp;
	uint8_t *received;          /* per shard: filled by transfers, or NULL */
	struct pl_exec_files *fx;   /* what the engine executes (exec_files.c) */
	uint64_t memory_estimate;   /* bytes the build was estimated to need */
	int converts;               /* some item converts (convert.c) */
	int stats_only;             /* statistics only: no shards, reads or copies */
	struct pl_convert *convert; /* per shard when it does, else NULL */
};

/* dtype conversion on load (convert.c): the options' check, which items
 * convert (their to and to_bits; every item's set), and the per-shard
 * table pl_exec.convert gives (after the layout). */
int pl_convert_check(const struct pl_opts *o, const struct pl_spec *s, struct cm_err *e);
int pl_convert_items(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_opts *o,
		     struct cm_err *e);
int pl_convert_shards(struct pl_plan *p);

/*
 * The files the plan's reads open, and the reads naming them by their
 * index in that table (exec_files.c): the engine opens exactly these.
 */
struct pl_exec_files {
	size_t n;
	uint32_t *file;             /* checkpoint index of each */
	const char **paths;         /* the plan's strings */
	uint64_t *sizes;
	struct cm_file_id *ids;     /* NULL when the plan has none */
	uint64_t *data_starts;      /* NULL when the plan has none */
	struct cm_read *reads;      /* the plan's reads, files renumbered */
};
int pl_plan_exec_files(struct pl_plan *p, struct cm_err *e);
void pl_exec_files_free(struct pl_exec_files *fx);

/* Whether bit (item, dev) of a read-once skip map is set: that device's
 * box arrives by transfer (transfer_assign.h). */
static inline int pl_skip_bit(const uint8_t *skip, size_t ndev, size_t item, uint32_t dev)
{
	size_t b = item * ndev + dev;

	return skip && (skip[b / 8] >> (b % 8)) & 1;
}

/* Shard of item it on slot (device-major order). */
static inline size_t pl_shard_index(const struct pl_plan *p, size_t it, unsigned slot)
{
	return (size_t)slot * p->nitems + it;
}

/* Box of item it on mesh device di, or at mesh coordinates coord. */
void pl_item_box(const struct pl_spec *s, const struct pl_item *it,
		 uint32_t di, struct pl_box *b);
static inline void pl_item_box_at(const struct pl_spec *s, const struct pl_item *it,
				  const uint32_t *coord, struct pl_box *b)
{
	pl_box_at(s, it->rule >= 0 ? &s->rules[it->rule] : NULL, it->ndim, it->shape,
		  coord, b);
}

/*
 * Staging layout of plan p (layout.c), from the shards' nbytes; a shard
 * whose offset holds PL_CONGRUENT_MARK | (file offset mod 4096) is one
 * contiguous run of one source and is placed congruently; one marked
 * PL_CONGRUENT_SOFT instead (a short one) only where that costs little.
 */
#define PL_CONGRUENT_MARK (1ull << 63)
#define PL_CONGRUENT_SOFT (1ull << 62)
int pl_layout(struct pl_plan *p, const struct pl_opts *o, struct cm_err *e);

/*
 * The counts a plan's memory grows with (estimate.c), and the estimate:
 * bytes at the build's peak, saturating at UINT64_MAX.
 */
struct pl_estimate {
	uint64_t ndev, nprocs, nitems, nparts, nfiles;
	uint64_t slots;             /* devices of the planned process */
	uint64_t stat_slots;        /* most devices of a process planned */
	double filled;              /* sum over tensors of their shares */
	double file_regions;        /* regions of the file with most: its (tensor,
				     * part) pairs' shares x stat_slots */
	double file_unique;         /* distinct regions of the file with most */
	int read_once;
	uint64_t ro_boxes;          /* distinct non-empty boxes of all tensors */
	double ro_sharers;          /* sum over them of the processes sharing one */
};
/* The share of a mesh's devices whose box of it holds bytes, and its
 * distinct non-empty boxes. */
void pl_estimate_item(const struct pl_spec *s, const struct pl_item *it, double *share,
		      uint64_t *boxes);
uint64_t pl_estimate_bytes(const struct pl_estimate *c);

/* Shards at least this long (beyond the alignment) get congruent
 * placement and direct middles. */
#define PL_DIRECT_MIN (64u << 10)

/* Whether a run of a file aligned so may be read straight into staging
 * (inline: asked once per region); of len bytes, whether it is long enough
 * to be placed congruently on its own (PL_CONGRUENT_MARK; shorter ones
 * get PL_CONGRUENT_SOFT: read straight as part of a run of neighbours). */
static inline int pl_direct_file_ok(const struct pl_opts *o, const struct pl_align *a)
{
	uint32_t A = a->offset_align > a->mem_align ? a->offset_align : a->mem_align;

	return o->congruent && a->offset_align > 1 && A <= PL_CONGRUENT_ALIGN;
}

static inline int pl_congruent_ok(const struct pl_opts *o, const struct pl_align *a,
				  uint64_t len)
{
	uint32_t A = a->offset_align > a->mem_align ? a->offset_align : a->mem_align;

	return pl_direct_file_ok(o, a) && len >= PL_DIRECT_MIN + 2 * (uint64_t)A;
}

/* Whether a short shard of len bytes at file offset off may be placed
 * congruently at all (layout.c): it stays aligned for any dtype, to 8
 * (to its size rounded up to a power of two below 8), as packed. */
static inline int pl_soft_ok(const struct pl_opts *o, uint64_t off, uint64_t len)
{
	uint64_t a = 1;

	while (a < len && a < 8)
		a <<= 1;
	return !o->align_all && off % a == 0;
}

/* ---------------------------------------------------------------- */
/* Who reads what across processes (assign.c)                        */
/* ---------------------------------------------------------------- */

/* A piece of data some processes need, to be read by exactly one. */
struct pl_assign_item {
	uint64_t size;
	uint32_t file;
	int32_t hint;               /* preferred reader, or -1 */
	const uint32_t *elig;       /* processes that may read it (need it) */
	uint32_t nelig;
};

/*
 * Assigns each item a reader: items with fewer eligible readers first,
 * then larger file groups, then larger items; an eligible hint wins; else
 * the least-loaded eligible process that already reads the item's file
 * (reads[p * nfiles + file], may be NULL); else the least-loaded eligible
 * process. Ties go to the lowest process. owner[i] gets the reader (-1
 * when nobody is eligible), load[p] (nprocs entries, zeroed by the
 * caller or carrying earlier load) the bytes. Returns 0 or -ENOMEM.
 */
int pl_assign(const struct pl_assign_item *it, size_t n, unsigned nprocs,
	      const uint8_t *reads, uint32_t nfiles, int32_t *owner, uint64_t *load);

/*
 * Cuts items (in order) into batches whose sizes sum to at most limit; an
 * item larger than limit goes alone. batch[i] gets item i's batch. Returns
 * the number of batches.
 */
size_t pl_batches(const uint64_t *sizes, size_t n, uint64_t limit, uint32_t *batch);

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
/* Bitmaps (avail.c, readonce.c, the transfers)                      */
/* ---------------------------------------------------------------- */

/* Bit b of map (bit b % 8 of byte b / 8). */
static inline int pl_bit(const uint8_t *map, size_t b)
{
	return (map[b / 8] >> (b % 8)) & 1;
}

static inline void pl_set_bit(uint8_t *map, size_t b)
{
	map[b / 8] |= (uint8_t)(1u << (b % 8));
}

#endif /* PLANNER_PL_PRIVATE_H */
