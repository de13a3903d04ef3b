/*
 * rlperf_gen.c - the offsets a job clone reads in one file's region:
 * in order, as a random permutation of the blocks (fio's random map, each
 * block once per pass), or with norandommap uniformly random blocks.
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

int rp_gen_next(struct rp_gen *g, uint64_t *off)
{
	uint64_t b;

	if (g->i == g->nblocks) {
		g->pass++;
		gen_new_pass(g);
		return 0;
	}
	if (!g->random) {
		b = g->i;
	} else if (g->norandommap) {
		/* fio without its random map: any block, repeats allowed
		 * (the modulo's bias, nblocks / 2^64, is nothing) */
		g->x = mix64(g->x + MIX_MUL);
		b = g->x % g->nblocks;
	} else {
		/* every state comes once in 2^k steps, so every block
		 * comes once a pass; fewer than half the states are skipped */
		do {
			g->x = (g->x * LCG_MUL + g->inc) & g->mask;
			b = scramble(g, g->x);
		} while (b >= g->nblocks);
	}
	g->i++;
	*off = g->base + b * g->bs;
	return 1;
}
