/*
 * test_program.c - the program builder (exec/program.c): random plans of
 * whole files cut into reads, built under tiny windows, with and without
 * files to hash. Pure data: no file is read. The seed is printed.
 */
#include <errno.h>
#include <stdlib.h>

#include "harness.h"
#include "common.h"
#include "../exec/program.h"

#define PG 4096u
#define MAX_FILES 3
#define MAX_SHARDS 64

/* A plan of nfiles files whose data (from data_start) is cut into
 * tensors, each one shard laid out in its device's staging in order, and
 * into reads of at most chunk bytes, each copying its part of every tensor
 * it overlaps. */
struct rplan {
	struct pl_exec ex;
	const char *paths[MAX_FILES];
	uint64_t sizes[MAX_FILES], starts[MAX_FILES];
	struct pl_shard shards[MAX_SHARDS];
	uint64_t toff[MAX_SHARDS];      /* tensor's first byte in its file */
	uint32_t tfile[MAX_SHARDS];
	uint64_t staging[2];
	uint32_t dev_ids[2];
	struct cm_read *reads;
	struct cm_copy *copies;
	size_t nreads, ncopies, cap_reads, cap_copies;
};

static uint64_t rnd(uint64_t n)
{
	return th_rand() % n;
}

static void add_read(struct rplan *p, uint32_t f, uint64_t off, uint32_t len)
{
	struct cm_read *r;

	if (cm_grow((void **)&p->reads, &p->cap_reads, p->nreads + 1, sizeof(*r)) < 0)
		abort();
	r = p->reads + p->nreads++;
	memset(r, 0, sizeof(*r));
	r->file = f;
	r->off = off;
	r->len = r->min_len = len;
	r->first_copy = p->ncopies;
	for (size_t s = 0; s < p->ex.nshards; s++) {
		uint64_t a = CM_MAX(off, p->toff[s]), b = CM_MIN(off + len, p->toff[s] + p->shards[s].nbytes);
		struct cm_copy *c;

		if (p->tfile[s] != f || a >= b)
			continue;
		if (cm_grow((void **)&p->copies, &p->cap_copies, p->ncopies + 1, sizeof(*c)) < 0)
			abort();
		c = p->copies + p->ncopies++;
		*c = (struct cm_copy){ .src = (uint32_t)(a - off), .len = (uint32_t)(b - a),
				       .count = 1, .src_stride = (uint32_t)(b - a),
				       .dst = p->shards[s].offset + (a - p->toff[s]),
				       .dev = p->shards[s].dev, .shard = (uint32_t)s };
		r->ncopies++;
	}
}

static void make_plan(struct rplan *p, unsigned nfiles, uint32_t chunk)
{
	static const char *names[MAX_FILES] = { "a.safetensors", "b.safetensors", "c.safetensors" };
	size_t ns = 0;

	memset(p, 0, sizeof(*p));
	for (unsigned f = 0; f < nfiles; f++) {
		uint64_t at;

		p->paths[f] = names[f];
		p->starts[f] = at = 8 + rnd(3 * PG);
		for (unsigned t = 0, nt = 1 + (unsigned)rnd(12); t < nt && ns < MAX_SHARDS; t++) {
			uint64_t len = rnd(4) == 0 ? 0 : 1 + rnd(5 * PG);
			unsigned dev = (unsigned)rnd(2);

			p->shards[ns] = (struct pl_shard){ (uint32_t)ns, dev, p->staging[dev], len };
			p->staging[dev] = cm_align_up(p->staging[dev] + len, 16);
			p->toff[ns] = at;
			p->tfile[ns++] = f;
			at += len;
		}
		p->sizes[f] = at;
	}
	p->ex = (struct pl_exec){ .nfiles = nfiles, .paths = p->paths, .file_sizes = p->sizes,
				  .ndevs = 2, .dev_ids = p->dev_ids, .staging_bytes = p->staging,
				  .nshards = ns, .shards = p->shards, .data_starts = p->starts };
	p->dev_ids[1] = 1;
	for (unsigned f = 0; f < nfiles; f++)
		for (uint64_t off = p->starts[f]; off < p->sizes[f];) {
			uint64_t want = 1 + rnd(chunk); /* once: CM_MIN evaluates twice */
			uint32_t len = (uint32_t)CM_MIN(p->sizes[f] - off, want);

			add_read(p, f, off, len);
			p->ex.max_read = CM_MAX(p->ex.max_read, len);
			off += len;
		}
	for (size_t s = 0; s < ns; s++)
		p->ex.needed_bytes += p->shards[s].nbytes;
	p->ex.reads = p->reads;
	p->ex.nreads = p->nreads;
	p->ex.copies = p->copies;
	p->ex.ncopies = p->ncopies;
}

static void free_plan(struct rplan *p)
{
	cm_free(p->reads);
	cm_free(p->copies);
}

/* The byte of file f at off (what a read brings). */
static uint8_t file_byte(uint32_t f, uint64_t off)
{
	return (uint8_t)(off * 131 + f * 7 + (off >> 9));
}

/* ------------------------------------------------------------------ */

/*
 * Every hashed file is read whole over the batches, in order: each read
 * of it starts at or before the bytes covered so far (no gap), the reads
 * of a batch are sorted, a filler (no copies) reads only bytes no read
 * before it covered, and after the last batch every byte is covered.
 */
static void check_cover(const struct rplan *p, const struct ex_program *pg, const uint8_t *hash)
{
	uint64_t at[MAX_FILES] = { 0 };

	for (size_t i = 0; i < pg->nbatches; i++) {
		const struct ex_batch *b = pg->batches + i;

		for (size_t j = 0; j < b->nreads; j++) {
			const struct cm_read *r = b->reads + j;

			if (j)
				CHECKF(r[-1].file < r->file ||
				       (r[-1].file == r->file && r[-1].off <= r->off),
				       "batch %zu: reads %zu, %zu out of order", i, j - 1, j);
			if (!hash[r->file])
				continue;
			CHECKF(r->off <= at[r->file], "batch %zu: file %u: gap %llu..%llu", i,
			       r->file, (unsigned long long)at[r->file], (unsigned long long)r->off);
			if (!r->ncopies)
				CHECKF(r->off == at[r->file],
				       "batch %zu: filler at %llu re-reads bytes before %llu", i,
				       (unsigned long long)r->off, (unsigned long long)at[r->file]);
			at[r->file] = CM_MAX(at[r->file], r->off + r->min_len);
		}
	}
	for (uint32_t f = 0; f < p->ex.nfiles; f++)
		if (hash[f])
			CHECKF(at[f] == p->sizes[f], "file %u: covered to %llu of %llu", f,
			       (unsigned long long)at[f], (unsigned long long)p->sizes[f]);
}

/*
 * The batches' copies, applied to the windows they fill and moved to
 * staging as the pieces say, give every shard byte exactly once and
 * right; each shard with bytes is done in exactly one batch: the one
 * that brings its last byte.
 */
static void check_bytes(const struct rplan *p, const struct ex_program *pg)
{
	uint8_t *stage[2], *seen[2], *win = cm_calloc(pg->win.n ? pg->win.w[0].r.hi - pg->win.w[0].r.base : 1, 1);
	unsigned done[MAX_SHARDS] = { 0 }, last[MAX_SHARDS] = { 0 };

	for (unsigned d = 0; d < 2; d++) {
		stage[d] = cm_calloc(p->staging[d] + 1, 1);
		seen[d] = cm_calloc(p->staging[d] + 1, 1);
	}
	for (size_t i = 0; i < pg->nbatches; i++) {
		const struct ex_batch *b = pg->batches + i;
		const struct ex_window *w;

		if (b->window == EX_NO_WINDOW)
			continue;
		w = pg->win.w + b->window;
		for (size_t j = 0; j < b->nreads; j++) {
			const struct cm_read *r = b->reads + j;

			for (uint32_t k = 0; k < r->ncopies; k++) {
				const struct cm_copy *c = b->copies + r->first_copy + k;

				for (uint64_t x = 0; x < (uint64_t)c->len * c->count; x++)
					win[c->dst + x] = file_byte(r->file, r->off + c->src +
								    x / c->len * c->src_stride + x % c->len);
			}
		}
		for (size_t k = 0; k < w->n; k++) {
			const struct ex_piece *pc = pg->win.pieces + w->first + k;
			uint64_t at = p->shards[pc->shard].offset + pc->offset;

			memcpy(stage[pc->dev] + at, win + pc->pos, pc->len);
			for (uint64_t x = 0; x < pc->len; x++)
				seen[pc->dev][at + x]++;
			if (pc->offset + pc->len == p->shards[pc->shard].nbytes)
				last[pc->shard] = (unsigned)i + 1;
		}
		for (size_t k = 0; k < b->ndone; k++)
			CHECKF(done[b->done[k]]++ == 0 && last[b->done[k]] == i + 1,
			       "batch %zu: shard %zu done twice or early", i, b->done[k]);
	}
	for (size_t s = 0; s < p->ex.nshards; s++) {
		const struct pl_shard *sh = p->shards + s;

		CHECKF(done[s] == (sh->nbytes != 0), "shard %zu: done %u times", s, done[s]);
		for (uint64_t x = 0; x < sh->nbytes; x++)
			CHECKF(seen[sh->dev][sh->offset + x] == 1 &&
			       stage[sh->dev][sh->offset + x] == file_byte(p->tfile[s], p->toff[s] + x),
			       "shard %zu byte %llu: seen %u times, wrong or missing", s,
			       (unsigned long long)x, seen[sh->dev][sh->offset + x]);
	}
	for (unsigned d = 0; d < 2; d++) {
		cm_free(stage[d]);
		cm_free(seen[d]);
	}
	cm_free(win);
}

/* The session's needs are the batches' reads, the cover's fillers
 * included, and those not direct in bounce buffers. */
static void check_needs(const struct ex_program *pg)
{
	uint64_t nreads = 0, bounce = 0, bounce_bytes = 0, max_read = 0;

	for (size_t i = 0; i < pg->nbatches; i++)
		for (size_t j = 0; j < pg->batches[i].nreads; j++) {
			const struct cm_read *r = pg->batches[i].reads + j;

			nreads++;
			max_read = CM_MAX(max_read, r->len);
			if (!(r->flags & CM_READ_DIRECT)) {
				bounce++;
				bounce_bytes += r->len;
			}
		}
	CHECKF(pg->needs.all_bytes == pg->total_bytes && pg->needs.nreads == nreads &&
	       pg->needs.bounce == bounce && pg->needs.bounce_bytes == bounce_bytes &&
	       pg->needs.max_read == max_read,
	       "needs %llu bytes, %llu reads, %llu bounce (%llu bytes), max %u; batches %llu, "
	       "%llu, %llu (%llu), %llu", (unsigned long long)pg->needs.all_bytes,
	       (unsigned long long)pg->needs.nreads, (unsigned long long)pg->needs.bounce,
	       (unsigned long long)pg->needs.bounce_bytes, pg->needs.max_read,
	       (unsigned long long)pg->total_bytes, (unsigned long long)nreads,
	       (unsigned long long)bounce, (unsigned long long)bounce_bytes,
	       (unsigned long long)max_read);
}

/* Random plans under tiny windows, hashing a random set of files. */
static void windows_cover_and_bytes(void)
{
	for (int round = 0; round < 60 && !th_failed(); round++) {
		struct rplan p;
		struct ex_program pg;
		uint8_t hash[MAX_FILES] = { 0 };
		unsigned nf = 1 + (unsigned)rnd(MAX_FILES);
		struct ex_program_opts o = { (2 + rnd(6)) * PG, PG, hash, (uint32_t)(PG + rnd(PG)) };

		make_plan(&p, nf, 3 * PG);
		for (unsigned f = 0; f < nf; f++)
			hash[f] = rnd(3) != 0;
		CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
		CHECKF(pg.nbatches == pg.win.n + (!pg.win.n && (hash[0] || hash[1] || hash[2])),
		       "%zu batches, %zu windows", pg.nbatches, pg.win.n);
		check_cover(&p, &pg, hash);
		check_bytes(&p, &pg);
		check_needs(&pg);
		ex_program_free(&pg);
		free_plan(&p);
	}
}

/* Two builds of one plan are equal, batch by batch, byte by byte, with
 * the build of another plan between them (nothing carries over). */
static void program_is_deterministic(void)
{
	struct rplan p, q;
	struct ex_program a, b, c;
	uint8_t hash[MAX_FILES] = { 1, 0, 1 };
	struct ex_program_opts o = { 3 * PG, PG, hash, PG };

	make_plan(&p, 3, 2 * PG);
	make_plan(&q, 3, 3 * PG);
	CHECK_EQ(ex_program_build(&a, &p.ex, &o), 0);
	CHECK_EQ(ex_program_build(&c, &q.ex, &o), 0);
	CHECK_EQ(ex_program_build(&b, &p.ex, &o), 0);
	ex_program_free(&c);
	free_plan(&q);
	CHECK_EQ(a.nbatches, b.nbatches);
	CHECK(a.total_bytes == b.total_bytes && a.fill_bytes == b.fill_bytes);
	for (size_t i = 0; i < a.nbatches; i++) {
		const struct ex_batch *x = a.batches + i, *y = b.batches + i;

		CHECKF(x->nreads == y->nreads && x->ncopies == y->ncopies && x->ndone == y->ndone &&
		       x->window == y->window && x->read_bytes == y->read_bytes &&
		       !memcmp(x->reads, y->reads, x->nreads * sizeof(*x->reads)) &&
		       !memcmp(x->copies, y->copies, x->ncopies * sizeof(*x->copies)) &&
		       !memcmp(x->done, y->done, x->ndone * sizeof(*x->done)),
		       "batch %zu differs", i);
	}
	ex_program_free(&a);
	ex_program_free(&b);
	free_plan(&p);
}

/* A whole load is one batch: the plan's own reads and copies when
 * nothing is hashed; with a hashed file its reads are the plan's and the
 * fillers (the header), sorted; every shard is done in it and expects
 * its bytes. */
static void whole_load_is_one_batch(void)
{
	struct rplan p;
	struct ex_program pg;
	uint8_t hash[MAX_FILES] = { 0, 1 };
	struct ex_program_opts o = { 0, PG, NULL, PG };

	make_plan(&p, 2, 2 * PG);
	CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
	CHECK_EQ(pg.nbatches, 1);
	CHECK(pg.batches[0].reads == p.ex.reads && pg.batches[0].copies == p.ex.copies);
	CHECK_EQ(pg.batches[0].ndone, p.ex.nshards);
	CHECK(pg.win.n == 0 && pg.hashed == NULL && pg.nshards == p.ex.nshards);
	for (size_t s = 0; s < p.ex.nshards; s++)
		CHECK(pg.shard_bytes[s] == p.shards[s].nbytes);
	ex_program_free(&pg);
	o.hash = hash;
	CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
	CHECK_EQ(pg.nbatches, 1);
	CHECK(pg.batches[0].copies == p.ex.copies);
	CHECK_EQ(pg.batches[0].nreads, p.ex.nreads + (p.starts[1] + PG - 1) / PG);
	CHECK_EQ(pg.fill_bytes, p.starts[1]);
	check_cover(&p, &pg, hash);
	ex_program_free(&pg);
	free_plan(&p);
}

/* A plan without a byte of staging but with a file to hash: no window,
 * one batch of fillers reading the file whole; nothing hashed: no batch. */
static void fillers_alone_without_staging(void)
{
	struct rplan p;
	struct ex_program pg;
	uint8_t hash[MAX_FILES] = { 1 };
	struct ex_program_opts o = { 2 * PG, PG, hash, PG };

	make_plan(&p, 1, 2 * PG);
	for (size_t s = 0; s < p.ex.nshards; s++)
		p.shards[s].nbytes = 0;
	p.ex.nreads = 0;
	CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
	CHECK(pg.win.n == 0 && pg.win.nzero == p.ex.nshards && pg.nbatches == 1);
	CHECK(pg.batches[0].window == EX_NO_WINDOW && pg.batches[0].ncopies == 0);
	CHECK_EQ(pg.batches[0].read_bytes, p.sizes[0]);
	check_cover(&p, &pg, hash);
	ex_program_free(&pg);
	o.hash = NULL;
	CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
	CHECK_EQ(pg.nbatches, 0);
	ex_program_free(&pg);
	free_plan(&p);
}

/* Every allocation of a build failing in turn: -ENOMEM, nothing leaks
 * (the harness counts blocks), until the build succeeds. */
static void allocation_failures(void)
{
	struct rplan p;
	uint8_t hash[MAX_FILES] = { 1, 1 };
	struct ex_program_opts o = { 2 * PG, PG, hash, PG };
	int ret = -ENOMEM, n;

	make_plan(&p, 2, 2 * PG);
	for (n = 0; ret == -ENOMEM && n < 10000; n++) {
		struct ex_program pg;

		cm_alloc_fail_after(n);
		ret = ex_program_build(&pg, &p.ex, &o);
		cm_alloc_fail_after(-1);
		if (ret == 0)
			ex_program_free(&pg);
	}
	free_plan(&p);
	CHECKF(ret == 0 && n > 3, "ret %d after %d allocations", ret, n);
}

/* One tensor of len bytes at file offset start, staging offset soff of
 * device 0, read in direct reads of chunk bytes. */
static void one_tensor_plan(struct rplan *p, uint64_t start, uint64_t soff, uint64_t len,
			    uint32_t chunk)
{
	memset(p, 0, sizeof(*p));
	p->paths[0] = "a.safetensors";
	p->starts[0] = p->toff[0] = start;
	p->sizes[0] = start + len;
	p->shards[0] = (struct pl_shard){ 0, 0, soff, len };
	p->staging[0] = soff + len;
	p->dev_ids[1] = 1;
	p->ex = (struct pl_exec){ .nfiles = 1, .paths = p->paths, .file_sizes = p->sizes,
				  .ndevs = 2, .dev_ids = p->dev_ids, .staging_bytes = p->staging,
				  .nshards = 1, .shards = p->shards, .data_starts = p->starts,
				  .needed_bytes = len };
	for (uint64_t off = start; off < start + len; off += chunk) {
		add_read(p, 0, off, (uint32_t)CM_MIN(chunk, start + len - off));
		p->reads[p->nreads - 1].flags |= CM_READ_DIRECT;
		p->ex.max_read = CM_MAX(p->ex.max_read, p->reads[p->nreads - 1].len);
	}
	p->ex.reads = p->reads;
	p->ex.nreads = p->nreads;
	p->ex.copies = p->copies;
	p->ex.ncopies = p->ncopies;
}

/*
 * Direct reads of 5 pages (page-aligned in the file) under windows of 3:
 * where the file is page aligned at the windows' edges (as staging is),
 * each read at an edge is cut there into parts that stay direct (their
 * copies tile them) and read no byte twice; with staging 16 bytes off,
 * they are clipped and widened, not direct. Either way every byte
 * arrives once (check_bytes).
 */
static void edge_reads_cut_direct(void)
{
	for (int shifted = 0; shifted < 2 && !th_failed(); shifted++) {
		struct ex_program_opts o = { 3 * PG, PG, NULL, PG };
		uint64_t len = 10 * PG, bytes = 0;
		size_t direct = 0, reads = 0;
		struct ex_program pg;
		struct rplan p;

		one_tensor_plan(&p, PG, shifted ? 16 : 0, len, 5 * PG);
		CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
		CHECK_EQ(pg.nbatches, 4);
		for (size_t i = 0; i < pg.nbatches; i++)
			for (size_t j = 0; j < pg.batches[i].nreads; j++) {
				const struct cm_read *r = pg.batches[i].reads + j;
				int tiles = cm_read_tiles(r, pg.batches[i].copies + r->first_copy);

				CHECKF(!(r->flags & CM_READ_DIRECT) || tiles,
				       "batch %zu read %zu: direct but its copies do not tile it", i, j);
				direct += (r->flags & CM_READ_DIRECT) != 0;
				reads++;
				bytes += r->len;
			}
		check_bytes(&p, &pg);
		check_needs(&pg);
		CHECKF((pg.needs.bounce == 0) == !shifted, "%llu reads in bounce buffers",
		       (unsigned long long)pg.needs.bounce);
		if (shifted)
			CHECKF(direct < reads, "%zu of %zu reads direct", direct, reads);
		else
			CHECKF(direct == reads && reads == 5 && bytes == len,
			       "%zu of %zu reads direct, %llu bytes of %llu", direct, reads,
			       (unsigned long long)bytes, (unsigned long long)len);
		ex_program_free(&pg);
		free_plan(&p);
	}
}

/* A direct read that ends off the page (a file's last bytes) is cut
 * into a direct head and a tail under a page: the session's bounce
 * buffers need only the tail's length, not the read's. */
static void direct_tail_split(void)
{
	struct ex_program_opts o = { 16 * PG, PG, NULL, PG };
	uint64_t len = 7 * PG + 100;
	struct ex_program pg;
	struct rplan p;

	one_tensor_plan(&p, PG, 0, len, 8 * PG);
	CHECK_EQ(ex_program_build(&pg, &p.ex, &o), 0);
	CHECK_EQ(pg.nbatches, 1);
	CHECKF(pg.batches[0].nreads == 2 && (pg.batches[0].reads[0].flags & CM_READ_DIRECT) &&
	       pg.batches[0].reads[0].len == 7 * PG && pg.batches[0].reads[1].len == 100 &&
	       !(pg.batches[0].reads[1].flags & CM_READ_DIRECT),
	       "%zu reads, the first %u bytes", pg.batches[0].nreads, pg.batches[0].reads[0].len);
	check_bytes(&p, &pg);
	check_needs(&pg);
	CHECKF(pg.needs.bounce == 1 && pg.needs.max_bounce == 100, "%llu bounce of up to %u",
	       (unsigned long long)pg.needs.bounce, pg.needs.max_bounce);
	ex_program_free(&pg);
	free_plan(&p);
}

int main(void)
{
	th_seed();
	RUN(windows_cover_and_bytes);
	RUN(program_is_deterministic);
	RUN(whole_load_is_one_batch);
	RUN(fillers_alone_without_staging);
	RUN(allocation_failures);
	RUN(edge_reads_cut_direct);
	RUN(direct_tail_split);
	return th_done();
}
