/*
 * query.c - what a built plan tells api/: the arrays the engine executes
 * (pl_plan_exec), statistics, loaded tensors, shard boxes (transfers:
 * transfer_query.c).
 */
#include <errno.h>

#include "transfer_assign.h"

void pl_plan_exec(const struct pl_plan *p, struct pl_exec *out)
{
	out->nfiles = p->fx->n;
	out->paths = p->fx->paths;
	out->file_sizes = p->fx->sizes;
	out->file_index = p->fx->file;
	out->file_ids = p->fx->ids;
	out->data_starts = p->fx->data_starts;
	out->nreads = p->nreads;
	out->reads = p->fx->reads;
	out->ncopies = p->ncopies;
	out->copies = p->copies;
	out->ndevs = p->nslots;
	out->dev_ids = p->dev_ids;
	out->staging_bytes = p->staging;
	out->nshards = p->nshards;
	out->shards = p->shards;
	out->max_read = p->max_read;
	/* The reads' share: transfer payloads are read by batch plans. */
	out->needed_bytes = p->stats[p->process].needed_bytes -
			    (p->xp && p->xp->st ? p->xp->st[p->process].needed : 0);
	out->received = p->received;
	out->convert = p->convert;
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
	*dtype = p->items[it].to;
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
