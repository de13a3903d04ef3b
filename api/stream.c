/*
 * stream.c - streaming staging (RL_STAGING_STREAM): a loader that never
 * holds more than its budget of staging. The budget is one pool cut into
 * one or two windows; every device's staging space is cut into ranges of
 * at most a window (in device, then offset order); each range is one
 * engine run of the plan clipped to it (engine/stream.c), into a free
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

#include "../engine/stream.h"
#include "../sink/host.h"
#include "loader_internal.h"
#include "plan_internal.h"

#define ST_MIN_BUDGET (64ull << 10)
#define ST_MAX_DEFAULT (1ull << 30)
#define ST_TWO_WINDOWS (2ull << 20) /* from here on: two windows */
#define ST_PAGE 4096ull
#define ST_MAX_SLOTS 2

/* One piece of the plan: bytes [offset, offset + len) of shard, at pos
 * in its range's window. */
struct st_piece {
	size_t shard;
	unsigned dev;
	uint64_t offset, len, pos;
};

/* One range and its pieces[first .. first + n). */
struct st_range {
	struct eng_range r;
	size_t first, n;
};

/* One window of the pool. */
struct st_slot {
	uint8_t *ptr;
	uint32_t gen;           /* fills so far: stale tokens do not match */
	int busy;               /* being filled, or pieces of it held */
	size_t npieces, held;   /* pieces of the fill; of which not released */
	uint8_t *out;           /* per piece: 1 while held */
	size_t cap;
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

	/* The load: ranges, pieces, zero-byte shards. */
	struct pl_exec ex;
	struct st_range *ranges;
	size_t nranges;
	struct st_piece *pieces;
	size_t npieces;
	size_t *zero;
	size_t nzero;
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
	uint64_t lim = RL_MIN(cgroup_left(), mem_available());
	struct rlimit rl;

	/* Pinned windows (a runtime's, or registered ones) count against
	 * RLIMIT_MEMLOCK unless we are privileged. */
	if (geteuid() != 0 && getrlimit(RLIMIT_MEMLOCK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		lim = RL_MIN(lim, (uint64_t)rl.rlim_cur);
	lim = lim == UINT64_MAX ? ST_MAX_DEFAULT : lim / 4;
	lim = RL_MIN(RL_MAX(lim, ST_MIN_BUDGET), ST_MAX_DEFAULT);
	return (int64_t)rl_align_down(lim, ST_PAGE);
}

uint64_t ld_stream_request_cap(const rl_loader *ld)
{
	uint64_t budget = ld->stream && ld->stream->user_pool ? ld->stream->user_len :
			  ld->budget ? ld->budget : (uint64_t)rl_loader_default_budget();

	return RL_MAX(rl_align_down(budget / 32, ST_PAGE), ST_PAGE);
}

/* ------------------------------------------------------------------ */
/* State, pool and windows */

static struct ld_stream *st_get(rl_loader *ld)
{
	struct ld_stream *s = ld->stream;
	pthread_condattr_t ca;

	if (s)
		return s;
	s = rl_calloc(1, sizeof(*s));
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
	rl_free(s->ranges);
	rl_free(s->pieces);
	rl_free(s->zero);
	rl_free(s->queue);
	s->ranges = NULL;
	s->pieces = NULL;
	s->zero = NULL;
	s->queue = NULL;
	s->nranges = s->npieces = s->nzero = s->qhead = s->qtail = 0;
}

static void st_free_pool(struct ld_stream *s)
{
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
	st_free_pool(s);
	for (unsigned i = 0; i < ST_MAX_SLOTS; i++)
		rl_free(s->slot[i].out);
	pthread_cond_destroy(&s->ready);
	pthread_cond_destroy(&s->freed);
	pthread_mutex_destroy(&s->lock);
	rl_free(s);
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
		return rl_err_set(&ld->err, RL_E_STATE,
				  "a streaming load is running (rl_loader_finish() first)");
	if (held)
		return rl_err_set(&ld->err, RL_E_STATE,
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
		uintptr_t p = (uintptr_t)s->user_pool, a = rl_align_up(p, ST_PAGE);

		base = (uint8_t *)a;
		len = s->user_len > a - p ? s->user_len - (a - p) : 0;
	} else {
		budget = RL_MAX(rl_align_down(budget, ST_PAGE), ST_MIN_BUDGET);
		if (s->pool_len != budget) {
			st_free_pool(s);
			s->pool = eng_staging_alloc((size_t)budget);
			if (!s->pool)
				return rl_err_set(&ld->err, -ENOMEM,
						  "streaming: cannot map a window pool of %" PRIu64
						  " bytes", budget);
			s->pool_len = (size_t)budget;
		}
		base = s->pool;
		len = s->pool_len;
	}
	pthread_mutex_lock(&s->lock);
	s->nslots = len >= ST_TWO_WINDOWS ? 2 : 1;
	s->slot_bytes = rl_align_down(len / s->nslots, ST_PAGE);
	pthread_mutex_unlock(&s->lock);
	if (s->slot_bytes < 2 * ST_PAGE)
		return rl_err_set(&ld->err, RL_E_STAGING,
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
/* Ranges and pieces of a plan */

struct st_ext {
	unsigned dev;
	uint64_t off, end;
	size_t shard;
};

static int ext_cmp(const void *a, const void *b)
{
	const struct st_ext *x = a, *y = b;

	if (x->dev != y->dev)
		return x->dev < y->dev ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

static int st_push_range(struct ld_stream *s, size_t *cap, const struct eng_range *r)
{
	if (rl_grow((void **)&s->ranges, cap, s->nranges + 1, sizeof(*s->ranges)) < 0)
		return -ENOMEM;
	s->ranges[s->nranges].r = *r;
	s->ranges[s->nranges].first = s->npieces;
	s->ranges[s->nranges].n = 0;
	s->nranges++;
	return 0;
}

static int st_push_piece(struct ld_stream *s, size_t *cap, const struct st_piece *p)
{
	if (rl_grow((void **)&s->pieces, cap, s->npieces + 1, sizeof(*s->pieces)) < 0)
		return -ENOMEM;
	s->pieces[s->npieces++] = *p;
	s->ranges[s->nranges - 1].n++;
	return 0;
}

/* Cuts the extents of one device (sorted by offset, none overlapping)
 * into ranges of at most a window: each starts at the first byte not yet
 * covered, its window at the page below (so that a byte's place in the
 * window is aligned as in staging: direct reads stay direct). */
static int st_cut(struct ld_stream *s, const struct st_ext *x, size_t n, size_t *rcap,
		  size_t *pcap)
{
	uint64_t cur = 0;

	for (size_t j = 0; j < n;) {
		struct eng_range r;

		if (x[j].end <= cur) {
			j++;
			continue;
		}
		r.dev = x[j].dev;
		r.lo = RL_MAX(cur, x[j].off);
		r.base = rl_align_down(r.lo, ST_PAGE);
		r.hi = r.base + s->slot_bytes;
		if (st_push_range(s, rcap, &r) < 0)
			return -ENOMEM;
		for (size_t k = j; k < n && x[k].off < r.hi; k++) {
			uint64_t a = RL_MAX(x[k].off, r.lo), b = RL_MIN(x[k].end, r.hi);
			struct st_piece p = { x[k].shard, r.dev, a - x[k].off, b - a, a - r.base };

			if (b > a && st_push_piece(s, pcap, &p) < 0)
				return -ENOMEM;
		}
		cur = r.hi;
	}
	return 0;
}

/* Every device's ranges, in device order. */
static int st_cut_all(struct ld_stream *s, const struct st_ext *x, size_t n)
{
	size_t rcap = 0, pcap = 0;

	for (size_t g = 0, e; g < n; g = e) {
		for (e = g + 1; e < n && x[e].dev == x[g].dev; e++)
			;
		if (st_cut(s, x + g, e - g, &rcap, &pcap) < 0)
			return -ENOMEM;
	}
	return 0;
}

/* The ranges, pieces and zero-byte shards of ex. */
static int st_plan(rl_loader *ld, struct ld_stream *s)
{
	const struct pl_exec *ex = &s->ex;
	struct st_ext *x = rl_calloc(ex->nshards ? ex->nshards : 1, sizeof(*x));
	size_t n = 0;
	int ret;

	s->zero = rl_calloc(ex->nshards ? ex->nshards : 1, sizeof(*s->zero));
	if (!x || !s->zero) {
		rl_free(x);
		return rl_err_set(&ld->err, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < ex->nshards; i++) {
		const struct pl_shard *sh = ex->shards + i;

		if (!sh->nbytes) {
			s->zero[s->nzero++] = i;
			continue;
		}
		x[n++] = (struct st_ext){ sh->dev, sh->offset, sh->offset + sh->nbytes, i };
	}
	qsort(x, n, sizeof(*x), ext_cmp);
	ret = st_cut_all(s, x, n);
	rl_free(x);
	s->queue = ret ? NULL : rl_calloc(s->npieces + s->nzero + 1, sizeof(*s->queue));
	if (ret < 0 || !s->queue)
		return rl_err_set(&ld->err, -ENOMEM, "out of memory");
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
		*err = rl_err_set(&ld->err, RL_E_CANCELED,
				  "streaming: canceled (rl_loader_finish() before the last piece)");
	else
		*err = rl_err_set(&ld->err, RL_E_RELEASE_TIMEOUT,
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
static int st_hold(struct ld_stream *s, unsigned k, const struct st_range *rg)
{
	struct st_slot *w = s->slot + k;
	int ret = 0;

	pthread_mutex_lock(&s->lock);
	if (rg->n > w->cap) {
		uint8_t *o = rl_realloc(w->out, rg->n);

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
	struct eng_wjob wj;
	struct eng_stats sum;
	int pull;
	unsigned runs;          /* engine set-ups (sessions) of this load */
	int registered;         /* the windows are io_uring fixed buffers */
	char why[64];           /* else why not */
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
	return ld->on_progress(ld->user, RL_MIN(s->base + done, s->total), s->total);
}

/* Reads range rg into window k. */
static int st_fill(struct st_run *sr, const struct st_range *rg, unsigned k)
{
	struct ld_stream *s = sr->s;
	const struct pl_exec *ex = &s->ex;
	uint8_t *staging[1] = { s->slot[k].ptr };
	uint64_t bytes[1] = { s->slot_bytes };
	struct sink_host host;
	struct eng_stats es;
	struct eng_job job;
	int ret;

	if (eng_window_job(ex->reads, ex->nreads, ex->copies, &rg->r, &sr->wj) < 0)
		return rl_err_set(&sr->ld->err, -ENOMEM, "out of memory");
	memset(&job, 0, sizeof(job));
	job.nfiles = ex->nfiles;
	job.paths = ex->paths;
	job.file_sizes = ex->file_sizes;
	job.reads = sr->wj.reads;
	job.nreads = sr->wj.nreads;
	job.copies = sr->wj.copies;
	job.ncopies = sr->wj.ncopies;
	job.sink = sink_host_init(&host, 1, staging, bytes);
	job.on_progress = st_progress;
	job.user = sr;
	job.total_bytes = sr->wj.read_bytes;
	job.file_stats = sr->ld->files;
	ret = eng_session_run(sr->sess, &job, &es, &sr->ld->err);
	sink_host_note(&host, es.fallbacks, sizeof(es.fallbacks));
	eng_stats_merge(&sr->sum, &es, ENG_MERGE_BATCHES);
	s->base += sr->wj.read_bytes;
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
		return rl_err_set(&ld->err, RL_E_CANCELED, "streaming: the piece callback canceled the load");
	return 0;
}

/* The pieces of range rg, now in window k. */
static int st_hand_out(struct st_run *sr, const struct st_range *rg, unsigned k)
{
	struct ld_stream *s = sr->s;
	int ret = st_hold(s, k, rg);

	if (ret < 0)
		return rl_err_set(&sr->ld->err, ret, "out of memory");
	for (size_t i = 0; i < rg->n; i++) {
		const struct st_piece *sp = s->pieces + rg->first + i;
		rl_piece p = { sp->shard, sp->dev, sp->offset, sp->len, s->slot[k].ptr + sp->pos,
			       st_token(k, s->slot[k].gen, i) };

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

	sr->fixed = rl_calloc((size_t)(per * s->nslots), sizeof(*sr->fixed));
	if (!sr->fixed)
		return -ENOMEM;
	for (unsigned k = 0; k < s->nslots; k++)
		for (uint64_t off = 0; off < s->slot_bytes; off += ST_FIXED_MAX) {
			struct eng_fixed *f = sr->fixed + sr->nfixed++;

			f->base = s->slot[k].ptr + off;
			f->len = (size_t)RL_MIN(ST_FIXED_MAX, s->slot_bytes - off);
		}
	return 0;
}

/* What every range's reads need together: each read of the plan, plus
 * one more for each window edge a read may straddle (read once for each
 * window), and those may need a bounce buffer. */
static void st_needs(const struct ld_stream *s, struct eng_session_needs *n)
{
	const struct pl_exec *ex = &s->ex;
	uint64_t edges = 2 * (uint64_t)s->nranges;

	memset(n, 0, sizeof(*n));
	for (size_t i = 0; i < ex->nreads; i++) {
		n->all_bytes += ex->reads[i].len;
		if (!(ex->reads[i].flags & RL_READ_DIRECT) || ex->reads[i].ncopies != 1) {
			n->bounce++;
			n->bounce_bytes += ex->reads[i].len;
		}
	}
	n->nreads = ex->nreads + edges;
	n->max_read = (uint32_t)ex->max_read;
	n->bounce += edges;
	n->bounce_bytes = RL_MIN(n->bounce_bytes + edges * ex->max_read, n->all_bytes);
}

/* One engine session for every range: files, workers, rings and the
 * windows' registration, set up once. */
static int st_begin(struct st_run *sr)
{
	struct ld_stream *s = sr->s;
	const struct pl_exec *ex = &s->ex;
	struct eng_session_needs n;
	struct eng_stats es;
	struct eng_job job;
	int ret;

	if (st_fixed(sr) < 0)
		return rl_err_set(&sr->ld->err, -ENOMEM, "out of memory");
	st_needs(s, &n);
	memset(&job, 0, sizeof(job));
	job.nfiles = ex->nfiles;
	job.paths = ex->paths;
	job.file_sizes = ex->file_sizes;
	job.reads = ex->reads; /* what the page-cache probe measures */
	job.nreads = ex->nreads;
	job.file_stats = sr->ld->files;
	ret = eng_session_begin(sr->eng, &job, &n, sr->fixed, sr->nfixed, &es, &sr->sess,
				&sr->ld->err);
	sr->runs = 1;
	eng_stats_merge(&sr->sum, &es, ENG_MERGE_BATCHES); /* set-up time, notes */
	if (ret == 0)
		sr->registered = eng_session_fixed(sr->sess, sr->why, sizeof(sr->why));
	return ret;
}

/* Every range in turn, then the zero-byte shards. */
static int st_ranges(struct st_run *sr)
{
	struct ld_stream *s = sr->s;
	int ret = 0;

	for (size_t i = 0; i < s->nranges && ret == 0; i++) {
		int k = st_acquire(sr->ld, s, &ret);

		if (k < 0)
			break;
		ret = st_fill(sr, s->ranges + i, (unsigned)k);
		if (ret < 0) {
			pthread_mutex_lock(&s->lock);
			s->slot[k].busy = 0;
			pthread_mutex_unlock(&s->lock);
			break;
		}
		ret = st_hand_out(sr, s->ranges + i, (unsigned)k);
	}
	for (size_t i = 0; i < s->nzero && ret == 0; i++) {
		rl_piece p = { s->zero[i], s->ex.shards[s->zero[i]].dev, 0, 0, NULL, 0 };

		ret = st_deliver(sr, &p);
	}
	return ret;
}

/* rl_load_stats_ex of a streaming load; its shape text says how the
 * windows were read (a text, not new fields: the struct's layout is
 * mirrored by the Python package). */
static void st_fill_stats_ex(rl_loader *ld, const struct st_run *sr, const char *why)
{
	const struct ld_stream *s = sr->s;
	char text[sizeof(((rl_load_stats_ex *)0)->shape)]; /* why + the windows */

	snprintf(text, sizeof(text),
		 "%s%sstreaming: %u windows of %llu bytes, %sregistered with io_uring%s%s%s; "
		 "%zu ranges, %u engine set-up%s", why, why[0] ? "; " : "", s->nslots,
		 (unsigned long long)s->slot_bytes, sr->registered ? "" : "not ",
		 sr->registered ? "" : " (", sr->registered ? "" : sr->why,
		 sr->registered ? "" : ")", s->nranges, sr->runs, sr->runs == 1 ? "" : "s");
	ld_fill_stats_ex(ld, &sr->sum, text);
}

/* The whole load of s->ex (on the calling or the library thread). */
static int st_load(rl_loader *ld, int pull, const char *why)
{
	struct ld_stream *s = ld->stream;
	struct eng_opts eo = ld->eo;
	struct st_run sr;
	int ret;

	memset(&sr, 0, sizeof(sr));
	sr.ld = ld;
	sr.s = s;
	sr.pull = pull;
	s->base = 0;
	/* Bounce buffers hold whole reads; the bound keeps them, the only
	 * memory beyond the budget, to a quarter of it (or one read). */
	eo.buffer_bytes = (uint32_t)RL_MIN(s->ex.max_read, 1u << 30);
	eo.inflight_bytes = RL_MAX(s->ex.max_read, RL_MIN(eo.inflight_bytes, s->slot_bytes * s->nslots / 4));
	snprintf(sr.why, sizeof(sr.why), "nothing to read");
	ret = eng_create(&eo, &sr.eng, &ld->err);
	if (ret == 0 && s->nranges)
		ret = st_begin(&sr);
	if (ret == 0)
		ret = st_ranges(&sr);
	eng_session_end(sr.sess);
	rl_free(sr.fixed);
	eng_destroy(sr.eng);
	eng_wjob_free(&sr.wj);
	ld_fill_stats(ld, &s->ex, &sr.sum, 0, rl_now_s() - s->t0);
	st_fill_stats_ex(ld, &sr, why);
	ld->failed = ret < 0;
	if (ret == 0)
		rl_err_clear(&ld->err);
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
	if (ex->received)
		return rl_err_set(&ld->err, RL_E_STATE,
				  "streaming: plans with transfers (read once) are not supported");
	if (ld->nexpect)
		return rl_err_set(&ld->err, RL_E_STATE,
				  "streaming: expected SHA-256 values (rl_loader_expect_sha256) are not checked by streaming loads");
	ld_hashrun_free(&ld->hash); /* no stale results */
	s = st_get(ld);
	if (!s || ld_reset_files(ld, ex) < 0 ||
	    ld_hash_streamed(&ld->hash, ld->sha256_hf, ex) < 0) /* counted, not hashed */
		return rl_err_set(&ld->err, -ENOMEM, "out of memory");
	ld_free_areas(ld); /* library staging of an earlier run */
	st_clear_load(s);
	s->ex = *ex;
	s->t0 = rl_now_s();
	atomic_store_explicit(&s->cancel, 0, memory_order_relaxed);
	ret = st_setup_pool(ld, s);
	if (ret == 0)
		ret = st_plan(ld, s);
	return ret;
}

int ld_stream_exec(rl_loader *ld, const struct pl_exec *ex, double plan_s, const char *why)
{
	int ret;

	if (!ld->on_piece)
		return rl_err_set(&ld->err, RL_E_STATE,
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
		return rl_err_set(&ld->err, -EINVAL, "no plan");
	if (!plan->pl)
		return rl_err_set(&ld->err, RL_E_STATE, "plan not built");
	if (ld->staging_mode != RL_STAGING_STREAM)
		return rl_err_set(&ld->err, RL_E_STATE,
				  "rl_loader_start() needs RL_OPT_STAGING = RL_STAGING_STREAM");
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
		return rl_err_set(&ld->err, -ret, "streaming: cannot start the load's thread: %s",
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
		return rl_err_set(&ld->err, RL_E_STATE, "no streaming load started");
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
		ret = rl_err_set(&ld->err, RL_E_CANCELED,
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
		return rl_err_set(&ld->err, RL_E_STAGING,
				  "window pool of %zu bytes: at least %llu needed", len, ST_MIN_BUDGET);
	ret = ld_stream_idle(ld);
	if (ret < 0)
		return ret;
	s = st_get(ld);
	if (!s)
		return rl_err_set(&ld->err, -ENOMEM, "out of memory");
	s->user_pool = ptr;
	s->user_len = ptr ? len : 0;
	rl_err_clear(&ld->err);
	return 0;
}
