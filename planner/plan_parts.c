/*
 * plan_parts.c - a plan of one process and one device assembled from parts
 * computed elsewhere (planner.h, pl_plan_from_parts): the plan type is the
 * planner's, so the planner builds it; what it holds is the caller's (the
 * plan of a batch of transfers, exec/transfers.c). Its shards are 1-D U8
 * tensors; its files are those of another plan.
 */
#include <errno.h>
#include <string.h>

#include "pl_private.h"

/* One process, one device, the files of m. */
static int skeleton(struct pl_plan *q, const struct pl_plan *m)
{
	q->spec = pl_spec_new();
	q->nslots = 1;
	q->slot_dev = cm_calloc(1, sizeof(uint32_t));
	q->dev_ids = cm_calloc(1, sizeof(uint32_t));
	q->staging = cm_calloc(1, sizeof(uint64_t));
	q->stats = cm_calloc(1, sizeof(*q->stats));
	q->have_stats = cm_calloc(1, 1);
	q->paths = cm_calloc(m->nfiles + 1, sizeof(char *));
	q->file_sizes = cm_mallocarray(m->nfiles + 1, sizeof(uint64_t));
	if (!q->spec || !q->slot_dev || !q->dev_ids || !q->staging || !q->stats ||
	    !q->have_stats || !q->paths || !q->file_sizes)
		return -ENOMEM;
	q->nfiles = m->nfiles;
	for (size_t f = 0; f < m->nfiles; f++) {
		q->file_sizes[f] = m->file_sizes[f];
		if (!(q->paths[f] = cm_strdup(m->paths[f])))
			return -ENOMEM;
	}
	q->have_stats[0] = 1;
	return 0;
}

/* Shard k: item k, U8 of its length, at its offset on device 0. */
static int shards(struct pl_plan *q, const struct pl_parts *in)
{
	q->items = cm_calloc(in->nshards + 1, sizeof(*q->items));
	q->shards = cm_calloc(in->nshards + 1, sizeof(*q->shards));
	if (!q->items || !q->shards)
		return -ENOMEM;
	q->nitems = q->nshards = in->nshards;
	for (size_t k = 0; k < in->nshards; k++) {
		struct pl_item *it = &q->items[k];

		it->name = cm_strdup(in->names[k]);
		it->shape = cm_malloc(sizeof(uint64_t));
		if (!it->name || !it->shape)
			return -ENOMEM;
		it->shape[0] = in->nbytes[k];
		it->ndim = 1;
		it->dtype = RL_DTYPE_U8;
		it->bits = 8;
		it->to = it->dtype;
		it->to_bits = 8;
		it->rule = -1;
		q->shards[k] = (struct pl_shard){ (uint32_t)k, 0, in->offset[k], in->nbytes[k] };
	}
	q->staging[0] = in->staging;
	return 0;
}

int pl_plan_from_parts(const struct pl_plan *files_of, struct pl_parts *in,
		       struct pl_plan **out, struct cm_err *e)
{
	struct pl_plan *q = cm_calloc(1, sizeof(*q));
	int ret = q ? 0 : -ENOMEM;

	*out = NULL;
	if (q) {        /* the reads and copies are the plan's from here on */
		q->reads = in->reads;
		q->nreads = in->nreads;
		q->copies = in->copies;
		q->ncopies = in->ncopies;
		q->max_read = in->max_read;
	} else {
		cm_free(in->reads);
		cm_free(in->copies);
	}
	in->reads = NULL;
	in->copies = NULL;
	if (!ret)
		ret = skeleton(q, files_of);
	if (!ret)
		ret = shards(q, in);
	if (!ret)
		ret = pl_plan_exec_files(q, e) ? -ENOMEM : 0;
	if (ret) {
		pl_plan_free(q);
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	}
	q->stats[0] = in->stats;
	q->stats[0].devices = 1;
	q->total = q->stats[0];
	*out = q;
	return 0;
}
