/*
 * sink.h - where the bytes go: the ops table a destination implements.
 *
 * The engine reads; a sink receives. The engine defines this table and
 * calls it (never a particular sink); each sink is its own module above
 * the engine (sink/host.c: host staging, today's scatter and pre-fault;
 * sink/cuda.c: device memory through the CUDA driver). The same table is
 * driven by the loader for bytes that are already in host memory (a
 * streaming window's pieces on their way to a GPU: api/loader_cuda.c).
 * Every host copy follows one rule, io_copy_runs (common/plan_io.h),
 * which MPI receives reach through the public rl_copy_runs.
 *
 * In the spirit of fio's ioengine ops and SQLite's VFS: a version and the
 * size the sink was built with come first, every op after `copy` may be
 * NULL (the engine then does without), and a later version only appends.
 *
 * Threads. prepare, direct and copy run on the engine's workers, several
 * at once, each passing its worker index (0 .. workers-1, fewer than
 * ENG_MAX_WORKERS); one worker never calls two ops at once. fence and
 * wait run on the worker that handed the copies over. capacity,
 * shard_done and finish run on one thread at a time.
 *
 * Asynchronous sinks (fence and wait set), as the engine drives them
 * (engine/deliver.c): after handing a bounce read's copies over, the
 * worker takes a ticket and holds the buffer; before it reuses a held
 * buffer it waits for that buffer's ticket, and at the end of its share
 * of a batch for its last one. The copies of a read count towards their
 * shards only once a wait covered them, so on_shard (and shard_done)
 * fire only for bytes in place. After a failure the worker waits no more
 * and finish(0) settles what is in flight. finish ends each batch (an
 * eng_run, or one eng_session_run) on the calling thread once no worker
 * runs; a later batch may use the sink again.
 */
#ifndef ENGINE_SINK_H
#define ENGINE_SINK_H

#include <stddef.h>
#include <stdint.h>

#include "common.h"
#include "plan_io.h"

#define ENG_SINK_V1 1u

struct eng_sink_ops {
	uint32_t version;       /* ENG_SINK_V1 */
	uint32_t size;          /* sizeof(struct eng_sink_ops) of the sink's build */
	const char *name;       /* "host", "cuda", ... (messages, statistics) */

	/*
	 * Copies piece c of a finished read whose first byte is at src: the
	 * rule of struct cm_copy (common/plan_io.h), count runs of c->len
	 * bytes at src + c->src + k * c->src_stride to destination slot
	 * c->dev at c->dst + k * c->len. src is host memory the engine owns
	 * (a bounce buffer or a window). A synchronous sink is done with src
	 * when copy returns; an asynchronous one (fence/wait set) reads src
	 * until a later wait covers it. Returns 0 or a negative code with
	 * the reason in e. Required.
	 */
	int (*copy)(void *sink, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		    struct cm_err *e);

	/*
	 * Host memory copies will come from (a bounce pool, a window pool)
	 * for the whole session: a DMA sink page-locks it once
	 * (cuMemHostRegister). unpin undoes it before the memory is freed.
	 */
	int (*pin)(void *sink, void *base, size_t len, struct cm_err *e);
	void (*unpin)(void *sink, void *base, size_t len);

	/*
	 * The destination of copy c is about to receive bytes bytes (the
	 * read's length when the read lands there straight): a host sink
	 * pre-faults it while the worker's earlier reads are in flight.
	 * prepare_flush ends the worker's burst (coalesced calls).
	 */
	void (*prepare)(void *sink, unsigned worker, const struct cm_copy *c, uint64_t bytes);
	void (*prepare_flush)(void *sink, unsigned worker);

	/*
	 * Host address where a read of len bytes whose copies tile it from
	 * c on (cm_read_tiles: one staging span) may land straight
	 * (CM_READ_DIRECT), or NULL: it goes through a bounce
	 * buffer and copy. Only sinks whose destination is host memory the
	 * kernel may DMA into return non-NULL. The engine still checks
	 * O_DIRECT alignment itself. No copy is made for such a read.
	 */
	uint8_t *(*direct)(void *sink, const struct cm_copy *c, uint64_t len);

	/*
	 * Asynchronous sinks. fence: a ticket covering every copy this
	 * worker handed over so far (cuda: an event recorded on the
	 * worker's stream). wait: returns once those copies have finished
	 * reading their sources and writing their destinations; the source
	 * memory may then be reused. Tickets of one worker increase. Both
	 * NULL for a synchronous sink.
	 */
	int (*fence)(void *sink, unsigned worker, uint64_t *ticket, struct cm_err *e);
	int (*wait)(void *sink, unsigned worker, uint64_t ticket, struct cm_err *e);

	/* Bytes destination slot dev holds (every copy is checked against
	 * it before any byte moves), or UINT64_MAX: unchecked. */
	uint64_t (*capacity)(void *sink, uint32_t dev);

	/*
	 * Every byte of shard is in place (a synchronous sink's copies
	 * returned; an asynchronous sink's were covered by a wait). Called
	 * by the engine just before it fires the job's on_shard, under the
	 * same lock (never two at once, none after a failure): the engine,
	 * not the sink, reports shards to the runtime.
	 */
	void (*shard_done)(void *sink, size_t shard);

	/*
	 * The end of a run or a load: ok 1 waits for every copy in flight
	 * and returns 0 or the first error; ok 0 (the run failed) abandons
	 * what it can, waits for what it cannot, and reports no further
	 * shard. After finish returns nothing is in flight.
	 */
	int (*finish)(void *sink, int ok, struct cm_err *e);
};

/* A sink: its ops, its state, and the number of destination slots
 * (cm_copy.dev indexes them). */
struct eng_sink {
	const struct eng_sink_ops *ops;
	void *state;
	uint32_t ndevs;
};

/* 1 when ops is a table this engine can call (version, size, copy set). */
static inline int eng_sink_ok(const struct eng_sink *s)
{
	return s && s->ops && s->ops->version >= ENG_SINK_V1 &&
	       s->ops->size >= sizeof(struct eng_sink_ops) && s->ops->copy;
}

#endif /* ENGINE_SINK_H */
