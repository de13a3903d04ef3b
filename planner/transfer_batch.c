/*
 * transfer_batch.c - reading the payloads of one batch of transfers: the plan a
 * root executes before it sends them. One device (the batch buffer) whose
 * shards are the payloads, each placed congruently with its file offset
 * (modulo 4096), so that the aligned middle of a payload is read straight
 * into the buffer. Payloads of the same file that touch after alignment
 * are read as one span, cut into requests of at most chunk bytes
 * (transfer_spans.c, which the statistics of other processes use too, so that
 * predicted and actual bytes read agree).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transfers.h"

/* ---------------------------------------------------------------- */
/* The batch plan                                                    */
/* ---------------------------------------------------------------- */

struct bb {
	const struct pl_plan *main;
	const struct pl_opts *o;
	struct pl_plan *q;
	const struct pl_xfer **x;   /* the batch's payloads, shard order */
	const struct pl_xfer **byoff; /* the same, file and offset order */
	size_t *shard;              /* shard of byoff[k] */
	size_t n;
	size_t capreads, capcopies;
};

static int off_cmp(const void *pa, const void *pb)
{
	const struct pl_xfer *a = *(const struct pl_xfer *const *)pa;
	const struct pl_xfer *b = *(const struct pl_xfer *const *)pb;

	if (a->file != b->file)
		return a->file < b->file ? -1 : 1;
	return a->off < b->off ? -1 : a->off > b->off;
}

/* One item per payload, "transfer <cluster index>", U8 of its length. */
static int make_items(struct bb *b)
{
	struct pl_plan *q = b->q;

	q->items = cm_calloc(b->n + 1, sizeof(*q->items));
	q->shards = cm_calloc(b->n + 1, sizeof(*q->shards));
	if (!q->items || !q->shards)
		return -ENOMEM;
	q->nitems = q->nshards = b->n;
	for (size_t k = 0; k < b->n; k++) {
		struct pl_item *it = &q->items[k];
		char name[40];

		snprintf(name, sizeof(name), "transfer %llu", (unsigned long long)b->x[k]->gidx);
		it->name = cm_strdup(name);
		it->shape = cm_malloc(sizeof(uint64_t));
		if (!it->name || !it->shape)
			return -ENOMEM;
		it->shape[0] = b->x[k]->len;
		it->ndim = 1;
		it->dtype = RL_DTYPE_U8;
		it->bits = 8;
		it->rule = -1;
	}
	return 0;
}

/* Payload k at the next offset congruent with its file offset. */
static void layout(struct bb *b)
{
	struct pl_plan *q = b->q;
	uint64_t cur = 0;

	for (size_t k = 0; k < b->n; k++) {
		uint64_t want = b->x[k]->off % PL_CONGRUENT_ALIGN;
		uint64_t off = cm_align_down(cur, PL_CONGRUENT_ALIGN) + want;

		if (off < cur)
			off += PL_CONGRUENT_ALIGN;
		q->shards[k] = (struct pl_shard){ (uint32_t)k, 0, off, b->x[k]->len };
		cur = off + b->x[k]->len;
	}
	q->staging[0] = cur;
}

static int push_read(struct bb *b, const struct pl_xread *sp, uint64_t off, uint64_t len)
{
	struct pl_plan *q = b->q;
	uint64_t size = q->file_sizes[sp->file];

	if (cm_grow((void **)&q->reads, &b->capreads, q->nreads + 1, sizeof(*q->reads)))
		return -ENOMEM;
	q->reads[q->nreads++] = (struct cm_read){ .off = off, .len = (uint32_t)len,
		.min_len = (uint32_t)(CM_MIN(off + len, sp->last) - off), .file = sp->file,
		.first_copy = q->ncopies };
	q->max_read = CM_MAX(q->max_read, len);
	q->stats[0].requests++;
	q->stats[0].read_bytes += off < size ? CM_MIN(len, size - off) : 0;
	return 0;
}

/* Copies of read rd out of payloads byoff[k0..k1). */
static int read_copies(struct bb *b, struct cm_read *rd, size_t k0, size_t k1)
{
	struct pl_plan *q = b->q;
	const struct pl_align *al = &b->main->xp->align[rd->file];
	uint64_t A = CM_MAX(al->offset_align, al->mem_align);

	for (size_t k = k0; k < k1; k++) {
		const struct pl_xfer *x = b->byoff[k];
		size_t sh = b->shard[k];
		uint64_t lo = CM_MAX(rd->off, x->off), hi = CM_MIN(rd->off + rd->min_len,
								   x->off + x->len);

		if (lo >= hi)
			continue;
		if (cm_grow((void **)&q->copies, &b->capcopies, q->ncopies + 1, sizeof(*q->copies)))
			return -ENOMEM;
		q->copies[q->ncopies++] = (struct cm_copy){ .src = (uint32_t)(lo - rd->off),
			.len = (uint32_t)(hi - lo), .count = 1, .src_stride = (uint32_t)(hi - lo),
			.dst = q->shards[sh].offset + (lo - x->off), .dev = 0, .shard = (uint32_t)sh };
		rd->ncopies++;
	}
	/* Straight into the buffer: one payload holds the whole read. */
	if (rd->ncopies == 1 && rd->min_len == rd->len && q->copies[rd->first_copy].len == rd->len &&
	    al->offset_align > 1 && q->copies[rd->first_copy].dst % A == 0)
		rd->flags |= CM_READ_DIRECT;
	return 0;
}

/* Requests and copies of span sp, whose payloads are byoff[k0..k1). */
static int span_reads(struct bb *b, const struct pl_xread *sp, size_t k0, size_t k1)
{
	uint64_t c = pl_xread_request_max(&b->main->xp->align[sp->file], b->o->chunk);

	for (uint64_t pos = sp->start; pos < sp->end;) {
		uint64_t end = CM_MIN(pos + c, sp->end);
		int ret;

		if ((ret = push_read(b, sp, pos, end - pos)) ||
		    (ret = read_copies(b, &b->q->reads[b->q->nreads - 1], k0, k1)))
			return ret;
		pos = end;
	}
	return 0;
}

static int batch_reads(struct bb *b)
{
	struct pl_xread *sp = cm_mallocarray(b->n + 1, sizeof(*sp));
	uint8_t *used = cm_calloc(b->main->nfiles + 1, 1);
	size_t ns, k = 0;
	int ret = 0;

	if (!sp || !used) {
		cm_free(sp);
		cm_free(used);
		return -ENOMEM;
	}
	/* No transfers at all (xp NULL): no payloads, no reads. */
	ns = b->n ? pl_xread_spans(b->byoff, b->n, b->main->xp->align, sp) : 0;
	for (size_t s = 0; s < ns && !ret; s++) {
		size_t k1 = k;

		while (k1 < b->n && b->byoff[k1]->file == sp[s].file &&
		       b->byoff[k1]->off < sp[s].end)
			k1++;
		ret = span_reads(b, &sp[s], k, k1);
		b->q->stats[0].blocks++;
		b->q->stats[0].files_opened += !used[sp[s].file];
		used[sp[s].file] = 1;
		k = k1;
	}
	cm_free(sp);
	cm_free(used);
	return ret;
}

/* The batch's payloads in shard order (the main plan's order), and by offset. */
static int collect(struct bb *b, uint64_t batch)
{
	const struct pl_xplan *xp = b->main->xp;
	size_t n = 0;

	for (size_t k = 0; xp && k < xp->nx; k++)
		n += xp->x[k].root == b->main->process && xp->x[k].batch == batch;
	b->x = cm_mallocarray(n + 1, sizeof(*b->x));
	b->byoff = cm_mallocarray(n + 1, sizeof(*b->byoff));
	b->shard = cm_mallocarray(n + 1, sizeof(*b->shard));
	if (!b->x || !b->byoff || !b->shard)
		return -ENOMEM;
	for (size_t k = 0; xp && k < xp->nx; k++)
		if (xp->x[k].root == b->main->process && xp->x[k].batch == batch)
			b->x[b->n++] = &xp->x[k];
	memcpy(b->byoff, b->x, b->n * sizeof(*b->x));
	qsort(b->byoff, b->n, sizeof(*b->byoff), off_cmp);
	/* Shard of each: its place in the main plan's order (addresses ascend). */
	for (size_t k = 0; k < b->n; k++) {
		size_t lo = 0, hi = b->n;

		while (hi - lo > 1)
			if (b->x[lo + (hi - lo) / 2] <= b->byoff[k])
				lo += (hi - lo) / 2;
			else
				hi = lo + (hi - lo) / 2;
		b->shard[k] = lo;
	}
	return 0;
}

/* The plan's fixed parts: one process, one device, the main plan's files. */
static int skeleton(struct bb *b)
{
	const struct pl_plan *m = b->main;
	struct pl_plan *q = b->q;

	q->spec = pl_spec_new();
	q->nslots = 1;
	q->slot_dev = cm_calloc(1, sizeof(uint32_t));
	q->dev_ids = cm_calloc(1, sizeof(uint32_t));
	q->staging = cm_calloc(1, sizeof(uint64_t));
	q->stats = cm_calloc(1, sizeof(*q->stats));
	q->have_stats = cm_calloc(1, 1);
	q->paths = cm_calloc(m->nfiles + 1, sizeof(char *));
	q->file_sizes = cm_mallocarray(m->nfiles + 1, sizeof(uint64_t));
	if (!q->spec || !q->slot_dev || !q->dev_ids || !q->staging || !q->stats ||
	    !q->have_stats || !q->paths || !q->file_sizes)
		return -ENOMEM;
	q->nfiles = m->nfiles;
	for (size_t f = 0; f < m->nfiles; f++) {
		q->file_sizes[f] = m->file_sizes[f];
		if (!(q->paths[f] = cm_strdup(m->paths[f])))
			return -ENOMEM;
	}
	q->have_stats[0] = 1;
	q->stats[0].devices = 1;
	return 0;
}

int pl_plan_build_batch(const struct pl_plan *p, uint64_t batch, const struct pl_opts *o,
			struct pl_plan **out, struct cm_err *e)
{
	struct bb b = { .main = p, .o = o };
	int ret;

	*out = NULL;
	if (!(b.q = cm_calloc(1, sizeof(*b.q))))
		return cm_err_set(e, -ENOMEM, "plan: out of memory");
	ret = skeleton(&b);
	if (!ret)
		ret = collect(&b, batch);
	if (!ret)
		ret = make_items(&b);
	if (!ret) {
		layout(&b);
		ret = batch_reads(&b);
	}
	for (size_t k = 0; !ret && k < b.n; k++)
		b.q->stats[0].needed_bytes += b.x[k]->len;
	if (!ret)
		ret = pl_plan_exec_files(b.q, e) ? -ENOMEM : 0;
	if (!ret)
		b.q->total = b.q->stats[0];
	cm_free(b.x);
	cm_free(b.byoff);
	cm_free(b.shard);
	if (ret) {
		pl_plan_free(b.q);
		return cm_err_set(e, ret, "plan: out of memory");
	}
	*out = b.q;
	return 0;
}
