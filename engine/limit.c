/*
 * limit.c - the byte limiter every worker shares: bytes submitted and not
 * yet scattered, all workers together, never above the bound.
 *
 * Taking is a compare-and-swap on one counter (no lock on the fast path:
 * a worker takes bytes for every read it submits). Only a worker that
 * cannot take what it needs sleeps: on the condition variable when it has
 * nothing in flight, in its backend (parked) when it has; a worker giving
 * bytes back wakes both kinds, but takes the lock only when someone waits.
 */
#include "eng_int.h"

int eng_lim_try(struct eng_run *rc, uint32_t len)
{
	/* Relaxed: the counter guards no other memory (buffers and slots
	 * are each worker's own); seq_cst only where waiters are involved. */
	uint_fast64_t cur = atomic_load_explicit(&rc->b.inflight, memory_order_relaxed), pk;

	do {
		if (cur + len > rc->b.bound)
			return 0;
	} while (!atomic_compare_exchange_weak_explicit(&rc->b.inflight, &cur, cur + len,
							memory_order_relaxed,
							memory_order_relaxed));
	cur += len;
	pk = atomic_load_explicit(&rc->b.peak, memory_order_relaxed);
	while (cur > pk && !atomic_compare_exchange_weak_explicit(&rc->b.peak, &pk, cur,
								  memory_order_relaxed,
								  memory_order_relaxed))
		;
	return 1;
}

void eng_lim_give(struct eng_run *rc, uint64_t len)
{
	/* seq_cst pairs with the waiter's increment of `waiters` and load of
	 * `inflight`: either we see the waiter, or it sees our bytes. */
	atomic_fetch_sub_explicit(&rc->b.inflight, len, memory_order_seq_cst);
	if (!atomic_load_explicit(&rc->b.waiters, memory_order_seq_cst))
		return;
	pthread_mutex_lock(&rc->b.lock);
	pthread_cond_broadcast(&rc->b.cond);
	for (unsigned i = 0; i < rc->cx.nworkers; i++) {
		struct eng_worker *w = rc->cx.workers + i;

		/* Under the lock: a parked worker clears the flag under it
		 * before it tears its backend down, so the backend is alive. */
		if (w->parked) {
			w->parked = 0;
			w->be->ops->wake(w->be);
		}
	}
	pthread_mutex_unlock(&rc->b.lock);
}

static int room(struct eng_run *rc, uint32_t len)
{
	return atomic_load_explicit(&rc->b.inflight, memory_order_seq_cst) + len <= rc->b.bound;
}

void eng_lim_wait(struct eng_run *rc, uint32_t len)
{
	pthread_mutex_lock(&rc->b.lock);
	atomic_fetch_add_explicit(&rc->b.waiters, 1, memory_order_seq_cst);
	while (!eng_failed(&rc->b) && !room(rc, len))
		pthread_cond_wait(&rc->b.cond, &rc->b.lock);
	atomic_fetch_sub_explicit(&rc->b.waiters, 1, memory_order_seq_cst);
	pthread_mutex_unlock(&rc->b.lock);
}

int eng_lim_park(struct eng_worker *w, uint32_t len)
{
	struct eng_run *rc = w->run;
	int ready;

	pthread_mutex_lock(&rc->b.lock);
	atomic_fetch_add_explicit(&rc->b.waiters, 1, memory_order_seq_cst);
	ready = room(rc, len);
	if (ready)
		atomic_fetch_sub_explicit(&rc->b.waiters, 1, memory_order_seq_cst);
	else
		w->parked = 1;
	pthread_mutex_unlock(&rc->b.lock);
	return ready;
}

void eng_lim_unpark(struct eng_worker *w)
{
	struct eng_run *rc = w->run;

	pthread_mutex_lock(&rc->b.lock);
	w->parked = 0;
	atomic_fetch_sub_explicit(&rc->b.waiters, 1, memory_order_seq_cst);
	pthread_mutex_unlock(&rc->b.lock);
}
