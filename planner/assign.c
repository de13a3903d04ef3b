/*
 * assign.c - who reads what across processes (Megatron's distributed
 * loading): every piece some processes need is read by exactly one of
 * them, balanced by bytes: large spans of bytes are cut into one
 * contiguous share per reader by water-filling (pl_waterfill), small ones
 * go whole to one reader, greedily, preferring a process that already
 * opens the piece's file (pl_assign); the rest receive it by transfer in
 * batches bounded by memory (pl_batches).
 *
 * Every process runs this on the same inputs and gets the same answer:
 * the order is total (ties broken by index) and no input is local.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

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
	struct order *ord = cm_mallocarray(n + 1, sizeof(*ord));
	uint32_t *byfile = cm_mallocarray(n + 1, sizeof(*byfile));

	if (!ord || !byfile) {
		cm_free(ord);
		cm_free(byfile);
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
	cm_free(ord);
	cm_free(byfile);
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

struct by_load_arg {
	const uint32_t *readers;
	const uint64_t *load;
};

/* Reader indices in order of load, then process: water-filling fills them so. */
static int by_load(const void *pa, const void *pb, void *arg)
{
	const struct by_load_arg *x = arg;
	uint32_t a = *(const uint32_t *)pa, b = *(const uint32_t *)pb;
	uint64_t la = x->load[x->readers[a]], lb = x->load[x->readers[b]];

	if (la != lb)
		return la < lb ? -1 : 1;
	return a < b ? -1 : a > b;
}

/*
 * Shares of total bytes that bring the least-loaded readers up to one
 * level (the remainder, one byte each, to the least loaded): share[i] for
 * readers[i]. ord: scratch of nr entries.
 */
static void level_shares(const uint32_t *readers, uint32_t nr, uint64_t total,
			 const uint64_t *load, uint32_t *ord, uint64_t *share)
{
	struct by_load_arg arg = { readers, load };
	unsigned __int128 sum = 0, level = 0, rem;
	uint32_t m = 0;

	for (uint32_t i = 0; i < nr; i++) {
		ord[i] = i;
		share[i] = 0;
	}
	qsort_r(ord, nr, sizeof(*ord), by_load, &arg);
	while (m < nr) {
		sum += load[readers[ord[m++]]];
		level = (total + sum) / m;
		if (m == nr || level <= load[readers[ord[m]]])
			break;
	}
	rem = total + sum - level * m;
	for (uint32_t j = 0; j < m; j++)
		share[ord[j]] = (uint64_t)(level - load[readers[ord[j]]]) + (j < rem);
}

/* Position pos of the segments' concatenation moved to the nearest
 * multiple of its segment's alignment in file offsets (ties down), within
 * the segment. */
static uint64_t round_cut(const struct pl_seg *seg, size_t nseg, uint64_t pos)
{
	uint64_t cum = 0, abs, down, up, align;
	size_t j = 0;

	while (j < nseg && pos >= cum + seg[j].len) {
		cum += seg[j].len;
		j++;
	}
	if (j == nseg || (align = seg[j].align) <= 1)
		return pos;
	abs = seg[j].off + (pos - cum);
	down = cm_align_down(abs, align);
	up = down + align;
	abs = abs - down <= up - abs ? down : up;
	abs = CM_MAX(abs, seg[j].off);
	abs = CM_MIN(abs, seg[j].off + seg[j].len);
	return cum + (abs - seg[j].off);
}

int pl_waterfill(const struct pl_seg *seg, size_t nseg, const uint32_t *readers,
		 uint32_t nr, uint64_t *load, uint64_t *cut)
{
	uint64_t total = 0, pos = 0, *share = cm_mallocarray(nr + 1, 2 * sizeof(uint64_t));
	uint32_t *ord = (uint32_t *)(share ? share + nr + 1 : NULL);

	for (size_t j = 0; j < nseg; j++)
		total += seg[j].len;
	if (!share)
		return -ENOMEM;
	cut[0] = 0;
	cut[nr] = total;
	level_shares(readers, nr, total, load, ord, share);
	for (uint32_t i = 1; i < nr; i++) {
		pos += share[i - 1];
		/* The ends stay: a reader with no share gets no byte. */
		cut[i] = pos && pos < total ? round_cut(seg, nseg, pos) : pos;
		cut[i] = CM_MAX(cut[i], cut[i - 1]);
	}
	for (uint32_t i = 0; i < nr; i++)
		load[readers[i]] += cut[i + 1] - cut[i];
	cm_free(share);
	return 0;
}
