/*
 * window_pool.c - the windows of a streaming load (window_pool.h): taken
 * by the executor, given back by releases from any thread.
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <time.h>

#include "window_pool.h"

/* Reads a window of the medium holds: a few, a few per worker, and on a
 * block device half the engine's depth in device-sized requests (a read
 * is request / dev_request of them): the two windows together hold the
 * depth. A window of the whole depth measured no faster: on the virtio
 * disk, 2 GiB under a 256 MiB budget (depth 16 of 4 MiB requests, reads
 * of 8 MiB) streamed alike from 2 x 64 MiB and from 2 x 32 MiB windows. */
static uint64_t medium_reads(const struct ex_wpool_want *w)
{
	uint64_t n = CM_MAX((uint64_t)EX_WPOOL_READS,
			    (uint64_t)EX_WPOOL_READS_PER_WORKER * w->workers);

	if (w->dev_request && w->request) {
		uint64_t dev = CM_MIN(w->dev_request, w->request);
		uint64_t half = ((uint64_t)w->depth + 1) / 2;

		n = CM_MAX(n, (half * dev + w->request - 1) / w->request);
	}
	return n;
}

uint64_t ex_wpool_size(const struct ex_wpool_want *w, struct ex_wpool_size *out)
{
	uint64_t reads = medium_reads(w), win;

	memset(out, 0, sizeof(*out));
	out->reads = (unsigned)CM_MIN(reads, (uint64_t)UINT32_MAX);
	/* Saturates: a medium that wants more than 2^62 gets the budget. */
	if (cm_mul64(reads, CM_MAX(w->request, w->page), &win) < 0 ||
	    (win = CM_MAX(win, w->window_floor)) > (UINT64_MAX >> 2))
		out->medium = UINT64_MAX;
	else
		out->medium = CM_MAX(2 * cm_align_up(win, w->page), w->min);
	/* The smallest; on a tie the first of budget, staging, medium. */
	out->bytes = w->budget;
	out->limit = EX_WPOOL_BY_BUDGET;
	if (w->staging < out->bytes) {
		out->bytes = w->staging;
		out->limit = EX_WPOOL_BY_STAGING;
	}
	if (out->medium < out->bytes) {
		out->bytes = out->medium;
		out->limit = EX_WPOOL_BY_MEDIUM;
	}
	return out->bytes;
}

void ex_wpool_init(struct ex_wpool *p)
{
	pthread_condattr_t ca;

	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->freed, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&p->cancel, 0);
}

void ex_wpool_destroy(struct ex_wpool *p)
{
	for (unsigned i = 0; i < EX_WPOOL_MAX; i++)
		cm_free(p->slot[i].out);
	pthread_cond_destroy(&p->freed);
	pthread_mutex_destroy(&p->lock);
}

int ex_wpool_cut(struct ex_wpool *p, uint8_t *base, uint64_t len, uint64_t two_from,
		 uint64_t page)
{
	int ret = 0;

	/* Under the lock: a stale release from another thread reads them. */
	pthread_mutex_lock(&p->lock);
	p->nslots = len >= two_from ? 2 : 1;
	p->slot_bytes = cm_align_down(len / p->nslots, page);
	if (p->slot_bytes < 2 * page)
		ret = -1;
	for (unsigned i = 0; i < p->nslots; i++) {
		p->slot[i].ptr = base + i * p->slot_bytes;
		p->slot[i].busy = 0;
		p->slot[i].held = p->slot[i].npieces = 0;
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* A free window marked busy, or -1; under p->lock. */
static int take_free(struct ex_wpool *p)
{
	for (unsigned i = 0; i < p->nslots; i++)
		if (!p->slot[i].busy) {
			p->slot[i].busy = 1;
			return (int)i;
		}
	return -1;
}

int ex_wpool_acquire(struct ex_wpool *p, uint32_t timeout_ms, struct cm_err *e)
{
	struct timespec until;
	int k = -1, timed_out = 0;

	cm_deadline_ms(&until, timeout_ms);
	pthread_mutex_lock(&p->lock);
	for (;;) {
		k = take_free(p);
		/* Relaxed: see struct ex_wpool.cancel. */
		if (k >= 0 || timed_out || atomic_load_explicit(&p->cancel, memory_order_relaxed))
			break;
		if (!timeout_ms)
			pthread_cond_wait(&p->freed, &p->lock);
		else if (pthread_cond_timedwait(&p->freed, &p->lock, &until) == ETIMEDOUT)
			timed_out = 1;
	}
	pthread_mutex_unlock(&p->lock);
	if (k >= 0)
		return k;
	if (!timed_out)
		return cm_err_set(e, RL_E_CANCELED,
				  "streaming: canceled (rl_loader_finish() before the last piece)");
	return cm_err_set(e, RL_E_RELEASE_TIMEOUT,
			  "streaming: all %u windows (%" PRIu64 " bytes each) hold pieces not released for %u ms (RL_OPT_RELEASE_TIMEOUT_MS): release pieces with rl_loader_release()",
			  p->nslots, p->slot_bytes, timeout_ms);
}

int ex_wpool_try(struct ex_wpool *p)
{
	int k = -1;

	pthread_mutex_lock(&p->lock);
	/* Relaxed: see struct ex_wpool.cancel. */
	if (!atomic_load_explicit(&p->cancel, memory_order_relaxed))
		k = take_free(p);
	pthread_mutex_unlock(&p->lock);
	return k;
}

void ex_wpool_drop(struct ex_wpool *p, unsigned k)
{
	pthread_mutex_lock(&p->lock);
	p->slot[k].busy = 0;
	pthread_cond_broadcast(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

int64_t ex_wpool_hold(struct ex_wpool *p, unsigned k, size_t n)
{
	struct ex_wslot *w = p->slot + k;
	int64_t ret;

	pthread_mutex_lock(&p->lock);
	if (n > w->cap) {
		uint8_t *o = cm_realloc(w->out, n);

		if (o) {
			w->out = o;
			w->cap = n;
		}
	}
	if (n > w->cap) {
		ret = -ENOMEM;
		w->busy = 0;
	} else {
		w->gen = (w->gen + 1) & 0xffffffu;
		w->npieces = w->held = n;
		memset(w->out, 1, n);
		if (!n)
			w->busy = 0;
		ret = w->gen;
	}
	pthread_mutex_unlock(&p->lock);
	return ret;
}

/* ex_wpool_give under p->lock. */
static int give(struct ex_wpool *p, unsigned k, uint32_t gen, size_t idx)
{
	struct ex_wslot *w;

	if (k >= p->nslots) /* a forged token: no pointer past the slots */
		return RL_E_PIECE;
	w = &p->slot[k];
	if (!w->busy || w->gen != gen || idx >= w->npieces || !w->out[idx])
		return RL_E_PIECE;
	w->out[idx] = 0;
	if (--w->held == 0) {
		w->busy = 0;
		pthread_cond_broadcast(&p->freed);
	}
	return 0;
}

int ex_wpool_give(struct ex_wpool *p, unsigned k, uint32_t gen, size_t idx)
{
	int ret;

	pthread_mutex_lock(&p->lock);
	ret = give(p, k, gen, idx);
	pthread_mutex_unlock(&p->lock);
	return ret;
}

void ex_wpool_unhold(struct ex_wpool *p, unsigned k, size_t from)
{
	pthread_mutex_lock(&p->lock);
	for (size_t i = from; i < p->slot[k].npieces; i++)
		if (p->slot[k].busy && p->slot[k].out[i])
			give(p, k, p->slot[k].gen, i);
	pthread_mutex_unlock(&p->lock);
}

size_t ex_wpool_held(struct ex_wpool *p)
{
	size_t held = 0;

	pthread_mutex_lock(&p->lock);
	for (unsigned i = 0; i < p->nslots; i++)
		held += p->slot[i].held;
	pthread_mutex_unlock(&p->lock);
	return held;
}

void ex_wpool_cancel(struct ex_wpool *p)
{
	/* Relaxed: see struct ex_wpool.cancel; the broadcast under the lock
	 * wakes an executor waiting for a window. */
	pthread_mutex_lock(&p->lock);
	atomic_store_explicit(&p->cancel, 1, memory_order_relaxed);
	pthread_cond_broadcast(&p->freed);
	pthread_mutex_unlock(&p->lock);
}

int ex_wpool_canceled(struct ex_wpool *p)
{
	return atomic_load_explicit(&p->cancel, memory_order_relaxed);
}

void ex_wpool_uncancel(struct ex_wpool *p)
{
	atomic_store_explicit(&p->cancel, 0, memory_order_relaxed);
}
