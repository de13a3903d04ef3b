/*
 * rlperf_gen.c - the offsets a job clone reads in one file's region:
 * in order (or N bytes apart, backwards too: fio's rw=read:N), as a random
 * permutation of the blocks (fio's random map, each block once per pass),
 * with norandommap uniformly random blocks, or drawn from a distribution
 * (rlperf_dist.c); randread:N reads N - 1 blocks in order after each.
 */
#include <string.h>

#include "rlperf.h"

#define LCG_MUL 6364136223846793005ull  /* = 1 mod 4: full period mod 2^k */
#define MIX_MUL 0x9e3779b97f4a7c15ull   /* odd: a bijection mod 2^k */

static uint64_t mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

static void gen_new_pass(struct rp_gen *g)
{
	g->i = 0;
	g->last = g->base;
	g->seq_left = 0;
	if (g->random)  /* an odd increment: a new order each pass */
		g->inc = (mix64(g->seed + g->pass) | 1) & g->mask;
	if (g->random && !g->inc)
		g->inc = 1;  /* mask 0 (one block) keeps x at 0 */
}

void rp_gen_init(struct rp_gen *g, uint64_t base, uint64_t bytes, uint64_t bs,
		 int mode, uint64_t seed)
{
	unsigned k = 0;

	memset(g, 0, sizeof(*g));
	g->base = base;
	g->bs = bs;
	g->nblocks = bytes / bs;
	g->random = mode != RP_GEN_SEQ;
	g->norandommap = mode == RP_GEN_NORANDOMMAP;
	g->seed = seed;
	while (k < 64 && (1ull << k) < g->nblocks)
		k++;
	g->mask = k == 64 ? UINT64_MAX : (1ull << k) - 1;
	g->shift = (k + 1) / 2;
	g->x = mix64(seed) & g->mask;
	gen_new_pass(g);
}

/* A permutation of [0, 2^k): xorshift and odd multiply are bijections. */
static uint64_t scramble(const struct rp_gen *g, uint64_t y)
{
	if (!g->shift)
		return y;
	y ^= y >> g->shift;
	y = (y * MIX_MUL) & g->mask;
	return y ^ (y >> g->shift);
}

void rp_gen_seq(struct rp_gen *g, int64_t add, unsigned nr, uint64_t file_size)
{
	g->seq_add = add;
	g->seq_nr = nr;
	g->file_size = file_size;
}

void rp_gen_dist(struct rp_gen *g, const struct rp_dist *d)
{
	g->use_dist = 1;
	rp_dist_init(&g->dist, d, g->nblocks, g->bs, mix64(g->seed ^ MIX_MUL));
}

/*
 * fio's get_next_seq_offset with ddir_seq_add: the read after the last
 * one plus add; past the file's end a forward job wraps to the region's
 * start, a backward one to the region's end (a backward job's first read
 * is at the start, as fio's). 0 where fio ends the file.
 */
static int seq_add_next(struct rp_gen *g, uint64_t *off)
{
	uint64_t io = g->nblocks * g->bs, end = g->file_size > io ? io : g->file_size, pos;

	if (g->last >= g->file_size)
		return 0;
	if (g->last == g->base && g->base && g->seq_add < 0)
		g->last = end;
	pos = g->last - g->base;
	if (pos) {
		pos += (uint64_t)g->seq_add;  /* below 0 wraps to huge: past the end */
		if (pos >= g->file_size)
			pos = g->seq_add > 0 ? g->base : end + (uint64_t)g->seq_add;
	}
	if (pos >= io || g->base + pos + g->bs > g->file_size)
		return 0;
	*off = g->base + pos;
	return 1;
}

/* The block of a random read: the next of a run of seq_nr, a draw from
 * the distribution, or fio's random map or its absence. */
static uint64_t random_block(struct rp_gen *g)
{
	uint64_t b, lastb = (g->last - g->base) / g->bs;

	if (g->seq_left && g->last > g->base && lastb < g->nblocks) {
		g->seq_left--;
		return lastb;
	}
	g->seq_left = g->seq_nr > 1 ? g->seq_nr - 1 : 0;
	if (g->use_dist)
		return rp_dist_next(&g->dist);
	if (g->norandommap) {
		/* fio without its random map: any block, repeats allowed
		 * (the modulo's bias, nblocks / 2^64, is nothing) */
		g->x = mix64(g->x + MIX_MUL);
		return g->x % g->nblocks;
	}
	/* every state comes once in 2^k steps, so every block comes once
	 * a pass; fewer than half the states are skipped */
	do {
		g->x = (g->x * LCG_MUL + g->inc) & g->mask;
		b = scramble(g, g->x);
	} while (b >= g->nblocks);
	return b;
}

int rp_gen_next(struct rp_gen *g, uint64_t *off)
{
	if (g->i == g->nblocks || (!g->random && g->seq_add && !seq_add_next(g, off))) {
		g->pass++;
		gen_new_pass(g);
		return 0;
	}
	if (g->random)
		*off = g->base + random_block(g) * g->bs;
	else if (!g->seq_add)
		*off = g->base + g->i * g->bs;
	g->i++;
	g->last = *off + g->bs;
	return 1;
}
