/*
 * assign.c - who reads what across processes (Megatron's distributed
 * loading): every piece some processes need is read by exactly one of
 * them, balanced greedily by bytes, preferring a process that already
 * opens the piece's file, and the rest receive it by broadcast in batches
 * bounded by memory.
 *
 * Every process runs this on the same inputs and gets the same answer:
 * the order is total (ties broken by index) and no input is local.
 */
#include <errno.h>
#include <stdlib.h>

#include "pl_private.h"

struct order {
	uint32_t nelig;
	uint64_t group;             /* bytes of the item's file group */
	uint64_t size;
	size_t idx;
};

static int order_cmp(const void *pa, const void *pb)
{
	const struct order *a = pa, *b = pb;

	if (a->nelig != b->nelig)
		return a->nelig < b->nelig ? -1 : 1;   /* fewer choices first */
	if (a->group != b->group)
		return a->group > b->group ? -1 : 1;   /* larger file groups first */
	if (a->size != b->size)
		return a->size > b->size ? -1 : 1;     /* larger items first */
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int file_cmp(const void *pa, const void *pb, void *arg)
{
	const struct pl_assign_item *it = arg;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;

	if (it[a].file != it[b].file)
		return it[a].file < it[b].file ? -1 : 1;
	return a < b ? -1 : a > b;
}

int pl_assign(const struct pl_assign_item *it, size_t n, unsigned nprocs,
	      const uint8_t *reads, uint32_t nfiles, int32_t *owner, uint64_t *load)
{
	struct order *ord = rl_mallocarray(n + 1, sizeof(*ord));
	uint32_t *byfile = rl_mallocarray(n + 1, sizeof(*byfile));

	if (!ord || !byfile) {
		rl_free(ord);
		rl_free(byfile);
		return -ENOMEM;
	}
	/* File groups: total bytes of the items of each file. */
	for (size_t i = 0; i < n; i++)
		byfile[i] = (uint32_t)i;
	qsort_r(byfile, n, sizeof(*byfile), file_cmp, (void *)it);
	for (size_t i = 0; i < n;) {
		size_t j = i;
		uint64_t sum = 0;

		while (j < n && it[byfile[j]].file == it[byfile[i]].file)
			sum += it[byfile[j++]].size;
		for (; i < j; i++)
			ord[byfile[i]].group = sum;
	}
	for (size_t i = 0; i < n; i++) {
		ord[i].nelig = it[i].nelig;
		ord[i].size = it[i].size;
		ord[i].idx = i;
	}
	qsort(ord, n, sizeof(*ord), order_cmp);
	for (size_t k = 0; k < n; k++) {
		const struct pl_assign_item *c = &it[ord[k].idx];
		int32_t best = -1, local = -1;

		for (uint32_t e = 0; e < c->nelig; e++) {
			uint32_t p = c->elig[e];

			if (p >= nprocs)
				continue;
			if ((int32_t)p == c->hint) {
				best = local = (int32_t)p;
				break;
			}
			if (best < 0 || load[p] < load[best] ||
			    (load[p] == load[best] && (int32_t)p < best))
				best = (int32_t)p;
			if (reads && c->file < nfiles && reads[(size_t)p * nfiles + c->file] &&
			    (local < 0 || load[p] < load[local] ||
			     (load[p] == load[local] && (int32_t)p < local)))
				local = (int32_t)p;
		}
		if (local >= 0)
			best = local;
		owner[ord[k].idx] = best;
		if (best >= 0)
			load[best] += c->size;
	}
	rl_free(ord);
	rl_free(byfile);
	return 0;
}

size_t pl_batches(const uint64_t *sizes, size_t n, uint64_t limit, uint32_t *batch)
{
	size_t nb = 0;
	uint64_t cur = 0;

	for (size_t i = 0; i < n; i++) {
		if (!i || cur + sizes[i] > limit || cur + sizes[i] < cur) {
			nb++;
			cur = 0;
		}
		batch[i] = (uint32_t)(nb - 1);
		cur += sizes[i];
		if (cur > limit) /* an oversize item goes alone */
			cur = limit + 1;
	}
	return nb;
}
