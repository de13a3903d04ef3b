/*
 * progress.c - on_progress runs on the thread that called eng_run (worker
 * 0), about every 1/128 of the total, in order: every worker adds the
 * bytes it finished to one counter, and the worker whose count reaches the
 * next step (the first read's, then a step further each time) moves the
 * step on and records the count it reached; worker 0 reports what was recorded
 * after each of its reaps and, once its own share is done, while it waits
 * for the others (so a load whose reads complete on other workers is
 * reported as finely as one on a single worker). A non-zero return
 * cancels the run.
 */
#include <stdlib.h>
#include <string.h>

#include "eng_int.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void report(struct eng_batch *b, uint64_t done)
{
	const struct eng_job *job = b->job;

	if (eng_failed(b) || done <= b->progress_last)
		return;
	b->progress_last = done;
	if (job->on_progress(job->user, done, job->total_bytes))
		eng_fail(b, RL_E_CANCELED, "load canceled by the progress callback at %llu of %llu bytes",
			 (unsigned long long)done, (unsigned long long)job->total_bytes);
}

void eng_progress_mark(struct eng_batch *b, uint64_t done)
{
	pthread_mutex_lock(&b->lock);
	if (b->nmarks < CM_ARRAY_SIZE(b->marks))
		b->marks[b->nmarks++] = done;
	else /* cannot happen with ~128 steps; keep the furthest */
		b->marks[b->nmarks - 1] = CM_MAX(b->marks[b->nmarks - 1], done);
	/* Relaxed: a hint for worker 0's reap loop; the marks are read
	 * under the lock. */
	atomic_store_explicit(&b->progress_due, 1, memory_order_relaxed);
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->lock);
}

void eng_progress_report(struct eng_batch *b, int final)
{
	uint64_t marks[CM_ARRAY_SIZE(b->marks)];
	unsigned n;

	if (!b->job->on_progress)
		return;
	pthread_mutex_lock(&b->lock);
	atomic_store_explicit(&b->progress_due, 0, memory_order_relaxed);
	n = b->nmarks;
	memcpy(marks, b->marks, n * sizeof(*marks));
	b->nmarks = 0;
	pthread_mutex_unlock(&b->lock);
	qsort(marks, n, sizeof(*marks), cmp_u64);
	for (unsigned i = 0; i < n; i++)
		report(b, marks[i]);
	/* After the join the counter is exact: the total, if not yet said. */
	if (final)
		report(b, atomic_load_explicit(&b->done_bytes, memory_order_relaxed));
}

void eng_progress_wait(struct eng_batch *b)
{
	pthread_mutex_lock(&b->lock);
	while (b->running) {
		if (b->nmarks) {
			pthread_mutex_unlock(&b->lock);
			eng_progress_report(b, 0);
			pthread_mutex_lock(&b->lock);
			continue;
		}
		pthread_cond_wait(&b->cond, &b->lock);
	}
	pthread_mutex_unlock(&b->lock);
}
