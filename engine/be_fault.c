/*
 * be_fault.c - a backend wrapper for tests (SQLite's habit), in test
 * builds only (-DRL_TEST_HOOKS, hooks.c): the nth read
 * submission of the run (all workers together) fails with EIO or another
 * errno, comes back short, or fails with EAGAIN; or
 * setup fails with EPERM as when io_uring is disabled; or the run hits a
 * hard commit/reap error with reads in the kernel. Everything else goes
 * to the wrapped backend unchanged.
 */
#include <errno.h>

#include "eng_int.h"
#include "hooks.h"

struct fault {
	int hard;                 /* ENG_FAULT_HARD armed: commit and reap fail */
	struct eng_req *fake;     /* synthesized completions, owner-only */
	struct eng_req *cut;      /* ENG_FAULT_SHORT_ODD: result to cut */
};

static int fault_setup(struct be *be)
{
	struct fault *f;
	int ret;

	if (be->run->cx.hooks.set.fault_kind == ENG_FAULT_SETUP)
		return -EPERM;
	f = cm_calloc(1, sizeof(*f));
	if (!f)
		return -ENOMEM;
	be->inner->run = be->run;
	be->inner->w = be->w;
	ret = be->inner->ops->setup(be->inner);
	if (ret < 0) {
		cm_free(f);
		return ret;
	}
	be->priv = f;
	return 0;
}

static int fault_queue(struct be *be, struct eng_req *q)
{
	struct fault *f = be->priv;
	const struct eng_file *file = be->run->cx.files + q->r.file;
	const struct eng_hooks *h = &be->run->cx.hooks.set;
	/* Relaxed: the submissions of all workers get distinct numbers; which
	 * worker draws the nth does not matter. */
	uint64_t seq = atomic_fetch_add_explicit(&be->run->cx.hooks.fault_seq, 1,
						 memory_order_relaxed);
	uint32_t len;

	if (h->fault_kind == ENG_FAULT_EAGAIN_ALL ? seq < h->fault_nth : seq != h->fault_nth)
		return be->inner->ops->queue(be->inner, q);
	switch (h->fault_kind) {
	case ENG_FAULT_HARD:
		f->hard = 1;
		return be->inner->ops->queue(be->inner, q);
	case ENG_FAULT_EIO:
	case ENG_FAULT_EAGAIN:
	case ENG_FAULT_EAGAIN_ALL:
		q->res = h->fault_kind == ENG_FAULT_EIO ? -h->fault_errno : -EAGAIN;
		q->next = f->fake;
		f->fake = q;
		return 0;
	case ENG_FAULT_SHORT:
		/* Half the read, on the descriptor's alignment, as a device
		 * might return at a boundary. */
		len = (uint32_t)cm_align_down(q->io_len / 2, q->direct ? file->align : 1);
		if (len)
			q->io_len = len;
		return be->inner->ops->queue(be->inner, q);
	case ENG_FAULT_SHORT_ODD:
		f->cut = q;
		return be->inner->ops->queue(be->inner, q);
	default:
		return be->inner->ops->queue(be->inner, q);
	}
}

static int fault_commit(struct be *be)
{
	struct fault *f = be->priv;
	int ret = be->inner->ops->commit(be->inner);

	return f->hard ? -ENOMEM : ret;
}

static int fault_reap(struct be *be, struct eng_req **out, unsigned max, int wait)
{
	struct fault *f = be->priv;
	unsigned got = 0;

	while (f->fake && got < max) {
		out[got++] = f->fake;
		f->fake = f->fake->next;
	}
	if (got)
		return (int)got;
	int n;

	if (f->hard)
		return -ENOMEM;
	n = be->inner->ops->reap(be->inner, out, max, wait);
	/* A short result ending off the alignment (as at end of file): the
	 * engine resubmits from an aligned position before it. */
	for (int i = 0; i < n; i++) {
		if (out[i] == f->cut) {
			f->cut = NULL;
			if (out[i]->res > 2)
				out[i]->res = (out[i]->res / 2) | 1;
		}
	}
	return n;
}

static void fault_wake(struct be *be)
{
	be->inner->ops->wake(be->inner);
}

static void fault_teardown(struct be *be)
{
	be->inner->ops->teardown(be->inner);
	cm_free(be->priv);
	be->priv = NULL;
}

const struct be_ops eng_fault_ops = {
	.version = ENG_BE_OPS_VERSION,
	.name = "fault",   /* a wrapper: no id, never in the table */
	.setup = fault_setup,
	.queue = fault_queue,
	.commit = fault_commit,
	.reap = fault_reap,
	.wake = fault_wake,
	.teardown = fault_teardown,
};
