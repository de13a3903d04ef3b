/*
 * execute.h - running a program (exec/execute.c): the batches in order on
 * the engine, each into its destination, and what arrived handed on.
 *
 * A whole load: the one batch into the caller's sink (host staging), one
 * engine run. A streaming load: one engine session for every batch (or
 * two lanes filling windows turn about, exec/lanes.h); for
 * each, a free window of the pool (exec/window_pool.h), the batch's job
 * over the caller's sink of that window, the run, then the window's pieces
 * handed to the runtime (on_piece; the window is free again once every
 * piece is given back) or copied to a device sink (the window is free
 * again once the copies' fence completed, while the next batch is read;
 * then its pieces go to on_piece, if set, as device pieces); then the
 * shards of no bytes. The checksum pass hashes what the engine
 * delivers across every batch.
 *
 * The executor only executes: the program (exec/program.h) is built
 * before and is never changed.
 */
#ifndef EXEC_EXECUTE_H
#define EXEC_EXECUTE_H

#include "../engine/engine.h"
#include "../planner/planner.h"
#include "program.h"
#include "window_pool.h"

struct ex_exec {
	const struct pl_exec *ex;
	const struct ex_program *prog;
	struct eng_opts eo;             /* the executor sizes the bound and buffers */
	struct eng_file_stat *file_stats; /* out, by file of ex; may be NULL */
	uint8_t (*digests)[32];         /* out, by file of ex: the hashed files' */

	/* Callbacks, any may be NULL, each passed user. on_shard: a shard
	 * complete (whole loads, device sinks). on_progress: bytes read so
	 * far of the plan's (non-zero: cancel). on_piece: streaming, piece
	 * p of window k's fill gen (its idx-th) is at data, held until
	 * given back (ex_wpool_give); a negative return stops the load (e
	 * set), the runtime holding that piece. With a device sink, on_piece
	 * (if set) gets each piece once its window's fence completed (data
	 * NULL, idx SIZE_MAX: no window held; the bytes are on the device). */
	void (*on_shard)(void *user, size_t shard);
	int (*on_progress)(void *user, uint64_t done, uint64_t total);
	int (*on_piece)(void *user, const struct ex_piece *p, uint8_t *data, unsigned k,
			uint32_t gen, size_t idx, struct cm_err *e);
	void *user;

	const struct eng_sink *sink;    /* a whole load: where the copies land */

	/* Streaming */
	struct ex_wpool *pool;          /* the windows (cut) */
	const struct eng_sink *windows[EX_WPOOL_MAX]; /* a host sink over each window
						       * (slot 0: the window's bytes) */
	uint32_t release_timeout_ms;    /* a window waited for at most (0: forever) */
	const struct eng_sink *device;  /* NULL, or the pieces are copied to it */
	const uint64_t *device_dst;     /* by shard: its first byte's place in device */

	/* Out: the engine's statistics, the checksum pass's included;
	 * streaming: engine set-ups, whether the windows were registered
	 * with io_uring (else why not). */
	struct eng_stats stats;
	unsigned runs;
	int registered;
	char why[64];
};

/* Runs x->prog. Returns 0 or the first error (in e). Frees everything it
 * set up, either way; for a device sink, nothing is in flight after. */
int ex_execute(struct ex_exec *x, struct cm_err *e);

/* Piece pc of ex (its bytes at data) copied to device sink d, at
 * dst_of[pc->shard] + pc->offset, in copies of at most 1 GiB (a copy's
 * length is 32 bits; one copy of no bytes for an empty shard): a piece
 * may be as long as a window. Returns 0 or the sink's error (in e). */
int ex_device_copy(const struct eng_sink *d, const struct pl_exec *ex, const uint64_t *dst_of,
		   const struct ex_piece *pc, const uint8_t *data, struct cm_err *e);

#endif /* EXEC_EXECUTE_H */
