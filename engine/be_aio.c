/*
 * be_aio.c - the libaio backend: O_DIRECT io_submit/io_getevents, one iocb
 * per request slot, submitted and reaped in batches. Every iocb signals an
 * eventfd on completion (io_set_eventfd, IOCB_FLAG_RESFD), and wake()
 * writes the same eventfd, so a blocking reap sleeps in poll() until a read
 * completes or another worker gives back the limiter bytes this one needs, rather
 * than polling io_getevents (which another thread cannot interrupt).
 * One context per worker.
 */
#include <errno.h>
#include <libaio.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "eng_int.h"

/* linux/aio_abi.h, which cannot be included beside libaio.h (both
 * define struct iocb) */
#ifndef IOCB_FLAG_IOPRIO
#define IOCB_FLAG_IOPRIO (1u << 1)
#endif

struct aio {
	io_context_t ctx;
	int ctx_ok;
	struct iocb *iocbs;       /* one per request slot */
	struct iocb **pending;    /* queued, not yet submitted */
	unsigned npending;
	struct io_event *events;
	unsigned nevents;
	int efd;                  /* completions and wake-ups */
	unsigned submitted;       /* iocbs in the kernel */
	uint64_t refused_since;   /* first of consecutive EAGAIN refusals, 0: none */
};

/* io_submit refusing everything (-EAGAIN: the aio request limit or kernel
 * memory) is retried after short sleeps while nothing of ours is in the
 * kernel to wake us, for this long at most. */
#define AIO_BACKOFF_MS 1
#define AIO_REFUSE_NS (1000ull * 1000 * 1000)

static void aio_teardown(struct be *be)
{
	struct aio *a = be->priv;

	if (!a)
		return;
	if (a->ctx_ok)
		io_destroy(a->ctx); /* waits for what is in flight */
	if (a->efd >= 0)
		close(a->efd);
	cm_free(a->iocbs);
	cm_free(a->pending);
	cm_free(a->events);
	cm_free(a);
	be->priv = NULL;
}

static int aio_setup(struct be *be)
{
	const struct eng_worker *w = be->w;
	struct aio *a = cm_calloc(1, sizeof(*a));
	int ret;

	if (!a)
		return -ENOMEM;
	be->priv = a;
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (a->efd < 0) {
		ret = -errno;
		aio_teardown(be);
		return ret;
	}
	a->iocbs = cm_calloc(w->nreqs, sizeof(*a->iocbs));
	a->pending = cm_calloc(w->qd, sizeof(*a->pending));
	a->nevents = CM_MIN(w->qd, 64u);
	a->events = cm_calloc(a->nevents, sizeof(*a->events));
	if (!a->iocbs || !a->pending || !a->events) {
		aio_teardown(be);
		return -ENOMEM;
	}
	ret = io_setup((int)w->qd, &a->ctx);
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
	const struct eng_file *f = be->run->cx.files + q->r.file;

	io_prep_pread(cb, eng_req_fd(q, f), q->dst + q->io_pos, q->io_len,
		      (long long)(q->r.off + q->io_pos));
	io_set_eventfd(cb, a->efd); /* after prep, which clears the iocb */
	if (q->r.ioprio) {
		cb->u.c.flags |= IOCB_FLAG_IOPRIO;
		cb->aio_reqprio = (short)q->r.ioprio;
	}
	cb->data = q;
	a->pending[a->npending++] = cb;
	return 0;
}

static int aio_commit(struct be *be)
{
	struct aio *a = be->priv;
	unsigned done = 0;

	while (done < a->npending) {
		struct eng_run *rc = be->run;
		uint64_t now;
		int ret;

		if (eng_hook_aio_refuse(rc)) {
			ret = -EAGAIN;
		} else {
			ret = io_submit(a->ctx, (long)(a->npending - done), a->pending + done);
		}
		if (ret > 0) {
			done += (unsigned)ret;
			a->submitted += (unsigned)ret;
			a->refused_since = 0;
			continue;
		}
		if (ret == -EAGAIN || ret == -EINTR || ret == 0) {
			/* Resubmitted by the next commit after a reap (which
			 * backs off while nothing is in the kernel). */
			memmove(a->pending, a->pending + done,
				(a->npending - done) * sizeof(*a->pending));
			a->npending -= done;
			now = cm_now_ns();
			if (!a->refused_since || done)
				a->refused_since = now;
			else if (now - a->refused_since > AIO_REFUSE_NS)
				return -EAGAIN;
			return 0;
		}
		/* io_submit stops at the first iocb it refuses: that one
		 * fails with the error; the rest were never looked at and
		 * are submitted again by the next commit. */
		((struct eng_req *)a->pending[done]->data)->res = ret;
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
	struct timespec zero = { 0, 0 };
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
	if (a->npending) {
		ret = aio_commit(be);
		if (ret < 0)
			return ret;
	}
	if (got)
		return (int)got;
	if (max > a->nevents)
		max = a->nevents;
	do
		ret = io_getevents(a->ctx, 0, (long)max, a->events, &zero);
	while (ret == -EINTR);
	if (ret == 0 && wait) {
		/*
		 * Sleep until the eventfd counts a completion or a wake-up.
		 * Neither is lost: a completion after the io_getevents above
		 * or a wake() before this poll leaves the counter non-zero.
		 * After reading it, reap what is there and return even 0
		 * (a wake-up: the owner looks again; or a count whose events
		 * an earlier reap took: one extra turn of its loop).
		 */
		struct pollfd pfd = { .fd = a->efd, .events = POLLIN, .revents = 0 };
		/* Nothing in the kernel while io_submit defers reads: no
		 * completion will come; sleep briefly and submit again. */
		int timeout = a->npending && !a->submitted ? AIO_BACKOFF_MS : -1;
		uint64_t cnt;

		if (poll(&pfd, 1, timeout) < 0 && errno != EINTR)
			return -errno;
		if (read(a->efd, &cnt, sizeof(cnt)) < 0 && errno != EAGAIN)
			return -errno;
		do
			ret = io_getevents(a->ctx, 0, (long)max, a->events, &zero);
		while (ret == -EINTR);
	}
	if (ret < 0)
		return ret;
	a->submitted -= (unsigned)CM_MIN((unsigned)ret, a->submitted);
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
	uint64_t one = 1;

	if (write(a->efd, &one, sizeof(one)) < 0) {
		/* EAGAIN: the counter is at its maximum, already readable */
	}
}

const struct be_ops eng_aio_ops = {
	.version = ENG_BE_OPS_VERSION,
	.id = ENG_LIBAIO,
	.name = "libaio",
	.caps = ENG_CAP_IOPRIO | ENG_CAP_KERNEL_QUEUE,
	.setup = aio_setup,
	.queue = aio_queue,
	.commit = aio_commit,
	.reap = aio_reap,
	.wake = aio_wake,
	.teardown = aio_teardown,
};
