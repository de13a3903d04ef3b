/*
 * stream.c - streaming staging (RL_STAGING_STREAM): a loader that never
 * holds more than its budget of staging. The budget is one pool cut into
 * one or two windows; every device's staging space is cut into ranges of
 * at most a window (in device, then offset order); each range is one
 * engine run of the plan clipped to it (exec/window.c), into a free
 * window; when it arrived, the shards' bytes in it are handed out as
 * pieces, and the window is free again once every piece is released.
 *
 * Why ranges of staging, not of the file: a piece must be contiguous
 * bytes of a shard (what a runtime copies to its device as they are), and
 * only staging holds shard bytes contiguously (a shard split along an
 * inner dimension is strided in the file). Why one range at a time: a
 * range needs one free window and nothing else, so any budget that holds
 * a window makes progress; with two windows the runtime copies one while
 * the other is read.
 *
 * Threads. rl_loader_run(): the ranges run on the calling thread, pieces
 * go to the callback there. rl_loader_start(): the same loop on a library
 * thread; pieces go to a queue the consumer pulls (rl_loader_next_piece).
 * rl_loader_release() comes from any thread. One mutex guards the
 * windows, the queue and the end of the load; `freed` wakes the loop
 * waiting for a window, `ready` the consumer waiting for a piece.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../exec/run.h"
#include "../exec/window.h"
#include "../sink/host.h"
#include "loader_internal.h"
#include "plan_internal.h"

#define ST_MIN_BUDGET (64ull << 10)
#define ST_MAX_DEFAULT (1ull << 30)
#define ST_TWO_WINDOWS (2ull << 20) /* from here on: two windows */
#define ST_PAGE 4096ull
#define ST_MAX_SLOTS 2

/* One window of the pool. */
struct st_slot {
	uint8_t *ptr;
	uint32_t gen;           /* fills so far: stale tokens do not match */
	int busy;               /* being filled, or pieces of it held */
	size_t npieces, held;   /* pieces of the fill; of which not released */
	uint8_t *out;           /* per piece: 1 while held */
	size_t cap;
	uint64_t ticket;        /* CUDA loads: the fence of its copies */
};

struct ld_stream {
	pthread_mutex_t lock;   /* slots, queue, ended/result/pulling */
	pthread_cond_t freed;   /* a window came free, or cancel */
	pthread_cond_t ready;   /* a piece queued, or the load ended */

	uint8_t *pool;          /* the library's pool (pool_len bytes) */
	size_t pool_len;
	void *user_pool;        /* rl_loader_set_window_pool() */
	size_t user_len;
	struct st_slot slot[ST_MAX_SLOTS];
	unsigned nslots;
	uint64_t slot_bytes;

	/* The load: its plan and its windows (exec/window.h). */
	struct pl_exec ex;
	struct ex_windows win;
	uint64_t total, base;   /* progress: plan bytes, windows done */
	double t0;

	/* Pull mode: every piece of the load in delivery order. */
	rl_piece *queue;
	size_t qhead, qtail;
	int pulling, ended, result;
	pthread_t tid;
	/* Set by finish (the consumer stopped early); read by the loop's
	 * progress callback. Relaxed: a request to stop; what it stops is
	 * synchronized by the join. */
	atomic_int cancel;
};

/* ------------------------------------------------------------------ */
/* The default budget */

static uint64_t read_u64_file(const char *path)
{
	char buf[64];
	FILE *f = fopen(path, "re");
	uint64_t v = UINT64_MAX;

	if (!f)
		return UINT64_MAX;
	if (fgets(buf, sizeof(buf), f) && buf[0] >= '0' && buf[0] <= '9')
		v = strtoull(buf, NULL, 10);
	fclose(f);
	return v; /* "max" and unreadable files: no limit */
}

/* What the cgroup (v2) of this process leaves: memory.max less
 * memory.current; UINT64_MAX when unlimited or unknown. */
static uint64_t cgroup_left(void)
{
	char line[512], path[640];
	FILE *f = fopen("/proc/self/cgroup", "re");
	uint64_t max = UINT64_MAX, cur;

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "0::", 3) != 0)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.max", line + 3);
		max = read_u64_file(path);
		snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", line + 3);
		cur = read_u64_file(path);
		if (max != UINT64_MAX && cur != UINT64_MAX)
			max = max > cur ? max - cur : 0;
	}
	fclose(f);
	return max;
}

static uint64_t mem_available(void)
{
	char line[128];
	FILE *f = fopen("/proc/meminfo", "re");
	unsigned long long kb;
	uint64_t v = UINT64_MAX;

	if (!f)
		return UINT64_MAX;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			v = (uint64_t)kb << 10;
	fclose(f);
	return v;
}

int64_t rl_loader_default_budget(void)
{
	uint64_t lim = CM_MIN(cgroup_left(), mem_available());
	struct rlimit rl;

	/* Pinned windows (a runtime's, or registered ones) count against
	 * RLIMIT_MEMLOCK unless we are privileged. */
	if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lim = CM_MIN(lim, (uint64_t)rl.rlim_cur);
	lim = lim == UINT64_MAX ? ST_MAX_DEFAULT : lim / 4;
	lim = CM_MIN(CM_MAX(lim, ST_MIN_BUDGET), ST_MAX_DEFAULT);
	return (int64_t)cm_align_down(lim, ST_PAGE);
}

uint64_t ld_stream_request_cap(const rl_loader *ld)
{
	uint64_t budget = ld->stream && ld->stream->user_pool ? ld->stream->user_len :
			  ld->budget ? ld->budget : (uint64_t)rl_loader_default_budget();

	return CM_MAX(cm_align_down(budget / 32, ST_PAGE), ST_PAGE);
}

/* ------------------------------------------------------------------ */
/* State, pool and windows */

static struct ld_stream *st_get(rl_loader *ld)
{
	struct ld_stream *s = ld->stream;
	pthread_condattr_t ca;

	if (s)
		return s;
	s = cm_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->freed, &ca);
	pthread_cond_init(&s->ready, &ca);
	pthread_condattr_destroy(&ca);
	atomic_init(&s->cancel, 0);
	ld->stream = s;
	return s;
}

/* The load's plan-derived arrays. */
static void st_clear_load(struct ld_stream *s)
{
	ex_windows_free(&s->win);
	cm_free(s->queue);
	s->queue = NULL;
	s->qhead = s->qtail = 0;
}

static void st_free_pool(rl_loader *ld, struct ld_stream *s)
{
	ld_cuda_unpin(ld); /* never unmapped while a GPU may DMA from it */
	if (s->pool)
		eng_staging_free(s->pool, s->pool_len);
	s->pool = NULL;
	s->pool_len = 0;
}

void ld_stream_free(rl_loader *ld)
{
	struct ld_stream *s = ld->stream;

	if (!s)
		return;
	if (s->pulling) /* destroyed mid-load: stop and wait for the thread */
		rl_loader_finish(ld);
	st_clear_load(s);
	st_free_pool(ld, s);
	for (unsigned i = 0; i < ST_MAX_SLOTS; i++)
		cm_free(s->slot[i].out);
	pthread_cond_destroy(&s->ready);
	pthread_cond_destroy(&s->freed);
	pthread_mutex_destroy(&s->lock);
	cm_free(s);
	ld->stream = NULL;
}

int ld_stream_idle(rl_loader *ld)
{
	struct ld_stream *s = ld->stream;
	size_t held = 0;
	int pulling;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	pulling = s->pulling;
	for (unsigned i = 0; i < s->nslots; i++)
		held += s->slot[i].held;
	pthread_mutex_unlock(&s->lock);
	if (pulling)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "a streaming load is running (rl_loader_finish() first)");
	if (held)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "%zu pieces of the last streaming load not released", held);
	return 0;
}

/* The pool (the caller's, or ours, allocated once for this budget) cut
 * into windows: page-aligned, two from ST_TWO_WINDOWS on. */
static int st_setup_pool(rl_loader *ld, struct ld_stream *s)
{
	uint64_t budget = ld->budget ? ld->budget : (uint64_t)rl_loader_default_budget();
	uint8_t *base;
	uint64_t len;

	if (s->user_pool) {
		uintptr_t p = (uintptr_t)s->user_pool, a = cm_align_up(p, ST_PAGE);

		base = (uint8_t *)a;
		len = s->user_len > a - p ? s->user_len - (a - p) : 0;
	} else {
		budget = CM_MAX(cm_align_down(budget, ST_PAGE), ST_MIN_BUDGET);
		if (s->pool_len != budget) {
			st_free_pool(ld, s);
			s->pool = eng_staging_alloc((size_t)budget);
			if (!s->pool)
				return cm_err_set(&ld->err, -ENOMEM,
						  "streaming: cannot map a window pool of %" PRIu64
						  " bytes", budget);
			s->pool_len = (size_t)budget;
		}
		base = s->pool;
		len = s->pool_len;
	}
	pthread_mutex_lock(&s->lock);
	s->nslots = len >= ST_TWO_WINDOWS ? 2 : 1;
	s->slot_bytes = cm_align_down(len / s->nslots, ST_PAGE);
	pthread_mutex_unlock(&s->lock);
	if (s->slot_bytes < 2 * ST_PAGE)
		return cm_err_set(&ld->err, RL_E_STAGING,
				  "streaming: window pool of %" PRIu64 " usable bytes: at least %llu needed",
				  len, ST_MIN_BUDGET);
	/* Under the lock: a stale release from another thread reads them. */
	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < s->nslots; i++) {
		s->slot[i].ptr = base + i * s->slot_bytes;
		s->slot[i].busy = 0;
		s->slot[i].held = s->slot[i].npieces = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return 0;
}

/* ------------------------------------------------------------------ */
/* The windows of a plan */

/* The windows (ranges, pieces, zero-byte shards) of ex, and the queue. */
static int st_plan(rl_loader *ld, struct ld_stream *s)
{
	const struct pl_exec *ex = &s->ex;
	int ret = ex_windows_cut(&s->win, ex, s->slot_bytes, ST_PAGE);

	s->queue = ret ? NULL : cm_calloc(s->win.npieces + s->win.nzero + 1, sizeof(*s->queue));
	if (ret < 0 || !s->queue)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	s->total = 0;
	for (size_t i = 0; i < ex->nreads; i++)
		s->total += ex->reads[i].len;
	return 0;
}

/* ------------------------------------------------------------------ */
/* Windows: taken by the loop, given back by releases */

static void deadline_after(struct timespec *ts, uint32_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* A free window (marked busy), waiting for releases up to the release
 * timeout; -1 with the error in ld->err when canceled or timed out. */
static int st_acquire(rl_loader *ld, struct ld_stream *s, int *err)
{
	struct timespec until;
	int k = -1, timed_out = 0;

	deadline_after(&until, ld->release_timeout_ms);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		for (unsigned i = 0; i < s->nslots && k < 0; i++)
			if (!s->slot[i].busy)
				k = (int)i;
		/* Relaxed: see struct ld_stream.cancel. */
		if (k >= 0 || timed_out || atomic_load_explicit(&s->cancel, memory_order_relaxed))
			break;
		if (!ld->release_timeout_ms)
			pthread_cond_wait(&s->freed, &s->lock);
		else if (pthread_cond_timedwait(&s->freed, &s->lock, &until) == ETIMEDOUT)
			timed_out = 1;
	}
	if (k >= 0)
		s->slot[k].busy = 1;
	pthread_mutex_unlock(&s->lock);
	if (k >= 0)
		return k;
	if (!timed_out)
		*err = cm_err_set(&ld->err, RL_E_CANCELED,
				  "streaming: canceled (rl_loader_finish() before the last piece)");
	else
		*err = cm_err_set(&ld->err, RL_E_RELEASE_TIMEOUT,
				  "streaming: all %u windows (%" PRIu64 " bytes each) hold pieces not released for %u ms (RL_OPT_RELEASE_TIMEOUT_MS): release pieces with rl_loader_release()",
				  s->nslots, s->slot_bytes, ld->release_timeout_ms);
	return -1;
}

/* Marks piece idx of window k given back; the window is free once every
 * piece is. Under s->lock. Returns 0 or RL_E_PIECE. */
static int st_give(struct ld_stream *s, unsigned k, uint32_t gen, size_t idx)
{
	struct st_slot *w = s->slot + k;

	if (k >= s->nslots || !w->busy || w->gen != gen || idx >= w->npieces || !w->out[idx])
		return RL_E_PIECE;
	w->out[idx] = 0;
	if (--w->held == 0) {
		w->busy = 0;
		pthread_cond_broadcast(&s->freed);
	}
	return 0;
}

static uint64_t st_token(unsigned k, uint32_t gen, size_t idx)
{
	return ((uint64_t)(k + 1) << 56) | ((uint64_t)(gen & 0xffffffu) << 32) | (uint32_t)idx;
}

int rl_loader_release(rl_loader *ld, const rl_piece *piece)
{
	struct ld_stream *s;
	uint64_t t;
	int ret;

	if (!ld || !piece)
		return -EINVAL;
	t = piece->token;
	if (t == 0)
		return 0; /* a zero-byte piece: nothing held */
	s = ld->stream;
	if (!s || (t >> 56) == 0)
		return RL_E_PIECE;
	pthread_mutex_lock(&s->lock);
	ret = st_give(s, (unsigned)(t >> 56) - 1, (uint32_t)(t >> 32) & 0xffffffu,
		      (size_t)(t & 0xffffffffu));
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Window k filled with range ri: its pieces are held from now on. */
static int st_hold(struct ld_stream *s, unsigned k, const struct ex_window *rg)
{
	struct st_slot *w = s->slot + k;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (rg->n > w->cap) {
		uint8_t *o = cm_realloc(w->out, rg->n);

		if (o) {
			w->out = o;
			w->cap = rg->n;
		}
	}
	if (rg->n > w->cap) {
		ret = -ENOMEM;
		w->busy = 0;
	} else {
		w->gen = (w->gen + 1) & 0xffffffu;
		w->npieces = w->held = rg->n;
		memset(w->out, 1, rg->n);
		if (!rg->n)
			w->busy = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

/* Gives back, unseen, pieces [from, n) of window k's fill (cancel). */
static void st_unhold(struct ld_stream *s, unsigned k, size_t from)
{
	pthread_mutex_lock(&s->lock);
	for (size_t i = from; i < s->slot[k].npieces; i++)
		if (s->slot[k].busy && s->slot[k].out[i])
			st_give(s, k, s->slot[k].gen, i);
	pthread_mutex_unlock(&s->lock);
}

/* ------------------------------------------------------------------ */
/* The loop */

/* Fixed regions of a window pool: windows of at most ST_FIXED_MAX bytes
 * each (io_uring's limit for one registered buffer). */
#define ST_FIXED_MAX (1ull << 30)

struct st_run {
	rl_loader *ld;
	struct ld_stream *s;
	struct eng *eng;
	struct eng_session *sess;
	struct eng_fixed *fixed;
	unsigned nfixed;
	struct ex_wjob wj;
	struct ex_run run;      /* the job builder and the checksum pass */
	struct eng_stats sum;
	int pull;
	unsigned runs;          /* engine set-ups (sessions) of this load */
	int registered;         /* the windows are io_uring fixed buffers */
	char why[64];           /* else why not */
	int cuda;               /* pieces go to GPUs (api/loader_cuda.c), not to the runtime */
};

static int st_progress(void *user, uint64_t done, uint64_t total)
{
	struct st_run *sr = user;
	struct ld_stream *s = sr->s;
	rl_loader *ld = sr->ld;

	(void)total;
	/* Relaxed: see struct ld_stream.cancel. */
	if (atomic_load_explicit(&s->cancel, memory_order_relaxed))
		return 1;
	if (!ld->on_progress)
		return 0;
	return ld->on_progress(ld->user, CM_MIN(s->base + done, s->total), s->total);
}

/* Reads range rg into window k; rg NULL: no range, only what the
 * checksum cover adds (a plan without a byte of staging). last: no range
 * follows, so hashed files are read to their ends. */
static int st_fill(struct st_run *sr, const struct ex_window *rg, unsigned k, int last)
{
	struct ld_stream *s = sr->s;
	const struct pl_exec *ex = &s->ex;
	uint8_t *staging[1] = { rg ? s->slot[k].ptr : NULL };
	uint64_t bytes[1] = { rg ? s->slot_bytes : 0 };
	struct sink_host host;
	struct eng_stats es;
	struct eng_job job;
	struct ex_batch b;
	int ret;

	sr->wj.nreads = sr->wj.ncopies = 0;
	if (rg && ex_window_job(ex->reads, ex->nreads, ex->copies, &rg->r, &sr->wj) < 0)
		return cm_err_set(&sr->ld->err, -ENOMEM, "out of memory");
	if (ex_run_cover(&sr->run, &sr->wj.reads, &sr->wj.nreads, &sr->wj.cap_reads, last) < 0)
		return cm_err_set(&sr->ld->err, -ENOMEM, "out of memory");
	b = (struct ex_batch){ sr->wj.reads, sr->wj.nreads, sr->wj.copies, sr->wj.ncopies,
			       sink_host_init(&host, 1, staging, bytes), 0, NULL };
	ex_run_job(&sr->run, &job, ex, &b, sr->ld->files);
	ret = eng_session_run(sr->sess, &job, &es, &sr->ld->err);
	sink_host_note(&host, &es);
	eng_stats_merge(&sr->sum, &es, ENG_MERGE_BATCHES);
	s->base += job.total_bytes;
	return ret;
}

/* Hands one piece out: to the queue (pull) or the callback. */
static int st_deliver(struct st_run *sr, const rl_piece *p)
{
	struct ld_stream *s = sr->s;
	rl_loader *ld = sr->ld;

	if (sr->pull) {
		pthread_mutex_lock(&s->lock);
		s->queue[s->qtail++] = *p;
		pthread_cond_broadcast(&s->ready);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (ld->on_piece(ld->piece_user, p) != 0)
		return cm_err_set(&ld->err, RL_E_CANCELED, "streaming: the piece callback canceled the load");
	return 0;
}

/* The pieces of range rg, now in window k. */
static int st_hand_out(struct st_run *sr, const struct ex_window *rg, unsigned k)
{
	struct ld_stream *s = sr->s;
	int ret = st_hold(s, k, rg);

	if (ret < 0)
		return cm_err_set(&sr->ld->err, ret, "out of memory");
	for (size_t i = 0; i < rg->n; i++) {
		const struct ex_piece *sp = s->win.pieces + rg->first + i;
		rl_piece p = { sp->shard, sp->dev, sp->offset, sp->len, s->slot[k].ptr + sp->pos,
			       st_token(k, s->slot[k].gen, i) };

		if (sr->cuda) { /* to the GPU: the window stays held until its fence */
			ret = ld_cuda_piece(sr->ld, &s->ex, &p);
			if (ret == 0 && i + 1 == rg->n)
				ret = ld_cuda_fence(sr->ld, &s->slot[k].ticket);
			if (ret < 0)
				return ret; /* ld_cuda_end drains, then st_cuda_reclaim frees */
			continue;
		}
		ret = st_deliver(sr, &p);
		if (ret < 0) { /* the callback saw piece i: it holds it */
			st_unhold(s, k, i + 1);
			return ret;
		}
	}
	return 0;
}

/* The windows cut into regions io_uring can register. */
static int st_fixed(struct st_run *sr)
{
	struct ld_stream *s = sr->s;
	uint64_t per = (s->slot_bytes + ST_FIXED_MAX - 1) / ST_FIXED_MAX;

	sr->fixed = cm_calloc((size_t)(per * s->nslots), sizeof(*sr->fixed));
	if (!sr->fixed)
		return -ENOMEM;
	for (unsigned k = 0; k < s->nslots; k++)
		for (uint64_t off = 0; off < s->slot_bytes; off += ST_FIXED_MAX) {
			struct eng_fixed *f = sr->fixed + sr->nfixed++;

			f->base = s->slot[k].ptr + off;
			f->len = (size_t)CM_MIN(ST_FIXED_MAX, s->slot_bytes - off);
		}
	return 0;
}

/* One engine session for every range: files, workers, rings and the
 * windows' registration, set up once. */
static int st_begin(struct st_run *sr)
{
	struct ld_stream *s = sr->s;
	const struct pl_exec *ex = &s->ex;
	/* what the page-cache probe measures */
	struct ex_batch b = { .reads = ex->reads, .nreads = ex->nreads };
	struct eng_session_needs n;
	struct eng_stats es;
	struct eng_job job;
	int ret;

	if (st_fixed(sr) < 0)
		return cm_err_set(&sr->ld->err, -ENOMEM, "out of memory");
	ex_windows_needs(&s->win, ex, sr->run.hash ? &sr->run.cover : NULL, &n);
	ex_run_job(&sr->run, &job, ex, &b, sr->ld->files);
	ret = eng_session_begin(sr->eng, &job, &n, sr->fixed, sr->nfixed, &es, &sr->sess,
				&sr->ld->err);
	sr->runs = 1;
	eng_stats_merge(&sr->sum, &es, ENG_MERGE_BATCHES); /* set-up time, notes */
	if (ret == 0)
		sr->registered = eng_session_fixed(sr->sess, sr->why, sizeof(sr->why));
	return ret;
}

/* CUDA loads: when every window holds copies, waits for the oldest
 * window's fence and frees it (all: every window, after ld_cuda_end). */
static int st_cuda_reclaim(struct st_run *sr, int all)
{
	struct ld_stream *s = sr->s;
	int k = -1, ret = 0;

	for (unsigned i = 0; i < s->nslots; i++) {
		if (!s->slot[i].busy) {
			if (all) /* a failed load leaves gaps: free every busy one */
				continue;
			return 0;
		}
		if (all)
			st_unhold(s, i, 0);
		else if (k < 0 || s->slot[i].ticket < s->slot[k].ticket)
			k = (int)i;
	}
	if (k < 0)
		return 0;
	ret = ld_cuda_wait(sr->ld, s->slot[k].ticket);
	st_unhold(s, (unsigned)k, 0);
	return ret;
}

/* Every range in turn, then the zero-byte shards. */
static int st_ranges(struct st_run *sr)
{
	struct ld_stream *s = sr->s;
	int ret = 0;

	for (size_t i = 0; i < s->win.n && ret == 0; i++) {
		int k = sr->cuda && (ret = st_cuda_reclaim(sr, 0)) < 0 ? -1
								  : st_acquire(sr->ld, s, &ret);

		if (k < 0)
			break;
		ret = st_fill(sr, s->win.w + i, (unsigned)k, i + 1 == s->win.n);
		if (ret < 0) {
			pthread_mutex_lock(&s->lock);
			s->slot[k].busy = 0;
			pthread_mutex_unlock(&s->lock);
			break;
		}
		ret = st_hand_out(sr, s->win.w + i, (unsigned)k);
	}
	if (ret == 0 && !s->win.n && sr->run.hash) /* files without tensor bytes */
		ret = st_fill(sr, NULL, 0, 1);
	for (size_t i = 0; i < s->win.nzero && ret == 0; i++) {
		size_t z = s->win.zero[i];
		rl_piece p = { z, s->ex.shards[z].dev, 0, 0, NULL, 0 };

		ret = sr->cuda ? ld_cuda_piece(sr->ld, &s->ex, &p) : st_deliver(sr, &p);
	}
	if (sr->cuda) { /* every copy finished (or abandoned) before a window is free */
		int end = ld_cuda_end(sr->ld, ret == 0);

		st_cuda_reclaim(sr, 1);
		ret = ret < 0 ? ret : end;
	}
	return ret;
}

/* The statistics of a streaming load: how the windows were read, as
 * fields and in the shape text. */
static void st_fill_stats_ex(rl_loader *ld, const struct st_run *sr, const char *why)
{
	const struct ld_stream *s = sr->s;
	char text[sizeof(((rl_load_stats *)0)->shape)]; /* why + the windows */

	snprintf(text, sizeof(text),
		 "%s%sstreaming: %u windows of %llu bytes, %sregistered with io_uring%s%s%s; "
		 "%zu ranges, %u engine set-up%s", why, why[0] ? "; " : "", s->nslots,
		 (unsigned long long)s->slot_bytes, sr->registered ? "" : "not ",
		 sr->registered ? "" : " (", sr->registered ? "" : sr->why,
		 sr->registered ? "" : ")", s->win.n, sr->runs, sr->runs == 1 ? "" : "s");
	ld_fill_stats_ex(ld, &sr->sum, text);
	ld->stats.stream_windows = s->nslots;
	ld->stats.stream_window_bytes = s->slot_bytes;
	ld->stats.stream_registered = sr->registered;
	ld->stats.stream_ranges = s->win.n;
	ld->stats.engine_runs = sr->runs;
}

/* The engine and the checksum pass of a load: bounce buffers hold whole
 * reads; the bound keeps them, the only memory beyond the budget, to a
 * quarter of it (or one read). Fillers are as large as the plan's reads. */
static int st_setup(struct st_run *sr)
{
	rl_loader *ld = sr->ld;
	struct ld_stream *s = sr->s;
	struct eng_opts eo = ld->eo;
	uint32_t chunk = (uint32_t)CM_MIN(CM_MAX(s->ex.max_read, 4096u), 1u << 30);
	int ret;

	eo.inflight_bytes = CM_MAX(s->ex.max_read, CM_MIN(eo.inflight_bytes, s->slot_bytes * s->nslots / 4));
	eo.buffer_bytes = (uint32_t)CM_MIN(s->ex.max_read, 1u << 30);
	ret = ex_run_sums(&sr->run, &s->ex, ld->hash.hash, chunk, eo.inflight_bytes, &ld->err);
	if (ret == 0 && sr->run.hash)
		eo.buffer_bytes = CM_MAX(eo.buffer_bytes, sr->run.cover.chunk);
	if (ret == 0)
		ret = eng_create(&eo, &sr->eng, &ld->err);
	if (ret == 0 && (s->win.n || sr->run.hash))
		ret = st_begin(sr);
	return ret;
}

/* The whole load of s->ex (on the calling or the library thread). */
static int st_load(rl_loader *ld, int pull, const char *why)
{
	struct ld_stream *s = ld->stream;
	struct st_run sr;
	int ret;

	memset(&sr, 0, sizeof(sr));
	sr.ld = ld;
	sr.s = s;
	sr.pull = pull;
	sr.run.on_progress = st_progress;
	sr.run.user = &sr;
	sr.cuda = ld->cuda != NULL; /* rl_loader_start refuses CUDA loads */
	s->base = 0;
	snprintf(sr.why, sizeof(sr.why), "nothing to read");
	ret = st_setup(&sr);
	if (ret == 0)
		ret = st_ranges(&sr);
	else if (sr.cuda) /* st_ranges ends a CUDA load; one that never ran ends here */
		ld_cuda_end(ld, 0);
	eng_session_end(sr.sess);
	cm_free(sr.fixed);
	eng_destroy(sr.eng);
	ex_wjob_free(&sr.wj);
	if (ret == 0)
		ret = ex_run_end(&sr.run, &s->ex, ld->hash.got, &ld->err);
	if (ret == 0)
		ret = ld_hash_check(&ld->hash, &s->ex, &ld->err);
	ex_run_stats(&sr.run, &sr.sum);
	ex_run_free(&sr.run);
	ld_fill_stats(ld, &s->ex, &sr.sum, 0, cm_now_s() - s->t0);
	st_fill_stats_ex(ld, &sr, why);
	ld->failed = ret < 0;
	if (ret == 0)
		cm_err_clear(&ld->err);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Starting and ending a load */

/* Everything a streaming load of ex needs before its first read. */
static int st_prepare(rl_loader *ld, const struct pl_exec *ex)
{
	struct ld_stream *s;
	int ret = ld_stream_idle(ld);

	if (ret < 0)
		return ret;
	ld_hashrun_free(&ld->hash); /* no stale results */
	s = st_get(ld);
	if (!s || ld_reset_files(ld, ex) < 0)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	ret = ld_hash_prepare(&ld->hash, ld->expect, ld->nexpect, ld->sha256_hf, ex, &ld->err);
	if (ret < 0)
		return ret;
	ld_free_areas(ld); /* library staging of an earlier run */
	st_clear_load(s);
	s->ex = *ex;
	s->t0 = cm_now_s();
	atomic_store_explicit(&s->cancel, 0, memory_order_relaxed);
	ret = st_setup_pool(ld, s);
	if (ret == 0)
		ret = st_plan(ld, s);
	if (ret == 0 && ld->cuda) /* the windows: one region from slot 0 on */
		ret = ld_cuda_begin(ld, ex, s->slot[0].ptr, (size_t)(s->nslots * s->slot_bytes));
	return ret;
}

int ld_stream_exec(rl_loader *ld, const struct pl_exec *ex, double plan_s, const char *why)
{
	int ret;

	if (!ld->on_piece && !ld->cuda)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "streaming: rl_loader_run() needs a piece callback (rl_loader_set_piece_callback), or use rl_loader_start()");
	ret = st_prepare(ld, ex);
	if (ret == 0)
		ret = st_load(ld, 0, why);
	ld->stats.plan_seconds = plan_s;
	ld->stats.total_seconds += plan_s;
	return ret;
}

static void *st_thread(void *arg)
{
	rl_loader *ld = arg;
	struct ld_stream *s = ld->stream;
	int ret = st_load(ld, 1, "");

	pthread_mutex_lock(&s->lock);
	s->ended = 1;
	s->result = ret;
	pthread_cond_broadcast(&s->ready);
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

int rl_loader_start(rl_loader *ld, const rl_plan *plan)
{
	struct pl_exec ex;
	struct ld_stream *s;
	int ret;

	if (!ld)
		return -EINVAL;
	if (!plan)
		return cm_err_set(&ld->err, -EINVAL, "no plan");
	if (!plan->pl)
		return cm_err_set(&ld->err, RL_E_STATE, "plan not built");
	if (ld->staging_mode != RL_STAGING_STREAM)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "rl_loader_start() needs RL_OPT_STAGING = RL_STAGING_STREAM");
	if (ld->cuda)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "rl_loader_start(): a CUDA load has no pieces to pull; use rl_loader_run()");
	pl_plan_exec(plan->pl, &ex);
	ret = st_prepare(ld, &ex);
	if (ret < 0)
		return ret;
	s = ld->stream;
	s->ended = 0;
	s->result = 0;
	s->pulling = 1;
	ret = pthread_create(&s->tid, NULL, st_thread, ld);
	if (ret != 0) {
		s->pulling = 0;
		return cm_err_set(&ld->err, -ret, "streaming: cannot start the load's thread: %s",
				  strerror(ret));
	}
	return 0;
}

int rl_loader_next_piece(rl_loader *ld, rl_piece *piece, int timeout_ms)
{
	struct ld_stream *s;
	struct timespec until;
	int ret = RL_E_PIECE_TIMEOUT, timed_out = 0;

	if (!ld || !piece)
		return -EINVAL;
	s = ld->stream;
	if (!s || !s->pulling)
		return RL_E_STATE;
	if (timeout_ms > 0)
		deadline_after(&until, (uint32_t)timeout_ms);
	pthread_mutex_lock(&s->lock);
	for (;;) {
		if (s->ended && s->result < 0) {
			ret = s->result;
			break;
		}
		if (s->qhead < s->qtail) {
			*piece = s->queue[s->qhead++];
			ret = 1;
			break;
		}
		if (s->ended) {
			ret = 0;
			break;
		}
		if (timed_out || timeout_ms == 0)
			break;
		if (timeout_ms < 0)
			pthread_cond_wait(&s->ready, &s->lock);
		else if (pthread_cond_timedwait(&s->ready, &s->lock, &until) == ETIMEDOUT)
			timed_out = 1;
	}
	pthread_mutex_unlock(&s->lock);
	return ret;
}

int rl_loader_finish(rl_loader *ld)
{
	struct ld_stream *s;
	int ret;

	if (!ld)
		return -EINVAL;
	s = ld->stream;
	if (!s || !s->pulling)
		return cm_err_set(&ld->err, RL_E_STATE, "no streaming load started");
	pthread_mutex_lock(&s->lock);
	if (!s->ended || s->qhead < s->qtail) {
		/* Relaxed: see struct ld_stream.cancel; the broadcast under the
		 * lock wakes a loop waiting for a window. */
		atomic_store_explicit(&s->cancel, 1, memory_order_relaxed);
		pthread_cond_broadcast(&s->freed);
	}
	pthread_mutex_unlock(&s->lock);
	pthread_join(s->tid, NULL);
	/* Pieces queued but never handed out go back unseen. */
	pthread_mutex_lock(&s->lock);
	for (; s->qhead < s->qtail; s->qhead++) {
		uint64_t t = s->queue[s->qhead].token;

		if (t)
			st_give(s, (unsigned)(t >> 56) - 1, (uint32_t)(t >> 32) & 0xffffffu,
				(size_t)(t & 0xffffffffu));
	}
	s->pulling = 0;
	ret = s->result;
	pthread_mutex_unlock(&s->lock);
	if (ret == 0 && atomic_load_explicit(&s->cancel, memory_order_relaxed))
		ret = cm_err_set(&ld->err, RL_E_CANCELED,
				 "streaming: canceled (rl_loader_finish() before the last piece)");
	return ret;
}

int rl_loader_set_piece_callback(rl_loader *ld, rl_piece_fn fn, void *user)
{
	if (!ld)
		return -EINVAL;
	ld->on_piece = fn;
	ld->piece_user = user;
	return 0;
}

int rl_loader_set_window_pool(rl_loader *ld, void *ptr, size_t len)
{
	struct ld_stream *s;
	int ret;

	if (!ld)
		return -EINVAL;
	if (ptr && len < ST_MIN_BUDGET)
		return cm_err_set(&ld->err, RL_E_STAGING,
				  "window pool of %zu bytes: at least %llu needed", len, ST_MIN_BUDGET);
	ret = ld_stream_idle(ld);
	if (ret < 0)
		return ret;
	s = st_get(ld);
	if (!s)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	if (s->user_pool != ptr)
		ld_cuda_unpin(ld); /* the caller may free the old pool now */
	s->user_pool = ptr;
	s->user_len = ptr ? len : 0;
	cm_err_clear(&ld->err);
	return 0;
}
