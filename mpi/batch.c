/*
 * batch.c - one batch of transfers on one rank.
 *
 *   receive   every payload the rank receives in the batch has its
 *             receives posted first (one per message: a payload travels
 *             in messages cut at its large tensors' bounds and every
 *             RL_MPI_MESSAGE_BYTES, in order, on one tag: cuts.c),
 *             straight into the shards where its scatter list allows
 *             (direct.c; a contiguous receive where a message lands in one
 *             run), else into one buffer;
 *   read      the payloads it roots are read by the transfer loader into
 *             the batch buffer (rl_plan_build_batch), on a thread of its
 *             own; each completed payload is queued by the engine's
 *             thread, and the calling thread, polling meanwhile, sends it
 *             to its receivers and copies what the rank itself needs
 *             (a helper thread faults in the destinations: prefault.c);
 *   copy      a payload received into the buffer is copied into the
 *             rank's shards as soon as its last piece arrives; a shard
 *             whose last bytes arrive is reported;
 *   answer    a rank that failed, or learned of a failure, still answers
 *             every receive it owes with an empty message and drains
 *             what others send it, so that nobody waits on it; then every
 *             rank agrees (mx.c).
 *
 * Memory for bytes in transit: the batch's payloads, read here or
 * received here, which the planner keeps under RL_PLAN_BATCH_BYTES.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mx.h"

struct msg {                    /* one message: part of a payload */
	size_t t;               /* its transfer (index in the batch's list) */
	uint64_t off, len;
	int drain;              /* 1: taken into a byte of drain (no memory) */
};

struct bx {
	struct mx_load *L;
	struct mx *x;
	uint64_t b;
	/* transfers of the batch this rank takes part in */
	size_t *t;                  /* plan indices */
	rl_transfer_info *ti;
	size_t n;
	uint64_t *cut;              /* message starts: transfer k's are cut[c0[k]..c0[k + 1]) */
	size_t *c0;
	/* receiving */
	uint8_t *rbuf;
	uint64_t *roff;             /* each received payload's place in rbuf */
	uint8_t *direct;            /* 1: received straight into the shards */
	uint32_t *rleft;            /* its messages still to come */
	uint8_t *rbad;              /* 1: its root answered empty */
	struct msg *rm;
	MPI_Request *rreq;
	size_t nrm;
	uint8_t *drain;             /* a byte per message: where a rank without rbuf drains */
	/* sending */
	size_t *root;               /* the batch's transfers this rank roots, in order */
	size_t nroot;
	uint8_t *sent;
	uint64_t *soff;             /* each one's payload in L->buf */
	MPI_Request *sreq;
	size_t nsreq, capsreq;
	size_t *taken;              /* scratch for the queue */
};

static int tag_of(const struct bx *B, size_t k)
{
	return MX_TAG_DATA + (int)(B->ti[k].index % (uint64_t)(B->x->tag_ub - MX_TAG_DATA + 1));
}

/* Transfer k's messages: [first, end) of B->cut. */
static size_t msg_first(const struct bx *B, size_t k)
{
	return B->c0[k];
}

static size_t msg_end(const struct bx *B, size_t k)
{
	return B->c0[k + 1];
}

/* Message m of transfer k: its bytes' offset and length in the payload. */
static uint64_t msg_len(const struct bx *B, size_t k, size_t m)
{
	return (m + 1 < B->c0[k + 1] ? B->cut[m + 1] : B->ti[k].nbytes) - B->cut[m];
}

void mx_report(struct mx_load *L, size_t shard)
{
	if (L->x->m->on_shard)
		L->x->m->on_shard(L->x->m->user, shard);
}

/* One run of a copy (rl_copy_runs): from the payload into the staging. */
struct run_copy {
	uint8_t *area;
	const uint8_t *src;
};

static int copy_run(void *arg, uint64_t src, uint64_t dst, uint64_t len)
{
	const struct run_copy *r = arg;

	memcpy(r->area + dst, r->src + src, len);
	return 0;
}

/* Payload k's bytes are in the rank's shards (copied from src, or, src
 * NULL, received there): shards whose last bytes came are reported. */
static void land(struct bx *B, size_t k, const uint8_t *src)
{
	struct mx_load *L = B->L;

	for (size_t j = 0; j < B->ti[k].ncopies; j++) {
		rl_copy_info c;

		rl_plan_transfer_copy(L->plan, B->t[k], j, &c);
		L->shard_have[c.shard] += c.count * c.len;
		if (L->stream) {        /* no staging: pieces */
			mx_piece_copy(L, &c, src);
			continue;
		}
		if (src) {
			struct run_copy r = { L->staging[c.device], src };

			rl_copy_runs(&c, copy_run, &r);
		}
		if (L->shard_have[c.shard] == L->shard_want[c.shard])
			mx_report(L, c.shard);
	}
}

/* ---------------------------------------------------------------- */
/* The batch's lists                                                 */
/* ---------------------------------------------------------------- */

static void bx_free(struct bx *B)
{
	free(B->t);
	free(B->ti);
	free(B->rbuf);
	free(B->roff);
	free(B->direct);
	free(B->rleft);
	free(B->rbad);
	free(B->rm);
	free(B->rreq);
	free(B->drain);
	free(B->root);
	free(B->sent);
	free(B->soff);
	free(B->sreq);
	free(B->taken);
	free(B->cut);
	free(B->c0);
}

/* Every transfer's messages (cuts.c): counted, then listed. */
static int cut_messages(struct bx *B)
{
	uint64_t max = (uint64_t)B->x->m->max_msg;
	size_t total = 0;

	if (!(B->c0 = malloc((B->n + 1) * sizeof(*B->c0))))
		return -ENOMEM;
	for (size_t k = 0; k < B->n; k++) {
		B->c0[k] = total;
		total += mx_cuts(B->L->ck, &B->ti[k], max, NULL);
	}
	B->c0[B->n] = total;
	if (!(B->cut = malloc((total + 1) * sizeof(*B->cut))))
		return -ENOMEM;
	for (size_t k = 0; k < B->n; k++)
		mx_cuts(B->L->ck, &B->ti[k], max, B->cut + B->c0[k]);
	return 0;
}

/* Counts messages to receive and to send; fills the lists. */
static int collect(struct bx *B)
{
	const rl_plan *plan = B->L->plan;
	size_t n = rl_plan_num_transfers(plan), nrm = 0, nsend = 0;

	B->t = malloc((n + 1) * sizeof(*B->t));
	B->ti = malloc((n + 1) * sizeof(*B->ti));
	B->root = malloc((n + 1) * sizeof(*B->root));
	if (!B->t || !B->ti || !B->root)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		rl_transfer_info ti;

		rl_plan_transfer(plan, i, &ti);
		if (ti.batch != B->b)
			continue;
		B->t[B->n] = i;
		B->ti[B->n] = ti;
		if (ti.root == B->x->rank)
			B->root[B->nroot++] = B->n;
		B->n++;
	}
	if (cut_messages(B))
		return -ENOMEM;
	for (size_t k = 0; k < B->n; k++) {
		size_t msgs = msg_end(B, k) - msg_first(B, k);

		if (B->ti[k].root == B->x->rank)
			nsend += msgs * B->ti[k].nreceivers;
		else
			nrm += msgs;
	}
	B->capsreq = nsend;
	B->roff = calloc(B->n + 1, sizeof(*B->roff));
	B->direct = calloc(B->n + 1, 1);
	B->rleft = calloc(B->n + 1, sizeof(*B->rleft));
	B->rbad = calloc(B->n + 1, 1);
	B->rm = malloc((nrm + 1) * sizeof(*B->rm));
	B->rreq = malloc((nrm + 1) * sizeof(*B->rreq));
	B->drain = malloc(nrm + 1);
	B->sent = calloc(B->nroot + 1, 1);
	B->soff = calloc(B->nroot + 1, sizeof(*B->soff));
	B->sreq = malloc((nsend + 1) * sizeof(*B->sreq));
	B->taken = malloc((B->nroot + 1) * sizeof(*B->taken));
	if (!B->roff || !B->direct || !B->rleft || !B->rbad || !B->rm || !B->rreq || !B->drain ||
	    !B->sent || !B->soff || !B->sreq || !B->taken)
		return -ENOMEM;
	return 0;
}

/* ---------------------------------------------------------------- */
/* Receiving                                                         */
/* ---------------------------------------------------------------- */

/* A message arrived: empty means its root failed (it says why itself). */
static void recv_done(struct mx *x, void *arg, int i, const MPI_Status *st)
{
	struct bx *B = arg;
	const struct msg *m = &B->rm[i];
	int count = 0;

	MPI_Get_count(st, MPI_BYTE, &count);
	if (st->MPI_ERROR != MPI_SUCCESS || (uint64_t)count != m->len) {
		if (count && !m->drain)
			mx_fail(x, RL_E_MPI, "transfer %llu from rank %d: a message of %d bytes, %llu expected",
				(unsigned long long)B->ti[m->t].index, B->ti[m->t].root, count,
				(unsigned long long)m->len);
		B->rbad[m->t] = 1;
	}
	if (--B->rleft[m->t] == 0 && !B->rbad[m->t]) {
		B->L->st.bytes_received += B->ti[m->t].nbytes;
		land(B, m->t, B->direct[m->t] ? NULL : B->rbuf + B->roff[m->t]);
	}
}

/* One receive: straight into the shards (blocks), into rbuf, or, with
 * neither, into a byte of drain (truncated, but taken, so that the sender
 * completes). */
static void post_receive(struct bx *B, size_t k, uint64_t off, uint64_t len,
			 const struct mx_blocks *blocks)
{
	size_t i = B->nrm++;
	int src = B->ti[k].root, tag = tag_of(B, k);
	MPI_Datatype type;
	uint8_t *run;

	B->rm[i] = (struct msg){ k, off, len, 0 };
	B->rleft[k]++;
	if (B->direct[k] && (run = mx_direct_run(blocks, off, len))) {
		MPI_Irecv(run, (int)len, MPI_BYTE, src, tag, B->x->comm, &B->rreq[i]);
		return;
	}
	if (B->direct[k] && !mx_direct_type(blocks, off, len, &type)) {
		MPI_Irecv(MPI_BOTTOM, 1, type, src, tag, B->x->comm, &B->rreq[i]);
		MPI_Type_free(&type);   /* freed once the receive is done with it */
		return;
	}
	if (B->direct[k] || !B->rbuf) {
		B->rm[i].drain = 1;
		mx_fail(B->x, -ENOMEM, "out of memory for a receive");
		MPI_Irecv(&B->drain[i], 1, MPI_BYTE, src, tag, B->x->comm, &B->rreq[i]);
		return;
	}
	MPI_Irecv(B->rbuf + B->roff[k] + off, (int)len, MPI_BYTE, src, tag, B->x->comm, &B->rreq[i]);
}

/* Where each received payload lands: its blocks, or its place in rbuf. */
static uint64_t place_receives(struct bx *B, struct mx_blocks *blocks)
{
	uint64_t total = 0;

	for (size_t k = 0; k < B->n; k++) {
		int d;

		if (B->ti[k].root == B->x->rank)
			continue;
		d = B->L->stream ? 0 :  /* streaming: no shards to receive into */
		    mx_direct_blocks(B->L->plan, B->t[k], &B->ti[k], B->L->staging, &blocks[k]);
		if (d < 0)
			mx_fail(B->x, d, "out of memory");
		B->direct[k] = d > 0;
		if (d <= 0) {
			B->roff[k] = total;
			total += B->ti[k].nbytes;
		}
	}
	return total;
}

/* Posts every receive of the batch. */
static void post_receives(struct bx *B)
{
	uint64_t total;
	struct mx_blocks *blocks = calloc(B->n + 1, sizeof(*blocks));

	if (!blocks)
		mx_fail(B->x, -ENOMEM, "out of memory");
	total = blocks ? place_receives(B, blocks) : 0;
	if (total && !(B->rbuf = malloc(total)))
		mx_fail(B->x, -ENOMEM, "out of memory for %llu bytes of received payloads",
			(unsigned long long)total);
	for (size_t k = 0; k < B->n; k++) {
		if (B->ti[k].root == B->x->rank)
			continue;
		for (size_t m = msg_first(B, k); m < msg_end(B, k); m++)
			post_receive(B, k, B->cut[m], msg_len(B, k, m), blocks ? &blocks[k] : NULL);
		if (blocks)
			mx_blocks_free(&blocks[k]);
	}
	free(blocks);
}

/* ---------------------------------------------------------------- */
/* Sending                                                           */
/* ---------------------------------------------------------------- */

/* Payload r (index in B->root) to every receiver: its bytes, or empty
 * messages (src NULL) from a rank that cannot send them. */
static void send_payload(struct bx *B, size_t r, const uint8_t *src)
{
	size_t k = B->root[r];
	const rl_transfer_info *ti = &B->ti[k];

	for (size_t j = 0; j < ti->nreceivers; j++)
		for (size_t m = msg_first(B, k); m < msg_end(B, k); m++)
			MPI_Isend(src ? src + B->cut[m] : NULL, src ? (int)msg_len(B, k, m) : 0,
				  MPI_BYTE, ti->receivers[j], tag_of(B, k), B->x->comm,
				  &B->sreq[B->nsreq++]);
	if (src) {
		B->L->st.bytes_sent += ti->nbytes * ti->nreceivers;
		B->L->st.transfers_rooted++;
		land(B, k, src);
	}
	B->sent[r] = 1;
}

/* Payloads the engine finished: sent, copied; then everything tested.
 * Returns how many payloads it sent. */
static size_t serve(struct bx *B)
{
	size_t n = mx_queue_take(&B->L->q, B->taken, B->nroot);

	for (size_t i = 0; i < n; i++)
		if (B->taken[i] < B->nroot && !B->sent[B->taken[i]])
			send_payload(B, B->taken[i], B->L->buf + B->soff[B->taken[i]]);
	mx_test(B->x, B->rreq, (int)B->nrm, recv_done, B);
	mx_test(B->x, B->sreq, (int)B->nsreq, NULL, NULL);
	return n;
}

/*
 * The transfer loader runs on a thread of its own while the calling thread
 * sends, copies and receives: run from the engine's progress callback (on
 * the thread that runs the loader, its worker 0), every send, copy and
 * shared-memory receive stalled that worker's reads; on 2 vCPUs a rank's
 * reads then waited on its copies (docs/benchmarks.md, "Cluster
 * benchmark"). MPI stays on the calling thread (MPI_THREAD_FUNNELED).
 */
#define NAP_MIN_NS 50000L      /* the calling thread's naps while nothing is read */
#define NAP_MAX_NS 1000000L

struct reader {
	struct bx *B;
	rl_plan *bp;
	int ret;
	atomic_int done;            /* release/acquire: ret is written before it */
	atomic_int cancel;          /* relaxed: a flag the engine polls as a hint */
};

static void payload_read(void *user, size_t shard)
{
	struct reader *r = user;

	mx_queue_push(&r->B->L->q, shard);
}

/* On the reader thread between reads: a failure seen by the MPI thread stops it. */
static int read_progress(void *user, uint64_t done, uint64_t total)
{
	struct reader *r = user;

	(void)done;
	(void)total;
	return atomic_load_explicit(&r->cancel, memory_order_relaxed);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;

	r->ret = rl_loader_run(r->B->L->x->m->tld, r->bp);
	atomic_store_explicit(&r->done, 1, memory_order_release);
	return NULL;
}

/* Runs the transfer loader on its own thread; this thread moves messages
 * until it ends. Returns the loader's result, or 1: no thread started. */
static int read_beside(struct bx *B, rl_plan *bp)
{
	struct reader r = { .B = B, .bp = bp };
	rl_loader *tld = B->L->x->m->tld;
	struct timespec nap = { 0, NAP_MIN_NS };
	pthread_t th;

	atomic_init(&r.done, 0);
	atomic_init(&r.cancel, 0);
	rl_loader_set_callbacks(tld, payload_read, read_progress, &r);
	if (pthread_create(&th, NULL, reader_main, &r)) {
		rl_loader_set_callbacks(tld, NULL, NULL, NULL);
		return 1;
	}
	while (!atomic_load_explicit(&r.done, memory_order_acquire)) {
		if (mx_poll(B->x))
			atomic_store_explicit(&r.cancel, 1, memory_order_relaxed);
		if (serve(B)) {
			nap.tv_nsec = NAP_MIN_NS;
			continue;
		}
		/* Nothing read yet: let the workers run; a payload takes tens of
		 * milliseconds to read, so a nap of up to 1 ms delays little. */
		nanosleep(&nap, NULL);
		nap.tv_nsec = MX_MIN(nap.tv_nsec * 2, NAP_MAX_NS);
	}
	pthread_join(th, NULL);
	rl_loader_set_callbacks(tld, NULL, NULL, NULL);
	return r.ret;
}

/* The batch buffer: at least len bytes, aligned for direct reads. */
static int buffer(struct mx_load *L, size_t len)
{
	if (len <= L->buf_len && L->buf)
		return 0;
	free(L->buf);
	L->buf_len = 0;
	if (!(L->buf = aligned_alloc(4096, (len + 4095) / 4096 * 4096)))
		return -ENOMEM;
	L->buf_len = len;
	return 0;
}

/* Builds and runs the plan of the payloads this rank roots. */
static int run_reads(struct bx *B, rl_plan *bp)
{
	struct mx_load *L = B->L;
	rl_loader *tld = L->x->m->tld;
	rl_device_info di;
	rl_load_stats ls = { .size = sizeof(ls) };
	int64_t chunk = 0;
	int ret;

	rl_plan_get(L->plan, RL_PLAN_CHUNK_BYTES, &chunk);
	if ((ret = rl_plan_set(bp, RL_PLAN_CHUNK_BYTES, chunk)) ||
	    (ret = rl_plan_build_batch(bp, L->plan, B->b)))
		return mx_fail(B->x, ret, "%s", rl_plan_errmsg(bp));
	if (rl_plan_num_shards(bp) != B->nroot || rl_plan_device(bp, 0, &di))
		return mx_fail(B->x, RL_E_STATE, "batch %llu: its plan lists %zu payloads, %zu expected",
			       (unsigned long long)B->b, rl_plan_num_shards(bp), B->nroot);
	for (size_t r = 0; r < B->nroot; r++) {
		rl_shard_info si;

		rl_plan_shard(bp, r, &si);
		B->soff[r] = si.offset;
	}
	if (buffer(L, di.staging_bytes))
		return mx_fail(B->x, -ENOMEM, "out of memory for a batch of %llu bytes",
			       (unsigned long long)di.staging_bytes);
	if ((ret = rl_loader_set(tld, RL_OPT_STAGING, RL_STAGING_CALLER)) ||
	    (ret = rl_loader_set_staging(tld, 0, L->buf, L->buf_len)))
		return mx_fail(B->x, ret, "%s", rl_loader_errmsg(tld));
	if ((ret = read_beside(B, bp)) == 1)
		return mx_fail(B->x, -EAGAIN, "cannot start a thread for the transfer reads");
	if (!ret && !rl_loader_get_stats(tld, &ls))
		L->st.bytes_read += ls.bytes_read;
	if (ret && !(ret == RL_E_CANCELED && B->x->peer_failed))
		return mx_fail(B->x, ret, "%s", rl_loader_errmsg(tld));
	return ret;
}

/* Reads and sends this rank's payloads; on any failure, answers every
 * receive it owes with empty messages. */
static void read_and_send(struct bx *B)
{
	rl_plan *bp = NULL;

	if (B->nroot && !mx_poll(B->x)) {
		if (!(bp = rl_plan_create()))
			mx_fail(B->x, -ENOMEM, "out of memory");
		else if (!run_reads(B, bp))
			serve(B);
		rl_plan_destroy(bp);
	}
	for (size_t r = 0; r < B->nroot; r++)
		if (!B->sent[r]) {
			if (!mx_poll(B->x))
				mx_fail(B->x, RL_E_STATE, "batch %llu: payload %zu was never read",
					(unsigned long long)B->b, r);
			send_payload(B, r, NULL);
		}
}

int mx_batch(struct mx_load *L, uint64_t b)
{
	struct bx B = { .L = L, .x = L->x, .b = b };

	/* Without its lists a rank cannot keep its part of the protocol. */
	if (collect(&B)) {
		mx_abort(L->x, "out of memory for a batch's transfer lists");
		mx_fail(L->x, -ENOMEM, "out of memory for a batch's transfer lists");
	} else {
		struct mx_prefault pf;

		mx_prefault_start(&pf, L, B.t, B.ti, L->stream ? 0 : B.n);
		post_receives(&B);
		read_and_send(&B);
		mx_wait(L->x, B.rreq, (int)B.nrm, "payloads from other ranks", recv_done, &B);
		mx_wait(L->x, B.sreq, (int)B.nsreq, "other ranks to take payloads", NULL, NULL);
		mx_prefault_stop(&pf);
	}
	bx_free(&B);
	return mx_agree(L->x, 0, NULL);
}
