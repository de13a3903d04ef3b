/*
 * stream.c - clipping a plan to one window of staging (stream.h). Pure
 * data: the plan's reads and copies in, a smaller job out. A read whose
 * copies straddle two windows is read once for each (only reads at
 * window edges; the loader sizes windows so that they are few).
 */
#include <errno.h>
#include <string.h>

#include "rl_common.h"
#include "stream.h"

/* Copy c clipped to [lo, hi) of its device, rebased to base: up to three
 * copies in out; returns how many. */
static unsigned clip_copy(const struct rl_copy *c, const struct eng_range *w,
			  struct rl_copy out[3])
{
	uint64_t total = (uint64_t)c->len * c->count, a, b;
	unsigned n = 0;

	if (!total || c->dev != w->dev)
		return 0;
	a = RL_MAX(w->lo, c->dst);
	b = RL_MIN(w->hi, c->dst + total);
	if (a >= b)
		return 0;
	a -= c->dst; /* positions in the copy's contiguous output */
	b -= c->dst;
	while (a < b && n < 3) {
		uint64_t k = a / c->len, in = a % c->len;
		struct rl_copy *o = out + n++;

		*o = *c;
		o->dev = 0;
		o->src = (uint32_t)(c->src + k * c->src_stride + in);
		o->dst = c->dst + a - w->base;
		if (in || b - a < c->len) { /* a partial run */
			o->len = (uint32_t)RL_MIN(c->len - in, b - a);
			o->count = 1;
			o->src_stride = o->len;
		} else {
			o->count = (uint32_t)((b - a) / c->len);
		}
		a += (uint64_t)o->len * o->count;
	}
	return n;
}

/* Adds read r's clipped copies (if any) and r itself to j. */
static int add_read(const struct rl_read *r, const struct rl_copy *copies,
		    const struct eng_range *w, struct eng_wjob *j)
{
	size_t first = j->ncopies;
	struct rl_read *nr;

	for (uint32_t i = 0; i < r->ncopies; i++) {
		struct rl_copy out[3];
		unsigned n = clip_copy(copies + r->first_copy + i, w, out);

		if (rl_grow((void **)&j->copies, &j->cap_copies, j->ncopies + n, sizeof(*out)))
			return -ENOMEM;
		memcpy(j->copies + j->ncopies, out, n * sizeof(*out));
		j->ncopies += n;
	}
	if (j->ncopies == first)
		return 0;
	if (rl_grow((void **)&j->reads, &j->cap_reads, j->nreads + 1, sizeof(*nr)))
		return -ENOMEM;
	nr = j->reads + j->nreads++;
	*nr = *r;
	nr->first_copy = first;
	nr->ncopies = (uint32_t)(j->ncopies - first);
	/* Direct only when the one copy is still the whole read. */
	if (nr->ncopies != 1 || j->copies[first].len != r->len || j->copies[first].count != 1)
		nr->flags &= ~RL_READ_DIRECT;
	j->read_bytes += r->len;
	return 0;
}

int eng_window_job(const struct rl_read *reads, size_t nreads, const struct rl_copy *copies,
		   const struct eng_range *w, struct eng_wjob *j)
{
	j->nreads = j->ncopies = 0;
	j->read_bytes = 0;
	for (size_t i = 0; i < nreads; i++)
		if (add_read(reads + i, copies, w, j) < 0)
			return -ENOMEM;
	return 0;
}

void eng_wjob_free(struct eng_wjob *j)
{
	rl_free(j->reads);
	rl_free(j->copies);
	memset(j, 0, sizeof(*j));
}
