/*
 * convert.c - dtype conversion of elements (convert.h): torch's `.to()`
 * bit for bit. Every source goes through its exact F32 value (F16, BF16
 * and both F8 are exactly representable in F32), so one rounding rule
 * per destination covers every pair, as it does in torch. Sources of 8
 * and 16 bits are table lookups (built once); F32 to F16 and to BF16 are
 * integer round-to-nearest-even with a branch only for the rare classes
 * (NaN, overflow, subnormal), independent of the FPU's rounding mode and
 * of flush-to-zero.
 */
#include <pthread.h>
#include <string.h>

#include "common.h"
#include "convert.h"
#include "plan_io.h"

/* F32 from F16 (NaN quieted, sign and payload kept, as torch's bulk
 * F16 to F32 and the F16C instructions do). */
static uint32_t f16_f32(uint32_t h)
{
	uint32_t sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1f, m = h & 0x3ff;

	if (e == 0x1f)
		return sign | (m ? 0x7fc00000u | m << 13 : 0x7f800000u);
	if (e)
		return sign | (e + 112) << 23 | m << 13;
	if (!m)
		return sign;
	/* subnormal: m * 2^-24, normalized */
	e = 113;
	while (!(m & 0x400)) {
		m <<= 1;
		e--;
	}
	return sign | e << 23 | (m & 0x3ff) << 13;
}

/* F32 from F8_E4M3 (torch.float8_e4m3fn: no infinity, S.1111.111 NaN). */
static uint32_t e4m3_f32(uint32_t b)
{
	uint32_t sign = (b & 0x80u) << 24, e = (b >> 3) & 0xf, m = b & 7;

	if ((b & 0x7f) == 0x7f)
		return sign | 0x7ff00000u;
	if (e)
		return sign | (e + 120) << 23 | m << 20;
	if (!m)
		return sign;
	e = 121;
	while (!(m & 8)) {
		m <<= 1;
		e--;
	}
	return sign | e << 23 | (m & 7) << 20;
}

/* F8_E5M2 is the high byte of an F16. */
static uint32_t e5m2_f32(uint32_t b)
{
	return f16_f32(b << 8);
}

/* F16 from F32: round to nearest even; 65520 and above overflow to
 * infinity; NaN quiet with sign and top payload bits (F16C's rule,
 * torch's on the CPU). */
static inline uint16_t f32_f16(uint32_t x)
{
	uint32_t sign = (x >> 16) & 0x8000u, a = x & 0x7fffffffu;

	if (a >= 0x477ff000u) { /* overflow, infinity, NaN */
		if (a > 0x7f800000u)
			return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ff));
		return (uint16_t)(sign | 0x7c00u);
	}
	if (a < 0x38800000u) { /* below F16's smallest normal */
		uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u, shift, r, rem, half;

		if (e < 102) /* below 2^-25: rounds to zero */
			return (uint16_t)sign;
		shift = 126 - e;
		r = m >> shift;
		rem = m & ((1u << shift) - 1);
		half = 1u << (shift - 1);
		r += rem > half || (rem == half && (r & 1));
		return (uint16_t)(sign | r);
	}
	a += 0xc8000fffu + ((a >> 13) & 1); /* rebias (-112 << 23) and round */
	return (uint16_t)(sign | (a >> 13));
}

/* BF16 from F32: round to nearest even (overflow reaches infinity by
 * itself); NaN is nan: torch gives 0xFFFF from F32 (its vectorized
 * path) and 0x7FC0 from the narrower types (c10::BFloat16's). */
static inline uint16_t f32_bf16(uint32_t x, uint16_t nan)
{
	if ((x & 0x7fffffffu) > 0x7f800000u)
		return nan;
	return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

#define BF16_NAN_F32 0xffffu
#define BF16_NAN 0x7fc0u

/* ------------------------------------------------------------------ */
/* Tables */

static uint32_t t_f16_f32[1u << 16];
static uint32_t t_e4m3_f32[256], t_e5m2_f32[256];
static uint16_t t_e4m3_f16[256], t_e5m2_f16[256], t_e4m3_bf16[256], t_e5m2_bf16[256];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void tables_init(void)
{
	for (uint32_t h = 0; h < (1u << 16); h++)
		t_f16_f32[h] = f16_f32(h);
	for (uint32_t b = 0; b < 256; b++) {
		t_e4m3_f32[b] = e4m3_f32(b);
		t_e5m2_f32[b] = e5m2_f32(b);
		t_e4m3_f16[b] = f32_f16(t_e4m3_f32[b]);
		t_e5m2_f16[b] = f32_f16(t_e5m2_f32[b]);
		t_e4m3_bf16[b] = f32_bf16(t_e4m3_f32[b], BF16_NAN);
		t_e5m2_bf16[b] = f32_bf16(t_e5m2_f32[b], BF16_NAN);
	}
}

/* ------------------------------------------------------------------ */

int sk_convert_ok(int from, int to)
{
	return cm_convert_ok(from, to);
}

/* The exact F32 value of one element of dtype from. */
static uint32_t to_f32(int from, uint32_t bits)
{
	switch (from) {
	case RL_DTYPE_F16:
		return f16_f32(bits & 0xffff);
	case RL_DTYPE_BF16:
		return (bits & 0xffff) << 16;
	case RL_DTYPE_F8_E4M3:
		return e4m3_f32(bits & 0xff);
	case RL_DTYPE_F8_E5M2:
		return e5m2_f32(bits & 0xff);
	default:
		return bits;
	}
}

uint32_t sk_convert_one(int from, int to, uint32_t bits)
{
	uint32_t f = to_f32(from, bits);

	if (!sk_convert_ok(from, to))
		return 0;
	if (to == RL_DTYPE_F16)
		return f32_f16(f);
	if (to == RL_DTYPE_BF16)
		return f32_bf16(f, from == RL_DTYPE_F32 ? BF16_NAN_F32 : BF16_NAN);
	return f;
}

/* Unaligned little-endian loads and stores (the host's order: safetensors
 * is little-endian, and so is every host ringload builds for). */
static inline uint32_t ld16(const uint8_t *p)
{
	uint16_t v;

	memcpy(&v, p, 2);
	return v;
}

static inline uint32_t ld32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return v;
}

static inline void st16(uint8_t *p, uint32_t v)
{
	uint16_t w = (uint16_t)v;

	memcpy(p, &w, 2);
}

static inline void st32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

/* 8-bit sources: one table each way. */
static void from8(int from, int to, uint8_t *d, const uint8_t *s, size_t n)
{
	int e4 = from == RL_DTYPE_F8_E4M3;
	const uint32_t *t32 = e4 ? t_e4m3_f32 : t_e5m2_f32;
	const uint16_t *t16 = to == RL_DTYPE_F16 ? (e4 ? t_e4m3_f16 : t_e5m2_f16) :
			      (e4 ? t_e4m3_bf16 : t_e5m2_bf16);

	if (to == RL_DTYPE_F32) {
		for (size_t i = 0; i < n; i++)
			st32(d + 4 * i, t32[s[i]]);
		return;
	}
	for (size_t i = 0; i < n; i++)
		st16(d + 2 * i, t16[s[i]]);
}

static void from16(int from, int to, uint8_t *d, const uint8_t *s, size_t n)
{
	if (from == RL_DTYPE_F16 && to == RL_DTYPE_F32) {
		for (size_t i = 0; i < n; i++)
			st32(d + 4 * i, t_f16_f32[ld16(s + 2 * i)]);
	} else if (from == RL_DTYPE_F16) { /* to BF16 */
		for (size_t i = 0; i < n; i++)
			st16(d + 2 * i, f32_bf16(t_f16_f32[ld16(s + 2 * i)], BF16_NAN));
	} else if (to == RL_DTYPE_F32) { /* BF16 */
		for (size_t i = 0; i < n; i++)
			st32(d + 4 * i, ld16(s + 2 * i) << 16);
	} else { /* BF16 to F16 */
		for (size_t i = 0; i < n; i++)
			st16(d + 2 * i, f32_f16(ld16(s + 2 * i) << 16));
	}
}

static void from32(int to, uint8_t *d, const uint8_t *s, size_t n)
{
	if (to == RL_DTYPE_F16) {
		for (size_t i = 0; i < n; i++)
			st16(d + 2 * i, f32_f16(ld32(s + 4 * i)));
	} else {
		for (size_t i = 0; i < n; i++)
			st16(d + 2 * i, f32_bf16(ld32(s + 4 * i), BF16_NAN_F32));
	}
}

void sk_convert(int from, int to, void *dst, const void *src, size_t n)
{
	if (!sk_convert_ok(from, to))
		return;
	pthread_once(&tables_once, tables_init);
	if (from == RL_DTYPE_F32)
		from32(to, dst, src, n);
	else if (from == RL_DTYPE_F16 || from == RL_DTYPE_BF16)
		from16(from, to, dst, src, n);
	else
		from8(from, to, dst, src, n);
}
