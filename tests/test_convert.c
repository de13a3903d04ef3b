/*
 * test_convert.c - the dtype converters (sink/convert.c) against a
 * reference written another way: every value decoded to a double (exact
 * for every source), rounded to nearest even by rint() on the
 * destination's grid, NaNs by torch's rules spelled out per destination.
 * Every bit pattern of the 8- and 16-bit sources, a seeded random set
 * and the edge cases of F32; bulk conversion (unaligned, odd counts)
 * against one element at a time; and a few results read off torch
 * 2.15's `.to()` on the CPU, as anchors.
 */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "../sink/convert.h"
#include "common.h"
#include "../planner/planner.h"


static const int sources[] = { RL_DTYPE_F32, RL_DTYPE_F16, RL_DTYPE_BF16, RL_DTYPE_F8_E4M3,
			       RL_DTYPE_F8_E5M2 };
static const int dests[] = { RL_DTYPE_F32, RL_DTYPE_F16, RL_DTYPE_BF16 };

static unsigned size_of(int dt)
{
	return dt == RL_DTYPE_F32 ? 4 : dt == RL_DTYPE_F16 || dt == RL_DTYPE_BF16 ? 2 : 1;
}

/* ------------------------------------------------------------------ */
/* The reference */

struct val {
	int nan, neg;
	uint32_t payload;       /* NaN: the mantissa bits, left-aligned to 23 */
	double v;               /* |value| (infinity included) */
};

/* exponent bits, mantissa bits, bias; e4m3: no infinity, all-ones NaN */
static struct val decode(int dt, uint32_t b)
{
	unsigned eb, mb, bias, width = size_of(dt) * 8;
	struct val r = { 0 };
	uint32_t e, m;

	switch (dt) {
	case RL_DTYPE_F32: eb = 8; mb = 23; bias = 127; break;
	case RL_DTYPE_F16: eb = 5; mb = 10; bias = 15; break;
	case RL_DTYPE_BF16: eb = 8; mb = 7; bias = 127; break;
	case RL_DTYPE_F8_E4M3: eb = 4; mb = 3; bias = 7; break;
	default: eb = 5; mb = 2; bias = 15; break;
	}
	r.neg = (b >> (width - 1)) & 1;
	e = (b >> mb) & ((1u << eb) - 1);
	m = b & ((1u << mb) - 1);
	if (dt == RL_DTYPE_F8_E4M3) {
		if (e == 15 && m == 7) {
			r.nan = 1;
			r.payload = m << (23 - mb);
			return r;
		}
	} else if (e == (1u << eb) - 1) {
		r.nan = m != 0;
		r.payload = m << (23 - mb);
		r.v = INFINITY;
		return r;
	}
	r.v = e ? ldexp(1.0 + ldexp(m, -(int)mb), (int)e - (int)bias) :
		  ldexp(m, 1 - (int)bias - (int)mb);
	return r;
}

/* Round |v| to the grid of a format of mb mantissa bits, minimum normal
 * exponent emin, bias; returns the bits without sign (inf when over). */
static uint32_t encode(double v, unsigned mb, int emin, unsigned bias, double overflow)
{
	int e;
	double q, r;

	if (v >= overflow)
		return ((2 * bias + 1) << mb); /* infinity */
	if (v == 0)
		return 0;
	frexp(v, &e);
	e -= 1;         /* v in [2^e, 2^(e+1)) */
	if (e < emin) { /* subnormal grid */
		q = ldexp(1.0, emin - (int)mb);
		return (uint32_t)rint(v / q);
	}
	q = ldexp(1.0, e - (int)mb);
	r = rint(v / q);
	return ((uint32_t)(e + (int)bias) << mb) + (uint32_t)(r - ldexp(1.0, (int)mb));
}

static uint32_t reference(int from, int to, uint32_t b)
{
	struct val x = decode(from, b);
	uint32_t s;

	if (to == RL_DTYPE_F32) {
		float f = (float)x.v;
		uint32_t u;

		memcpy(&u, &f, 4);
		s = (uint32_t)x.neg << 31;
		if (x.nan) /* quieted, but BF16's are its high half, as they are */
			return s | (from == RL_DTYPE_BF16 ? 0x7f800000u : 0x7fc00000u) | x.payload;
		return s | u;
	}
	if (to == RL_DTYPE_F16) {
		s = (uint32_t)x.neg << 15;
		if (x.nan)
			return s | 0x7e00u | (x.payload >> 13);
		return s | encode(x.v, 10, -14, 15, 65520.0);
	}
	if (x.nan)
		return from == RL_DTYPE_F32 ? 0xffffu : 0x7fc0u;
	s = (uint32_t)x.neg << 15;
	return s | encode(x.v, 7, -126, 127, ldexp(2.0 - ldexp(1.0, -8), 127));
}

/* ------------------------------------------------------------------ */

static uint32_t load(const uint8_t *p, unsigned size)
{
	uint32_t v = 0;

	memcpy(&v, p, size); /* little-endian host */
	return v;
}

/* Converts n patterns of from (in) to to, in bulk at odd offsets, and
 * compares every element with the reference and with one at a time. */
static int check_bulk(int from, int to, const uint32_t *in, size_t n)
{
	unsigned is = size_of(from), os = size_of(to);
	uint8_t *src = malloc(n * is + 3), *dst = malloc(n * os + 5);
	int bad = 0;

	for (size_t i = 0; i < n; i++)
		memcpy(src + 3 + i * is, &in[i], is);
	sk_convert(from, to, dst + 5, src + 3, n);
	for (size_t i = 0; i < n && bad < 5; i++) {
		uint32_t got = load(dst + 5 + i * os, os), want = reference(from, to, in[i]);
		uint32_t one = sk_convert_one(from, to, in[i]);

		if (got != want || one != want) {
			th_fail(__FILE__, __LINE__, "%s -> %s: 0x%x gives 0x%x (one: 0x%x), want 0x%x",
				pl_dtype_name(from), pl_dtype_name(to), in[i], got, one, want);
			bad++;
		}
	}
	free(src);
	free(dst);
	return bad;
}

/* Every pattern of every 8- and 16-bit source, to every destination. */
static void test_all_patterns(void)
{
	uint32_t *in = malloc(65536 * sizeof(*in));

	for (size_t s = 1; s < sizeof(sources) / sizeof(*sources); s++) {
		int from = sources[s];
		size_t n = size_of(from) == 2 ? 65536 : 256;

		for (size_t i = 0; i < n; i++)
			in[i] = (uint32_t)i;
		for (size_t d = 0; d < 3; d++)
			if (dests[d] != from && check_bulk(from, dests[d], in, n)) {
				free(in);
				return;
			}
	}
	free(in);
}

/* F32 edge cases: zeros, subnormals, the rounding boundaries of F16 and
 * BF16 (ties each way, overflow), infinities and NaN payloads. */
static const uint32_t f32_edges[] = {
	0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00800000, 0x3f800000,
	0x33000000, 0x33000001, 0x32ffffff, 0x33400000, 0x33800000, 0x33c00000, 0x34200000,
	0x387fc000, 0x387fe000, 0x387fffff, 0x38800000, 0x38801000, 0x38803000, 0x38802fff,
	0x477fe000, 0x477fefff, 0x477ff000, 0x477ff001, 0x47800000, 0x7f7fffff, 0xff7fffff,
	0x7f7f8000, 0x7f7f7fff, 0x3f808000, 0x3f818000, 0x3f808001, 0x3f807fff,
	0x7f800000, 0xff800000, 0x7f800001, 0x7fc00000, 0xffc00000, 0x7fa00000, 0xff812345,
	0x7fffffff, 0xffffffff, 0x7f802000, 0x7fbfffff,
};

static void test_f32_sources(void)
{
	size_t n = 1u << 20, ne = sizeof(f32_edges) / sizeof(*f32_edges);
	uint32_t *in = malloc((n + ne) * sizeof(*in));
	static const uint32_t low[] = { 0, 0x1000, 0x0fff, 0x1001, 0x3000, 0x1fff, 0x8000,
					0x7fff, 0x8001, 0x18000 };

	memcpy(in, f32_edges, sizeof(f32_edges));
	for (size_t i = ne; i < ne + n; i++) {
		uint64_t r = th_rand();

		if (i % 2) { /* any bits */
			in[i] = (uint32_t)r;
			continue;
		}
		/* near the F16 and BF16 grids: exponents 96..150, the low
		 * bits at a tie, just below or above one */
		in[i] = (uint32_t)(r & 0x80000000u) | (uint32_t)(96 + (r >> 8) % 55) << 23 |
			(((uint32_t)(r >> 20) & 0x7fffffu) & ~0x1ffffu) | low[(r >> 44) % 10];
	}
	for (size_t d = 1; d < 3; d++)
		if (check_bulk(RL_DTYPE_F32, dests[d], in, n + ne))
			break;
	free(in);
}

/* Results of torch 2.15's `.to()` on the CPU (x86-64), read off once. */
static void test_torch_anchors(void)
{
	static const struct { int from, to; uint32_t in, out; } a[] = {
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0x7f800001, 0x7e00 },
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0xffc00001, 0xfe00 },
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0x7fa00000, 0x7f00 },
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0xff812345, 0xfe09 },
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0x477ff000, 0x7c00 },
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0x477fefff, 0x7bff },
		{ RL_DTYPE_F32, RL_DTYPE_F16, 0x33000001, 0x0001 },
		{ RL_DTYPE_F32, RL_DTYPE_BF16, 0x7fc00000, 0xffff },
		{ RL_DTYPE_F32, RL_DTYPE_BF16, 0xff812345, 0xffff },
		{ RL_DTYPE_F32, RL_DTYPE_BF16, 0x477ff000, 0x4780 },
		{ RL_DTYPE_F16, RL_DTYPE_F32, 0x7c01, 0x7fc02000 },
		{ RL_DTYPE_F16, RL_DTYPE_F32, 0xfc01, 0xffc02000 },
		{ RL_DTYPE_F16, RL_DTYPE_F32, 0x0001, 0x33800000 },
		{ RL_DTYPE_F16, RL_DTYPE_BF16, 0x7c01, 0x7fc0 },
		{ RL_DTYPE_BF16, RL_DTYPE_F32, 0xff81, 0xff810000 },
		{ RL_DTYPE_BF16, RL_DTYPE_F16, 0x7fc1, 0x7e08 },
		{ RL_DTYPE_BF16, RL_DTYPE_F16, 0x7c01, 0x7c00 },
		{ RL_DTYPE_F8_E4M3, RL_DTYPE_F32, 0x7f, 0x7ff00000 },
		{ RL_DTYPE_F8_E4M3, RL_DTYPE_F32, 0xff, 0xfff00000 },
		{ RL_DTYPE_F8_E4M3, RL_DTYPE_F16, 0x7f, 0x7f80 },
		{ RL_DTYPE_F8_E4M3, RL_DTYPE_F16, 0x01, 0x1800 },
		{ RL_DTYPE_F8_E4M3, RL_DTYPE_BF16, 0xff, 0x7fc0 },
		{ RL_DTYPE_F8_E4M3, RL_DTYPE_BF16, 0x7e, 0x43e0 },
		{ RL_DTYPE_F8_E5M2, RL_DTYPE_F32, 0x7d, 0x7fe00000 },
		{ RL_DTYPE_F8_E5M2, RL_DTYPE_F16, 0x7d, 0x7f00 },
		{ RL_DTYPE_F8_E5M2, RL_DTYPE_F16, 0x01, 0x0100 },
		{ RL_DTYPE_F8_E5M2, RL_DTYPE_BF16, 0xfd, 0x7fc0 },
		{ RL_DTYPE_F8_E5M2, RL_DTYPE_BF16, 0x7c, 0x7f80 },
	};

	for (size_t i = 0; i < sizeof(a) / sizeof(*a); i++) {
		uint8_t src[4], dst[4] = { 0 };

		memcpy(src, &a[i].in, 4);
		sk_convert(a[i].from, a[i].to, dst, src, 1);
		if (load(dst, size_of(a[i].to)) != a[i].out)
			th_fail(__FILE__, __LINE__, "%s -> %s: 0x%x gives 0x%x, torch 0x%x",
				pl_dtype_name(a[i].from), pl_dtype_name(a[i].to), a[i].in,
				load(dst, size_of(a[i].to)), a[i].out);
	}
}

/* The pairs: exactly the five sources to the three destinations. */
static void test_pairs(void)
{
	for (int f = 0; f < RL_DTYPE_COUNT; f++)
		for (int t = 0; t < RL_DTYPE_COUNT; t++) {
			int in = 0, out = 0;

			for (size_t s = 0; s < sizeof(sources) / sizeof(*sources); s++)
				in |= sources[s] == f;
			for (size_t d = 0; d < 3; d++)
				out |= dests[d] == t;
			CHECK(sk_convert_ok(f, t) == (in && out && f != t));
		}
	CHECK(!sk_convert_ok(-1, RL_DTYPE_F16) && !sk_convert_ok(RL_DTYPE_F16, 99));
}

int main(void)
{
	th_seed();
	th_run("all_patterns_8_16_bit", test_all_patterns);
	th_run("f32_random_and_edges", test_f32_sources);
	th_run("torch_anchors", test_torch_anchors);
	th_run("pairs", test_pairs);
	return th_done();
}
