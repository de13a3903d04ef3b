/*
 * plan_ctx.h - the working state of one plan build, shared by plan.c
 * (regions, dedupe, groups, coalescing, per-process driver) and scatter.c
 * (alignment, chunking and scatter lists). Private to planner/.
 */
#ifndef PLANNER_PLAN_CTX_H
#define PLANNER_PLAN_CTX_H

#include <errno.h>

#include "pl_private.h"

/* A device's bytes of one (item, part) in one file: compact runs (offset,
 * run length, levels of count and stride) and where they land. */
struct region {
	uint64_t off, len;
	uint64_t within;        /* offset of the first run in its shard */
	uint64_t nruns;
	uint32_t shard;         /* device-major shard index */
	uint32_t slot;          /* its device (shard / items), kept to spare a division */
	uint32_t lev;           /* first level in ctx.levels */
	uint8_t nlev;
	uint8_t direct;         /* single run of a congruently placed shard */
	uint8_t isize, osize;   /* element bytes in the file and in staging (differ:
				 * converted; within counts the file's) */
};

struct level {
	uint64_t count, stride;
};

/* Unique regions of one tensor with the same single level that tile a
 * period (neighbouring devices' column shards): coalesced as one. */
struct group {
	uint32_t u0, nu;        /* unique regions [u0, u0 + nu) */
	uint64_t nruns;
};

/* What a coalescing item stands for (its pl_citem.strided bits 1-2): a whole
 * group, one run of a group, or one run of a unique region; bit 0 is set
 * when it has gaps (needed < end - start). */
#define ITEM_GAPS 1u
#define ITEM_GROUP (0u << 1)
#define ITEM_GROUP_RUN (1u << 1)
#define ITEM_UNIQUE_RUN (2u << 1)
#define ITEM_KIND(c) ((c)->strided & 6u)

/* One (item, part) that reads a file. */
struct file_part {
	uint32_t item, part;    /* part UINT32_MAX: the item is plain */
};

/* Coalesced blocks widened to the file's alignment (merged where they
 * then overlap). */
struct aligned_block {
	uint64_t start, end;    /* aligned span */
	uint64_t last;          /* end of the last needed byte */
	size_t b0, nb;          /* coalesced blocks [b0, b0 + nb) */
};

/* Runs [k0, k1) of a group or unique region. */
struct run_range {
	uint64_t k0, k1;
};

/* A copy before copies are grouped by request. */
struct req_copy {
	uint32_t req;
	struct cm_copy c;
};

/* One slot's shard of a plain tensor, memoized by (rule, bits, shape) for
 * the slots of the process being planned (slotcache.c). */
struct slot_shard {
	struct pl_runs r;       /* its byte runs, off from the tensor's data */
	uint64_t nbytes;        /* the shard's size */
	int ok;                 /* 0: plan the slot the long way (errors are worded there) */
};

struct slot_key {
	int32_t rule;
	uint16_t bits;
	uint16_t to_bits;
	uint8_t ndim;
	uint8_t valid;
	uint64_t shape[RL_MAX_DIMS];
};

/* The most bytes the memo takes (entries x slots x slot_shard). */
#define PL_SLOT_CACHE_MAX ((uint64_t)1 << 20)

/* The working state of one plan build. */
struct ctx {
	const struct pl_ckpt *ck;
	const struct pl_spec *spec;
	const struct pl_align *align;
	const struct pl_opts *opts;
	struct pl_plan *plan;
	struct cm_err *err;
	struct pl_ratio ratio, *ratiop;   /* ratiop NULL: automatic */
	/* (item, part) pairs bucketed by file: file f's are
	 * parts_by_file[file_first_part[f] .. file_first_part[f + 1]) */
	struct file_part *parts_by_file;
	size_t *file_first_part;
	/* per-file scratch */
	struct region *regions;
	size_t nregions, capregions;
	struct level *levels;
	size_t nlevels, caplevels;
	uint32_t *unique;       /* first region of each unique region; +1 sentinel */
	size_t nunique, capunique;
	struct group *groups;
	size_t ngroups, capgroups;
	struct pl_citem *citems;         /* coalescing items */
	size_t ncitems, capcitems;
	struct pl_block *blocks;         /* coalesced */
	size_t capblocks;
	struct aligned_block *ablocks;
	size_t nablocks, capablocks;
	uint64_t *direct_cuts;  /* direct spans of a block: pairs [a, b) */
	size_t ndirect_cuts, capdirect_cuts;
	/* output of the current process */
	int with_copies;        /* 0: statistics only (another process) */
	struct cm_read *reads;
	size_t nreads, capreads;
	struct cm_copy *copies;
	size_t ncopies, capcopies;
	struct req_copy *req_copies;     /* a block's copies, in emission order */
	size_t nreq_copies, capreq_copies;
	size_t last_req;        /* last request find_req() returned */
	size_t *req_counts;     /* per request of a block: copies, then cursor */
	size_t capreq_counts;
	/* Runs of one group (or unique region) that a block's sparse items
	 * bring one by one, gathered into one range so that they become one
	 * strided copy per request and box, not one copy per run: pending
	 * range per group, then per unique region (k1 0: none), and the
	 * entries a block touched. */
	struct run_range *pend;
	size_t npend, cappend;  /* npend: entries initialised (inactive) */
	uint32_t *touched;
	size_t ntouched, captouched;
	uint32_t *by_proc;      /* mesh devices bucketed by process, mesh order */
	uint32_t *proc_first;   /* process q's: by_proc[proc_first[q] .. [q + 1]) */
	const uint32_t *slots;  /* mesh index of each slot of the process (in by_proc) */
	uint32_t (*coords)[PL_MAX_AXES]; /* and its mesh coordinates */
	uint8_t *skip;          /* read once: (item, device) boxes received */
	/* The memo of slot shards: ncache entries of cache_slots each. */
	struct slot_key *ckeys;
	struct slot_shard *cshards;
	size_t ncache;
	uint32_t cache_slots;
	unsigned nslots;
	struct pl_stats stats;
};

#define GROW(ctx, arr, n, cap, add) \
	((n) + (add) <= (cap) ? 0 : \
	 pl_grow((void **)&(arr), (n) + (add), &(cap), sizeof(*(arr)), (ctx)->err))

/*
 * Grows *arr to hold need elements (x1.5 steps). 0 or -ENOMEM (e set).
 * cm_grow_big grows by half: the largest arrays (copies) are near the
 * memory budget, where doubling would overshoot it; from 1 MiB on they are
 * mappings that mremap grows without copying, so growth costs neither a
 * second copy on the peak nor page faults on fresh pages. Free them with
 * cm_free_big(). Plan arrays start at 64 elements.
 */
static inline int pl_grow(void **arr, size_t need, size_t *cap, size_t size, struct cm_err *e)
{
	if (cm_grow_big(arr, cap, *cap ? need : CM_MAX(need, (size_t)64), size))
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	return 0;
}

/* The first region of unique region u. */
static inline const struct region *unique_region(const struct ctx *x, size_t u)
{
	return &x->regions[x->unique[u]];
}


/* Offset of run k of region r. */
static inline uint64_t run_off(const struct ctx *x, const struct region *r, uint64_t k)
{
	uint64_t off = r->off;

	for (unsigned i = r->nlev; i-- > 0;) {
		const struct level *l = &x->levels[r->lev + i];

		off += (k % l->count) * l->stride;
		k /= l->count;
	}
	return off;
}

/* The memo of slot shards (slotcache.c): entries for a process of slots
 * devices and nitems items; allocated for the largest process, reset for
 * each process planned, freed with the context. */
size_t pl_slot_cache_entries(uint64_t slots, uint64_t nitems);
int pl_slot_cache_alloc(struct ctx *x, uint32_t max_slots);
void pl_slot_cache_reset(struct ctx *x);
void pl_slot_cache_free(struct ctx *x);
/* Shards of plain item it on every slot of the process (x->coords), or
 * NULL when it is not memoized (parts, or no memo). */
const struct slot_shard *pl_slot_shards(struct ctx *x, const struct pl_item *it);

/* Requests and copies of aligned block ab of file f (scatter.c); copies'
 * dst are offsets in their shard until pl_place_copies(). */
int pl_block_requests(struct ctx *x, uint32_t f, const struct aligned_block *ab);
/* Once the layout is done: copies to staging offsets, direct reads checked. */
void pl_place_copies(const struct pl_plan *p, struct cm_copy *copies, size_t ncopies,
		     struct cm_read *reads, size_t nreads, const struct pl_align *align);

#endif /* PLANNER_PLAN_CTX_H */
