/*
 * window.c - the windows pass (window.h): cutting staging into ranges
 * (it was api/stream.c's) and clipping a plan to one of them (it was
 * engine/stream.c's). Pure data: the plan in, ranges and smaller jobs
 * out. A read whose copies straddle two windows is read for each, only
 * the part each takes unless a checksum cover needs whole reads.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "window.h"

/* ------------------------------------------------------------------ */
/* Ranges and pieces of a plan */

struct ext {
	unsigned dev;
	uint64_t off, end;
	size_t shard;
};

static int ext_cmp(const void *a, const void *b)
{
	const struct ext *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int push_range(struct ex_windows *ws, size_t *cap, const struct ex_range *r)
{
	if (cm_grow((void **)&ws->w, cap, ws->n + 1, sizeof(*ws->w)) < 0)
		return -ENOMEM;
	ws->w[ws->n].r = *r;
	ws->w[ws->n].first = ws->npieces;
	ws->w[ws->n].n = 0;
	ws->n++;
	return 0;
}

static int push_piece(struct ex_windows *ws, size_t *cap, const struct ex_piece *p)
{
	if (cm_grow((void **)&ws->pieces, cap, ws->npieces + 1, sizeof(*ws->pieces)) < 0)
		return -ENOMEM;
	ws->pieces[ws->npieces++] = *p;
	ws->w[ws->n - 1].n++;
	return 0;
}

/* Cuts the extents of one device (sorted by offset, none overlapping)
 * into ranges of at most a window. */
static int cut(struct ex_windows *ws, const struct ext *x, size_t n, uint64_t window,
	       uint64_t page, size_t *rcap, size_t *pcap)
{
	uint64_t cur = 0;

	for (size_t j = 0; j < n;) {
		struct ex_range r;

		if (x[j].end <= cur) {
			j++;
			continue;
		}
		r.dev = x[j].dev;
		r.lo = CM_MAX(cur, x[j].off);
		r.base = cm_align_down(r.lo, page);
		r.hi = r.base + window;
		if (push_range(ws, rcap, &r) < 0)
			return -ENOMEM;
		for (size_t k = j; k < n && x[k].off < r.hi; k++) {
			uint64_t a = CM_MAX(x[k].off, r.lo), b = CM_MIN(x[k].end, r.hi);
			struct ex_piece p = { x[k].shard, r.dev, a - x[k].off, b - a, a - r.base };

			if (b > a && push_piece(ws, pcap, &p) < 0)
				return -ENOMEM;
		}
		cur = r.hi;
	}
	return 0;
}

int ex_windows_cut(struct ex_windows *ws, const struct pl_exec *ex, uint64_t window,
		   uint64_t page)
{
	struct ext *x = cm_calloc(ex->nshards ? ex->nshards : 1, sizeof(*x));
	size_t n = 0, rcap = 0, pcap = 0;
	int ret = 0;

	memset(ws, 0, sizeof(*ws));
	ws->zero = cm_calloc(ex->nshards ? ex->nshards : 1, sizeof(*ws->zero));
	if (!x || !ws->zero) {
		cm_free(x);
		return -ENOMEM;
	}
	for (size_t i = 0; i < ex->nshards; i++) {
		const struct pl_shard *sh = ex->shards + i;

		if (!sh->nbytes)
			ws->zero[ws->nzero++] = i;
		else if (!ex->received || !ex->received[i]) /* read once: transfers bring it */
			x[n++] = (struct ext){ sh->dev, sh->offset, sh->offset + sh->nbytes, i };
	}
	qsort(x, n, sizeof(*x), ext_cmp);
	for (size_t g = 0, e; g < n && ret == 0; g = e) { /* device by device */
		for (e = g + 1; e < n && x[e].dev == x[g].dev; e++)
			;
		ret = cut(ws, x + g, e - g, window, page, &rcap, &pcap);
	}
	cm_free(x);
	return ret;
}

void ex_windows_free(struct ex_windows *ws)
{
	cm_free(ws->w);
	cm_free(ws->pieces);
	cm_free(ws->zero);
	memset(ws, 0, sizeof(*ws));
}

/* ------------------------------------------------------------------ */
/* The batch of one range */

unsigned ex_clip_copy(const struct cm_copy *c, const struct ex_range *w,
		      struct cm_copy out[3])
{
	uint64_t run = cm_copy_out(c, c->len), total = run * c->count, a, b;
	unsigned n = 0;

	if (!total || c->dev != w->dev)
		return 0;
	a = CM_MAX(w->lo, c->dst);
	b = CM_MIN(w->hi, c->dst + total);
	if (a >= b)
		return 0;
	a -= c->dst; /* positions in the copy's contiguous output */
	b -= c->dst;
	while (a < b && n < 3) {
		uint64_t k = a / run, in = a % run;
		struct cm_copy *o = out + n++;

		*o = *c;
		o->dev = 0;
		o->src = (uint32_t)(c->src + k * c->src_stride + cm_copy_in(c, in));
		o->dst = c->dst + a - w->base;
		if (in || b - a < run) { /* a partial run */
			o->len = (uint32_t)cm_copy_in(c, CM_MIN(run - in, b - a));
			o->count = 1;
			o->src_stride = o->len;
		} else {
			o->count = (uint32_t)((b - a) / run);
		}
		a += cm_copy_out(o, o->len) * o->count;
	}
	return n;
}

/* Read nr cut to what its copies c[0, n) take: from the unit below their
 * first source byte to the unit above their last (unit: EX_CLIP_UNIT, or
 * the largest power of two dividing the offset when smaller, so the read
 * stays as aligned as it was), the copies rebased. */
static void clip_read(struct cm_read *nr, struct cm_copy *c, size_t n)
{
	uint64_t lo = UINT64_MAX, hi = 0, unit = EX_CLIP_UNIT;

	if (nr->off)
		unit = CM_MIN(unit, nr->off & (~nr->off + 1));
	for (size_t i = 0; i < n; i++) {
		uint64_t span = (uint64_t)(c[i].count - 1) * c[i].src_stride + c[i].len;

		lo = CM_MIN(lo, (uint64_t)c[i].src);
		hi = CM_MAX(hi, c[i].src + span);
	}
	lo = cm_align_down(lo, unit);
	hi = CM_MIN(cm_align_up(hi, unit), (uint64_t)nr->len);
	if (lo == 0 && hi == nr->len)
		return;
	for (size_t i = 0; i < n; i++)
		c[i].src -= (uint32_t)lo;
	nr->off += lo;
	nr->len = (uint32_t)(hi - lo);
	/* bytes past min_len may lie past the end of the file */
	nr->min_len = (uint32_t)(CM_MIN(CM_MAX((uint64_t)nr->min_len, lo), hi) - lo);
	nr->flags &= ~CM_READ_DIRECT;
}

/* Direct read nr (its copies c[0, n) clipped to a window) cut to exactly
 * the part they take, when they tile it and its ends lie on unit bytes
 * of the file (or are the read's): it stays direct, read straight
 * into the window, where a clipped read needs a bounce buffer. Window
 * edges are page multiples in staging, where a direct read's bytes lie as
 * aligned as in the file, so the edges of a long read cut there. 1 when
 * cut, else 0 with nr unchanged. */
static int cut_direct(struct cm_read *nr, struct cm_copy *c, size_t n, uint32_t unit)
{
	struct cm_read cut = *nr;
	uint64_t a = c[0].src, b = a;

	for (size_t i = 0; i < n; i++) {
		if (c[i].src != b || c[i].count != 1)
			return 0;
		b += c[i].len;
	}
	if ((a && (nr->off + a) % unit) || (b != nr->len && (nr->off + b) % unit))
		return 0;
	cut.off += a;
	cut.len = cut.min_len = (uint32_t)(b - a);
	for (size_t i = 0; i < n; i++)
		c[i].src -= (uint32_t)a;
	if (!cm_read_tiles(&cut, c)) {
		for (size_t i = 0; i < n; i++)
			c[i].src += (uint32_t)a;
		return 0;
	}
	*nr = cut;
	return 1;
}

/* j's last read, direct, ends off its file's unit (a file's last bytes):
 * cut there into a direct head and a tail of less than a unit
 * bytes read through a bounce buffer, the copy across the cut split in
 * two. The engine reads a direct read of an unaligned length through a
 * bounce buffer as long as the read, and every worker of the session
 * holds such buffers, pinned. Returns 0 or -ENOMEM (j unchanged). */
static int split_tail(struct ex_wjob *j)
{
	struct cm_read *nr = j->reads + j->nreads - 1, *tail;
	uint32_t unit = ex_wjob_unit(j, nr->file), k = 0, cut;
	uint64_t end = nr->off + nr->len, head = cm_align_down(end, unit) - nr->off;
	struct cm_copy *c;

	if (nr->off % unit || !(end % unit) || !head)
		return 0;
	if (cm_grow((void **)&j->copies, &j->cap_copies, j->ncopies + 1, sizeof(*c)) ||
	    cm_grow((void **)&j->reads, &j->cap_reads, j->nreads + 1, sizeof(*nr)))
		return -ENOMEM;
	nr = j->reads + j->nreads - 1;
	c = j->copies + nr->first_copy;
	while (c[k].src + c[k].len <= head) /* the copy the cut falls in (they tile nr) */
		k++;
	cut = (uint32_t)(head - c[k].src);
	if (cut) { /* split it: [src, head) stays, [head, ...) goes to the tail */
		memmove(c + k + 1, c + k, (nr->ncopies - k) * sizeof(*c));
		c[k].len = c[k].src_stride = cut;
		c[k + 1].src = (uint32_t)head;
		c[k + 1].len = c[k + 1].src_stride = c[k + 1].len - cut;
		c[k + 1].dst += cut;
		k++;
		nr->ncopies++;
		j->ncopies++;
	}
	for (uint32_t i = k; i < nr->ncopies; i++)
		c[i].src -= (uint32_t)head;
	tail = j->reads + j->nreads++;
	*tail = *nr;
	tail->off += head;
	tail->len = tail->min_len = (uint32_t)(nr->len - head);
	tail->first_copy = nr->first_copy + k;
	tail->ncopies = nr->ncopies - k;
	tail->flags &= ~CM_READ_DIRECT;
	nr->len = nr->min_len = (uint32_t)head;
	nr->ncopies = k;
	return 0;
}

/* Adds read r's clipped copies (if any) and r itself (its part that
 * they take, with clip) to j. */
static int add_read(const struct cm_read *r, const struct cm_copy *copies,
		    const struct ex_range *w, int clip, struct ex_wjob *j)
{
	size_t first = j->ncopies;
	struct cm_read *nr;
	int split = clip;

	for (uint32_t i = 0; i < r->ncopies; i++) {
		struct cm_copy out[3];
		unsigned n = ex_clip_copy(copies + r->first_copy + i, w, out);

		if (!n) /* the copy lands outside the range (copies may still be NULL) */
			continue;
		if (cm_grow((void **)&j->copies, &j->cap_copies, j->ncopies + n, sizeof(*out)))
			return -ENOMEM;
		memcpy(j->copies + j->ncopies, out, n * sizeof(*out));
		j->ncopies += n;
	}
	if (j->ncopies == first)
		return 0;
	if (cm_grow((void **)&j->reads, &j->cap_reads, j->nreads + 1, sizeof(*nr)))
		return -ENOMEM;
	nr = j->reads + j->nreads++;
	*nr = *r;
	nr->first_copy = first;
	nr->ncopies = (uint32_t)(j->ncopies - first);
	/* Direct when the clipped copies still tile the whole read, or
	 * (clipped) the part of it they take. */
	if (cm_read_tiles(nr, j->copies + first) ||
	    (clip && (nr->flags & CM_READ_DIRECT) &&
	     cut_direct(nr, j->copies + first, nr->ncopies, ex_wjob_unit(j, nr->file))))
		clip = 0;
	else
		nr->flags &= ~CM_READ_DIRECT;
	if (clip)
		clip_read(nr, j->copies + first, nr->ncopies);
	j->read_bytes += nr->len;
	return (nr->flags & CM_READ_DIRECT) && split ? split_tail(j) : 0;
}

/* Each file's unit (ex_wjob.unit), once per plan. */
static int units(const struct cm_read *reads, size_t nreads, struct ex_wjob *j)
{
	size_t n = 0;

	for (size_t i = 0; i < nreads; i++)
		n = CM_MAX(n, (size_t)reads[i].file + 1);
	j->unit = cm_mallocarray(n ? n : 1, sizeof(*j->unit));
	if (!j->unit)
		return -ENOMEM;
	j->nunit = n;
	for (size_t f = 0; f < n; f++)
		j->unit[f] = EX_EDGE_ALIGN;
	for (size_t i = 0; i < nreads; i++)
		if ((reads[i].flags & CM_READ_DIRECT) && reads[i].off)
			j->unit[reads[i].file] = (uint32_t)CM_MIN(
				j->unit[reads[i].file], reads[i].off & (~reads[i].off + 1));
	return 0;
}

int ex_window_job(const struct cm_read *reads, size_t nreads, const struct cm_copy *copies,
		  const struct ex_range *w, int clip, struct ex_wjob *j)
{
	if (!j->unit && units(reads, nreads, j) < 0)
		return -ENOMEM;
	j->nreads = j->ncopies = 0;
	j->read_bytes = 0;
	for (size_t i = 0; i < nreads; i++)
		if (add_read(reads + i, copies, w, clip, j) < 0)
			return -ENOMEM;
	return 0;
}

void ex_wjob_free(struct ex_wjob *j)
{
	cm_free(j->reads);
	cm_free(j->copies);
	cm_free(j->unit);
	memset(j, 0, sizeof(*j));
}
