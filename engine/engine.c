/*
 * engine.c - runs a job: opens the files, picks a backend (io_uring, then
 * libaio, then a pread pool, with the reason for each fallback), sizes the
 * buffer pool, and drives the submit/reap loop on the calling thread while
 * the completion thread (scatter.c) copies finished reads into staging.
 *
 * Thread design. The calling thread owns the backend: it alone submits and
 * reaps, which is what IORING_SETUP_SINGLE_ISSUER and DEFER_TASKRUN require,
 * and hands finished bounce reads to one completion thread through a queue.
 * Reads that went straight into staging need no copy: the owner gives their
 * limiter bytes back at once and the completion thread only counts their
 * shard bytes. When the owner cannot submit because the completion thread
 * holds the buffers or bytes it needs, it sleeps in the kernel only while
 * reads are in flight (the completion thread wakes it through the backend:
 * an eventfd read posted in the ring), and on a condition variable when
 * nothing is.
 *
 * Why this shape, measured (perf/bench_engine.c, 2.2 GB file read whole,
 * cold, QD 16 x 4 MiB straight into staging, median of 3 interleaved
 * rounds): owner reaps with SINGLE_ISSUER|DEFER_TASKRUN 1.36 GB/s; without
 * DEFER_TASKRUN 1.30; without SINGLE_ISSUER either (what a ring shared
 * with a reaping completion thread would need) 1.20. Keeping the ring on
 * one thread also keeps every CQE's request state owner-only: the
 * completion thread sees requests only through the locked queue.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "eng_int.h"

#define DEFAULT_QD 16
#define DEFAULT_INFLIGHT (128ull << 20) /* as the loader: api/load.c */
#define DEFAULT_BUFFER (4u << 20)
#define MAX_BUFFER (1u << 30)
#define MAX_QD 4096
#define MAX_RETRIES 1000
#define REAP_BATCH 64
#define PREFAULT_MIN (16u << 20)

struct eng {
	struct eng_opts o;
	int fault_backend, fault_kind;
	uint64_t fault_nth;
	unsigned uring_first;
	uint32_t aio_refuse;
	int uring_setup_err;
};

void eng_backoff(uint32_t attempt)
{
	/* The first retries go at once (a transient refusal clears fast);
	 * then 10 us doubling up to 320 us, so MAX_RETRIES spans about a
	 * third of a second rather than microseconds. */
	struct timespec ts = { 0, 0 };

	if (attempt <= 2)
		return;
	ts.tv_nsec = 10000L << RL_MIN(attempt - 3, 5u);
	nanosleep(&ts, NULL);
}

uint64_t eng_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void eng_note(struct eng_run *rc, const char *fmt, ...)
{
	char *s = rc->st->fallbacks;
	size_t n = strlen(s);
	va_list ap;

	if (n && n + 2 < sizeof(rc->st->fallbacks)) {
		strcpy(s + n, "; ");
		n += 2;
	}
	if (n + 1 >= sizeof(rc->st->fallbacks))
		return;
	va_start(ap, fmt);
	vsnprintf(s + n, sizeof(rc->st->fallbacks) - n, fmt, ap);
	va_end(ap);
}

const char *eng_backend_name(int backend)
{
	static const char *const names[] = { "auto", "io_uring", "libaio", "pread" };

	return backend >= 0 && backend < 4 ? names[backend] : "?";
}

void eng_opts_default(struct eng_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->backend = ENG_AUTO;
	o->queue_depth = DEFAULT_QD;
	o->inflight_bytes = DEFAULT_INFLIGHT;
	o->register_buffers = 1;
	o->register_files = 1;
	o->direct = 1;
}

int eng_create(const struct eng_opts *opts, struct eng **out, struct rl_err *e)
{
	struct eng *eng;

	*out = NULL;
	if (opts->backend < ENG_AUTO || opts->backend > ENG_PREAD)
		return rl_err_set(e, RL_E_INVALID_ARG, "backend %d: not 0..3", opts->backend);
	if (opts->queue_depth < 1 || opts->queue_depth > MAX_QD)
		return rl_err_set(e, RL_E_INVALID_ARG, "queue depth %u: not 1..%u",
				  opts->queue_depth, MAX_QD);
	if (opts->inflight_bytes < 1)
		return rl_err_set(e, RL_E_INVALID_ARG, "in-flight bound must be >= 1 byte");
	if (opts->buffer_bytes > MAX_BUFFER)
		return rl_err_set(e, RL_E_INVALID_ARG, "buffer size %u: over 1 GiB",
				  opts->buffer_bytes);
	if (opts->buffers > 65536 || opts->threads > 1024)
		return rl_err_set(e, RL_E_INVALID_ARG, "buffers (%u) or threads (%u) too many",
				  opts->buffers, opts->threads);
	eng = rl_calloc(1, sizeof(*eng));
	if (!eng)
		return rl_err_set(e, -ENOMEM, "out of memory");
	eng->o = *opts;
	*out = eng;
	return 0;
}

void eng_destroy(struct eng *eng)
{
	rl_free(eng);
}

void eng_set_fault(struct eng *eng, int backend, int kind, uint64_t nth)
{
	eng->fault_backend = backend;
	eng->fault_kind = kind;
	eng->fault_nth = nth;
}

void eng_set_aio_refuse(struct eng *eng, uint32_t n)
{
	eng->aio_refuse = n;
}

void eng_set_uring_setup_err(struct eng *eng, int err)
{
	eng->uring_setup_err = err;
}

void eng_set_uring_setup(struct eng *eng, unsigned first)
{
	eng->uring_first = first;
}

/* ------------------------------------------------------------------ */
/* Validation: the plan is data; never trust a length before checking. */

static int check_read(struct eng_run *rc, const struct rl_read *r)
{
	const struct eng_job *job = rc->job;
	uint64_t end;

	if (r->file >= job->nfiles)
		return rl_err_set(rc->e, RL_E_INVALID_ARG, "read at offset %llu: file %u of %zu",
				  (unsigned long long)r->off, r->file, job->nfiles);
	if (r->len == 0 || r->min_len > r->len || rl_add64(r->off, r->len, &end))
		return rl_err_set(rc->e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: length %u, minimum %u",
				  job->paths[r->file], (unsigned long long)r->off, r->len,
				  r->min_len);
	if (r->len > rc->bound)
		return rl_err_set(rc->e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: length %u exceeds the in-flight bound %llu",
				  job->paths[r->file], (unsigned long long)r->off, r->len,
				  (unsigned long long)rc->bound);
	if (r->ncopies && (r->first_copy > job->ncopies ||
			   r->ncopies > job->ncopies - r->first_copy))
		return rl_err_set(rc->e, RL_E_INVALID_ARG,
				  "%s: read at offset %llu: copies %llu+%u of %zu",
				  job->paths[r->file], (unsigned long long)r->off,
				  (unsigned long long)r->first_copy, r->ncopies, job->ncopies);
	for (uint32_t i = 0; i < r->ncopies; i++) {
		const struct rl_copy *c = job->copies + r->first_copy + i;
		uint64_t span = 0, bytes = 0, dend;

		/* Destination and shard are checked for every copy, empty
		 * ones too: the completion thread indexes both. */
		if (c->dev >= job->ndevs || !job->staging || !job->staging[c->dev] ||
		    (c->count && (rl_mul64(c->count - 1, c->src_stride, &span) ||
				  rl_add64(span, (uint64_t)c->src + c->len, &span) ||
				  span > r->len)) ||
		    (c->count > 1 && c->src_stride < c->len) ||
		    rl_mul64(c->len, c->count, &bytes) || rl_add64(c->dst, bytes, &dend) ||
		    (job->staging_bytes && dend > job->staging_bytes[c->dev]) ||
		    (job->shard_bytes && c->shard >= job->nshards))
			return rl_err_set(rc->e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: copy %u out of bounds",
					  job->paths[r->file], (unsigned long long)r->off, i);
		/* Bytes past min_len may never arrive (end of file, or a
		 * short read the engine accepts): no copy may take them. */
		if (c->count && span > r->min_len)
			return rl_err_set(rc->e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: copy %u takes bytes up to %llu past the minimum length %u",
					  job->paths[r->file], (unsigned long long)r->off, i,
					  (unsigned long long)span, r->min_len);
	}
	if ((r->flags & RL_READ_DIRECT) &&
	    (r->ncopies != 1 || r->min_len != r->len || job->copies[r->first_copy].src != 0 ||
	     job->copies[r->first_copy].count != 1 ||
	     job->copies[r->first_copy].len != r->len))
		return rl_err_set(rc->e, RL_E_INVALID_ARG,
				  "%s: direct read at offset %llu is not one whole copy of bytes that must all arrive",
				  job->paths[r->file], (unsigned long long)r->off);
	return 0;
}

/* Adds a checked read's copies to the bytes planned for their shards:
 * more than a shard holds means the plan covers some bytes twice, and
 * on_shard would fire before every byte landed. */
static int plan_shards(struct eng_run *rc, const struct rl_read *r)
{
	const struct eng_job *job = rc->job;

	if (!job->shard_bytes)
		return 0;
	for (uint32_t i = 0; i < r->ncopies; i++) {
		const struct rl_copy *c = job->copies + r->first_copy + i;
		uint64_t *n = rc->shard_planned + c->shard;

		*n += (uint64_t)c->len * c->count; /* checked: no overflow */
		if (*n > job->shard_bytes[c->shard])
			return rl_err_set(rc->e, RL_E_INVALID_ARG,
					  "%s: read at offset %llu: copy %u brings shard %u to %llu of %llu bytes (bytes covered twice)",
					  job->paths[r->file], (unsigned long long)r->off, i,
					  c->shard, (unsigned long long)*n,
					  (unsigned long long)job->shard_bytes[c->shard]);
	}
	return 0;
}

/* Where a direct read lands, or NULL when it needs a bounce buffer:
 * flagged, and either buffered or suitably aligned for O_DIRECT. */
static uint8_t *direct_dst(const struct eng_run *rc, const struct rl_read *r)
{
	const struct eng_file *f = rc->files + r->file;
	const struct rl_copy *c;
	uint8_t *dst;

	if (!(r->flags & RL_READ_DIRECT))
		return NULL;
	c = rc->job->copies + r->first_copy;
	dst = rc->job->staging[c->dev] + c->dst;
	if (f->dfd >= 0 && ((uintptr_t)dst % f->align || r->off % f->align ||
			    r->len % f->align))
		return NULL;
	return dst;
}

/* ------------------------------------------------------------------ */
/* Files and setup */

static int open_files(struct eng_run *rc)
{
	const struct eng_job *job = rc->job;

	rc->files = rl_calloc(job->nfiles ? job->nfiles : 1, sizeof(*rc->files));
	if (!rc->files)
		return rl_err_set(rc->e, -ENOMEM, "out of memory");
	for (size_t i = 0; i < job->nfiles; i++)
		rc->files[i].fd = rc->files[i].dfd = -1;
	rc->nfiles = job->nfiles;
	rc->st->direct_io = job->nfiles > 0;
	for (size_t i = 0; i < job->nfiles; i++) {
		struct eng_file *f = rc->files + i;
		struct eng_align al;
		int ret;

		f->path = job->paths[i];
		f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
		if (f->fd < 0)
			return rl_err_set(rc->e, -errno, "%s: open: %s", f->path, strerror(errno));
		f->align = 1;
		ret = rc->o->direct ? eng_probe_align(f->path, &al) : 0;
		if (ret < 0)
			return rl_err_set(rc->e, ret, "%s: %s", f->path, strerror(-ret));
		if (rc->o->direct && al.direct) {
			f->dfd = open(f->path, O_RDONLY | O_CLOEXEC | O_DIRECT);
			f->align = RL_MAX(al.offset_align, al.mem_align);
			if (f->dfd < 0)
				f->align = 1;
		}
		if (f->dfd < 0)
			rc->st->direct_io = 0;
	}
	return 0;
}

static void close_files(struct eng_run *rc)
{
	for (size_t i = 0; rc->files && i < rc->nfiles; i++) {
		if (rc->files[i].fd >= 0)
			close(rc->files[i].fd);
		if (rc->files[i].dfd >= 0)
			close(rc->files[i].dfd);
	}
	rl_free(rc->files);
	rc->files = NULL;
}

static const struct be_ops *backend_ops(int b)
{
	switch (b) {
	case ENG_IO_URING: return &eng_uring_ops;
	case ENG_LIBAIO: return &eng_aio_ops;
	default: return &eng_pread_ops;
	}
}

static void be_free(struct be *be)
{
	if (!be)
		return;
	if (be->inner)
		rl_free(be->inner);
	rl_free(be);
}

/* Sets up backend b (wrapped by the fault injector when asked). */
static int be_start(struct eng_run *rc, int b, struct be **out)
{
	struct be *be = rl_calloc(1, sizeof(*be)), *in = NULL;
	int ret;

	if (!be)
		return -ENOMEM;
	be->run = rc;
	be->ops = backend_ops(b);
	if (rc->fault_kind != ENG_FAULT_NONE) {
		in = be;
		be = rl_calloc(1, sizeof(*be));
		if (!be) {
			rl_free(in);
			return -ENOMEM;
		}
		be->run = rc;
		be->ops = &eng_fault_ops;
		be->inner = in;
	}
	ret = be->ops->setup(be);
	if (ret < 0) {
		be_free(be);
		return ret;
	}
	*out = be;
	return 0;
}

static int choose_backend(struct eng_run *rc)
{
	static const int order[] = { ENG_IO_URING, ENG_LIBAIO, ENG_PREAD };
	int want = rc->o->backend, ret = 0, saved = rc->fault_kind;

	for (size_t i = 0; i < RL_ARRAY_SIZE(order); i++) {
		int b = order[i];

		if (want != ENG_AUTO && want != b)
			continue;
		rc->fault_kind = (rc->fault_backend == ENG_AUTO ||
				  rc->fault_backend == b) ? saved : ENG_FAULT_NONE;
		rc->setup_kernel_nomem = 0;
		ret = be_start(rc, b, &rc->be);
		rc->fault_kind = saved;
		if (ret == 0) {
			rc->st->backend = b;
			return 0;
		}
		/* Our own allocations failing is fatal; the kernel refusing
		 * a ring's memory (RLIMIT_MEMLOCK before 5.12) is a reason
		 * to try the next backend. */
		if (ret == -ENOMEM && !rc->setup_kernel_nomem)
			return rl_err_set(rc->e, ret, "%s setup: out of memory", eng_backend_name(b));
		eng_note(rc, "%s unavailable: %s%s", eng_backend_name(b), strerror(-ret),
			 rc->setup_kernel_nomem ? " (ring memory; RLIMIT_MEMLOCK before 5.12)" : "");
	}
	return rl_err_set(rc->e, RL_E_BACKEND, "backend %s unavailable: %s",
			  eng_backend_name(want), strerror(-ret));
}

/* ------------------------------------------------------------------ */
/* Resources: request slots, bounce buffers and limiter bytes. */

/* Under rc->lock: can a read of len bytes (bounce: needing a buffer) go? */
static int can_take(const struct eng_run *rc, uint32_t len, int bounce)
{
	return rc->free_reqs && rc->inflight + len <= rc->bound &&
	       (!bounce || rc->nfree_bufs);
}

/* Takes what read r needs, or returns NULL when the completion thread
 * still holds it. */
static struct eng_req *take(struct eng_run *rc, const struct rl_read *r, uint8_t *dst)
{
	struct eng_req *q;
	int buf = -1;

	/* The limiter, the buffers and the slots change together. */
	pthread_mutex_lock(&rc->lock);
	if (!can_take(rc, r->len, !dst)) {
		pthread_mutex_unlock(&rc->lock);
		return NULL;
	}
	q = rc->free_reqs;
	rc->free_reqs = q->next;
	if (!dst)
		buf = rc->free_bufs[--rc->nfree_bufs];
	rc->inflight += r->len;
	if (rc->inflight > rc->st->peak_inflight)
		rc->st->peak_inflight = rc->inflight;
	pthread_mutex_unlock(&rc->lock);

	q->r = *r;
	q->buf = buf;
	q->dst = dst ? dst : eng_pool_buf(&rc->pool, buf);
	q->io_pos = 0;
	q->io_len = r->len;
	q->got = 0;
	q->retries = 0;
	q->res = 0;
	q->next = NULL;
	return q;
}

/* Gives back everything q holds (failed or drained reads). */
static void drop(struct eng_run *rc, struct eng_req *q)
{
	pthread_mutex_lock(&rc->lock);
	if (q->buf >= 0)
		rc->free_bufs[rc->nfree_bufs++] = q->buf;
	rc->inflight -= q->r.len;
	q->next = rc->free_reqs;
	rc->free_reqs = q;
	pthread_mutex_unlock(&rc->lock);
}

/* A finished read goes to the completion thread (direct reads give their
 * limiter bytes back now: they are already in staging). */
static void hand_over(struct eng_run *rc, struct eng_req *q)
{
	pthread_mutex_lock(&rc->lock);
	if (q->buf < 0)
		rc->inflight -= q->r.len;
	q->next = NULL;
	if (rc->q_tail)
		rc->q_tail->next = q;
	else
		rc->q_head = q;
	rc->q_tail = q;
	pthread_cond_signal(&rc->qcond);
	pthread_mutex_unlock(&rc->lock);
}

static void set_failed(struct eng_run *rc, int err)
{
	if (rc->err)
		return;
	rc->err = err;
	pthread_mutex_lock(&rc->lock);
	rc->failed = 1;
	pthread_mutex_unlock(&rc->lock);
}

/* ------------------------------------------------------------------ */
/* Submission and completion (owner thread) */

static int submit(struct eng_run *rc, struct eng_req *q)
{
	const struct eng_file *f = rc->files + q->r.file;
	uint64_t off = q->r.off + q->io_pos;
	int ret;

	/* O_DIRECT when offset, length and address allow it. */
	q->direct = f->dfd >= 0 && off % f->align == 0 && q->io_len % f->align == 0 &&
		    (uintptr_t)(q->dst + q->io_pos) % f->align == 0;
	if (!q->direct)
		rc->st->direct_io = 0;
	if (!q->retries && !q->io_pos)
		q->submit_ns = eng_now_ns();
	q->res = 0;
	ret = rc->be->ops->queue(rc->be, q);
	if (ret < 0)
		return ret;
	rc->in_kernel++;
	rc->st->reads++;
	return 0;
}

static void fail_read(struct eng_run *rc, struct eng_req *q, int err, const char *what)
{
	if (!rc->err)
		rl_err_set(rc->e, err, "%s: read at offset %llu length %u failed: %s",
			   rc->files[q->r.file].path,
			   (unsigned long long)(q->r.off + q->io_pos), q->io_len, what);
	set_failed(rc, err);
	drop(rc, q);
}

static void progress(struct eng_run *rc, uint64_t len)
{
	const struct eng_job *job = rc->job;
	uint64_t step;

	rc->done_bytes += len;
	if (!job->on_progress || rc->err)
		return;
	if (rc->done_bytes < rc->progress_next && rc->done_bytes != job->total_bytes)
		return;
	step = job->total_bytes ? job->total_bytes / 128 : (64u << 20);
	rc->progress_next = rc->done_bytes + RL_MAX(step, 1u << 20);
	if (job->on_progress(job->user, rc->done_bytes, job->total_bytes)) {
		rl_err_set(rc->e, RL_E_CANCELED, "load canceled by the progress callback at %llu of %llu bytes",
			   (unsigned long long)rc->done_bytes,
			   (unsigned long long)job->total_bytes);
		set_failed(rc, RL_E_CANCELED);
	}
}

/* A backend's error as text: -EAGAIN from commit or reap means the
 * kernel kept refusing submissions and the backend gave up. */
static const char *be_errtext(int err)
{
	if (err == -EAGAIN)
		return "the kernel kept refusing submissions (EAGAIN); giving up";
	return strerror(-err);
}

/* Handles one reaped read: done, resubmit the rest, or fail the run. */
static void complete(struct eng_run *rc, struct eng_req *q)
{
	const struct eng_file *f = rc->files + q->r.file;
	uint32_t got, pos;
	int res = q->res;

	rc->in_kernel--;
	if (rc->err) { /* draining */
		drop(rc, q);
		return;
	}
	if (res == -EAGAIN || res == -EINTR) {
		if (++q->retries > MAX_RETRIES) {
			fail_read(rc, q, -EIO, "gave up after repeated EAGAIN");
			return;
		}
		rc->st->retries++;
		eng_backoff(q->retries);
		q->next = rc->retry;
		rc->retry = q;
		return;
	}
	if (res < 0) {
		fail_read(rc, q, res, strerror(-res));
		return;
	}
	if ((uint32_t)res > q->io_len) {
		fail_read(rc, q, -EIO, "kernel returned more bytes than asked");
		return;
	}
	got = q->io_pos + (uint32_t)res;
	/* A resubmission from an aligned position re-reads a prefix:
	 * count only bytes not counted before. */
	if (got > q->got) {
		rc->st->bytes_read += got - RL_MAX(q->got, q->io_pos);
		q->got = got;
	}
	if (got < q->r.len && got < q->r.min_len) {
		if (res == 0) {
			if (!rc->err)
				rl_err_set(rc->e, RL_E_TRUNCATED,
					   "%s: file truncated/changed during load: read at offset %llu length %u ended at %llu",
					   f->path, (unsigned long long)q->r.off, q->r.len,
					   (unsigned long long)(q->r.off + got));
			set_failed(rc, RL_E_TRUNCATED);
			drop(rc, q);
			return;
		}
		if (++q->retries > MAX_RETRIES) {
			fail_read(rc, q, -EIO, "gave up after repeated short reads");
			return;
		}
		/* Short read: resubmit the rest, from an aligned position on
		 * the O_DIRECT descriptor; no progress that way means the
		 * buffered one takes over. */
		pos = q->direct ? (uint32_t)rl_align_down(got, f->align) : got;
		if (pos <= q->io_pos && q->direct) {
			pos = got;
		}
		q->io_pos = pos;
		q->io_len = q->r.len - pos;
		rc->st->retries++;
		q->next = rc->retry;
		rc->retry = q;
		return;
	}
	if (q->buf < 0)
		rc->st->bytes_direct += q->r.len;
	if (rc->job->on_read)
		rc->job->on_read(rc->job->user, &q->r, q->submit_ns, eng_now_ns());
	progress(rc, q->r.len);
	if (!q->r.ncopies) {
		/* Nothing to scatter (rlperf's raw reads): the buffer is free
		 * now. A trip through the completion thread would cost a
		 * wake-up and two context switches per read, a third of the
		 * CPU of a 4 KiB read, and starve the queue when that thread
		 * waits for a core. */
		drop(rc, q);
		return;
	}
	hand_over(rc, q);
}

/* The next read of the job, checked; 0 when there is none. */
static int fetch(struct eng_run *rc, struct rl_read *r)
{
	const struct eng_job *job = rc->job;

	if (rc->exhausted)
		return 0;
	if (job->reads || !job->next) {
		if (!job->reads || rc->next_read >= job->nreads) {
			rc->exhausted = 1;
			return 0;
		}
		*r = job->reads[rc->next_read++];
	} else if (!job->next(job->user, r)) {
		rc->exhausted = 1;
		return 0;
	} else {
		int ret = check_read(rc, r);

		if (ret == 0)
			ret = plan_shards(rc, r);
		if (ret == 0 && !direct_dst(rc, r) && r->len > rc->pool.bytes)
			ret = rl_err_set(rc->e, RL_E_INVALID_ARG,
					 "%s: read at offset %llu: length %u exceeds the buffer size %u",
					 job->paths[r->file], (unsigned long long)r->off,
					 r->len, rc->pool.bytes);
		if (ret < 0) {
			set_failed(rc, ret);
			rc->exhausted = 1;
			return 0;
		}
	}
	return 1;
}

/*
 * The owner's loop: submit while slots, bytes and buffers allow and the
 * queue has room; reap in batches, blocking only when nothing more can be
 * submitted; on failure stop submitting and drain what is in flight.
 */
static int run_loop(struct eng_run *rc)
{
	struct eng_req *done[REAP_BATCH];
	struct rl_read pend;
	uint8_t *pend_dst = NULL;
	int have_pend = 0;
	uint64_t t_first = 0, t_last = 0;

	for (;;) {
		int blocked = 0, wait, n, ret;
		unsigned queued = 0;

		while (!rc->err && rc->in_kernel < rc->qd) {
			struct eng_req *q = rc->retry;

			if (q) {
				rc->retry = q->next;
			} else {
				if (!have_pend) {
					if (!fetch(rc, &pend))
						break;
					have_pend = 1;
					pend_dst = direct_dst(rc, &pend);
				}
				q = take(rc, &pend, pend_dst);
				if (!q) {
					blocked = 1;
					break;
				}
				have_pend = 0;
			}
			ret = submit(rc, q);
			if (ret < 0) {
				fail_read(rc, q, ret, strerror(-ret));
				break;
			}
			queued++;
		}
		if (queued) {
			if (!t_first)
				t_first = eng_now_ns();
			ret = rc->be->ops->commit(rc->be);
			if (ret < 0) {
				/* The first error names the run's failure. */
				if (!rc->err)
					rl_err_set(rc->e, ret, "%s: submitting reads: %s",
						   rc->be->ops->name, be_errtext(ret));
				set_failed(rc, ret);
			}
		}
		if (rc->in_kernel == 0) {
			if (rc->err || (!have_pend && !rc->retry && rc->exhausted))
				break;
			if (rc->retry)
				continue;
			/* Everything needed is with the completion thread. */
			pthread_mutex_lock(&rc->lock);
			while (!can_take(rc, pend.len, !pend_dst))
				pthread_cond_wait(&rc->cond, &rc->lock);
			pthread_mutex_unlock(&rc->lock);
			continue;
		}
		/* Block in the kernel only when nothing else can go now; when
		 * blocked on the completion thread, ask it to wake us. */
		wait = rc->err || blocked || rc->in_kernel >= rc->qd ||
		       (rc->exhausted && !rc->retry);
		if (blocked && !rc->err) {
			pthread_mutex_lock(&rc->lock);
			if (can_take(rc, pend.len, !pend_dst))
				wait = 0;
			else
				rc->owner_in_kernel = 1;
			pthread_mutex_unlock(&rc->lock);
		}
		n = rc->be->ops->reap(rc->be, done, REAP_BATCH, wait);
		if (blocked) {
			pthread_mutex_lock(&rc->lock);
			rc->owner_in_kernel = 0;
			pthread_mutex_unlock(&rc->lock);
		}
		if (n < 0) {
			/* The backend cannot tell what is still in flight;
			 * its teardown cancels and waits for it. */
			if (!rc->err)
				rl_err_set(rc->e, n, "%s: reaping reads: %s",
					   rc->be->ops->name, be_errtext(n));
			set_failed(rc, n);
			return rc->err;
		}
		if (n > 0)
			t_last = eng_now_ns();
		for (int i = 0; i < n; i++)
			complete(rc, done[i]);
	}
	if (t_first && t_last > t_first)
		rc->st->read_seconds = (t_last - t_first) / 1e9;
	return rc->err;
}

/* Checks an array job up front and sizes the pool from it. */
static int plan_pool(struct eng_run *rc, unsigned *nbuf, uint32_t *bytes)
{
	const struct eng_job *job = rc->job;
	uint64_t bounce = 0, bounce_bytes = 0, all_bytes = 0, want;
	uint32_t maxlen = 0;

	if (job->reads || !job->next) {
		for (size_t i = 0; job->reads && i < job->nreads; i++) {
			const struct rl_read *r = job->reads + i;
			int ret = check_read(rc, r);

			if (ret == 0)
				ret = plan_shards(rc, r);
			if (ret < 0)
				return ret;
			all_bytes += r->len;
			if (!direct_dst(rc, r)) {
				if (r->len > MAX_BUFFER)
					return rl_err_set(rc->e, RL_E_INVALID_ARG,
							  "%s: read at offset %llu: length %u needs a bounce buffer over the 1 GiB maximum",
							  job->paths[r->file],
							  (unsigned long long)r->off, r->len);
				bounce++;
				bounce_bytes += r->len;
				maxlen = RL_MAX(maxlen, r->len);
			}
		}
	} else {
		bounce = UINT64_MAX;
		bounce_bytes = all_bytes = 1;
		maxlen = rc->o->buffer_bytes ? rc->o->buffer_bytes : DEFAULT_BUFFER;
	}
	*bytes = RL_MAX(rc->o->buffer_bytes, maxlen);
	rc->staged_planned = all_bytes;
	if (!bounce) {
		*nbuf = 0;
		return 0;
	}
	if (rc->o->buffers) {
		*nbuf = (unsigned)RL_MIN((uint64_t)rc->o->buffers, bounce);
		return 0;
	}
	/*
	 * Twice the queue depth keeps the queue full while the completion
	 * thread copies the previous batch, scaled by the share of bytes that
	 * need a bounce at all (a congruent plan reads nearly everything
	 * straight into staging, and every buffer is memory pinned for the
	 * whole run), within the in-flight bound.
	 */
	want = 2ull * rc->qd;
	if (bounce_bytes < all_bytes)
		want = RL_MAX((want * bounce_bytes + all_bytes - 1) / all_bytes, 2);
	want = RL_MIN(want, RL_MAX(rc->bound / *bytes, 1));
	*nbuf = (unsigned)RL_MIN(want, bounce);
	return 0;
}

static int run_setup(struct eng_run *rc)
{
	unsigned nbuf = 0;
	uint32_t bytes = 0;
	int ret;

	ret = open_files(rc);
	if (ret < 0)
		return ret;
	if (rc->job->shard_bytes) {
		if (rc->job->nshards > (SIZE_MAX >> 4))
			return rl_err_set(rc->e, RL_E_INVALID_ARG, "%zu shards: too many",
					  rc->job->nshards);
		rc->shard_done = rl_calloc(rc->job->nshards + 1, sizeof(uint64_t));
		rc->shard_planned = rl_calloc(rc->job->nshards + 1, sizeof(uint64_t));
		if (!rc->shard_done || !rc->shard_planned)
			return rl_err_set(rc->e, -ENOMEM, "out of memory");
	}
	/* After opening: direct-read eligibility depends on the files. */
	ret = plan_pool(rc, &nbuf, &bytes);
	if (ret < 0)
		return ret;
	ret = eng_pool_create(&rc->pool, nbuf, bytes, rc);
	if (ret < 0)
		return rl_err_set(rc->e, ret, "%u buffers of %u bytes: %s", nbuf, bytes,
				  strerror(-ret));
	if (!rc->pool.bytes)
		rc->pool.bytes = bytes;
	rc->st->buffers = rc->pool.nbuf;
	rc->nreqs = rc->qd + rc->pool.nbuf;
	rc->reqs = rl_calloc(rc->nreqs, sizeof(*rc->reqs));
	rc->free_bufs = rl_calloc(rc->pool.nbuf + 1, sizeof(int));
	if (!rc->reqs || !rc->free_bufs)
		return rl_err_set(rc->e, -ENOMEM, "out of memory");
	for (unsigned i = 0; i < rc->nreqs; i++) {
		rc->reqs[i].slot = i;
		rc->reqs[i].next = i + 1 < rc->nreqs ? rc->reqs + i + 1 : NULL;
	}
	rc->free_reqs = rc->reqs;
	for (unsigned i = 0; i < rc->pool.nbuf; i++)
		rc->free_bufs[i] = (int)(rc->pool.nbuf - 1 - i);
	rc->nfree_bufs = rc->pool.nbuf;
	return choose_backend(rc);
}

int eng_run(struct eng *eng, const struct eng_job *job, struct eng_stats *st,
	    struct rl_err *e)
{
	struct eng_run rc;
	pthread_t th, pf;
	int ret, started = 0, pf_started = 0;

	memset(st, 0, sizeof(*st));
	memset(&rc, 0, sizeof(rc));
	rc.o = &eng->o;
	rc.job = job;
	rc.st = st;
	rc.e = e;
	rc.fault_kind = eng->fault_kind;
	rc.fault_backend = eng->fault_backend;
	rc.fault_nth = eng->fault_nth;
	rc.uring_first = eng->uring_first;
	rc.aio_refuse = eng->aio_refuse;
	rc.uring_setup_err = eng->uring_setup_err;
	rc.qd = eng->o.queue_depth;
	rc.bound = eng->o.inflight_bytes;
	st->queue_depth = rc.qd;
	pthread_mutex_init(&rc.lock, NULL);
	pthread_cond_init(&rc.cond, NULL);
	pthread_cond_init(&rc.qcond, NULL);

	if (job->nfiles && (!job->paths || !job->file_sizes))
		ret = rl_err_set(e, RL_E_INVALID_ARG, "job without file paths");
	else
		ret = run_setup(&rc);
	if (ret == 0) {
		ret = -pthread_create(&th, NULL, eng_scatter_main, &rc);
		if (ret < 0)
			rl_err_set(e, ret, "completion thread: %s", strerror(-ret));
		started = ret == 0;
	}
	/* Only when there are enough bytes for a thread to pay off. */
	if (ret == 0 && job->reads && rc.staged_planned >= PREFAULT_MIN)
		pf_started = pthread_create(&pf, NULL, eng_prefault_main, &rc) == 0;
	if (ret == 0)
		ret = run_loop(&rc);
	if (pf_started) {
		atomic_store_explicit(&rc.prefault_stop, 1, memory_order_relaxed);
		pthread_join(pf, NULL);
	}
	if (started) {
		pthread_mutex_lock(&rc.lock);
		rc.stop = 1;
		pthread_cond_signal(&rc.qcond);
		pthread_mutex_unlock(&rc.lock);
		pthread_join(th, NULL);
		st->scatter_seconds = rc.scatter_seconds;
		if (ret == 0 && rc.incomplete)
			ret = rl_err_set(e, -EIO, "shard %zu incomplete after every read: %llu of %llu bytes",
					 rc.incomplete - 1,
					 (unsigned long long)rc.shard_done[rc.incomplete - 1],
					 (unsigned long long)job->shard_bytes[rc.incomplete - 1]);
	}
	if (rc.be) {
		rc.be->ops->teardown(rc.be);
		be_free(rc.be);
	}
	eng_pool_destroy(&rc.pool);
	close_files(&rc);
	rl_free(rc.reqs);
	rl_free(rc.free_bufs);
	rl_free(rc.shard_done);
	rl_free(rc.shard_planned);
	pthread_cond_destroy(&rc.qcond);
	pthread_cond_destroy(&rc.cond);
	pthread_mutex_destroy(&rc.lock);
	if (ret == 0 && e)
		rl_err_clear(e);
	return ret;
}
