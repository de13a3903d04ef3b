/*
 * execute.c - running a program (execute.h): the engine loop of a load.
 * Whole loads are one engine run; streaming loads one engine session
 * (files, workers, rings and the windows' registration set up once) and a
 * run per batch on it. Pieces leave a window only after its batch's run
 * returned; with two windows the runtime (or a device's copies) drains
 * one while the other is read.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "execute.h"
#include "lanes.h"
#include "run.h"

/* Fixed regions of a window pool: windows of at most EX_FIXED_MAX bytes
 * each (io_uring's limit for one registered buffer). */
#define EX_FIXED_MAX (1ull << 30)
/* A device copy moves at most this many bytes (cm_copy.len is 32 bits). */
#define EX_DEVICE_COPY (1ull << 30)

/* One execution's state. */
struct xrun {
	struct ex_exec *x;
	struct cm_err *e;
	struct eng *eng;
	struct eng_session *sess;
	struct eng_fixed *fixed;
	unsigned nfixed;
	struct ex_run run;      /* the job builder and the checksum pass */
	struct eng_opts eo;     /* streaming: the engine's options */
	int lanes;              /* streaming on two lanes (exec/lanes.h) */
	uint64_t total, base;   /* progress: the plan's bytes, batches done */
	size_t win_of[EX_WPOOL_MAX]; /* device loads: the program window in each slot */
};

/* ------------------------------------------------------------------ */
/* A whole load */

static void x_shard(void *user, size_t shard)
{
	struct ex_exec *x = user;

	x->on_shard(x->user, shard);
}

static int x_progress(void *user, uint64_t done, uint64_t total)
{
	struct ex_exec *x = user;

	return x->on_progress(x->user, done, total);
}

/* The one batch into x->sink; bounce buffers as large as its largest
 * read. */
static int run_whole(struct xrun *xr)
{
	struct ex_exec *x = xr->x;
	const struct ex_program *p = x->prog;
	struct eng_opts eo = x->eo;
	struct eng_job job;
	int ret;

	eo.buffer_bytes = (uint32_t)CM_MIN(CM_MAX(x->ex->max_read, p->max_fill), 1u << 30);
	xr->run.on_shard = x->on_shard ? x_shard : NULL;
	xr->run.on_progress = x->on_progress ? x_progress : NULL;
	xr->run.user = x;
	ret = ex_run_hash(&xr->run, x->ex, p->hashed, eo.inflight_bytes, xr->e);
	if (ret == 0)
		ret = eng_create(&eo, &xr->eng, xr->e);
	if (ret == 0) {
		ex_run_job(&xr->run, &job, x->ex, p->batches, x->sink, p->nshards, p->shard_bytes,
			   x->file_stats);
		ret = eng_run(xr->eng, &job, &x->stats, xr->e);
	}
	x->runs = 1;
	return ret;
}

/* ------------------------------------------------------------------ */
/* A streaming load: the engine session */

static int s_progress(void *user, uint64_t done, uint64_t total)
{
	struct xrun *xr = user;
	struct ex_exec *x = xr->x;

	(void)total;
	if (ex_wpool_canceled(x->pool))
		return 1;
	if (!x->on_progress)
		return 0;
	return x->on_progress(x->user, CM_MIN(xr->base + done, xr->total), xr->total);
}

/* The windows cut into regions io_uring can register. */
static int fixed_regions(struct xrun *xr)
{
	const struct ex_wpool *pool = xr->x->pool;
	uint64_t per = (pool->slot_bytes + EX_FIXED_MAX - 1) / EX_FIXED_MAX;

	xr->fixed = cm_calloc((size_t)(per * pool->nslots) + 1, sizeof(*xr->fixed));
	if (!xr->fixed)
		return -ENOMEM;
	for (unsigned k = 0; k < pool->nslots; k++)
		for (uint64_t off = 0; off < pool->slot_bytes; off += EX_FIXED_MAX) {
			struct eng_fixed *f = xr->fixed + xr->nfixed++;

			f->base = pool->slot[k].ptr + off;
			f->len = (size_t)CM_MIN(EX_FIXED_MAX, pool->slot_bytes - off);
		}
	return 0;
}

/* One engine session for every batch. */
static int begin(struct xrun *xr)
{
	struct ex_exec *x = xr->x;
	struct ex_batch all;
	struct eng_stats es;
	struct eng_job job;
	int ret;

	if (fixed_regions(xr) < 0)
		return cm_err_set(xr->e, -ENOMEM, "out of memory");
	ex_run_files_job(&xr->run, &job, &all, x->ex, x->file_stats);
	ret = eng_session_begin(xr->eng, &job, &x->prog->needs, xr->fixed, xr->nfixed, &es,
				&xr->sess, xr->e);
	x->runs = 1;
	eng_stats_merge(&x->stats, &es, ENG_MERGE_BATCHES); /* set-up time, notes */
	if (ret == 0)
		x->registered = eng_session_fixed(xr->sess, x->why, sizeof(x->why));
	return ret;
}

/* Two lanes (exec/lanes.h) where they help and nothing needs one
 * session: two windows, pieces for the runtime (a device sink's fences
 * free the windows in order, on this thread), nothing hashed (the
 * checksum pass holds bytes that arrive out of order up to a bound made
 * for one session), no batch of the cover's fillers alone, two batches
 * at least, and a file read from its medium: from the page cache the
 * load is bound by the CPUs, and a second session's set-up and workers
 * cost more than the overlap saves (1.05-1.22x the wall time, hot, two
 * CPUs). 1, 0, or a negative code (a file that does not open). */
static int use_lanes(struct xrun *xr)
{
	const struct ex_exec *x = xr->x;
	const struct ex_program *p = x->prog;
	struct ex_batch all;
	struct eng_job job;
	int ret;

	if (x->pool->nslots < 2 || x->device || xr->run.hash || p->nbatches < 2)
		return 0;
	for (size_t i = 0; i < p->nbatches; i++)
		if (p->batches[i].window == EX_NO_WINDOW)
			return 0;
	ex_run_files_job(&xr->run, &job, &all, x->ex, NULL);
	ret = eng_job_cached(xr->eng, &job, xr->e);
	return ret < 0 ? ret : !ret;
}

/* The engine and the checksum pass: bounce buffers hold whole reads; the
 * bound keeps them, the only memory beyond the pool, to a quarter of it
 * (or one read). */
static int setup_stream(struct xrun *xr)
{
	struct ex_exec *x = xr->x;
	const struct ex_program *p = x->prog;
	const struct pl_exec *ex = x->ex;
	struct eng_opts eo = x->eo;
	uint64_t pool = x->pool->slot_bytes * x->pool->nslots;
	int ret;

	eo.inflight_bytes = CM_MAX(ex->max_read, CM_MIN(eo.inflight_bytes, pool / 4));
	eo.buffer_bytes = (uint32_t)CM_MAX(CM_MIN(ex->max_read, 1u << 30), p->fill_chunk);
	xr->run.on_progress = s_progress;
	xr->run.user = xr;
	for (size_t i = 0; i < ex->nreads; i++)
		xr->total += ex->reads[i].len;
	ret = ex_run_hash(&xr->run, ex, p->hashed, eo.inflight_bytes, xr->e);
	xr->eo = eo;
	if (ret == 0)
		ret = eng_create(&eo, &xr->eng, xr->e);
	if (ret == 0)
		ret = use_lanes(xr);
	xr->lanes = ret > 0;
	if (ret == 0 && p->nbatches)
		ret = begin(xr);
	return ret < 0 ? ret : 0;
}

/* Batch b into window k (the cover's fillers alone: no window, no copy,
 * any sink). */
static int fill(struct xrun *xr, const struct ex_batch *b, unsigned k)
{
	struct ex_exec *x = xr->x;
	struct eng_stats es;
	struct eng_job job;
	int ret;

	ex_run_job(&xr->run, &job, x->ex, b, x->windows[k], 0, NULL, x->file_stats);
	ret = eng_session_run(xr->sess, &job, &es, xr->e);
	eng_stats_merge(&x->stats, &es, ENG_MERGE_BATCHES);
	xr->base += b->read_bytes;
	return ret;
}

/* ------------------------------------------------------------------ */
/* A streaming load: where a window's pieces go */

int ex_device_copy(const struct eng_sink *d, const struct pl_exec *ex, const uint64_t *dst_of,
		   const struct ex_piece *pc, const uint8_t *data, struct cm_err *e)
{
	uint64_t dst = dst_of[pc->shard] + pc->offset, done = 0;

	do {
		uint64_t n = CM_MIN(pc->len - done, EX_DEVICE_COPY);
		struct cm_copy cp = { .len = (uint32_t)n, .count = 1, .dst = dst + done,
				      .dev = ex->shards[pc->shard].dev,
				      .shard = (uint32_t)pc->shard };
		int ret = d->ops->copy(d->state, 0, &cp, data + done, e);

		if (ret < 0)
			return ret;
		done += n;
	} while (done < pc->len);
	return 0;
}

/* The pieces of batch b, now in window k: to the runtime, or to the
 * device (the window stays held until its fence completes). */
static int hand_out(struct xrun *xr, const struct ex_batch *b, unsigned k)
{
	struct ex_exec *x = xr->x;
	const struct ex_window *w = x->prog->win.w + b->window;
	const struct eng_sink *d = x->device;
	int64_t gen = ex_wpool_hold(x->pool, k, w->n);
	int ret = 0;

	if (gen < 0)
		return cm_err_set(xr->e, (int)gen, "out of memory");
	for (size_t i = 0; i < w->n && ret == 0; i++) {
		const struct ex_piece *pc = x->prog->win.pieces + w->first + i;
		uint8_t *data = x->pool->slot[k].ptr + pc->pos;

		if (d) {
			ret = ex_device_copy(d, x->ex, x->device_dst, pc, data, xr->e);
			continue;
		}
		ret = x->on_piece(x->user, pc, data, k, (uint32_t)gen, i, xr->e);
		if (ret < 0) /* the runtime saw piece i: it holds it */
			ex_wpool_unhold(x->pool, k, i + 1);
	}
	for (size_t i = 0; d && ret == 0 && i < b->ndone; i++)
		d->ops->shard_done(d->state, b->done[i]);
	if (d && ret == 0) /* reclaimed by the fence; a failure drains first */
		ret = d->ops->fence(d->state, 0, &x->pool->slot[k].ticket, xr->e);
	xr->win_of[k] = b->window;
	return ret;
}

/* A device load with on_piece (a started load's consumer): the pieces
 * whose copies window k held, now that its fence completed: device
 * bytes in place (data NULL, no window held: the runtime finds them by
 * shard and offset). */
static int device_pieces(struct xrun *xr, unsigned k)
{
	struct ex_exec *x = xr->x;
	const struct ex_window *w = x->prog->win.w + xr->win_of[k];
	int ret = 0;

	for (size_t i = 0; x->on_piece && i < w->n && ret == 0; i++)
		ret = x->on_piece(x->user, x->prog->win.pieces + w->first + i, NULL, k, 0,
				  SIZE_MAX, xr->e);
	return ret;
}

/* Device loads: when every window holds copies, waits for the oldest
 * window's fence and frees it (all: every window, after the drain). */
static int reclaim(struct xrun *xr, int all)
{
	struct ex_wpool *pool = xr->x->pool;
	const struct eng_sink *d = xr->x->device;
	int k = -1, ret = 0;

	for (unsigned i = 0; i < pool->nslots; i++) {
		if (!pool->slot[i].busy) {
			if (all) /* a failed load leaves gaps: free every busy one */
				continue;
			return 0;
		}
		if (all)
			ex_wpool_unhold(pool, i, 0);
		else if (k < 0 || pool->slot[i].ticket < pool->slot[k].ticket)
			k = (int)i;
	}
	if (k < 0)
		return 0;
	ret = d->ops->wait(d->state, 0, pool->slot[k].ticket, xr->e);
	if (ret == 0)
		ret = device_pieces(xr, (unsigned)k);
	ex_wpool_unhold(pool, (unsigned)k, 0);
	return ret;
}

/* After a device sink's finish(1): the pieces of every window still
 * held, in fence order (each window's copies have finished). */
static int device_pieces_left(struct xrun *xr)
{
	struct ex_wpool *pool = xr->x->pool;
	uint64_t after = 0;
	int ret = 0;

	for (unsigned n = 0; n < pool->nslots && ret == 0; n++) {
		int k = -1;

		for (unsigned i = 0; i < pool->nslots; i++)
			if (pool->slot[i].busy && pool->slot[i].ticket >= after &&
			    (k < 0 || pool->slot[i].ticket < pool->slot[k].ticket))
				k = (int)i;
		if (k < 0)
			break;
		ret = device_pieces(xr, (unsigned)k);
		after = pool->slot[k].ticket + 1;
	}
	return ret;
}

/* The shards of no bytes, after every window. */
static int hand_out_zero(struct xrun *xr)
{
	struct ex_exec *x = xr->x;
	const struct ex_windows *win = &x->prog->win;
	int ret = 0;

	for (size_t i = 0; i < win->nzero && ret == 0; i++) {
		size_t z = win->zero[i];
		struct ex_piece pc = { z, x->ex->shards[z].dev, 0, 0, 0 };

		if (!x->device) {
			ret = x->on_piece(x->user, &pc, NULL, 0, 0, SIZE_MAX, xr->e);
			continue;
		}
		ret = ex_device_copy(x->device, x->ex, x->device_dst, &pc, NULL, xr->e);
		if (ret == 0)
			x->device->ops->shard_done(x->device->state, z);
		if (ret == 0 && x->on_piece) /* no bytes: nothing to wait for */
			ret = x->on_piece(x->user, &pc, NULL, 0, 0, SIZE_MAX, xr->e);
	}
	return ret;
}

/* Every batch in turn, each into a free window. */
static int run_batches(struct xrun *xr)
{
	struct ex_exec *x = xr->x;
	const struct ex_program *p = x->prog;
	int ret = 0;

	for (size_t i = 0; i < p->nbatches && ret == 0; i++) {
		const struct ex_batch *b = p->batches + i;
		int k = 0;

		if (b->window == EX_NO_WINDOW) { /* the cover's fillers alone */
			ret = fill(xr, b, 0);
			continue;
		}
		if (x->device && (ret = reclaim(xr, 0)) < 0)
			break;
		k = ex_wpool_acquire(x->pool, x->release_timeout_ms, xr->e);
		if (k < 0) {
			ret = k;
			break;
		}
		ret = fill(xr, b, (unsigned)k);
		if (ret < 0) {
			ex_wpool_drop(x->pool, (unsigned)k);
			break;
		}
		ret = hand_out(xr, b, (unsigned)k);
	}
	if (ret == 0)
		ret = hand_out_zero(xr);
	return ret;
}

/* Batch i to its lane, into a free window: waiting for one (wait), else
 * only if one is free now. Returns 1 when given, 0 when no window was
 * free, or a negative code (e set). */
static int give(struct xrun *xr, struct ex_lanes *L, size_t i, int *slot, int wait)
{
	struct ex_exec *x = xr->x;
	int k = wait ? ex_wpool_acquire(x->pool, x->release_timeout_ms, xr->e) :
		ex_wpool_try(x->pool);

	if (k < 0)
		return wait ? k : 0;
	slot[i % EX_LANES] = k;
	ex_lanes_give(L, (unsigned)(i % EX_LANES), x->prog->batches + i, x->windows[k]);
	return 1;
}

/* Every batch in turn on the lanes: batch i + 1 is read (into the other
 * window, when the runtime gave it back) while batch i's last reads land
 * and its pieces go out. Never waits for a window with a batch read but
 * not handed out: the runtime may need its pieces before it gives one
 * back (test_stream: release_after_the_next_window). */
static int run_lanes(struct xrun *xr)
{
	struct ex_exec *x = xr->x;
	const struct ex_program *p = x->prog;
	int slot[EX_LANES] = { -1, -1 };
	struct ex_lanes L;
	size_t next = 0;
	int ret;

	if (fixed_regions(xr) < 0)
		return cm_err_set(xr->e, -ENOMEM, "out of memory");
	ret = ex_lanes_start(&L, &(struct ex_lanes_setup){ x->ex, p, xr->eo, xr->fixed, xr->nfixed,
							   x->file_stats, x->pool }, xr->e);
	if (ret < 0)
		return ret;
	for (size_t i = 0; i < p->nbatches && ret >= 0; i++) {
		unsigned j = (unsigned)(i % EX_LANES);

		if (next == i && (ret = give(xr, &L, next, slot, 1)) > 0)
			next++;
		if (ret >= 0 && next == i + 1 && next < p->nbatches &&
		    (ret = give(xr, &L, next, slot, 0)) > 0)
			next++;
		if (ret < 0)
			break;
		ret = ex_lanes_wait(&L, j, x->on_progress, x->user, xr->total, xr->e);
		if (ret < 0) /* its window is dropped once the lane is joined */
			break;
		ret = hand_out(xr, p->batches + i, (unsigned)slot[j]);
		slot[j] = -1;
	}
	ex_lanes_end(&L, &x->stats, &x->runs, &x->registered, x->why, sizeof(x->why));
	for (unsigned j = 0; j < EX_LANES; j++) /* not handed out: no lane writes now */
		if (slot[j] >= 0)
			ex_wpool_drop(x->pool, (unsigned)slot[j]);
	if (ret >= 0)
		ret = hand_out_zero(xr);
	return ret < 0 ? ret : 0;
}

/* A device sink's end: every copy finished (or abandoned) before a
 * window is free. */
static int device_end(struct xrun *xr, int ok)
{
	const struct eng_sink *d = xr->x->device;
	struct cm_err e;
	int ret;

	cm_err_clear(&e);
	ret = d->ops->finish(d->state, ok, &e);
	if (ret < 0 && ok)
		cm_err_set(xr->e, ret, "%s", e.msg);
	if (ok && ret == 0)
		ret = device_pieces_left(xr);
	reclaim(xr, 1);
	return ok ? ret : 0;
}

static int run_stream(struct xrun *xr)
{
	int ret = setup_stream(xr);

	if (ret == 0 && xr->lanes)
		return run_lanes(xr);
	if (ret == 0)
		ret = run_batches(xr);
	if (xr->x->device) {
		int end = device_end(xr, ret == 0);

		ret = ret < 0 ? ret : end;
	}
	eng_session_end(xr->sess);
	return ret;
}

/* ------------------------------------------------------------------ */

int ex_execute(struct ex_exec *x, struct cm_err *e)
{
	struct xrun xr = { .x = x, .e = e };
	int ret;

	memset(&x->stats, 0, sizeof(x->stats));
	x->runs = 0;
	x->registered = 0;
	snprintf(x->why, sizeof(x->why), "nothing to read");
	ret = x->pool ? run_stream(&xr) : run_whole(&xr);
	cm_free(xr.fixed);
	eng_destroy(xr.eng);
	if (ret == 0)
		ret = ex_run_end(&xr.run, x->ex, x->digests, e);
	ex_run_stats(&xr.run, &x->stats);
	ex_run_free(&xr.run);
	return ret;
}
