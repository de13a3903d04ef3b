/*
 * rlperf_hist.c - completion latency in fio's log-scale histogram, so that
 * rlperf's percentiles and fio's mean the same thing: the same buckets and
 * the same rule for picking a percentile's bucket.
 */
#include <math.h>
#include <string.h>

#include "rlperf.h"

const double rp_pct_list[RP_NPCT] = {
	1.0, 5.0, 10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0,
	95.0, 99.0, 99.5, 99.9, 99.95, 99.99,
};

void rp_hist_init(struct rp_hist *h)
{
	memset(h, 0, sizeof(*h));
	h->min = UINT64_MAX;
}

unsigned rp_hist_index(uint64_t v)
{
	unsigned msb, err_bits, idx;

	if (v < 2 * RP_PLAT_VAL)
		return (unsigned)v;  /* exact: one bucket per value */
	msb = 63 - (unsigned)__builtin_clzll(v);
	err_bits = msb - RP_PLAT_BITS;  /* low bits the bucket forgets */
	idx = ((err_bits + 1) << RP_PLAT_BITS) +
	      (unsigned)((v >> err_bits) & (RP_PLAT_VAL - 1));
	return idx < RP_PLAT_NR ? idx : RP_PLAT_NR - 1;
}

uint64_t rp_hist_value(unsigned idx)
{
	unsigned err_bits;
	uint64_t base;

	if (idx < 2 * RP_PLAT_VAL)
		return idx;
	err_bits = (idx >> RP_PLAT_BITS) - 1;
	base = 1ull << (err_bits + RP_PLAT_BITS);
	/* the middle of the bucket, as fio reports it */
	return base + (uint64_t)(((idx % RP_PLAT_VAL) + 0.5) * (double)(1ull << err_bits));
}

void rp_hist_merge(struct rp_hist *dst, const struct rp_hist *src)
{
	for (unsigned i = 0; i < RP_PLAT_NR; i++)
		dst->bucket[i] += src->bucket[i];
	dst->n += src->n;
	dst->sum += src->sum;
	dst->sumsq += src->sumsq;
	if (src->min < dst->min)
		dst->min = src->min;
	if (src->max > dst->max)
		dst->max = src->max;
}

double rp_hist_mean(const struct rp_hist *h)
{
	return h->n ? (double)h->sum / (double)h->n : 0.0;
}

double rp_hist_stddev(const struct rp_hist *h)
{
	unsigned __int128 n = h->n, s = h->sum, a, b;
	long double mean, var;

	if (h->n < 2)
		return 0.0;
	/* fio reports the sample standard deviation (n - 1). n*sumsq - sum^2
	 * is exact in 128 bits for any realistic run; past that, long double
	 * (fine unless the spread is tiny next to the mean) */
	if (!__builtin_mul_overflow(n, h->sumsq, &a) && !__builtin_mul_overflow(s, s, &b))
		return sqrt((double)(a - b) / ((double)h->n * (double)(h->n - 1)));
	mean = (long double)h->sum / h->n;
	var = ((long double)h->sumsq - mean * (long double)h->sum) / (h->n - 1);
	return var > 0 ? sqrt((double)var) : 0.0;
}

void rp_hist_percentiles(const struct rp_hist *h, const double *pct, size_t n,
			 uint64_t *out)
{
	uint64_t sum = 0;
	size_t j = 0;

	memset(out, 0, n * sizeof(*out));
	if (!h->n || !n)
		return;
	for (unsigned i = 0; i < RP_PLAT_NR && j < n; i++) {
		sum += h->bucket[i];
		while (j < n && (long double)sum >= (long double)pct[j] / 100.0L * h->n)
			out[j++] = rp_hist_value(i);
	}
}
