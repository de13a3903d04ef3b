/*
 * program.c - building a load's program (program.h): the passes, an
 * ordered array of {name, begin, batch, end} (the transform, the windows,
 * the checksum cover), run over the whole plan and then batch by batch in
 * program order, into arrays the program owns. A pass's state (the
 * cover's: how far each hashed file is covered) lives only while the
 * program is built; the batches they leave are final.
 */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "cover.h"
#include "program.h"
#include "transform.h"

/* Where batch i's arrays start in the program's, while they grow. */
struct at {
	size_t reads, copies, done;
};

struct build {
	struct ex_program *p;
	const struct pl_exec *ex;
	const struct ex_program_opts *o;
	const struct cm_copy *copies;   /* the plan's, with their operations (transform) */
	struct ex_cover cover;          /* cover.hash NULL: nothing hashed */
	struct ex_wjob wj;              /* a streaming batch while the passes shape it */
	struct at *at;
	size_t cap_batches, cap_at;
	size_t nreads, ncopies, ndone;  /* in the program's arrays so far */
	struct cm_err *e;
};

/* A pass: begin before the first batch (over the whole plan), batch for
 * each batch in program order (i of n), end after the last (also after
 * a failure, to free its state). Any may be NULL. */
struct ex_pass {
	const char *name;
	int (*begin)(struct build *b);
	int (*batch)(struct build *b, size_t i, size_t n);
	void (*end)(struct build *b, int ok);
};

/* ------------------------------------------------------------------ */
/* The transform pass: the copies' operations (exec/transform.c) */

static int transform_begin(struct build *b)
{
	int ret = ex_transform_copies(b->ex, &b->p->own_op_copies, b->e);

	b->copies = b->p->own_op_copies ? b->p->own_op_copies : b->ex->copies;
	return ret;
}

/* ------------------------------------------------------------------ */
/* The windows pass: a streaming load's ranges (exec/window.c) */

static int windows_begin(struct build *b)
{
	if (!b->o->window)
		return 0;
	return ex_windows_cut(&b->p->win, b->ex, b->o->window, b->o->page);
}

/* Batch i: the reads and clipped copies of range i; after the ranges
 * (none, but files to hash), a batch of no read. */
static int windows_batch(struct build *b, size_t i, size_t n)
{
	(void)n;
	if (!b->o->window)
		return 0;
	if (i >= b->p->win.n) {
		b->wj.nreads = b->wj.ncopies = 0;
		return 0;
	}
	/* the cover hashes whole reads in file order: no clipping */
	return ex_window_job(b->ex->reads, b->ex->nreads, b->copies, &b->p->win.w[i].r,
			     !b->cover.hash, &b->wj);
}

/* ------------------------------------------------------------------ */
/* The checksum cover: hashed files read whole (exec/cover.c) */

static int cover_begin(struct build *b)
{
	const struct pl_exec *ex = b->ex;
	struct ex_program *p = b->p;
	size_t hashed = 0;

	for (size_t f = 0; b->o->hash && f < ex->nfiles; f++)
		hashed += b->o->hash[f] != 0;
	if (!hashed)
		return 0;
	p->own_hashed = cm_calloc(ex->nfiles, 1);
	if (!p->own_hashed)
		return -ENOMEM;
	memcpy(p->own_hashed, b->o->hash, ex->nfiles);
	p->hashed = p->own_hashed;
	return ex_cover_init(&b->cover, ex->nfiles, ex->file_sizes, p->hashed, b->o->chunk);
}

/* Fillers for batch i; a whole load's reads are the plan's until then. */
static int cover_batch(struct build *b, size_t i, size_t n)
{
	struct ex_program *p = b->p;
	const struct pl_exec *ex = b->ex;
	size_t nr = ex->nreads, cap = ex->nreads + 1;

	if (!b->cover.hash)
		return 0;
	if (b->o->window)
		return ex_cover_batch(&b->cover, &b->wj.reads, &b->wj.nreads, &b->wj.cap_reads,
				      i + 1 == n);
	p->own_fill_reads = cm_mallocarray(cap, sizeof(*p->own_fill_reads));
	if (!p->own_fill_reads)
		return -ENOMEM;
	if (nr)
		memcpy(p->own_fill_reads, ex->reads, nr * sizeof(*ex->reads));
	if (ex_cover_batch(&b->cover, &p->own_fill_reads, &nr, &cap, 1) < 0)
		return -ENOMEM;
	p->nfill_reads = nr;
	return 0;
}

static void cover_end(struct build *b, int ok)
{
	(void)ok;
	b->p->fill_chunk = b->cover.chunk;
	b->p->max_fill = b->cover.max_fill;
	b->p->fill_bytes = b->cover.fill_bytes;
	ex_cover_free(&b->cover);
}

/*
 * The passes, in order. Adding a pass is one entry (and its module):
 * transform first, so that the windows clip copies that know their
 * operation; the cover last, over each batch as the windows cut it.
 */
static const struct ex_pass passes[] = {
	{ "transform", transform_begin, NULL, NULL },
	{ "windows", windows_begin, windows_batch, NULL },
	{ "cover", cover_begin, cover_batch, cover_end },
};

#define NPASSES (sizeof(passes) / sizeof(passes[0]))

/* ------------------------------------------------------------------ */
/* The batches the passes leave */

/* Appends a batch of reads rd[0..nr) and copies cp[0..nc) (indexed from
 * 0 by the reads) filling window w. */
static int push_batch(struct build *b, const struct cm_read *rd, size_t nr,
		      const struct cm_copy *cp, size_t nc, size_t w)
{
	struct ex_program *p = b->p;
	size_t n = p->nbatches;
	struct ex_batch *x;

	if (cm_grow((void **)&p->own_batches, &b->cap_batches, n + 1, sizeof(*x)) < 0 ||
	    cm_grow((void **)&b->at, &b->cap_at, n + 1, sizeof(*b->at)) < 0)
		return -ENOMEM;
	b->at[n] = (struct at){ b->nreads, b->ncopies, b->ndone };
	if (cm_grow_big((void **)&p->own_reads, &p->cap_reads, b->nreads + nr + 1,
			sizeof(*rd)) < 0 ||
	    cm_grow_big((void **)&p->own_copies, &p->cap_copies, b->ncopies + nc + 1,
			sizeof(*cp)) < 0)
		return -ENOMEM;
	if (nr)
		memcpy(p->own_reads + b->nreads, rd, nr * sizeof(*rd));
	if (nc)
		memcpy(p->own_copies + b->ncopies, cp, nc * sizeof(*cp));
	b->nreads += nr;
	b->ncopies += nc;
	x = p->own_batches + n;
	memset(x, 0, sizeof(*x));
	x->nreads = nr;
	x->ncopies = nc;
	x->window = w;
	for (size_t i = 0; i < nr; i++)
		x->read_bytes += rd[i].len;
	p->total_bytes += x->read_bytes;
	p->nbatches++;
	return 0;
}

/* The shards whose last piece lies in window w (streaming). */
static void push_done_window(struct build *b, size_t w)
{
	const struct ex_window *win = b->p->win.w + w;

	for (size_t i = 0; i < win->n; i++) {
		const struct ex_piece *pc = b->p->win.pieces + win->first + i;

		if (pc->offset + pc->len == b->ex->shards[pc->shard].nbytes)
			b->p->own_done[b->ndone++] = pc->shard;
	}
	b->p->own_batches[b->p->nbatches - 1].ndone = b->ndone - b->at[b->p->nbatches - 1].done;
}

/* The pointers of every batch of a streaming program, once the arrays
 * stopped moving. */
static void settle(struct build *b)
{
	struct ex_program *p = b->p;

	for (size_t i = 0; i < p->nbatches; i++) {
		struct ex_batch *x = p->own_batches + i;

		x->reads = p->own_reads + b->at[i].reads;
		x->copies = p->own_copies + b->at[i].copies;
		x->done = p->own_done + b->at[i].done;
	}
	p->batches = p->own_batches;
}

/* What a streaming program's batches need of one engine session
 * together: every read they make, and bounce buffers as long as the
 * longest that may not land straight in a window: those not direct
 * (clipped at an edge, the cover's fillers) and direct ones the engine
 * may refuse for O_DIRECT alignment (an offset or length off their
 * file's unit, ex_wjob_unit). Pinned memory: buffers of the
 * longest read were 8 MiB a worker where a few KiB bounce. */
static void stream_needs(struct build *b)
{
	struct eng_session_needs *n = &b->p->needs;

	memset(n, 0, sizeof(*n));
	n->nreads = b->nreads;
	for (size_t i = 0; i < b->nreads; i++) {
		const struct cm_read *r = b->p->own_reads + i;

		n->all_bytes += r->len;
		n->max_read = CM_MAX(n->max_read, r->len);
		if (!(r->flags & CM_READ_DIRECT) ||
		    (r->off | r->len) % ex_wjob_unit(&b->wj, r->file)) {
			n->bounce++;
			n->bounce_bytes += r->len;
			n->max_bounce = CM_MAX(n->max_bounce, r->len);
		}
	}
}

/* Streaming batch i, as the passes left it: range i's window, or the
 * cover's fillers alone (no window). */
static int push_stream(struct build *b, size_t i)
{
	int in_range = i < b->p->win.n;
	int ret = push_batch(b, b->wj.reads, b->wj.nreads, b->wj.copies, b->wj.ncopies,
			     in_range ? i : EX_NO_WINDOW);

	if (ret == 0 && in_range)
		push_done_window(b, i);
	return ret;
}

/* A whole load: one batch, the plan's reads (the cover's copy with
 * fillers when a file is hashed) and copies (the transform's when they
 * carry operations); every shard the reads fill is done in it. */
static int push_whole(struct build *b)
{
	struct ex_program *p = b->p;
	const struct pl_exec *ex = b->ex;
	size_t ndone = 0;
	struct ex_batch *x;

	p->own_batches = cm_calloc(1, sizeof(*p->own_batches));
	p->own_shard_bytes = cm_calloc(ex->nshards + 1, sizeof(*p->own_shard_bytes));
	if (!p->own_batches || !p->own_shard_bytes)
		return -ENOMEM;
	for (size_t s = 0; s < ex->nshards; s++) {
		/* Read once: a shard a broadcast fills expects nothing from
		 * the reads (the planner gives it no copies). */
		int recv = ex->received && ex->received[s];

		p->own_shard_bytes[s] = recv ? 0 : ex->shards[s].nbytes;
		if (!recv)
			p->own_done[ndone++] = s;
	}
	x = p->own_batches;
	*x = (struct ex_batch){ ex->reads, ex->nreads, b->copies, ex->ncopies, EX_NO_WINDOW,
				p->own_done, ndone, 0 };
	if (p->own_fill_reads) {
		x->reads = p->own_fill_reads;
		x->nreads = p->nfill_reads;
	}
	p->nbatches = 1;
	p->nshards = ex->nshards;
	p->shard_bytes = p->own_shard_bytes;
	for (size_t i = 0; i < x->nreads; i++)
		x->read_bytes += x->reads[i].len;
	p->total_bytes = x->read_bytes;
	p->batches = p->own_batches;
	return 0;
}

/* Every batch through every pass's batch step, in program order. */
static int run_batches(struct build *b)
{
	size_t n = 1;
	int ret = 0;

	if (b->o->window)
		n = b->p->win.n ? b->p->win.n : b->cover.hash != NULL;
	for (size_t i = 0; i < n && ret == 0; i++) {
		for (size_t k = 0; k < NPASSES && ret == 0; k++)
			if (passes[k].batch)
				ret = passes[k].batch(b, i, n);
		if (ret == 0)
			ret = b->o->window ? push_stream(b, i) : push_whole(b);
	}
	if (ret == 0 && b->o->window && b->p->nbatches) {
		settle(b);
		stream_needs(b);
	}
	return ret;
}

int ex_program_build(struct ex_program *p, const struct pl_exec *ex,
		     const struct ex_program_opts *o)
{
	struct cm_err e;
	struct build b = { .p = p, .ex = ex, .o = o, .e = &e };
	size_t begun = 0;
	int ret = 0;

	memset(p, 0, sizeof(*p));
	cm_err_clear(&e);
	p->own_done = cm_calloc(ex->nshards + 1, sizeof(*p->own_done));
	if (!p->own_done)
		ret = -ENOMEM;
	for (; begun < NPASSES && ret == 0; begun++)
		if (passes[begun].begin)
			ret = passes[begun].begin(&b);
	if (ret == 0)
		ret = run_batches(&b);
	while (begun-- > 0)
		if (passes[begun].end)
			passes[begun].end(&b, ret == 0);
	ex_wjob_free(&b.wj);
	cm_free(b.at);
	if (ret < 0)
		ex_program_free(p);
	return ret;
}

void ex_program_free(struct ex_program *p)
{
	ex_windows_free(&p->win);
	cm_free(p->own_batches);
	cm_free_big(p->own_reads, p->cap_reads, sizeof(*p->own_reads));
	cm_free_big(p->own_copies, p->cap_copies, sizeof(*p->own_copies));
	cm_free(p->own_fill_reads);
	cm_free(p->own_op_copies);
	cm_free(p->own_done);
	cm_free(p->own_shard_bytes);
	cm_free(p->own_hashed);
	memset(p, 0, sizeof(*p));
}
