/*
 * be_test.c - a backend of the test build only (-DRL_TEST_HOOKS): each
 * read done by pread(2) as it is queued, its completion handed back at
 * the next reap. It proves that a backend is this one file and one line
 * of backends.c: tests load through it (backend id 90, ENG_TEST) on every
 * path. Never chosen by RL_BACKEND_AUTO.
 */
#ifdef RL_TEST_HOOKS
#include <errno.h>
#include <unistd.h>

#include "eng_int.h"

struct tb {
	struct eng_req **done;  /* finished, not yet reaped */
	unsigned n, cap;
};

static int tb_setup(struct be *be)
{
	struct tb *t = cm_calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->cap = be->w->qd;
	t->done = cm_calloc(t->cap ? t->cap : 1, sizeof(*t->done));
	if (!t->done) {
		cm_free(t);
		return -ENOMEM;
	}
	be->priv = t;
	return 0;
}

static int tb_queue(struct be *be, struct eng_req *q)
{
	struct tb *t = be->priv;
	ssize_t n;

	if (t->n == t->cap)
		return -EBUSY;   /* the worker never queues more than qd */
	do
		n = pread(eng_req_fd(q, be->run->cx.files + q->r.file), q->dst + q->io_pos, q->io_len, (off_t)(q->r.off + q->io_pos));
	while (n < 0 && errno == EINTR);
	q->res = n < 0 ? -errno : (int)n;
	t->done[t->n++] = q;
	return 0;
}

static int tb_commit(struct be *be)
{
	return 0;
}

static int tb_reap(struct be *be, struct eng_req **out, unsigned max, int wait)
{
	struct tb *t = be->priv;
	unsigned n = t->n < max ? t->n : max;

	for (unsigned i = 0; i < n; i++)
		out[i] = t->done[i];
	for (unsigned i = n; i < t->n; i++)
		t->done[i - n] = t->done[i];
	t->n -= n;
	return (int)n;
}

static void tb_wake(struct be *be)
{
}

static void tb_teardown(struct be *be)
{
	struct tb *t = be->priv;

	if (t)
		cm_free(t->done);
	cm_free(t);
	be->priv = NULL;
}

const struct be_ops eng_test_ops = {
	.version = ENG_BE_OPS_VERSION,
	.id = ENG_TEST,
	.name = "test",
	.caps = 0,
	.auto_order = 1,
	.setup = tb_setup,
	.queue = tb_queue,
	.commit = tb_commit,
	.reap = tb_reap,
	.wake = tb_wake,
	.teardown = tb_teardown,
};
#endif /* RL_TEST_HOOKS */
