/*
 * xfer_exec.c - the read-once executor (xfer_exec.h): each batch of
 * transfers read by the engine, moved by the transport, copied through
 * the destination sink.
 *
 *   read      the batch's plan (the transfers pass) run into a buffer:
 *             the payloads this process roots; the receive buffer sized;
 *   agree     every process read its part (else nobody moves a byte);
 *   move      receives (straight into the shard when one plain copy
 *             takes the whole payload, else into a buffer), then sends
 *             (one per receiver), then the transport's wait;
 *   copy      each payload this process needs through the sink's copy;
 *             a shard whose last bytes came is reported (an asynchronous
 *             sink, a device's: to it, which reports it once in place);
 *   agree     every process moved and copied its part.
 *
 * After the last batch every shard that transfers fill must be complete
 * (agreed too). Memory for bytes in transit: the batch's payloads, read
 * here or received here, which the planner keeps under its batch bytes.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "execute.h"
#include "transfers.h"
#include "xfer_exec.h"

/* One batch. */
struct xb {
	struct ex_xfer_exec *x;
	struct cm_err *e;
	uint64_t b;
	int me;
	struct pl_xfer_info *xi;    /* the batch's transfers this process takes part in */
	const uint8_t **src;        /* each one's payload bytes (read or received) */
	uint8_t *in_place;          /* 1: received straight into its one destination */
	size_t n;
	struct pl_plan *bp;         /* the batch's reads */
	uint8_t *buf;               /* what they read */
	uint64_t buf_len;
	uint8_t *rbuf;              /* what is received */
	uint64_t rbuf_len;
};

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
 * conversions by shard (NULL: none). */
struct xs {
	uint64_t *want, *have;
	size_t nshards;
	const struct pl_convert *convert;
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
	cm_free(q->xi);
	cm_free(q->src);
	cm_free(q->in_place);
	eng_staging_free(q->rbuf, q->rbuf_len);
	eng_staging_free(q->buf, q->buf_len);
	pl_plan_free(q->bp);
}

/*
 * Where received transfer x lands with no copy: its one plain copy (by
 * ex's conversions) takes the whole payload, contiguous, into host
 * memory the sink lets a write land in (sink direct); NULL: into the
 * receive buffer, then copied.
 */
static uint8_t *landing(const struct eng_sink *d, const struct pl_xfer_info *x,
			const struct pl_exec *ex)
{
	const struct cm_copy *c = x->copies;

	if (x->ncopies != 1 || c->op != CM_OP_PLAIN || c->src || c->dev >= d->ndevs ||
	    c->shard >= ex->nshards ||
	    (ex->convert && ex->convert[c->shard].from != ex->convert[c->shard].to) ||
	    (c->count > 1 && c->src_stride != c->len) ||
	    (uint64_t)c->count * c->len != x->length || !d->ops->direct)
		return NULL;
	return d->ops->direct(d->state, c, x->length);
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
	if (!q->xi || !q->src || !q->in_place)
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
	/* Staging memory (huge pages where the kernel gives them): fewer
	 * faults as the receives land. */
	if (total && (total > SIZE_MAX || !(q->rbuf = eng_staging_alloc((size_t)total))))
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

/* The engine reads the payloads this process roots into q->buf. */
static int read_roots(struct xb *q, const struct pl_exec *bex)
{
	struct ex_xfer_exec *x = q->x;
	struct ex_program prog = { 0 };
	struct ex_program_opts o = { 0 };
	struct ex_exec ee = { .ex = bex, .eo = x->eo };
	size_t r = 0;
	int ret;

	q->buf_len = bex->staging_bytes[0];
	if (q->buf_len > SIZE_MAX || !(q->buf = eng_staging_alloc((size_t)q->buf_len)))
		return cm_err_set(q->e, -ENOMEM, "read once: batch %llu: cannot map %llu bytes",
				  (unsigned long long)q->b, (unsigned long long)q->buf_len);
	if ((ret = ex_program_build(&prog, bex, &o)) < 0)
		return cm_err_set(q->e, ret, "read once: batch %llu: building its program",
				  (unsigned long long)q->b);
	ee.prog = &prog;
	ee.sink = x->buffer_sink(x->user, q->buf, q->buf_len);
	ret = ex_execute(&ee, q->e);
	ex_program_free(&prog);
	x->read += ee.stats.bytes_read;
	/* Shard s of the batch's plan is the s-th payload rooted here, in
	 * the plan's transfer order (the transfers pass). */
	for (uint32_t f = 0; !ret && x->on_file && f < bex->nfiles; f++)
		ret = x->on_file(x->user, bex->paths[f], bex->file_index ? bex->file_index[f] : f,
				 q->e);
	for (size_t k = 0; !ret && k < q->n; k++)
		if (q->xi[k].root == q->me)
			q->src[k] = q->buf + bex->shards[r++].offset;
	if (!ret && r != bex->nshards)
		ret = cm_err_set(q->e, RL_E_STATE, "read once: batch %llu: %zu payloads read, %zu rooted",
				 (unsigned long long)q->b, bex->nshards, r);
	return ret;
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

/* Read phase (q's transfers collected): 0, or this process's error (in e). */
static int read_batch(struct xb *q)
{
	struct pl_exec bex;
	int ret;

	if ((ret = ex_xfer_batch_plan(q->x->p, q->b, q->x->chunk, &q->bp, q->e)))
		return ret;
	pl_plan_exec(q->bp, &bex);
	return bex.nshards ? read_roots(q, &bex) : 0;
}

/* Posts every receive, then every send; then waits for them all. */
static int move(struct xb *q)
{
	const struct ex_transport *t = q->x->t;
	int ret = 0, r;

	for (size_t k = 0; k < q->n; k++) {
		const struct pl_xfer_info *xi = &q->xi[k];

		if (xi->root == q->me)
			continue;
		r = t->recv(t->user, xi->root, xi->index, (void *)q->src[k], xi->length);
		ret = ret ? ret : r;
		q->x->received += xi->length;
	}
	for (size_t k = 0; k < q->n; k++) {
		const struct pl_xfer_info *xi = &q->xi[k];

		if (xi->root != q->me)
			continue;
		for (size_t j = 0; j < xi->nreceivers; j++) {
			r = t->send(t->user, xi->receivers[j], xi->index, q->src[k], xi->length);
			ret = ret ? ret : r;
			q->x->sent += xi->length;
		}
	}
	r = t->wait(t->user);   /* also after a failed post: what was posted completes */
	ret = ret ? ret : r;
	if (ret)
		return cm_err_set(q->e, ret < 0 ? ret : -EIO,
				  "read once: batch %llu: the transport failed (%d)",
				  (unsigned long long)q->b, ret);
	return 0;
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

/* Each payload into this process's shards through the sink. */
static int copy_in(struct xb *q, struct xs *s)
{
	const struct eng_sink *d = q->x->dst;

	for (size_t k = 0; k < q->n; k++)
		for (size_t j = 0; j < q->xi[k].ncopies; j++) {
			struct cm_copy cc = q->xi[k].copies[j], *c = &cc;
			int ret;

			if (c->shard >= s->nshards)
				return cm_err_set(q->e, RL_E_STATE, "read once: transfer %llu: shard %u of %zu",
						  (unsigned long long)q->xi[k].index, c->shard,
						  s->nshards);
			if ((ret = convert_op(s->convert, c, q->e)))
				return ret;
			if (!q->in_place[k] && (ret = d->ops->copy(d->state, 0, c, q->src[k], q->e)))
				return ret;
			s->have[c->shard] += (uint64_t)c->count * c->len;
			if (s->have[c->shard] != s->want[c->shard])
				continue;
			if (d->ops->shard_done) /* asynchronous: it reports once in place */
				d->ops->shard_done(d->state, c->shard);
			else if (q->x->on_shard)
				q->x->on_shard(q->x->user, c->shard);
		}
	return 0;
}

static int run_batch(struct ex_xfer_exec *x, struct xs *s, uint64_t b, struct cm_err *e)
{
	struct xb q = { .x = x, .e = e, .b = b, .me = pl_plan_process(x->p) };
	struct xpf pf = { .started = 0 };
	char what[48];
	int ret = collect(&q);

	snprintf(what, sizeof(what), "batch %llu", (unsigned long long)b);
	if (!ret) {
		pf_start(&pf, &q);
		ret = read_batch(&q);
	}
	ret = ex_xfer_agree(x->t, ret, what, e);
	if (ret) {
		pf_end(&pf, 1);
	} else {
		ret = move(&q);
		pf_end(&pf, ret != 0);
		if (!ret)
			ret = copy_in(&q, s);
		ret = ex_xfer_agree(x->t, ret, what, e);
	}
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
	if (!s->want || !s->have)
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
	return ret;
}
