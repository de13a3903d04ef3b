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

static void report(struct eng_run *rc, uint64_t done)
{
	const struct eng_job *job = rc->job;

	if (eng_failed(rc) || done <= rc->progress_last)
		return;
	rc->progress_last = done;
	if (job->on_progress(job->user, done, job->total_bytes))
		eng_fail(rc, RL_E_CANCELED, "load canceled by the progress callback at %llu of %llu bytes",
			 (unsigned long long)done, (unsigned long long)job->total_bytes);
}

void eng_progress_mark(struct eng_run *rc, uint64_t done)
{
	pthread_mutex_lock(&rc->lock);
	if (rc->nmarks < RL_ARRAY_SIZE(rc->marks))
		rc->marks[rc->nmarks++] = done;
	else /* cannot happen with ~128 steps; keep the furthest */
		rc->marks[rc->nmarks - 1] = RL_MAX(rc->marks[rc->nmarks - 1], done);
	/* Relaxed: a hint for worker 0's reap loop; the marks are read
	 * under the lock. */
	atomic_store_explicit(&rc->progress_due, 1, memory_order_relaxed);
	pthread_cond_broadcast(&rc->cond);
	pthread_mutex_unlock(&rc->lock);
}

void eng_progress_report(struct eng_run *rc, int final)
{
	uint64_t marks[RL_ARRAY_SIZE(rc->marks)];
	unsigned n;

	if (!rc->job->on_progress)
		return;
	pthread_mutex_lock(&rc->lock);
	atomic_store_explicit(&rc->progress_due, 0, memory_order_relaxed);
	n = rc->nmarks;
	memcpy(marks, rc->marks, n * sizeof(*marks));
	rc->nmarks = 0;
	pthread_mutex_unlock(&rc->lock);
	qsort(marks, n, sizeof(*marks), cmp_u64);
	for (unsigned i = 0; i < n; i++)
		report(rc, marks[i]);
	/* After the join the counter is exact: the total, if not yet said. */
	if (final)
		report(rc, atomic_load_explicit(&rc->done_bytes, memory_order_relaxed));
}

void eng_progress_wait(struct eng_run *rc)
{
	pthread_mutex_lock(&rc->lock);
	while (rc->running) {
		if (rc->nmarks) {
			pthread_mutex_unlock(&rc->lock);
			eng_progress_report(rc, 0);
			pthread_mutex_lock(&rc->lock);
			continue;
		}
		pthread_cond_wait(&rc->cond, &rc->lock);
	}
	pthread_mutex_unlock(&rc->lock);
}
