/*
 * convert.h - dtype conversion of elements (sink/convert.c), the
 * operation a copy carries (cm_op_convert, common/plan_io.h) wherever
 * bytes are copied from a read's buffer: the host sink's copies into
 * staging and windows (and so the pinned windows a CUDA load copies from).
 *
 * Sources F32, F16, BF16, F8_E4M3 (torch.float8_e4m3fn) and F8_E5M2
 * (torch.float8_e5m2); destinations F32, F16 and BF16. Results are
 * torch's `.to()` on the CPU, bit for bit: round to nearest even,
 * overflow to infinity (F8_E4M3 has none and is never a destination),
 * subnormals kept, signs kept (zeros too). NaNs follow torch's bulk
 * conversion: to F32 and F16 a NaN keeps its sign and the top bits of
 * its payload and becomes quiet (BF16 to F32 is its high half, bits
 * as they are); to BF16 a NaN is 0x7FC0, or 0xFFFF from F32 (torch's
 * vectorized float to bfloat16). torch's scalar F16 to F32 (tensors of
 * fewer than 8 elements) gives 0x7FFFFFFF for every NaN instead.
 */
#ifndef SINK_CONVERT_H
#define SINK_CONVERT_H

#include <stddef.h>
#include <stdint.h>

/* 1 when elements of dtype from (rl_dtype) convert to dtype to (from !=
 * to, both in the lists above), else 0. */
int sk_convert_ok(int from, int to);

/*
 * Converts n elements of dtype from at src into dtype to at dst (the
 * pair sk_convert_ok accepts; anything else copies nothing). src and dst
 * may be unaligned; they must not overlap. Thread-safe.
 */
void sk_convert(int from, int to, void *dst, const void *src, size_t n);

/* One element, the rule sk_convert applies (tests, and a reference). */
uint32_t sk_convert_one(int from, int to, uint32_t bits);

#endif /* SINK_CONVERT_H */
