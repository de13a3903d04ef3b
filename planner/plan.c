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
 *   copies    (scatter.c) each request's scatter list, so requests complete
 *             in any order.
 *
 * Statistics of the other processes run the same code without copies.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "plan_ctx.h"
#include "transfer_assign.h"

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
	o->max_memory = 4ull << 30;
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

/*
 * A shard that cannot be read on whole bytes (F4/F6): one wording for the
 * shard's size and its runs, naming the rule that split it, or the target
 * slice when no rule did.
 */
static int subbyte_error(struct ctx *x, const struct pl_item *it, unsigned slot)
{
	const char *dt = pl_dtype_name(it->dtype);
	uint32_t dev = x->spec->devices[x->slots[slot]];

	if (it->rule < 0)
		return cm_err_set(x->err, RL_E_SUBBYTE_SPLIT,
				  "tensor \"%s\" (%s, sliced, no rule): the shard of device %u does not fall on whole bytes",
				  it->name, dt ? dt : "?", dev);
	return cm_err_set(x->err, RL_E_SUBBYTE_SPLIT,
			  "rule %d (\"%s\"): tensor \"%s\" (%s): the shard of device %u does not fall on whole bytes",
			  (int)it->rule, x->spec->rules[it->rule].pattern, it->name, dt ? dt : "?",
			  dev);
}

/* One (item, part) of a file, as every slot's region needs it. */
struct part_at {
	const struct pl_item *it;
	const struct pl_part *pt;       /* NULL: the plain item */
	uint32_t item;
	uint32_t file;                  /* of its source tensor */
	uint64_t base;                  /* its source tensor's data */
	int single;                     /* the item is this one source, whole */
	int first;                      /* the item's first part: sets shard sizes */
};

/* Slot s's region from runs r (r->off counted from base); marks the shard
 * sh (NULL: not sized here) congruent when the region is one direct run. */
static int push_region(struct ctx *x, const struct part_at *pa, unsigned s,
		       const struct pl_runs *r, uint64_t base, uint64_t within,
		       struct pl_shard *sh)
{
	struct region *g;

	if (GROW(x, x->regions, x->nregions, x->capregions, 1) ||
	    GROW(x, x->levels, x->nlevels, x->caplevels, r->nlev))
		return -ENOMEM;
	g = &x->regions[x->nregions++];
	g->off = base + r->off;
	g->len = r->len;
	g->within = within;
	g->nruns = r->nruns;
	g->shard = (uint32_t)pl_shard_index(x->plan, pa->item, s);
	g->slot = s;
	g->lev = (uint32_t)x->nlevels;
	g->nlev = (uint8_t)r->nlev;
	/* A converting region is never read straight into staging; a short
	 * one only with its neighbours in the file (scatter.c's chains). */
	g->direct = pa->single && r->nruns == 1 && pa->it->to == pa->it->dtype &&
		    pl_direct_file_ok(x->opts, &x->align[pa->file]);
	g->isize = (uint8_t)(pa->it->bits / 8);
	g->osize = (uint8_t)(pa->it->to_bits / 8);
	for (unsigned i = 0; i < r->nlev; i++)
		x->levels[x->nlevels++] = (struct level){ r->count[i], r->stride[i] };
	/* One contiguous run of one source: the layout places the shard
	 * congruently (pl_layout() reads this mark). */
	if (sh && g->direct)
		sh->offset = (pl_congruent_ok(x->opts, &x->align[pa->file], r->len) ?
			      PL_CONGRUENT_MARK : PL_CONGRUENT_SOFT) |
			     (g->off % PL_CONGRUENT_ALIGN);
	return 0;
}

/* Slot s's shard size and region, computed from its box (the long way). */
static int slot_region(struct ctx *x, const struct part_at *pa, unsigned s)
{
	const struct pl_item *it = pa->it;
	struct pl_box b;
	struct pl_runs r;
	struct pl_shard *sh = NULL;
	uint64_t within = 0;
	int ret;

	pl_item_box_at(x->spec, it, x->coords[s], &b);
	if (x->with_copies && pa->first) {
		/* The shard's size, once per (item, device), for the layout. */
		uint64_t elems = 1, bits;

		sh = &x->plan->shards[pl_shard_index(x->plan, pa->item, s)];
		for (unsigned d = 0; d < it->ndim; d++)
			if (cm_mul64(elems, b.stop[d] - b.start[d], &elems))
				return cm_err_set(x->err, RL_E_TOO_LARGE,
						  "tensor \"%s\": shard too large", it->name);
		if (cm_mul64(elems, it->to_bits, &bits))
			return cm_err_set(x->err, RL_E_TOO_LARGE,
					  "tensor \"%s\": shard too large", it->name);
		if (bits % 8)
			return subbyte_error(x, it, s);
		sh->nbytes = bits / 8;
	}
	if (pl_skip_bit(x->skip, x->spec->ndev, pa->item, x->slots[s]))
		return 0;       /* another process reads it and broadcasts */
	ret = part_runs(x, it, pa->pt, &b, &r, &within);
	if (ret == RL_E_SUBBYTE_SPLIT)
		return subbyte_error(x, it, s);
	if (ret < 0)    /* pl_box_runs() fails only as above */
		return cm_err_set(x->err, ret, "tensor \"%s\": device %u: no byte runs",
				  it->name, x->spec->devices[x->slots[s]]);
	return ret ? push_region(x, pa, s, &r, 0, within, sh) : 0;
}

/* Slot s's shard size and region from the memo (slotcache.c): the same as
 * slot_region() gives for a plain item, whose runs start at its data. */
static int slot_region_memo(struct ctx *x, const struct part_at *pa, unsigned s,
			    const struct slot_shard *e)
{
	struct pl_shard *sh = NULL;

	if (x->with_copies && pa->first) {
		sh = &x->plan->shards[pl_shard_index(x->plan, pa->item, s)];
		sh->nbytes = e->nbytes;
	}
	if (pl_skip_bit(x->skip, x->spec->ndev, pa->item, x->slots[s]) || !e->r.nruns)
		return 0;
	return push_region(x, pa, s, &e->r, pa->base, 0, sh);
}

static int add_regions(struct ctx *x, const struct file_part *f)
{
	const struct pl_item *it = &x->plan->items[f->item];
	const struct pl_part *pt = f->part == UINT32_MAX ? NULL : &x->plan->parts[f->part];
	const struct pl_tensor *t = &x->ck->tensors[pt ? pt->src : it->src];
	struct part_at pa = { it, pt, f->item, t->file, t->offset,
			      it->nparts == 0 || (it->nparts == 1 && !pt->nlead),
			      !pt || f->part == it->first_part };
	const struct slot_shard *memo = pt ? NULL : pl_slot_shards(x, it);

	for (unsigned s = 0; s < x->nslots; s++) {
		int ret = memo && memo[s].ok ? slot_region_memo(x, &pa, s, &memo[s]) :
			  slot_region(x, &pa, s);

		if (ret)
			return ret;
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
		const struct level *la = &x->levels[a->lev + i], *lb = &x->levels[b->lev + i];

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

static uint64_t region_end(const struct ctx *x, const struct region *r)
{
	uint64_t end = r->off + r->len;

	for (unsigned i = 0; i < r->nlev; i++)
		end += (x->levels[r->lev + i].count - 1) * x->levels[r->lev + i].stride;
	return end;
}

/* Whether every gap inside region r is <= min_gap (then it is solid-equivalent). */
static int region_dense(const struct ctx *x, const struct region *r)
{
	uint64_t span = r->len;

	for (unsigned i = r->nlev; i-- > 0;) {
		const struct level *l = &x->levels[r->lev + i];

		if (l->stride - span > x->opts->min_gap && l->count > 1)
			return 0;
		span += (l->count - 1) * l->stride;
	}
	return 1;
}

static int same_levels(const struct ctx *x, const struct region *a, const struct region *b)
{
	if (a->nlev != 1 || b->nlev != 1)
		return 0;
	return x->levels[a->lev].count == x->levels[b->lev].count &&
	       x->levels[a->lev].stride == x->levels[b->lev].stride;
}

static int push_citem(struct ctx *x, uint64_t start, uint64_t end, uint64_t needed,
		   uint32_t ref, unsigned kind, uint64_t k)
{
	if (GROW(x, x->citems, x->ncitems, x->capcitems, 1))
		return -ENOMEM;
	x->citems[x->ncitems++] = (struct pl_citem){ start, end, needed, ref,
					     kind | (end - start != needed ? ITEM_GAPS : 0), k };
	return 0;
}

static int make_groups(struct ctx *x)
{
	size_t u = 0;

	x->ngroups = 0;
	x->ncitems = 0;
	while (u < x->nunique) {
		const struct region *a = unique_region(x, u);
		size_t n = 1;
		uint64_t needed = a->len, start = a->off, last_end = a->off + a->len;
		uint64_t stride = a->nlev == 1 ? x->levels[a->lev].stride : 0;
		struct group *g;
		int dense;

		/* Neighbours with the same single level, inside one period. */
		while (stride && u + n < x->nunique) {
			const struct region *b = unique_region(x, u + n);

			if (!same_levels(x, a, b) || b->off < last_end ||
			    b->off - last_end > x->opts->min_gap ||
			    b->off + b->len > start + stride)
				break;
			needed += b->len;
			last_end = b->off + b->len;
			n++;
		}
		if (GROW(x, x->groups, x->ngroups, x->capgroups, 1))
			return -ENOMEM;
		g = &x->groups[x->ngroups];
		g->u0 = (uint32_t)u;
		g->nu = (uint32_t)n;
		g->nruns = a->nruns;
		if (n == 1) {
			dense = region_dense(x, a);
		} else {
			/* Wrap gap: from the last region's run to the first's next run. */
			dense = start + stride - last_end <= x->opts->min_gap;
		}
		if (dense || g->nruns == 1) {
			uint64_t end = n == 1 ? region_end(x, a) :
					 last_end + (g->nruns - 1) * stride;

			if (push_citem(x, start, end, needed * g->nruns, (uint32_t)x->ngroups,
				    ITEM_GROUP, 0))
				return -ENOMEM;
		} else {
			/* Sparse: one item per run (of the whole group). */
			for (uint64_t k = 0; k < g->nruns; k++) {
				uint64_t o = run_off(x, a, k) - a->off;

				if (push_citem(x, start + o, last_end + o, needed,
					    (uint32_t)x->ngroups, ITEM_GROUP_RUN, k))
					return -ENOMEM;
			}
		}
		x->ngroups++;
		u += n;
	}
	return 0;
}

static int citem_cmp(const void *pa, const void *pb)
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

static void sort_citems(struct ctx *x)
{
	for (size_t i = 1; i < x->ncitems; i++)
		if (citem_cmp(&x->citems[i - 1], &x->citems[i]) > 0) {
			qsort(x->citems, x->ncitems, sizeof(*x->citems), citem_cmp);
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
	size_t n = x->ncitems, i = 0, changed = 0;

	while (i < n) {
		size_t j = i + 1, gaps = x->citems[i].strided & ITEM_GAPS;
		uint64_t end = x->citems[i].end;

		while (j < n && x->citems[j].start < end) {
			gaps |= x->citems[j].strided & ITEM_GAPS;
			if (x->citems[j].end > end)
				end = x->citems[j].end;
			j++;
		}
		if (j - i > 1 && gaps) {
			for (size_t k = i; k < j; k++) {
				struct pl_citem c = x->citems[k];
				const struct group *g = &x->groups[c.ref];
				uint64_t k0 = 0, k1 = g->nruns;

				if (!(c.strided & ITEM_GAPS))
					continue;
				if (ITEM_KIND(&c) == ITEM_GROUP_RUN) {
					k0 = c.k;
					k1 = c.k + 1;
				}
				x->citems[k].end = x->citems[k].start; /* dropped below */
				for (uint32_t u = g->u0; u < g->u0 + g->nu; u++) {
					const struct region *r = unique_region(x, u);

					for (uint64_t q = k0; q < k1; q++) {
						uint64_t o = run_off(x, r, q);

						if (push_citem(x, o, o + r->len, r->len, u,
							    ITEM_UNIQUE_RUN, q))
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
	for (i = 0, n = 0; i < x->ncitems; i++)
		if (x->citems[i].end > x->citems[i].start)
			x->citems[n++] = x->citems[i];
	x->ncitems = n;
	qsort(x->citems, x->ncitems, sizeof(*x->citems), citem_cmp);
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

	x->nregions = x->nlevels = 0;
	for (size_t i = x->file_first_part[f]; i < x->file_first_part[f + 1]; i++)
		if ((ret = add_regions(x, &x->parts_by_file[i])))
			return ret;
	if (!x->nregions)
		return 0;   /* never opened */
	for (size_t i = 1; i < x->nregions; i++)
		if (region_cmp(&x->regions[i - 1], &x->regions[i], x) > 0) {
			qsort_r(x->regions, x->nregions, sizeof(*x->regions), region_cmp, x);
			break;
		}
	/* Unique regions: runs of equal keys. */
	if (GROW(x, x->unique, 0, x->capunique, x->nregions + 1))
		return -ENOMEM;
	{
		size_t n = 0;

		for (size_t i = 0; i < x->nregions; i++)
			if (!i || region_key_cmp(x, &x->regions[i - 1], &x->regions[i]))
				x->unique[n++] = (uint32_t)i;
		x->unique[n] = (uint32_t)x->nregions;
		x->nunique = n;
	}
	if ((ret = make_groups(x)))
		return ret;
	sort_citems(x);
	if ((ret = expand_overlaps(x)))
		return ret;
	if (GROW(x, x->blocks, 0, x->capblocks, x->ncitems) || GROW(x, x->ablocks, 0, x->capablocks, x->ncitems))
		return -ENOMEM;
	nb = pl_coalesce(x->citems, x->ncitems, x->opts->min_gap, x->ratiop, x->blocks);
	/* Widen to the alignment; merge blocks that then overlap. */
	x->nablocks = 0;
	for (size_t b = 0; b < nb; b++) {
		uint64_t s = cm_align_down(x->blocks[b].start, al->offset_align);
		uint64_t e = cm_align_up(x->blocks[b].end, al->offset_align);

		x->stats.needed_bytes += x->blocks[b].needed;
		if (x->nablocks && s < x->ablocks[x->nablocks - 1].end) {
			struct aligned_block *a = &x->ablocks[x->nablocks - 1];

			a->end = CM_MAX(a->end, e);
			a->last = CM_MAX(a->last, x->blocks[b].end);
			a->nb++;
			continue;
		}
		x->ablocks[x->nablocks++] = (struct aligned_block){ s, e, x->blocks[b].end, b, 1 };
	}
	x->stats.blocks += x->nablocks;
	x->stats.files_opened++;
	for (size_t a = 0; a < x->nablocks; a++)
		if ((ret = pl_block_requests(x, f, &x->ablocks[a])))
			return ret;
	return 0;
}

static int plan_process(struct ctx *x, unsigned proc, int full)
{
	int ret;

	x->with_copies = full;
	memset(&x->stats, 0, sizeof(x->stats));
	x->slots = x->by_proc + x->proc_first[proc];
	x->nslots = x->proc_first[proc + 1] - x->proc_first[proc];
	for (unsigned sl = 0; sl < x->nslots; sl++)
		pl_mesh_coords(x->spec, x->slots[sl], x->coords[sl]);
	x->stats.devices = x->nslots;
	pl_slot_cache_reset(x);
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
	struct pl_spec *c = cm_calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->ndim = s->ndim;
	memcpy(c->shape, s->shape, sizeof(s->shape));
	c->ndev = s->ndev;
	c->nprocs = s->nprocs;
	c->devices = cm_mallocarray(s->ndev, sizeof(uint32_t));
	c->proc = cm_mallocarray(s->ndev, sizeof(uint32_t));
	c->rules = cm_calloc(s->nrules + 1, sizeof(*c->rules));
	if (!c->devices || !c->proc || !c->rules)
		goto fail;
	memcpy(c->devices, s->devices, s->ndev * sizeof(uint32_t));
	memcpy(c->proc, s->proc, s->ndev * sizeof(uint32_t));
	/*
	 * Boxes need only the resolved dims, errors the patterns; regexes
	 * stay with the spec.
	 */
	for (size_t i = 0; i < s->nrules; i++) {
		c->rules[i].ndims = s->rules[i].ndims;
		memcpy(c->rules[i].dims, s->rules[i].dims, sizeof(s->rules[i].dims));
		if (regcomp(&c->rules[i].re, "^$", REG_EXTENDED | REG_NOSUB))
			goto fail;
		c->nrules = i + 1;
		if (!(c->rules[i].pattern = cm_strdup(s->rules[i].pattern)))
			goto fail;
	}
	for (unsigned i = 0; i < s->ndim; i++)
		if (!(c->axes[i] = cm_strdup(s->axes[i])))
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
	cm_free(p->slot_dev);
	cm_free(p->dev_ids);
	cm_free(p->staging);
	cm_free(p->shards);
	for (size_t i = 0; p->paths && i < p->nfiles; i++)
		cm_free(p->paths[i]);
	cm_free(p->paths);
	cm_free(p->file_sizes);
	cm_free(p->file_ids);
	cm_free(p->data_starts);
	cm_free_big(p->reads, p->capreads, sizeof(*p->reads));
	cm_free_big(p->copies, p->capcopies, sizeof(*p->copies));
	cm_free(p->stats);
	cm_free(p->have_stats);
	pl_xplan_free(p->xp);
	pl_exec_files_free(p->fx);
	cm_free(p->received);
	cm_free(p->convert);
	cm_free(p);
}

static int check_opts(const struct pl_ckpt *ck, const struct pl_spec *s,
		      const struct pl_align *align, const struct pl_opts *o,
		      struct cm_err *e)
{
	if (o->process < 0 || (uint32_t)o->process >= s->nprocs)
		return cm_err_set(e, RL_E_INVALID_ARG,
				  "plan: process %d not in the mesh (processes 0..%u)",
				  o->process, s->nprocs - 1);
	if (o->ratio != 0 && !(o->ratio >= 1.0 && o->ratio <= 1e9))
		return cm_err_set(e, RL_E_INVALID_ARG,
				  "plan: ratio %g must be >= 1 (or 0: automatic)", o->ratio);
	if (!o->chunk)
		return cm_err_set(e, RL_E_INVALID_ARG, "plan: chunk must be positive");
	if (o->shard_align < 64 || (o->shard_align & (o->shard_align - 1)) ||
	    o->shard_align > (1u << 30))
		return cm_err_set(e, RL_E_INVALID_ARG,
				  "plan: shard alignment %llu must be a power of two >= 64",
				  (unsigned long long)o->shard_align);
	for (size_t f = 0; f < ck->nfiles; f++) {
		uint32_t a = align[f].offset_align, m = align[f].mem_align;

		if (!a || (a & (a - 1)) || a > (1u << 20) || !m || (m & (m - 1)) ||
		    m > (1u << 20))
			return cm_err_set(e, RL_E_INVALID_ARG,
					  "plan: file %s: alignment %u/%u is not a power of two",
					  ck->files[f].path, a, m);
	}
	return 0;
}

/* Buckets every (item, part) by its source file, item order kept. */
static int bucket_parts(struct ctx *x)
{
	const struct pl_plan *p = x->plan;
	size_t n = 0, *pos;

	for (size_t i = 0; i < p->nitems; i++)
		n += p->items[i].nparts ? p->items[i].nparts : 1;
	x->parts_by_file = cm_mallocarray(n + 1, sizeof(*x->parts_by_file));
	x->file_first_part = cm_calloc(x->ck->nfiles + 2, sizeof(size_t));
	pos = cm_calloc(x->ck->nfiles + 1, sizeof(size_t));
	if (!x->parts_by_file || !x->file_first_part || !pos) {
		cm_free(pos);
		return cm_err_set(x->err, -ENOMEM, "plan: out of memory");
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
					x->file_first_part[f + 1]++;
				else
					x->parts_by_file[pos[f]++] = (struct file_part){ (uint32_t)i, part };
			}
			if (pass || i + 1 < p->nitems)
				continue;
			for (size_t f = 0; f < x->ck->nfiles; f++)
				x->file_first_part[f + 1] += x->file_first_part[f];
			memcpy(pos, x->file_first_part, x->ck->nfiles * sizeof(size_t));
		}
	cm_free(pos);
	return 0;
}

/* Frees an array that GROW() grew. */
#define FREE_GROWN(arr, cap) cm_free_big((arr), (cap), sizeof(*(arr)))

static void ctx_free(struct ctx *x)
{
	cm_free(x->parts_by_file);
	cm_free(x->file_first_part);
	FREE_GROWN(x->regions, x->capregions);
	FREE_GROWN(x->levels, x->caplevels);
	FREE_GROWN(x->unique, x->capunique);
	FREE_GROWN(x->groups, x->capgroups);
	FREE_GROWN(x->citems, x->capcitems);
	FREE_GROWN(x->blocks, x->capblocks);
	FREE_GROWN(x->ablocks, x->capablocks);
	FREE_GROWN(x->direct_cuts, x->capdirect_cuts);
	FREE_GROWN(x->reads, x->capreads);
	FREE_GROWN(x->copies, x->capcopies);
	FREE_GROWN(x->req_copies, x->capreq_copies);
	FREE_GROWN(x->req_counts, x->capreq_counts);
	FREE_GROWN(x->pend, x->cappend);
	FREE_GROWN(x->touched, x->captouched);
	cm_free(x->by_proc);
	cm_free(x->proc_first);
	cm_free(x->coords);
	cm_free(x->skip);
	pl_slot_cache_free(x);
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

/*
 * The mesh's devices bucketed by process (a counting sort, mesh order kept
 * in each): process q's devices are by_proc[proc_first[q] ..
 * proc_first[q + 1]), so each process's plan visits only its own.
 */
static int bucket_devices(struct ctx *x)
{
	const struct pl_spec *s = x->spec;

	x->by_proc = cm_mallocarray(s->ndev, sizeof(*x->by_proc));
	x->proc_first = cm_calloc((size_t)s->nprocs + 1, sizeof(*x->proc_first));
	if (!x->by_proc || !x->proc_first)
		return cm_err_set(x->err, -ENOMEM, "plan: out of memory");
	for (uint32_t d = 0; d < s->ndev; d++)
		x->proc_first[s->proc[d] + 1]++;
	for (uint32_t q = 0; q < s->nprocs; q++)
		x->proc_first[q + 1] += x->proc_first[q];
	for (uint32_t d = 0; d < s->ndev; d++)
		x->by_proc[x->proc_first[s->proc[d]]++] = d;
	for (uint32_t q = s->nprocs; q > 0; q--)
		x->proc_first[q] = x->proc_first[q - 1];
	x->proc_first[0] = 0;
	return 0;
}

/* Devices of process q. */
static uint32_t proc_devices(const struct ctx *x, uint32_t q)
{
	return x->proc_first[q + 1] - x->proc_first[q];
}

/* The counts of items: their shares of devices, and per file the regions
 * and distinct regions of the largest process planned (the most of any
 * file). */
static void count_items(const struct ctx *x, struct pl_estimate *c)
{
	const struct pl_plan *p = x->plan;

	for (size_t i = 0; i < p->nitems; i++) {
		double share;
		uint64_t boxes;

		pl_estimate_item(x->spec, &p->items[i], &share, &boxes);
		c->filled += share;
		c->ro_boxes += boxes;
		if (boxes)
			c->ro_sharers += boxes * CM_MIN((double)c->nprocs,
							(double)c->ndev / (double)boxes);
	}
	for (size_t f = 0; f < x->ck->nfiles; f++) {
		double regions = 0, unique = 0;

		for (size_t i = x->file_first_part[f]; i < x->file_first_part[f + 1]; i++) {
			double share, n;
			uint64_t boxes;

			pl_estimate_item(x->spec, &p->items[x->parts_by_file[i].item], &share, &boxes);
			n = share * (double)c->stat_slots;
			regions += n;
			unique += CM_MIN(n, (double)boxes);
		}
		c->file_regions = CM_MAX(c->file_regions, regions);
		c->file_unique = CM_MAX(c->file_unique, unique);
	}
}

/*
 * The memory the build will need, from the counts (estimate.c), against
 * the limit: refused before any table that grows with devices x tensors
 * is allocated. *max_slots gets the most devices of a process planned.
 */
static int check_memory(struct ctx *x, uint32_t *max_slots)
{
	struct pl_estimate c = { .ndev = x->spec->ndev, .nprocs = x->spec->nprocs,
				 .nitems = x->plan->nitems, .nparts = x->plan->nparts,
				 .nfiles = x->ck->nfiles, .read_once = x->opts->read_once };
	uint64_t need;

	c.slots = proc_devices(x, (uint32_t)x->opts->process);
	*max_slots = (uint32_t)c.slots;
	for (uint32_t q = 0; x->opts->all_stats && q < x->spec->nprocs; q++)
		*max_slots = CM_MAX(*max_slots, proc_devices(x, q));
	c.stat_slots = *max_slots;
	count_items(x, &c);
	need = pl_estimate_bytes(&c);
	x->plan->memory_estimate = need;
	if (!x->opts->max_memory || need <= x->opts->max_memory)
		return 0;
	return cm_err_set(x->err, RL_E_TOO_LARGE, "plan: needs about %.1f GiB (%" PRIu64
			  " devices x %zu tensors = %" PRIu64 " shards of process %d, %u "
			  "devices in the mesh), over the limit of %.1f GiB "
			  "(RL_PLAN_MAX_MEMORY)", need / 1073741824.0, c.slots, x->plan->nitems,
			  c.slots * x->plan->nitems, x->opts->process, x->spec->ndev,
			  x->opts->max_memory / 1073741824.0);
}

/* The planned process's devices, shards, staging sizes, statistics and
 * files: the plan's tables. */
static int plan_tables(struct ctx *x)
{
	struct pl_plan *p = x->plan;
	const struct pl_ckpt *ck = x->ck;
	const uint32_t *devs = x->by_proc + x->proc_first[x->opts->process];

	p->nslots = proc_devices(x, (uint32_t)x->opts->process);
	p->nshards = p->stats_only ? 0 : (size_t)p->nslots * p->nitems; /* check_memory() */
	if (p->nshards > UINT32_MAX)
		return cm_err_set(x->err, RL_E_TOO_LARGE, "plan: %zu shards (at most %u)",
				  p->nshards, UINT32_MAX);
	p->slot_dev = cm_mallocarray(p->nslots + 1, sizeof(uint32_t));
	p->dev_ids = cm_mallocarray(p->nslots + 1, sizeof(uint32_t));
	p->shards = cm_calloc(p->nshards + 1, sizeof(*p->shards));
	p->staging = cm_calloc(p->nslots + 1, sizeof(uint64_t));
	p->stats = cm_calloc(x->spec->nprocs, sizeof(*p->stats));
	p->have_stats = cm_calloc(x->spec->nprocs, 1);
	p->nfiles = ck->nfiles;
	p->paths = cm_calloc(ck->nfiles + 1, sizeof(char *));
	p->file_sizes = cm_mallocarray(ck->nfiles + 1, sizeof(uint64_t));
	p->file_ids = cm_calloc(ck->nfiles + 1, sizeof(*p->file_ids));
	p->data_starts = cm_calloc(ck->nfiles + 1, sizeof(uint64_t));
	if (!p->slot_dev || !p->dev_ids || !p->shards || !p->staging || !p->stats ||
	    !p->have_stats || !p->paths || !p->file_sizes || !p->file_ids || !p->data_starts)
		return cm_err_set(x->err, -ENOMEM, "plan: out of memory");
	for (unsigned sl = 0; sl < p->nslots; sl++) {
		p->slot_dev[sl] = devs[sl];
		p->dev_ids[sl] = x->spec->devices[devs[sl]];
	}
	for (size_t f = 0; f < ck->nfiles; f++) {
		p->file_sizes[f] = ck->files[f].size;
		p->file_ids[f] = ck->files[f].id;
		p->data_starts[f] = ck->files[f].data_start;
		if (!(p->paths[f] = cm_strdup(ck->files[f].path)))
			return cm_err_set(x->err, -ENOMEM, "plan: out of memory");
	}
	return 0;
}

/* The planned process: reads and copies, then the staging layout, then
 * the copies pointed at their final staging offsets. */
static int plan_own(struct ctx *x)
{
	struct pl_plan *p = x->plan;
	int ret;

	if (p->stats_only) {
		if ((ret = plan_process(x, (unsigned)x->opts->process, 0)))
			return ret;
		p->stats[x->opts->process] = x->stats;
		p->have_stats[x->opts->process] = 1;
		return 0;
	}
	if ((ret = plan_process(x, (unsigned)x->opts->process, 1)) ||
	    (ret = pl_layout(p, x->opts, x->err)))
		return ret;
	pl_place_copies(p, x->copies, x->ncopies, x->reads, x->nreads, x->align);
	p->stats[x->opts->process] = x->stats;
	p->have_stats[x->opts->process] = 1;
	p->reads = x->reads;
	p->nreads = x->nreads;
	p->copies = x->copies;
	p->ncopies = x->ncopies;
	p->capreads = x->capreads;
	p->capcopies = x->capcopies;
	x->reads = NULL;
	x->copies = NULL;
	return pl_convert_shards(p);
}

/* Statistics of every other process (the same code, without copies). */
static int plan_others(struct ctx *x)
{
	struct pl_plan *p = x->plan;
	int ret;

	for (unsigned q = 0; q < x->spec->nprocs; q++) {
		if (q == (unsigned)x->opts->process)
			continue;
		if ((ret = plan_process(x, q, 0)))
			return ret;
		p->stats[q] = x->stats;
		p->have_stats[q] = 1;
	}
	for (unsigned q = 0; q < x->spec->nprocs; q++)
		add_stats(&p->total, &p->stats[q]);
	return 0;
}

/* Everything after the loaded items: devices, memory check, tables, the
 * planned process, the others' statistics. */
/* The build after the items: spec is the caller's (files_of_process lives
 * only there; the plan keeps a copy of what boxes need). */
static int build_steps(struct ctx *x, const struct pl_spec *spec)
{
	uint32_t max_slots;
	int ret;

	if ((ret = bucket_devices(x)) || (ret = bucket_parts(x)) ||
	    (ret = check_memory(x, &max_slots)))
		return ret;
	x->coords = cm_mallocarray((size_t)max_slots + 1, sizeof(*x->coords));
	if (!x->coords)
		return cm_err_set(x->err, -ENOMEM, "plan: out of memory");
	if ((ret = pl_slot_cache_alloc(x, max_slots)) || (ret = plan_tables(x)))
		return ret;
	if ((x->opts->read_once || spec->avail) &&
	    (ret = pl_read_once(x->plan, x->ck, spec, x->align, x->opts, &x->skip, x->err)))
		return ret;
	if ((ret = plan_own(x)))
		return ret;
	if (x->opts->all_stats && (ret = plan_others(x)))
		return ret;
	if ((ret = pl_xfer_finish(x->plan, x->ck, x->err)))
		return ret;
	return pl_plan_exec_files(x->plan, x->err);
}

int pl_plan_build(const struct pl_ckpt *ck, const struct pl_spec *spec,
		  const struct pl_align *align, const struct pl_opts *o,
		  struct pl_plan **out, struct cm_err *e)
{
	struct pl_plan *p;
	struct pl_opts oc = *o;
	struct ctx x = { .ck = ck, .align = align, .opts = &oc, .err = e };
	int ret;

	*out = NULL;
	if (!oc.convert)        /* the spec's dtype, unless the plan set one */
		oc.convert = spec->convert;
	o = &oc;
	if ((ret = check_opts(ck, spec, align, o, e)) || (ret = pl_convert_check(o, spec, e)))
		return ret;
	if (!(p = cm_calloc(1, sizeof(*p))))
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	x.plan = p;
	p->process = o->process;
	p->all_stats = o->all_stats;
	/* Read once places transfers in the layout: a full plan then. */
	p->stats_only = o->stats_only && !o->read_once && !spec->avail;
	if (o->ratio != 0) {
		x.ratio = (struct pl_ratio){ (uint64_t)(o->ratio * 1e6 + 0.5), 1000000 };
		x.ratiop = &x.ratio;
	}
	ret = pl_items_build(ck, spec, &p->items, &p->nitems, &p->parts, &p->nparts, e);
	if (!ret)
		ret = pl_convert_items(p, ck, o, e);
	if (!ret && !(p->spec = spec_copy(spec)))
		ret = cm_err_set(e, -ENOMEM, "plan: out of memory");
	x.spec = p->spec;
	if (!ret)
		ret = build_steps(&x, spec);
	if (ret == -ENOMEM && !e->msg[0])
		cm_err_set(e, ret, "plan: out of memory");
	ctx_free(&x);
	if (ret) {
		pl_plan_free(p);
		return ret;
	}
	*out = p;
	return 0;
}
