/*
 * xfer_dev.c - read-once payloads onto a device (xfer_dev.h): each copy
 * staged in a pinned half window by the host sink, then one plain device
 * copy of the staged bytes.
 */
#include <errno.h>
#include <string.h>

#include "common.h"
#include "window.h"
#include "xfer_dev.h"

/* A device copy moves at most this many bytes (cm_copy.len is 32 bits). */
#define XD_COPY_MAX (1ull << 30)

/* The half being filled fenced, the other one waited for and emptied. */
static int xd_flip(struct ex_xdev *d, struct cm_err *e)
{
	const struct eng_sink *dv = d->device;
	int ret = dv->ops->fence(dv->state, 0, &d->ticket[d->cur], e);

	if (ret < 0)
		return ret;
	d->held[d->cur] = 1;
	d->cur ^= 1;
	d->used = 0;
	if (!d->held[d->cur])
		return 0;
	d->held[d->cur] = 0;
	return dv->ops->wait(dv->state, 0, d->ticket[d->cur], e);
}

/* Destination bytes [at, at + n) of copy c (its own positions) staged at
 * pos of the window by the host sink, from the payload at src. */
static int xd_stage(struct ex_xdev *d, const struct cm_copy *c, const uint8_t *src, uint64_t at,
		    uint64_t n, uint64_t pos, struct cm_err *e)
{
	struct ex_range w = { c->dev, c->dst + at, c->dst + at + n, c->dst + at - pos };
	struct cm_copy out[3];
	unsigned k = ex_clip_copy(c, &w, out);

	for (unsigned i = 0; i < k; i++) {
		int ret = d->stage->ops->copy(d->stage->state, 0, out + i, src, e);

		if (ret < 0)
			return ret;
	}
	return 0;
}

/* Copy c of a payload at src: to the window, then to the device, a half
 * window at a time (whole elements of a conversion's output). */
static int xd_copy(void *sink, unsigned worker, const struct cm_copy *c, const uint8_t *src,
		   struct cm_err *e)
{
	struct ex_xdev *d = sink;
	uint64_t total = cm_copy_bytes(c), unit = c->op ? cm_op_osize(c->op) : 1, done = 0;
	const struct pl_shard *sh = c->shard < d->ex->nshards ? d->ex->shards + c->shard : NULL;
	int ret;

	(void)worker;
	if (!sh || c->dev != sh->dev || c->dst < sh->offset || c->dst - sh->offset > sh->nbytes ||
	    total > sh->nbytes - (c->dst - sh->offset))
		return cm_err_set(e, RL_E_STATE, "read once onto a device: a copy past shard %u",
				  c->shard);
	while (done < total) {
		uint64_t pos = d->cur * d->half + d->used, n;
		struct cm_copy dc = { .count = 1, .dev = c->dev, .shard = c->shard };

		if (d->half - d->used < unit) {
			if ((ret = xd_flip(d, e)) < 0)
				return ret;
			continue;
		}
		n = CM_MIN(total - done, d->half - d->used);
		n -= n % unit;
		if ((ret = xd_stage(d, c, src, done, n, pos, e)) < 0)
			return ret;
		dc.len = dc.src_stride = (uint32_t)n;
		dc.dst = d->device_dst[c->shard] + (c->dst - sh->offset) + done;
		ret = d->device->ops->copy(d->device->state, 0, &dc, d->window + pos, e);
		if (ret < 0)
			return ret;
		d->used += n;
		done += n;
	}
	return 0;
}

static void xd_shard_done(void *sink, size_t shard)
{
	struct ex_xdev *d = sink;

	d->device->ops->shard_done(d->device->state, shard);
}

static int xd_finish(void *sink, int ok, struct cm_err *e)
{
	struct ex_xdev *d = sink;

	d->used = 0;
	d->cur = 0;
	d->held[0] = d->held[1] = 0;
	return d->device->ops->finish(d->device->state, ok, e);
}

static const struct eng_sink_ops xd_ops = {
	.version = ENG_SINK_V1,
	.size = sizeof(struct eng_sink_ops),
	.name = "read once onto a device",
	.copy = xd_copy,
	.shard_done = xd_shard_done,
	.finish = xd_finish,
};

const struct eng_sink *ex_xdev_sink(struct ex_xdev *d)
{
	/* 8-byte halves: room for a whole element of every dtype */
	d->half = cm_align_down(CM_MIN(d->window_len / 2, XD_COPY_MAX), 8);
	if (d->half < 8)
		return NULL;
	d->used = 0;
	d->cur = 0;
	d->held[0] = d->held[1] = 0;
	d->sink = (struct eng_sink){ &xd_ops, d, d->device->ndevs };
	return &d->sink;
}
