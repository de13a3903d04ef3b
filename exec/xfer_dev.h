/*
 * xfer_dev.h - read-once payloads onto a device (exec/xfer_dev.c): the
 * sink the read-once executor copies through when the process's shards
 * are in device memory. A device sink takes plain copies from pinned
 * host memory only (sink/dev.h), while a transfer's copy may be strided
 * or convert; so each copy is first applied by a host sink into the
 * pinned window pool (conversion included), then moved by one plain
 * asynchronous device copy per window piece, as a streaming load's
 * windows are. The pool is cut in two halves: one fills while the
 * other's copies run, and a half is reused only after its fence.
 */
#ifndef EXEC_XFER_DEV_H
#define EXEC_XFER_DEV_H

#include "../engine/engine.h"
#include "../planner/planner.h"

struct ex_xdev {
	const struct eng_sink *device;  /* asynchronous: fence, wait, finish set */
	const uint64_t *device_dst;     /* by shard: its first byte's place on device */
	const struct pl_exec *ex;       /* the process's shards (their host layout) */
	const struct eng_sink *stage;   /* a host sink whose slot 0 is the window */
	uint8_t *window;                /* pinned for device (its pin op) */
	uint64_t window_len;

	/* Private */
	struct eng_sink sink;
	uint64_t half, used, ticket[2];
	unsigned cur;
	int held[2];
};

/*
 * The sink over d (its public members set): copy stages and copies,
 * shard_done and finish are the device's (finish also forgets the
 * halves). NULL when the window is smaller than 8 bytes.
 */
const struct eng_sink *ex_xdev_sink(struct ex_xdev *d);

#endif /* EXEC_XFER_DEV_H */
