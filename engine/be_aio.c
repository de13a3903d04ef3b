/*
 * be_aio.c - the libaio backend: O_DIRECT io_submit/io_getevents, one iocb
 * per request slot, submitted and reaped in batches. libaio has no way to
 * post a wake-up in the queue that works everywhere, so a blocking reap
 * waits at most 1 ms at a time while the completion thread holds what the
 * owner needs (wake() sets a flag the next wait sees).
 */
#include <errno.h>
#include <libaio.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "eng_int.h"

struct aio {
	io_context_t ctx;
	int ctx_ok;
	struct iocb *iocbs;       /* one per request slot */
	struct iocb **pending;    /* queued, not yet submitted */
	unsigned npending;
	struct io_event *events;
	unsigned nevents;
	atomic_int woken;         /* relaxed: a hint that shortens one wait */
};

static void aio_teardown(struct be *be)
{
	struct aio *a = be->priv;

	if (!a)
		return;
	if (a->ctx_ok)
		io_destroy(a->ctx); /* waits for what is in flight */
	rl_free(a->iocbs);
	rl_free(a->pending);
	rl_free(a->events);
	rl_free(a);
	be->priv = NULL;
}

static int aio_setup(struct be *be)
{
	struct eng_run *rc = be->run;
	struct aio *a = rl_calloc(1, sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	be->priv = a;
	a->iocbs = rl_calloc(rc->nreqs, sizeof(*a->iocbs));
	a->pending = rl_calloc(rc->qd, sizeof(*a->pending));
	a->nevents = RL_MIN(rc->qd, 64u);
	a->events = rl_calloc(a->nevents, sizeof(*a->events));
	if (!a->iocbs || !a->pending || !a->events) {
		aio_teardown(be);
		return -ENOMEM;
	}
	ret = io_setup((int)rc->qd, &a->ctx);
	if (ret < 0) {
		aio_teardown(be);
		return ret;
	}
	a->ctx_ok = 1;
	return 0;
}

static int aio_queue(struct be *be, struct eng_req *q)
{
	struct aio *a = be->priv;
	struct iocb *cb = a->iocbs + q->slot;
	const struct eng_file *f = be->run->files + q->r.file;

	io_prep_pread(cb, eng_req_fd(q, f), q->dst + q->io_pos, q->io_len,
		      (long long)(q->r.off + q->io_pos));
	cb->data = q;
	a->pending[a->npending++] = cb;
	return 0;
}

static int aio_commit(struct be *be)
{
	struct aio *a = be->priv;
	unsigned done = 0;

	while (done < a->npending) {
		int ret = io_submit(a->ctx, (long)(a->npending - done), a->pending + done);

		if (ret > 0) {
			done += (unsigned)ret;
			continue;
		}
		if (ret == -EAGAIN || ret == -EINTR || ret == 0) {
			/* Resubmitted by the next commit after a reap. */
			memmove(a->pending, a->pending + done,
				(a->npending - done) * sizeof(*a->pending));
			a->npending -= done;
			return 0;
		}
		/* The rest was never submitted: fail those requests. */
		for (unsigned i = done; i < a->npending; i++)
			((struct eng_req *)a->pending[i]->data)->res = ret;
		memmove(a->pending, a->pending + done,
			(a->npending - done) * sizeof(*a->pending));
		a->npending -= done;
		return 0;
	}
	a->npending = 0;
	return 0;
}

static int aio_reap(struct be *be, struct eng_req **out, unsigned max, int wait)
{
	struct aio *a = be->priv;
	struct timespec zero = { 0, 0 }, ms = { 0, 1000000 };
	unsigned got = 0;
	int ret;

	/* Requests io_submit refused outright complete here with its error;
	 * those it only deferred (-EAGAIN) are submitted again first. */
	for (unsigned i = 0; i < a->npending && got < max;) {
		struct eng_req *q = a->pending[i]->data;

		if (q->res < 0) {
			out[got++] = q;
			a->pending[i] = a->pending[--a->npending];
		} else {
			i++;
		}
	}
	if (a->npending)
		aio_commit(be);
	if (got)
		return (int)got;
	if (max > a->nevents)
		max = a->nevents;
	for (;;) {
		int woken = atomic_exchange_explicit(&a->woken, 0, memory_order_relaxed);

		ret = io_getevents(a->ctx, wait && !woken ? 1 : 0, (long)max, a->events,
				   wait && !woken ? &ms : &zero);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			return ret;
		if (ret > 0 || !wait || woken)
			break;
		/* 1 ms passed: the completion thread may have freed what we
		 * need, so let the owner look. */
		break;
	}
	for (int i = 0; i < ret; i++) {
		struct eng_req *q = a->events[i].data;
		long res = (long)a->events[i].res;

		q->res = res < 0 ? (int)res : (int)(uint32_t)res;
		out[got++] = q;
	}
	return (int)got;
}

static void aio_wake(struct be *be)
{
	struct aio *a = be->priv;

	atomic_store_explicit(&a->woken, 1, memory_order_relaxed);
}

const struct be_ops eng_aio_ops = {
	.name = "libaio",
	.setup = aio_setup,
	.queue = aio_queue,
	.commit = aio_commit,
	.reap = aio_reap,
	.wake = aio_wake,
	.teardown = aio_teardown,
};
