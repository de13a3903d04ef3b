/*
 * progress.c - on_progress runs on the thread that called eng_run (worker
 * 0): every worker adds the bytes it finished to one counter and, when it
 * crosses a step (about 1/128 of the total), worker 0 reports right away or
 * another worker signals the calling thread, which reports while it waits
 * for the others to finish. A non-zero return cancels the run.
 */
#include "eng_int.h"

void eng_progress_report(struct eng_run *rc, int final)
{
	const struct eng_job *job = rc->job;
	/* Relaxed: a counter for reporting; after the join it is exact. */
	uint64_t done = atomic_load_explicit(&rc->done_bytes, memory_order_relaxed);

	if (!job->on_progress || eng_failed(rc) || done == rc->progress_last)
		return;
	if (!final && done < rc->progress_next && done != job->total_bytes)
		return;
	rc->progress_last = done;
	rc->progress_next = done + rc->progress_step;
	if (job->on_progress(job->user, done, job->total_bytes))
		eng_fail(rc, RL_E_CANCELED, "load canceled by the progress callback at %llu of %llu bytes",
			 (unsigned long long)done, (unsigned long long)job->total_bytes);
}

void eng_progress_wait(struct eng_run *rc)
{
	pthread_mutex_lock(&rc->lock);
	while (rc->running) {
		if (rc->progress_due) {
			rc->progress_due = 0;
			pthread_mutex_unlock(&rc->lock);
			eng_progress_report(rc, 0);
			pthread_mutex_lock(&rc->lock);
			continue;
		}
		pthread_cond_wait(&rc->cond, &rc->lock);
	}
	pthread_mutex_unlock(&rc->lock);
}
