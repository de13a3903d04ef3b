/*
 * rlperf_dist.c - fio's random_distribution: which block of a region a
 * random read takes when the blocks are not equally likely. The formulas
 * are fio's (lib/zipf.c, lib/gauss.c, io_u.c's zoned picks): zipf by Gray
 * et al.'s quick generator, pareto as rand^(log h / log(1 - h)), normal as
 * the mean of 12 uniform draws widened by the deviation, each rank then
 * scattered over the region by fio's hash (a multiply by the 64-bit golden
 * ratio) and offset (random, or the given center); zoned and zoned_abs pick
 * a zone by its share of the reads, then a block in it uniformly. The
 * uniform draws are rlperf's own generator, so the shape is fio's and the
 * sequence is not.
 */
#include <math.h>
#include <string.h>

#include "rlperf.h"

#define GOLDEN_RATIO_64 0x61C8864680B583EBull  /* fio's __hash_u64 */
#define ZIPF_MAX_GEN 10000000ull               /* fio caps zeta(n) there */
#define GAUSS_ITERS 12

/* splitmix64: the next 64 random bits of state *s */
static uint64_t next64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* uniform in [0, 1] with 32 bits, as fio's __rand / FRAND32_MAX */
static double uni(uint64_t *s)
{
	return (double)(uint32_t)(next64(s) >> 32) / 4294967295.0;
}

void rp_dist_init(struct rp_dist_state *st, const struct rp_dist *d, uint64_t nblocks,
		  uint64_t bs, uint64_t seed)
{
	memset(st, 0, sizeof(*st));
	st->d = d;
	st->n = nblocks ? nblocks : 1;
	st->bs = bs;
	st->rng = seed;
	st->rand_off = (uint32_t)(next64(&st->rng) >> 32);
	if (d->center >= 0)
		st->rand_off = (uint64_t)((double)st->n * d->center);
	if (d->kind == RP_DIST_ZIPF) {
		uint64_t gen = st->n < ZIPF_MAX_GEN ? st->n : ZIPF_MAX_GEN;

		st->zeta2 = 1.0 + pow(0.5, d->p);
		for (uint64_t i = 0; i < gen; i++)
			st->zetan += pow(1.0 / (double)(i + 1), d->p);
	} else if (d->kind == RP_DIST_PARETO) {
		st->pareto_pow = log(d->p) / log(1.0 - d->p);
	} else if (d->kind == RP_DIST_NORMAL) {
		st->stddev = (uint64_t)ceil((double)st->n * d->p / 100.0);
		if (st->stddev > st->n / 2)
			st->stddev = st->n / 2;
		/* gauss_init: the center moves the mean, 0.5 leaves it */
		st->rand_off = (uint64_t)(int64_t)((double)st->n *
						   ((d->center >= 0 ? d->center : 0.5) - 0.5));
	}
}

static uint64_t zipf_rank(struct rp_dist_state *st)
{
	double theta = st->d->p, n = (double)st->n, u = uni(&st->rng);
	double alpha = 1.0 / (1.0 - theta), rz = u * st->zetan;
	double eta = (1.0 - pow(2.0 / n, 1.0 - theta)) / (1.0 - st->zeta2 / st->zetan);

	if (rz < 1.0)
		return 0;
	if (rz < 1.0 + pow(0.5, theta))
		return 1;
	return (uint64_t)(n * pow(eta * u - eta + 1.0, alpha));
}

static uint64_t gauss_rank(struct rp_dist_state *st)
{
	uint64_t sum = 0;

	for (int i = 0; i < GAUSS_ITERS; i++)
		sum += (uint32_t)(next64(&st->rng) >> 32) % (st->n + 1);
	sum = (sum + GAUSS_ITERS - 1) / GAUSS_ITERS;
	if (st->stddev) {
		int64_t dev = (int64_t)((double)st->stddev * uni(&st->rng)) -
			      (int64_t)(st->stddev / 2);

		while (dev + (int64_t)sum >= (int64_t)st->n)
			dev /= 2;
		sum = (uint64_t)((int64_t)sum + dev);
	}
	return sum;
}

/* zoned: a zone by its share of the reads (1..100), a block in it */
static uint64_t zoned_block(struct rp_dist_state *st)
{
	const struct rp_dist *d = st->d;
	unsigned v = (unsigned)(next64(&st->rng) % 100), acc = 0;
	uint64_t start = 0, len = st->n;

	for (unsigned z = 0; z < d->nzones; z++) {
		uint64_t zlen = d->abs ? d->zone[z].size / st->bs :
			(uint64_t)((unsigned __int128)st->n * d->zone[z].size / 100);

		acc += d->zone[z].access;
		if (v < acc || z + 1 == d->nzones) {
			len = zlen;
			break;
		}
		start += zlen;
	}
	if (start >= st->n)
		return next64(&st->rng) % st->n;  /* a zone past the region */
	if (!len || start + len > st->n)
		len = st->n - start;
	return start + next64(&st->rng) % len;
}

uint64_t rp_dist_next(struct rp_dist_state *st)
{
	uint64_t r;

	switch (st->d->kind) {
	case RP_DIST_ZIPF:
		r = zipf_rank(st);
		break;
	case RP_DIST_PARETO:
		r = (uint64_t)((double)(st->n - 1) * pow(uni(&st->rng), st->pareto_pow));
		break;
	case RP_DIST_NORMAL:
		r = gauss_rank(st);
		break;
	case RP_DIST_ZONED:
		return zoned_block(st);
	default:
		return next64(&st->rng) % st->n;
	}
	return (r * GOLDEN_RATIO_64 + st->rand_off) % st->n;
}
