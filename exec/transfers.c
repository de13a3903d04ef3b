/*
 * transfers.c - the transfers pass (transfers.h): the plan of one batch of
 * payloads. It was planner/transfer_batch.c; reading a batch is execution,
 * so it is a pass over the planner's transfer list (planner.h queries),
 * and the planner assembles the result (pl_plan_from_parts).
 *
 *   collect   the payloads p's process roots in the batch, in p's order
 *             (shard order), and the same by file and offset;
 *   layout    each payload at the next buffer offset congruent with its
 *             file offset modulo 4096;
 *   reads     the payloads' spans (pl_xread_add: those of a file that
 *             touch after alignment merge), cut into requests of at most
 *             the chunk, each with its copies into the payloads it
 *             touches; a request that one payload holds whole, aligned,
 *             is read straight into the buffer (CM_READ_DIRECT).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common.h"
#include "transfers.h"

struct xb {
	const struct pl_plan *main;
	struct pl_xfiles f;         /* the files' sizes and alignment */
	uint64_t chunk;
	struct pl_xfer_info *x;     /* the batch's payloads, shard order */
	size_t *byoff;              /* their shards, file and offset order */
	size_t n;
	char (*name)[40];
	const char **names;
	uint64_t *nbytes, *offset;
	struct pl_parts q;
	size_t capreads, capcopies;
};

static int off_cmp(const void *pa, const void *pb, void *arg)
{
	const struct pl_xfer_info *x = arg;
	const struct pl_xfer_info *a = &x[*(const size_t *)pa], *b = &x[*(const size_t *)pb];

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->offset < b->offset ? -1 : a->offset > b->offset;
}

/* The batch's payloads in shard order, their names, and by offset. */
static int collect(struct xb *b, uint64_t batch)
{
	size_t nx = pl_plan_nxfers(b->main), n = 0;
	int me = pl_plan_process(b->main);

	b->x = cm_mallocarray(nx + 1, sizeof(*b->x));
	if (!b->x)
		return -ENOMEM;
	for (size_t k = 0; k < nx; k++) {
		pl_plan_xfer(b->main, k, &b->x[n]);
		n += b->x[n].root == me && b->x[n].batch == batch;
	}
	b->n = n;
	b->byoff = cm_mallocarray(n + 1, sizeof(*b->byoff));
	b->name = cm_mallocarray(n + 1, sizeof(*b->name));
	b->names = cm_mallocarray(n + 1, sizeof(*b->names));
	b->nbytes = cm_mallocarray(n + 1, sizeof(*b->nbytes));
	b->offset = cm_mallocarray(n + 1, sizeof(*b->offset));
	if (!b->byoff || !b->name || !b->names || !b->nbytes || !b->offset)
		return -ENOMEM;
	for (size_t k = 0; k < n; k++) {
		snprintf(b->name[k], sizeof(b->name[k]), "transfer %llu",
			 (unsigned long long)b->x[k].index);
		b->names[k] = b->name[k];
		b->nbytes[k] = b->x[k].length;
		b->byoff[k] = k;
		b->q.stats.needed_bytes += b->x[k].length;
	}
	qsort_r(b->byoff, n, sizeof(*b->byoff), off_cmp, b->x);
	return 0;
}

/* Payload k at the next offset congruent with its file offset. */
static void layout(struct xb *b)
{
	uint64_t cur = 0;

	for (size_t k = 0; k < b->n; k++) {
		uint64_t want = b->x[k].offset % PL_CONGRUENT_ALIGN;
		uint64_t off = cm_align_down(cur, PL_CONGRUENT_ALIGN) + want;

		if (off < cur)
			off += PL_CONGRUENT_ALIGN;
		b->offset[k] = off;
		cur = off + b->x[k].length;
	}
	b->q.staging = cur;
}

static int push_read(struct xb *b, const struct pl_xread *sp, uint64_t off, uint64_t len)
{
	struct pl_parts *q = &b->q;
	uint64_t size = b->f.sizes[sp->file];

	if (cm_grow((void **)&q->reads, &b->capreads, q->nreads + 1, sizeof(*q->reads)))
		return -ENOMEM;
	q->reads[q->nreads++] = (struct cm_read){ .off = off, .len = (uint32_t)len,
		.min_len = (uint32_t)(CM_MIN(off + len, sp->last) - off), .file = sp->file,
		.first_copy = q->ncopies };
	q->max_read = CM_MAX(q->max_read, len);
	q->stats.requests++;
	q->stats.read_bytes += off < size ? CM_MIN(len, size - off) : 0;
	return 0;
}

/* Copies of read rd out of payloads byoff[k0..k1). */
static int read_copies(struct xb *b, struct cm_read *rd, size_t k0, size_t k1)
{
	struct pl_parts *q = &b->q;
	const struct pl_align *al = &b->f.align[rd->file];
	uint64_t A = CM_MAX(al->offset_align, al->mem_align);

	for (size_t k = k0; k < k1; k++) {
		size_t sh = b->byoff[k];
		const struct pl_xfer_info *x = &b->x[sh];
		uint64_t lo = CM_MAX(rd->off, x->offset);
		uint64_t hi = CM_MIN(rd->off + rd->min_len, x->offset + x->length);

		if (lo >= hi)
			continue;
		if (cm_grow((void **)&q->copies, &b->capcopies, q->ncopies + 1, sizeof(*q->copies)))
			return -ENOMEM;
		q->copies[q->ncopies++] = (struct cm_copy){ .src = (uint32_t)(lo - rd->off),
			.len = (uint32_t)(hi - lo), .count = 1, .src_stride = (uint32_t)(hi - lo),
			.dst = b->offset[sh] + (lo - x->offset), .dev = 0, .shard = (uint32_t)sh };
		rd->ncopies++;
	}
	/* Straight into the buffer: one payload holds the whole read. */
	if (rd->ncopies == 1 && rd->min_len == rd->len && q->copies[rd->first_copy].len == rd->len &&
	    al->offset_align > 1 && q->copies[rd->first_copy].dst % A == 0)
		rd->flags |= CM_READ_DIRECT;
	return 0;
}

/* Requests and copies of span sp, whose payloads are byoff[k0..k1). */
static int span_reads(struct xb *b, const struct pl_xread *sp, size_t k0, size_t k1)
{
	uint64_t c = pl_xread_request_max(&b->f.align[sp->file], b->chunk);

	for (uint64_t pos = sp->start; pos < sp->end;) {
		uint64_t end = CM_MIN(pos + c, sp->end);
		int ret;

		if ((ret = push_read(b, sp, pos, end - pos)) ||
		    (ret = read_copies(b, &b->q.reads[b->q.nreads - 1], k0, k1)))
			return ret;
		pos = end;
	}
	return 0;
}

/* The spans of the payloads, each cut into requests. */
static int batch_reads(struct xb *b)
{
	struct pl_xread *sp = cm_mallocarray(b->n + 1, sizeof(*sp));
	uint8_t *used = cm_calloc(b->f.nfiles + 1, 1);
	size_t ns = 0, k = 0;
	int ret = 0;

	if (!sp || !used) {
		cm_free(sp);
		cm_free(used);
		return -ENOMEM;
	}
	for (size_t i = 0; i < b->n; i++) {
		const struct pl_xfer_info *x = &b->x[b->byoff[i]];

		pl_xread_add(sp, &ns, x->file, x->offset, x->length, b->f.align);
	}
	for (size_t s = 0; s < ns && !ret; s++) {
		size_t k1 = k;

		while (k1 < b->n && b->x[b->byoff[k1]].file == sp[s].file &&
		       b->x[b->byoff[k1]].offset < sp[s].end)
			k1++;
		ret = span_reads(b, &sp[s], k, k1);
		b->q.stats.blocks++;
		b->q.stats.files_opened += !used[sp[s].file];
		used[sp[s].file] = 1;
		k = k1;
	}
	cm_free(sp);
	cm_free(used);
	return ret;
}

int ex_xfer_batch_plan(const struct pl_plan *p, uint64_t batch, uint64_t chunk,
		       struct pl_plan **out, struct cm_err *e)
{
	struct xb b = { .main = p, .chunk = chunk };
	int ret;

	*out = NULL;
	pl_plan_xfiles(p, &b.f);
	ret = collect(&b, batch);
	if (!ret) {
		layout(&b);
		ret = batch_reads(&b);
	}
	b.q.nshards = b.n;
	b.q.names = b.names;
	b.q.nbytes = b.nbytes;
	b.q.offset = b.offset;
	if (ret) {
		cm_free(b.q.reads);
		cm_free(b.q.copies);
		ret = cm_err_set(e, ret, "plan: out of memory");
	} else {
		ret = pl_plan_from_parts(p, &b.q, out, e);
	}
	cm_free(b.x);
	cm_free(b.byoff);
	cm_free(b.name);
	cm_free(b.names);
	cm_free(b.nbytes);
	cm_free(b.offset);
	return ret;
}
