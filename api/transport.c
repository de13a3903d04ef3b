/*
 * transport.c - rl_loader_set_transport() of ringload.h, and a run's
 * transfers over it: the process's own reads agreed, then the read-once
 * executor (exec/xfer_exec.c) with host sinks over the run's staging and
 * over each batch buffer; onto a device loader's devices through its
 * pinned window pool (exec/xfer_dev.c); a streaming loader's as pieces
 * to its callback (xfer_pieces.c).
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "loader_internal.h"
#include "../sink/host.h"
#include "../exec/xfer_dev.h"
#include "xfer_pieces.h"

int rl_loader_set_transport(rl_loader *ld, const rl_transport_ops *ops, void *user)
{
	if (!ld)
		return -EINVAL;
	cm_err_clear(&ld->err);
	if (!ops) {
		ld->opt.has_transport = 0;
		return 0;
	}
	if (ops->version != RL_TRANSPORT_V1)
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "transport: version %u, %u expected",
				  ops->version, RL_TRANSPORT_V1);
	if (ops->size < RL_TRANSPORT_V1_SIZE)
		return cm_err_set(&ld->err, RL_E_INVALID_ARG, "transport: size %u, at least %zu expected",
				  ops->size, (size_t)RL_TRANSPORT_V1_SIZE);
	if (!ops->send || !ops->recv || !ops->wait || !ops->agree)
		return cm_err_set(&ld->err, RL_E_INVALID_ARG,
				  "transport: the %s op is NULL", !ops->send ? "send" :
				  !ops->recv ? "recv" : !ops->wait ? "wait" : "agree");
	ld->opt.tp = (struct ex_transport){ ops->send, ops->recv, ops->wait, ops->agree, NULL, user };
	/* A caller built before the progress op: its table ends before it. */
	if (ops->size >= offsetof(rl_transport_ops, progress) + sizeof(ops->progress))
		ld->opt.tp.progress = ops->progress;
	ld->opt.has_transport = 1;
	return 0;
}

/* A host sink over one batch buffer at a time. */
struct bufsink {
	struct sink_host h;
	uint8_t *area;
	uint64_t bytes;
};

static const struct eng_sink *buffer_sink(void *user, uint8_t *buf, uint64_t len)
{
	struct bufsink *b = user;

	b->area = buf;
	b->bytes = len;
	return sink_host_init(&b->h, 1, &b->area, &b->bytes);
}

struct tp_run {
	struct bufsink bs;
	rl_loader *ld;
	const struct pl_exec *ex;
};

static const struct eng_sink *tp_buffer(void *user, uint8_t *buf, uint64_t len)
{
	return buffer_sink(&((struct tp_run *)user)->bs, buf, len);
}

/* One more file in the run's statistics (ld->last.files, ld->last.hash): 0 or
 * -ENOMEM (what was grown stays, unused). */
static int add_file(rl_loader *ld, uint32_t file)
{
	struct ld_hashrun *h = &ld->last.hash;
	size_t n = ld->last.nfiles + 1;
	void *p;

	if (h->nfiles != ld->last.nfiles)
		return -ENOMEM; /* never: both are the run's plan's */
	if ((p = cm_reallocarray(ld->last.files, n, sizeof(*ld->last.files))))
		ld->last.files = p;
	if (p && (p = cm_reallocarray(ld->last.file_index, n, sizeof(*ld->last.file_index))))
		ld->last.file_index = p;
	if (p && (p = cm_reallocarray(h->hash, n, sizeof(*h->hash))))
		h->hash = p;
	if (p && (p = cm_reallocarray(h->want, n, sizeof(*h->want))))
		h->want = p;
	if (p && (p = cm_reallocarray(h->got, n, sizeof(*h->got))))
		h->got = p;
	if (p && (p = cm_reallocarray(h->state, n, sizeof(*h->state))))
		h->state = p;
	if (!p)
		return -ENOMEM;
	memset(&ld->last.files[n - 1], 0, sizeof(*ld->last.files));
	ld->last.file_index[n - 1] = file;
	h->hash[n - 1] = 0;
	h->state[n - 1] = RL_SHA256_NONE;
	ld->last.nfiles = h->nfiles = n;
	return 0;
}

/*
 * A file this process read a part of for others: listed in the run's
 * file statistics, and, when a SHA-256 is expected of it that the run did
 * not check, counted unchecked (RL_SHA256_PARTIAL), as a file the run's
 * own reads read in part.
 */
static int tp_file(void *user, const char *path, uint32_t file, struct cm_err *e)
{
	struct tp_run *r = user;
	rl_loader *ld = r->ld;
	uint8_t sha[32];
	size_t f = 0;
	int how;

	while (f < ld->last.nfiles && ld->last.file_index[f] != file)
		f++;
	if (f == ld->last.nfiles && add_file(ld, file))
		return cm_err_set(e, -ENOMEM, "out of memory");
	if (ld->last.hash.state[f] != RL_SHA256_NONE)
		return 0;       /* decided by the run's own reads */
	how = ld_hash_expected(ld->opt.expect, ld->opt.nexpect, ld->opt.sha256_hf, r->ex, path, sha, e);
	if (how < 0)
		return how;
	if (how) {
		ld->last.hash.state[f] = RL_SHA256_PARTIAL;
		ld->last.hash.unchecked++;
	}
	return 0;
}

static void tp_shard(void *user, size_t shard)
{
	rl_loader *ld = ((struct tp_run *)user)->ld;

	ld->opt.on_shard(ld->opt.user, shard);
}

/*
 * A device load's destination: the device sink through the pinned
 * window pool, staged by a host sink over the pool (exec/xfer_dev.c).
 * NULL with ld->err set.
 */
static const struct eng_sink *dev_dst(rl_loader *ld, const struct pl_exec *ex,
				      struct ex_xdev *xd, struct sink_host *stage)
{
	const struct eng_sink *s;

	ld_dev_device(ld, &xd->device, &xd->device_dst);
	ld_stream_pinned(ld, &xd->window, &xd->window_len);
	xd->ex = ex;
	xd->stage = sink_host_init(stage, 1, &xd->window, &xd->window_len);
	if (!(s = ex_xdev_sink(xd)))
		cm_err_set(&ld->err, RL_E_STAGING, "read once onto a device: a window pool of "
			   "%llu bytes", (unsigned long long)xd->window_len);
	return s;
}

/* The transfers of pp into the run's staging or devices (own reads
 * succeeded). */
static int transfers(rl_loader *ld, const struct pl_plan *pp, const struct pl_exec *ex,
		     uint64_t chunk)
{
	struct tp_run r = { .ld = ld, .ex = ex };
	struct ex_xfer_exec x = { .p = pp, .t = &ld->opt.tp, .eo = ld->opt.eo, .user = &r,
				  .chunk = CM_MIN(chunk, ld->opt.eo.inflight_bytes),
				  .buffer_sink = tp_buffer, .on_file = tp_file,
				  .on_shard = ld->opt.on_shard ? tp_shard : NULL };
	struct sink_host host;
	struct ex_xdev xd = { 0 };
	struct ld_xpieces xp = { .pack = NULL };
	uint8_t **staging = cm_calloc(ex->ndevs + 1, sizeof(*staging));
	int ret;

	if (staging && ld->deliver.dev) {
		x.dst = dev_dst(ld, ex, &xd, &host);
		x.on_shard = NULL; /* the device sink reports shards in place */
	} else if (staging && ld->opt.staging_mode == RL_STAGING_STREAM) {
		x.dst = ld_xpieces_init(&xp, ld, ex);
		x.on_shard = NULL; /* pieces, not shards, as the own reads */
	}
	if (!staging || (ld->deliver.dev && !x.dst)) {
		cm_free(staging);
		return ex_xfer_agree(&ld->opt.tp, staging ? RL_E_STAGING :
				     cm_err_set(&ld->err, -ENOMEM, "out of memory"), "set-up",
				     &ld->err);
	}
	for (unsigned d = 0; d < ex->ndevs && d < ld->last.nareas; d++)
		staging[d] = ld->last.areas[d].ptr;
	if (!x.dst)
		x.dst = sink_host_init(&host, ex->ndevs, staging, ex->staging_bytes);
	ret = ex_xfer_execute(&x, &ld->err);
	ld->last.stats.bytes_read += x.read;
	ld->last.stats.files_unchecked = ld->last.hash.unchecked;
	ld_xpieces_free(&xp);
	cm_free(staging);
	return ret;
}

int ld_transport_run(rl_loader *ld, const struct pl_plan *pp, uint64_t chunk, int ret)
{
	struct pl_exec ex;

	if (!ld->opt.has_transport)
		return ret;
	ret = ex_xfer_agree(&ld->opt.tp, ret, "own reads", &ld->err);
	if (!ret) {
		pl_plan_exec(pp, &ex);
		ret = transfers(ld, pp, &ex, chunk);
	}
	ld->last.failed = ret < 0;
	if (ret < 0 && ld->deliver.dev) /* a failed load keeps no device memory */
		ld_dev_done(ld, 0, NULL);
	if (ret == 0)
		cm_err_clear(&ld->err);
	return ret;
}
