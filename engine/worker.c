/*
 * worker.c - one worker's life. It sets up its own backend (the thread
 * that submits to an io_uring ring must be the one that created it, for
 * SINGLE_ISSUER and DEFER_TASKRUN), its bounce buffers and request slots;
 * then, until the job is done or the run failed: claims reads from the
 * shared cursor (in the job's order: file, then offset) and pre-faults
 * their destinations while its earlier reads are in flight, submits what
 * its slots, buffers and the shared byte limiter allow, reaps in batches,
 * resubmits the rest of short reads, scatters what it reaped and gives
 * everything back. After a failure it stops submitting and drains what it
 * has in the kernel; its teardown cancels and reaps what a hard error left.
 */
#include <errno.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>

#include "eng_int.h"
#include "stats.h"
#include "util.h"

#define MAX_RETRIES 1000
#define REAP_BATCH 64

enum { NOT_BLOCKED = 0, BLOCKED_LOCAL, BLOCKED_BYTES };

/* ------------------------------------------------------------------ */
/* Setup and teardown */

static void be_free(struct be *be)
{
	if (!be)
		return;
	cm_free(be->inner);
	cm_free(be);
}

static struct be *be_new(struct eng_worker *w, const struct be_ops *ops, struct be *inner)
{
	struct be *be = cm_calloc(1, sizeof(*be));

	if (!be)
		return NULL;
	be->run = w->run;
	be->w = w;
	be->ops = ops;
	be->inner = inner;
	return be;
}

/* Sets up backend b (wrapped by the fault injector when asked). */
static int be_start(struct eng_worker *w, int b, struct be **out)
{
	struct be *be = be_new(w, eng_backend_ops(b), NULL), *outer;
	const struct be_ops *wrap = eng_hook_fault_ops(w->run, b);
	int ret;

	if (!be)
		return -ENOMEM;
	if (wrap) {
		outer = be_new(w, wrap, be);
		if (!outer) {
			cm_free(be);
			return -ENOMEM;
		}
		be = outer;
	}
	ret = be->ops->setup(be);
	if (ret < 0) {
		be_free(be);
		return ret;
	}
	*out = be;
	return 0;
}

/* Worker 0: the first backend of the order that sets up, with the reason
 * each one before it failed. */
static int choose_backend(struct eng_worker *w, struct cm_err *e)
{
	struct eng_run *rc = w->run;
	int want = rc->cx.o->backend, ret = 0;
	const struct be_ops *ops;
	struct utsname u;

	for (size_t i = 0; (ops = eng_backend_at(i)); i++) {
		int b = ops->id;

		if (want == ENG_AUTO ? ops->auto_order != 0 : want != b)
			continue;
		w->setup_kernel_nomem = 0;
		ret = be_start(w, b, &w->be);
		if (ret == 0) {
			w->backend = b;
			return 0;
		}
		/* Our own allocations failing is fatal; the kernel refusing
		 * a ring's memory is a reason to try the next backend. */
		if (ret == -ENOMEM && !w->setup_kernel_nomem)
			return cm_err_set(e, ret, "%s setup: out of memory", eng_backend_name(b));
		if (w->setup_kernel_nomem && uname(&u) == 0)
			eng_note(&rc->b, ENG_FALLBACK_BACKEND, "%s unavailable: %s (%s)", eng_backend_name(b),
				 strerror(-ret), eng_ring_nomem_reason(u.release));
		else
			eng_note(&rc->b, ENG_FALLBACK_BACKEND, "%s unavailable: %s", eng_backend_name(b), strerror(-ret));
	}
	return cm_err_set(e, RL_E_BACKEND, "backend %s unavailable: %s",
			  eng_backend_name(want), strerror(-ret));
}

/* Request slots and bounce buffers: this worker's own. */
static int setup_slots(struct eng_worker *w, struct cm_err *e)
{
	struct eng_run *rc = w->run;
	uint64_t pool_len = (uint64_t)w->nbuf_want * cm_align_up(rc->cx.buf_bytes, 4096);
	int lock = pool_len <= rc->cx.memlock_share, ret;

	ret = eng_pool_create(&w->pool, w->nbuf_want, rc->cx.buf_bytes, lock,
			      rc->cx.o->buffer_small_pages);
	if (ret < 0)
		return cm_err_set(e, ret, "%u buffers of %u bytes: %s", w->nbuf_want,
				  rc->cx.buf_bytes, strerror(-ret));
	if (w->nbuf_want && !w->pool.locked)
		eng_note(&rc->b, ENG_FALLBACK_BUFFERS_UNLOCKED, lock ? "mlock of %u buffers refused: buffers unlocked" :
			 "mlock of %u buffers skipped: over the worker's share of RLIMIT_MEMLOCK",
			 w->nbuf_want);
	w->nreqs = w->qd;
	w->reqs = cm_calloc(w->nreqs, sizeof(*w->reqs));
	w->free_bufs = cm_calloc(w->pool.nbuf + 1, sizeof(int));
	w->cap = w->qd;
	w->claimed = cm_calloc(w->cap, sizeof(*w->claimed));
	w->held = cm_calloc(w->pool.nbuf + 1, sizeof(*w->held));
	if (!w->reqs || !w->free_bufs || !w->claimed || !w->held)
		return cm_err_set(e, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < w->nreqs; i++) {
		w->reqs[i].slot = i;
		w->reqs[i].next = i + 1 < w->nreqs ? w->reqs + i + 1 : NULL;
	}
	w->free_reqs = w->reqs;
	for (unsigned i = 0; i < w->pool.nbuf; i++)
		w->free_bufs[i] = (int)(w->pool.nbuf - 1 - i);
	w->nfree_bufs = w->pool.nbuf;
	return 0;
}

int eng_worker_setup(struct eng_worker *w, int backend, struct cm_err *e)
{
	int ret = setup_slots(w, e);

	if (ret < 0)
		return ret;
	if (backend == ENG_AUTO)
		return choose_backend(w, e);
	w->backend = backend;
	w->setup_kernel_nomem = 0;
	ret = be_start(w, backend, &w->be);
	if (ret < 0)
		cm_err_set(e, ret, "%s setup: %s", eng_backend_name(backend), strerror(-ret));
	return ret;
}

void eng_worker_teardown(struct eng_worker *w)
{
	if (w->be) {
		w->be->ops->teardown(w->be);
		be_free(w->be);
		w->be = NULL;
	}
	/* Only now: the backend's teardown left nothing in the kernel that
	 * could still land in a buffer. */
	eng_pool_destroy(&w->pool);
	cm_free(w->reqs);
	cm_free(w->free_bufs);
	cm_free(w->claimed);
	cm_free(w->held);
	w->reqs = NULL;
	w->free_bufs = NULL;
	w->claimed = NULL;
	w->held = NULL;
}

void eng_worker_reset(struct eng_worker *w)
{
	const struct eng_job *job = w->run->b.job;

	/* A batch ends with nothing in flight or queued (eng_worker_run
	 * returns only then, or on a failure, which ends the session). */
	w->head = w->count = 0;
	w->exhausted = 0;
	w->retry = NULL;
	w->prefault = job->reads && job->ncopies && eng_sink_ok(job->sink) &&
		      job->sink->ops->prepare;
	w->async = eng_sink_ok(job->sink) && job->sink->ops->fence && job->sink->ops->wait;
	w->held_head = w->nheld = 0;
	eng_stats_restart(&w->st);
}

/* ------------------------------------------------------------------ */
/* Claiming reads */

/* The next read of the job, checked; 0 when there is none. */
static int fetch(struct eng_worker *w, struct cm_read *r)
{
	struct eng_run *rc = w->run;
	const struct eng_job *job = rc->b.job;
	int ret;

	if (job->reads || !job->next) {
		/* Relaxed: each index goes to one worker; the reads are
		 * immutable and were checked before the workers started. */
		size_t i = atomic_fetch_add_explicit(&rc->b.cursor, 1, memory_order_relaxed);

		if (!job->reads || i >= job->nreads)
			return 0;
		*r = job->reads[i];
		return 1;
	}
	/* A generator runs on one worker: checked here, as it comes. */
	if (!job->next(job->user, r))
		return 0;
	ret = eng_check_read(rc, r);
	if (ret == 0)
		ret = eng_plan_shards(rc, r);
	if (ret == 0 && !eng_direct_dst(rc, r) && r->len > rc->cx.buf_bytes)
		ret = cm_err_set(rc->b.e, RL_E_INVALID_ARG,
				 "%s: read at offset %llu: length %u exceeds the buffer size %u",
				 job->paths[r->file], (unsigned long long)r->off, r->len,
				 rc->cx.buf_bytes);
	if (ret < 0) {
		eng_fail(&rc->b, ret, "%s", rc->b.e->msg);
		return 0;
	}
	return 1;
}

/* The job's on_data consumer holds too much: claim no new reads. */
static int backlog(struct eng_run *rc)
{
	const struct eng_job *job = rc->b.job;

	return job->on_data_full && job->on_data_full(job->user);
}

/* A worker with nothing claimed or in flight, paused by backlog: sleeps a
 * millisecond (a run that fails meanwhile is seen at once after it). */
static void backlog_wait(struct eng_run *rc)
{
	struct timespec ts = { 0, 1000000 };

	if (backlog(rc) && !eng_failed(&rc->b))
		nanosleep(&ts, NULL);
}

/* Claims one read into the queue (the sink preparing its destinations
 * when asked); 0 when there is none or the queue is full. */
static int claim_one(struct eng_worker *w, int prefault)
{
	struct cm_read *r = w->claimed + (w->head + w->count) % w->cap;

	if (w->exhausted || w->count == w->cap || eng_failed(&w->run->b) ||
	    backlog(w->run)) /* on_data's consumer is behind: let it catch up */
		return 0;
	if (!fetch(w, r)) {
		w->exhausted = 1;
		return 0;
	}
	w->count++;
	if (prefault)
		eng_prepare(w, r);
	return 1;
}

/* Looks ahead while earlier reads are in flight: claims one more read
 * (until a queue's worth waits) and faults in where it will land. One at
 * a time, with a look at completions between, so that the queue stays
 * full while the zeroing goes on. Returns 1 when it claimed one. */
static int claim_ahead(struct eng_worker *w)
{
	int got;

	if (!w->prefault)
		return 0;
	got = claim_one(w, 1);
	eng_prepare_flush(w);
	return got;
}

/* ------------------------------------------------------------------ */
/* Resources: slots and buffers (the worker's) and limiter bytes. */

/* Takes what read r needs, or returns NULL with *why set. */
static struct eng_req *take(struct eng_worker *w, const struct cm_read *r, uint8_t *dst,
			    int *why)
{
	struct eng_req *q = w->free_reqs;
	int buf = -1;

	/* Every buffer held by an asynchronous sink: wait for the oldest
	 * (a failed wait gives them back unwaited: read into none). */
	if (!dst && !w->nfree_bufs && w->nheld) {
		eng_release(w, 0);
		if (eng_failed(&w->run->b)) {
			*why = BLOCKED_LOCAL;
			return NULL;
		}
	}
	if (!q || (!dst && !w->nfree_bufs)) {
		*why = BLOCKED_LOCAL; /* our own reads in flight hold them */
		return NULL;
	}
	if (!eng_lim_try(w->run, r->len)) {
		*why = BLOCKED_BYTES;
		return NULL;
	}
	w->lim_held += r->len;
	w->free_reqs = q->next;
	if (!dst)
		buf = w->free_bufs[--w->nfree_bufs];
	q->r = *r;
	q->buf = buf;
	q->dst = dst ? dst : eng_pool_buf(&w->pool, buf);
	q->io_pos = 0;
	q->io_len = r->len;
	q->got = q->retries = 0;
	q->res = 0;
	q->next = NULL;
	return q;
}

/* Gives back everything q holds. */
static void drop(struct eng_worker *w, struct eng_req *q)
{
	if (q->buf >= 0)
		w->free_bufs[w->nfree_bufs++] = q->buf;
	eng_lim_give(w->run, q->r.len);
	w->lim_held -= q->r.len;
	q->next = w->free_reqs;
	w->free_reqs = q;
}

/* ------------------------------------------------------------------ */
/* Submission and completion */

static int submit(struct eng_worker *w, struct eng_req *q)
{
	const struct eng_file *f = w->run->cx.files + q->r.file;
	uint64_t off = q->r.off + q->io_pos;
	int ret;

	/* O_DIRECT when offset, length and address allow it. */
	q->direct = f->dfd >= 0 && off % f->align == 0 && q->io_len % f->align == 0 &&
		    (uintptr_t)(q->dst + q->io_pos) % f->align == 0;
	if (!q->retries && !q->io_pos)
		q->submit_ns = cm_now_ns();
	q->res = 0;
	ret = w->be->ops->queue(w->be, q);
	if (ret < 0)
		return ret;
	w->in_kernel++;
	w->st.reads++;
	return 0;
}

static void fail_read(struct eng_worker *w, struct eng_req *q, int err, const char *what)
{
	eng_fail(&w->run->b, err, "%s: read at offset %llu length %u failed: %s",
		 w->run->cx.files[q->r.file].path, (unsigned long long)(q->r.off + q->io_pos),
		 q->io_len, what);
	drop(w, q);
}

/* Retries q later (EAGAIN, or the rest of a short read); 0, or -1 when it
 * failed after too many tries. */
static int requeue(struct eng_worker *w, struct eng_req *q, const char *why)
{
	if (++q->retries > MAX_RETRIES) {
		fail_read(w, q, -EIO, why);
		return -1;
	}
	w->st.retries++;
	q->next = w->retry;
	w->retry = q;
	return 0;
}

/* The bytes that arrived; 1 when q needs more (requeued or failed). */
static int short_read(struct eng_worker *w, struct eng_req *q, int res)
{
	const struct eng_file *f = w->run->cx.files + q->r.file;
	uint32_t got = q->io_pos + (uint32_t)res, pos;

	/* A resubmission from an aligned position re-reads a prefix:
	 * count only bytes not counted before. */
	if (got > q->got) {
		w->st.bytes_read += got - CM_MAX(q->got, q->io_pos);
		q->got = got;
	}
	if (got >= q->r.len || got >= q->r.min_len)
		return 0;
	if (res == 0) {
		eng_fail(&w->run->b, RL_E_TRUNCATED,
			 "%s: file truncated/changed during load: read at offset %llu length %u ended at %llu",
			 f->path, (unsigned long long)q->r.off, q->r.len,
			 (unsigned long long)(q->r.off + got));
		drop(w, q);
		return 1;
	}
	/* Short read: resubmit the rest, from an aligned position on the
	 * O_DIRECT descriptor; no progress that way means the buffered one
	 * takes over. */
	pos = q->direct ? (uint32_t)cm_align_down(got, f->align) : got;
	if (pos <= q->io_pos && q->direct)
		pos = got;
	q->io_pos = pos;
	q->io_len = q->r.len - pos;
	requeue(w, q, "gave up after repeated short reads");
	return 1;
}

static void count_progress(struct eng_worker *w, uint64_t len);

/* Every byte of q arrived: hooks, scatter, give back. */
static void finish(struct eng_worker *w, struct eng_req *q)
{
	struct eng_run *rc = w->run;
	const struct eng_job *job = rc->b.job;

	if (q->buf < 0)
		w->st.bytes_direct += q->r.len;
	if (!q->direct)
		w->st.bytes_buffered += q->r.len;
	if (job->on_read)
		job->on_read(job->user, &q->r, q->submit_ns, cm_now_ns());
	if (job->on_data && !eng_failed(&rc->b))
		job->on_data(job->user, &q->r, q->dst);
	/* Reads without copies (rlperf's raw reads) just free their buffer;
	 * an asynchronous sink keeps it (q->buf -1) until its copies ran. */
	if (q->r.ncopies && !eng_failed(&rc->b))
		eng_scatter(w, q);
	count_progress(w, q->r.len);
	drop(w, q);
}

/* Handles one reaped read: done, resubmit the rest, or fail the run. */
static void complete(struct eng_worker *w, struct eng_req *q)
{
	int res = q->res;

	w->in_kernel--;
	if (eng_failed(&w->run->b)) { /* draining */
		drop(w, q);
		return;
	}
	if (res == -EAGAIN || res == -EINTR) {
		if (requeue(w, q, "gave up after repeated EAGAIN") == 0)
			eng_backoff(q->retries);
		return;
	}
	if (res < 0) {
		fail_read(w, q, res, strerror(-res));
		return;
	}
	if ((uint32_t)res > q->io_len) {
		fail_read(w, q, -EIO, "kernel returned more bytes than asked");
		return;
	}
	if (short_read(w, q, res))
		return;
	finish(w, q);
}

/* ------------------------------------------------------------------ */
/* Progress: counted by every worker, reported on the calling thread. */

static void count_progress(struct eng_worker *w, uint64_t len)
{
	struct eng_run *rc = w->run;
	uint64_t old, step = rc->b.progress_step;

	if (!rc->b.job->on_progress)
		return;
	/* Relaxed: a counter for reporting; no memory hangs on it. Each
	 * worker's add owns the interval [old, old + len): the one whose
	 * interval crosses a step boundary marks it, so no step is lost
	 * whatever order reads complete in; a job of few reads marks every
	 * read (a step cannot be finer than a read). */
	old = atomic_fetch_add_explicit(&rc->b.done_bytes, len, memory_order_relaxed);
	if (rc->b.progress_each || old / step != (old + len) / step ||
	    old + len == rc->b.job->total_bytes)
		eng_progress_mark(&rc->b, old + len);
}

/* ------------------------------------------------------------------ */
/* The loop */

static void commit(struct eng_worker *w);

/* Submits what slots, buffers and bytes allow; returns the count queued
 * and sets *why when the next read must wait. */
static unsigned submit_some(struct eng_worker *w, int *why)
{
	unsigned queued = 0;
	int ret;

	while (!eng_failed(&w->run->b) && w->in_kernel < w->qd) {
		struct eng_req *q = w->retry;

		if (q) {
			w->retry = q->next;
		} else {
			const struct cm_read *r = w->claimed + w->head;

			if (!w->count) {
				if (!claim_one(w, w->prefault))
					break;
				eng_prepare_flush(w);
			}
			q = take(w, r, eng_direct_dst(w->run, r), why);
			if (!q)
				break;
			w->head = (w->head + 1) % w->cap;
			w->count--;
		}
		ret = submit(w, q);
		if (ret < 0) {
			fail_read(w, q, ret, strerror(-ret));
			break;
		}
		queued++;
		if (++w->uncommitted == w->run->cx.o->submit_batch)
			commit(w);   /* fio's iodepth_batch_submit */
	}
	return queued;
}

/* Hands the queued reads to the kernel (fio's td_io_commit). */
static void commit(struct eng_worker *w)
{
	const struct eng_job *job = w->run->b.job;
	int ret;

	if (!w->uncommitted)
		return;
	if (!w->st.read_first_ns)
		w->st.read_first_ns = cm_now_ns();
	if (job->on_commit)
		job->on_commit(job->user, w->uncommitted, w->in_kernel);
	w->uncommitted = 0;
	ret = w->be->ops->commit(w->be);
	if (ret < 0)
		eng_fail(&w->run->b, ret, "%s: submitting reads: %s", w->be->ops->name,
			 ret == -EAGAIN ? "the kernel kept refusing submissions (EAGAIN); giving up" :
			 strerror(-ret));
}

/* Reaps (blocking when told) and completes a batch; returns the reads
 * reaped, or -1 on a reap error. */
static int reap(struct eng_worker *w, int wait, int why)
{
	struct eng_req *done[REAP_BATCH];
	struct eng_run *rc = w->run;
	unsigned max = rc->cx.o->reap_max ? CM_MIN(rc->cx.o->reap_max, REAP_BATCH) : REAP_BATCH;
	int n, parked = 0;

	/* Blocked on bytes other workers hold: sleep in the kernel, where a
	 * release can wake us, unless the bytes came back meanwhile. */
	if (wait && why == BLOCKED_BYTES && !eng_failed(&rc->b)) {
		if (eng_lim_park(w, w->claimed[w->head].len))
			wait = 0;
		else
			parked = 1;
	}
	n = w->be->ops->reap(w->be, done, max, wait);
	if (parked)
		eng_lim_unpark(w);
	if (n < 0) {
		/* The backend cannot tell what is still in flight; its
		 * teardown cancels and waits for it. */
		eng_fail(&rc->b, n, "%s: reaping reads: %s", w->be->ops->name,
			 n == -EAGAIN ? "the kernel kept refusing submissions (EAGAIN); giving up" :
			 strerror(-n));
		return -1;
	}
	if (n > 0)
		w->st.read_last_ns = cm_now_ns();
	if (n > 0 && rc->b.job->on_reap)
		rc->b.job->on_reap(rc->b.job->user, (unsigned)n);
	for (int i = 0; i < n; i++)
		complete(w, done[i]);
	/* Relaxed: a hint; the marks themselves are taken under the lock. */
	if (w->id == 0 && atomic_load_explicit(&rc->b.progress_due, memory_order_relaxed))
		eng_progress_report(&rc->b, 0);
	return n;
}

/* A full queue under fio's batching (eng_opts.reap_min, depth_low): wait
 * for reap_min completions, then on until the depth is down to
 * depth_low, as fio's wait_for_completions. */
static int reap_full(struct eng_worker *w, int why)
{
	const struct eng_opts *o = w->run->cx.o;
	unsigned want = CM_MIN(CM_MAX(o->reap_min, 1u), w->in_kernel);
	unsigned low = o->depth_low && o->depth_low < w->qd ? o->depth_low : w->qd - 1;
	unsigned got = 0;
	int n;

	do {
		n = reap(w, 1, why);
		if (n < 0)
			return -1;
		got += (unsigned)n;
	} while (w->in_kernel && !eng_failed(&w->run->b) && (got < want || w->in_kernel > low));
	return 0;
}

void eng_worker_run(struct eng_worker *w)
{
	struct eng_run *rc = w->run;

	for (;;) {
		int why = NOT_BLOCKED, failed, wait, ahead;

		if (submit_some(w, &why))
			commit(w);
		ahead = claim_ahead(w);
		failed = eng_failed(&rc->b);
		if (w->in_kernel == 0) {
			if (failed || (!w->count && !w->retry && w->exhausted))
				break;
			if (ahead) /* more to fault in before sleeping on bytes */
				continue;
			if (why == BLOCKED_BYTES)
				eng_lim_wait(rc, w->claimed[w->head].len);
			else if (why == BLOCKED_LOCAL) /* cannot happen: setup gives every
						       * worker a buffer */
				eng_fail(&rc->b, -EINVAL, "worker %u: no bounce buffer for a read",
					 w->id);
			else
				backlog_wait(rc); /* claims paused by on_data_full */
			continue;
		}
		/* Block in the kernel only when nothing else can go now (and
		 * nothing is left to fault in ahead). */
		if (rc->cx.o->reap_min && !failed && w->in_kernel >= w->qd) {
			if (reap_full(w, why) < 0)
				break;
			continue;
		}
		wait = !ahead && (failed || why != NOT_BLOCKED || w->in_kernel >= w->qd ||
				  ((w->exhausted || backlog(rc)) && !w->count && !w->retry));
		if (reap(w, wait, why) < 0)
			break;
	}
	/* A failed run leaves reads waiting for their retry, and after a reap
	 * error reads in the kernel, which the backend's teardown drains;
	 * nothing submits again in this batch, so their bytes go back now
	 * and the limiter ends every batch at 0. */
	while (w->retry) {
		struct eng_req *q = w->retry;

		w->retry = q->next;
		drop(w, q);
	}
	if (w->lim_held)
		eng_lim_give(rc, w->lim_held);
	w->lim_held = 0;
	/* What an asynchronous sink still copies: waited for, and landed
	 * (after a failure only given back: the sink's finish waits). */
	eng_release(w, 1);
}
