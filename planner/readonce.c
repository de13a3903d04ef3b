/*
 * readonce.c - read replicated data once in the cluster (RL_PLAN_READ_ONCE).
 *
 * For every loaded tensor, the devices of the whole mesh are grouped by
 * box. A box that devices of several processes need is read by exactly one
 * of them (assign.c: greedy by bytes, fewer-eligible first, preferring a
 * process that already opens the file for data only it needs) and
 * broadcast to the others, in batches bounded by batch_bytes. Every
 * process computes the same answer from the same inputs; each plan skips
 * the regions its devices receive and lists the broadcasts it takes part
 * in.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pl_private.h"

/* Bitmaps beyond this are refused rather than allocated. */
#define SKIP_MAX_BYTES (256u << 20)

struct cand {
	uint32_t item, dev, file;
	uint64_t nbytes, src;
	size_t first_elig, nelig;
};

struct ro {
	struct pl_plan *p;
	const struct pl_ckpt *ck;
	uint32_t (*coords)[PL_MAX_AXES];
	struct pl_box *boxes;
	uint32_t *order;
	uint32_t *stamp;            /* per process: last group that saw it */
	uint32_t *dev_slot;         /* mesh device -> local slot, or UINT32_MAX */
	unsigned ndim;
	struct cand *c;
	size_t nc, capc;
	uint32_t *elig;
	size_t nelig, capelig;
	size_t capb, caprecv;       /* capacities of the plan's arrays */
};

static int box_cmp(const void *pa, const void *pb, void *arg)
{
	const struct ro *r = arg;
	const struct pl_box *a = &r->boxes[*(const uint32_t *)pa];
	const struct pl_box *b = &r->boxes[*(const uint32_t *)pb];

	for (unsigned d = 0; d < r->ndim; d++) {
		if (a->start[d] != b->start[d])
			return a->start[d] < b->start[d] ? -1 : 1;
		if (a->stop[d] != b->stop[d])
			return a->stop[d] < b->stop[d] ? -1 : 1;
	}
	/* Equal boxes: mesh order, so that groups list devices in order. */
	return *(const uint32_t *)pa < *(const uint32_t *)pb ? -1 : 1;
}

static int same_box(const struct ro *r, uint32_t a, uint32_t b)
{
	for (unsigned d = 0; d < r->ndim; d++)
		if (r->boxes[a].start[d] != r->boxes[b].start[d] ||
		    r->boxes[a].stop[d] != r->boxes[b].stop[d])
			return 0;
	return 1;
}

/* File and first byte of item it's data inside box b (the first part that
 * intersects it); returns its byte count, 0 for an empty box. */
static uint64_t box_source(const struct ro *r, const struct pl_item *it,
			   const struct pl_box *b, uint32_t *file, uint64_t *src)
{
	uint64_t elems = 1;
	uint32_t np = it->nparts ? it->nparts : 1;

	for (unsigned d = 0; d < it->ndim; d++)
		elems *= b->stop[d] - b->start[d];
	*file = r->ck->tensors[it->src].file;
	*src = r->ck->tensors[it->src].offset;
	if (!elems)
		return 0;
	for (uint32_t k = 0; k < np; k++) {
		const struct pl_part *pt = it->nparts ? &r->p->parts[it->first_part + k] : NULL;
		const struct pl_tensor *t = &r->ck->tensors[pt ? pt->src : it->src];
		unsigned nlead = pt ? pt->nlead : 0;
		uint64_t lead = pt ? pt->lead : 0, c;
		struct pl_box sb;
		struct pl_runs runs;
		int in = 1;

		for (unsigned j = nlead; j-- > 0;) {
			c = lead % it->shape[j];
			lead /= it->shape[j];
			in &= c >= b->start[j] && c < b->stop[j];
		}
		if (!in)
			continue;
		for (unsigned d = 0; d < t->ndim; d++) {
			sb.start[d] = b->start[nlead + d] + (pt ? pt->slice[d] : 0);
			sb.stop[d] = b->stop[nlead + d] + (pt ? pt->slice[d] : 0);
		}
		if (!pl_box_runs(t->ndim, t->shape, it->bits, t->offset, &sb, &runs) &&
		    runs.nruns) {
			*file = t->file;
			*src = runs.off;
			break;
		}
	}
	return elems * it->bits / 8;
}

/*
 * Groups the mesh's devices of item i by box. pass 0 collects candidates
 * and the files each process reads alone; pass 1 sets skip bits and the
 * broadcasts of the planned process (candidate k is the k-th shared group).
 */
static int scan_item(struct ro *r, size_t i, int pass, size_t *k, uint8_t *reads,
		     const int32_t *owner, const uint32_t *batch, uint8_t *skip,
		     struct rl_err *e)
{
	struct pl_plan *p = r->p;
	const struct pl_spec *s = p->spec;
	const struct pl_item *it = &p->items[i];

	r->ndim = it->ndim;
	for (uint32_t d = 0; d < s->ndev; d++) {
		pl_item_box_at(s, it, r->coords[d], &r->boxes[d]);
		r->order[d] = d;
	}
	qsort_r(r->order, s->ndev, sizeof(*r->order), box_cmp, r);
	for (uint32_t g0 = 0, g1; g0 < s->ndev; g0 = g1) {
		uint32_t first = r->order[g0], nproc = 0, file;
		uint64_t src, nbytes = box_source(r, it, &r->boxes[first], &file, &src);
		size_t e0 = r->nelig;

		for (g1 = g0 + 1; g1 < s->ndev && same_box(r, first, r->order[g1]); g1++)
			;
		if (!nbytes)
			continue;
		/* Distinct processes of the group, ascending. */
		for (uint32_t m = g0; m < g1; m++) {
			uint32_t q = s->proc[r->order[m]];

			if (r->stamp[q] == g0 + 1)
				continue;
			r->stamp[q] = g0 + 1;
			nproc++;
			if (pass == 0 && rl_grow((void **)&r->elig, &r->capelig, r->nelig + 1,
					      sizeof(*r->elig)))
				return rl_err_set(e, -ENOMEM, "plan: out of memory");
			if (pass == 0)
				r->elig[r->nelig++] = q;
		}
		for (uint32_t m = g0; m < g1; m++)  /* reset for the next group */
			r->stamp[s->proc[r->order[m]]] = 0;
		if (nproc == 1) {
			if (pass == 0) {
				reads[(size_t)s->proc[first] * r->ck->nfiles + file] = 1;
				r->nelig = e0;
			}
			continue;
		}
		if (pass == 0) {
			struct cand *c;
			uint32_t *el = r->elig + e0;

			if (rl_grow((void **)&r->c, &r->capc, r->nc + 1, sizeof(*r->c)))
				return rl_err_set(e, -ENOMEM, "plan: out of memory");
			/* Sorted eligible list (groups are few processes). */
			for (size_t a = 1; a < nproc; a++)
				for (size_t b2 = a; b2 > 0 && el[b2 - 1] > el[b2]; b2--) {
					uint32_t t = el[b2];

					el[b2] = el[b2 - 1];
					el[b2 - 1] = t;
				}
			c = &r->c[r->nc++];
			*c = (struct cand){ (uint32_t)i, first, file, nbytes, src, e0, nproc };
			continue;
		}
		/* pass 1: receivers skip; the planned process notes its part. */
		{
			const struct cand *c = &r->c[*k];
			int32_t root = owner[*k];
			uint32_t local = UINT32_MAX;
			int involved = 0;

			for (uint32_t m = g0; m < g1; m++) {
				uint32_t d = r->order[m];
				size_t bit = i * s->ndev + d;

				if ((int32_t)s->proc[d] != root) {
					skip[bit / 8] |= (uint8_t)(1u << (bit % 8));
					if (r->dev_slot[d] != UINT32_MAX)
						p->received[pl_shard_index(p, i, r->dev_slot[d])] = 1;
				}
				if (r->dev_slot[d] != UINT32_MAX && local == UINT32_MAX)
					local = r->dev_slot[d];
			}
			for (size_t q = 0; q < c->nelig; q++)
				involved |= r->elig[c->first_elig + q] == (uint32_t)p->process;
			if (involved) {
				struct pl_bcast *b;

				if (rl_grow((void **)&p->bcasts, &r->capb, p->nbcasts + 1, sizeof(*b)) ||
				    rl_grow((void **)&p->receivers, &r->caprecv, p->nreceivers + c->nelig,
					 sizeof(int32_t)))
					return rl_err_set(e, -ENOMEM, "plan: out of memory");
				b = &p->bcasts[p->nbcasts++];
				*b = (struct pl_bcast){ (uint32_t)i, first, root, batch[*k], c->nbytes,
							c->src, p->nreceivers, 0,
							pl_shard_index(p, i, local) };
				for (size_t q = 0; q < c->nelig; q++)
					if ((int32_t)r->elig[c->first_elig + q] != root) {
						p->receivers[p->nreceivers++] =
							(int32_t)r->elig[c->first_elig + q];
						b->nrecv++;
					}
			}
			(*k)++;
		}
	}
	return 0;
}

int pl_read_once(struct pl_plan *p, const struct pl_ckpt *ck, const struct pl_opts *o,
		 uint8_t **skipp, struct rl_err *e)
{
	const struct pl_spec *s = p->spec;
	struct ro r;
	uint8_t *skip = NULL, *reads = NULL;
	int32_t *owner = NULL;
	uint32_t *batch = NULL;
	uint64_t *load = NULL, *sizes = NULL;
	struct pl_assign_item *ai = NULL;
	size_t bits, k = 0;
	int ret = -ENOMEM;

	*skipp = NULL;
	if (s->nprocs < 2 || !p->nitems)
		return 0;
	if (p->nitems > SIZE_MAX / s->ndev || (bits = p->nitems * s->ndev) / 8 > SKIP_MAX_BYTES)
		return rl_err_set(e, RL_E_TOO_LARGE,
				  "read once: %zu tensors x %u devices is too large a table",
				  p->nitems, s->ndev);
	memset(&r, 0, sizeof(r));
	r.p = p;
	r.ck = ck;
	skip = rl_calloc(bits / 8 + 1, 1);
	reads = rl_calloc((size_t)s->nprocs * ck->nfiles + 1, 1);
	r.coords = rl_mallocarray(s->ndev, sizeof(*r.coords));
	r.boxes = rl_mallocarray(s->ndev, sizeof(*r.boxes));
	r.order = rl_mallocarray(s->ndev, sizeof(*r.order));
	r.stamp = rl_calloc(s->nprocs, sizeof(*r.stamp));
	r.dev_slot = rl_mallocarray(s->ndev, sizeof(*r.dev_slot));
	p->received = rl_calloc(p->nshards + 1, 1);
	if (!p->received || !skip || !reads || !r.coords || !r.boxes || !r.order || !r.stamp || !r.dev_slot)
		goto oom;
	for (uint32_t d = 0; d < s->ndev; d++) {
		pl_mesh_coords(s, d, r.coords[d]);
		r.dev_slot[d] = UINT32_MAX;
	}
	for (unsigned sl = 0; sl < p->nslots; sl++)
		r.dev_slot[p->slot_dev[sl]] = sl;
	for (size_t i = 0; i < p->nitems; i++)
		if ((ret = scan_item(&r, i, 0, NULL, reads, NULL, NULL, NULL, e)))
			goto fail;
	ret = -ENOMEM;
	ai = rl_mallocarray(r.nc + 1, sizeof(*ai));
	owner = rl_mallocarray(r.nc + 1, sizeof(*owner));
	batch = rl_mallocarray(r.nc + 1, sizeof(*batch));
	sizes = rl_mallocarray(r.nc + 1, sizeof(*sizes));
	load = rl_calloc(s->nprocs, sizeof(*load));
	if (!ai || !owner || !batch || !sizes || !load)
		goto oom;
	for (size_t c = 0; c < r.nc; c++) {
		ai[c] = (struct pl_assign_item){ r.c[c].nbytes, r.c[c].file, -1,
						 r.elig + r.c[c].first_elig, (uint32_t)r.c[c].nelig };
		sizes[c] = r.c[c].nbytes;
	}
	if (pl_assign(ai, r.nc, s->nprocs, reads, (uint32_t)ck->nfiles, owner, load))
		goto oom;
	pl_batches(sizes, r.nc, o->batch_bytes, batch);
	for (size_t i = 0; i < p->nitems; i++)
		if ((ret = scan_item(&r, i, 1, &k, reads, owner, batch, skip, e)))
			goto fail;
	*skipp = skip;
	skip = NULL;
	ret = 0;
	goto out;
oom:
	ret = rl_err_set(e, -ENOMEM, "plan: out of memory");
fail:
out:
	rl_free(skip);
	rl_free(reads);
	rl_free(r.coords);
	rl_free(r.boxes);
	rl_free(r.order);
	rl_free(r.stamp);
	rl_free(r.dev_slot);
	rl_free(r.c);
	rl_free(r.elig);
	rl_free(ai);
	rl_free(owner);
	rl_free(batch);
	rl_free(sizes);
	rl_free(load);
	return ret;
}
