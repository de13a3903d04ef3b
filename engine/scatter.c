/*
 * scatter.c - what a worker does with a read it reaped: copies bounce
 * reads into the staging areas (strided runs for inner-dimension shards),
 * counts shard bytes and fires on_shard for each shard it completes.
 *
 * Shards are filled by several workers at once: each adds its bytes with
 * one atomic add, and the worker whose add reaches the shard's size fires
 * on_shard, under cb_lock so that the runtime never sees two calls at once.
 */
#include <string.h>

#include "eng_int.h"

static void land(struct eng_worker *w, const struct rl_copy *c, uint64_t bytes)
{
	struct eng_run *rc = w->run;
	const struct eng_job *job = rc->job;
	uint64_t done;

	/* Nothing landed, nothing to report: a zero-byte shard is reported
	 * once, at the end of a successful run. */
	if (!job->shard_bytes || !bytes)
		return;
	/* acq_rel: release publishes our copies into the shard; acquire
	 * makes every other worker's copies visible to the one that fires
	 * (and, through on_shard, to the runtime). */
	done = atomic_fetch_add_explicit(rc->shard_done + c->shard, bytes,
					 memory_order_acq_rel) + bytes;
	if (done != job->shard_bytes[c->shard] || !job->on_shard)
		return;
	pthread_mutex_lock(&rc->cb_lock);
	/* After a failure no shard is reported (it may be complete, but the
	 * run's contract is: only shards reported before the failure). */
	if (!eng_failed(rc))
		job->on_shard(job->user, c->shard);
	pthread_mutex_unlock(&rc->cb_lock);
}

static void copy_runs(uint8_t *dst, const uint8_t *src, const struct rl_copy *c)
{
	if (c->src_stride == c->len) {
		/* contiguous runs: one copy of them all */
		memcpy(dst, src, (size_t)c->len * c->count);
		return;
	}
	for (uint32_t k = 0; k < c->count; k++) {
		memcpy(dst, src, c->len);
		dst += c->len;
		src += c->src_stride;
	}
}

void eng_scatter(struct eng_worker *w, const struct eng_req *q)
{
	const struct eng_job *job = w->run->job;
	const struct rl_copy *c = job->copies + q->r.first_copy;
	uint64_t t0 = q->buf >= 0 ? rl_now_ns() : 0;

	for (uint32_t i = 0; i < q->r.ncopies; i++, c++) {
		uint64_t bytes = (uint64_t)c->len * c->count;

		if (q->buf >= 0 && bytes)
			copy_runs(job->staging[c->dev] + c->dst, q->dst + c->src, c);
		land(w, c, bytes);
	}
	if (t0)
		w->scatter_ns += rl_now_ns() - t0;
}
