/*
 * window_pool.h - the windows of a streaming load (exec/window_pool.c):
 * one pool of host memory cut into one or two windows; the executor
 * takes a free window for each batch, and the window is free again once
 * every piece of its fill is given back (a runtime's release, from any
 * thread) or, for a device sink, once its copies' fence completed.
 *
 * The memory is the caller's (the loader maps it, or the runtime's pool):
 * the pool only cuts it and keeps the windows' state. One mutex guards
 * every window; `freed` wakes the executor waiting for one.
 */
#ifndef EXEC_WINDOW_POOL_H
#define EXEC_WINDOW_POOL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common.h"

#define EX_WPOOL_MAX 2

/* One window. */
struct ex_wslot {
	uint8_t *ptr;
	uint32_t gen;           /* fills so far: stale tokens do not match */
	int busy;               /* being filled, or pieces of it held */
	size_t npieces, held;   /* pieces of the fill; of which not given back */
	uint8_t *out;           /* per piece: 1 while held */
	size_t cap;
	uint64_t ticket;        /* a device sink's fence of its copies */
};

struct ex_wpool {
	pthread_mutex_t lock;   /* every slot */
	pthread_cond_t freed;   /* a window came free, or cancel */
	struct ex_wslot slot[EX_WPOOL_MAX];
	unsigned nslots;
	uint64_t slot_bytes;
	/* Set by a consumer that stopped early; read by the executor.
	 * Relaxed: a request to stop; what it stops is synchronized by the
	 * end of the load (a join). */
	atomic_int cancel;
};

/*
 * How large a streaming load's pool is: what keeps the medium busy, up to
 * the budget and never more than the load's staging. A window holds a few
 * reads per worker (EX_WPOOL_READS at least, EX_WPOOL_READS_PER_WORKER
 * each) and, on a block device, as many reads as half the engine's queue
 * depth of device-sized requests needs (the two windows hold the whole
 * depth), and at least window_floor bytes (each
 * window's fill is one engine run: tiny windows cost more in runs than
 * they save); two windows, so that one is read while
 * the runtime drains the other. Pure: the loader gives what it knows
 * (nothing is timed).
 */
#define EX_WPOOL_READS 4
#define EX_WPOOL_READS_PER_WORKER 2

enum ex_wpool_limit {
	EX_WPOOL_BY_BUDGET = 1,  /* the budget (or the caller's pool) */
	EX_WPOOL_BY_STAGING = 2, /* the load's staging */
	EX_WPOOL_BY_MEDIUM = 3,  /* two windows of `reads` reads of `request` */
};

struct ex_wpool_want {
	uint64_t budget;        /* at most (page multiple, >= min) */
	uint64_t staging;       /* the load's staging, page-rounded */
	uint64_t request;       /* the load's largest read (0: none) */
	unsigned workers;       /* the engine's */
	unsigned depth;         /* the engine's queue depth, all workers */
	uint64_t dev_request;   /* the device's largest unsplit request (0: no device) */
	uint64_t page, min;     /* window alignment; the smallest pool */
	uint64_t window_floor;  /* the medium's windows hold at least this */
};

struct ex_wpool_size {
	uint64_t bytes;         /* the pool */
	uint64_t medium;        /* what the medium wants (2 windows) */
	unsigned limit;         /* enum ex_wpool_limit: what bytes is */
	unsigned reads;         /* reads a window of the medium holds */
};

/* Fills out for w; returns out->bytes (a page multiple, >= w->min). */
uint64_t ex_wpool_size(const struct ex_wpool_want *w, struct ex_wpool_size *out);

void ex_wpool_init(struct ex_wpool *p);
void ex_wpool_destroy(struct ex_wpool *p);
/* Cuts [base, base + len) into windows of a multiple of page: two from
 * two_from bytes on, else one. Returns 0, or -1 when a window would be
 * under two pages. */
int ex_wpool_cut(struct ex_wpool *p, uint8_t *base, uint64_t len, uint64_t two_from,
		 uint64_t page);
/* A free window (marked busy), waiting for gives up to timeout_ms (0:
 * forever); RL_E_CANCELED or RL_E_RELEASE_TIMEOUT with e set. */
int ex_wpool_acquire(struct ex_wpool *p, uint32_t timeout_ms, struct cm_err *e);
/* A window free now (marked busy), or -1 (none, or canceled). */
int ex_wpool_try(struct ex_wpool *p);
/* Window k, acquired, was not filled: free again. */
void ex_wpool_drop(struct ex_wpool *p, unsigned k);
/* Window k filled with n pieces: each held until given back (n 0: free
 * at once). Returns its fill's generation, or -ENOMEM (window freed). */
int64_t ex_wpool_hold(struct ex_wpool *p, unsigned k, size_t n);
/* Piece idx of fill gen of window k given back. Returns 0 or RL_E_PIECE
 * (no such piece held). */
int ex_wpool_give(struct ex_wpool *p, unsigned k, uint32_t gen, size_t idx);
/* Gives back, unseen, the pieces [from, n) of window k's fill. */
void ex_wpool_unhold(struct ex_wpool *p, unsigned k, size_t from);
/* Pieces held, all windows. */
size_t ex_wpool_held(struct ex_wpool *p);
/* Stops a load: the executor's next wait returns RL_E_CANCELED. */
void ex_wpool_cancel(struct ex_wpool *p);
int ex_wpool_canceled(struct ex_wpool *p);
void ex_wpool_uncancel(struct ex_wpool *p);

#endif /* EXEC_WINDOW_POOL_H */
