/*
 * xfer_exec.c - the read-once executor (xfer_exec.h): each batch of
 * transfers read by the engine, moved by the transport, copied through
 * the destination sink.
 *
 *   set up    the batch's transfers, the plan of the payloads this
 *             process roots (the transfers pass), its buffer and the
 *             receive buffer;
 *   agree     every process can take its part (else nobody posts);
 *   receive   every receive posted (straight into the shard when one
 *             plain copy takes the whole payload, else into a buffer);
 *   read      the engine reads the rooted payloads on a thread of its
 *             own; the calling thread sends each (one per receiver) and
 *             copies it into this process's shards as soon as it is read,
 *             and has the transport progress meanwhile;
 *   answer    a payload not sent (its read failed) is sent anyway, so
 *             that every receive completes; then the transport's wait;
 *   copy      each received payload through the sink's copy (converting
 *             where the plan converts);
 *   agree     every process read, moved and copied its part; only then
 *             are the shards whose last bytes came reported (to an
 *             asynchronous sink, a device's, which reports each once in
 *             place).
 *
 * After the last batch every shard that transfers fill must be complete
 * (agreed too). Memory for bytes in transit: the batch's payloads, read
 * here or received here, which the planner keeps under its batch bytes;
 * one batch at a time.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "execute.h"
#include "transfers.h"
#include "xfer_exec.h"

/*
 * The batches' buffers, kept from one batch to the next (grown when a
 * batch needs more), as libringload_mpi's old loop keeps its own: mapped
 * afresh for each batch, every batch faulted its pages in again.
 */
struct xkeep {
	uint8_t *buf, *rbuf;        /* read here (huge pages), received here */
	uint64_t buf_cap, rbuf_cap;
};

/* One batch. */
struct xb {
	struct ex_xfer_exec *x;
	struct xkeep *keep;
	struct cm_err *e;
	uint64_t b;
	int me;
	struct pl_xfer_info *xi;    /* the batch's transfers this process takes part in */
	const uint8_t **src;        /* each one's payload bytes (read or received) */
	uint8_t *in_place;          /* 1: received straight into its one destination */
	uint8_t *done;              /* 1: rooted here, sent and copied into the shards */
	size_t n;
	struct pl_plan *bp;         /* the batch's reads */
	struct pl_exec bex;         /* bp's */
	struct ex_program prog;     /* bex's, built when it reads anything */
	int built;
	size_t *rooted;             /* payload of bp's shard r: xi[rooted[r]] */
	uint8_t *buf;               /* what they read */
	uint64_t buf_len;
	uint8_t *rbuf;              /* what is received */
	uint64_t rbuf_len;
	int terr;                   /* the transport's first failure */
	int cerr;                   /* a copy's failure (e set) */
	int complete;               /* progress said everything posted completed */
};

/*
 * The batch's reads run on a thread of their own while the calling thread
 * sends each payload as soon as the engine reports it read and has the
 * transport progress (its progress op) meanwhile: the transport's thread
 * stays the caller's (MPI_THREAD_FUNNELED), and a transport whose large
 * messages move only inside its calls (Open MPI's shared memory) moves
 * them while the disk reads. Without the overlap the executor took
 * 1.26-1.78 s where libringload_mpi's old loop took 0.55-1.46 s
 * (perf/mpi_bench.c, 2 ranks, 512 MiB).
 */
struct xrd {
	struct xb *q;
	struct ex_exec ee;
	struct cm_err e;            /* the reader's own failure */
	int ret;
	pthread_t th;
	pthread_mutex_t mu;         /* ready, nready and done's signal: pushed by the
				     * engine's workers and the reader */
	pthread_cond_t cv;          /* a payload read, or the reader done */
	size_t *ready, nready, taken;
	atomic_int done;            /* release: ret, e and ee's statistics written before */
	atomic_int cancel;          /* relaxed: a hint the engine polls */
};

/*
 * The calling thread sleeps until a payload is read or the reader ends
 * (the reader signals), but while the transport has posted work it wakes
 * after a bounded wait to call progress (a fragment per call): 20 us,
 * doubling to 1 ms while nothing is read. With nothing pending it waits
 * up to XF_IDLE_NS (a bound, not a poll: the reader's signal ends it).
 * Before, it napped and polled the same way whatever the transport had.
 */
#define XF_NAP_MIN_NS 20000L
#define XF_NAP_MAX_NS 1000000L
#define XF_IDLE_NS 100000000L

/*
 * A helper thread faults in the batch's destinations (the sink's prepare,
 * on a worker slot no engine worker uses) while the batch is read and
 * moved: without it the copies into fresh staging were mostly page
 * faults (0.37 s of 256 MiB, as long as the read and the move together).
 */
#define XF_PF_WORKER (ENG_MAX_WORKERS - 1)

struct xpf {
	const struct xb *q;
	pthread_t th;
	int started;
	atomic_int stop;            /* relaxed: a hint to end early */
};

/* Bytes transfers bring each shard, and have brought; the plan's
 * conversions by shard (NULL: none); the shards whose last bytes came in
 * this batch, reported once every process agreed. */
struct xs {
	uint64_t *want, *have;
	size_t nshards;
	const struct pl_convert *convert;
	uint8_t *listed;            /* 1: in fin (now or in an earlier batch) */
	size_t *fin, nfin;
	struct xkeep keep;
};

int ex_xfer_agree(const struct ex_transport *t, int status, const char *what,
		  struct cm_err *e)
{
	int st = status, ret = t->agree(t->user, &st);

	if (ret)
		return status ? status : cm_err_set(e, ret, "read once: %s: the transport's agreement failed (%d)",
						    what, ret);
	if (!st)
		return 0;
	if (status)             /* this process's own failure: e says why */
		return st;
	return cm_err_set(e, st < 0 ? st : -EIO, "read once: %s: another process failed (code %d)",
			  what, st);
}

static void xb_free(struct xb *q)
{
	if (q->built)
		ex_program_free(&q->prog);
	cm_free(q->xi);
	cm_free(q->src);
	cm_free(q->in_place);
	cm_free(q->done);
	cm_free(q->rooted);
	pl_plan_free(q->bp);
}

/* *p, of at least len bytes: the one kept if large enough, else a new
 * mapping (huge: the engine's staging, else small pages); NULL: none. */
static uint8_t *keep_get(uint8_t **p, uint64_t *cap, uint64_t len, int huge)
{
	if (*p && *cap >= len)
		return *p;
	eng_staging_free(*p, *cap);
	*p = NULL;
	*cap = 0;
	if (len > SIZE_MAX || !(*p = huge ? eng_staging_alloc((size_t)len) :
				      eng_buffer_alloc((size_t)len)))
		return NULL;
	*cap = len;
	return *p;
}

/*
 * Where received transfer x lands with no copy: its plain copies (by ex's
 * conversions) take the whole payload in order, each contiguous, onto one
 * span of one device's host memory the sink lets a write land in (sink
 * direct; tensors that neighbour in the file neighbour in staging); NULL:
 * into the receive buffer, then copied. A payload inside one tensor was
 * the only one received in place: 4% of the bytes of 3,008-byte tensors
 * (test_transport payloads_received_in_place).
 */
static uint8_t *landing(const struct eng_sink *d, const struct pl_xfer_info *x,
			const struct pl_exec *ex)
{
	const struct cm_copy *c = x->copies;
	uint64_t at = 0;

	if (!x->ncopies || !d->ops->direct)
		return NULL;
	for (size_t i = 0; i < x->ncopies; i++) {
		const struct cm_copy *ci = c + i;

		if (ci->op != CM_OP_PLAIN || ci->dev != c->dev || ci->dev >= d->ndevs ||
		    ci->shard >= ex->nshards ||
		    (ex->convert && ex->convert[ci->shard].from != ex->convert[ci->shard].to) ||
		    (ci->count > 1 && ci->src_stride != ci->len) || ci->src != at ||
		    ci->dst < c->dst || ci->dst - c->dst != at)
			return NULL;
		at += (uint64_t)ci->count * ci->len;
	}
	return at == x->length ? d->ops->direct(d->state, c, x->length) : NULL;
}

/* The batch's transfers; the received ones get their place in rbuf. */
static int collect(struct xb *q)
{
	size_t nx = pl_plan_nxfers(q->x->p);
	uint64_t total = 0;
	struct pl_exec ex;

	q->xi = cm_mallocarray(nx + 1, sizeof(*q->xi));
	q->src = cm_calloc(nx + 1, sizeof(*q->src));
	q->in_place = cm_calloc(nx + 1, 1);
	q->done = cm_calloc(nx + 1, 1);
	q->rooted = cm_calloc(nx + 1, sizeof(*q->rooted));
	if (!q->xi || !q->src || !q->in_place || !q->done || !q->rooted)
		return cm_err_set(q->e, -ENOMEM, "read once: out of memory");
	for (size_t k = 0; k < nx; k++) {
		pl_plan_xfer(q->x->p, k, &q->xi[q->n]);
		if (q->xi[q->n].batch == q->b)
			q->n++;
	}
	pl_plan_exec(q->x->p, &ex);
	for (size_t k = 0; k < q->n; k++)
		if (q->xi[k].root != q->me &&
		    (q->src[k] = landing(q->x->dst, &q->xi[k], &ex)))
			q->in_place[k] = 1;
	for (size_t k = 0; k < q->n; k++)
		if (q->xi[k].root != q->me && !q->in_place[k] &&
		    cm_add64(total, q->xi[k].length, &total))
			return cm_err_set(q->e, -ENOMEM, "read once: batch %llu: too large",
					  (unsigned long long)q->b);
	/* Small pages: no read lands here (eng_buffer_alloc says why). */
	if (total && !(q->rbuf = keep_get(&q->keep->rbuf, &q->keep->rbuf_cap, total, 0)))
		return cm_err_set(q->e, -ENOMEM,
				  "read once: out of memory for %llu bytes of received payloads",
				  (unsigned long long)total);
	q->rbuf_len = total;
	total = 0;
	for (size_t k = 0; k < q->n; k++)
		if (q->xi[k].root != q->me && !q->in_place[k]) {
			q->src[k] = q->rbuf + total;
			total += q->xi[k].length;
		}
	return 0;
}

/*
 * The batch's reads set up before anything moves: the plan of the
 * payloads this process roots, its buffer and program; each rooted
 * payload's place in the buffer. Shard r of the batch's plan is the r-th
 * payload rooted here, in the plan's transfer order (the transfers pass).
 */
static int xb_prepare(struct xb *q)
{
	struct ex_program_opts o = { 0 };
	size_t r = 0;
	int ret;

	if ((ret = ex_xfer_batch_plan(q->x->p, q->b, q->x->chunk, &q->bp, q->e)))
		return ret;
	pl_plan_exec(q->bp, &q->bex);
	for (size_t k = 0; k < q->n; k++)
		if (q->xi[k].root == q->me && r++ < q->bex.nshards)
			q->rooted[r - 1] = k;
	if (r != q->bex.nshards)
		return cm_err_set(q->e, RL_E_STATE, "read once: batch %llu: %zu payloads to read, %zu rooted",
				  (unsigned long long)q->b, q->bex.nshards, r);
	if (!r)
		return 0;
	q->buf_len = q->bex.staging_bytes[0];
	if (!(q->buf = keep_get(&q->keep->buf, &q->keep->buf_cap, q->buf_len, 1)))
		return cm_err_set(q->e, -ENOMEM, "read once: batch %llu: cannot map %llu bytes",
				  (unsigned long long)q->b, (unsigned long long)q->buf_len);
	if ((ret = ex_program_build(&q->prog, &q->bex, &o)) < 0)
		return cm_err_set(q->e, ret, "read once: batch %llu: building its program",
				  (unsigned long long)q->b);
	q->built = 1;
	for (r = 0; r < q->bex.nshards; r++)
		q->src[q->rooted[r]] = q->buf + q->bex.shards[r].offset;
	return 0;
}

static void *pf_main(void *arg)
{
	struct xpf *pf = arg;
	const struct eng_sink *d = pf->q->x->dst;

	for (size_t k = 0; k < pf->q->n; k++)
		for (size_t j = 0; j < pf->q->xi[k].ncopies; j++) {
			const struct cm_copy *c = &pf->q->xi[k].copies[j];

			if (atomic_load_explicit(&pf->stop, memory_order_relaxed))
				return NULL;
			if (c->dev < d->ndevs)
				d->ops->prepare(d->state, XF_PF_WORKER, c, (uint64_t)c->count * c->len);
		}
	d->ops->prepare_flush(d->state, XF_PF_WORKER);
	return NULL;
}

/* Starts faulting in q's destinations; without the ops or a thread,
 * nothing (the copies fault them in). */
static void pf_start(struct xpf *pf, const struct xb *q)
{
	const struct eng_sink_ops *o = q->x->dst->ops;

	pf->q = q;
	atomic_init(&pf->stop, 0);
	pf->started = o->prepare && o->prepare_flush && q->n &&
		      !pthread_create(&pf->th, NULL, pf_main, pf);
}

/* Waits for the helper (told to stop early when stop is set). */
static void pf_end(struct xpf *pf, int stop)
{
	if (!pf->started)
		return;
	if (stop)
		atomic_store_explicit(&pf->stop, 1, memory_order_relaxed);
	pthread_join(pf->th, NULL);
	pf->started = 0;
}

/* The transport's first failure is kept; later ones add nothing. */
static void t_failed(struct xb *q, int r)
{
	if (r && !q->terr)
		q->terr = r < 0 ? r : -EIO;
}

/* Posts every receive of the batch (also after a failed one: what was
 * posted completes at the wait). */
static void post_recvs(struct xb *q)
{
	const struct ex_transport *t = q->x->t;

	for (size_t k = 0; k < q->n; k++) {
		const struct pl_xfer_info *xi = &q->xi[k];

		if (xi->root == q->me)
			continue;
		t_failed(q, t->recv(t->user, xi->root, xi->index, (void *)q->src[k], xi->length));
		q->x->received += xi->length;
	}
}

/*
 * Copy c of a transfer (the planner's: the file's bytes) with the
 * operation of its shard's conversion, as the transform pass gives the
 * reads' copies (exec/transform.c): 0, or RL_E_DTYPE when its runs are
 * not whole elements (the planner cuts transfers on whole elements).
 */
static int convert_op(const struct pl_convert *cv, struct cm_copy *c, struct cm_err *e)
{
	unsigned isize;

	if (!cv || cv[c->shard].from == cv[c->shard].to)
		return 0;
	c->op = cm_op_convert(cv[c->shard].from, cv[c->shard].to) & 0xffu;
	isize = c->op ? cm_op_isize(c->op) : 1;
	if (c->op && !(c->len % isize) && !(c->src % isize) &&
	    (c->count < 2 || !(c->src_stride % isize)))
		return 0;
	return cm_err_set(e, RL_E_DTYPE, "read once: shard %u: a transfer's copy of %u bytes at "
			  "%u is not whole %s elements", c->shard, c->len, c->src,
			  pl_dtype_name(cv[c->shard].from));
}

/* Payload k's copies into this process's shards through the sink (with
 * their shards' conversions); a shard whose last bytes came is listed,
 * reported after the batch's agreement. */
static int copy_payload(struct xb *q, struct xs *s, size_t k)
{
	const struct eng_sink *d = q->x->dst;

	for (size_t j = 0; j < q->xi[k].ncopies; j++) {
		struct cm_copy cc = q->xi[k].copies[j], *c = &cc;
		int ret;

		if (c->shard >= s->nshards)
			return cm_err_set(q->e, RL_E_STATE, "read once: transfer %llu: shard %u of %zu",
					  (unsigned long long)q->xi[k].index, c->shard, s->nshards);
		if ((ret = convert_op(s->convert, c, q->e)))
			return ret;
		if (!q->in_place[k] && (ret = d->ops->copy(d->state, 0, c, q->src[k], q->e)))
			return ret;
		s->have[c->shard] += (uint64_t)c->count * c->len;
		if (s->have[c->shard] == s->want[c->shard] && !s->listed[c->shard]) {
			s->listed[c->shard] = 1;
			s->fin[s->nfin++] = c->shard;
		}
	}
	return 0;
}

/* Rooted payload k to each of its receivers, then into this process's own
 * shards (while the next payloads are read). */
static void xb_send_payload(struct xb *q, struct xs *s, size_t k)
{
	const struct ex_transport *t = q->x->t;
	const struct pl_xfer_info *xi = &q->xi[k];

	for (size_t j = 0; j < xi->nreceivers; j++) {
		t_failed(q, t->send(t->user, xi->receivers[j], xi->index, q->src[k], xi->length));
		q->x->sent += xi->length;
	}
	q->complete = 0;
	q->done[k] = 1;
	if (!q->cerr && s)
		q->cerr = copy_payload(q, s, k);
}

/* The engine read bp's shard: payload rooted[shard] is whole in buf. */
static void rd_shard(void *user, size_t shard)
{
	struct xrd *r = user;

	pthread_mutex_lock(&r->mu);
	r->ready[r->nready++] = shard;
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
}

/* On the reader thread between reads: a failed transport stops it early. */
static int rd_progress(void *user, uint64_t done, uint64_t total)
{
	struct xrd *r = user;

	(void)done;
	(void)total;
	return atomic_load_explicit(&r->cancel, memory_order_relaxed);
}

static void *rd_main(void *arg)
{
	struct xrd *r = arg;

	r->ret = ex_execute(&r->ee, &r->e);
	/* Under the lock: the calling thread checks done before it waits. */
	pthread_mutex_lock(&r->mu);
	atomic_store_explicit(&r->done, 1, memory_order_release);
	pthread_cond_signal(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Sends the payloads read since the last call; returns how many. */
static size_t xb_serve(struct xb *q, struct xs *s, struct xrd *r)
{
	size_t end, n = 0;

	pthread_mutex_lock(&r->mu);
	end = r->nready;
	pthread_mutex_unlock(&r->mu);
	/* ready[taken..end) were written before nready, under the lock. */
	for (; r->taken < end; r->taken++, n++)
		if (r->ready[r->taken] < q->bex.nshards && !q->done[q->rooted[r->ready[r->taken]]])
			xb_send_payload(q, s, q->rooted[r->ready[r->taken]]);
	return n;
}

/* The transport's progress op, while anything posted is pending. */
static void xb_progress(struct xb *q, struct xrd *r)
{
	const struct ex_transport *t = q->x->t;
	int p;

	if (!t->progress || q->complete || q->terr)
		return;
	if ((p = t->progress(t->user)) < 0) {
		t_failed(q, p);
		atomic_store_explicit(&r->cancel, 1, memory_order_relaxed);
	}
	q->complete = p == 1;
}

/* Waits up to ns for a payload read since the last xb_serve or the
 * reader's end (the monotonic clock of r->cv). */
static void rd_wait(struct xrd *r, long ns)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	t.tv_sec += (t.tv_nsec + ns) / 1000000000L;
	t.tv_nsec = (t.tv_nsec + ns) % 1000000000L;
	pthread_mutex_lock(&r->mu);
	while (r->nready == r->taken && !atomic_load_explicit(&r->done, memory_order_relaxed))
		if (pthread_cond_timedwait(&r->cv, &r->mu, &t))
			break;  /* ETIMEDOUT */
	pthread_mutex_unlock(&r->mu);
}

/* Until the reader ends: payloads sent as they are read, the transport
 * driven between them while it has work. */
static void xb_drive(struct xb *q, struct xs *s, struct xrd *r)
{
	long nap = XF_NAP_MIN_NS;

	while (!atomic_load_explicit(&r->done, memory_order_acquire)) {
		size_t n = xb_serve(q, s, r);
		int pending;

		xb_progress(q, r);
		pending = q->x->t->progress && !q->complete && !q->terr;
		if (n) {
			nap = XF_NAP_MIN_NS;
			continue;
		}
		rd_wait(r, pending ? nap : XF_IDLE_NS);
		if (pending)
			nap = CM_MIN(nap * 2, XF_NAP_MAX_NS);
	}
}

/* A condition variable on the monotonic clock (rd_wait's deadlines). */
static int rd_cond_init(pthread_cond_t *cv)
{
	pthread_condattr_t a;
	int ret;

	if (pthread_condattr_init(&a))
		return -1;
	ret = pthread_condattr_setclock(&a, CLOCK_MONOTONIC) || pthread_cond_init(cv, &a);
	pthread_condattr_destroy(&a);
	return ret ? -1 : 0;
}

/* Reads the payloads rooted here, each sent (and copied into this
 * process's shards) as soon as it is read. Returns 0 or the read's
 * failure (e set). */
static int xb_read_and_send(struct xb *q, struct xs *s)
{
	struct ex_xfer_exec *x = q->x;
	struct xrd r = { .q = q };

	if (!q->bex.nshards)
		return 0;
	if (!(r.ready = cm_mallocarray(q->bex.nshards + 1, sizeof(*r.ready))))
		return cm_err_set(q->e, -ENOMEM, "read once: out of memory");
	pthread_mutex_init(&r.mu, NULL);
	if (rd_cond_init(&r.cv)) {
		pthread_mutex_destroy(&r.mu);
		cm_free(r.ready);
		return cm_err_set(q->e, -ENOMEM, "read once: no condition variable");
	}
	atomic_init(&r.done, 0);
	atomic_init(&r.cancel, 0);
	cm_err_clear(&r.e);
	r.ee = (struct ex_exec){ .ex = &q->bex, .prog = &q->prog, .eo = x->eo,
				 .on_shard = rd_shard, .on_progress = rd_progress, .user = &r,
				 .sink = x->buffer_sink(x->user, q->buf, q->buf_len) };
	if (pthread_create(&r.th, NULL, rd_main, &r)) {
		rd_main(&r);    /* no thread: read, then send */
	} else {
		xb_drive(q, s, &r);
		pthread_join(r.th, NULL);
	}
	xb_serve(q, s, &r);
	pthread_cond_destroy(&r.cv);
	pthread_mutex_destroy(&r.mu);
	cm_free(r.ready);
	x->read += r.ee.stats.bytes_read;
	if (r.ret && !q->cerr)
		*q->e = r.e;
	return r.ret;
}

/*
 * After the reads (ret: their result): each file read for others
 * reported; every payload rooted here that was not sent is sent now
 * (after a failure, whatever its buffer holds, and not copied: every
 * receive posted elsewhere completes, and the agreement that follows
 * discards it); the transport's wait; the received payloads copied in. Returns 0 or this
 * process's failure (e set).
 */
static int after_reads(struct xb *q, struct xs *s, int ret)
{
	const struct ex_transport *t = q->x->t;
	const struct pl_exec *bex = &q->bex;

	for (uint32_t f = 0; !ret && q->x->on_file && f < bex->nfiles; f++)
		ret = q->x->on_file(q->x->user, bex->paths[f], bex->file_index ? bex->file_index[f] : f,
				    q->e);
	for (size_t k = 0; k < q->n; k++)
		if (q->xi[k].root == q->me && !q->done[k])
			xb_send_payload(q, ret ? NULL : s, k);
	t_failed(q, t->wait(t->user));  /* also after a failed post: what was posted completes */
	if ((!ret || ret == RL_E_CANCELED) && q->terr)
		return cm_err_set(q->e, q->terr, "read once: batch %llu: the transport failed (%d)",
				  (unsigned long long)q->b, q->terr);
	if (ret || (ret = q->cerr))
		return ret;
	for (size_t k = 0; k < q->n && !ret; k++)
		if (q->xi[k].root != q->me)
			ret = copy_payload(q, s, k);
	return ret;
}

/* Shard i's last bytes came: an asynchronous sink (a device's) reports it
 * once in place, else it is reported now. */
static void xs_report(const struct ex_xfer_exec *x, size_t i)
{
	const struct eng_sink *d = x->dst;

	if (d->ops->shard_done)
		d->ops->shard_done(d->state, i);
	else if (x->on_shard)
		x->on_shard(x->user, i);
}

static int run_batch(struct ex_xfer_exec *x, struct xs *s, uint64_t b, struct cm_err *e)
{
	struct xb q = { .x = x, .keep = &s->keep, .e = e, .b = b, .me = pl_plan_process(x->p) };
	struct xpf pf = { .started = 0 };
	char what[48];
	int ret = collect(&q);

	snprintf(what, sizeof(what), "batch %llu", (unsigned long long)b);
	if (!ret)
		ret = xb_prepare(&q);
	/* Nothing is posted unless every process can take its part. */
	ret = ex_xfer_agree(x->t, ret, what, e);
	if (!ret) {
		pf_start(&pf, &q);
		post_recvs(&q);
		ret = after_reads(&q, s, xb_read_and_send(&q, s));
		pf_end(&pf, ret != 0);
		ret = ex_xfer_agree(x->t, ret, what, e);
	}
	/* Only now are the batch's bytes known good everywhere. */
	for (size_t i = 0; !ret && i < s->nfin; i++)
		xs_report(x, s->fin[i]);
	s->nfin = 0;
	xb_free(&q);
	return ret;
}

/* What transfers bring each shard: their copies' bytes. */
static int wanted(const struct ex_xfer_exec *x, struct xs *s, struct cm_err *e)
{
	struct pl_exec ex;

	pl_plan_exec(x->p, &ex);
	s->nshards = ex.nshards;
	s->convert = ex.convert;
	s->want = cm_calloc(ex.nshards + 1, sizeof(*s->want));
	s->have = cm_calloc(ex.nshards + 1, sizeof(*s->have));
	s->listed = cm_calloc(ex.nshards + 1, 1);
	s->fin = cm_calloc(ex.nshards + 1, sizeof(*s->fin));
	if (!s->want || !s->have || !s->listed || !s->fin)
		return cm_err_set(e, -ENOMEM, "read once: out of memory");
	for (size_t k = 0; k < pl_plan_nxfers(x->p); k++) {
		struct pl_xfer_info xi;

		pl_plan_xfer(x->p, k, &xi);
		for (size_t j = 0; j < xi.ncopies; j++)
			if (xi.copies[j].shard < ex.nshards)
				s->want[xi.copies[j].shard] +=
					(uint64_t)xi.copies[j].count * xi.copies[j].len;
	}
	return 0;
}

/* Every shard transfers fill is complete. */
static int complete(const struct xs *s, struct cm_err *e)
{
	for (size_t i = 0; i < s->nshards; i++)
		if (s->have[i] != s->want[i])
			return cm_err_set(e, RL_E_STATE, "read once: shard %zu: transfers brought %llu of %llu bytes",
					  i, (unsigned long long)s->have[i],
					  (unsigned long long)s->want[i]);
	return 0;
}

/*
 * An asynchronous destination (a device, exec/xfer_dev.c) ends its
 * copies: after a failure it abandons them; else its error is this
 * process's, agreed with the others at the end.
 */
static int settle(struct ex_xfer_exec *x, int ret, struct cm_err *e)
{
	const struct eng_sink *d = x->dst;
	struct cm_err fe;
	int r;

	if (!d->ops->finish)
		return ret;
	cm_err_clear(&fe);
	r = d->ops->finish(d->state, ret == 0, &fe);
	if (ret || !r)
		return ret;
	cm_err_set(e, r, "%s", fe.msg);
	return r;
}

int ex_xfer_execute(struct ex_xfer_exec *x, struct cm_err *e)
{
	struct xs s = { 0 };
	uint64_t nt, nb, digest; /* nt, digest: unused */
	int ret, ok;

	x->read = x->sent = x->received = 0;
	pl_plan_xsummary(x->p, &nt, &nb, &digest);
	ret = ex_xfer_agree(x->t, wanted(x, &s, e), "set-up", e);
	for (uint64_t b = 0; b < nb && !ret; b++)
		ret = run_batch(x, &s, b, e);
	ok = !ret;
	ret = settle(x, ret, e);
	if (ok)
		ret = ex_xfer_agree(x->t, ret ? ret : complete(&s, e), "the end", e);
	cm_free(s.want);
	cm_free(s.have);
	cm_free(s.listed);
	cm_free(s.fin);
	eng_staging_free(s.keep.buf, s.keep.buf_cap);
	eng_staging_free(s.keep.rbuf, s.keep.rbuf_cap);
	return ret;
}
