/*
 * engine.c - runs a job: opens the files (probing the page cache and the
 * device queue under each), sizes the run (setup.c), sets up worker 0's
 * backend on the calling thread (io_uring, then libaio, then a pread pool,
 * with the reason for each fallback), starts the other workers on the
 * same backend, runs worker 0's share, waits for the others while
 * reporting progress, and merges their statistics. That set-up is a
 * session: streaming runs each window range as a batch on the same
 * workers (eng_session_*), and eng_run is a session of one batch.
 *
 * Thread design. N workers, each owning one backend instance (its io_uring
 * ring, libaio context or pread pool), its bounce buffers and request
 * slots. A ring is used only by the thread that created it, so
 * SINGLE_ISSUER and DEFER_TASKRUN stay legal. Workers claim reads from one
 * shared cursor in the job's order (file, then offset), a few ahead of
 * what they have in flight, so that all stay busy to the end and each
 * has the job's sink prepare what it is about to fill (deliver.c; the host
 * sink pre-faults it). The worker that reaps a read hands its copies to
 * the sink (deliver.c) and fires on_shard for the shards
 * it completes, under one lock so that the runtime sees one call at a
 * time. One byte limiter (limit.c, an atomic counter) bounds the bytes in
 * flight of all workers together; a worker that cannot take bytes sleeps
 * in its backend while it has reads in flight (woken by a release through
 * an eventfd read posted in its ring) and on a condition variable when it
 * has none. The calling thread is worker 0: a one-worker run has no other
 * thread at all (rlperf's raw reads, small loads).
 *
 * Why this shape. Before, one ring owner submitted and reaped and one
 * completion thread copied, and on a many-core host loading from
 * RAM-backed storage those two threads were the ceiling, not the storage:
 * reads out of RAM-backed storage and the page cache are copies done by
 * the submitting thread, and fresh staging is zeroed by the thread that
 * first touches it, so both scale only with the threads that do them. Each
 * worker keeps the ring owner's choices (SINGLE_ISSUER|DEFER_TASKRUN, the
 * owner reaps). The measurements behind both are in docs/engine.md
 * ("Why workers") and docs/benchmarks.md.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "eng_int.h"
#include "engine.h"

#define DEFAULT_INFLIGHT (128ull << 20) /* as the loader: api/load.c */
#define DEFAULT_QD 16
#define MAX_BUFFER (1u << 30)
#define MAX_QD 4096

void eng_opts_default(struct eng_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backend = ENG_AUTO;
	o->queue_depth = DEFAULT_QD;
	o->inflight_bytes = DEFAULT_INFLIGHT;
	o->register_buffers = 1;
	o->register_files = 1;
	o->direct = ENG_DIRECT_ON;
}

int eng_create(const struct eng_opts *opts, struct eng **out, struct cm_err *e)
{
	struct eng *eng;

	*out = NULL;
	if (opts->backend != ENG_AUTO && !eng_backend_ops(opts->backend))
		return cm_err_set(e, RL_E_INVALID_ARG, "backend %d: no such backend", opts->backend);
	if (opts->queue_depth > MAX_QD)
		return cm_err_set(e, RL_E_INVALID_ARG, "queue depth %u: not 0..%u",
				  opts->queue_depth, MAX_QD);
	if (opts->inflight_bytes < 1)
		return cm_err_set(e, RL_E_INVALID_ARG, "in-flight bound must be >= 1 byte");
	if (opts->buffer_bytes > MAX_BUFFER)
		return cm_err_set(e, RL_E_INVALID_ARG, "buffer size %u: over 1 GiB",
				  opts->buffer_bytes);
	if (opts->buffers > 65536 || opts->threads > 1024 || opts->workers > 256)
		return cm_err_set(e, RL_E_INVALID_ARG,
				  "buffers (%u), threads (%u) or workers (%u) too many",
				  opts->buffers, opts->threads, opts->workers);
	if (opts->direct < ENG_DIRECT_OFF || opts->direct > ENG_DIRECT_AUTO)
		return cm_err_set(e, RL_E_INVALID_ARG, "direct %d: not 0..2", opts->direct);
	eng = cm_calloc(1, sizeof(*eng));
	if (!eng)
		return cm_err_set(e, -ENOMEM, "out of memory");
	eng->o = *opts;
	*out = eng;
	return 0;
}

void eng_destroy(struct eng *eng)
{
	cm_free(eng);
}

/* ------------------------------------------------------------------ */
/* A run */

/* A session's batch: locks made, counters at zero, no job yet but the
 * one set-up checks. */
static void batch_init(struct eng_batch *b, const struct eng *eng, const struct eng_job *job,
		       struct eng_stats *st, struct cm_err *e)
{
	b->job = job;
	b->st = st;
	b->e = e;
	b->bound = eng->o.inflight_bytes;
	atomic_init(&b->cursor, 0);
	atomic_init(&b->inflight, 0);
	atomic_init(&b->peak, 0);
	atomic_init(&b->waiters, 0);
	atomic_init(&b->done_bytes, 0);
	atomic_init(&b->failed, 0);
	atomic_init(&b->progress_due, 0);
	pthread_mutex_init(&b->lock, NULL);
	pthread_mutex_init(&b->note_lock, NULL);
	pthread_mutex_init(&b->cb_lock, NULL);
	pthread_cond_init(&b->cond, NULL);
	pthread_cond_init(&b->go, NULL);
}

static void batch_free(struct eng_batch *b)
{
	cm_free(b->shard_done);
	cm_free(b->shard_planned);
	pthread_cond_destroy(&b->go);
	pthread_cond_destroy(&b->cond);
	pthread_mutex_destroy(&b->cb_lock);
	pthread_mutex_destroy(&b->note_lock);
	pthread_mutex_destroy(&b->lock);
}

static void run_init(struct eng_run *rc, const struct eng *eng, const struct eng_job *job,
		     struct eng_stats *st, struct cm_err *e)
{
	memset(rc, 0, sizeof(*rc));
	rc->cx.o = &eng->o;
	eng_hooks_start(rc, eng);
	batch_init(&rc->b, eng, job, st, e);
}

static void run_free(struct eng_run *rc)
{
	eng_close_files(rc);
	cm_free(rc->cx.workers);
	batch_free(&rc->b);
}

/* A worker other than 0, on its own thread: set up once, then every
 * batch posted (rc->b.gen) until the session ends. A worker whose setup
 * failed leaves at once, giving up its part in the batch under way. */
static void *worker_main(void *arg)
{
	struct eng_worker *w = arg;
	struct eng_run *rc = w->run;
	struct cm_err e = { 0, "" };
	int ret = eng_worker_setup(w, rc->cx.backend, &e);

	if (ret == -ENOMEM && !w->setup_kernel_nomem)
		eng_fail(&rc->b, ret, "worker %u: %s", w->id, e.msg); /* ours: as worker 0's */
	else if (ret < 0)
		eng_note(&rc->b, ENG_FALLBACK_FEWER_WORKERS, "worker %u not started: %s", w->id, e.msg);
	w->started = ret == 0;
	pthread_mutex_lock(&rc->b.lock);
	rc->b.pending_setup--;
	pthread_cond_broadcast(&rc->b.cond);
	for (;;) {
		while (w->started && !rc->b.ending && w->seen == rc->b.gen)
			pthread_cond_wait(&rc->b.go, &rc->b.lock);
		if (!w->started || rc->b.ending)
			break;
		w->seen = rc->b.gen;
		pthread_mutex_unlock(&rc->b.lock);
		eng_worker_run(w);
		pthread_mutex_lock(&rc->b.lock);
		rc->b.running--;
		pthread_cond_broadcast(&rc->b.cond);
	}
	rc->b.live--;
	if (!w->started && w->seen != rc->b.gen) /* posted, never to be run */
		rc->b.running--;
	pthread_cond_broadcast(&rc->b.cond);
	pthread_mutex_unlock(&rc->b.lock);
	eng_worker_teardown(w);
	return NULL;
}

/* Starts workers 1..N-1; a thread that cannot start leaves the reads to
 * the others. */
static void start_workers(struct eng_run *rc)
{
	for (unsigned i = 1; i < rc->cx.nworkers; i++) {
		struct eng_worker *w = rc->cx.workers + i;
		int ret;

		pthread_mutex_lock(&rc->b.lock);
		rc->b.live++;
		rc->b.pending_setup++;
		w->seen = rc->b.gen;
		pthread_mutex_unlock(&rc->b.lock);
		ret = eng_thread_start(&w->tid, ENG_WORKER_STACK, worker_main, w);
		if (ret == 0) {
			w->joinable = 1;
			continue;
		}
		pthread_mutex_lock(&rc->b.lock);
		rc->b.live--;
		rc->b.pending_setup--;
		pthread_mutex_unlock(&rc->b.lock);
		eng_note(&rc->b, ENG_FALLBACK_FEWER_WORKERS, "worker %u not started: %s", i, strerror(ret));
	}
}

/* Asks every worker to leave, and joins them. */
static void stop_workers(struct eng_run *rc)
{
	pthread_mutex_lock(&rc->b.lock);
	rc->b.ending = 1;
	pthread_cond_broadcast(&rc->b.go);
	pthread_mutex_unlock(&rc->b.lock);
	for (unsigned i = 1; rc->cx.workers && i < rc->cx.nworkers; i++)
		if (rc->cx.workers[i].joinable)
			pthread_join(rc->cx.workers[i].tid, NULL);
}

/* The workers' statistics of the batch just run, added up; the read span
 * from the first submission to the last completion of any. */
static void merge_stats(struct eng_run *rc)
{
	struct eng_stats *st = rc->b.st;

	for (unsigned i = 0; i < rc->cx.nworkers; i++)
		if (rc->cx.workers[i].started)
			eng_stats_merge(st, &rc->cx.workers[i].st, ENG_MERGE_WORKERS);
	if (st->read_first_ns && st->read_last_ns > st->read_first_ns)
		st->read_seconds = (st->read_last_ns - st->read_first_ns) / 1e9;
	st->peak_inflight = atomic_load_explicit(&rc->b.peak, memory_order_relaxed);
	/* Relaxed: the workers of the batch were joined (run_batch). */
	st->limiter_left = atomic_load_explicit(&rc->b.inflight, memory_order_relaxed);
	st->backend = rc->cx.backend;
}

/* Per file: what was decided, and whether every byte came by O_DIRECT. */
static void file_stats(struct eng_run *rc)
{
	struct eng_stats *st = rc->b.st;
	int all_direct = rc->cx.nfiles > 0 && st->bytes_buffered == 0;

	for (size_t i = 0; rc->cx.files && i < rc->cx.nfiles; i++) {
		const struct eng_file_stat *fs = &rc->cx.files[i].st;

		if (fs->mode == ENG_FILE_CACHED)
			st->files_cached++;
		if (fs->mode != ENG_FILE_DIRECT && fs->mode != ENG_FILE_UNUSED)
			all_direct = 0;
		if (rc->b.job->file_stats)
			rc->b.job->file_stats[i] = *fs;
	}
	st->direct_io = all_direct;
}

/* After a successful batch: every shard complete, zero-byte ones reported
 * (on the calling thread: no worker runs any more). */
static int finish_shards(struct eng_run *rc)
{
	const struct eng_job *job = rc->b.job;

	if (!job->shard_bytes)
		return 0;
	for (size_t s = 0; s < job->nshards; s++) {
		uint64_t done = atomic_load_explicit(rc->b.shard_done + s, memory_order_relaxed);

		if (done != job->shard_bytes[s])
			return cm_err_set(rc->b.e, -EIO,
					  "shard %zu incomplete after every read: %llu of %llu bytes",
					  s, (unsigned long long)done,
					  (unsigned long long)job->shard_bytes[s]);
	}
	for (size_t s = 0; job->on_shard && s < job->nshards; s++)
		if (job->shard_bytes[s] == 0)
			job->on_shard(job->user, s);
	return 0;
}

/* ------------------------------------------------------------------ */
/* Sessions: set up once, run batch after batch */

struct eng_session {
	struct eng_run rc;
	struct eng_stats first;  /* begin's statistics: shape, set-up time */
	const struct eng_job *checked; /* eng_run's job: checked by begin */
	int failed;              /* a batch failed: the session only ends */
	struct cm_err ferr;      /* and why */
	int set_up;              /* worker 0 set up (teardown owed) */
};

/* Worker 0's backend on the calling thread, then the others on theirs
 * (the same backend): they wait for the first batch. */
static int start_session(struct eng_session *s)
{
	struct eng_run *rc = &s->rc;
	struct eng_worker *w0 = rc->cx.workers;
	int ret = eng_worker_setup(w0, ENG_AUTO, rc->b.e);

	w0->started = ret == 0;
	s->set_up = 1;
	if (ret < 0)
		return ret;
	rc->cx.backend = w0->backend;
	start_workers(rc);
	/* Wait for every helper's setup: what they note (fallbacks) goes
	 * into begin's statistics, which the batches copy, and a setup that
	 * failed for want of memory fails the session here. */
	pthread_mutex_lock(&rc->b.lock);
	while (rc->b.pending_setup)
		pthread_cond_wait(&rc->b.cond, &rc->b.lock);
	ret = rc->b.err;
	pthread_mutex_unlock(&rc->b.lock);
	return ret;
}

static struct eng_session *session_new(struct eng *eng, const struct eng_job *files_job,
				       struct eng_stats *st, struct cm_err *e)
{
	struct eng_session *s = cm_calloc(1, sizeof(*s));

	if (!s) {
		cm_err_set(e, -ENOMEM, "out of memory");
		return NULL;
	}
	memset(st, 0, sizeof(*st));
	run_init(&s->rc, eng, files_job, st, e);
	return s;
}

/* Files, integrity, sizing and the workers: what begin and eng_run share.
 * n NULL: size from files_job's own reads (checked here). */
/* The job's files opened and probed (eng_open_files), once its paths
 * are there: what a session's set-up and eng_job_cached share. */
static int open_job_files(struct eng_run *rc)
{
	const struct eng_job *job = rc->b.job;

	if (job->nfiles && (!job->paths || !job->file_sizes))
		return cm_err_set(rc->b.e, RL_E_INVALID_ARG, "job without file paths");
	return eng_open_files(rc);
}

static int session_setup(struct eng_session *s, const struct eng_needs *n)
{
	struct eng_run *rc = &s->rc;
	const struct eng_job *job = rc->b.job;
	struct eng_needs own;
	uint64_t t0 = cm_now_ns();
	int ret = open_job_files(rc);

	if (ret == 0)
		ret = eng_integ_open(rc);
	if (ret == 0 && !n) {
		ret = eng_check_job(rc, &own);
		n = &own;
		s->checked = job;
	}
	if (ret == 0)
		ret = eng_size_run(rc, n, job->next && !job->reads);
	if (ret == 0)
		ret = start_session(s);
	rc->b.st->setup_seconds = (cm_now_ns() - t0) / 1e9;
	s->first = *rc->b.st;
	return ret;
}

int eng_session_begin(struct eng *eng, const struct eng_job *files_job,
		      const struct eng_session_needs *sz, const struct eng_fixed *fixed,
		      unsigned nfixed, struct eng_stats *st, struct eng_session **out,
		      struct cm_err *e)
{
	struct eng_session *s = session_new(eng, files_job, st, e);
	struct eng_needs n = { 0 };
	int ret;

	*out = NULL;
	if (!s)
		return -ENOMEM;
	n.all_bytes = sz->all_bytes;
	n.nreads = sz->nreads;
	n.bounce = sz->bounce;
	n.bounce_bytes = sz->bounce_bytes;
	n.max_read = sz->max_read;
	n.maxlen = !sz->bounce ? 0 : sz->max_bounce ? sz->max_bounce : sz->max_read;
	s->rc.cx.fixed = fixed;
	s->rc.cx.nfixed = fixed ? nfixed : 0;
	ret = session_setup(s, &n);
	if (ret < 0) {
		eng_session_end(s);
		return ret;
	}
	*out = s;
	return 0;
}

/* Per batch: the shared counters and every worker's queue back to the
 * start (no worker runs: the last batch was joined). */
static void reset_batch(struct eng_run *rc)
{
	struct eng_batch *b = &rc->b;

	atomic_store_explicit(&b->cursor, 0, memory_order_relaxed);
	atomic_store_explicit(&b->inflight, 0, memory_order_relaxed);
	atomic_store_explicit(&b->peak, 0, memory_order_relaxed);
	atomic_store_explicit(&b->done_bytes, 0, memory_order_relaxed);
	atomic_store_explicit(&b->progress_due, 0, memory_order_relaxed);
	b->progress_last = 0;
	b->nmarks = 0;
	for (unsigned i = 0; i < rc->cx.nworkers; i++)
		eng_worker_reset(rc->cx.workers + i);
}

/* Posts the batch to the helper workers, runs worker 0's share, waits
 * for the others while reporting progress. */
static void run_batch(struct eng_run *rc)
{
	pthread_mutex_lock(&rc->b.lock);
	rc->b.gen++;
	rc->b.running = rc->b.live;
	pthread_cond_broadcast(&rc->b.go);
	pthread_mutex_unlock(&rc->b.lock);
	if (rc->cx.workers[0].started)
		eng_worker_run(rc->cx.workers);
	eng_progress_wait(&rc->b);
}

/* After a batch: statistics, then its first error, the final progress,
 * the integrity checks and the shards. */
static int end_batch(struct eng_run *rc)
{
	int ret;

	merge_stats(rc);
	file_stats(rc);
	ret = rc->b.err;
	if (ret == 0)
		eng_progress_report(&rc->b, 1);
	if (ret == 0)
		ret = rc->b.err;
	if (ret == 0)
		ret = eng_integ_finish(rc);
	if (ret == 0)
		ret = finish_shards(rc);
	return ret;
}

/* Stops and joins the helper workers (each tears its backend down, so
 * that nothing is left in the kernel), then tears worker 0's down. Notes
 * made meanwhile go to the session's own statistics. */
static void session_stop(struct eng_session *s)
{
	struct eng_run *rc = &s->rc;

	if (!s->set_up)
		return;
	rc->b.st = &s->first;
	stop_workers(rc);
	eng_worker_teardown(rc->cx.workers);
	s->set_up = 0;
}

int eng_session_run(struct eng_session *s, const struct eng_job *job, struct eng_stats *st,
		    struct cm_err *e)
{
	struct eng_run *rc = &s->rc;
	struct eng_needs n;
	int ret = s->failed;

	memset(st, 0, sizeof(*st));
	memcpy(st->shape, s->first.shape, sizeof(st->shape));
	memcpy(st->fallbacks, s->first.fallbacks, sizeof(st->fallbacks));
	st->fallback_flags = s->first.fallback_flags;
	st->max_read = s->first.max_read;
	if (ret < 0) {
		if (e)
			*e = s->ferr;
		return ret;
	}
	rc->b.job = job;
	rc->b.st = st;
	rc->b.e = e;
	if (job != s->checked)
		ret = eng_check_job(rc, &n);
	s->checked = NULL;
	if (ret == 0) {
		reset_batch(rc);
		run_batch(rc);
		ret = end_batch(rc);
	}
	/* No worker runs: the sink's finish (before a failed session's
	 * teardown frees the buffers an asynchronous sink might read). */
	ret = eng_sink_finish(rc, ret);
	if (ret < 0) {
		s->failed = ret;
		if (e)
			s->ferr = *e;
		/* Nothing of a failed run stays in flight once it returns. */
		session_stop(s);
		/* What the teardowns could not reap: counted after the merge. */
		for (unsigned i = 0; i < rc->cx.nworkers; i++)
			st->abandoned += rc->cx.workers[i].st.abandoned;
	} else if (e) {
		cm_err_clear(e);
	}
	return ret;
}

int eng_session_fixed(const struct eng_session *s, char *why, size_t len)
{
	const struct eng_run *rc = &s->rc;

	/* Every worker's registration is done: begin waited for them. */
	if (!rc->cx.nfixed) {
		snprintf(why, len, "no memory to register");
		return 0;
	}
	if (!(eng_backend_caps(rc->cx.backend) & ENG_CAP_FIXED_BUFFERS)) {
		snprintf(why, len, "backend %s", eng_backend_name(rc->cx.backend));
		return 0;
	}
	for (unsigned i = 0; i < rc->cx.nworkers; i++)
		if (rc->cx.workers[i].started && rc->cx.workers[i].reg_fixed != rc->cx.nfixed) {
			snprintf(why, len, "%s", !rc->cx.o->register_buffers ? "registration off" :
				 "over RLIMIT_MEMLOCK or refused by the kernel");
			return 0;
		}
	why[0] = '\0';
	return 1;
}

void eng_session_end(struct eng_session *s)
{
	struct eng_run *rc;

	if (!s)
		return;
	rc = &s->rc;
	session_stop(s);
	eng_integ_free(rc);
	run_free(rc);
	cm_free(s);
}

int eng_job_cached(const struct eng *eng, const struct eng_job *files_job, struct cm_err *e)
{
	struct eng_stats st;
	struct eng_run rc;
	int ret, cached = 0, device = 0;

	memset(&st, 0, sizeof(st));
	run_init(&rc, eng, files_job, &st, e);
	ret = open_job_files(&rc);
	for (size_t i = 0; ret == 0 && i < rc.cx.nfiles; i++) {
		int mode = rc.cx.files[i].st.mode;

		cached |= mode == ENG_FILE_CACHED;
		device |= mode != ENG_FILE_CACHED && mode != ENG_FILE_UNUSED;
	}
	run_free(&rc);
	return ret < 0 ? ret : cached && !device;
}

int eng_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
	    struct cm_err *e)
{
	struct eng_stats setup;
	struct eng_session *s = session_new(eng, job, &setup, e);
	int ret;

	if (!s) {
		memset(st, 0, sizeof(*st));
		return -ENOMEM;
	}
	ret = session_setup(s, NULL);
	if (ret == 0) {
		ret = eng_session_run(s, job, st, e);
		st->setup_seconds = setup.setup_seconds;
	} else {
		eng_sink_finish(&s->rc, ret);
		*st = setup;
		if (s->rc.cx.workers) {
			s->rc.b.st = st;
			merge_stats(&s->rc);
		}
		file_stats(&s->rc);
	}
	eng_session_end(s);
	if (ret == 0 && e)
		cm_err_clear(e);
	return ret;
}
