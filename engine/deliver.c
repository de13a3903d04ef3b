/*
 * deliver.c - where the engine meets the job's sink (sink.h): a worker has
 * the sink prepare the destinations of the reads it claims, hands the
 * copies of a bounce read it reaped to the sink, counts shard bytes and
 * fires on_shard for each shard it completes.
 *
 * Shards are filled by several workers at once: each adds its bytes with
 * one atomic add, and the worker whose add reaches the shard's size fires
 * on_shard, under cb_lock so that the runtime never sees two calls at once.
 */
#include "eng_int.h"

/* Has the sink prepare every destination of r: direct reads land there
 * from the kernel (the read's length), bounce copies from this worker. */
void eng_prepare(struct eng_worker *w, const struct cm_read *r)
{
	const struct eng_job *job = w->run->b.job;
	const struct eng_sink *sink = job->sink;
	const struct cm_copy *c = job->copies + r->first_copy;
	uint64_t t0 = cm_now_ns();

	/* A direct read's copies tile one staging span: prepared as one. */
	if (r->flags & CM_READ_DIRECT)
		sink->ops->prepare(sink->state, w->id, c, r->len);
	for (uint32_t k = 0; k < r->ncopies && !(r->flags & CM_READ_DIRECT); k++, c++) {
		uint64_t n = cm_copy_bytes(c);

		if (n)
			sink->ops->prepare(sink->state, w->id, c, n);
	}
	w->st.prepare_seconds += (cm_now_ns() - t0) / 1e9;
}

void eng_prepare_flush(struct eng_worker *w)
{
	const struct eng_sink *sink = w->run->b.job->sink;
	uint64_t t0;

	if (!w->prefault || !sink->ops->prepare_flush)
		return;
	t0 = cm_now_ns();
	sink->ops->prepare_flush(sink->state, w->id);
	w->st.prepare_seconds += (cm_now_ns() - t0) / 1e9;
}

static void land(struct eng_worker *w, const struct cm_copy *c, uint64_t bytes)
{
	struct eng_run *rc = w->run;
	const struct eng_job *job = rc->b.job;
	const struct eng_sink *sink = job->sink;
	uint64_t done;

	/* Nothing landed, nothing to report: a zero-byte shard is reported
	 * once, at the end of a successful run. */
	if (!job->shard_bytes || !bytes)
		return;
	/* acq_rel: release publishes our copies into the shard; acquire
	 * makes every other worker's copies visible to the one that fires
	 * (and, through on_shard, to the runtime). */
	done = atomic_fetch_add_explicit(rc->b.shard_done + c->shard, bytes,
					 memory_order_acq_rel) + bytes;
	if (done != job->shard_bytes[c->shard] ||
	    (!job->on_shard && !sink->ops->shard_done))
		return;
	pthread_mutex_lock(&rc->b.cb_lock);
	/* After a failure no shard is reported (it may be complete, but the
	 * run's contract is: only shards reported before the failure). */
	if (!eng_failed(&rc->b)) {
		if (sink->ops->shard_done)
			sink->ops->shard_done(sink->state, c->shard);
		if (job->on_shard)
			job->on_shard(job->user, c->shard);
	}
	pthread_mutex_unlock(&rc->b.cb_lock);
}

/* Counts the copies of read r towards their shards: they landed. */
static void land_read(struct eng_worker *w, const struct cm_read *r)
{
	const struct cm_copy *c = w->run->b.job->copies + r->first_copy;

	for (uint32_t i = 0; i < r->ncopies; i++, c++)
		land(w, c, cm_copy_bytes(c));
}

/* Hands a bounce read's copies to the sink; 0, or the sink's error
 * (the run failed). */
static int hand_over(struct eng_worker *w, const struct eng_req *q)
{
	struct eng_run *rc = w->run;
	const struct eng_sink *sink = rc->b.job->sink;
	const struct cm_copy *c = rc->b.job->copies + q->r.first_copy;
	struct cm_err e = { 0, "" };
	int ret = 0;

	for (uint32_t i = 0; i < q->r.ncopies && ret == 0; i++, c++)
		if (c->count && c->len)
			ret = sink->ops->copy(sink->state, w->id, c, q->dst, &e);
	if (ret < 0)
		eng_fail(&rc->b, ret, "%s: read at offset %llu: %s sink: %s",
			 rc->cx.files[q->r.file].path, (unsigned long long)q->r.off,
			 sink->ops->name, e.msg);
	return ret;
}

/* Fences the copies just handed over (ret: how that went) and holds q's
 * buffer until a wait covers them. */
static int hold(struct eng_worker *w, struct eng_req *q, int ret)
{
	struct eng_run *rc = w->run;
	const struct eng_sink *sink = rc->b.job->sink;
	struct eng_held *h = w->held + (w->held_head + w->nheld) % w->pool.nbuf;
	struct cm_err e = { 0, "" };

	h->r = q->r;
	h->buf = q->buf;
	h->ticket = 0;
	if (ret == 0)
		ret = sink->ops->fence(sink->state, w->id, &h->ticket, &e);
	if (ret < 0 && !eng_failed(&rc->b))
		eng_fail(&rc->b, ret, "%s sink: fence: %s", sink->ops->name, e.msg);
	/* Held even after a failure: the sink may read the copies it took
	 * until its finish. */
	w->nheld++;
	q->buf = -1;
	return ret;
}

int eng_scatter(struct eng_worker *w, struct eng_req *q)
{
	uint64_t t0;
	int ret;

	if (q->buf < 0) { /* a direct read: its bytes are where they go */
		land_read(w, &q->r);
		return 0;
	}
	t0 = cm_now_ns();
	ret = hand_over(w, q);
	if (w->async)
		ret = hold(w, q, ret);
	else if (ret == 0)
		land_read(w, &q->r);
	w->st.scatter_seconds += (cm_now_ns() - t0) / 1e9;
	return ret;
}

void eng_release(struct eng_worker *w, int all)
{
	struct eng_run *rc = w->run;
	const struct eng_sink *sink = rc->b.job->sink;
	struct cm_err e = { 0, "" };
	uint64_t t0 = cm_now_ns(), upto;
	int ok, ret;

	if (!w->nheld)
		return;
	upto = w->held[(w->held_head + (all ? w->nheld - 1 : 0)) % w->pool.nbuf].ticket;
	ok = !eng_failed(&rc->b);
	if (ok && (ret = sink->ops->wait(sink->state, w->id, upto, &e)) < 0) {
		eng_fail(&rc->b, ret, "%s sink: %s", sink->ops->name, e.msg);
		ok = 0;
	}
	/* Tickets of one worker increase: every buffer up to upto is free. */
	while (w->nheld && (!ok || w->held[w->held_head].ticket <= upto)) {
		struct eng_held *h = w->held + w->held_head;

		if (ok)
			land_read(w, &h->r);
		w->free_bufs[w->nfree_bufs++] = h->buf;
		w->held_head = (w->held_head + 1) % w->pool.nbuf;
		w->nheld--;
	}
	w->st.scatter_seconds += (cm_now_ns() - t0) / 1e9;
}

int eng_sink_finish(struct eng_run *rc, int ret)
{
	const struct eng_sink *sink = rc->b.job ? rc->b.job->sink : NULL;
	struct cm_err e = { 0, "" };
	int fin;

	if (!sink || !eng_sink_ok(sink) || !sink->ops->finish)
		return ret;
	fin = sink->ops->finish(sink->state, ret == 0, &e);
	if (ret == 0 && fin < 0)
		return cm_err_set(rc->b.e, fin, "%s sink: %s", sink->ops->name, e.msg);
	return ret;
}
