/*
 * cover.c - the checksum cover pass (cover.h), from the loader's
 * whole-file coverage (it was api/integrity.c's) made a pass over the
 * batches of a program, so that streaming's windows hash too.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cover.h"

/* ------------------------------------------------------------------ */
/* Which files the plan reads whole */

struct span {
	uint32_t file;
	uint64_t a, b;
};

static int by_file_off(const void *x, const void *y)
{
	const struct span *p = x, *q = y;

	if (p->file != q->file)
		return p->file < q->file ? -1 : 1;
	return p->a < q->a ? -1 : p->a > q->a;
}

/* The spans the plan's reads bring of the candidate files, sorted. */
static struct span *collect(const struct pl_exec *ex, const uint8_t *cand, size_t *n)
{
	struct span *sp = cm_mallocarray(ex->nreads + 1, sizeof(*sp));

	*n = 0;
	if (!sp)
		return NULL;
	for (size_t i = 0; i < ex->nreads; i++) {
		const struct cm_read *r = ex->reads + i;

		if (r->file < ex->nfiles && cand[r->file]) {
			sp[*n].file = r->file;
			sp[*n].a = r->off;
			sp[(*n)++].b = r->off + r->min_len;
		}
	}
	qsort(sp, *n, sizeof(*sp), by_file_off);
	return sp;
}

/* 1 when file f's sorted spans sp[0..n) leave a gap in its data (from
 * data_start on): read in part. Gaps before the data (the header) are
 * the fillers' to read. */
static int gap_in_data(const struct span *sp, size_t n, uint64_t size, uint64_t data_start)
{
	uint64_t at = 0;

	for (size_t i = 0; i <= n && at < size; i++) {
		uint64_t a = i < n ? CM_MIN(sp[i].a, size) : size;

		if (a > at && a > data_start)
			return 1;
		if (i < n)
			at = CM_MAX(at, sp[i].b);
	}
	return 0;
}

int ex_cover_decide(const struct pl_exec *ex, const uint8_t *cand, uint8_t *whole)
{
	size_t nsp = 0, at = 0;
	struct span *sp = collect(ex, cand, &nsp);

	if (!sp)
		return -ENOMEM;
	for (uint32_t f = 0; f < ex->nfiles; f++) {
		size_t n = 0;

		while (at + n < nsp && sp[at + n].file == f)
			n++;
		whole[f] = cand[f] && ex->data_starts &&
			   !gap_in_data(sp + at, n, ex->file_sizes[f], ex->data_starts[f]);
		at += n;
	}
	cm_free(sp);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Fillers, batch by batch */

int ex_cover_init(struct ex_cover *c, size_t nfiles, const uint64_t *sizes, const uint8_t *hash,
		  uint32_t chunk)
{
	memset(c, 0, sizeof(*c));
	c->at = cm_calloc(nfiles + 1, sizeof(*c->at));
	if (!c->at)
		return -ENOMEM;
	c->nfiles = nfiles;
	c->sizes = sizes;
	c->hash = hash;
	c->chunk = CM_MAX(chunk, 4096u);
	return 0;
}

void ex_cover_free(struct ex_cover *c)
{
	cm_free(c->at);
	memset(c, 0, sizeof(*c));
}

static int read_order(const void *x, const void *y)
{
	const struct cm_read *p = x, *q = y;

	if (p->file != q->file)
		return p->file < q->file ? -1 : 1;
	return p->off < q->off ? -1 : p->off > q->off;
}

/* Appends copy-less reads of at most c->chunk bytes for [a, b) of file f. */
static int add_fillers(struct ex_cover *c, struct cm_read **rd, size_t *n, size_t *cap,
		       uint32_t f, uint64_t a, uint64_t b)
{
	while (a < b) {
		uint32_t len = (uint32_t)CM_MIN(b - a, c->chunk);
		struct cm_read *r;

		if (cm_grow((void **)rd, cap, *n + 1, sizeof(**rd)) < 0)
			return -ENOMEM;
		r = *rd + (*n)++;
		memset(r, 0, sizeof(*r));
		r->file = f;
		r->off = a;
		r->len = r->min_len = len;
		c->fill_bytes += len;
		c->max_fill = CM_MAX(c->max_fill, len);
		a += len;
	}
	return 0;
}

/* Whether the batch reads a hashed file. */
static int reads_hashed(const struct ex_cover *c, const struct cm_read *rd, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (rd[i].file < c->nfiles && c->hash[rd[i].file])
			return 1;
	return 0;
}

int ex_cover_batch(struct ex_cover *c, struct cm_read **rd, size_t *n, size_t *cap, int last)
{
	size_t nplan = *n;

	if (!reads_hashed(c, *rd, nplan) && !last)
		return 0;
	if (nplan > 1) /* rd may be NULL when empty */
		qsort(*rd, nplan, sizeof(**rd), read_order);
	for (size_t i = 0; i < nplan; i++) {
		struct cm_read r = (*rd)[i]; /* a copy: fillers may move the array */
		uint64_t *at = c->at + r.file;

		if (r.file >= c->nfiles || !c->hash[r.file])
			continue;
		if (r.off > *at && add_fillers(c, rd, n, cap, r.file, *at, r.off) < 0)
			return -ENOMEM;
		*at = CM_MAX(*at, CM_MIN(r.off + r.min_len, c->sizes[r.file]));
	}
	for (uint32_t f = 0; last && f < c->nfiles; f++) {
		if (c->hash[f] && add_fillers(c, rd, n, cap, f, c->at[f], c->sizes[f]) < 0)
			return -ENOMEM;
		if (c->hash[f])
			c->at[f] = c->sizes[f];
	}
	if (*n > nplan)
		qsort(*rd, *n, sizeof(**rd), read_order);
	return 0;
}
