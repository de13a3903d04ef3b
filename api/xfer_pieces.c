/*
 * xfer_pieces.c - the destination of a streaming loader's transfers: a
 * sink whose copy hands each payload's copy to the piece callback
 * (token 0, data valid while the callback runs) instead of writing a
 * staging area, which a streaming load does not have.
 *
 * A copy whose source runs are contiguous and plain is one piece pointing
 * into the payload (the batch buffer or the received bytes). Strided or
 * converting runs go through the host sink's copy (the one rule,
 * io_copy_runs, and sink/convert.c) into a packing buffer of at most
 * XP_PACK bytes (and the streaming budget), as many whole runs per piece
 * as fit; a run longer than that is a piece of its own (a converted one
 * grows the buffer to it). The executor calls copy on the calling thread
 * only, one at a time: the callback's contract holds.
 */
#include <errno.h>

#include "loader_internal.h"
#include "xfer_pieces.h"

#define XP_PACK (1u << 20)

/* Piece (c's shard, from offset off) of len bytes at data to the callback. */
static int give(struct ld_xpieces *xp, const struct cm_copy *c, uint64_t off,
		const uint8_t *data, uint64_t len, struct cm_err *e)
{
	const struct pl_shard *sh = &xp->ex->shards[c->shard];
	rl_piece p = { .shard = c->shard, .device = sh->dev, .offset = off, .length = len,
		       .data = (void *)data, .token = 0 };

	if (xp->failed)
		return RL_E_CANCELED;
	if (xp->ld->opt.on_piece(xp->ld->opt.piece_user, &p)) {
		xp->failed = 1;
		return cm_err_set(e, RL_E_CANCELED, "the piece callback canceled the load "
				  "(a transfer's piece of shard %u, offset %llu, %llu bytes)",
				  c->shard, (unsigned long long)off, (unsigned long long)len);
	}
	return 0;
}

/* A packing buffer of at least len bytes (kept, grown when short). */
static uint8_t *pack_get(struct ld_xpieces *xp, uint64_t len, struct cm_err *e)
{
	if (xp->pack && xp->pack_cap >= len)
		return xp->pack;
	cm_free(xp->pack);
	xp->pack_cap = 0;
	if (len > SIZE_MAX || !(xp->pack = cm_malloc((size_t)len))) {
		cm_err_set(e, -ENOMEM, "read once: out of memory for a packing buffer of %llu bytes",
			   (unsigned long long)len);
		return NULL;
	}
	xp->pack_cap = len;
	return xp->pack;
}

/* Runs i .. i + n of c (source at src) packed, converted if c converts,
 * into the packing buffer; NULL with e set. */
static const uint8_t *pack(struct ld_xpieces *xp, const struct cm_copy *c, const uint8_t *src,
			   uint64_t i, uint64_t n, struct cm_err *e)
{
	struct cm_copy cc = *c;
	uint64_t bytes = n * cm_copy_out(c, c->len);
	const struct eng_sink *s;
	uint8_t *p = pack_get(xp, bytes, e);

	if (!p)
		return NULL;
	s = sink_host_init(&xp->host, 1, &xp->pack, &xp->pack_cap);
	cc.src = 0;
	cc.count = (uint32_t)n;
	cc.dst = 0;
	cc.dev = 0;
	if (s->ops->copy(s->state, 0, &cc, src + c->src + i * c->src_stride, e))
		return NULL;
	return p;
}

static int xp_copy(void *state, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		   struct cm_err *e)
{
	struct ld_xpieces *xp = state;
	const struct pl_shard *sh;
	uint64_t off, out, per;

	(void)worker;
	if (c->shard >= xp->ex->nshards || c->dst < xp->ex->shards[c->shard].offset)
		return cm_err_set(e, RL_E_STATE, "read once: a transfer's copy to shard %u outside it",
				  c->shard);
	sh = &xp->ex->shards[c->shard];
	off = c->dst - sh->offset;
	if (!c->count || !c->len)
		return 0;       /* zero-byte shards come from the own reads */
	if (c->op == CM_OP_PLAIN && (c->count == 1 || c->src_stride == c->len))
		return give(xp, c, off, src + c->src, (uint64_t)c->count * c->len, e);
	out = cm_copy_out(c, c->len);
	per = out * 2 > xp->pack_len ? 1 : xp->pack_len / out;
	for (uint64_t i = 0, n; i < c->count; i += n) {
		const uint8_t *data;
		int ret;

		n = CM_MIN(per, c->count - i);
		data = n == 1 && c->op == CM_OP_PLAIN ? src + c->src + i * c->src_stride :
		       pack(xp, c, src, i, n, e);
		if (!data)
			return e->code ? e->code : -ENOMEM;
		if ((ret = give(xp, c, off + i * out, data, n * out, e)))
			return ret;
	}
	return 0;
}

static const struct eng_sink_ops xp_ops = {
	.version = ENG_SINK_V1,
	.size = sizeof(struct eng_sink_ops),
	.name = "pieces",
	.copy = xp_copy,
};

const struct eng_sink *ld_xpieces_init(struct ld_xpieces *xp, rl_loader *ld,
				       const struct pl_exec *ex)
{
	int64_t budget = rl_loader_budget(ld);

	*xp = (struct ld_xpieces){ .ld = ld, .ex = ex };
	xp->pack_len = budget > 0 ? CM_MIN((uint64_t)budget, XP_PACK) : XP_PACK;
	xp->sink = (struct eng_sink){ .ops = &xp_ops, .state = xp, .ndevs = ex->ndevs };
	return &xp->sink;
}

void ld_xpieces_free(struct ld_xpieces *xp)
{
	cm_free(xp->pack);
	xp->pack = NULL;
	xp->pack_cap = 0;
}
