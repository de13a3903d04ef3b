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

/*
 * One copy out of a finished read: count runs of len bytes, the k-th at
 * src + k*src_stride in the read's buffer, land at dst + k*len in the
 * staging area of device slot dev (contiguous: shards are C order), and
 * count towards shard (a process-local shard index) being complete.
 */
struct cm_copy {
	uint32_t src;
	uint32_t len;
	uint32_t count;
	uint32_t src_stride;
	uint64_t dst;
	uint32_t dev;
	uint32_t shard;
};

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

/* The read goes straight into staging: exactly one copy, src 0, count 1,
 * len == the read's len, and dst aligned like the file offset. */
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

#endif /* COMMON_PLAN_IO_H */
