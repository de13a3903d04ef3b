/*
 * cluster_load.c - rl_mpi_load(): the phases of a cluster load, each ending in an
 * agreement of every rank (mx.c), so that a failure anywhere stops every
 * rank at the next phase boundary, or sooner through a failure note:
 *
 *   check     the ranks see the same checkpoint (SHA-256 of names, sizes,
 *             headers; allgather);
 *   plan      each rank plans its process; the mesh has as many processes
 *             as the communicator ranks; every rank built the same
 *             transfers (digest, allgather);
 *   load      the rank's own reads, then the transfers batch by batch, in
 *             one run of the library's read-once executor over the MPI
 *             transport (transport_mpi.c): whole loads, device loads,
 *             loads that convert dtypes, and streaming loads (the
 *             transfers' bytes as pieces; the ranks plan with the least
 *             budget of those that stream, mx_stream_begin).
 *
 * Also the rl_mpi handle: parameters, callbacks, errors, statistics.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

#define TIMEOUT_MS_DEFAULT 600000
#define MX_PAGE 4096u

rl_mpi *rl_mpi_create(void)
{
	rl_mpi *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->timeout_ms = TIMEOUT_MS_DEFAULT;
	m->max_msg = INT_MAX;
	m->failed_rank = -1;
	if (!(m->tld = rl_loader_create())) {
		free(m);
		return NULL;
	}
	return m;
}

void rl_mpi_destroy(rl_mpi *m)
{
	if (!m)
		return;
	rl_loader_destroy(m->tld);
	free(m->want);
	free(m->stats);
	free(m);
}

int rl_mpi_set(rl_mpi *m, rl_mpi_param param, int64_t v)
{
	if (!m)
		return -EINVAL;
	switch (param) {
	case RL_MPI_TIMEOUT_MS:
		if (v < 1 || v > 7 * 24 * 3600 * 1000ll)
			return mx_err(m, RL_E_INVALID_ARG, "RL_MPI_TIMEOUT_MS %lld not in [1, 604800000]",
				      (long long)v);
		m->timeout_ms = v;
		return 0;
	case RL_MPI_MESSAGE_BYTES:
		if (v < 1 || v > INT_MAX)
			return mx_err(m, RL_E_INVALID_ARG, "RL_MPI_MESSAGE_BYTES %lld not in [1, %d]",
				      (long long)v, INT_MAX);
		m->max_msg = v;
		return 0;
	case RL_MPI_EXECUTOR:
		if (v == 0)
			return mx_err(m, RL_E_INVALID_ARG, "RL_MPI_EXECUTOR 0: libringload_mpi's own "
				      "batch loop was removed; every load runs the library's "
				      "read-once executor (1)");
		if (v != 1)
			return mx_err(m, RL_E_INVALID_ARG, "RL_MPI_EXECUTOR %lld not 1",
				      (long long)v);
		return 0;
	}
	return mx_err(m, RL_E_INVALID_ARG, "unknown MPI parameter %d", (int)param);
}

rl_loader *rl_mpi_transfer_loader(rl_mpi *m)
{
	return m ? m->tld : NULL;
}

int rl_mpi_set_callbacks(rl_mpi *m, rl_shard_fn on_shard, void *user)
{
	if (!m)
		return -EINVAL;
	m->on_shard = on_shard;
	m->user = user;
	return 0;
}

int rl_mpi_set_piece_callback(rl_mpi *m, rl_piece_fn on_piece, void *user)
{
	if (!m)
		return -EINVAL;
	m->on_piece = on_piece;
	m->piece_user = user;
	return 0;
}

int rl_mpi_set_abort(rl_mpi *m, rl_mpi_abort_fn fn, void *user)
{
	if (!m)
		return -EINVAL;
	m->abort_fn = fn;
	m->abort_user = user;
	return 0;
}

const char *rl_mpi_errmsg(const rl_mpi *m)
{
	return m ? m->err : "";
}

int rl_mpi_failed_rank(const rl_mpi *m)
{
	return m ? m->failed_rank : -1;
}

int rl_mpi_get_stats(const rl_mpi *m, int rank, rl_mpi_stats *out, size_t size)
{
	rl_mpi_stats t;

	if (!m || !out || rank < RL_TOTAL)
		return -EINVAL;
	if (!m->stats)
		return RL_E_STATE;
	if (rank >= m->nstats)
		return -EINVAL;
	if (rank >= 0) {
		t = m->stats[rank];
	} else {
		memset(&t, 0, sizeof(t));
		for (int r = 0; r < m->nstats; r++) {
			const rl_mpi_stats *s = &m->stats[r];

			t.bytes_read += s->bytes_read;
			t.bytes_predicted += s->bytes_predicted;
			t.bytes_sent += s->bytes_sent;
			t.bytes_received += s->bytes_received;
			t.transfers_rooted += s->transfers_rooted;
			t.batches = s->batches;
			t.plan_seconds = MX_MAX(t.plan_seconds, s->plan_seconds);
			t.read_seconds = MX_MAX(t.read_seconds, s->read_seconds);
			t.transfer_seconds = MX_MAX(t.transfer_seconds, s->transfer_seconds);
			t.total_seconds = MX_MAX(t.total_seconds, s->total_seconds);
		}
	}
	memcpy(out, &t, size < sizeof(t) ? size : sizeof(t));
	return 0;
}

/* ---------------------------------------------------------------- */
/* Phases                                                            */
/* ---------------------------------------------------------------- */

/*
 * Gathers every rank's n bytes at mine and agrees; *differs gets the first
 * rank whose bytes differ from rank 0's (-1: none). Every rank gathers
 * the same bytes, so every rank draws the same conclusion.
 */
static int same_everywhere(struct mx *x, const void *mine, size_t n, const char *what,
			   int *differs)
{
	unsigned char *all = malloc((size_t)x->size * n);
	MPI_Request r;
	int ret;

	*differs = -1;
	if (!all)
		mx_abort(x, "out of memory to compare the ranks' views");
	if (!all || MPI_Iallgather(mine, (int)n, MPI_BYTE, all, (int)n, MPI_BYTE, x->comm,
				   &r) != MPI_SUCCESS)
		mx_fail(x, RL_E_MPI, "MPI_Iallgather failed");
	else
		mx_wait(x, &r, 1, what, NULL, NULL);
	ret = mx_agree(x, 0, NULL);
	for (int q = 1; !ret && q < x->size && *differs < 0; q++)
		if (memcmp(all, all + n * q, n))
			*differs = q;
	free(all);
	return ret;
}

/* Every rank sees the checkpoint rank 0 sees. */
static int check_ckpt(struct mx *x, const rl_ckpt *ck)
{
	unsigned char mine[32] = { 0 };
	int ret, q;

	if (mx_ckpt_digest(ck, mine))
		mx_fail(x, -ENOMEM, "cannot compute the checkpoint's digest");
	ret = same_everywhere(x, mine, sizeof(mine), "the other ranks' checkpoint digests", &q);
	if (ret || q < 0)
		return ret;
	x->m->failed_rank = q;
	return mx_err(x->m, RL_E_CLUSTER_MISMATCH,
		      "rank %d sees a different checkpoint than rank 0 (file names, sizes or headers differ)",
		      q);
}

/* This rank's plan; every rank's mesh the communicator's size. */
static int build_plan(struct mx *x, const rl_ckpt *ck, const rl_spec *spec, rl_plan *plan)
{
	int64_t align = 0;
	int *nprocs = malloc((size_t)x->size * sizeof(*nprocs)), ret, mine = 0;

	if (!nprocs)
		return mx_fail(x, -ENOMEM, "out of memory");
	rl_plan_get(plan, RL_PLAN_TRANSFER_ALIGN, &align);
	if ((ret = rl_plan_set(plan, RL_PLAN_PROCESS, x->rank)) ||
	    (!align && (ret = rl_plan_set(plan, RL_PLAN_TRANSFER_ALIGN, 4096))) ||
	    (ret = rl_plan_build(plan, ck, spec)))
		mx_fail(x, ret, "%s", rl_plan_errmsg(plan));
	else
		mine = (int)rl_plan_num_processes(plan);
	ret = mx_agree(x, mine, nprocs);
	/* A mesh of another size: every rank that planned knows it; the
	 * message says so rather than "process 3 not in the mesh". */
	for (int q = 0; q < x->size && (ret == 0 || ret == RL_E_PEER || ret == RL_E_INVALID_ARG);
	     q++)
		if (nprocs[q] && nprocs[q] != x->size) {
			x->m->failed_rank = q;
			ret = mx_err(x->m, RL_E_SPEC_MESH,
				     "the mesh has %d processes but the communicator %d ranks (rank = process)",
				     nprocs[q], x->size);
			break;
		}
	free(nprocs);
	return ret;
}

/* Every rank built the same transfers (count and digest). */
static int check_transfers(struct mx *x, const rl_plan *plan)
{
	uint64_t mine[2] = { 0, 0 };
	int ret, q;

	rl_plan_transfer_summary(plan, &mine[0], NULL, &mine[1]);
	ret = same_everywhere(x, mine, sizeof(mine), "the other ranks' transfer digests", &q);
	if (ret || q < 0)
		return ret;
	x->m->failed_rank = q;
	return mx_err(x->m, RL_E_CLUSTER_MISMATCH,
		      "rank %d planned other transfers than rank 0 (different specs, plan parameters or files_of_process)",
		      q);
}

/* This rank's budget when ld streams to the piece callback, else
 * UINT64_MAX (a whole load, or a device loader: it streams to its
 * devices). */
static uint64_t own_budget(struct mx *x, rl_loader *ld)
{
	int64_t mode = 0;

	if (rl_loader_get(ld, RL_OPT_STAGING, &mode) || mode != RL_STAGING_STREAM ||
	    rl_loader_device_kind(ld))
		return UINT64_MAX;
	if (!x->m->on_piece)
		mx_fail(x, RL_E_STATE, "a streaming loader (RL_STAGING_STREAM) needs "
			"rl_mpi_set_piece_callback()");
	return (uint64_t)rl_loader_budget(ld);
}

/* Lowers plan parameter param to v when it is above. */
static int at_most(rl_plan *plan, rl_plan_param param, uint64_t v)
{
	int64_t now = 0;

	rl_plan_get(plan, param, &now);
	return (uint64_t)now > v ? rl_plan_set(plan, param, (int64_t)v) : 0;
}

/*
 * The ranks agree on the least budget of those that stream (one
 * allreduce) and plan batches of at most that many payload bytes
 * (RL_PLAN_BATCH_BYTES, which also cuts transfers that long) and requests
 * of at most a 32nd of it (RL_PLAN_CHUNK_BYTES, as a streaming loader's
 * rl_loader_request_bytes(): a read at a window's edge is read for both
 * windows): every plan stays alike, whatever the budgets, and a rank's
 * bytes in transit (the payloads it reads and receives in a batch) stay
 * under every rank's budget. No deadlock can come of it: a batch's
 * receives are all posted before its reads, and no rank waits on a
 * release to receive (transfer pieces hold no window).
 */
int mx_stream_begin(struct mx_load *L)
{
	struct mx *x = L->x;
	uint64_t mine = own_budget(x, L->ld), least = UINT64_MAX, chunk;
	MPI_Request r;
	int ret;

	L->stream = mine != UINT64_MAX;
	if (MPI_Iallreduce(&mine, &least, 1, MPI_UINT64_T, MPI_MIN, x->comm, &r) != MPI_SUCCESS)
		return mx_fail(x, RL_E_MPI, "MPI_Iallreduce failed");
	if ((ret = mx_wait(x, &r, 1, "the other ranks' staging budgets", NULL, NULL)))
		return ret;
	if (least == UINT64_MAX)
		return 0;       /* nobody streams: batches as planned */
	chunk = MX_MAX(least / 32 / MX_PAGE * MX_PAGE, MX_PAGE);
	if ((ret = at_most(L->plan, RL_PLAN_BATCH_BYTES, least)) ||
	    (ret = at_most(L->plan, RL_PLAN_CHUNK_BYTES, chunk)))
		return mx_fail(x, ret, "%s", rl_plan_errmsg(L->plan));
	return 0;
}

/* Every rank's statistics, for rl_mpi_get_stats(). */
static int gather_stats(struct mx_load *L)
{
	struct mx *x = L->x;
	rl_plan_stats ps;
	MPI_Request r;

	if (!rl_plan_get_stats(L->plan, x->rank, &ps))
		L->st.bytes_predicted = ps.read_bytes;
	free(x->m->stats);
	x->m->nstats = 0;
	if (!(x->m->stats = calloc((size_t)x->size, sizeof(L->st))))
		return mx_err(x->m, -ENOMEM, "out of memory");
	if (MPI_Iallgather(&L->st, sizeof(L->st), MPI_BYTE, x->m->stats, sizeof(L->st), MPI_BYTE,
			   x->comm, &r) != MPI_SUCCESS ||
	    mx_wait(x, &r, 1, "the other ranks' statistics", NULL, NULL))
		return mx_err(x->m, RL_E_MPI, "statistics could not be gathered");
	x->m->nstats = x->size;
	return 0;
}

int rl_mpi_load(rl_loader *ld, const rl_ckpt *ck, const rl_spec *spec, MPI_Comm comm,
		rl_plan *plan, rl_mpi *m)
{
	struct mx x;
	struct mx_load L;
	double t0 = mx_now(), t1;
	int ret;

	if (!ld || !ck || !plan || !m)
		return -EINVAL;
	memset(&L, 0, sizeof(L));
	L.x = &x;
	L.ld = ld;
	L.plan = plan;
	L.ck = ck;
	free(m->stats);
	m->stats = NULL;
	m->nstats = 0;
	if ((ret = mx_begin(&x, m, comm)))
		return ret;
	ret = check_ckpt(&x, ck);
	if (!ret && !mx_stream_begin(&L))
		ret = build_plan(&x, ck, spec, plan);
	else if (!ret)          /* this rank failed: the others learn it here */
		ret = mx_agree(&x, 0, NULL);
	if (!ret)
		ret = check_transfers(&x, plan);
	t1 = mx_now();
	L.st.plan_seconds = t1 - t0;
	if (!ret)
		ret = mx_transport_load(&L);
	if (!ret)
		ret = mx_verify(&x, ck);
	L.st.total_seconds = mx_now() - t0;
	if (!ret)
		ret = gather_stats(&L);
	rl_loader_set_callbacks(ld, NULL, NULL, NULL);
	mx_end(&x);
	return ret;
}
