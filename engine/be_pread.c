/*
 * be_pread.c - the portable backend: a pool of threads calling pread(2),
 * one request each at a time. It needs nothing of the kernel beyond POSIX,
 * so it is the last fallback, and it serves buffered files as well as
 * O_DIRECT ones. Each worker has its own pool, one thread per read it may
 * have in flight (RL_OPT_THREADS, when set, caps the threads of all
 * workers together). Requests travel through two lists under one mutex: queued
 * (worker -> readers) and finished (readers -> worker).
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "eng_int.h"

struct pr {
	pthread_mutex_t lock;     /* guards both lists and the flags */
	pthread_cond_t work;      /* readers wait for queued requests */
	pthread_cond_t done;      /* the worker waits for finished ones */
	struct eng_req *todo, *todo_tail;
	struct eng_req *fin;      /* finished, LIFO (order is irrelevant) */
	struct eng_req *staged;   /* queued by the worker, not yet committed */
	int quit, woken;
	unsigned nthreads;
	pthread_t *threads;
};

/* A read's own priority (r.ioprio) for this reader thread, as ioprio_set
 * (IOPRIO_WHO_PROCESS of the calling thread) sets it: 0, or -errno. *cur
 * is the thread's priority now (0: as it started, nothing to change). */
static int reader_prio(uint32_t want, uint32_t *cur)
{
	if (want == *cur)
		return 0;
	if (syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, (int)want) < 0)
		return -errno;
	*cur = want;
	return 0;
}

static void *reader(void *arg)
{
	struct be *be = arg;
	struct pr *p = be->priv;
	const struct eng_file *files = be->run->cx.files;
	uint32_t prio = 0;

	pthread_mutex_lock(&p->lock);
	for (;;) {
		struct eng_req *q;
		ssize_t n;

		while (!p->todo && !p->quit)
			pthread_cond_wait(&p->work, &p->lock);
		if (!p->todo)
			break;
		q = p->todo;
		p->todo = q->next;
		if (!p->todo)
			p->todo_tail = NULL;
		pthread_mutex_unlock(&p->lock);

		q->res = reader_prio(q->r.ioprio, &prio);
		if (q->res == 0) {
			do
				n = pread(eng_req_fd(q, files + q->r.file), q->dst + q->io_pos,
					  q->io_len, (off_t)(q->r.off + q->io_pos));
			while (n < 0 && errno == EINTR);
			q->res = n < 0 ? -errno : (int)n;
		}

		pthread_mutex_lock(&p->lock);
		q->next = p->fin;
		p->fin = q;
		pthread_cond_signal(&p->done);
	}
	pthread_mutex_unlock(&p->lock);
	return NULL;
}

static void pr_teardown(struct be *be)
{
	struct pr *p = be->priv;

	if (!p)
		return;
	pthread_mutex_lock(&p->lock);
	p->quit = 1;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	/* Readers finish the request in hand first: nothing is left in the
	 * kernel when teardown returns. */
	for (unsigned i = 0; i < p->nthreads; i++)
		pthread_join(p->threads[i], NULL);
	pthread_cond_destroy(&p->done);
	pthread_cond_destroy(&p->work);
	pthread_mutex_destroy(&p->lock);
	cm_free(p->threads);
	cm_free(p);
	be->priv = NULL;
}

static int pr_setup(struct be *be)
{
	const struct eng_run *rc = be->run;
	unsigned nw = rc->cx.nworkers, qd = be->w->qd;
	/* RL_OPT_THREADS counts reader threads of all workers together */
	unsigned want = rc->cx.o->threads ? (rc->cx.o->threads + nw - 1) / nw : qd;
	struct pr *p = cm_calloc(1, sizeof(*p));

	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	pthread_cond_init(&p->work, NULL);
	pthread_cond_init(&p->done, NULL);
	be->priv = p;
	want = CM_MIN(want, qd);
	p->threads = cm_calloc(want, sizeof(*p->threads));
	if (!p->threads) {
		pr_teardown(be);
		return -ENOMEM;
	}
	for (; p->nthreads < want; p->nthreads++) {
		int ret = eng_thread_start(p->threads + p->nthreads, ENG_READER_STACK, reader, be);

		if (ret) {
			if (p->nthreads)
				break; /* fewer threads still work */
			pr_teardown(be);
			return -ret;
		}
	}
	return 0;
}

static int pr_queue(struct be *be, struct eng_req *q)
{
	struct pr *p = be->priv;

	/* Owner-only list until commit. */
	q->next = p->staged;
	p->staged = q;
	return 0;
}

static int pr_commit(struct be *be)
{
	struct pr *p = be->priv;
	struct eng_req *q, *nx;

	if (!p->staged)
		return 0;
	pthread_mutex_lock(&p->lock);
	for (q = p->staged; q; q = nx) {
		nx = q->next;
		q->next = NULL;
		if (p->todo_tail)
			p->todo_tail->next = q;
		else
			p->todo = q;
		p->todo_tail = q;
	}
	p->staged = NULL;
	pthread_cond_broadcast(&p->work);
	pthread_mutex_unlock(&p->lock);
	return 0;
}

static int pr_reap(struct be *be, struct eng_req **out, unsigned max, int wait)
{
	struct pr *p = be->priv;
	unsigned got = 0;

	pthread_mutex_lock(&p->lock);
	while (wait && !p->fin && !p->woken)
		pthread_cond_wait(&p->done, &p->lock);
	p->woken = 0;
	while (p->fin && got < max) {
		out[got++] = p->fin;
		p->fin = p->fin->next;
	}
	pthread_mutex_unlock(&p->lock);
	return (int)got;
}

static void pr_wake(struct be *be)
{
	struct pr *p = be->priv;

	pthread_mutex_lock(&p->lock);
	p->woken = 1;
	pthread_cond_signal(&p->done);
	pthread_mutex_unlock(&p->lock);
}

const struct be_ops eng_pread_ops = {
	.version = ENG_BE_OPS_VERSION,
	.id = ENG_PREAD,
	.name = "pread",
	.caps = ENG_CAP_IOPRIO,
	.setup = pr_setup,
	.queue = pr_queue,
	.commit = pr_commit,
	.reap = pr_reap,
	.wake = pr_wake,
	.teardown = pr_teardown,
};
