/*
 * plan_ctx.h - the working state of one plan build, shared by plan.c
 * (regions, dedupe, groups, coalescing, per-process driver) and scatter.c
 * (alignment, chunking and scatter lists). Private to planner/.
 */
#ifndef RL_PLAN_CTX_H
#define RL_PLAN_CTX_H

#include <errno.h>

#include "pl_private.h"

struct region {
	uint64_t off, len, within, nruns;
	uint32_t shard;         /* device-major shard index */
	uint32_t lev;           /* first level in the pool */
	uint8_t nlev;
	uint8_t direct;         /* single run of a congruently placed shard */
};

struct level {
	uint64_t count, stride;
};

struct group {
	uint32_t u0, nu;        /* unique regions [u0, u0 + nu) */
	uint64_t nruns;
};

/* What an item contributes: whole group, one run of a group, one run of a
 * unique region (kind in pl_citem.strided bits 1-2). */
#define CI_GAPS 1u
#define CI_GROUP (0u << 1)
#define CI_GROUP_RUN (1u << 1)
#define CI_UNIQUE_RUN (2u << 1)
#define CI_KIND(c) ((c)->strided & 6u)

struct fpart {
	uint32_t item, part;    /* part UINT32_MAX: the item is plain */
};

struct ablock {
	uint64_t start, end, last; /* aligned span, end of the last needed byte */
	size_t b0, nb;             /* coalesced blocks */
};

struct scopy {
	uint32_t req;
	struct rl_copy c;
};

struct ctx {
	const struct pl_ckpt *ck;
	const struct pl_spec *s;
	const struct pl_align *align;
	const struct pl_opts *o;
	struct pl_plan *p;
	struct rl_err *e;
	struct pl_ratio ratio, *ratiop;
	/* (item, part) pairs bucketed by file */
	struct fpart *fp;
	size_t *file_first;
	/* per-file scratch */
	struct region *reg;
	size_t nreg, capreg;
	struct level *lev;
	size_t nlev, caplev;
	uint32_t *uniq;         /* first region of each unique region; +1 sentinel */
	size_t nuniq, capuniq;
	struct group *grp;
	size_t ngrp, capgrp;
	struct pl_citem *ci;
	size_t nci, capci;
	struct pl_block *blk;
	size_t capblk;
	struct ablock *ab;
	size_t nab, capab;
	uint64_t *cut;          /* direct spans: pairs [a, b) */
	size_t ncut, capcut;
	/* output of the current process */
	int full;
	struct rl_read *reads;
	size_t nreads, capreads;
	struct rl_copy *copies;
	size_t ncopies, capcopies;
	struct scopy *sc;
	size_t nsc, capsc;
	size_t qhint;           /* last request find_req() returned */
	size_t *qcount;         /* per request of a block: copies, then cursor */
	size_t capqcount;
	uint32_t *by_proc;      /* mesh devices bucketed by process, mesh order */
	uint32_t *proc_first;   /* process q's: by_proc[proc_first[q] .. [q + 1]) */
	const uint32_t *slots;  /* mesh index of each slot of the process (in by_proc) */
	uint32_t (*coords)[PL_MAX_AXES]; /* and its mesh coordinates */
	uint8_t *skip;          /* read once: (item, device) boxes received */
	unsigned nslots;
	struct pl_stats st;
};

#define GROW(ctx, arr, n, cap, add) \
	((n) + (add) <= (cap) ? 0 : \
	 pl_grow((void **)&(arr), (n) + (add), &(cap), sizeof(*(arr)), (ctx)->e))

/*
 * Grows *arr to hold need elements (x1.5 steps). 0 or -ENOMEM (e set).
 * rl_grow grows by half: the largest arrays (copies) are near the memory
 * budget, where doubling would overshoot it. Plan arrays start at 64
 * elements: they hold many, and few growth steps keep realloc copies (old
 * and new alive at once) off the peak.
 */
static inline int pl_grow(void **arr, size_t need, size_t *cap, size_t size, struct rl_err *e)
{
	if (rl_grow(arr, cap, *cap ? need : RL_MAX(need, (size_t)64), size))
		return rl_err_set(e, -ENOMEM, "plan: out of memory");
	return 0;
}

/* The first region of unique region u. */
static inline const struct region *ureg(const struct ctx *x, size_t u)
{
	return &x->reg[x->uniq[u]];
}


/* Offset of run k of region r. */
static inline uint64_t run_off(const struct ctx *x, const struct region *r, uint64_t k)
{
	uint64_t off = r->off;

	for (unsigned i = r->nlev; i-- > 0;) {
		const struct level *l = &x->lev[r->lev + i];

		off += (k % l->count) * l->stride;
		k /= l->count;
	}
	return off;
}

/* Requests and copies of aligned block ab of file f (scatter.c); copies'
 * dst are offsets in their shard until pl_place_copies(). */
int pl_block_requests(struct ctx *x, uint32_t f, const struct ablock *ab);
/* Once the layout is done: copies to staging offsets, direct reads checked. */
void pl_place_copies(const struct pl_plan *p, struct rl_copy *copies, size_t ncopies,
		     struct rl_read *reads, size_t nreads, const struct pl_align *align);

#endif /* RL_PLAN_CTX_H */
