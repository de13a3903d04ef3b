/*
 * rl_io.h - the plan as plain data: read requests with scatter lists.
 *
 * The planner writes these; the engine executes them without knowing what a
 * tensor is. This header is the only thing the two layers share.
 */
#ifndef RL_IO_H
#define RL_IO_H

#include <stdint.h>
#include <stddef.h>

/*
 * One copy out of a finished read: count runs of len bytes, the k-th at
 * src + k*src_stride in the read's buffer, land at dst + k*len in the
 * staging area of device slot dev (contiguous: shards are C order), and
 * count towards shard (a process-local shard index) being complete.
 */
struct rl_copy {
	uint32_t src;
	uint32_t len;
	uint32_t count;
	uint32_t src_stride;
	uint64_t dst;
	uint32_t dev;
	uint32_t shard;
};

/* The read goes straight into staging: exactly one copy, src 0, count 1,
 * len == the read's len, and dst aligned like the file offset. */
#define RL_READ_DIRECT 0x1u

/*
 * One read request: len bytes at file offset off (both aligned to the
 * file's O_DIRECT alignment unless the file is read buffered). At least
 * min_len bytes must arrive; the rest may lie past end of file. Its copies
 * are copies[first_copy .. first_copy + ncopies) of the plan's copy array.
 */
struct rl_read {
	uint64_t off;
	uint64_t first_copy;
	uint32_t len;
	uint32_t min_len;
	uint32_t file;
	uint32_t ncopies;
	uint32_t flags;
	uint32_t pad_;
};

#endif /* RL_IO_H */
