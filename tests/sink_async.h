/*
 * sink_async.h - an asynchronous sink for the engine tests (the shape of
 * a DMA sink without a device). copy queues each copy; one copier thread
 * carries them out in order, each after a delay. fence gives a worker's
 * count of copies handed over; wait blocks until the copier did that many
 * of the worker's, then poisons their sources (the engine may now reuse
 * them, and must not read them). Destinations are host areas, as the host
 * sink's; reads never land straight (every read bounces).
 *
 * It records what would break the contract: a copy from a bounce buffer
 * whose earlier read's copies have not run (the buffer was reused), a
 * wait for more than was handed over, ops called after finish.
 */
#ifndef TESTS_SINK_ASYNC_H
#define TESTS_SINK_ASYNC_H

#include <pthread.h>
#include <stdatomic.h>

#include "../engine/engine.h"

struct ts_item;

struct ts_async {
	struct eng_sink sink;
	uint8_t *const *areas;
	const uint64_t *bytes;
	unsigned delay_us;              /* before each copy, on the copier */
	uint64_t fail_copy_at;          /* copy number (1-based) copy refuses; 0: none */
	uint64_t fail_async_at;         /* copy number the copier fails; 0: none */

	pthread_t copier;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ts_item *head, *tail;    /* queued, oldest first */
	struct ts_item *unwaited;       /* done, no wait covered them yet */
	int stop;
	uint64_t copies;                /* handed over, all workers */
	uint64_t handed[ENG_MAX_WORKERS], done[ENG_MAX_WORKERS];
	uint64_t reads[ENG_MAX_WORKERS];/* fences: the worker's reads handed over */
	int err;                        /* the copier's first error */

	/* what a test checks (under lock, or after the run) */
	uint64_t in_flight;             /* queued, not yet done */
	uint64_t waits, poisoned;
	unsigned finishes, finish_ok;
	unsigned reused;                /* copies from a buffer still being read */
	unsigned bad_waits;             /* waits for more than was handed over */
	unsigned late_calls;            /* ops after finish */
	int finished;
};

/* Sets a up over ndevs areas (bytes NULL: unchecked), starts its copier
 * and returns its sink; 0 or -errno. */
int ts_async_start(struct ts_async *a, unsigned ndevs, uint8_t *const *areas,
		   const uint64_t *bytes, unsigned delay_us);
/* Stops the copier (after finish) and frees what is left. */
void ts_async_stop(struct ts_async *a);

#endif
