/*
 * stream.c - streaming staging (RL_STAGING_STREAM): the public glue of a
 * loader that never holds more than its budget of staging. The budget is
 * one pool cut into one or two windows (exec/window_pool.h); the program
 * of the load (exec/program.h) has one batch per range of at most a
 * window; the executor (exec/execute.c) runs them and hands each window's
 * pieces here, to the piece callback or the queue a consumer pulls; a
 * window is free again once every piece is released.
 *
 * Why ranges of staging, not of the file: a piece must be contiguous
 * bytes of a shard (what a runtime copies to its device as they are), and
 * only staging holds shard bytes contiguously (a shard split along an
 * inner dimension is strided in the file). Why one range at a time: a
 * range needs one free window and nothing else, so any budget that holds
 * a window makes progress; with two windows the runtime copies one while
 * the other is read.
 *
 * Threads. rl_loader_run(): the executor runs on the calling thread,
 * pieces go to the callback there. rl_loader_start(): on a library
 * thread; pieces go to a queue the consumer pulls (rl_loader_next_piece).
 * rl_loader_release() comes from any thread (the pool has its own lock).
 * `lock` guards the queue and the end of the load; `ready` wakes the
 * consumer waiting for a piece.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../engine/devq.h"
#include "../engine/sizing.h"
#include "../exec/execute.h"
#include "../sink/host.h"
#include "loader_internal.h"
#include "plan_internal.h"

#define ST_MIN_BUDGET (64ull << 10)
#define ST_MAX_DEFAULT (1ull << 30)
#define ST_TWO_WINDOWS (2ull << 20) /* from here on: two windows */
/* A device loader's default: two windows of 128 MiB keep a GPU's copies
 * and the reads overlapped; more only costs pinned host memory. */
#define ST_DEVICE_DEFAULT (256ull << 20)
#define ST_PAGE 4096ull
/* The smallest window the medium sizes: each window's fill is one engine
 * run, and 1 MiB budgets on tmpfs (reads of 32 KiB) ran 0.4x with windows
 * of 4 reads (128 KiB) against one 1 MiB window. */
#define ST_WINDOW_FLOOR (8ull << 20)

struct ld_stream {
	pthread_mutex_t lock;   /* queue, ended/result/pulling */
	pthread_cond_t ready;   /* a piece queued, or the load ended */

	uint8_t *pool;          /* the library's pool (pool_len bytes) */
	size_t pool_len;
	void *user_pool;        /* rl_loader_set_window_pool() */
	size_t user_len;
	struct ex_wpool wp;     /* the pool's windows */
	struct ex_wpool_want want; /* the last load's: what sized the pool */
	struct ex_wpool_size sized;

	/* The load: its plan and its program (exec/program.h). */
	struct pl_exec ex;
	struct ex_program prog;
	double t0;

	/* Pull mode: every piece of the load in delivery order. */
	rl_piece *queue;
	size_t qhead, qtail;
	int pulling, ended, result;
	pthread_t tid;
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
	/* Pinned windows (a runtime's, or registered ones) count against
	 * RLIMIT_MEMLOCK unless we hold CAP_IPC_LOCK. */
	uint64_t lim = CM_MIN(CM_MIN(cgroup_left(), mem_available()), eng_memlock_limit());

	lim = lim == UINT64_MAX ? ST_MAX_DEFAULT : lim / 4;
	lim = CM_MIN(CM_MAX(lim, ST_MIN_BUDGET), ST_MAX_DEFAULT);
	return (int64_t)cm_align_down(lim, ST_PAGE);
}

int64_t rl_loader_budget(const rl_loader *ld)
{
	int64_t d;

	if (!ld)
		return -EINVAL;
	if (ld->opt.budget)
		return (int64_t)ld->opt.budget;
	d = rl_loader_default_budget();
	return ld->deliver.dev ? CM_MIN(d, (int64_t)ST_DEVICE_DEFAULT) : d;
}

uint64_t ld_stream_request_cap(const rl_loader *ld)
{
	uint64_t budget = ld->deliver.stream && ld->deliver.stream->user_pool ? ld->deliver.stream->user_len :
			  (uint64_t)rl_loader_budget(ld);

	return CM_MAX(cm_align_down(budget / 32, ST_PAGE), ST_PAGE);
}

/* ------------------------------------------------------------------ */
/* State and pool */

static struct ld_stream *st_get(rl_loader *ld)
{
	struct ld_stream *s = ld->deliver.stream;
	pthread_condattr_t ca;

	if (s)
		return s;
	s = cm_calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	pthread_mutex_init(&s->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->ready, &ca);
	pthread_condattr_destroy(&ca);
	ex_wpool_init(&s->wp);
	ld->deliver.stream = s;
	return s;
}

/* The load's plan-derived arrays. */
static void st_clear_load(struct ld_stream *s)
{
	ex_program_free(&s->prog);
	cm_free(s->queue);
	s->queue = NULL;
	s->qhead = s->qtail = 0;
}

static void st_free_pool(rl_loader *ld, struct ld_stream *s)
{
	ld_dev_unpin(ld); /* never unmapped while a device may DMA from it */
	if (s->pool)
		eng_staging_free(s->pool, s->pool_len);
	s->pool = NULL;
	s->pool_len = 0;
}

void ld_stream_pinned(const rl_loader *ld, uint8_t **base, uint64_t *len)
{
	const struct ld_stream *s = ld->deliver.stream;

	*base = s && s->wp.nslots ? s->wp.slot[0].ptr : NULL;
	*len = *base ? s->wp.nslots * s->wp.slot_bytes : 0;
}

void ld_stream_free(rl_loader *ld)
{
	struct ld_stream *s = ld->deliver.stream;

	if (!s)
		return;
	if (s->pulling) /* destroyed mid-load: stop and wait for the thread */
		rl_loader_finish(ld);
	st_clear_load(s);
	st_free_pool(ld, s);
	ex_wpool_destroy(&s->wp);
	pthread_cond_destroy(&s->ready);
	pthread_mutex_destroy(&s->lock);
	cm_free(s);
	ld->deliver.stream = NULL;
}

int ld_stream_idle(rl_loader *ld)
{
	struct ld_stream *s = ld->deliver.stream;
	size_t held;
	int pulling;

	if (!s)
		return 0;
	pthread_mutex_lock(&s->lock);
	pulling = s->pulling;
	pthread_mutex_unlock(&s->lock);
	held = ex_wpool_held(&s->wp);
	if (pulling)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "a streaming load is running (rl_loader_finish() first)");
	if (held)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "%zu pieces of the last streaming load not released", held);
	return 0;
}

/* What the windows of a load of ex cover at most: every device's staging
 * rounded up to a page (a window never holds more), at least the smallest
 * pool. A 1 MB file pins 1 MB, not the budget (a device load pins the pool). */
static uint64_t st_pool_need(const struct pl_exec *ex)
{
	uint64_t need = 0;

	for (unsigned d = 0; d < ex->ndevs; d++)
		if (cm_add64(need, cm_align_up(ex->staging_bytes[d], ST_PAGE), &need) < 0)
			return UINT64_MAX;
	return CM_MAX(need, ST_MIN_BUDGET);
}

/* What the medium of ex needs, from what the engine will choose (nothing
 * timed): its workers and queue depth (as set, else its automatic ones),
 * the largest read, and the device queue under the first file with reads
 * (its largest unsplit request; none on tmpfs). */
static void st_medium(const rl_loader *ld, const struct pl_exec *ex, struct ex_wpool_want *w)
{
	struct eng_devq q = { 0 };
	uint64_t bytes = 0;
	int have_q = 0;

	for (size_t i = 0; i < ex->nreads; i++) {
		bytes += ex->reads[i].len;
		if (!have_q)
			have_q = eng_devq_probe_path(ex->paths[ex->reads[i].file], &q) > 0;
	}
	w->request = ex->max_read;
	w->workers = ld->opt.eo.workers ? ld->opt.eo.workers : eng_auto_workers(bytes);
	w->workers = (unsigned)CM_MIN((uint64_t)w->workers, CM_MAX(ex->nreads, (size_t)1));
	w->depth = ld->opt.eo.queue_depth ? ld->opt.eo.queue_depth :
		   eng_auto_depth(w->workers, (uint32_t)CM_MIN(ex->max_read, UINT32_MAX),
				  have_q ? &q : NULL);
	w->dev_request = have_q ? q.max_bytes : 0;
}

/* Our pool of len bytes (kept when it has that size already). */
static int st_map_pool(rl_loader *ld, struct ld_stream *s, uint64_t len)
{
	if (s->pool_len == len)
		return 0;
	st_free_pool(ld, s);
	s->pool = eng_staging_alloc((size_t)len);
	if (!s->pool)
		return cm_err_set(&ld->err, -ENOMEM,
				  "streaming: cannot map a window pool of %" PRIu64 " bytes", len);
	s->pool_len = (size_t)len;
	return 0;
}

/* The pool (the caller's, or ours) cut into windows: page-aligned, as
 * ex_wpool_size says (the budget, the load's staging, or what keeps the
 * medium busy: the smallest); two from ST_TWO_WINDOWS on, and always two
 * when the medium sized it (one is read while the runtime drains the
 * other). */
static int st_setup_pool(rl_loader *ld, struct ld_stream *s)
{
	struct ex_wpool_want w = { .staging = st_pool_need(&s->ex), .page = ST_PAGE,
				   .min = ST_MIN_BUDGET, .window_floor = ST_WINDOW_FLOOR };
	uint64_t budget = (uint64_t)rl_loader_budget(ld);
	uint8_t *base;
	uint64_t len, two;

	st_medium(ld, &s->ex, &w);
	if (s->user_pool) {
		uintptr_t p = (uintptr_t)s->user_pool, a = cm_align_up(p, ST_PAGE);

		base = (uint8_t *)a;
		w.budget = s->user_len > a - p ? s->user_len - (a - p) : 0;
		len = ex_wpool_size(&w, &s->sized);
	} else {
		w.budget = CM_MAX(cm_align_down(budget, ST_PAGE), ST_MIN_BUDGET);
		len = ex_wpool_size(&w, &s->sized);
		if (st_map_pool(ld, s, len) < 0)
			return -ENOMEM;
		base = s->pool;
	}
	s->want = w;
	two = s->sized.limit == EX_WPOOL_BY_MEDIUM ? CM_MIN(len, ST_TWO_WINDOWS) : ST_TWO_WINDOWS;
	if (ex_wpool_cut(&s->wp, base, len, two, ST_PAGE) < 0)
		return cm_err_set(&ld->err, RL_E_STAGING,
				  "streaming: window pool of %" PRIu64 " usable bytes: at least %llu needed",
				  len, ST_MIN_BUDGET);
	return 0;
}

/* The program of ex (a batch per window, the checksum cover's fillers:
 * as large as the plan's reads), and the queue. */
static int st_plan(rl_loader *ld, struct ld_stream *s)
{
	const struct pl_exec *ex = &s->ex;
	struct ex_program_opts o = { s->wp.slot_bytes, ST_PAGE, ld->last.hash.hash,
				     (uint32_t)CM_MIN(CM_MAX(ex->max_read, 4096u), 1u << 30) };
	int ret = ex_program_build(&s->prog, ex, &o);

	if (ret < 0) /* the transform's RL_E_DTYPE, else out of memory */
		return cm_err_set(&ld->err, ret, "building the load's program: %s",
				  rl_strerror(ret));
	s->queue = cm_calloc(s->prog.win.npieces + s->prog.win.nzero + 1, sizeof(*s->queue));
	if (!s->queue)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	return 0;
}

/* ------------------------------------------------------------------ */
/* Pieces: handed out by the executor, given back by releases */

static uint64_t st_token(unsigned k, uint32_t gen, size_t idx)
{
	return ((uint64_t)(k + 1) << 56) | ((uint64_t)(gen & 0xffffffu) << 32) | (uint32_t)idx;
}

/* Gives back the piece of token t (not 0). */
static int st_give(struct ld_stream *s, uint64_t t)
{
	if ((t >> 56) == 0)
		return RL_E_PIECE;
	return ex_wpool_give(&s->wp, (unsigned)(t >> 56) - 1, (uint32_t)(t >> 32) & 0xffffffu,
			     (size_t)(t & 0xffffffffu));
}

int rl_loader_release(rl_loader *ld, const rl_piece *piece)
{
	uint64_t t;

	if (!ld || !piece)
		return -EINVAL;
	t = piece->token;
	if (t == 0)
		return 0; /* a zero-byte piece: nothing held */
	if (ld->deliver.stream && st_give(ld->deliver.stream, t) == 0)
		return 0;
	/* The caller's bug, named so it can be found: which piece and window. */
	return cm_err_set(&ld->err, RL_E_PIECE,
			  "rl_loader_release: piece %u of window %d (load %u; shard %zu, offset %"
			  PRIu64 ", %" PRIu64 " bytes) is not held: released twice, from an "
			  "earlier load or not from this loader", (uint32_t)t,
			  (int)(t >> 56) - 1, (unsigned)(t >> 32) & 0xffffffu, piece->shard,
			  piece->offset, piece->length);
}

/* The executor's on_piece: to the queue (pull) or the callback. */
static int st_piece(void *user, const struct ex_piece *sp, uint8_t *data, unsigned k,
		    uint32_t gen, size_t idx, struct cm_err *e)
{
	rl_loader *ld = user;
	struct ld_stream *s = ld->deliver.stream;
	rl_piece p = { sp->shard, sp->dev, sp->offset, sp->len, data,
		       idx == SIZE_MAX ? 0 : st_token(k, gen, idx) };

	if (ld->deliver.dev) /* in device memory, copied: no window held */
		p.data = (uint8_t *)(uintptr_t)ld_dev_piece_ptr(ld, sp->shard, sp->offset);

	if (s->pulling) {
		pthread_mutex_lock(&s->lock);
		s->queue[s->qtail++] = p;
		pthread_cond_broadcast(&s->ready);
		pthread_mutex_unlock(&s->lock);
		return 0;
	}
	if (ld->opt.on_piece(ld->opt.piece_user, &p) != 0)
		return cm_err_set(e, RL_E_CANCELED, "streaming: the piece callback canceled the load");
	return 0;
}

/* ------------------------------------------------------------------ */
/* A load */

_Static_assert(EX_WPOOL_BY_BUDGET == RL_POOL_BY_BUDGET && EX_WPOOL_BY_STAGING == RL_POOL_BY_STAGING &&
	       EX_WPOOL_BY_MEDIUM == RL_POOL_BY_MEDIUM, "ex_wpool_limit is RL_POOL_BY_*");

/* Why the pool has its size, for the shape text. */
static void st_pool_why(const struct ld_stream *s, char *out, size_t n)
{
	if (s->sized.limit == EX_WPOOL_BY_MEDIUM)
		snprintf(out, n, "medium: 2 windows of %u reads of %llu KiB, %u workers, depth %u",
			 s->sized.reads, (unsigned long long)(s->want.request >> 10),
			 s->want.workers, s->want.depth);
	else
		snprintf(out, n, "%s; the medium's %llu KiB",
			 s->sized.limit == EX_WPOOL_BY_STAGING ? "the load's staging" :
			 s->user_pool ? "the caller's pool" : "the budget",
			 (unsigned long long)(s->sized.medium >> 10));
}

/* The statistics of a streaming load: how the windows were read, as
 * fields and in the shape text. */
static void st_fill_stats_ex(rl_loader *ld, const struct ex_exec *x, const char *why)
{
	const struct ld_stream *s = ld->deliver.stream;
	char text[sizeof(((rl_load_stats *)0)->shape)]; /* why + the windows */
	char pool[128];

	st_pool_why(s, pool, sizeof(pool));
	snprintf(text, sizeof(text),
		 "%s%sstreaming: %u windows of %llu bytes, %sregistered with io_uring%s%s%s; "
		 "%zu ranges, %u engine set-up%s; pool %llu KiB (%s)", why, why[0] ? "; " : "",
		 s->wp.nslots, (unsigned long long)s->wp.slot_bytes, x->registered ? "" : "not ",
		 x->registered ? "" : " (", x->registered ? "" : x->why,
		 x->registered ? "" : ")", s->prog.win.n, x->runs, x->runs == 1 ? "" : "s",
		 (unsigned long long)(s->wp.nslots * s->wp.slot_bytes >> 10), pool);
	if (s->ex.max_read > ld_stream_request_cap(ld)) { /* a caller's plan: say what it costs */
		size_t n = strlen(text);

		snprintf(text + n, sizeof(text) - n, "; reads up to %" PRIu64 " over "
			 "rl_loader_request_bytes() %" PRIu64 ": read per window",
			 (uint64_t)s->ex.max_read, ld_stream_request_cap(ld));
	}
	ld_fill_stats_ex(ld, &x->stats, text);
	ld->last.stats.stream_windows = s->wp.nslots;
	ld->last.stats.stream_window_bytes = s->wp.slot_bytes;
	ld->last.stats.stream_registered = x->registered;
	ld->last.stats.stream_ranges = s->prog.win.n;
	ld->last.stats.stream_pool_bytes = s->wp.nslots * s->wp.slot_bytes; /* the windows' */
	ld->last.stats.stream_pool_limit = s->sized.limit;
	ld->last.stats.stream_pool_reads = s->sized.reads;
	ld->last.stats.stream_pool_medium = s->sized.medium;
	ld->last.stats.stream_pool_depth = s->want.depth;
	ld->last.stats.stream_pool_workers = s->want.workers;
	ld->last.stats.engine_runs = x->runs;
}

static int st_progress(void *user, uint64_t done, uint64_t total)
{
	rl_loader *ld = user;

	return ld->opt.on_progress(ld->opt.user, done, total);
}

/* The whole load of s->ex (on the calling or the library thread). */
static int st_load(rl_loader *ld, const char *why)
{
	struct ld_stream *s = ld->deliver.stream;
	struct ex_exec x = { .ex = &s->ex, .prog = &s->prog, .eo = ld->opt.eo,
			     .file_stats = ld->last.files, .digests = ld->last.hash.got,
			     .on_progress = ld->opt.on_progress ? st_progress : NULL,
			     .on_piece = st_piece, .user = ld, .pool = &s->wp,
			     .release_timeout_ms = ld->opt.release_timeout_ms };
	struct sink_host host[EX_WPOOL_MAX];
	int ret;

	for (unsigned k = 0; k < s->wp.nslots; k++)
		x.windows[k] = sink_host_init(host + k, 1, &s->wp.slot[k].ptr, &s->wp.slot_bytes);
	if (ld->deliver.dev) /* pieces only to a started load's consumer */
		ld_dev_device(ld, &x.device, &x.device_dst);
	if (ld->deliver.dev && !s->pulling)
		x.on_piece = NULL;
	ret = ex_execute(&x, &ld->err);
	for (unsigned k = 0; k < s->wp.nslots; k++) /* a refusal: noted once */
		if (!(x.stats.fallback_flags & ENG_FALLBACK_NOT_PREFAULTED))
			sink_host_note(host + k, &x.stats);
	if (ret == 0)
		ret = ld_hash_check(&ld->last.hash, &s->ex, &ld->err);
	/* After the check: a mismatch keeps no device memory. A started
	 * load's consumer may read the shards' addresses until it calls
	 * rl_loader_finish, which frees them then (on its thread). */
	if (ld->deliver.dev)
		ld_dev_done(ld, ret == 0 || s->pulling, &x.stats);
	ld_fill_stats(ld, &s->ex, &x.stats, 0, cm_now_s() - s->t0);
	st_fill_stats_ex(ld, &x, why);
	ld->last.failed = ret < 0;
	if (ret == 0)
		cm_err_clear(&ld->err);
	return ret;
}

/* ------------------------------------------------------------------ */
/* Starting and ending a load */

/* Everything a streaming load of ex needs before its first read: the
 * expected digests, the pool's windows, the program, a device load's sink. */
static int st_prepare(rl_loader *ld, const struct pl_exec *ex)
{
	struct ld_stream *s;
	int ret = ld_stream_idle(ld);

	if (ret < 0)
		return ret;
	ld_hashrun_free(&ld->last.hash); /* no stale results */
	s = st_get(ld);
	if (!s || ld_reset_files(ld, ex) < 0)
		return cm_err_set(&ld->err, -ENOMEM, "out of memory");
	ret = ld_hash_prepare(&ld->last.hash, ld->opt.expect, ld->opt.nexpect, ld->opt.sha256_hf, ex, &ld->err);
	if (ret < 0)
		return ret;
	ld_free_areas(ld); /* library staging of an earlier run */
	st_clear_load(s);
	s->ex = *ex;
	s->t0 = cm_now_s();
	ex_wpool_uncancel(&s->wp);
	ret = st_setup_pool(ld, s);
	if (ret == 0)
		ret = st_plan(ld, s);
	if (ret == 0 && ld->deliver.dev) /* the windows: one region from slot 0 on */
		ret = ld_dev_begin(ld, ex, s->wp.slot[0].ptr,
				    (size_t)(s->wp.nslots * s->wp.slot_bytes));
	return ret;
}

int ld_stream_exec(rl_loader *ld, const struct pl_exec *ex, double plan_s, const char *why)
{
	int ret;

	if (!ld->opt.on_piece && !ld->deliver.dev)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "streaming: rl_loader_run() needs a piece callback (rl_loader_set_piece_callback), or use rl_loader_start()");
	ret = st_prepare(ld, ex);
	if (ret == 0)
		ret = st_load(ld, why);
	ld->last.stats.plan_seconds = plan_s;
	ld->last.stats.total_seconds += plan_s;
	return ret;
}

static void *st_thread(void *arg)
{
	rl_loader *ld = arg;
	struct ld_stream *s = ld->deliver.stream;
	int ret = st_load(ld, "");

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
	if (pl_plan_stats_only(plan->pl))
		return cm_err_set(&ld->err, RL_E_STATE,
				  "plan built for statistics only (RL_PLAN_STATS_ONLY)");
	if (ld->opt.staging_mode != RL_STAGING_STREAM)
		return cm_err_set(&ld->err, RL_E_STATE,
				  "rl_loader_start() needs RL_OPT_STAGING = RL_STAGING_STREAM");
	if (ld->opt.has_transport) {    /* the others learn it at their first agreement */
		ld->last.failed = 1;
		return ex_xfer_agree(&ld->opt.tp, cm_err_set(&ld->err, RL_E_STATE,
				"rl_loader_start() with a transport: a started load moves no "
				"transfer; use rl_loader_run()"), "own reads", &ld->err);
	}
	pl_plan_exec(plan->pl, &ex);
	ret = st_prepare(ld, &ex);
	if (ret < 0)
		return ret;
	s = ld->deliver.stream;
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
	s = ld->deliver.stream;
	if (!s || !s->pulling)
		return RL_E_STATE;
	if (timeout_ms > 0)
		cm_deadline_ms(&until, (uint32_t)timeout_ms);
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
	int ret, stop;

	if (!ld)
		return -EINVAL;
	s = ld->deliver.stream;
	if (!s || !s->pulling)
		return cm_err_set(&ld->err, RL_E_STATE, "no streaming load started");
	pthread_mutex_lock(&s->lock);
	stop = !s->ended || s->qhead < s->qtail;
	pthread_mutex_unlock(&s->lock);
	if (stop)
		ex_wpool_cancel(&s->wp);
	pthread_join(s->tid, NULL);
	/* Pieces queued but never handed out go back unseen. */
	pthread_mutex_lock(&s->lock);
	for (; s->qhead < s->qtail; s->qhead++)
		if (s->queue[s->qhead].token)
			st_give(s, s->queue[s->qhead].token);
	s->pulling = 0;
	ret = s->result;
	pthread_mutex_unlock(&s->lock);
	if (ret == 0 && ex_wpool_canceled(&s->wp))
		ret = cm_err_set(&ld->err, RL_E_CANCELED,
				 "streaming: canceled (rl_loader_finish() before the last piece)");
	if (ret < 0 && ld->deliver.dev) /* failed, or canceled: no device memory kept */
		ld_dev_done(ld, 0, NULL);
	return ret;
}

int rl_loader_set_piece_callback(rl_loader *ld, rl_piece_fn fn, void *user)
{
	if (!ld)
		return -EINVAL;
	ld->opt.on_piece = fn;
	ld->opt.piece_user = user;
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
		ld_dev_unpin(ld); /* the caller may free the old pool now */
	s->user_pool = ptr;
	s->user_len = ptr ? len : 0;
	cm_err_clear(&ld->err);
	return 0;
}
