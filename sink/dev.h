/*
 * dev.h - what the loader needs of a device besides engine/sink.h's copy
 * ops: to open its ordinals, give each destination slot its memory,
 * report shards and close it. Each device kind fills one struct
 * sink_dev_ops in its own file (sink/cuda.c, the test build's
 * sink/test_dev.c) and has one line in sink/registry.c; the loader
 * (api/loader_dev.c) only ever calls these ops.
 *
 * As engine/sink.h's table: a version and the size the sink was built
 * with come first, ops marked optional may be NULL, and a later version
 * only appends.
 */
#ifndef SINK_DEV_H
#define SINK_DEV_H

#include "../engine/sink.h"

#define SINK_DEV_V1 1u

/* What fallback returns: the values of RL_FALLBACK_CUDA_HOST_ALLOC and
 * RL_FALLBACK_CUDA_PAGEABLE (api/loader_dev.c asserts it). */
enum {
	SINK_DEV_FALLBACK_HOST_ALLOC = 1u << 7,  /* copies from memory the device allocated */
	SINK_DEV_FALLBACK_PAGEABLE = 1u << 8,    /* synchronous copies from pageable memory */
};

struct sink_dev_ops {
	uint32_t version;       /* SINK_DEV_V1 */
	uint32_t size;          /* sizeof(struct sink_dev_ops) of the sink's build */
	const char *kind;       /* "cuda": what --device and rl_loader_set_device name */
	const char *what;       /* messages: "CUDA device" */
	int err_device;         /* the code of an ordinal that is no device */
	int err_memory;         /* the code of a destination without room */

	/* A child forked after the device was opened: err_device-like code
	 * with e set (nothing there may touch it), else 0. Optional. */
	int (*forked)(struct cm_err *e);
	/* A sink for nslots destination slots, slot i on ordinal[i], driven
	 * by `workers` threads. 0, or a code with e set and nothing held. */
	int (*create)(const int *ordinal, uint32_t nslots, unsigned workers, struct eng_sink *out,
		      struct cm_err *e);
	/* Waits for what is in flight, frees everything; accepts a sink
	 * never created (ops NULL). */
	void (*destroy)(struct eng_sink *s);
	/* Slot's destination: base address (0: copies carry absolute
	 * addresses, the caller's) and capacity (UINT64_MAX: unchecked). */
	void (*set_dest)(struct eng_sink *s, uint32_t slot, uint64_t base, uint64_t cap);
	/* A library allocation of bytes on slot's device, made its
	 * destination. */
	int (*alloc)(struct eng_sink *s, uint32_t slot, uint64_t bytes, struct cm_err *e);
	/* The slot's destination base (0: none, or absolute addresses). */
	uint64_t (*base)(const struct eng_sink *s, uint32_t slot);
	/* Frees every library allocation. */
	void (*free_allocs)(struct eng_sink *s);
	/* fn(user, shard) once each shard's copies have finished. */
	void (*on_shard)(struct eng_sink *s, void (*fn)(void *user, size_t shard), void *user);
	/* len bytes at base(slot) + off copied back to host dst, after
	 * every copy in flight (--verify). */
	int (*read_back)(struct eng_sink *s, uint32_t slot, uint64_t off, void *dst, size_t len,
			 struct cm_err *e);

	/* The caller's queues (CUDA: streams), stream[i] on ordinal[i]: the
	 * load runs after what they hold and before their later work.
	 * begin: before the first copy. Both optional. */
	void (*caller_streams)(struct eng_sink *s, const int *ordinal, void *const *stream,
			       size_t n);
	int (*begin)(struct eng_sink *s, struct cm_err *e);
	/* SINK_DEV_FALLBACK_* of the pool pinned now (0: none), *why its
	 * one line. Optional. */
	unsigned (*fallback)(const struct eng_sink *s, const char **why);
};

#endif /* SINK_DEV_H */
