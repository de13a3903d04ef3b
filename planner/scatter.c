/*
 * scatter.c - the last steps of a plan: aligned blocks are cut into read
 * requests of at most chunk bytes (and at the aligned middles of
 * congruently placed shards, which are read straight into staging), and
 * each request gets its scatter list: for every destination of every
 * region inside it, copies of whole runs (strided where they repeat) or of
 * the piece of a run the request holds, so requests complete in any order.
 */
#include <errno.h>
#include <string.h>

#include "plan_ctx.h"

/* dst_in_shard counts the file's bytes (runs from within); a converted
 * region's staging holds its elements in osize bytes each. */
static int push_copy(struct ctx *x, uint32_t req, const struct region *r,
		     uint64_t src, uint64_t len, uint64_t count, uint64_t stride,
		     uint64_t dst_in_shard)
{
	if (r->osize != r->isize)
		dst_in_shard = dst_in_shard / r->isize * r->osize;
	if (GROW(x, x->req_copies, x->nreq_copies, x->capreq_copies, 1))
		return -ENOMEM;
	x->req_copies[x->nreq_copies++] = (struct req_copy){ req, {
		.src = (uint32_t)src, .len = (uint32_t)len, .count = (uint32_t)count,
		.src_stride = (uint32_t)stride, .dst = dst_in_shard, /* + shard offset later */
		.dev = r->slot,
		.shard = r->shard } };
	return 0;
}

/* Index of the request holding offset off among reads [q0, q1). Runs are
 * emitted mostly in offset order: try the last answer and its successor. */
static size_t find_req(struct ctx *x, size_t q0, size_t q1, uint64_t off)
{
	size_t h = x->last_req;

	if (h >= q0 && h < q1 && x->reads[h].off <= off) {
		if (off < x->reads[h].off + x->reads[h].len)
			return h;
		if (h + 1 < q1 && off < x->reads[h + 1].off + x->reads[h + 1].len)
			return x->last_req = h + 1;
	}
	while (q1 - q0 > 1) {
		size_t mid = q0 + (q1 - q0) / 2;

		if (x->reads[mid].off <= off)
			q0 = mid;
		else
			q1 = mid;
	}
	return x->last_req = q0;
}

/* Copies for runs [k0, k1) of region r into requests [q0, q1). */
static int emit_runs(struct ctx *x, const struct region *r, uint64_t k0, uint64_t k1,
		     size_t q0, size_t q1)
{
	uint64_t inner_count = r->nlev ? x->levels[r->lev + r->nlev - 1].count : 1;
	uint64_t inner_stride = r->nlev ? x->levels[r->lev + r->nlev - 1].stride : 0;
	uint64_t k = k0, len = r->len;
	size_t q = find_req(x, q0, q1, run_off(x, r, k0));

	/* Every run of a region of at most one level inside one request: one
	 * copy (what the loop below gives, without its divisions). */
	if (r->nlev <= 1 && k0 == 0 && k1 == r->nruns &&
	    r->off + len + (r->nruns - 1) * inner_stride <= x->reads[q].off + x->reads[q].len)
		return push_copy(x, (uint32_t)q, r, r->off - x->reads[q].off, len, r->nruns,
				 r->nruns > 1 ? inner_stride : len, r->within);

	while (k < k1) {
		uint64_t o = run_off(x, r, k), qend, m = 1;
		uint64_t row_end = (k / inner_count + 1) * inner_count;

		while (x->reads[q].off + x->reads[q].len <= o)
			q++;
		qend = x->reads[q].off + x->reads[q].len;
		if (o + len <= qend) {
			if (row_end > k1)
				row_end = k1;
			if (row_end - k > 1) {
				m = (qend - o - len) / inner_stride + 1;
				if (m > row_end - k)
					m = row_end - k;
			}
			if (push_copy(x, (uint32_t)q, r, o - x->reads[q].off, len, m,
				      m > 1 ? inner_stride : len, r->within + k * len))
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
	for (uint32_t d = x->unique[u]; d < x->unique[u + 1]; d++) {
		int ret = emit_runs(x, &x->regions[d], k0, k1, q0, q1);

		if (ret)
			return ret;
	}
	return 0;
}

/* Copies of runs [k0, k1) of pending entry e: a group (e < ngroups, every
 * unique region of it) or unique region e - ngroups. */
static int emit_range(struct ctx *x, size_t e, uint64_t k0, uint64_t k1, size_t q0, size_t q1)
{
	const struct group *g;
	int ret = 0;

	if (e >= x->ngroups)
		return emit_unique(x, (uint32_t)(e - x->ngroups), k0, k1, q0, q1);
	g = &x->groups[e];
	for (uint32_t u = g->u0; u < g->u0 + g->nu && !ret; u++)
		ret = emit_unique(x, u, k0, k1, q0, q1);
	return ret;
}

/*
 * Sparse items (one run each) extend their entry's pending range when they
 * continue it; the runs of a range become one strided copy per request and
 * destination (emit_runs), where one copy per run would cost 32 bytes per
 * short row. A block's items of one entry are consecutive runs (items are
 * sorted by offset), except where expand_overlaps() took some out.
 */
static int emit_item(struct ctx *x, const struct pl_citem *c, size_t q0, size_t q1)
{
	struct run_range *p;
	size_t e;
	int ret;

	if (ITEM_KIND(c) == ITEM_GROUP)
		return emit_range(x, c->ref, 0, x->groups[c->ref].nruns, q0, q1);
	e = ITEM_KIND(c) == ITEM_GROUP_RUN ? c->ref : x->ngroups + c->ref;
	p = &x->pend[e];
	if (p->k1 && p->k1 == c->k) {
		p->k1++;
		return 0;
	}
	if (p->k1) {
		if ((ret = emit_range(x, e, p->k0, p->k1, q0, q1)))
			return ret;
	} else {
		x->touched[x->ntouched++] = (uint32_t)e;
	}
	*p = (struct run_range){ c->k, c->k + 1 };
	return 0;
}

/* Emits and clears the pending ranges of a block's items. */
static int flush_ranges(struct ctx *x, size_t q0, size_t q1)
{
	int ret = 0;

	for (size_t i = 0; i < x->ntouched; i++) {
		struct run_range *p = &x->pend[x->touched[i]];

		if (!ret)
			ret = emit_range(x, x->touched[i], p->k0, p->k1, q0, q1);
		p->k1 = 0;
	}
	x->ntouched = 0;
	return ret;
}

/* Pending entries for every group and unique region of the file, all
 * inactive (a flush leaves them so; new ones are cleared here), and room
 * to list each once; none where items [i0, i1) are all whole groups. */
static int pend_room(struct ctx *x, size_t i0, size_t i1)
{
	size_t n = x->ngroups + x->nunique, i = i0;

	x->ntouched = 0;
	while (i < i1 && ITEM_KIND(&x->citems[i]) == ITEM_GROUP)
		i++;
	if (i == i1)
		return 0;
	if (GROW(x, x->pend, 0, x->cappend, n) ||
	    GROW(x, x->touched, 0, x->captouched, CM_MIN(n, i1 - i0)))
		return -ENOMEM;
	if (x->npend < n) {
		memset(x->pend + x->npend, 0, (n - x->npend) * sizeof(*x->pend));
		x->npend = n;
	}
	return 0;
}

static int push_read(struct ctx *x, uint32_t file, uint64_t off, uint64_t len,
		     uint64_t min_len, uint32_t flags)
{
	uint64_t size = x->ck->files[file].size;

	x->stats.requests++;
	x->stats.read_bytes += off < size ? CM_MIN(len, size - off) : 0;
	if (!x->with_copies)
		return 0;
	if (GROW(x, x->reads, x->nreads, x->capreads, 1))
		return -ENOMEM;
	x->reads[x->nreads++] = (struct cm_read){ .off = off, .len = (uint32_t)len,
		.min_len = (uint32_t)min_len, .file = file, .flags = flags };
	if (len > x->plan->max_read)
		x->plan->max_read = len;
	return 0;
}

/* The region a whole-group item reads straight into staging, or NULL:
 * one run of one destination, never converted (plan.c's direct). */
static const struct region *direct_region(const struct ctx *x, const struct pl_citem *c)
{
	const struct group *g;
	const struct region *r;

	if (ITEM_KIND(c) != ITEM_GROUP)
		return NULL;
	g = &x->groups[c->ref];
	r = unique_region(x, g->u0);
	if (g->nu != 1 || !r->direct || x->unique[g->u0 + 1] - x->unique[g->u0] != 1)
		return NULL;
	return r;
}

static int push_cut(struct ctx *x, uint64_t start, uint64_t end, uint64_t A)
{
	uint64_t lo = cm_align_up(start, A), hi = cm_align_down(end, A);

	if (hi <= lo || hi - lo < PL_DIRECT_MIN)
		return 0;
	if (GROW(x, x->direct_cuts, x->ndirect_cuts, x->capdirect_cuts, 2))
		return -ENOMEM;
	x->direct_cuts[x->ndirect_cuts++] = lo;
	x->direct_cuts[x->ndirect_cuts++] = hi;
	return 0;
}

/* Whether direct region r continues chain p: the next bytes of the file,
 * the next item of the same device, so that the layout places it right
 * after p when p is congruent (a short one where pl_soft_ok), and as long
 * or as short (a chain mixing both would lose a long one's direct read
 * to a short head that the layout packed). */
static int chain_next(const struct ctx *x, uint32_t f, const struct region *p,
		      const struct region *r)
{
	const struct pl_align *al = &x->align[f];
	int is_long = pl_congruent_ok(x->opts, al, r->len);

	return r->off == p->off + p->len && r->slot == p->slot && r->shard == p->shard + 1 &&
	       is_long == pl_congruent_ok(x->opts, al, p->len) &&
	       (is_long || pl_soft_ok(x->opts, r->off, r->len));
}

/*
 * Direct spans of a block's members: the aligned middles of chains of
 * direct items (one long shard, or several placed one after the other in
 * staging as in the file; pl_place_copies() keeps a read direct only
 * where its copies tile it, as a chain of short ones packed apart fails).
 */
static int collect_cuts(struct ctx *x, uint32_t f, const struct aligned_block *ab,
			uint64_t A)
{
	const struct region *prev = NULL;
	uint64_t start = 0;
	int ret;

	x->ndirect_cuts = 0;
	for (size_t b = ab->b0; b < ab->b0 + ab->nb; b++) {
		const struct pl_block *bl = &x->blocks[b];

		for (size_t i = bl->first; i < bl->first + bl->n; i++) {
			const struct region *r = direct_region(x, &x->citems[i]);

			if (prev && r && chain_next(x, f, prev, r)) {
				prev = r;
				continue;
			}
			if (prev && (ret = push_cut(x, start, prev->off + prev->len, A)))
				return ret;
			prev = r;
			start = r ? r->off : 0;
		}
	}
	return prev ? push_cut(x, start, prev->off + prev->len, A) : 0;
}

/* Requests and copies of aligned block ab of file f. */
int pl_block_requests(struct ctx *x, uint32_t f, const struct aligned_block *ab)
{
	const struct pl_align *al = &x->align[f];
	uint64_t A = al->offset_align > al->mem_align ? al->offset_align : al->mem_align;
	uint64_t chunk = cm_align_down(CM_MIN(x->opts->chunk, (uint64_t)UINT32_MAX), al->offset_align);
	uint64_t pos = ab->start;
	size_t q0 = x->nreads, j = 0;
	int ret;

	if (chunk < al->offset_align)
		chunk = al->offset_align;
	if ((ret = collect_cuts(x, f, ab, A)))
		return ret;
	while (pos < ab->end) {
		uint64_t end = CM_MIN(pos + chunk, ab->end);
		uint32_t flags = 0;

		/* A conversion takes whole elements of at most 4 bytes, on
		 * their own size in the file (convert.c): requests end on
		 * multiples of 4 (O_DIRECT ones do anyway). */
		if (x->plan->converts && end < ab->end && cm_align_down(end, 4) > pos)
			end = cm_align_down(end, 4);
		while (j < x->ndirect_cuts && x->direct_cuts[j + 1] <= pos)
			j += 2;
		if (j < x->ndirect_cuts) {
			if (pos < x->direct_cuts[j]) {
				end = CM_MIN(end, x->direct_cuts[j]);
			} else {
				end = CM_MIN(end, x->direct_cuts[j + 1]);
				flags = CM_READ_DIRECT;
			}
		}
		if ((ret = push_read(x, f, pos, end - pos, CM_MIN(end, ab->last) - pos, flags)))
			return ret;
		pos = end;
	}
	if (!x->with_copies)
		return 0;
	/* Scatter lists: generated item by item, then grouped by request. */
	x->nreq_copies = 0;
	if ((ret = pend_room(x, x->blocks[ab->b0].first, x->blocks[ab->b0 + ab->nb - 1].first +
			     x->blocks[ab->b0 + ab->nb - 1].n)))
		return ret;
	for (size_t b = ab->b0; b < ab->b0 + ab->nb; b++)
		for (size_t i = x->blocks[b].first; i < x->blocks[b].first + x->blocks[b].n; i++)
			if ((ret = emit_item(x, &x->citems[i], q0, x->nreads)))
				return ret;
	if ((ret = flush_ranges(x, q0, x->nreads)))
		return ret;
	if (GROW(x, x->copies, x->ncopies, x->capcopies, x->nreq_copies) ||
	    GROW(x, x->req_counts, 0, x->capreq_counts, x->nreads - q0 + 1))
		return -ENOMEM;
	/* Counting sort by request: each read's copies become contiguous. */
	memset(x->req_counts, 0, (x->nreads - q0 + 1) * sizeof(*x->req_counts));
	for (size_t i = 0; i < x->nreq_copies; i++)
		x->req_counts[x->req_copies[i].req - q0 + 1]++;
	for (size_t q = q0; q < x->nreads; q++) {
		struct cm_read *rd = &x->reads[q];
		size_t k = q - q0;

		rd->ncopies = (uint32_t)x->req_counts[k + 1];
		x->req_counts[k + 1] += x->req_counts[k];
		rd->first_copy = x->ncopies + x->req_counts[k];
	}
	for (size_t i = 0; i < x->nreq_copies; i++)
		x->copies[x->ncopies + x->req_counts[x->req_copies[i].req - q0]++] = x->req_copies[i].c;
	x->ncopies += x->nreq_copies;
	return 0;
}

void pl_place_copies(const struct pl_plan *p, struct cm_copy *copies, size_t ncopies,
		     struct cm_read *reads, size_t nreads, const struct pl_align *align)
{
	for (size_t i = 0; i < ncopies; i++)
		copies[i].dst += p->shards[copies[i].shard].offset;
	/* A direct read's copies tile it, from a staging offset aligned like
	 * the file offset (short shards the layout packed instead do not). */
	for (size_t q = 0; q < nreads; q++) {
		struct cm_read *rd = &reads[q];
		const struct cm_copy *c = &copies[rd->first_copy];
		const struct pl_align *al = &align[rd->file];
		uint64_t A = CM_MAX(al->offset_align, al->mem_align);

		if ((rd->flags & CM_READ_DIRECT) && (!cm_read_tiles(rd, c) || c->dst % A))
			rd->flags &= ~CM_READ_DIRECT;
	}
}
