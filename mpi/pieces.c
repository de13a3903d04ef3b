/*
 * pieces.c - a cluster load into a streaming loader (RL_STAGING_STREAM):
 * no rank holds a whole staging area, so what transfers bring is handed to
 * the runtime as pieces, as the rank's own reads are.
 *
 *   budgets   before planning, the ranks agree on the least budget of
 *             those that stream (one allreduce) and plan batches of at
 *             most that many payload bytes (RL_PLAN_BATCH_BYTES, which
 *             also cuts transfers that long) and requests of at most a
 *             32nd of it (RL_PLAN_CHUNK_BYTES, as a streaming loader's
 *             rl_loader_request_bytes(): a read at a window's edge is read
 *             for both windows): every plan stays alike, whatever the
 *             budgets, and a rank's bytes in transit (the payloads it
 *             reads and receives in a batch) stay under every rank's
 *             budget;
 *   own       the rank's own reads stream through its loader's windows
 *             (shards that transfers fill get no pieces there);
 *   received  a payload, read here or received (into the batch buffer:
 *             never straight into shards, there are none), goes out as
 *             pieces on the calling thread: a copy whose source runs are
 *             contiguous is one piece pointing into the payload; strided
 *             runs are packed into a buffer of at most 1 MiB (and the
 *             agreed budget), as many whole runs as fit per piece; runs
 *             longer than half of it are pieces of their own.
 *
 * Pieces of transfers carry token 0: their bytes are valid until the
 * callback returns (the batch buffer and the packing buffer are reused);
 * rl_loader_release() of them does nothing. No deadlock can come of the
 * budgets: a batch's receives are all posted before its reads, its memory
 * is allocated whole before anything moves, and no rank waits on a
 * release to receive.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "mx.h"

#define PACK_MAX (1u << 20)
#define PAGE 4096u

/* This rank's budget when ld streams to the piece callback, else
 * UINT64_MAX (a device loader streams to its devices: a whole load). */
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
	L->pack_len = (size_t)MX_MIN(least, PACK_MAX);
	chunk = MX_MAX(least / 32 / PAGE * PAGE, PAGE);
	if ((ret = at_most(L->plan, RL_PLAN_BATCH_BYTES, least)) ||
	    (ret = at_most(L->plan, RL_PLAN_CHUNK_BYTES, chunk)))
		return mx_fail(x, ret, "%s", rl_plan_errmsg(L->plan));
	return 0;
}

/* One piece to the runtime; a non-zero return cancels the load. */
static int give(struct mx_load *L, const rl_copy_info *c, uint64_t off, const void *data,
		uint64_t len)
{
	struct rl_mpi *m = L->x->m;
	rl_piece p = { .shard = c->shard, .device = c->device, .offset = off, .length = len,
		       .data = (void *)data, .token = 0 };

	if (L->x->failed || L->x->peer_failed)
		return -1;
	if (m->on_piece(m->piece_user, &p))
		return mx_fail(L->x, RL_E_CANCELED, "the piece callback canceled the load");
	return 0;
}

/* Strided runs i .. i + n of c packed into L->pack; NULL without memory. */
static const uint8_t *pack(struct mx_load *L, const rl_copy_info *c, const uint8_t *src,
			   uint64_t i, uint64_t n)
{
	if (!L->pack && !(L->pack = malloc(L->pack_len))) {
		mx_fail(L->x, -ENOMEM, "out of memory for a packing buffer of %zu bytes", L->pack_len);
		return NULL;
	}
	for (uint64_t k = 0; k < n; k++)
		memcpy(L->pack + k * c->len, src + c->src + (i + k) * c->src_stride, c->len);
	return L->pack;
}

void mx_piece_copy(struct mx_load *L, const rl_copy_info *c, const uint8_t *src)
{
	rl_shard_info si;
	uint64_t off, per;

	if (rl_plan_shard(L->plan, c->shard, &si) || c->dst < si.offset) {
		mx_fail(L->x, RL_E_STATE, "transfer copy to shard %zu outside it", c->shard);
		return;
	}
	off = c->dst - si.offset;
	if (!c->count || !c->len)
		return;         /* nothing: zero-byte shards come from the own reads */
	if (c->count == 1 || c->src_stride == c->len) {
		give(L, c, off, src + c->src, c->count * c->len);
		return;
	}
	per = c->len * 2 > L->pack_len ? 1 : L->pack_len / c->len;
	for (uint64_t i = 0; i < c->count;) {
		uint64_t n = MX_MIN(per, c->count - i);
		const uint8_t *data = n == 1 ? src + c->src + i * c->src_stride :
				      pack(L, c, src, i, n);

		if (!data || give(L, c, off + i * c->len, data, n * c->len))
			return;
		i += n;
	}
}
