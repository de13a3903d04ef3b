/*
 * plan.c - builds a process's plan, file by file:
 *
 *   regions   every (item, part, local device) gives the compact runs of
 *             its box in one source file, with a destination (shard and
 *             offset in it);
 *   dedupe    regions with the same bytes sort together and become one
 *             source region with several destinations;
 *   groups    regions of one tensor with the same strides that tile a
 *             period (inner-dimension shards of neighbouring devices) join;
 *             a group whose gaps are all <= min_gap behaves exactly like a
 *             solid extent for coalescing, so only sparse groups are
 *             expanded run by run;
 *   coalesce  (coalesce.c), then widen blocks to the file's alignment,
 *             merge the ones that then overlap, and cut them into requests
 *             of at most chunk bytes (and at the aligned middles of
 *             congruently placed shards, which are read straight into
 *             staging);
 *   copies    each request's scatter list, so requests complete in any
 *             order.
 *
 * Statistics of the other processes run the same code without copies.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	uint32_t *slots;        /* mesh index of each slot of the process */
	uint32_t (*coords)[PL_MAX_AXES]; /* and its mesh coordinates */
	uint8_t *skip;          /* read once: (item, device) boxes received */
	unsigned nslots;
	struct pl_stats st;
};

#define GROW(ctx, arr, n, cap, add) \
	((n) + (add) <= (cap) ? 0 : \
	 grow((void **)&(arr), (n) + (add), &(cap), sizeof(*(arr)), (ctx)->e))

static int grow(void **arr, size_t need, size_t *cap, size_t size, struct rl_err *e)
{
	size_t n = *cap ? *cap : 64;
	void *p;

	if (need <= *cap)
		return 0;
	/* x1.5: the largest arrays (copies) are near the memory budget. */
	while (n < need) {
		if (n > SIZE_MAX / 4)
			return rl_err_set(e, -ENOMEM, "plan: out of memory");
		n += n / 2;
	}
	p = rl_reallocarray(*arr, n, size);
	if (!p)
		return rl_err_set(e, -ENOMEM, "plan: out of memory");
	*arr = p;
	*cap = n;
	return 0;
}

void pl_opts_default(struct pl_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->min_gap = 4096;
	o->ratio = 0;
	o->chunk = 4u << 20;
	o->shard_align = 4096;
	o->congruent = 1;
	o->all_stats = 1;
	o->read_once = 0;
	o->batch_bytes = 1ull << 30;
}

void pl_item_box(const struct pl_spec *s, const struct pl_item *it,
		 uint32_t di, struct pl_box *b)
{
	pl_box_of(s, it->rule >= 0 ? &s->rules[it->rule] : NULL, it->ndim,
		  it->shape, di, b);
}

/* ---------------------------------------------------------------- */
/* Regions                                                           */
/* ---------------------------------------------------------------- */

/*
 * The runs of part pt (NULL: the plain item) of item it inside box b, and
 * where they land in the shard. Returns 1 with r set, 0 when the part is
 * outside the box, or a negative code.
 */
static int part_runs(struct ctx *x, const struct pl_item *it, const struct pl_part *pt,
		     const struct pl_box *b, struct pl_runs *r, uint64_t *within)
{
	const struct pl_tensor *t = &x->ck->tensors[pt ? pt->src : it->src];
	struct pl_box sb;
	uint64_t pos = 0, inner = 1, bits;
	unsigned nlead = pt ? pt->nlead : 0;
	int ret;

	if (nlead) {
		uint64_t c[PL_MAX_STACK], lead = pt->lead;

		for (unsigned j = nlead; j-- > 0;) {
			c[j] = lead % it->shape[j];
			lead /= it->shape[j];
		}
		for (unsigned j = 0; j < nlead; j++) {
			if (c[j] < b->start[j] || c[j] >= b->stop[j])
				return 0;
			pos = pos * (b->stop[j] - b->start[j]) + (c[j] - b->start[j]);
		}
	}
	for (unsigned d = 0; d < t->ndim; d++) {
		uint64_t sl = pt ? pt->slice[d] : 0;

		sb.start[d] = b->start[nlead + d] + sl;
		sb.stop[d] = b->stop[nlead + d] + sl;
		inner *= sb.stop[d] - sb.start[d];
	}
	ret = pl_box_runs(t->ndim, t->shape, it->bits, t->offset, &sb, r);
	if (ret)
		return ret;
	if (!r->nruns)
		return 0;
	bits = pos * inner * it->bits;
	if (bits % 8)
		return RL_E_SUBBYTE_SPLIT;
	*within = bits / 8;
	return 1;
}

static int add_regions(struct ctx *x, const struct fpart *f)
{
	const struct pl_item *it = &x->p->items[f->item];
	const struct pl_part *pt = f->part == UINT32_MAX ? NULL : &x->p->parts[f->part];
	int single = it->nparts == 0 || (it->nparts == 1 && !pt->nlead);

	for (unsigned s = 0; s < x->nslots; s++) {
		struct pl_box b;
		struct pl_runs r;
		struct region *g;
		uint64_t within = 0;
		int ret;

		if (pl_skip_bit(x->skip, x->s->ndev, f->item, x->slots[s]))
			continue;       /* another process reads it and broadcasts */
		pl_item_box_at(x->s, it, x->coords[s], &b);
		ret = part_runs(x, it, pt, &b, &r, &within);
		if (ret < 0)
			return rl_err_set(x->e, ret,
					  "tensor \"%s\": the shard of device %u does not fall on whole bytes",
					  it->name, x->s->devices[x->slots[s]]);
		if (!ret)
			continue;
		if (GROW(x, x->reg, x->nreg, x->capreg, 1) ||
		    GROW(x, x->lev, x->nlev, x->caplev, r.nlev))
			return -ENOMEM;
		g = &x->reg[x->nreg++];
		g->off = r.off;
		g->len = r.len;
		g->within = within;
		g->nruns = r.nruns;
		g->shard = (uint32_t)pl_shard_index(x->p, f->item, s);
		g->lev = (uint32_t)x->nlev;
		g->nlev = (uint8_t)r.nlev;
		g->direct = single && r.nruns == 1 &&
			    pl_congruent_ok(x->o, &x->align[x->ck->tensors[pt ? pt->src : it->src].file],
					    r.len);
		for (unsigned i = 0; i < r.nlev; i++)
			x->lev[x->nlev++] = (struct level){ r.count[i], r.stride[i] };
	}
	return 0;
}

/* Same source bytes (offset, run length, levels): compare without shard. */
static int region_key_cmp(const struct ctx *x, const struct region *a, const struct region *b)
{
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	if (a->len != b->len)
		return a->len < b->len ? -1 : 1;
	if (a->nlev != b->nlev)
		return a->nlev < b->nlev ? -1 : 1;
	for (unsigned i = 0; i < a->nlev; i++) {
		const struct level *la = &x->lev[a->lev + i], *lb = &x->lev[b->lev + i];

		if (la->count != lb->count)
			return la->count < lb->count ? -1 : 1;
		if (la->stride != lb->stride)
			return la->stride < lb->stride ? -1 : 1;
	}
	return 0;
}

static int region_cmp(const void *pa, const void *pb, void *arg)
{
	const struct region *a = pa, *b = pb;
	int c = region_key_cmp(arg, a, b);

	if (c)
		return c;
	return a->shard < b->shard ? -1 : a->shard > b->shard;
}

/* ---------------------------------------------------------------- */
/* Groups and coalescing items                                       */
/* ---------------------------------------------------------------- */

static const struct region *ureg(const struct ctx *x, size_t u)
{
	return &x->reg[x->uniq[u]];
}

/* Extent of the inner levels of a region: its runs' span. */
static uint64_t region_end(const struct ctx *x, const struct region *r)
{
	uint64_t end = r->off + r->len;

	for (unsigned i = 0; i < r->nlev; i++)
		end += (x->lev[r->lev + i].count - 1) * x->lev[r->lev + i].stride;
	return end;
}

/* Whether every gap inside region r is <= min_gap (then it is solid-equivalent). */
static int region_dense(const struct ctx *x, const struct region *r, uint64_t gap_after)
{
	uint64_t span = r->len;

	for (unsigned i = r->nlev; i-- > 0;) {
		const struct level *l = &x->lev[r->lev + i];

		if (l->stride - span > x->o->min_gap && l->count > 1)
			return 0;
		span += (l->count - 1) * l->stride;
	}
	return gap_after <= x->o->min_gap;
}

static int same_levels(const struct ctx *x, const struct region *a, const struct region *b)
{
	if (a->nlev != 1 || b->nlev != 1)
		return 0;
	return x->lev[a->lev].count == x->lev[b->lev].count &&
	       x->lev[a->lev].stride == x->lev[b->lev].stride;
}

static int push_ci(struct ctx *x, uint64_t start, uint64_t end, uint64_t needed,
		   uint32_t ref, unsigned kind, uint64_t k)
{
	if (GROW(x, x->ci, x->nci, x->capci, 1))
		return -ENOMEM;
	x->ci[x->nci++] = (struct pl_citem){ start, end, needed, ref,
					     kind | (end - start != needed ? CI_GAPS : 0), k };
	return 0;
}

static uint64_t run_off(const struct ctx *x, const struct region *r, uint64_t k)
{
	uint64_t off = r->off;

	for (unsigned i = r->nlev; i-- > 0;) {
		const struct level *l = &x->lev[r->lev + i];

		off += (k % l->count) * l->stride;
		k /= l->count;
	}
	return off;
}

static int make_groups(struct ctx *x)
{
	size_t u = 0;

	x->ngrp = 0;
	x->nci = 0;
	while (u < x->nuniq) {
		const struct region *a = ureg(x, u);
		size_t n = 1;
		uint64_t needed = a->len, start = a->off, last_end = a->off + a->len;
		uint64_t stride = a->nlev == 1 ? x->lev[a->lev].stride : 0;
		struct group *g;
		int dense;

		/* Neighbours with the same single level, inside one period. */
		while (stride && u + n < x->nuniq) {
			const struct region *b = ureg(x, u + n);

			if (!same_levels(x, a, b) || b->off < last_end ||
			    b->off - last_end > x->o->min_gap ||
			    b->off + b->len > start + stride)
				break;
			needed += b->len;
			last_end = b->off + b->len;
			n++;
		}
		if (GROW(x, x->grp, x->ngrp, x->capgrp, 1))
			return -ENOMEM;
		g = &x->grp[x->ngrp];
		g->u0 = (uint32_t)u;
		g->nu = (uint32_t)n;
		g->nruns = a->nruns;
		if (n == 1) {
			dense = region_dense(x, a, 0);
		} else {
			/* Wrap gap: from the last region's run to the first's next run. */
			dense = start + stride - last_end <= x->o->min_gap;
		}
		if (dense || g->nruns == 1) {
			uint64_t end = n == 1 ? region_end(x, a) :
					 last_end + (g->nruns - 1) * stride;

			if (push_ci(x, start, end, needed * g->nruns, (uint32_t)x->ngrp,
				    CI_GROUP, 0))
				return -ENOMEM;
		} else {
			/* Sparse: one item per run (of the whole group). */
			for (uint64_t k = 0; k < g->nruns; k++) {
				uint64_t o = run_off(x, a, k) - a->off;

				if (push_ci(x, start + o, last_end + o, needed,
					    (uint32_t)x->ngrp, CI_GROUP_RUN, k))
					return -ENOMEM;
			}
		}
		x->ngrp++;
		u += n;
	}
	return 0;
}

static int ci_cmp(const void *pa, const void *pb)
{
	const struct pl_citem *a = pa, *b = pb;

	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	if (a->end != b->end)
		return a->end < b->end ? -1 : 1;
	if (a->ref != b->ref)
		return a->ref < b->ref ? -1 : 1;
	return a->k < b->k ? -1 : a->k > b->k;
}

static void sort_ci(struct ctx *x)
{
	for (size_t i = 1; i < x->nci; i++)
		if (ci_cmp(&x->ci[i - 1], &x->ci[i]) > 0) {
			qsort(x->ci, x->nci, sizeof(*x->ci), ci_cmp);
			return;
		}
}

/*
 * Items with gaps must not overlap others (union counting relies on
 * contiguous items): in every overlapping cluster that holds one, expand
 * the gapped items into the single runs of their unique regions.
 */
static int expand_overlaps(struct ctx *x)
{
	size_t n = x->nci, i = 0, changed = 0;

	while (i < n) {
		size_t j = i + 1, gaps = x->ci[i].strided & CI_GAPS;
		uint64_t end = x->ci[i].end;

		while (j < n && x->ci[j].start < end) {
			gaps |= x->ci[j].strided & CI_GAPS;
			if (x->ci[j].end > end)
				end = x->ci[j].end;
			j++;
		}
		if (j - i > 1 && gaps) {
			for (size_t k = i; k < j; k++) {
				struct pl_citem c = x->ci[k];
				const struct group *g = &x->grp[c.ref];
				uint64_t k0 = 0, k1 = g->nruns;

				if (!(c.strided & CI_GAPS))
					continue;
				if (CI_KIND(&c) == CI_GROUP_RUN) {
					k0 = c.k;
					k1 = c.k + 1;
				}
				x->ci[k].end = x->ci[k].start; /* dropped below */
				for (uint32_t u = g->u0; u < g->u0 + g->nu; u++) {
					const struct region *r = ureg(x, u);

					for (uint64_t q = k0; q < k1; q++) {
						uint64_t o = run_off(x, r, q);

						if (push_ci(x, o, o + r->len, r->len, u,
							    CI_UNIQUE_RUN, q))
							return -ENOMEM;
					}
				}
				changed = 1;
			}
		}
		i = j;
	}
	if (!changed)
		return 0;
	/* Drop the replaced items (marked empty), then sort again. */
	for (i = 0, n = 0; i < x->nci; i++)
		if (x->ci[i].end > x->ci[i].start)
			x->ci[n++] = x->ci[i];
	x->nci = n;
	qsort(x->ci, x->nci, sizeof(*x->ci), ci_cmp);
	return 0;
}

/* ---------------------------------------------------------------- */
/* Alignment, chunking and copies                                    */
/* ---------------------------------------------------------------- */

static int push_copy(struct ctx *x, uint32_t req, const struct region *r,
		     uint64_t src, uint64_t len, uint64_t count, uint64_t stride,
		     uint64_t dst_in_shard)
{
	const struct pl_shard *sh = &x->p->shards[r->shard];

	if (GROW(x, x->sc, x->nsc, x->capsc, 1))
		return -ENOMEM;
	x->sc[x->nsc++] = (struct scopy){ req, {
		.src = (uint32_t)src, .len = (uint32_t)len, .count = (uint32_t)count,
		.src_stride = (uint32_t)stride, .dst = sh->offset + dst_in_shard,
		.dev = sh->dev, .shard = r->shard } };
	return 0;
}

/* Index of the request holding offset off among reads [q0, q1). Runs are
 * emitted mostly in offset order: try the last answer and its successor. */
static size_t find_req(struct ctx *x, size_t q0, size_t q1, uint64_t off)
{
	size_t h = x->qhint;

	if (h >= q0 && h < q1 && x->reads[h].off <= off) {
		if (off < x->reads[h].off + x->reads[h].len)
			return h;
		if (h + 1 < q1 && off < x->reads[h + 1].off + x->reads[h + 1].len)
			return x->qhint = h + 1;
	}
	while (q1 - q0 > 1) {
		size_t mid = q0 + (q1 - q0) / 2;

		if (x->reads[mid].off <= off)
			q0 = mid;
		else
			q1 = mid;
	}
	return x->qhint = q0;
}

/* Copies for runs [k0, k1) of region r into requests [q0, q1). */
static int emit_runs(struct ctx *x, const struct region *r, uint64_t k0, uint64_t k1,
		     size_t q0, size_t q1)
{
	uint64_t ci = r->nlev ? x->lev[r->lev + r->nlev - 1].count : 1;
	uint64_t si = r->nlev ? x->lev[r->lev + r->nlev - 1].stride : 0;
	uint64_t k = k0, len = r->len;
	size_t q = find_req(x, q0, q1, run_off(x, r, k0));

	while (k < k1) {
		uint64_t o = run_off(x, r, k), row_end = (k / ci + 1) * ci, qend, m = 1;

		while (x->reads[q].off + x->reads[q].len <= o)
			q++;
		qend = x->reads[q].off + x->reads[q].len;
		if (o + len <= qend) {
			if (row_end > k1)
				row_end = k1;
			if (row_end - k > 1) {
				m = (qend - o - len) / si + 1;
				if (m > row_end - k)
					m = row_end - k;
			}
			if (push_copy(x, (uint32_t)q, r, o - x->reads[q].off, len, m,
				      m > 1 ? si : len, r->within + k * len))
				return -ENOMEM;
			k += m;
			continue;
		}
		/* The run straddles requests: one piece in each. */
		for (uint64_t pos = o; pos < o + len;) {
			uint64_t piece;

			while (x->reads[q].off + x->reads[q].len <= pos)
				q++;
			qend = x->reads[q].off + x->reads[q].len;
			piece = (o + len < qend ? o + len : qend) - pos;
			if (push_copy(x, (uint32_t)q, r, pos - x->reads[q].off, piece, 1,
				      piece, r->within + k * len + (pos - o)))
				return -ENOMEM;
			pos += piece;
		}
		k++;
	}
	return 0;
}

/* Every destination of unique region u, runs [k0, k1). */
static int emit_unique(struct ctx *x, uint32_t u, uint64_t k0, uint64_t k1,
		       size_t q0, size_t q1)
{
	for (uint32_t d = x->uniq[u]; d < x->uniq[u + 1]; d++) {
		int ret = emit_runs(x, &x->reg[d], k0, k1, q0, q1);

		if (ret)
			return ret;
	}
	return 0;
}

static int emit_item(struct ctx *x, const struct pl_citem *c, size_t q0, size_t q1)
{
	const struct group *g;
	int ret = 0;

	if (CI_KIND(c) == CI_UNIQUE_RUN)
		return emit_unique(x, c->ref, c->k, c->k + 1, q0, q1);
	g = &x->grp[c->ref];
	for (uint32_t u = g->u0; u < g->u0 + g->nu && !ret; u++) {
		if (CI_KIND(c) == CI_GROUP_RUN)
			ret = emit_unique(x, u, c->k, c->k + 1, q0, q1);
		else
			ret = emit_unique(x, u, 0, g->nruns, q0, q1);
	}
	return ret;
}

static int push_read(struct ctx *x, uint32_t file, uint64_t off, uint64_t len,
		     uint64_t min_len, uint32_t flags)
{
	uint64_t size = x->ck->files[file].size;

	x->st.requests++;
	x->st.read_bytes += off < size ? RL_MIN(len, size - off) : 0;
	if (!x->full)
		return 0;
	if (GROW(x, x->reads, x->nreads, x->capreads, 1))
		return -ENOMEM;
	x->reads[x->nreads++] = (struct rl_read){ .off = off, .len = (uint32_t)len,
		.min_len = (uint32_t)min_len, .file = file, .flags = flags };
	if (len > x->p->max_read)
		x->p->max_read = len;
	return 0;
}

/* Direct spans of a block's members: aligned middles of congruent shards. */
static int collect_cuts(struct ctx *x, const struct ablock *ab, uint64_t A)
{
	x->ncut = 0;
	for (size_t b = ab->b0; b < ab->b0 + ab->nb; b++) {
		const struct pl_block *bl = &x->blk[b];

		for (size_t i = bl->first; i < bl->first + bl->n; i++) {
			const struct pl_citem *c = &x->ci[i];
			const struct group *g;
			const struct region *r;
			uint64_t lo, hi;

			if (CI_KIND(c) != CI_GROUP)
				continue;
			g = &x->grp[c->ref];
			r = ureg(x, g->u0);
			if (g->nu != 1 || !r->direct || x->uniq[g->u0 + 1] - x->uniq[g->u0] != 1)
				continue;
			lo = rl_align_up(c->start, A);
			hi = rl_align_down(c->end, A);
			if (hi <= lo || hi - lo < PL_DIRECT_MIN)
				continue;
			if (GROW(x, x->cut, x->ncut, x->capcut, 2))
				return -ENOMEM;
			x->cut[x->ncut++] = lo;
			x->cut[x->ncut++] = hi;
		}
	}
	return 0;
}

/* Requests and copies of aligned block ab of file f. */
static int block_requests(struct ctx *x, uint32_t f, const struct ablock *ab)
{
	const struct pl_align *al = &x->align[f];
	uint64_t A = al->offset_align > al->mem_align ? al->offset_align : al->mem_align;
	uint64_t chunk = rl_align_down(RL_MIN(x->o->chunk, (uint64_t)UINT32_MAX), al->offset_align);
	uint64_t pos = ab->start;
	size_t q0 = x->nreads, j = 0;
	int ret;

	if (chunk < al->offset_align)
		chunk = al->offset_align;
	if ((ret = collect_cuts(x, ab, A)))
		return ret;
	while (pos < ab->end) {
		uint64_t end = RL_MIN(pos + chunk, ab->end);
		uint32_t flags = 0;

		while (j < x->ncut && x->cut[j + 1] <= pos)
			j += 2;
		if (j < x->ncut) {
			if (pos < x->cut[j]) {
				end = RL_MIN(end, x->cut[j]);
			} else {
				end = RL_MIN(end, x->cut[j + 1]);
				flags = RL_READ_DIRECT;
			}
		}
		if ((ret = push_read(x, f, pos, end - pos, RL_MIN(end, ab->last) - pos, flags)))
			return ret;
		pos = end;
	}
	if (!x->full)
		return 0;
	/* Scatter lists: generated item by item, then grouped by request. */
	x->nsc = 0;
	for (size_t b = ab->b0; b < ab->b0 + ab->nb; b++)
		for (size_t i = x->blk[b].first; i < x->blk[b].first + x->blk[b].n; i++)
			if ((ret = emit_item(x, &x->ci[i], q0, x->nreads)))
				return ret;
	if (GROW(x, x->copies, x->ncopies, x->capcopies, x->nsc) ||
	    GROW(x, x->qcount, 0, x->capqcount, x->nreads - q0 + 1))
		return -ENOMEM;
	/* Counting sort by request: each read's copies become contiguous. */
	memset(x->qcount, 0, (x->nreads - q0 + 1) * sizeof(*x->qcount));
	for (size_t i = 0; i < x->nsc; i++)
		x->qcount[x->sc[i].req - q0 + 1]++;
	for (size_t q = q0; q < x->nreads; q++) {
		struct rl_read *rd = &x->reads[q];
		size_t k = q - q0;

		rd->ncopies = (uint32_t)x->qcount[k + 1];
		x->qcount[k + 1] += x->qcount[k];
		rd->first_copy = x->ncopies + x->qcount[k];
	}
	for (size_t i = 0; i < x->nsc; i++)
		x->copies[x->ncopies + x->qcount[x->sc[i].req - q0]++] = x->sc[i].c;
	x->ncopies += x->nsc;
	/* A direct read has exactly its one copy, covering it whole. */
	for (size_t q = q0; q < x->nreads; q++) {
		struct rl_read *rd = &x->reads[q];
		const struct rl_copy *c = &x->copies[rd->first_copy];

		if ((rd->flags & RL_READ_DIRECT) &&
		    (rd->ncopies != 1 || c->src || c->count != 1 || c->len != rd->len ||
		     rd->min_len != rd->len || c->dst % A))
			rd->flags &= ~RL_READ_DIRECT;
	}
	return 0;
}

/* ---------------------------------------------------------------- */
/* One file, one process                                             */
/* ---------------------------------------------------------------- */

static int plan_file(struct ctx *x, uint32_t f)
{
	const struct pl_align *al = &x->align[f];
	size_t nb;
	int ret;

	x->nreg = x->nlev = 0;
	for (size_t i = x->file_first[f]; i < x->file_first[f + 1]; i++)
		if ((ret = add_regions(x, &x->fp[i])))
			return ret;
	if (!x->nreg)
		return 0;   /* never opened */
	for (size_t i = 1; i < x->nreg; i++)
		if (region_cmp(&x->reg[i - 1], &x->reg[i], x) > 0) {
			qsort_r(x->reg, x->nreg, sizeof(*x->reg), region_cmp, x);
			break;
		}
	/* Unique regions: runs of equal keys. */
	if (GROW(x, x->uniq, 0, x->capuniq, x->nreg + 1))
		return -ENOMEM;
	{
		size_t n = 0;

		for (size_t i = 0; i < x->nreg; i++)
			if (!i || region_key_cmp(x, &x->reg[i - 1], &x->reg[i]))
				x->uniq[n++] = (uint32_t)i;
		x->uniq[n] = (uint32_t)x->nreg;
		x->nuniq = n;
	}
	if ((ret = make_groups(x)))
		return ret;
	sort_ci(x);
	if ((ret = expand_overlaps(x)))
		return ret;
	if (GROW(x, x->blk, 0, x->capblk, x->nci) || GROW(x, x->ab, 0, x->capab, x->nci))
		return -ENOMEM;
	nb = pl_coalesce(x->ci, x->nci, x->o->min_gap, x->ratiop, x->blk);
	/* Widen to the alignment; merge blocks that then overlap. */
	x->nab = 0;
	for (size_t b = 0; b < nb; b++) {
		uint64_t s = rl_align_down(x->blk[b].start, al->offset_align);
		uint64_t e = rl_align_up(x->blk[b].end, al->offset_align);

		x->st.needed_bytes += x->blk[b].needed;
		if (x->nab && s < x->ab[x->nab - 1].end) {
			struct ablock *a = &x->ab[x->nab - 1];

			a->end = RL_MAX(a->end, e);
			a->last = RL_MAX(a->last, x->blk[b].end);
			a->nb++;
			continue;
		}
		x->ab[x->nab++] = (struct ablock){ s, e, x->blk[b].end, b, 1 };
	}
	x->st.blocks += x->nab;
	x->st.files_opened++;
	for (size_t a = 0; a < x->nab; a++)
		if ((ret = block_requests(x, f, &x->ab[a])))
			return ret;
	return 0;
}

static int plan_process(struct ctx *x, unsigned proc, int full)
{
	int ret;

	x->full = full;
	memset(&x->st, 0, sizeof(x->st));
	x->nslots = 0;
	for (uint32_t d = 0; d < x->s->ndev; d++)
		if (x->s->proc[d] == proc) {
			pl_mesh_coords(x->s, d, x->coords[x->nslots]);
			x->slots[x->nslots++] = d;
		}
	x->st.devices = x->nslots;
	if (!x->nslots)
		return 0;
	for (uint32_t f = 0; f < x->ck->nfiles; f++)
		if ((ret = plan_file(x, f)))
			return ret;
	return 0;
}

/* ---------------------------------------------------------------- */
/* Build                                                             */
/* ---------------------------------------------------------------- */

static struct pl_spec *spec_copy(const struct pl_spec *s)
{
	struct pl_spec *c = rl_calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ndim = s->ndim;
	memcpy(c->shape, s->shape, sizeof(s->shape));
	c->ndev = s->ndev;
	c->nprocs = s->nprocs;
	c->devices = rl_mallocarray(s->ndev, sizeof(uint32_t));
	c->proc = rl_mallocarray(s->ndev, sizeof(uint32_t));
	c->rules = rl_calloc(s->nrules + 1, sizeof(*c->rules));
	if (!c->devices || !c->proc || !c->rules)
		goto fail;
	memcpy(c->devices, s->devices, s->ndev * sizeof(uint32_t));
	memcpy(c->proc, s->proc, s->ndev * sizeof(uint32_t));
	/* Boxes need only the resolved dims; regexes stay with the spec. */
	for (size_t i = 0; i < s->nrules; i++) {
		c->rules[i].ndims = s->rules[i].ndims;
		memcpy(c->rules[i].dims, s->rules[i].dims, sizeof(s->rules[i].dims));
		if (regcomp(&c->rules[i].re, "^$", REG_EXTENDED | REG_NOSUB))
			goto fail;
		c->nrules = i + 1;
	}
	for (unsigned i = 0; i < s->ndim; i++)
		if (!(c->axes[i] = rl_strdup(s->axes[i])))
			goto fail;
	return c;
fail:
	pl_spec_free(c);
	return NULL;
}

void pl_plan_free(struct pl_plan *p)
{
	if (!p)
		return;
	pl_spec_free(p->spec);
	pl_items_free(p->items, p->nitems, p->parts);
	rl_free(p->slot_dev);
	rl_free(p->dev_ids);
	rl_free(p->staging);
	rl_free(p->shards);
	for (size_t i = 0; p->paths && i < p->nfiles; i++)
		rl_free(p->paths[i]);
	rl_free(p->paths);
	rl_free(p->file_sizes);
	rl_free(p->reads);
	rl_free(p->copies);
	rl_free(p->stats);
	rl_free(p->have_stats);
	rl_free(p->bcasts);
	rl_free(p->receivers);
	rl_free(p->received);
	rl_free(p);
}

static int check_opts(const struct pl_ckpt *ck, const struct pl_spec *s,
		      const struct pl_align *align, const struct pl_opts *o,
		      struct rl_err *e)
{
	if (o->process < 0 || (uint32_t)o->process >= s->nprocs)
		return rl_err_set(e, RL_E_INVALID_ARG,
				  "plan: process %d not in the mesh (processes 0..%u)",
				  o->process, s->nprocs - 1);
	if (o->ratio != 0 && !(o->ratio >= 1.0 && o->ratio <= 1e9))
		return rl_err_set(e, RL_E_INVALID_ARG,
				  "plan: ratio %g must be >= 1 (or 0: automatic)", o->ratio);
	if (!o->chunk)
		return rl_err_set(e, RL_E_INVALID_ARG, "plan: chunk must be positive");
	if (o->shard_align < 64 || (o->shard_align & (o->shard_align - 1)) ||
	    o->shard_align > (1u << 30))
		return rl_err_set(e, RL_E_INVALID_ARG,
				  "plan: shard alignment %llu must be a power of two >= 64",
				  (unsigned long long)o->shard_align);
	for (size_t f = 0; f < ck->nfiles; f++) {
		uint32_t a = align[f].offset_align, m = align[f].mem_align;

		if (!a || (a & (a - 1)) || a > (1u << 20) || !m || (m & (m - 1)) ||
		    m > (1u << 20))
			return rl_err_set(e, RL_E_INVALID_ARG,
					  "plan: file %s: alignment %u/%u is not a power of two",
					  ck->files[f].path, a, m);
	}
	return 0;
}

/* Buckets every (item, part) by its source file, item order kept. */
static int bucket_parts(struct ctx *x)
{
	const struct pl_plan *p = x->p;
	size_t n = 0, *pos;

	for (size_t i = 0; i < p->nitems; i++)
		n += p->items[i].nparts ? p->items[i].nparts : 1;
	x->fp = rl_mallocarray(n + 1, sizeof(*x->fp));
	x->file_first = rl_calloc(x->ck->nfiles + 2, sizeof(size_t));
	pos = rl_calloc(x->ck->nfiles + 1, sizeof(size_t));
	if (!x->fp || !x->file_first || !pos) {
		rl_free(pos);
		return rl_err_set(x->e, -ENOMEM, "plan: out of memory");
	}
	for (int pass = 0; pass < 2; pass++)
		for (size_t i = 0; i < p->nitems; i++) {
			const struct pl_item *it = &p->items[i];
			uint32_t np = it->nparts ? it->nparts : 1;

			for (uint32_t k = 0; k < np; k++) {
				uint32_t part = it->nparts ? it->first_part + k : UINT32_MAX;
				uint32_t src = it->nparts ? p->parts[part].src : it->src;
				uint32_t f = x->ck->tensors[src].file;

				if (!pass)
					x->file_first[f + 1]++;
				else
					x->fp[pos[f]++] = (struct fpart){ (uint32_t)i, part };
			}
			if (pass || i + 1 < p->nitems)
				continue;
			for (size_t f = 0; f < x->ck->nfiles; f++)
				x->file_first[f + 1] += x->file_first[f];
			memcpy(pos, x->file_first, x->ck->nfiles * sizeof(size_t));
		}
	rl_free(pos);
	return 0;
}

static void ctx_free(struct ctx *x)
{
	rl_free(x->fp);
	rl_free(x->file_first);
	rl_free(x->reg);
	rl_free(x->lev);
	rl_free(x->uniq);
	rl_free(x->grp);
	rl_free(x->ci);
	rl_free(x->blk);
	rl_free(x->ab);
	rl_free(x->cut);
	rl_free(x->reads);
	rl_free(x->copies);
	rl_free(x->sc);
	rl_free(x->qcount);
	rl_free(x->slots);
	rl_free(x->coords);
	rl_free(x->skip);
}

static void add_stats(struct pl_stats *t, const struct pl_stats *s)
{
	t->devices += s->devices;
	t->needed_bytes += s->needed_bytes;
	t->read_bytes += s->read_bytes;
	t->blocks += s->blocks;
	t->requests += s->requests;
	t->files_opened += s->files_opened;
}

int pl_plan_build(const struct pl_ckpt *ck, const struct pl_spec *spec,
		  const struct pl_align *align, const struct pl_opts *o,
		  struct pl_plan **out, struct rl_err *e)
{
	struct pl_plan *p;
	struct ctx x;
	int ret;

	*out = NULL;
	if ((ret = check_opts(ck, spec, align, o, e)))
		return ret;
	p = rl_calloc(1, sizeof(*p));
	memset(&x, 0, sizeof(x));
	if (!p)
		return rl_err_set(e, -ENOMEM, "plan: out of memory");
	x.ck = ck;
	x.align = align;
	x.o = o;
	x.p = p;
	x.e = e;
	p->process = o->process;
	p->all_stats = o->all_stats;
	ret = pl_items_build(ck, spec, &p->items, &p->nitems, &p->parts, &p->nparts, e);
	if (ret)
		goto fail;
	ret = -ENOMEM;
	p->spec = spec_copy(spec);
	if (!p->spec)
		goto oom;
	x.s = p->spec;
	if (o->ratio != 0) {
		x.ratio.num = (uint64_t)(o->ratio * 1e6 + 0.5);
		x.ratio.den = 1000000;
		x.ratiop = &x.ratio;
	}
	/* Local slots, devices, shards. */
	x.slots = rl_mallocarray(spec->ndev, sizeof(uint32_t));
	x.coords = rl_mallocarray(spec->ndev, sizeof(*x.coords));
	p->slot_dev = rl_mallocarray(spec->ndev, sizeof(uint32_t));
	p->dev_ids = rl_mallocarray(spec->ndev, sizeof(uint32_t));
	if (!x.slots || !x.coords || !p->slot_dev || !p->dev_ids)
		goto oom;
	for (uint32_t d = 0; d < spec->ndev; d++)
		if (spec->proc[d] == (uint32_t)o->process) {
			p->slot_dev[p->nslots] = d;
			p->dev_ids[p->nslots++] = spec->devices[d];
		}
	if (p->nitems && p->nslots > SIZE_MAX / sizeof(struct pl_shard) / p->nitems)
		goto oom;
	p->nshards = p->nslots * p->nitems;
	if (p->nshards > UINT32_MAX) {
		ret = rl_err_set(e, RL_E_TOO_LARGE, "plan: %zu shards (at most %u)",
				 p->nshards, UINT32_MAX);
		goto fail;
	}
	p->shards = rl_mallocarray(p->nshards + 1, sizeof(*p->shards));
	p->staging = rl_calloc(p->nslots + 1, sizeof(uint64_t));
	p->stats = rl_calloc(spec->nprocs, sizeof(*p->stats));
	p->have_stats = rl_calloc(spec->nprocs, 1);
	p->nfiles = ck->nfiles;
	p->paths = rl_calloc(ck->nfiles + 1, sizeof(char *));
	p->file_sizes = rl_mallocarray(ck->nfiles + 1, sizeof(uint64_t));
	if (!p->shards || !p->staging || !p->stats || !p->have_stats || !p->paths ||
	    !p->file_sizes)
		goto oom;
	for (size_t f = 0; f < ck->nfiles; f++) {
		p->file_sizes[f] = ck->files[f].size;
		if (!(p->paths[f] = rl_strdup(ck->files[f].path)))
			goto oom;
	}
	if ((ret = pl_layout(p, ck, align, o, e)))
		goto fail;
	if ((ret = bucket_parts(&x)))
		goto fail;
	if (o->read_once && (ret = pl_read_once(p, ck, o, &x.skip, e)))
		goto fail;
	/* Every non-empty shard takes at least one copy: reserve that and a
	 * little, so that the largest array rarely grows (and never doubles). */
	{
		size_t filled = 0;

		for (size_t i = 0; i < p->nshards; i++)
			filled += p->shards[i].nbytes != 0;
		if (GROW(&x, x.copies, 0, x.capcopies, filled + filled / 8 + 64)) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	if ((ret = plan_process(&x, (unsigned)o->process, 1)))
		goto fail_ctx;
	p->stats[o->process] = x.st;
	p->have_stats[o->process] = 1;
	p->reads = x.reads;
	p->nreads = x.nreads;
	p->copies = x.copies;
	p->ncopies = x.ncopies;
	x.reads = NULL;
	x.copies = NULL;
	if (o->all_stats) {
		for (unsigned q = 0; q < spec->nprocs; q++) {
			if (q == (unsigned)o->process)
				continue;
			if ((ret = plan_process(&x, q, 0)))
				goto fail_ctx;
			p->stats[q] = x.st;
			p->have_stats[q] = 1;
		}
		for (unsigned q = 0; q < spec->nprocs; q++)
			add_stats(&p->total, &p->stats[q]);
	}
	ctx_free(&x);
	*out = p;
	return 0;
oom:
	ret = rl_err_set(e, -ENOMEM, "plan: out of memory");
fail_ctx:
	if (ret == -ENOMEM && !e->msg[0])
		rl_err_set(e, ret, "plan: out of memory");
fail:
	ctx_free(&x);
	pl_plan_free(p);
	return ret;
}

void pl_plan_exec(const struct pl_plan *p, struct pl_exec *out)
{
	out->nfiles = p->nfiles;
	out->paths = (const char *const *)p->paths;
	out->file_sizes = p->file_sizes;
	out->nreads = p->nreads;
	out->reads = p->reads;
	out->ncopies = p->ncopies;
	out->copies = p->copies;
	out->ndevs = p->nslots;
	out->dev_ids = p->dev_ids;
	out->staging_bytes = p->staging;
	out->nshards = p->nshards;
	out->shards = p->shards;
	out->max_read = p->max_read;
	out->needed_bytes = p->stats[p->process].needed_bytes;
	out->received = p->received;
}

unsigned pl_plan_nprocs(const struct pl_plan *p)
{
	return p->spec->nprocs;
}

int pl_plan_stats(const struct pl_plan *p, int proc, struct pl_stats *out)
{
	if (proc >= (int)p->spec->nprocs)
		return -EINVAL;
	if (proc < 0) {
		if (!p->all_stats && p->spec->nprocs > 1)
			return RL_E_STATE;
		*out = p->all_stats ? p->total : p->stats[p->process];
		return 0;
	}
	if (!p->have_stats[proc])
		return RL_E_STATE;
	*out = p->stats[proc];
	return 0;
}

size_t pl_plan_ntensors(const struct pl_plan *p)
{
	return p->nitems;
}

void pl_plan_tensor(const struct pl_plan *p, size_t it, const char **name,
		    int *dtype, unsigned *ndim, const uint64_t **shape)
{
	*name = p->items[it].name;
	*dtype = p->items[it].dtype;
	*ndim = p->items[it].ndim;
	*shape = p->items[it].shape;
}

void pl_plan_shard_box(const struct pl_plan *p, size_t i, uint64_t *start,
		       uint64_t *stop)
{
	const struct pl_shard *sh = &p->shards[i];
	const struct pl_item *it = &p->items[sh->tensor];
	struct pl_box b;

	pl_item_box(p->spec, it, p->slot_dev[sh->dev], &b);
	for (unsigned d = 0; d < it->ndim; d++) {
		start[d] = b.start[d];
		stop[d] = b.stop[d];
	}
}

size_t pl_plan_nbcasts(const struct pl_plan *p)
{
	return p->nbcasts;
}

void pl_plan_bcast(const struct pl_plan *p, size_t i, struct pl_bcast_info *out)
{
	const struct pl_bcast *b = &p->bcasts[i];

	out->tensor = b->item;
	out->root = b->root;
	out->batch = b->batch;
	out->nbytes = b->nbytes;
	out->src_offset = b->src_offset;
	out->nreceivers = b->nrecv;
	out->receivers = p->receivers + b->first_recv;
	out->shard = b->shard;
}
