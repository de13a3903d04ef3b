/*
 * slotcache.c - the shards of a plain tensor on every slot of the process
 * being planned, memoized by what they depend on: the rule, the element
 * bits and the shape. Checkpoints repeat a few shapes under a few rules
 * (100,000 tensors of a model are a dozen kinds per layer), so the boxes
 * and byte runs of most tensors are found rather than computed; only where
 * the tensor's data starts differs, and runs are kept relative to it.
 *
 * A direct-mapped table (the key's hash picks the entry; a miss replaces
 * it): deterministic, and a layer's cycle of kinds keeps hitting where an
 * LRU list shorter than the cycle would always miss. Its size is bounded
 * (PL_SLOT_CACHE_MAX bytes), so processes with many devices get few entries
 * or none, and then plan every slot the long way, as they did before.
 */
#include <string.h>

#include "plan_ctx.h"

/* Entries at most: a model's kinds of tensors fit with room for collisions. */
#define MAX_ENTRIES 64u

size_t pl_slot_cache_entries(uint64_t slots, uint64_t nitems)
{
	uint64_t per = (slots ? slots : 1) * sizeof(struct slot_shard) + sizeof(struct slot_key);
	uint64_t n = PL_SLOT_CACHE_MAX / per;

	if (n > MAX_ENTRIES)
		n = MAX_ENTRIES;
	if (n > nitems)
		n = nitems;
	return (size_t)n;
}

int pl_slot_cache_alloc(struct ctx *x, uint32_t max_slots)
{
	x->ncache = x->opts->no_memo ? 0 : pl_slot_cache_entries(max_slots, x->plan->nitems);
	x->cache_slots = max_slots;
	if (!x->ncache)
		return 0;
	x->ckeys = cm_calloc(x->ncache, sizeof(*x->ckeys));
	x->cshards = cm_mallocarray(x->ncache * (size_t)max_slots, sizeof(*x->cshards));
	if (!x->ckeys || !x->cshards)
		return cm_err_set(x->err, -ENOMEM, "plan: out of memory");
	return 0;
}

void pl_slot_cache_reset(struct ctx *x)
{
	for (size_t i = 0; i < x->ncache; i++)
		x->ckeys[i].valid = 0;
}

void pl_slot_cache_free(struct ctx *x)
{
	cm_free(x->ckeys);
	cm_free(x->cshards);
}

/* FNV-1a over the key's fields. */
static size_t key_hash(const struct slot_key *k)
{
	uint64_t h = 1469598103934665603ull;
	uint64_t v[3] = { (uint64_t)(int64_t)k->rule, k->ndim, k->bits };

	for (unsigned i = 0; i < 3u + k->ndim; i++) {
		h ^= i < 3 ? v[i] : k->shape[i - 3];
		h *= 1099511628211ull;
	}
	return (size_t)(h ^ (h >> 32));
}

static int key_eq(const struct slot_key *a, const struct slot_key *b)
{
	if (!a->valid || a->rule != b->rule || a->ndim != b->ndim || a->bits != b->bits ||
	    a->to_bits != b->to_bits)
		return 0;
	for (unsigned d = 0; d < a->ndim; d++)
		if (a->shape[d] != b->shape[d])
			return 0;
	return 1;
}

/* Slot s's shard of a tensor of item it's kind, its runs from offset 0. */
static void fill_slot(struct ctx *x, const struct pl_item *it, unsigned s, struct slot_shard *e)
{
	struct pl_box b;
	uint64_t elems = 1, bits;

	pl_item_box_at(x->spec, it, x->coords[s], &b);
	e->ok = 0;
	for (unsigned d = 0; d < it->ndim; d++)
		if (cm_mul64(elems, b.stop[d] - b.start[d], &elems))
			return;
	if (cm_mul64(elems, it->to_bits, &bits) || bits % 8)
		return;
	e->nbytes = bits / 8;
	e->ok = !pl_box_runs(it->ndim, it->shape, it->bits, 0, &b, &e->r);
}

const struct slot_shard *pl_slot_shards(struct ctx *x, const struct pl_item *it)
{
	const struct pl_tensor *t = &x->ck->tensors[it->src];
	struct slot_key k = { .rule = it->rule, .ndim = it->ndim, .bits = it->bits,
			      .to_bits = it->to_bits, .valid = 1 };
	struct slot_shard *sh;
	size_t i;

	/* Plain items only, whose shape is their tensor's (parts place a
	 * slice of their source in the target: not memoized). */
	if (!x->ncache || it->nparts || t->ndim != it->ndim)
		return NULL;
	for (unsigned d = 0; d < it->ndim; d++) {
		if (t->shape[d] != it->shape[d])
			return NULL;
		k.shape[d] = it->shape[d];
	}
	i = key_hash(&k) % x->ncache;
	sh = x->cshards + i * x->cache_slots;
	if (key_eq(&x->ckeys[i], &k))
		return sh;
	for (unsigned s = 0; s < x->nslots; s++)
		fill_slot(x, it, s, &sh[s]);
	x->ckeys[i] = k;
	return sh;
}
