/* sink_async.c - the engine tests' asynchronous sink (sink_async.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sink_async.h"

struct ts_item {
	struct cm_copy c;
	const uint8_t *src;             /* the read's first byte */
	unsigned worker;
	uint64_t seq;                   /* all workers' copies, 1-based */
	uint64_t wseq;                  /* the worker's copies, 1-based */
	uint64_t read;                  /* the worker's fences before it */
	struct ts_item *next;
};

static int copy_run(void *arg, uint64_t src, uint64_t dst, uint64_t len)
{
	const uint8_t *const *p = arg;

	memcpy((uint8_t *)p[1] + dst, p[0] + src, len);
	return 0;
}

static void *copier(void *arg)
{
	struct ts_async *a = arg;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct ts_item *it;
		int fail, skip;

		while (!a->head && !a->stop)
			pthread_cond_wait(&a->cond, &a->lock);
		if (!a->head)
			break;
		it = a->head;
		skip = a->finished; /* finish(0) abandons what has not started */
		pthread_mutex_unlock(&a->lock);
		fail = it->seq == a->fail_async_at;
		if (!skip && a->delay_us)
			usleep(a->delay_us);
		if (!skip && !fail) {
			const uint8_t *p[2] = { it->src + it->c.src,
						a->areas[it->c.dev] + it->c.dst };

			io_copy_runs(it->c.len, it->c.count, it->c.src_stride, copy_run, p);
		}
		pthread_mutex_lock(&a->lock);
		if (fail && !a->err)
			a->err = -EIO;
		a->head = it->next;
		if (!a->head)
			a->tail = NULL;
		a->done[it->worker]++;
		a->in_flight--;
		it->next = a->unwaited;
		a->unwaited = it;
		pthread_cond_broadcast(&a->cond);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

static int same_buffer(const struct ts_item *it, const struct ts_item *n)
{
	return it->src == n->src && (it->worker != n->worker || it->read != n->read);
}

/* A copy from the same buffer as one of an earlier read that is queued,
 * or done but not yet covered by a wait: the engine reused the buffer
 * too early. */
static int reused(const struct ts_async *a, const struct ts_item *n)
{
	for (const struct ts_item *it = a->head; it; it = it->next)
		if (same_buffer(it, n))
			return 1;
	for (const struct ts_item *it = a->unwaited; it; it = it->next)
		if (same_buffer(it, n))
			return 1;
	return 0;
}

static int as_copy(void *state, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		   struct cm_err *e)
{
	struct ts_async *a = state;
	struct ts_item *it;
	uint64_t seq;

	pthread_mutex_lock(&a->lock);
	a->late_calls += a->finished;
	seq = ++a->copies;
	pthread_mutex_unlock(&a->lock);
	if (seq == a->fail_copy_at)
		return cm_err_set(e, -EIO, "copy %llu refused (test)", (unsigned long long)seq);
	it = calloc(1, sizeof(*it));
	if (!it)
		return cm_err_set(e, -ENOMEM, "out of memory");
	it->c = *c;
	it->src = src;
	it->worker = worker;
	it->seq = seq;
	pthread_mutex_lock(&a->lock);
	it->wseq = ++a->handed[worker];
	it->read = a->reads[worker];
	a->reused += reused(a, it);
	if (a->tail)
		a->tail->next = it;
	else
		a->head = it;
	a->tail = it;
	a->in_flight++;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

static int as_fence(void *state, unsigned worker, uint64_t *ticket, struct cm_err *e)
{
	struct ts_async *a = state;

	pthread_mutex_lock(&a->lock);
	a->late_calls += a->finished;
	a->reads[worker]++;
	*ticket = a->handed[worker];
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* Poisons the sources of worker's copies up to wseq upto, now free
 * (under a->lock). */
static void poison(struct ts_async *a, unsigned worker, uint64_t upto)
{
	struct ts_item **pp = &a->unwaited;

	while (*pp) {
		struct ts_item *it = *pp;

		if (it->worker != worker || it->wseq > upto) {
			pp = &it->next;
			continue;
		}
		if (it->c.count)
			memset((uint8_t *)it->src + it->c.src, 0xa5,
			       (uint64_t)(it->c.count - 1) * it->c.src_stride + it->c.len);
		a->poisoned++;
		*pp = it->next;
		free(it);
	}
}

static int as_wait(void *state, unsigned worker, uint64_t ticket, struct cm_err *e)
{
	struct ts_async *a = state;
	int err;

	pthread_mutex_lock(&a->lock);
	a->late_calls += a->finished;
	a->waits++;
	if (ticket > a->handed[worker]) {
		a->bad_waits++;
		ticket = a->handed[worker];
	}
	while (a->done[worker] < ticket)
		pthread_cond_wait(&a->cond, &a->lock);
	err = a->err;
	poison(a, worker, ticket);
	pthread_mutex_unlock(&a->lock);
	if (err)
		return cm_err_set(e, err, "a copy failed on the copier (test)");
	return 0;
}

static uint64_t as_capacity(void *state, uint32_t dev)
{
	struct ts_async *a = state;

	if (!a->areas[dev])
		return 0;
	return a->bytes ? a->bytes[dev] : UINT64_MAX;
}

static int as_finish(void *state, int ok, struct cm_err *e)
{
	struct ts_async *a = state;
	int err;

	pthread_mutex_lock(&a->lock);
	a->late_calls += a->finished;
	a->finished = 1; /* ok 0: the copier skips what has not started */
	a->finishes++;
	a->finish_ok += ok != 0;
	while (a->head)
		pthread_cond_wait(&a->cond, &a->lock);
	err = a->err;
	pthread_mutex_unlock(&a->lock);
	if (ok && err)
		return cm_err_set(e, err, "a copy failed on the copier (test)");
	return 0;
}

static const struct eng_sink_ops async_ops = {
	.version = ENG_SINK_V1,
	.size = sizeof(struct eng_sink_ops),
	.name = "async-test",
	.copy = as_copy,
	.fence = as_fence,
	.wait = as_wait,
	.capacity = as_capacity,
	.finish = as_finish,
};

int ts_async_start(struct ts_async *a, unsigned ndevs, uint8_t *const *areas,
		   const uint64_t *bytes, unsigned delay_us)
{
	memset(a, 0, sizeof(*a));
	a->areas = areas;
	a->bytes = bytes;
	a->delay_us = delay_us;
	a->sink.ops = &async_ops;
	a->sink.state = a;
	a->sink.ndevs = ndevs;
	pthread_mutex_init(&a->lock, NULL);
	pthread_cond_init(&a->cond, NULL);
	return -pthread_create(&a->copier, NULL, copier, a);
}

void ts_async_stop(struct ts_async *a)
{
	pthread_mutex_lock(&a->lock);
	a->stop = 1;
	pthread_cond_broadcast(&a->cond);
	pthread_mutex_unlock(&a->lock);
	pthread_join(a->copier, NULL);
	while (a->unwaited) {
		struct ts_item *it = a->unwaited;

		a->unwaited = it->next;
		free(it);
	}
	pthread_cond_destroy(&a->cond);
	pthread_mutex_destroy(&a->lock);
}
