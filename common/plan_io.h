/*
 * plan_io.h - the plan as plain data: read requests with scatter lists.
 *
 * The planner writes these; the engine executes them without knowing what a
 * tensor is. This header is the only thing the two layers share.
 */
#ifndef COMMON_PLAN_IO_H
#define COMMON_PLAN_IO_H

#include <stdint.h>
#include <stddef.h>

#include "ringload_types.h"

/*
 * The operation a copy carries (struct cm_copy.op, 8 bits): CM_OP_PLAIN,
 * the bytes as read, or one of the dtype conversions, whose codes
 * cm_op_convert gives (1 + source index x 3 + destination index over the
 * lists cm_convert_ok accepts): elements of one dtype become elements
 * of another (cm_op_from, cm_op_to; cm_op_isize, cm_op_osize bytes each).
 */
#define CM_OP_PLAIN 0u

static const uint8_t cm_op_sources[5] = { RL_DTYPE_F32, RL_DTYPE_F16, RL_DTYPE_BF16,
					  RL_DTYPE_F8_E4M3, RL_DTYPE_F8_E5M2 };
static const uint8_t cm_op_dests[3] = { RL_DTYPE_F32, RL_DTYPE_F16, RL_DTYPE_BF16 };
static const uint8_t cm_op_sizes[5] = { 4, 2, 2, 1, 1 };

/*
 * One copy out of a finished read: count runs of len bytes, the k-th at
 * src + k*src_stride in the read's buffer, land at dst + k*out in the
 * staging area of device slot dev (contiguous: shards are C order), and
 * count towards shard (a process-local shard index) being complete. out
 * is len for a plain copy; a conversion (set by the transform pass,
 * exec/transform.c) turns each run's len / isize elements into as many
 * of its destination dtype, out = len / isize * osize bytes
 * (cm_copy_out). Runs of a conversion hold whole elements. 32 bytes:
 * dev shares a word with op (slots < 2^24, the planner's PL_MAX_DEVICES).
 */
struct cm_copy {
	uint32_t src;
	uint32_t len;
	uint32_t count;
	uint32_t src_stride;
	uint64_t dst;
	uint32_t dev : 24;
	uint32_t op : 8;        /* CM_OP_PLAIN, or cm_op_convert(from, to) */
	uint32_t shard;
};

_Static_assert(sizeof(struct cm_copy) == 32, "a copy is 32 bytes: plans hold millions");

/*
 * Whether elements of dtype from (rl_dtype) convert to dtype to: the one
 * list (the planner checks a plan's conversions by it, sink/convert.c
 * converts exactly these). Sources F32, F16, BF16, F8_E4M3, F8_E5M2;
 * destinations F32, F16, BF16; from != to.
 */
static inline int cm_convert_ok(int from, int to)
{
	return from != to &&
	       (from == RL_DTYPE_F32 || from == RL_DTYPE_F16 || from == RL_DTYPE_BF16 ||
		from == RL_DTYPE_F8_E4M3 || from == RL_DTYPE_F8_E5M2) &&
	       (to == RL_DTYPE_F32 || to == RL_DTYPE_F16 || to == RL_DTYPE_BF16);
}

/* The operation converting from to to, or CM_OP_PLAIN when none does. */
static inline unsigned cm_op_convert(int from, int to)
{
	unsigned s = 0, d = 0;

	if (!cm_convert_ok(from, to))
		return CM_OP_PLAIN;
	while (cm_op_sources[s] != from)
		s++;
	while (cm_op_dests[d] != to)
		d++;
	return 1 + s * 3 + d;
}

/* A conversion's dtypes and element bytes (op != CM_OP_PLAIN, < 16). */
static inline int cm_op_from(unsigned op)
{
	return cm_op_sources[(op - 1) / 3];
}

static inline int cm_op_to(unsigned op)
{
	return cm_op_dests[(op - 1) % 3];
}

static inline unsigned cm_op_isize(unsigned op)
{
	return cm_op_sizes[(op - 1) / 3];
}

static inline unsigned cm_op_osize(unsigned op)
{
	return cm_op_sizes[(op - 1) % 3];
}

/* Whether op is an operation this build knows. */
static inline int cm_op_ok(unsigned op)
{
	return op <= 15;
}

/* The destination bytes of in source bytes of copy c (whole elements). */
static inline uint64_t cm_copy_out(const struct cm_copy *c, uint64_t in)
{
	return c->op ? in / cm_op_isize(c->op) * cm_op_osize(c->op) : in;
}

/* The source bytes that fill out destination bytes of copy c. */
static inline uint64_t cm_copy_in(const struct cm_copy *c, uint64_t out)
{
	return c->op ? out / cm_op_osize(c->op) * cm_op_isize(c->op) : out;
}

/* Every destination byte of copy c: count runs of cm_copy_out(c, len). */
static inline uint64_t cm_copy_bytes(const struct cm_copy *c)
{
	return cm_copy_out(c, c->len) * c->count;
}

/*
 * The strided-copy rule, in this one place (the host sink's copy, the MPI
 * receives through rl_copy_runs): count runs of len bytes, run k at
 * k * src_stride from the source's first byte, landing at k * len from
 * the destination's. run is called for each run in order with the two
 * offsets and its length; runs contiguous on both sides (src_stride ==
 * len) come as one. Stops at run's first nonzero return and returns it.
 * Inline, so that a caller's constant run (a memcpy) costs no call.
 */
static inline int io_copy_runs(uint64_t len, uint64_t count, uint64_t src_stride,
			       int (*run)(void *arg, uint64_t src, uint64_t dst, uint64_t len),
			       void *arg)
{
	int ret = 0;

	if (!len || !count)
		return 0;
	if (count == 1 || src_stride == len)
		return run(arg, 0, 0, len * count);
	for (uint64_t k = 0; k < count && !ret; k++)
		ret = run(arg, k * src_stride, k * len, len);
	return ret;
}

/* The read goes straight into staging: its copies tile it (cm_read_tiles)
 * and the first one's dst is aligned like the file offset. */
#define CM_READ_DIRECT 0x1u

/*
 * One read request: len bytes at file offset off (both aligned to the
 * file's O_DIRECT alignment unless the file is read buffered). At least
 * min_len bytes must arrive; the rest may lie past end of file. Its copies
 * are copies[first_copy .. first_copy + ncopies) of the plan's copy array.
 * ioprio: the read's I/O priority (ioprio_set(2)'s value: class << 13 |
 * level); 0, as the planner leaves it, reads at the thread's priority.
 */
struct cm_read {
	uint64_t off;
	uint64_t first_copy;
	uint32_t len;
	uint32_t min_len;
	uint32_t file;
	uint32_t ncopies;
	uint32_t flags;
	uint32_t ioprio;
};

/*
 * Whether the ncopies copies c of a read of len bytes, all of which must
 * arrive (min_len), tile it: plain single runs, the first at src 0, each
 * next one where the previous ended both in the read and in one device's
 * staging, together len bytes. Such a read may land straight in staging
 * at the first copy's dst (CM_READ_DIRECT): a run of consecutive small
 * shards is one read and no copy. The one rule the planner, the
 * executor's windows and the engine's checks apply.
 */
static inline int cm_read_tiles(const struct cm_read *r, const struct cm_copy *c)
{
	uint64_t at = 0;

	if (!r->ncopies || r->min_len != r->len)
		return 0;
	for (uint32_t i = 0; i < r->ncopies; i++) {
		if (c[i].op != CM_OP_PLAIN || c[i].count != 1 || c[i].src != at ||
		    c[i].dev != c[0].dev || c[i].dst - c[0].dst != at)
			return 0;
		at += c[i].len;
	}
	return at == r->len;
}

#endif /* COMMON_PLAN_IO_H */
