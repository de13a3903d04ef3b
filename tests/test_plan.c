/*
 * test_plan.c - the planner: boxes and byte runs, coalescing, the automatic
 * ratio, alignment and chunking, several processes, targets, read once,
 * the memory estimate and its limit, and randomized plans executed against
 * synthetic bytes and checked element by element (tests/pl_check.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "pl_check.h"
#include "pl_fake.h"
#include "../planner/transfer_assign.h"

/* ---------------------------------------------------------------- */
/* Boxes -> byte runs                                                */
/* ---------------------------------------------------------------- */

struct run {
	uint64_t off, len;
};

/* Expands r; returns the count (at most max). */
static size_t expand(const struct pl_runs *r, struct run *out, size_t max)
{
	size_t n = 0;

	for (uint64_t k = 0; k < r->nruns && n < max; k++)
		out[n++] = (struct run){ pl_run_off(r, k), r->len };
	return n;
}

static int runs_of(unsigned ndim, const uint64_t *shape, const uint64_t *start,
		   const uint64_t *stop, unsigned bits, uint64_t base, struct run *out,
		   size_t max, size_t *n)
{
	struct pl_box b = { { 0 }, { 0 } };
	struct pl_runs r;
	int ret;

	for (unsigned d = 0; d < ndim; d++) {
		b.start[d] = start ? start[d] : 0;
		b.stop[d] = stop ? stop[d] : shape[d];
	}
	ret = pl_box_runs(ndim, shape, bits, base, &b, &r);
	*n = ret ? 0 : expand(&r, out, max);
	return ret;
}

#define CHECK_RUNS(got, n, ...) \
	do { \
		struct run want_[] = { __VA_ARGS__ }; \
		CHECK_EQ(n, CM_ARRAY_SIZE(want_)); \
		for (size_t i_ = 0; i_ < n; i_++) { \
			CHECK_EQ(got[i_].off, want_[i_].off); \
			CHECK_EQ(got[i_].len, want_[i_].len); \
		} \
	} while (0)

static void box_runs_of_partial_boxes(void)
{
	struct run r[16];
	size_t n;

	/* A scalar. */
	CHECK_EQ(runs_of(0, NULL, NULL, NULL, 32, 128, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 128, 4 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 4, 8 }, NULL, NULL, 32, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 0, 128 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 4, 8 }, (uint64_t[]){ 0, 0 }, (uint64_t[]){ 2, 8 },
			 32, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 0, 64 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 4, 8 }, (uint64_t[]){ 2, 0 }, (uint64_t[]){ 4, 8 },
			 32, 128, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 192, 64 });
	CHECK_EQ(runs_of(1, (uint64_t[]){ 8 }, (uint64_t[]){ 2 }, (uint64_t[]){ 4 }, 32, 64,
			 r, 16, &n), 0);
	CHECK_RUNS(r, n, { 72, 8 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 4, 8 }, (uint64_t[]){ 0, 0 }, (uint64_t[]){ 4, 4 },
			 32, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 0, 16 }, { 32, 16 }, { 64, 16 }, { 96, 16 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 4, 8 }, (uint64_t[]){ 0, 0 }, (uint64_t[]){ 4, 4 },
			 16, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 0, 8 }, { 16, 8 }, { 32, 8 }, { 48, 8 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 4, 8 }, (uint64_t[]){ 1, 2 }, (uint64_t[]){ 3, 6 },
			 32, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 40, 16 }, { 72, 16 });
	CHECK_EQ(runs_of(3, (uint64_t[]){ 2, 4, 4 }, (uint64_t[]){ 0, 1, 0 },
			 (uint64_t[]){ 2, 3, 4 }, 32, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 16, 32 }, { 80, 32 });
	CHECK_EQ(runs_of(3, (uint64_t[]){ 2, 2, 4 }, (uint64_t[]){ 0, 0, 2 },
			 (uint64_t[]){ 2, 2, 4 }, 32, 1000, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 1008, 8 }, { 1024, 8 }, { 1040, 8 }, { 1056, 8 });
	CHECK_EQ(runs_of(2, (uint64_t[]){ 3, 4 }, (uint64_t[]){ 0, 1 }, (uint64_t[]){ 3, 2 },
			 8, 0, r, 16, &n), 0);
	CHECK_RUNS(r, n, { 1, 1 }, { 5, 1 }, { 9, 1 });
	/* Zero-size: no runs, no error. */
	CHECK_EQ(runs_of(2, (uint64_t[]){ 0, 8 }, NULL, NULL, 32, 0, r, 16, &n), 0);
	CHECK_EQ(n, 0);
}

/* Strided runs stay compact: one level of 4 runs, not 4 descriptors. */
static void strided_runs_stay_compact(void)
{
	struct pl_box b = { { 0, 0 }, { 1u << 20, 2 } };
	struct pl_runs r;

	CHECK_EQ(pl_box_runs(2, (uint64_t[]){ 1u << 20, 4 }, 32, 0, &b, &r), 0);
	CHECK_EQ(r.nlev, 1);
	CHECK_EQ(r.nruns, 1u << 20);
	CHECK_EQ(r.count[0], 1u << 20);
	CHECK_EQ(r.stride[0], 16);
	CHECK_EQ(r.len, 8);
	/* (2,3,4) cols [0,2) of dim 2: levels (2,3) merge into one of 6. */
	b = (struct pl_box){ { 0, 0, 0 }, { 2, 3, 2 } };
	CHECK_EQ(pl_box_runs(3, (uint64_t[]){ 2, 3, 4 }, 8, 0, &b, &r), 0);
	CHECK_EQ(r.nlev, 1);
	CHECK_EQ(r.count[0], 6);
	CHECK_EQ(r.stride[0], 4);
}

/* Random shapes and boxes against an element-by-element reference. */
static void runs_match_an_elementwise_walk(void)
{
	for (int iter = 0; iter < 2000; iter++) {
		unsigned ndim = (unsigned)(th_rand() % 5), bits = 8u << (th_rand() % 4);
		uint64_t shape[RL_MAX_DIMS], estr[RL_MAX_DIMS], c[RL_MAX_DIMS], n = 1, base;
		struct pl_box b;
		struct pl_runs r;
		uint64_t k = 0, pos = 0, prev_end = 0;

		base = th_rand() % 1000;
		for (unsigned d = 0; d < ndim; d++) {
			shape[d] = 1 + th_rand() % 6;
			b.start[d] = th_rand() % (shape[d] + 1);
			b.stop[d] = b.start[d] + th_rand() % (shape[d] - b.start[d] + 1);
			n *= b.stop[d] - b.start[d];
			c[d] = b.start[d];
		}
		for (unsigned d = ndim; d-- > 0;)
			estr[d] = d + 1 < ndim ? estr[d + 1] * shape[d + 1] : 1;
		CHECK_EQ(pl_box_runs(ndim, shape, bits, base, &b, &r), 0);
		if (!n) {
			CHECK_EQ(r.nruns, 0);
			continue;
		}
		CHECK(r.nruns * r.len == n * bits / 8);
		/* Walk the box in C order; each element must be the next byte of
		 * the current run. */
		for (uint64_t e = 0; e < n; e++) {
			uint64_t want = base;

			for (unsigned d = 0; d < ndim; d++)
				want += c[d] * estr[d] * bits / 8;
			if (pos == r.len) {
				k++;
				pos = 0;
			}
			if (!pos) {
				uint64_t o = pl_run_off(&r, k);

				CHECKF(!k || o >= prev_end, "runs overlap or unsorted (iter %d)", iter);
				prev_end = o + r.len;
			}
			CHECKF(pl_run_off(&r, k) + pos == want, "iter %d element %llu", iter,
			       (unsigned long long)e);
			pos += bits / 8;
			for (unsigned d = ndim; d-- > 0;) {
				if (++c[d] < b.stop[d])
					break;
				c[d] = b.start[d];
			}
		}
		CHECK_EQ(k + 1, r.nruns);
	}
}

/* Sub-byte dtypes only on whole bytes. */
static void subbyte_runs_on_whole_bytes(void)
{
	struct pl_box b = { { 0, 0 }, { 4, 1 } };
	struct pl_runs r;

	/* F4 (4,4): one column is half a byte per row. */
	CHECK_EQ(pl_box_runs(2, (uint64_t[]){ 4, 4 }, 4, 0, &b, &r), RL_E_SUBBYTE_SPLIT);
	b.stop[1] = 2;
	CHECK_EQ(pl_box_runs(2, (uint64_t[]){ 4, 4 }, 4, 0, &b, &r), 0);
	CHECK_EQ(r.len, 1);
	CHECK_EQ(r.nruns, 4);
	/* F6 (4,4): rows of 3 bytes; one row whole is fine, 2 columns are 12 bits. */
	b = (struct pl_box){ { 1, 0 }, { 2, 4 } };
	CHECK_EQ(pl_box_runs(2, (uint64_t[]){ 4, 4 }, 6, 0, &b, &r), 0);
	CHECK_EQ(r.off, 3);
	CHECK_EQ(r.len, 3);
	b = (struct pl_box){ { 0, 0 }, { 4, 2 } };
	CHECK_EQ(pl_box_runs(2, (uint64_t[]){ 4, 4 }, 6, 0, &b, &r), RL_E_SUBBYTE_SPLIT);
	b = (struct pl_box){ { 0, 0 }, { 4, 4 } };
	CHECK_EQ(pl_box_runs(2, (uint64_t[]){ 4, 4 }, 6, 0, &b, &r), 0);
	CHECK_EQ(r.len, 12);
}

/* ---------------------------------------------------------------- */
/* Coalescing                                                        */
/* ---------------------------------------------------------------- */

static int ci_by_start(const void *a, const void *b)
{
	const struct pl_citem *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->ref < y->ref ? -1 : x->ref > y->ref;
}

/* Coalesces runs; ratio 0: automatic. Returns the block count. */
static size_t coalesce(const struct run *runs, size_t n, uint64_t min_gap, double ratio,
		       struct pl_block *blk, struct pl_citem *it)
{
	struct pl_ratio r = { (uint64_t)(ratio * 1000 + 0.5), 1000 };

	for (size_t i = 0; i < n; i++)
		it[i] = (struct pl_citem){ runs[i].off, runs[i].off + runs[i].len, runs[i].len,
					   (uint32_t)i, 0, 0 };
	qsort(it, n, sizeof(*it), ci_by_start);
	return pl_coalesce(it, n, min_gap, ratio ? &r : NULL, blk);
}

static void coalescing_gap_and_ratio_bounds(void)
{
	struct pl_block blk[2000];
	static struct pl_citem it[20000];
	size_t nb;

	CHECK_EQ(coalesce(NULL, 0, 4096, 1, blk, it), 0);
	nb = coalesce((struct run[]){ { 0, 100 }, { 100, 50 }, { 150, 50 } }, 3, 4096, 1, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].start, 0);
	CHECK_EQ(blk[0].end, 200);
	nb = coalesce((struct run[]){ { 200, 50 }, { 0, 100 }, { 100, 100 } }, 3, 4096, 1, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(it[0].ref, 1);
	CHECK_EQ(it[1].ref, 2);
	CHECK_EQ(it[2].ref, 0);
	CHECK_EQ(coalesce((struct run[]){ { 0, 8 }, { 4104, 8 } }, 2, 4096, 1, blk, it), 1);
	CHECK_EQ(coalesce((struct run[]){ { 0, 8 }, { 4105, 8 } }, 2, 4096, 1, blk, it), 2);
	nb = coalesce((struct run[]){ { 0, 8 }, { 200, 8 } }, 2, 4096, 2, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].end, 208);
	CHECK_EQ(coalesce((struct run[]){ { 0, 8 }, { 8192, 8 } }, 2, 4096, 2, blk, it), 2);
	CHECK_EQ(coalesce((struct run[]){ { 0, 8 }, { 8192, 8 } }, 2, 16384, 2, blk, it), 1);
	CHECK_EQ(coalesce((struct run[]){ { 0, 1024 }, { 4096, 1024 } }, 2, 0, 2, blk, it), 2);
	nb = coalesce((struct run[]){ { 0, 1024 }, { 4096, 1024 } }, 2, 0, 2.5, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].end, 5120);
	CHECK_EQ(coalesce((struct run[]){ { 0, 1024 }, { 3072, 1024 } }, 2, 0, 2, blk, it), 1);
	CHECK_EQ(coalesce((struct run[]){ { 0, 1024 }, { 3073, 1024 } }, 2, 0, 2, blk, it), 2);
	{
		struct run s8[8], s4[4];

		for (int i = 0; i < 8; i++)
			s8[i] = (struct run){ 16u * i, 8 };
		for (int i = 0; i < 4; i++)
			s4[i] = (struct run){ 64u * i, 8 };
		nb = coalesce(s8, 8, 4096, 2, blk, it);
		CHECK_EQ(nb, 1);
		CHECK_EQ(blk[0].end - blk[0].start, 120);
		CHECK_EQ(coalesce(s4, 4, 0, 2, blk, it), 4);
	}
	nb = coalesce((struct run[]){ { 0, 100 }, { 50, 100 } }, 2, 4096, 1, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].end, 150);
	CHECK_EQ(blk[0].needed, 150);
	nb = coalesce((struct run[]){ { 0, 100 }, { 10, 20 } }, 2, 4096, 1, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].end, 100);
	CHECK_EQ(blk[0].needed, 100);
	nb = coalesce((struct run[]){ { 0, 16 }, { 0, 16 } }, 2, 4096, 1, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].needed, 16);
	CHECK_EQ(blk[0].n, 2);
	nb = coalesce((struct run[]){ { 0, 1ull << 30 } }, 1, 4096, 1, blk, it);
	CHECK_EQ(nb, 1);
	CHECK_EQ(blk[0].end, 1ull << 30);
}

static void automatic_ratio_past_1024_blocks(void)
{
	static struct run runs[10000];
	static struct pl_citem it[10000];
	struct pl_ratio r;

	pl_auto_ratio(it, 0, 4096, &r);
	CHECK(r.num == r.den);
	for (int i = 0; i < 64; i++)
		runs[i] = (struct run){ (uint64_t)i << 20, 256 << 10 };
	coalesce(runs, 64, 4096, 1, (struct pl_block[64]){ { 0 } }, it);
	pl_auto_ratio(it, 64, 4096, &r);
	CHECK(r.num == r.den);
	for (int i = 0; i < 10000; i++)
		runs[i] = (struct run){ 4104ull * i, 8 };
	coalesce(runs, 10000, 4096, 1, (struct pl_block[1]){ { 0 } }, it);
	pl_auto_ratio(it, 10000, 4096, &r);
	CHECK(r.num == r.den);
	/* 1025 runs of 8 B at stride 8200: span / needed, one block. */
	for (int i = 0; i < 1025; i++)
		runs[i] = (struct run){ 8200ull * i, 8 };
	{
		static struct pl_block blk[1025];

		CHECK_EQ(coalesce(runs, 1025, 4096, 0, blk, it), 1);
		pl_auto_ratio(it, 1025, 4096, &r);
		CHECK_EQ(r.num, 8200ull * 1024 + 8);
		CHECK_EQ(r.den, 8 * 1025);
		CHECK((double)r.num / r.den > 1024.0 && (double)r.num / r.den < 1024.01);
		CHECK_EQ(coalesce(runs, 1024, 4096, 0, blk, it), 1024);
		pl_auto_ratio(it, 1024, 4096, &r);
		CHECK(r.num == r.den);
	}
}

/* ---------------------------------------------------------------- */
/* Plans                                                             */
/* ---------------------------------------------------------------- */

static int build(struct fake *f, const char *json, struct pl_opts *o, struct pl_plan **p,
		 struct cm_err *e)
{
	struct pl_spec *s = json ? fk_spec(json) : pl_spec_new();
	int ret;

	cm_err_clear(e);
	if (!s)
		return -EINVAL;
	ret = pl_plan_build(&f->ck, s, f->align, o, p, e);
	pl_spec_free(s);
	return ret;
}

/* An empty shard takes no room: 128 one-byte tensors each after an empty
 * one stage in 128 bytes (the empty ones pushed each to 16: 2,048), and
 * staging stays within twice the shards' bytes, every empty shard's
 * offset 16-aligned and inside it. */
static void empty_shards_take_no_room(void)
{
	static struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	fk_init(&f, 1, 64);
	for (unsigned i = 0; i < FK_MAX_T; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%03u", i);
		fk_add(&f, 0, name, RL_DTYPE_U8, 1, (uint64_t[]){ i & 1 });
	}
	pl_opts_default(&o);
	CHECKF(build(&f, NULL, &o, &p, &e) == 0, "%s", e.msg);
	CHECKF(p->staging[0] <= 2 * (FK_MAX_T / 2), "%" PRIu64 " bytes of staging for %u",
	       p->staging[0], FK_MAX_T / 2);
	for (size_t i = 0; i < p->nshards; i++)
		CHECKF(p->shards[i].nbytes || (p->shards[i].offset % 16 == 0 &&
					       p->shards[i].offset <= p->staging[0]),
		       "empty shard %zu at %" PRIu64, i, p->shards[i].offset);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
}

/*
 * dtype conversion: buffered files (alignment 1) are cut into requests
 * from a block's first byte; a block starting at an odd offset (U8 "v"
 * at 69, loaded with F32 "w" at 72 and not "u") would split elements of
 * "w" across requests, so requests end on multiples of 4. Every copy
 * into the converted shard takes whole elements, together all of them,
 * and lands in F16 bytes (staging offsets and sizes).
 */
static void converted_requests_end_on_elements(void)
{
	static struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct pl_exec ex;
	struct cm_err e;
	uint64_t got = 0, out_end = 0;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "u", RL_DTYPE_U8, 1, (uint64_t[]){ 5 });
	fk_add(&f, 0, "v", RL_DTYPE_U8, 1, (uint64_t[]){ 3 });
	fk_add(&f, 0, "w", RL_DTYPE_F32, 1, (uint64_t[]){ 6000 });
	pl_opts_default(&o);
	o.convert = RL_DTYPE_F16 + 1;
	o.chunk = 8192;
	CHECKF(build(&f, "{\"tensors\":[\"v\",\"w\"]}", &o, &p, &e) == 0, "%s", e.msg);
	pl_plan_exec(p, &ex);
	CHECK(ex.convert && ex.nshards == 2 && ex.shards[1].nbytes == 12000);
	CHECK(ex.convert[1].from == RL_DTYPE_F32 && ex.convert[1].to == RL_DTYPE_F16);
	CHECK(ex.convert[0].from == ex.convert[0].to);
	for (size_t i = 0; i < ex.ncopies; i++) {
		const struct cm_copy *c = ex.copies + i;

		if (c->shard != 1)
			continue;
		CHECKF(c->len % 4 == 0, "copy %zu: %u bytes: not whole F32 elements", i, c->len);
		got += (uint64_t)c->len * c->count;
		out_end = CM_MAX(out_end, c->dst + (uint64_t)c->len / 2 * c->count);
	}
	CHECK_EQ(got, 24000);
	CHECK_EQ(out_end, ex.shards[1].offset + 12000);
	CHECK(ex.nreads > 1);
	pl_plan_free(p);
}

/* A whole-file load of densely packed tensors: one block, exact. */
static void whole_file_is_one_block(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;

	fk_init(&f, 1, 88);
	for (int i = 0; i < 20; i++) {
		char name[16];

		snprintf(name, sizeof(name), "t%02d", i);
		fk_add(&f, 0, name, RL_DTYPE_F32, 2, (uint64_t[]){ 3 + i, 5 });
	}
	pl_opts_default(&o);
	CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
	CHECK_EQ(p->stats[0].blocks, 1);
	CHECK_EQ(p->stats[0].requests, 1);
	CHECK_EQ(p->stats[0].needed_bytes, f.files[0].size - 88);
	CHECK_EQ(p->stats[0].read_bytes, f.files[0].size - 88);
	CHECK(pl_check_plan(p, &f.ck, f.align, o.chunk, NULL) == NULL);
	pl_plan_free(p);
}

static void blocks_cut_into_chunks(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	/* Five dense 16 B tensors, chunk 64 -> one block, 64 + 16. */
	fk_init(&f, 1, 0);
	for (int i = 0; i < 5; i++) {
		char name[8];

		snprintf(name, sizeof(name), "t%d", i);
		fk_add(&f, 0, name, RL_DTYPE_F32, 1, (uint64_t[]){ 4 });
	}
	pl_opts_default(&o);
	o.chunk = 64;
	CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
	CHECK_EQ(p->stats[0].blocks, 1);
	CHECK_EQ(p->nreads, 2);
	CHECK_EQ(p->reads[0].len, 64);
	CHECK_EQ(p->reads[1].len, 16);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* One 64 B run, chunk 16 -> 4 requests. */
	fk_init(&f, 1, 0);
	fk_add(&f, 0, "w", RL_DTYPE_U8, 1, (uint64_t[]){ 64 });
	o.chunk = 16;
	CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
	CHECK_EQ(p->stats[0].needed_bytes, 64);
	CHECK_EQ(p->stats[0].read_bytes, 64);
	CHECK_EQ(p->stats[0].blocks, 1);
	CHECK_EQ(p->stats[0].requests, 4);
	CHECK_EQ(p->stats[0].files_opened, 1);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* Nothing needed from a file -> never opened, all stats 0. */
	fk_init(&f, 2, 8);
	fk_add(&f, 0, "a", RL_DTYPE_U8, 1, (uint64_t[]){ 0 });
	fk_add(&f, 1, "b", RL_DTYPE_U8, 2, (uint64_t[]){ 0, 3 });
	pl_opts_default(&o);
	CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
	CHECK_EQ(p->stats[0].files_opened, 0);
	CHECK_EQ(p->stats[0].requests, 0);
	CHECK_EQ(p->stats[0].needed_bytes, 0);
	CHECK_EQ(p->nreads, 0);
	CHECK_EQ(p->nshards, 2);
	CHECK_EQ(p->shards[0].nbytes, 0);
	pl_plan_free(p);
}

/* Alignment widens blocks and the last read may pass EOF (min_len). */
static void blocks_widened_to_the_alignment(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	fk_init(&f, 1, 100);
	fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 100, 30 });
	fk_add(&f, 0, "b", RL_DTYPE_F32, 2, (uint64_t[]){ 7, 3 });
	f.align[0] = (struct pl_align){ 512, 512 };
	pl_opts_default(&o);
	o.chunk = 4096;
	CHECK_EQ(build(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"m\"]},"
		       "\"rules\":[{\"match\":\"a\",\"spec\":[null,\"m\"]}]}", &o, &p, &e), 0);
	CHECK_EQ(p->reads[0].off, 0);
	CHECK_EQ(p->reads[p->nreads - 1].off + p->reads[p->nreads - 1].min_len, f.files[0].size);
	CHECK(p->reads[p->nreads - 1].len > p->reads[p->nreads - 1].min_len);
	CHECK_EQ(p->stats[0].needed_bytes, f.files[0].size - 100);
	CHECK_EQ(p->stats[0].read_bytes, f.files[0].size);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
}

/* Issue 32's mutant: a chunk that is no multiple of the offset alignment
 * is aligned down to it, so that every read starts aligned and none is
 * longer than the chunk (O_DIRECT refuses misaligned reads). */
static void chunk_not_a_multiple_of_the_alignment(void)
{
	static const unsigned aligns[] = { 512, 4096 };
	static const uint64_t extra[] = { 1, 512 + 7, 2048 };

	for (size_t i = 0; i < CM_ARRAY_SIZE(aligns); i++) {
		for (size_t k = 0; k < CM_ARRAY_SIZE(extra); k++) {
			unsigned A = aligns[i];
			struct fake f;
			struct pl_opts o;
			struct pl_plan *p;
			struct cm_err e;
			const char *bad;

			fk_init(&f, 1, 100);
			fk_add(&f, 0, "a", RL_DTYPE_F32, 2, (uint64_t[]){ 300, 100 });
			f.align[0] = (struct pl_align){ A, A };
			pl_opts_default(&o);
			o.chunk = 3 * (uint64_t)A + extra[k] % A;
			o.congruent = 0; /* no direct cuts: chunks alone */
			CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
			CHECK(p->nreads > 3);
			bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
			CHECKF(!bad, "align %u, chunk %llu: %s", A, (unsigned long long)o.chunk, bad);
			for (size_t q = 0; q + 1 < p->nreads; q++)
				CHECKF(p->reads[q].off % A == 0 && p->reads[q].len == 3 * A,
				       "align %u, chunk %llu: read %zu at %llu, %u bytes", A,
				       (unsigned long long)o.chunk, q,
				       (unsigned long long)p->reads[q].off, p->reads[q].len);
			pl_plan_free(p);
		}
	}
}

/* Congruent placement: a large shard's aligned middle is read directly. */
static void congruent_shards_read_directly(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;
	uint64_t direct = 0;

	fk_init(&f, 1, 8 + 1000);
	fk_add(&f, 0, "small", RL_DTYPE_F32, 1, (uint64_t[]){ 33 });
	fk_add(&f, 0, "big", RL_DTYPE_BF16, 2, (uint64_t[]){ 1024, 300 });
	fk_add(&f, 0, "tail", RL_DTYPE_F32, 1, (uint64_t[]){ 5 });
	f.align[0] = (struct pl_align){ 4096, 4096 };
	pl_opts_default(&o);
	o.chunk = 64 << 10;
	CHECK_EQ(build(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"],"
		       "\"process_of_device\":[0,0]},"
		       "\"rules\":[{\"match\":\"big\",\"spec\":[\"d\"]}]}", &o, &p, &e), 0);
	for (size_t q = 0; q < p->nreads; q++)
		if (p->reads[q].flags & CM_READ_DIRECT)
			direct += p->reads[q].len;
	CHECK(direct >= 500 << 10);
	CHECK_EQ(p->stats[0].blocks, 1);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* Off: no direct reads, shards of a page or more aligned to 4096, small
	 * ones (33 and 5 F32) packed at 16. */
	o.congruent = 0;
	CHECK_EQ(build(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
		       "\"rules\":[{\"match\":\"big\",\"spec\":[\"d\"]}]}", &o, &p, &e), 0);
	for (size_t q = 0; q < p->nreads; q++)
		CHECK(!(p->reads[q].flags & CM_READ_DIRECT));
	for (size_t i = 0; i < p->nshards; i++)
		CHECK_EQ(p->shards[i].offset % (p->shards[i].nbytes >= 4096 ? 4096 : 16), 0);
	pl_plan_free(p);
	/* A file aligned over a page (a logical block of 8 KiB): no direct
	 * reads either, so streaming sizes its bounce buffers for every read
	 * (exec's unit, ex_wjob_unit, assumes direct reads keep at most 4096). */
	o.congruent = 1;
	f.align[0] = (struct pl_align){ 8192, 512 };
	CHECK_EQ(build(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"d\"]},"
		       "\"rules\":[{\"match\":\"big\",\"spec\":[\"d\"]}]}", &o, &p, &e), 0);
	for (size_t q = 0; q < p->nreads; q++)
		CHECK(!(p->reads[q].flags & CM_READ_DIRECT));
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
}

/* ---------------------------------------------------------------- */
/* Several processes                                                 */
/* ---------------------------------------------------------------- */

#define MESH_4x2 "\"mesh\":{\"shape\":[4,2],\"axes\":[\"data\",\"model\"]," \
	"\"devices\":[0,1,2,3,4,5,6,7],\"process_of_device\":[0,0,1,1,2,2,3,3]}"

static void processes_read_their_own_boxes(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const uint64_t base = 64;

	fk_init(&f, 1, base);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 8 });
	pl_opts_default(&o);
	for (int proc = 0; proc < 4; proc++) {
		const char *bad;

		o.process = proc;
		/* Split over (data, model): rows [2p, 2p+2), one block of 64 B at base + 64p. */
		CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"w\","
			       "\"spec\":[\"data\",\"model\"]}]}", &o, &p, &e), 0);
		CHECK_EQ(p->nslots, 2);
		CHECK_EQ(p->stats[proc].blocks, 1);
		CHECK_EQ(p->stats[proc].needed_bytes, 64);
		CHECK_EQ(p->stats[proc].read_bytes, 64);
		CHECK_EQ(p->reads[0].off, base + 64 * (uint64_t)proc);
		CHECK_EQ(p->reads[0].len, 64);
		CHECK_EQ(p->total.needed_bytes, 256);
		CHECK_EQ(p->total.read_bytes, 256);
		CHECK_EQ(p->total.devices, 8);
		bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
		CHECKF(!bad, "%s", bad);
		pl_plan_free(p);
		/* Split over (null, model): the whole tensor, one 256 B block per process. */
		CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"w\","
			       "\"spec\":[null,\"model\"]}]}", &o, &p, &e), 0);
		CHECK_EQ(p->stats[proc].blocks, 1);
		CHECK_EQ(p->stats[proc].read_bytes, 256);
		CHECK_EQ(p->total.read_bytes, 1024);
		bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
		CHECKF(!bad, "%s", bad);
		pl_plan_free(p);
		/* Replicated: both devices share one read, two placements. */
		CHECK_EQ(build(&f, "{" MESH_4x2 "}", &o, &p, &e), 0);
		CHECK_EQ(p->nreads, 1);
		CHECK_EQ(p->reads[0].ncopies, 2);
		CHECK_EQ(p->stats[proc].needed_bytes, 256);
		CHECK(p->copies[0].dev != p->copies[1].dev);
		bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
		CHECKF(!bad, "%s", bad);
		pl_plan_free(p);
	}
	/* Every process derives the same totals. */
	{
		struct pl_stats t0;

		o.process = 0;
		CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"w\","
			       "\"spec\":[\"model\",\"data\"]}]}", &o, &p, &e), 0);
		t0 = p->total;
		for (int q = 0; q < 4; q++) {
			struct pl_stats sq = p->stats[q];
			struct pl_plan *pq;

			o.process = q;
			CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"w\","
				       "\"spec\":[\"model\",\"data\"]}]}", &o, &pq, &e), 0);
			CHECK(!memcmp(&pq->stats[q], &sq, sizeof(sq)));
			CHECK(!memcmp(&pq->total, &t0, sizeof(t0)));
			pl_plan_free(pq);
		}
		pl_plan_free(p);
	}
}

/* A 4x4 mesh, process q holding devices [4q, 4q + 4): a tensor's columns
 * split over both axes give process q a quarter of each row. */
#define MESH_4x4 "\"mesh\":{\"shape\":[4,4],\"axes\":[\"data\",\"model\"]," \
	"\"process_of_device\":[0,0,0,0,1,1,1,1,2,2,2,2,3,3,3,3]}"
#define ROWS_SPEC "{" MESH_4x4 ",\"rules\":[{\"match\":\".*\"," \
	"\"spec\":[null,[\"data\",\"model\"]]}]}"

/* Copies of p that hold a single run (count 1). */
static size_t single_row_copies(const struct pl_plan *p)
{
	size_t n = 0;

	for (size_t i = 0; i < p->ncopies; i++)
		n += p->copies[i].count == 1;
	return n;
}

/*
 * Short rows far apart (issue 33 item 5): BF16 [64, 4096] tensors whose
 * columns are split over all 16 devices, so process 1 needs 2 KiB of every
 * 8 KiB row, as 4 devices x 512 B; the 6 KiB gaps exceed min_gap, so each
 * row is its own coalescing item. The rows a request holds are one strided
 * copy per device (count 64, stride one row), not one copy per row and
 * device (64 x 4 per tensor before); byte-exact by pl_check_plan.
 */
static void short_rows_one_copy_per_read_and_box(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	/* One tensor, gaps coalesced by an explicit ratio: one read. */
	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_BF16, 2, (uint64_t[]){ 64, 4096 });
	pl_opts_default(&o);
	o.process = 1;
	o.ratio = 4;
	CHECK_EQ(build(&f, ROWS_SPEC, &o, &p, &e), 0);
	CHECK_EQ(p->nreads, 1);
	CHECK_EQ(p->ncopies, 4);
	for (size_t i = 0; i < p->ncopies; i++) {
		CHECK_EQ(p->copies[i].count, 64);
		CHECK_EQ(p->copies[i].len, 512);
		CHECK_EQ(p->copies[i].src_stride, 8192);
	}
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* Requests of 8 rows each: one copy per request and device. */
	o.chunk = 8 * 8192;
	CHECK_EQ(build(&f, ROWS_SPEC, &o, &p, &e), 0);
	CHECK_EQ(p->nreads, 8);
	CHECK_EQ(p->ncopies, 8 * 4);
	CHECK_EQ(single_row_copies(p), 0);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* 20 such tensors under the defaults: more than 1,024 row blocks, so
	 * the automatic ratio reads the span; copies per (request, tensor,
	 * device) and the pieces of rows cut by a request's end. */
	fk_init(&f, 1, 64);
	for (int i = 0; i < 20; i++) {
		char name[8];

		snprintf(name, sizeof(name), "w%d", i);
		fk_add(&f, 0, name, RL_DTYPE_BF16, 2, (uint64_t[]){ 64, 4096 });
	}
	f.align[0] = (struct pl_align){ 512, 512 };
	pl_opts_default(&o);
	o.process = 1;
	CHECK_EQ(build(&f, ROWS_SPEC, &o, &p, &e), 0);
	CHECKF(p->ncopies <= (20 + 2 * p->nreads) * 4, "%zu copies in %zu reads", p->ncopies,
	       p->nreads);
	CHECK_EQ(p->stats[1].needed_bytes, 20ull * 64 * 2048);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
}

static void empty_shards_and_subbyte_errors(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;

	fk_init(&f, 1, 0);
	fk_add(&f, 0, "v", RL_DTYPE_F32, 1, (uint64_t[]){ 4 });
	fk_add(&f, 0, "s", RL_DTYPE_F32, 0, NULL);
	pl_opts_default(&o);
	/* 4 rows split 8 ways: 4 empty shards, allowed. */
	CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"v\","
		       "\"spec\":[[\"data\",\"model\"]]}]}", &o, &p, &e), 0);
	CHECK_EQ(p->shards[pl_shard_index(p, 0, 0)].nbytes, 4);
	CHECK_EQ(p->shards[pl_shard_index(p, 0, 1)].nbytes, 4);
	pl_plan_free(p);
	o.process = 3;
	CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"v\","
		       "\"spec\":[[\"data\",\"model\"]]}]}", &o, &p, &e), 0);
	CHECK_EQ(p->shards[pl_shard_index(p, 0, 0)].nbytes, 0);
	CHECK_EQ(p->stats[3].needed_bytes, 4);        /* only the scalar */
	pl_plan_free(p);
	/* F4 (4, 6): 3 bytes a row; columns over 2 devices give 1.5 bytes. */
	{
		struct fake g;

		fk_init(&g, 1, 0);
		fk_add(&g, 0, "f4", RL_DTYPE_F4, 2, (uint64_t[]){ 4, 6 });
		o.process = 0;
		CHECK_EQ(build(&g, "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"]},"
			       "\"rules\":[{\"match\":\"f4\",\"spec\":[null,\"x\"]}]}", &o, &p, &e),
			 RL_E_SUBBYTE_SPLIT);
		CHECKF(strstr(e.msg, "rule 0 (\"f4\"): tensor \"f4\" (F4): the shard of device 0 "
			      "does not fall on whole bytes"), "%s", e.msg);
		/* A shard of a size in half bytes: the same wording. */
		fk_add(&g, 0, "odd", RL_DTYPE_F4, 1, (uint64_t[]){ 10 });
		CHECK_EQ(build(&g, "{\"mesh\":{\"shape\":[4],\"axes\":[\"x\"]},"
			       "\"rules\":[{\"match\":\"o.*\",\"spec\":[\"x\"]}]}", &o, &p, &e),
			 RL_E_SUBBYTE_SPLIT);
		CHECKF(strstr(e.msg, "rule 0 (\"o.*\"): tensor \"odd\" (F4): the shard of device 0 "
			      "does not fall on whole bytes"), "%s", e.msg);
		/* A slice cutting a byte, no rule: named as such. */
		CHECK_EQ(build(&g, "{\"targets\":[{\"name\":\"s\",\"source\":\"odd\","
			       "\"slice\":[[1,3]]}],\"tensors\":[\"s\"]}", &o, &p, &e),
			 RL_E_SUBBYTE_SPLIT);
		CHECKF(strstr(e.msg, "tensor \"s\" (F4, sliced, no rule): the shard of device 0 "
			      "does not fall on whole bytes"), "%s", e.msg);
		g.ck.ntensors--;
		/* Rows are whole bytes: 2 rows = 6 bytes per device. */
		CHECK_EQ(build(&g, "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"]},"
			       "\"rules\":[{\"match\":\"f4\",\"spec\":[\"x\"]}]}", &o, &p, &e), 0);
		CHECK_EQ(p->shards[0].nbytes, 6);
		CHECK_EQ(p->shards[1].nbytes, 6);
		CHECK_EQ(p->stats[0].needed_bytes, 12);
		pl_plan_free(p);
	}
	/* A spec on a scalar. */
	CHECK_EQ(build(&f, "{" MESH_4x2 ",\"rules\":[{\"match\":\"s\","
		       "\"spec\":[\"data\"]}]}", &o, &p, &e), RL_E_SPEC_RANK);
	CHECK(strstr(e.msg, "\"s\"") && strstr(e.msg, "rule 0"));
	/* Process out of range. */
	o.process = 4;
	CHECK_EQ(build(&f, "{" MESH_4x2 "}", &o, &p, &e), RL_E_INVALID_ARG);
	o.process = 0;
	o.ratio = 0.5;
	CHECK_EQ(build(&f, "{" MESH_4x2 "}", &o, &p, &e), RL_E_INVALID_ARG);
	CHECK(strstr(e.msg, "0.5"));
}

/* ---------------------------------------------------------------- */
/* Targets                                                           */
/* ---------------------------------------------------------------- */

static void targets_stack_slice_and_alias(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	fk_init(&f, 2, 40);
	fk_add(&f, 0, "l0", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	fk_add(&f, 0, "e0l0", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	fk_add(&f, 0, "e0l1", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	fk_add(&f, 0, "qkv", RL_DTYPE_F32, 2, (uint64_t[]){ 12, 4 });
	fk_add(&f, 1, "l1", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	fk_add(&f, 1, "e1l0", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	fk_add(&f, 1, "e1l1", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	fk_add(&f, 1, "embed", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 4 });
	pl_opts_default(&o);
	CHECK_EQ(build(&f, "{\"targets\":["
		       "{\"name\":\"layers\",\"stack\":[\"l0\",\"l1\"]},"
		       "{\"name\":\"experts\",\"stack\":[[\"e0l0\",\"e0l1\"],[\"e1l0\",\"e1l1\"]],"
		       "\"shape\":[2,2,4,4],\"dtype\":\"F32\"},"
		       "{\"name\":\"q\",\"source\":\"qkv\",\"slice\":[[0,4],null]},"
		       "{\"name\":\"k\",\"source\":\"qkv\",\"slice\":[[4,8]]},"
		       "{\"name\":\"v\",\"source\":\"qkv\",\"slice\":[[8,12],null]},"
		       "{\"name\":\"lm_head\",\"source\":\"embed\"},"
		       "{\"name\":\"embed\",\"source\":\"embed\"}]}", &o, &p, &e), 0);
	CHECK_EQ(p->nitems, 7);          /* every checkpoint tensor is a source */
	CHECK_STR(p->items[0].name, "layers");
	CHECK_EQ(p->items[0].ndim, 3);
	CHECK_EQ(p->items[0].shape[0], 2);
	CHECK_EQ(p->items[1].ndim, 4);
	CHECK_EQ(p->items[2].shape[0], 4);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	/* Tied: embed read once (needed counts it once), two destinations;
	 * q, k, v are three contiguous runs of qkv, read once. */
	CHECK_EQ(p->stats[0].needed_bytes, f.files[0].size - 40 + f.files[1].size - 40);
	CHECK_EQ(p->stats[0].read_bytes, p->stats[0].needed_bytes);
	pl_plan_free(p);
	/* A stacked target sharded on the layer axis: device 0 reads l0 only. */
	CHECK_EQ(build(&f, "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"],"
		       "\"process_of_device\":[0,1]},"
		       "\"rules\":[{\"match\":\"layers\",\"spec\":[\"x\"]}],"
		       "\"targets\":[{\"name\":\"layers\",\"stack\":[\"l0\",\"l1\"]}],"
		       "\"tensors\":[\"layers\"]}", &o, &p, &e), 0);
	CHECK_EQ(p->nitems, 1);
	CHECK_EQ(p->stats[0].needed_bytes, 64);
	CHECK_EQ(p->stats[0].files_opened, 1);
	CHECK_EQ(p->reads[0].file, 0);
	CHECK_EQ(p->reads[0].off, f.t[0].offset);
	CHECK_EQ(p->stats[1].files_opened, 1);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* Errors. */
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"x\",\"stack\":[\"l0\",\"qkv\"]}]}",
		       &o, &p, &e), RL_E_SHAPE_MISMATCH);
	CHECK(strstr(e.msg, "shape mismatch"));
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"x\",\"source\":\"l0\",\"shape\":[4,5]}]}",
		       &o, &p, &e), RL_E_SHAPE_MISMATCH);
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"x\",\"source\":\"l0\",\"dtype\":\"BF16\"}]}",
		       &o, &p, &e), RL_E_SHAPE_MISMATCH);
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"x\",\"source\":\"nope\"}]}",
		       &o, &p, &e), RL_E_MISSING_TENSOR);
	CHECK(strstr(e.msg, "nope"));
	/* A selection may not repeat a name (spec_errors); a target may take
	 * the name of a checkpoint tensor that is not loaded. */
	CHECK_EQ(build(&f, "{\"tensors\":[\"l0\",\"x\"],\"targets\":[{\"name\":\"x\","
		       "\"source\":\"qkv\"},{\"name\":\"l1\",\"source\":\"e0l0\"}]}",
		       &o, &p, &e), 0);
	CHECK_EQ(p->nitems, 2);
	pl_plan_free(p);
	CHECK_EQ(build(&f, "{\"tensors\":[\"l0\",\"gone\"]}", &o, &p, &e), RL_E_MISSING_TENSOR);
	CHECK(strstr(e.msg, "gone"));
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"x\",\"source\":\"qkv\",\"slice\":[[0,13]]}]}",
		       &o, &p, &e), RL_E_SPEC_TARGET);
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"l0\",\"source\":\"qkv\"}]}",
		       &o, &p, &e), RL_E_SPEC_TARGET);
}

/* ---------------------------------------------------------------- */
/* Randomized plans                                                  */
/* ---------------------------------------------------------------- */

/* A spec's start: an [ma, mb, mc] mesh (axes a, b, c) over nproc processes
 * in equal runs of devices, up to the opening of its rules. Returns the length. */
static int mesh_json(char *json, size_t cap, uint32_t ma, uint32_t mb, uint32_t mc,
		     uint32_t nproc)
{
	uint32_t ndev = ma * mb * mc;
	int len = snprintf(json, cap, "{\"mesh\":{\"shape\":[%u,%u,%u],\"axes\":[\"a\",\"b\",\"c\"],"
			   "\"process_of_device\":[", ma, mb, mc);

	for (uint32_t d = 0; d < ndev; d++)
		len += snprintf(json + len, cap - len, "%s%u", d ? "," : "",
				(uint32_t)((uint64_t)d * nproc / ndev));
	return len;
}

static void random_plans(void)
{
	static const int dts[] = { RL_DTYPE_U8, RL_DTYPE_BF16, RL_DTYPE_F32, RL_DTYPE_F64 };
	static const char *const specs[] = { "null", "\"a\"", "\"b\"", "[\"a\",\"b\"]",
					     "[\"b\",\"a\"]", "\"c\"" };

	for (int iter = 0; iter < 100; iter++) {
		struct fake f;
		struct pl_opts o;
		struct pl_plan *p, *pq0;
		struct cm_err e;
		char json[4096];
		int len, nt = 1 + (int)(th_rand() % 12), nf = 1 + (int)(th_rand() % 2);
		unsigned A = (th_rand() % 3) ? 1u << (th_rand() % 13) : 1;
		uint32_t ma = 1 + th_rand() % 3, mb = 1 + th_rand() % 3, mc = 1 + th_rand() % 2;
		uint32_t ndev = ma * mb * mc, nproc = 1 + (uint32_t)(th_rand() % ndev);
		const char *bad;
		int ret;

		fk_init(&f, (unsigned)nf, 8 + th_rand() % 200);
		for (int i = 0; i < nt; i++) {
			unsigned ndim = (unsigned)(th_rand() % 4);
			uint64_t shape[4];
			char name[8];

			/* At most one long dimension keeps tensors small. */
			for (unsigned d = 0; d < ndim; d++)
				shape[d] = 1 + th_rand() % 40;
			if (ndim && th_rand() % 4 == 0)
				shape[th_rand() % ndim] = 1 + th_rand() % 1500;
			snprintf(name, sizeof(name), "t%d", i);
			fk_add(&f, (unsigned)(i * nf / nt), name, dts[th_rand() % 4], ndim, shape);
		}
		for (int i = 0; i < nf; i++)
			f.align[i] = (struct pl_align){ A, A };
		len = mesh_json(json, sizeof(json), ma, mb, mc, nproc);
		len += snprintf(json + len, sizeof(json) - len, "]},\"rules\":[");
		for (int i = 0; i < nt; i++) {
			unsigned nd = f.t[i].ndim ? (unsigned)(th_rand() % (f.t[i].ndim + 1)) : 0;
			uint32_t used = 0;

			len += snprintf(json + len, sizeof(json) - len,
					"%s{\"match\":\"t%d\",\"spec\":[", i ? "," : "", i);
			for (unsigned d = 0; d < nd; d++) {
				int k = (int)(th_rand() % CM_ARRAY_SIZE(specs));
				uint32_t need = k == 1 ? 1 : k == 2 ? 2 : k >= 3 && k <= 4 ? 3 : k == 5 ? 4 : 0;

				if (used & need)
					k = 0, need = 0;
				used |= need;
				len += snprintf(json + len, sizeof(json) - len, "%s%s",
						d ? "," : "", specs[k]);
			}
			len += snprintf(json + len, sizeof(json) - len, "]}");
		}
		snprintf(json + len, sizeof(json) - len, "]}");
		pl_opts_default(&o);
		o.process = (int)(th_rand() % nproc);
		o.min_gap = th_rand() % 2 ? 4096 : th_rand() % 64;
		o.ratio = th_rand() % 3 ? 0 : 1 + (double)(th_rand() % 40) / 10;
		o.chunk = th_rand() % 2 ? 4u << 20 : CM_MAX(A, 64u << (th_rand() % 10));
		o.congruent = (int)(th_rand() % 2);
		ret = build(&f, json, &o, &p, &e);
		CHECKF(!ret, "iter %d: %s (%s)", iter, e.msg, json);
		bad = pl_check_plan(p, &f.ck, f.align, CM_MAX(o.chunk, A), NULL);
		CHECKF(!bad, "iter %d: %s; spec %s", iter, bad, json);
		/* Every process's stats match what it computes for itself. */
		for (uint32_t q = 0; q < nproc; q++) {
			struct pl_plan *pq;

			o.process = (int)q;
			CHECK_EQ(build(&f, json, &o, &pq, &e), 0);
			CHECKF(!memcmp(&pq->stats[q], &p->stats[q], sizeof(p->stats[q])),
			       "iter %d: stats of %u differ", iter, q);
			CHECK_EQ(pq->stats[q].requests, pq->nreads);
			pl_plan_free(pq);
		}
		/* Statistics only: the same numbers, nothing to load. */
		o.process = (int)(th_rand() % nproc);
		o.stats_only = 1;
		CHECK_EQ(build(&f, json, &o, &pq0, &e), 0);
		CHECK(pl_plan_stats_only(pq0) && !pq0->nreads && !pq0->ncopies && !pq0->nshards);
		CHECKF(!memcmp(pq0->stats, p->stats, nproc * sizeof(*p->stats)) &&
		       !memcmp(&pq0->total, &p->total, sizeof(p->total)),
		       "iter %d: stats only differ", iter);
		pl_plan_free(pq0);
		o.stats_only = 0;
		pl_plan_free(p);
	}
}

/* n bytes at a and b are equal (either may be NULL when n is 0). */
static int same_bytes(const void *a, const void *b, size_t n)
{
	return !n || !memcmp(a, b, n);
}

/* Plans p and q are the same, table by table. */
static int same_plans(const struct pl_plan *p, const struct pl_plan *q)
{
	return p->nreads == q->nreads && p->ncopies == q->ncopies && p->nshards == q->nshards &&
	       p->nslots == q->nslots &&
	       same_bytes(p->reads, q->reads, p->nreads * sizeof(*p->reads)) &&
	       same_bytes(p->copies, q->copies, p->ncopies * sizeof(*p->copies)) &&
	       same_bytes(p->shards, q->shards, p->nshards * sizeof(*p->shards)) &&
	       same_bytes(p->staging, q->staging, p->nslots * sizeof(*p->staging)) &&
	       same_bytes(p->stats, q->stats, p->spec->nprocs * sizeof(*p->stats));
}

/*
 * The memo of slot shards (planner/slotcache.c) is only a memo: random
 * checkpoints that repeat a few shapes under a few rules (so entries are
 * found, collide and are replaced), sub-byte dtypes (shards that fail on
 * whole bytes fall back to the long way, which words the error), read once
 * or not: the plan, or the error, is the one every slot computed the long
 * way gives.
 */
static void memo_plans_like_the_long_way(void)
{
	static const int dts[] = { RL_DTYPE_U8, RL_DTYPE_BF16, RL_DTYPE_F32, RL_DTYPE_F4 };
	static const uint64_t shapes[][2] = { { 8, 6 }, { 6, 8 }, { 12, 1 }, { 3, 16 } };
	static const char *const specs[] = { "[\"a\"]", "[null,\"b\"]", "[[\"a\",\"b\"]]",
					     "[\"c\",\"a\"]", "[]" };

	for (int iter = 0; iter < 60; iter++) {
		struct fake f;
		struct pl_opts o;
		struct pl_plan *p = NULL, *q = NULL;
		struct cm_err e, e2;
		char json[2048];
		int len, nt = 1 + (int)(th_rand() % 40), r1, r2;
		uint32_t ma = 1 + th_rand() % 3, mb = 1 + th_rand() % 4, mc = 1 + th_rand() % 2;
		uint32_t ndev = ma * mb * mc, nproc = 1 + (uint32_t)(th_rand() % ndev);

		fk_init(&f, 2, 8 + th_rand() % 64);
		for (int i = 0; i < nt; i++) {
			char name[16];
			unsigned k = (unsigned)(th_rand() % CM_ARRAY_SIZE(shapes));

			snprintf(name, sizeof(name), "%c%d", "xyz"[th_rand() % 3], i);
			fk_add(&f, (unsigned)(i % 2), name, dts[th_rand() % CM_ARRAY_SIZE(dts)],
			       1 + (unsigned)(th_rand() % 2), shapes[k]);
		}
		len = mesh_json(json, sizeof(json), ma, mb, mc, nproc);
		snprintf(json + len, sizeof(json) - len,
			 "]},\"rules\":[{\"match\":\"x.*\",\"spec\":%s},"
			 "{\"match\":\"y.*\",\"spec\":%s}]}",
			 specs[th_rand() % CM_ARRAY_SIZE(specs)],
			 specs[th_rand() % CM_ARRAY_SIZE(specs)]);
		pl_opts_default(&o);
		o.process = (int)(th_rand() % nproc);
		o.read_once = (int)(th_rand() % 2);
		r1 = build(&f, json, &o, &p, &e);
		o.no_memo = 1;
		r2 = build(&f, json, &o, &q, &e2);
		CHECKF(r1 == r2 && !strcmp(e.msg, e2.msg), "iter %d: %d \"%s\" with the memo, "
		       "%d \"%s\" without; spec %s", iter, r1, e.msg, r2, e2.msg, json);
		if (!r1 && !r2)
			CHECKF(same_plans(p, q), "iter %d: plans differ; spec %s", iter, json);
		pl_plan_free(p);
		pl_plan_free(q);
	}
}

/* ---------------------------------------------------------------- */
/* Boundaries the mutants showed untested                            */
/* ---------------------------------------------------------------- */

/*
 * Dedupe keys hold the run length: a slice of a tensor listed before an
 * alias of the same tensor starts at the same offset; a key without the
 * length made them one region and the alias lost its bytes.
 */
static void dedupe_key_holds_run_length(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 4, 4 });
	pl_opts_default(&o);
	CHECK_EQ(build(&f, "{\"targets\":[{\"name\":\"s\",\"source\":\"w\",\"slice\":[[0,1]]},"
		       "{\"name\":\"a\",\"source\":\"w\"}]}", &o, &p, &e), 0);
	CHECK_EQ(p->nitems, 2);
	CHECK_EQ(p->shards[1].nbytes, 64);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	CHECK_EQ(p->stats[0].needed_bytes, 64);
	pl_plan_free(p);
}

/* A read-once batch filled exactly to its bound is one batch, not two. */
static void broadcast_batch_filled_to_its_bound(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	uint32_t batch[3];

	CHECK_EQ(pl_batches((uint64_t[]){ 4, 4, 1 }, 3, 8, batch), 2);
	CHECK_EQ(batch[0], 0);
	CHECK_EQ(batch[1], 0);
	CHECK_EQ(batch[2], 1);
	CHECK_EQ(pl_batches((uint64_t[]){ 9, 8, 1 }, 3, 8, batch), 3);
	/* The whole 256-byte tensor replicated over 4 processes: its
	 * transfers fill one batch of exactly 256 bytes. */
	fk_init(&f, 1, 64);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 8, 8 });
	pl_opts_default(&o);
	o.read_once = 1;
	o.batch_bytes = 256;
	CHECK_EQ(build(&f, "{\"mesh\":{\"shape\":[4,2],\"axes\":[\"data\",\"model\"],"
		       "\"process_of_device\":[0,0,1,1,2,2,3,3]},\"rules\":[{\"match\":\"w\","
		       "\"spec\":[null,\"model\"]}]}", &o, &p, &e), 0);
	CHECK(p->xp && p->xp->ntotal >= 2);
	CHECK_EQ(p->xp->nbatches, 1);
	pl_plan_free(p);
}

/*
 * Blocks whose aligned spans only touch stay two blocks (merging is for
 * spans that overlap once aligned).
 */
static void aligned_blocks_that_touch_stay_apart(void)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;

	fk_init(&f, 1, 0);
	fk_add(&f, 0, "a", RL_DTYPE_U8, 1, (uint64_t[]){ 100 });
	fk_add(&f, 0, "gap", RL_DTYPE_U8, 1, (uint64_t[]){ 500 });
	fk_add(&f, 0, "b", RL_DTYPE_U8, 1, (uint64_t[]){ 100 });
	f.align[0] = (struct pl_align){ 512, 512 };
	pl_opts_default(&o);
	o.min_gap = 0;
	o.ratio = 1;
	/* a: [0, 100) -> [0, 512); b: [600, 700) -> [512, 1024): they touch. */
	CHECK_EQ(build(&f, "{\"tensors\":[\"a\",\"b\"]}", &o, &p, &e), 0);
	CHECK_EQ(p->stats[0].blocks, 2);
	CHECK_EQ(p->nreads, 2);
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	CHECKF(!bad, "%s", bad);
	pl_plan_free(p);
	/* One byte closer and they overlap once aligned: one block. */
	fk_init(&f, 1, 0);
	fk_add(&f, 0, "a", RL_DTYPE_U8, 1, (uint64_t[]){ 100 });
	fk_add(&f, 0, "gap", RL_DTYPE_U8, 1, (uint64_t[]){ 411 });
	fk_add(&f, 0, "b", RL_DTYPE_U8, 1, (uint64_t[]){ 100 });
	f.align[0] = (struct pl_align){ 512, 512 };
	CHECK_EQ(build(&f, "{\"tensors\":[\"a\",\"b\"]}", &o, &p, &e), 0);
	CHECK_EQ(p->stats[0].blocks, 1);
	pl_plan_free(p);
}

/* Plans spec for process 0 of a U8 tensor of 4 rows and cols columns;
 * returns the plan's copies (-1 on error), checking the plan. */
static long copies_of(uint64_t cols, const char *spec)
{
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	const char *bad;
	long n;

	fk_init(&f, 1, 0);
	fk_add(&f, 0, "w", RL_DTYPE_U8, 2, (uint64_t[]){ 4, cols });
	pl_opts_default(&o);
	if (build(&f, spec, &o, &p, &e))
		return -1;
	bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
	n = bad ? -1 : (long)p->ncopies;
	pl_plan_free(p);
	return n;
}

/*
 * A gap of exactly min_gap (4096) is solid for coalescing: a strided
 * region whose gaps are that long, and neighbouring shards that far apart
 * (or whose wrap-around gap is that long), are read as one span with one
 * strided copy per device, not run by run (4 copies per device).
 */
static void gap_of_exactly_min_gap_is_solid(void)
{
	/* One device of process 0: rows of 4096 at a stride of 8192. */
	CHECK_EQ(copies_of(8192, "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"],"
			   "\"process_of_device\":[0,1]},"
			   "\"rules\":[{\"match\":\"w\",\"spec\":[null,\"x\"]}]}"), 1);
	CHECK_EQ(copies_of(8194, "{\"mesh\":{\"shape\":[2],\"axes\":[\"x\"],"
			   "\"process_of_device\":[0,1]},"
			   "\"rules\":[{\"match\":\"w\",\"spec\":[null,\"x\"]}]}"), 4);
	/* Devices 0 and 2 of 3: 4096 apart, wrap-around gap 0. */
	CHECK_EQ(copies_of(3 * 4096, "{\"mesh\":{\"shape\":[3],\"axes\":[\"x\"],"
			   "\"process_of_device\":[0,1,0]},"
			   "\"rules\":[{\"match\":\"w\",\"spec\":[null,\"x\"]}]}"), 2);
	/* Devices 0 and 1 of 3: adjacent, wrap-around gap 4096. */
	CHECK_EQ(copies_of(3 * 4096, "{\"mesh\":{\"shape\":[3],\"axes\":[\"x\"],"
			   "\"process_of_device\":[0,0,1]},"
			   "\"rules\":[{\"match\":\"w\",\"spec\":[null,\"x\"]}]}"), 2);
}

/* A shard whose aligned middle is exactly the direct-read minimum is read
 * straight into staging; one byte less is not. */
static void shard_of_the_direct_minimum_read_directly(void)
{
	for (int less = 0; less < 2; less++) {
		struct fake f;
		struct pl_opts o;
		struct pl_plan *p;
		struct cm_err e;
		const char *bad;
		uint64_t direct = 0;

		fk_init(&f, 1, 4096);
		fk_add(&f, 0, "w", RL_DTYPE_U8, 1, (uint64_t[]){ PL_DIRECT_MIN - (uint64_t)less });
		f.align[0] = (struct pl_align){ 4096, 4096 };
		pl_opts_default(&o);
		CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
		for (size_t q = 0; q < p->nreads; q++)
			if (p->reads[q].flags & CM_READ_DIRECT)
				direct += p->reads[q].len;
		CHECKF(less ? direct == 0 : direct == PL_DIRECT_MIN, "%d byte(s) less: %llu direct",
		       less, (unsigned long long)direct);
		bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
		CHECKF(!bad, "%s", bad);
		pl_plan_free(p);
	}
}

/*
 * Many short tensors that follow each other in the file (20,000 x 64 KiB
 * checkpoints) follow each other in staging, congruently, and their
 * aligned span is read straight: no bounce copy, each read's copies tile
 * it. Before, every read of them went through a bounce buffer (0 direct
 * bytes) and was copied out tensor by tensor. Staging grows by less than
 * 4096 bytes; a data start aligned only to 8 (safetensors' header) still
 * qualifies, and a short tensor between them costs only the pieces
 * around it.
 */
static void short_neighbours_read_straight(void)
{
	static const uint64_t starts[] = { 4096, 4096 + 8, 1566104 };

	for (size_t v = 0; v < CM_ARRAY_SIZE(starts); v++) {
		struct fake f;
		struct pl_opts o;
		struct pl_plan *p;
		struct cm_err e;
		const char *bad;
		uint64_t direct = 0, needed = 0, ncopies = 0;
		char name[16];

		fk_init(&f, 1, starts[v]);
		for (int t = 0; t < 200; t++) {
			snprintf(name, sizeof(name), "t%03d", t);
			fk_add(&f, 0, name, RL_DTYPE_F32, 1, (uint64_t[]){ t == 100 ? 2 : 4096 });
			needed += t == 100 ? 8 : 16384;
		}
		f.align[0] = (struct pl_align){ 4096, 4096 };
		pl_opts_default(&o);
		CHECK_EQ(build(&f, NULL, &o, &p, &e), 0);
		for (size_t q = 0; q < p->nreads; q++)
			if (p->reads[q].flags & CM_READ_DIRECT) {
				direct += p->reads[q].len;
				ncopies += p->reads[q].ncopies;
				CHECK(cm_read_tiles(&p->reads[q], p->copies + p->reads[q].first_copy));
			}
		/* all but the unaligned ends and the pieces around t100 */
		CHECKF(direct + 4 * 4096 >= needed, "data at %llu: %llu of %llu bytes direct",
		       (unsigned long long)starts[v], (unsigned long long)direct,
		       (unsigned long long)needed);
		CHECKF(ncopies > 150, "%llu copies", (unsigned long long)ncopies);
		CHECKF(p->staging[0] < needed + 3 * 4096, "staging %llu for %llu bytes",
		       (unsigned long long)p->staging[0], (unsigned long long)needed);
		bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);
		CHECKF(!bad, "%s", bad);
		pl_plan_free(p);
	}
}

/* Tensors and targets of a plan: at the limit fine, one more refused. */
static void item_count_limit(void)
{
	static const char *const json = "{\"targets\":[{\"name\":\"t\",\"source\":\"a\"}]}";
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;
	int ret;

	fk_init(&f, 1, 0);
	fk_add(&f, 0, "a", RL_DTYPE_U8, 1, (uint64_t[]){ 4 });
	fk_add(&f, 0, "b", RL_DTYPE_U8, 1, (uint64_t[]){ 4 });
	pl_opts_default(&o);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 3);
	ret = build(&f, json, &o, &p, &e);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 0);
	CHECKF(ret == 0, "%s", e.msg);
	pl_plan_free(p);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 2);
	ret = build(&f, json, &o, &p, &e);
	pl_limit_set_for_tests(PL_LIMIT_TENSORS, 0);
	CHECK_EQ(ret, RL_E_TOO_LARGE);
	CHECKF(strstr(e.msg, "3 tensors and targets (at most 2)"), "%s", e.msg);
}

/* A llama-like checkpoint of 21 small tensors in one file (2 layers). */
static void fk_llama21(struct fake *f)
{
	static const char *const w[] = { "q", "k", "v", "o", "gate", "up", "down" };
	char name[32];

	fk_init(f, 1, 4096);
	fk_add(f, 0, "embed", RL_DTYPE_BF16, 2, (uint64_t[]){ 4000, 64 });
	for (int l = 0; l < 2; l++) {
		for (int k = 0; k < 7; k++) {
			snprintf(name, sizeof(name), "l%d.%s", l, w[k]);
			fk_add(f, 0, name, RL_DTYPE_BF16, 2, (uint64_t[]){ k < 4 ? 64 : 172, 64 });
		}
		snprintf(name, sizeof(name), "l%d.norm1", l);
		fk_add(f, 0, name, RL_DTYPE_BF16, 1, (uint64_t[]){ 64 });
		snprintf(name, sizeof(name), "l%d.norm2", l);
		fk_add(f, 0, name, RL_DTYPE_BF16, 1, (uint64_t[]){ 64 });
	}
	fk_add(f, 0, "norm", RL_DTYPE_BF16, 1, (uint64_t[]){ 64 });
	fk_add(f, 0, "lm_head", RL_DTYPE_BF16, 2, (uint64_t[]){ 4000, 64 });
}

/* The memory limit holds at the estimate and refuses one byte less. */
static void memory_limit_at_the_estimate(void)
{
	static const char *const specs[] = {
		"{\"mesh\":{\"shape\":[64],\"axes\":[\"d\"]}}",
		"{\"mesh\":{\"shape\":[8,8],\"axes\":[\"a\",\"b\"],\"process_of_device\":"
		"[0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,1,2,2,2,2,2,2,2,2,3,3,3,3,3,3,3,3,"
		"4,4,4,4,4,4,4,4,5,5,5,5,5,5,5,5,6,6,6,6,6,6,6,6,7,7,7,7,7,7,7,7]},"
		"\"rules\":[{\"match\":\"l.*\",\"spec\":[\"b\"]}]}",
	};
	struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;

	fk_llama21(&f);
	for (size_t k = 0; k < CM_ARRAY_SIZE(specs); k++)
		for (int ro = 0; ro < 2; ro++) {
			uint64_t need;

			pl_opts_default(&o);
			CHECK_EQ(o.max_memory, 4ull << 30);
			o.read_once = ro;
			o.max_memory = 0;                       /* no limit */
			CHECKF(!build(&f, specs[k], &o, &p, &e), "%s", e.msg);
			need = p->memory_estimate;
			CHECK(need > 64 * 21 * sizeof(struct pl_shard));
			pl_plan_free(p);
			o.max_memory = need;
			CHECKF(!build(&f, specs[k], &o, &p, &e), "%s", e.msg);
			CHECK_EQ(p->memory_estimate, need);
			pl_plan_free(p);
			o.max_memory = need - 1;
			CHECK_EQ(build(&f, specs[k], &o, &p, &e), RL_E_TOO_LARGE);
			CHECK(p == NULL);
			CHECKF(strstr(e.msg, "over the limit") && strstr(e.msg, "RL_PLAN_MAX_MEMORY"),
			       "%s", e.msg);
		}
}

/*
 * The estimate is honest: within [0.7, 1.4] of the bytes the build really
 * allocates at its peak (common/alloc.c counts them), for tensors
 * replicated on every device (a copy per shard) and split by rows over more
 * devices than they have rows (most shards empty, no copy).
 * tests/memory/plan_memory compares it with peak RSS at larger sizes.
 */
static void memory_estimate_close_to_the_peak(void)
{
	static const char *const specs[] = {
		"{\"mesh\":{\"shape\":[4096],\"axes\":[\"d\"]}}",
		"{\"mesh\":{\"shape\":[4096],\"axes\":[\"d\"]},\"rules\":[{\"match\":\".*\","
		"\"spec\":[\"d\"]}]}",
		"{\"mesh\":{\"shape\":[64,64],\"axes\":[\"a\",\"b\"]},\"rules\":["
		"{\"match\":\"(embed|lm_head|l[0-9]\\\\.(q|k|v|o|gate|up|down))\","
		"\"spec\":[\"a\",\"b\"]}]}",
	};
	static struct fake f;
	struct pl_opts o;
	struct pl_plan *p;
	struct cm_err e;

	fk_llama21(&f);
	for (size_t k = 0; k < CM_ARRAY_SIZE(specs); k++) {
		long base;
		double ratio;

		pl_opts_default(&o);
		o.all_stats = 0;
		cm_alloc_peak_reset();
		base = cm_alloc_live_bytes();
		CHECKF(!build(&f, specs[k], &o, &p, &e), "%s", e.msg);
		ratio = (double)p->memory_estimate / (double)(cm_alloc_peak_bytes() - base);
		pl_plan_free(p);
		CHECKF(ratio >= 0.7 && ratio <= 1.4, "spec %zu: estimate / peak = %.2f", k, ratio);
	}
}

static int plan_huge_mesh(void *json, char *msg, size_t cap)
{
	struct fake *f = malloc(sizeof(*f));
	struct pl_opts o;
	struct pl_plan *p = NULL;
	struct cm_err e;
	int ret;

	fk_llama21(f);
	pl_opts_default(&o);
	ret = build(f, json, &o, &p, &e);
	snprintf(msg, cap, "%s", e.msg);
	pl_plan_free(p);
	free(f);
	return ret;
}

/*
 * Regression: a [4096, 4096] mesh on a 2 MB checkpoint was killed by the
 * OOM killer at 24 GB after ~55 s; [16777216] took 56 s and 17.6 GB. Both
 * are refused from their counts now, in well under 2 s.
 */
static void huge_meshes_refused_at_once(void)
{
	static const char *const specs[] = {
		"{\"mesh\":{\"shape\":[4096,4096],\"axes\":[\"a\",\"b\"]}}",
		"{\"mesh\":{\"shape\":[16777216],\"axes\":[\"a\"]}}",
		"{\"mesh\":{\"shape\":[16777216],\"axes\":[\"a\"]},"
		"\"rules\":[{\"match\":\".*\",\"spec\":[\"a\"]}]}",
	};

	/* "At once": refused from the counts, before anything per device is
	 * built. Judged by the memory the attempt took, not by a clock (a
	 * loaded machine makes any time limit flaky): one array of the
	 * mesh's 16777216 devices alone would take 64 MiB and more. */
	for (size_t k = 0; k < CM_ARRAY_SIZE(specs); k++) {
		char msg[1024];
		long base, peak;
		int ret;

		cm_alloc_peak_reset();
		base = cm_alloc_peak_bytes();
		ret = th_within(30, plan_huge_mesh, (void *)specs[k], msg, sizeof(msg));
		peak = cm_alloc_peak_bytes() - base;
		CHECKF(ret == RL_E_TOO_LARGE, "spec %zu: %d %s", k, ret, msg);
		CHECKF(strstr(msg, "16777216 devices in the mesh") &&
		       strstr(msg, "over the limit of 4.0 GiB"), "%s", msg);
		CHECKF(peak < (16l << 20), "spec %zu: %ld bytes allocated before the refusal", k, peak);
	}
}

/* Failing the n-th allocation, for every n: a clean -ENOMEM, no leak. */
static void alloc_failures(void)
{
	struct fake f;
	struct pl_opts o;
	struct cm_err e;
	const char *json = "{\"mesh\":{\"shape\":[2,2],\"axes\":[\"a\",\"b\"],"
			   "\"process_of_device\":[0,0,1,1]},"
			   "\"rules\":[{\"match\":\"w\",\"spec\":[null,\"b\"]}],"
			   "\"targets\":[{\"name\":\"st\",\"stack\":[\"x\",\"y\"]}]}";
	int done = 0;

	fk_init(&f, 2, 16);
	fk_add(&f, 0, "w", RL_DTYPE_F32, 2, (uint64_t[]){ 64, 300 });
	fk_add(&f, 0, "x", RL_DTYPE_BF16, 1, (uint64_t[]){ 5000 });
	fk_add(&f, 1, "y", RL_DTYPE_BF16, 1, (uint64_t[]){ 5000 });
	f.align[1] = (struct pl_align){ 512, 512 };
	pl_opts_default(&o);
	o.chunk = 4096;
	for (long n = 0; !done && n < 100000; n++) {
		long live = cm_alloc_live();
		struct pl_spec *s;
		struct pl_plan *p = NULL;
		int ret;

		cm_alloc_fail_after(n);
		s = pl_spec_new();
		cm_err_clear(&e);
		ret = s ? pl_spec_parse(s, json, strlen(json), &e) : -ENOMEM;
		if (!ret)
			ret = pl_plan_build(&f.ck, s, f.align, &o, &p, &e);
		cm_alloc_fail_after(-1);
		if (!ret) {
			const char *bad = pl_check_plan(p, &f.ck, f.align, o.chunk, NULL);

			CHECKF(!bad, "%s", bad);
			done = 1;
		} else {
			CHECKF(ret == -ENOMEM, "n %ld: %d %s", n, ret, e.msg);
			CHECK(p == NULL);
		}
		pl_plan_free(p);
		pl_spec_free(s);
		CHECKF(cm_alloc_live() == live, "n %ld: leak", n);
	}
	CHECK(done);
}

int main(void)
{
	th_seed();
	RUN(box_runs_of_partial_boxes);
	RUN(strided_runs_stay_compact);
	RUN(runs_match_an_elementwise_walk);
	RUN(subbyte_runs_on_whole_bytes);
	RUN(coalescing_gap_and_ratio_bounds);
	RUN(automatic_ratio_past_1024_blocks);
	RUN(whole_file_is_one_block);
	RUN(empty_shards_take_no_room);
	RUN(blocks_cut_into_chunks);
	RUN(blocks_widened_to_the_alignment);
	RUN(chunk_not_a_multiple_of_the_alignment);
	RUN(congruent_shards_read_directly);
	RUN(processes_read_their_own_boxes);
	RUN(short_rows_one_copy_per_read_and_box);
	RUN(empty_shards_and_subbyte_errors);
	RUN(targets_stack_slice_and_alias);
	RUN(random_plans);
	RUN(memo_plans_like_the_long_way);
	RUN(dedupe_key_holds_run_length);
	RUN(broadcast_batch_filled_to_its_bound);
	RUN(aligned_blocks_that_touch_stay_apart);
	RUN(gap_of_exactly_min_gap_is_solid);
	RUN(shard_of_the_direct_minimum_read_directly);
	RUN(short_neighbours_read_straight);
	RUN(converted_requests_end_on_elements);
	RUN(item_count_limit);
	RUN(memory_limit_at_the_estimate);
	RUN(memory_estimate_close_to_the_peak);
	RUN(huge_meshes_refused_at_once);
	RUN(alloc_failures);
	return th_done();
}
