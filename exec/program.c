/*
 * program.c - building a load's program (program.h): the windows pass,
 * then the checksum cover, batch by batch in program order, into arrays
 * the program owns. The cover's state (how far each hashed file is
 * covered) lives only while the program is built; the batches it leaves
 * are final.
 */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "cover.h"
#include "program.h"

/* Where batch i's arrays start in the program's, while they grow. */
struct at {
	size_t reads, copies, done;
};

struct build {
	struct ex_program *p;
	const struct pl_exec *ex;
	struct ex_cover cover;          /* cover.hash NULL: nothing hashed */
	struct at *at;
	size_t cap_batches, cap_at;
	size_t nreads, ncopies, ndone;  /* in the program's arrays so far */
};

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

/* A streaming program: one batch per range (the cover's fillers to the
 * ends of the hashed files in the last), or one batch of fillers alone
 * when there is no range but a file to hash. */
static int build_windows(struct build *b, const struct ex_program_opts *o)
{
	struct ex_program *p = b->p;
	const struct pl_exec *ex = b->ex;
	struct ex_wjob wj = { 0 };
	int ret = ex_windows_cut(&p->win, ex, o->window, o->page);

	if (ret == 0)
		ex_windows_needs(&p->win, ex, b->cover.hash ? &b->cover : NULL, &p->needs);
	for (size_t i = 0; i < p->win.n && ret == 0; i++) {
		/* the cover hashes whole reads in file order: no clipping */
		ret = ex_window_job(ex->reads, ex->nreads, ex->copies, &p->win.w[i].r,
				    !b->cover.hash, &wj);
		if (ret == 0 && b->cover.hash)
			ret = ex_cover_batch(&b->cover, &wj.reads, &wj.nreads, &wj.cap_reads,
					     i + 1 == p->win.n);
		if (ret == 0)
			ret = push_batch(b, wj.reads, wj.nreads, wj.copies, wj.ncopies, i);
		if (ret == 0)
			push_done_window(b, i);
	}
	if (ret == 0 && !p->win.n && b->cover.hash) { /* files without tensor bytes */
		wj.nreads = 0;
		ret = ex_cover_batch(&b->cover, &wj.reads, &wj.nreads, &wj.cap_reads, 1);
		if (ret == 0)
			ret = push_batch(b, wj.reads, wj.nreads, NULL, 0, EX_NO_WINDOW);
	}
	ex_wjob_free(&wj);
	return ret;
}

/* A whole load: one batch, the plan's reads (copied only to add the
 * cover's fillers) and copies; every shard the reads fill is done in it. */
static int build_whole(struct build *b)
{
	struct ex_program *p = b->p;
	const struct pl_exec *ex = b->ex;
	size_t n = ex->nreads, cap = ex->nreads + 1, ndone = 0;
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
	*x = (struct ex_batch){ ex->reads, ex->nreads, ex->copies, ex->ncopies, EX_NO_WINDOW,
				p->own_done, ndone, 0 };
	p->nbatches = 1;
	p->nshards = ex->nshards;
	p->shard_bytes = p->own_shard_bytes;
	if (b->cover.hash) {
		p->own_fill_reads = cm_mallocarray(cap, sizeof(*p->own_fill_reads));
		if (!p->own_fill_reads)
			return -ENOMEM;
		if (n)
			memcpy(p->own_fill_reads, ex->reads, n * sizeof(*ex->reads));
		if (ex_cover_batch(&b->cover, &p->own_fill_reads, &n, &cap, 1) < 0)
			return -ENOMEM;
		x->reads = p->own_fill_reads;
		x->nreads = n;
	}
	for (size_t i = 0; i < x->nreads; i++)
		x->read_bytes += x->reads[i].len;
	p->total_bytes = x->read_bytes;
	p->batches = p->own_batches;
	return 0;
}

int ex_program_build(struct ex_program *p, const struct pl_exec *ex,
		     const struct ex_program_opts *o)
{
	struct build b = { .p = p, .ex = ex };
	size_t hashed = 0;
	int ret = -ENOMEM;

	memset(p, 0, sizeof(*p));
	for (size_t f = 0; o->hash && f < ex->nfiles; f++)
		hashed += o->hash[f] != 0;
	p->own_done = cm_calloc(ex->nshards + 1, sizeof(*p->own_done));
	p->own_hashed = hashed ? cm_calloc(ex->nfiles, 1) : NULL;
	if (p->own_done && (!hashed || p->own_hashed)) {
		if (hashed)
			memcpy(p->own_hashed, o->hash, ex->nfiles);
		p->hashed = p->own_hashed;
		ret = hashed ? ex_cover_init(&b.cover, ex->nfiles, ex->file_sizes, p->hashed,
					     o->chunk) : 0;
	}
	if (ret == 0)
		ret = o->window ? build_windows(&b, o) : build_whole(&b);
	p->fill_chunk = b.cover.chunk;
	p->max_fill = b.cover.max_fill;
	p->fill_bytes = b.cover.fill_bytes;
	if (ret == 0 && o->window && p->nbatches)
		settle(&b);
	ex_cover_free(&b.cover);
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
	cm_free(p->own_done);
	cm_free(p->own_shard_bytes);
	cm_free(p->own_hashed);
	memset(p, 0, sizeof(*p));
}
