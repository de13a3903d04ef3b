/*
 * scatter.c - the completion thread: copies finished bounce reads into the
 * staging areas (strided runs for inner-dimension shards), counts shard
 * bytes and fires on_shard, then gives buffers, request slots and limiter
 * bytes back to the submitting thread.
 *
 * It is the only thread that touches shard_done, so shard accounting needs
 * no lock; everything it shares with the owner is under run->lock.
 */
#include <string.h>

#include "eng_int.h"

static void land(struct eng_run *rc, const struct rl_copy *c, uint64_t bytes)
{
	const struct eng_job *job = rc->job;

	/* Nothing landed, nothing to report: a zero-byte shard is reported
	 * once, at the end of a successful run. */
	if (!job->shard_bytes || !bytes)
		return;
	rc->shard_done[c->shard] += bytes;
	if (rc->shard_done[c->shard] == job->shard_bytes[c->shard] && job->on_shard)
		job->on_shard(job->user, c->shard);
}

/* Copies (when q went through a bounce buffer) and accounts one read. */
static void scatter_one(struct eng_run *rc, const struct eng_req *q)
{
	const struct eng_job *job = rc->job;
	const struct rl_copy *c = job->copies + q->r.first_copy;

	for (uint32_t i = 0; i < q->r.ncopies; i++, c++) {
		uint64_t bytes = (uint64_t)c->len * c->count;

		if (q->buf >= 0 && bytes) {
			const uint8_t *src = q->dst + c->src;
			uint8_t *dst = job->staging[c->dev] + c->dst;

			if (c->src_stride == c->len) {
				memcpy(dst, src, bytes);
			} else {
				for (uint32_t k = 0; k < c->count; k++) {
					memcpy(dst, src, c->len);
					dst += c->len;
					src += c->src_stride;
				}
			}
		}
		land(rc, c, bytes);
	}
}

static void give_back(struct eng_run *rc, struct eng_req *q)
{
	/* A direct read gave its limiter bytes back when it was reaped. */
	if (q->buf >= 0) {
		rc->free_bufs[rc->nfree_bufs++] = q->buf;
		rc->inflight -= q->r.len;
	}
	q->next = rc->free_reqs;
	rc->free_reqs = q;
}

void *eng_scatter_main(void *arg)
{
	struct eng_run *rc = arg;
	int failed;

	pthread_mutex_lock(&rc->lock);
	for (;;) {
		struct eng_req *batch, *q, *nx;
		int wake;

		while (!rc->q_head && !rc->stop)
			pthread_cond_wait(&rc->qcond, &rc->lock);
		if (!rc->q_head)
			break;
		batch = rc->q_head;
		rc->q_head = rc->q_tail = NULL;
		failed = rc->failed;
		pthread_mutex_unlock(&rc->lock);

		/* Each buffer goes back as soon as it is copied, so the
		 * owner can refill the queue while the rest of the batch is
		 * still being copied. */
		for (q = batch; q; q = nx) {
			nx = q->next;
			if (!failed) {
				uint64_t t0 = eng_now_ns();

				scatter_one(rc, q);
				rc->scatter_seconds += (eng_now_ns() - t0) / 1e9;
			}
			pthread_mutex_lock(&rc->lock);
			give_back(rc, q);
			failed = rc->failed;
			wake = rc->owner_in_kernel;
			rc->owner_in_kernel = 0;
			pthread_cond_signal(&rc->cond);
			if (wake) {
				/* Under the lock: the owner tears the backend
				 * down only after joining this thread, and
				 * clears the flag under the lock, so the
				 * backend is alive here. */
				rc->be->ops->wake(rc->be);
			}
			if (nx)
				pthread_mutex_unlock(&rc->lock);
		}
		/* here with the lock held, as the loop expects */
	}
	failed = rc->failed;
	pthread_mutex_unlock(&rc->lock);

	if (failed || !rc->job->shard_bytes)
		return NULL;
	/* Every read arrived: a shard still short means the plan did not
	 * cover it, which the owner reports; otherwise zero-byte shards are
	 * complete now. */
	for (size_t s = 0; s < rc->job->nshards; s++) {
		if (rc->shard_done[s] != rc->job->shard_bytes[s]) {
			rc->incomplete = s + 1;
			return NULL;
		}
	}
	if (rc->job->on_shard)
		for (size_t s = 0; s < rc->job->nshards; s++)
			if (rc->job->shard_bytes[s] == 0)
				rc->job->on_shard(rc->job->user, s);
	return NULL;
}
