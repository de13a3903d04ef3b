/*
 * transport_mpi.c - the MPI transport: rl_transport_ops over the call's
 * private communicator (mx.c), so that the library's read-once executor
 * (exec/xfer_exec.c, through rl_loader_run) runs a load's batches.
 *
 *   send/recv  a payload travels in messages of at most
 *              RL_MPI_MESSAGE_BYTES, in order, on one tag (the transfer's
 *              index folded into the tags MPI allows; MPI keeps messages
 *              of one sender and tag in order);
 *   wait       every posted request, with the call's deadline and
 *              failure notes (mx_wait); a message of another length
 *              fails this rank, naming the sender and both lengths;
 *   progress   the posted requests tested (mx_test, the same checks),
 *              while the batch is read;
 *   agree      mx_agree: a failed rank's own words (the loader's
 *              message) travel to every rank, which all return the same
 *              error.
 *
 * A streaming loader's transfers reach its piece callback through the
 * same run (the library hands them out as pieces).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

struct tp_msg {
	int peer, out;              /* out: a send */
	uint64_t tag, len;
};

struct tp {
	struct mx_load *L;
	MPI_Request *req;
	struct tp_msg *msg;         /* a receive's peer and length, for its check */
	size_t n, cap;
	double reads_end;           /* the first agreement: own reads done */
};

static int tag_of(const struct mx *x, uint64_t tag)
{
	return MX_TAG_DATA + (int)(tag % (uint64_t)(x->tag_ub - MX_TAG_DATA + 1));
}

/* Room for one more request; 0 or -ENOMEM (this rank failed). */
static int room(struct tp *t)
{
	size_t cap = t->cap ? 2 * t->cap : 64;
	MPI_Request *r;
	struct tp_msg *m;

	if (t->n < t->cap)
		return 0;
	if ((r = realloc(t->req, cap * sizeof(*r))))
		t->req = r;
	if (!r || !(m = realloc(t->msg, cap * sizeof(*m))))
		return mx_fail(t->L->x, -ENOMEM, "out of memory for a transfer's requests");
	t->msg = m;
	t->cap = cap;
	return 0;
}

/* len bytes at buf in messages of at most RL_MPI_MESSAGE_BYTES. */
static int post(struct tp *t, int peer, uint64_t tag, void *buf, size_t len, int out)
{
	struct mx *x = t->L->x;
	uint64_t max = (uint64_t)x->m->max_msg, off = 0;

	do {
		uint64_t n = MX_MIN(max, len - off);
		int rc;

		if (room(t))
			return -ENOMEM;
		t->msg[t->n] = (struct tp_msg){ peer, out, tag, n };
		rc = out ? MPI_Isend((uint8_t *)buf + off, (int)n, MPI_BYTE, peer, tag_of(x, tag),
				     x->comm, &t->req[t->n])
			 : MPI_Irecv((uint8_t *)buf + off, (int)n, MPI_BYTE, peer, tag_of(x, tag),
				     x->comm, &t->req[t->n]);
		if (rc != MPI_SUCCESS)
			return mx_fail(x, RL_E_MPI, "transfer %llu: %s rank %d failed",
				       (unsigned long long)tag, out ? "MPI_Isend to" : "MPI_Irecv from",
				       peer);
		t->n++;
		off += n;
	} while (off < len);
	return 0;
}

static int tp_send(void *user, int peer, uint64_t tag, const void *buf, size_t len)
{
	struct tp *t = user;
	int ret = post(t, peer, tag, (void *)buf, len, 1);

	if (!ret)
		t->L->st.bytes_sent += len;
	return ret;
}

static int tp_recv(void *user, int peer, uint64_t tag, void *buf, size_t len)
{
	struct tp *t = user;
	int ret = post(t, peer, tag, buf, len, 0);

	if (!ret)
		t->L->st.bytes_received += len;
	return ret;
}

/* A receive completed: of the length posted, or this rank fails. */
static void recv_done(struct mx *x, void *arg, int i, const MPI_Status *st)
{
	const struct tp *t = arg;
	const struct tp_msg *m = &t->msg[i];
	int count = 0;

	if (m->out)             /* a send: nothing to check */
		return;
	MPI_Get_count(st, MPI_BYTE, &count);
	if (st->MPI_ERROR != MPI_SUCCESS || (uint64_t)count != m->len)
		mx_fail(x, RL_E_MPI, "transfer %llu from rank %d: a message of %d bytes, %llu expected",
			(unsigned long long)m->tag, m->peer, count, (unsigned long long)m->len);
}

static int tp_wait(void *user)
{
	struct tp *t = user;
	struct mx *x = t->L->x;
	int ret = mx_wait(x, t->req, (int)t->n, "payloads from and to other ranks", recv_done, t);

	t->n = 0;
	return ret ? ret : x->failed ? x->code : 0;
}

/*
 * Between sends while the batch is read: Open MPI's shared memory moves a
 * large message only inside MPI calls, so without this the payloads
 * posted early would move only at the wait. 1: all posted completed.
 */
static int tp_progress(void *user)
{
	struct tp *t = user;
	struct mx *x = t->L->x;
	int n = 0;

	if (mx_test(x, t->req, (int)t->n, recv_done, t))
		return x->failed ? x->code : RL_E_MPI;
	for (size_t i = 0; i < t->n; i++)
		n += t->req[i] != MPI_REQUEST_NULL;
	return x->failed ? x->code : n == 0;
}

static int tp_agree(void *user, int *status)
{
	struct tp *t = user;
	struct mx *x = t->L->x;

	if (!t->reads_end)
		t->reads_end = mx_now();
	/* A rank canceled because another failed says nothing of its own. */
	if (*status && !x->failed && !(*status == RL_E_CANCELED && x->peer_failed))
		mx_fail(x, *status, "%s", rl_loader_errmsg(t->L->ld));
	*status = mx_agree(x, 0, NULL);
	return 0;
}

static const rl_transport_ops tp_ops = {
	.version = RL_TRANSPORT_V1, .size = sizeof(rl_transport_ops),
	.send = tp_send, .recv = tp_recv, .wait = tp_wait, .agree = tp_agree,
	.progress = tp_progress,
};

/* A shard complete (own reads, or transfers agreed): the user's callback. */
static void tp_shard(void *user, size_t shard)
{
	struct rl_mpi *m = ((struct mx_load *)user)->x->m;

	if (m->on_shard)
		m->on_shard(m->user, shard);
}

/* On the calling thread while the rank reads: a failure elsewhere stops it. */
static int tp_reading(void *user, uint64_t done, uint64_t total)
{
	struct mx_load *L = user;

	(void)done;
	(void)total;
	return mx_poll(L->x);
}

int mx_transport_load(struct mx_load *L)
{
	struct tp t = { .L = L };
	rl_load_stats ls = { .size = sizeof(ls) };
	double t0 = mx_now();
	uint64_t nb = 0;
	int ret;

	rl_loader_set_callbacks(L->ld, tp_shard, tp_reading, L);
	if (L->stream)
		rl_loader_set_piece_callback(L->ld, L->x->m->on_piece, L->x->m->piece_user);
	if ((ret = rl_loader_set_transport(L->ld, &tp_ops, &t))) {
		mx_fail(L->x, ret, "%s", rl_loader_errmsg(L->ld));
		ret = mx_agree(L->x, 0, NULL);
	} else {
		ret = rl_loader_run(L->ld, L->plan);
	}
	rl_loader_set_transport(L->ld, NULL, NULL);
	if (L->stream)
		rl_loader_set_piece_callback(L->ld, NULL, NULL);
	/* Every failure went through an agreement: m->err says it alike. */
	if (!ret && !rl_loader_get_stats(L->ld, &ls))
		L->st.bytes_read += ls.bytes_read;
	rl_plan_transfer_summary(L->plan, NULL, &nb, NULL);
	L->st.batches = nb;
	for (size_t i = 0; !ret && i < rl_plan_num_transfers(L->plan); i++) {
		rl_transfer_info ti;

		rl_plan_transfer(L->plan, i, &ti);
		L->st.transfers_rooted += ti.root == L->x->rank;
	}
	L->st.read_seconds = (t.reads_end ? t.reads_end : mx_now()) - t0;
	L->st.transfer_seconds = t.reads_end ? mx_now() - t.reads_end : 0;
	free(t.req);
	free(t.msg);
	return ret;
}
