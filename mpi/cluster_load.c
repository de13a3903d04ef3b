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
 *   own       each rank reads what it reads for itself, with the caller's
 *             loader (failure notes cancel it early);
 *   batches   the transfers, batch by batch: a whole load's in the library's
 *             read-once executor over the MPI transport (transport_mpi.c,
 *             with its own part: RL_MPI_EXECUTOR 1, the default); a
 *             streaming load's, or with RL_MPI_EXECUTOR 0, in batch.c.
 *
 * With RL_MPI_EXECUTOR, and always for a loader with a device (its
 * transfers land in device memory) or a plan that converts dtypes (its
 * transfers' copies convert), own and batches are one run of the
 * library's read-once executor over the MPI transport (transport_mpi.c).
 *
 * Also the rl_mpi handle: parameters, callbacks, errors, statistics.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

#define TIMEOUT_MS_DEFAULT 600000

rl_mpi *rl_mpi_create(void)
{
	rl_mpi *m = calloc(1, sizeof(*m));

	if (!m)
		return NULL;
	m->timeout_ms = TIMEOUT_MS_DEFAULT;
	m->max_msg = INT_MAX;
	m->failed_rank = -1;
	m->executor = 1;
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
		if (v != 0 && v != 1)
			return mx_err(m, RL_E_INVALID_ARG, "RL_MPI_EXECUTOR %lld not 0 or 1",
				      (long long)v);
		m->executor = (int)v;
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

/* Bytes the transfers bring each shard, and the staging they land in. */
static int prepare_transfers(struct mx_load *L)
{
	size_t nsh = rl_plan_num_shards(L->plan);
	unsigned ndev = rl_plan_num_devices(L->plan);

	L->shard_want = calloc(nsh + 1, sizeof(uint64_t));
	L->shard_have = calloc(nsh + 1, sizeof(uint64_t));
	L->staging = calloc(ndev + 1, sizeof(*L->staging));
	if (!L->shard_want || !L->shard_have || !L->staging ||
	    mx_queue_init(&L->q, rl_plan_num_transfers(L->plan)))
		return -ENOMEM;
	for (unsigned d = 0; d < ndev; d++)
		L->staging[d] = rl_loader_staging(L->ld, d, NULL);
	for (size_t t = 0; t < rl_plan_num_transfers(L->plan); t++) {
		rl_transfer_info ti;

		rl_plan_transfer(L->plan, t, &ti);
		for (size_t j = 0; j < ti.ncopies; j++) {
			rl_copy_info c;

			rl_plan_transfer_copy(L->plan, t, j, &c);
			L->shard_want[c.shard] += c.count * c.len;
		}
	}
	return 0;
}

static void own_shard(void *user, size_t shard)
{
	mx_report(user, shard);
}

/* On the calling thread while the rank reads: a failure elsewhere stops it. */
static int own_progress(void *user, uint64_t done, uint64_t total)
{
	struct mx_load *L = user;

	(void)done;
	(void)total;
	return mx_poll(L->x);
}

/* The rank's own reads, into the caller's loader and staging. */
static int own_reads(struct mx_load *L)
{
	struct mx *x = L->x;
	rl_load_stats ls = { .size = sizeof(ls) };
	double t0 = mx_now();
	int ret;

	rl_loader_set_callbacks(L->ld, own_shard, own_progress, L);
	if (L->stream)
		rl_loader_set_piece_callback(L->ld, x->m->on_piece, x->m->piece_user);
	ret = rl_loader_run(L->ld, L->plan);
	if (L->stream)
		rl_loader_set_piece_callback(L->ld, NULL, NULL);
	if (ret && !(ret == RL_E_CANCELED && x->peer_failed))
		mx_fail(x, ret, "%s", rl_loader_errmsg(L->ld));
	if (!ret && !rl_loader_get_stats(L->ld, &ls))
		L->st.bytes_read += ls.bytes_read;
	L->st.read_seconds = mx_now() - t0;
	if (!ret && prepare_transfers(L))
		mx_fail(x, -ENOMEM, "out of memory");
	return mx_agree(x, 0, NULL);
}

/* Every batch; then every shard transfers fill must be complete. */
static int transfers(struct mx_load *L)
{
	uint64_t nb = 0;
	double t0 = mx_now();
	int ret = 0;

	rl_plan_transfer_summary(L->plan, NULL, &nb, NULL);
	L->st.batches = nb;
	for (uint64_t b = 0; b < nb && !ret; b++)
		ret = mx_batch(L, b);
	for (size_t s = 0; !ret && s < rl_plan_num_shards(L->plan); s++)
		if (L->shard_have[s] != L->shard_want[s])
			ret = mx_err(L->x->m, RL_E_STATE, "shard %zu: transfers brought %llu of %llu bytes",
				     s, (unsigned long long)L->shard_have[s],
				     (unsigned long long)L->shard_want[s]);
	L->st.transfer_seconds = mx_now() - t0;
	return ret;
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

/*
 * Whether plan converts some shard (its dtype not the stored one: the
 * plan's or the spec's dtype): only the executor converts what the
 * transfers bring. Shards come in tensor order on each device, so the
 * search goes on from the last tensor found.
 */
static int plan_converts(const rl_plan *plan, const rl_ckpt *ck)
{
	size_t nt = rl_ckpt_num_tensors(ck), t = 0;

	for (size_t s = 0; s < rl_plan_num_shards(plan); s++) {
		rl_shard_info si;
		rl_tensor_info ti;

		if (rl_plan_shard(plan, s, &si))
			continue;
		for (size_t k = 0; k < nt; k++, t = (t + 1) % nt)
			if (!rl_ckpt_tensor(ck, t, &ti) && !strcmp(ti.name, si.name))
				break;
		if (nt && !rl_ckpt_tensor(ck, t, &ti) && !strcmp(ti.name, si.name) &&
		    ti.dtype != si.dtype)
			return 1;
	}
	return 0;
}

static void load_free(struct mx_load *L)
{
	mx_queue_free(&L->q);
	free(L->shard_want);
	free(L->shard_have);
	free(L->staging);
	free(L->buf);
	free(L->pack);
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
	if (!ret && L.stream && plan_converts(plan, ck)) {
		mx_fail(&x, RL_E_DTYPE, "a streaming load (the piece callback) with dtype conversion: "
			"its transfers' pieces move as stored; load whole or to a device");
		ret = mx_agree(&x, 0, NULL);
	}
	/* Only the executor delivers transfers to devices and converts them. */
	if (!ret && (L.stream || m->executor || rl_loader_device_kind(ld) ||
		     plan_converts(plan, ck))) {
		ret = mx_transport_load(&L);
	} else if (!ret) {      /* batch.c */
		ret = own_reads(&L);
		if (!ret)
			ret = transfers(&L);
	}
	if (!ret)
		ret = mx_verify(&x, ck);
	L.st.total_seconds = mx_now() - t0;
	if (!ret)
		ret = gather_stats(&L);
	rl_loader_set_callbacks(ld, NULL, NULL, NULL);
	load_free(&L);
	mx_end(&x);
	return ret;
}
