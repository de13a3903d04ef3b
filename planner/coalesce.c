/*
 * coalesce.c - greedy coalescing of a file's sorted items into blocks.
 *
 * A block grows while the next item starts within min_gap of its end
 * (inclusive; overlap and adjacency included) or while the merged span
 * stays <= ratio x needed bytes (inclusive). The ratio is an exact
 * fraction so that the inclusive bound holds without rounding.
 */
#include "pl_private.h"

/* span <= num/den x needed, exactly. */
static int within_ratio(uint64_t span, uint64_t needed, const struct pl_ratio *r)
{
	return (unsigned __int128)span * r->den <= (unsigned __int128)needed * r->num;
}

/* Needed bytes an item adds to a block ending at end (items sorted by start). */
static uint64_t added(const struct pl_citem *c, uint64_t end)
{
	if (c->strided || c->start >= end)
		return c->needed;
	return c->end > end ? c->end - end : 0;
}

size_t pl_coalesce(const struct pl_citem *it, size_t n, uint64_t min_gap,
		   const struct pl_ratio *ratio, struct pl_block *out)
{
	struct pl_ratio auto_r;
	size_t nb = 0;

	if (!n)
		return 0;
	if (!ratio) {
		pl_auto_ratio(it, n, min_gap, &auto_r);
		ratio = &auto_r;
	}
	out[0] = (struct pl_block){ it[0].start, it[0].end, it[0].needed, 0, 1 };
	for (size_t i = 1; i < n; i++) {
		struct pl_block *b = &out[nb];
		const struct pl_citem *c = &it[i];
		uint64_t add = added(c, b->end);
		uint64_t end = c->end > b->end ? c->end : b->end;

		if (c->start <= b->end || c->start - b->end <= min_gap ||
		    within_ratio(end - b->start, b->needed + add, ratio)) {
			b->end = end;
			b->needed += add;
			b->n++;
			continue;
		}
		out[++nb] = (struct pl_block){ c->start, c->end, c->needed, i, 1 };
	}
	return nb + 1;
}

void pl_auto_ratio(const struct pl_citem *it, size_t n, uint64_t min_gap,
		   struct pl_ratio *r)
{
	uint64_t end, needed = 0, blocks = 0, last = 0;

	r->num = r->den = 1;
	if (!n)
		return;
	/* Blocks at the gap floor, counted up to 1025; needed over the file. */
	end = it[0].end;
	needed = it[0].needed;
	blocks = 1;
	last = it[0].end;
	for (size_t i = 1; i < n; i++) {
		const struct pl_citem *c = &it[i];

		if (c->start > end && c->start - end > min_gap && blocks <= 1024)
			blocks++;
		needed += added(c, end);
		if (c->end > end)
			end = c->end;
	}
	last = end;
	if (blocks <= 1024 || !needed)
		return;
	/* Many small pieces: read the whole span once. */
	r->num = last - it[0].start;
	r->den = needed;
}
