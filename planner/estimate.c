/*
 * estimate.c - the memory a plan build needs, estimated from counts before
 * anything large is allocated, so that a plan too large for the process
 * fails at once with RL_E_TOO_LARGE rather than after minutes in an OOM
 * kill (a [4096, 4096] mesh on a 2 MB checkpoint asked for 24 GB). The
 * limit is a fixed number (RL_PLAN_MAX_MEMORY, default 4 GiB), not a share
 * of this machine's memory, so that every process of a cluster decides the
 * same from the same inputs.
 *
 * What grows with the counts, in bytes (docs/validation.md has the formula
 * and its check against measured peaks):
 *   - per mesh device: the plan's copy of the mesh, the devices bucketed
 *     by process;
 *   - per process: its statistics;
 *   - per device of the planned process: ids, staging size; per device of
 *     the largest process planned: its mesh coordinates;
 *   - per shard of the planned process (its devices x loaded tensors): the
 *     shard; per shard that holds bytes, the copy that fills it;
 *   - the per-file scratch of the file that needs most, for the largest
 *     process planned: per region (a device's bytes of a tensor in the
 *     file) the region, its run level and unique index, and its copy
 *     before copies are grouped by request; per unique region
 *     (devices with the same box share one) its group, coalescing item,
 *     block and aligned block, and the pending run ranges of it and of its
 *     group (scatter.c);
 *   - the memo of slot shards: at most PL_SLOT_CACHE_MAX bytes;
 *   - read once: per mesh device, the boxes compared across processes; per
 *     (tensor, device) a bit; per distinct box, its assignment and
 *     broadcast, and per process sharing it, its entries in the lists.
 * Which shards hold bytes is known per tensor from the rule and the shape
 * (pl_estimate_item): a dimension of 4000 rows over 65,536 devices fills
 * 4000 of them, with 4000 distinct boxes; a replicated tensor has one box
 * for every device. Processes are assumed to hold equal shares.
 * Not counted: what depends on the shapes rather than the counts (sparse
 * strided regions expanded run by run, copies split across requests); it
 * is bounded by the data the plan reads, not by the mesh.
 */
#include "plan_ctx.h"

void pl_estimate_item(const struct pl_spec *s, const struct pl_item *it, double *share,
		      uint64_t *boxes)
{
	const struct pl_rule *r = it->rule >= 0 ? &s->rules[it->rule] : NULL;
	unsigned nd = r ? CM_MIN(r->ndims, it->ndim) : 0;

	*share = 1;
	*boxes = 1;
	for (unsigned d = 0; d < it->ndim; d++)
		if (!it->shape[d])
			*share = 0, *boxes = 0;
	for (unsigned d = 0; d < nd && *boxes; d++) {
		uint64_t ways = 1, dim = it->shape[d], chunk, filled;

		for (unsigned a = 0; a < r->dims[d].naxes; a++)
			ways *= s->shape[r->dims[d].axes[a]];
		chunk = dim / ways + (dim % ways != 0);
		filled = dim / chunk + (dim % chunk != 0);   /* chunks that hold rows */
		*share *= (double)filled / (double)ways;
		*boxes *= filled;
	}
}

/* One unsigned __int128 sum, saturated to UINT64_MAX at the end. */
typedef unsigned __int128 u128;

uint64_t pl_estimate_bytes(const struct pl_estimate *c)
{
	const u128 per_device = 2 * sizeof(uint32_t)        /* spec copy: ids, processes */
				+ sizeof(uint32_t);         /* devices by process */
	const u128 per_process = sizeof(struct pl_stats) + 1 + sizeof(uint32_t);
	const u128 per_slot = 2 * sizeof(uint32_t) + sizeof(uint64_t); /* ids, staging */
	const u128 per_planned_slot = sizeof(uint32_t[PL_MAX_AXES]); /* mesh coordinates */
	const u128 per_item = sizeof(struct pl_item) + 64 + sizeof(struct file_part);
	const u128 per_part = sizeof(struct pl_part);
	const u128 per_region = sizeof(struct region) + sizeof(struct level) + sizeof(uint32_t) +
				sizeof(struct req_copy);
	const u128 per_unique = sizeof(struct group) + sizeof(struct pl_citem) +
				sizeof(struct pl_block) + sizeof(struct aligned_block) +
				2 * (sizeof(struct run_range) + sizeof(uint32_t));
	/* Read once, per box shared by processes: its candidate, assignment,
	 * order, owner, batch, size and broadcast (readonce.c, assign.c). */
	const u128 ro_per_box = 192, ro_per_sharer = 2 * sizeof(uint32_t);
	const u128 ro_per_device = sizeof(uint32_t[PL_MAX_AXES]) + sizeof(struct pl_box) +
				   2 * sizeof(uint32_t);
	u128 b = 64 << 10;

	b += per_device * c->ndev + per_process * c->nprocs;
	b += per_slot * c->slots + per_planned_slot * c->stat_slots;
	b += per_item * c->nitems + per_part * c->nparts + 256 * (u128)c->nfiles;
	b += sizeof(struct pl_shard) * (u128)c->slots * c->nitems;
	b += (u128)(sizeof(struct cm_copy) * (double)c->slots * c->filled);
	b += (u128)(per_region * c->file_regions + per_unique * c->file_unique);
	/* The memo of slot shards (slotcache.c), sized for the largest process. */
	b += (u128)pl_slot_cache_entries(c->stat_slots, c->nitems) *
	     (c->stat_slots * sizeof(struct slot_shard) + sizeof(struct slot_key));
	if (c->read_once)
		b += ro_per_device * c->ndev + (u128)c->nitems * c->ndev / 8 +
		     (u128)c->slots * c->nitems + ro_per_box * c->ro_boxes +
		     (u128)(ro_per_sharer * c->ro_sharers);
	return b > UINT64_MAX ? UINT64_MAX : (uint64_t)b;
}
