/*
 * eng_int.h - what the engine's files share: one open file, one request in
 * flight, one worker (its ring, buffers and claimed reads), a session's
 * context (files, workers: held across batches) and its batch under way
 * (cursor, limiter, shards, progress, failure), and the small ops table
 * every backend implements (io_uring, libaio, a pread pool, and in test
 * builds the fault-injecting wrapper).
 *
 * Who calls whom (no file calls back into one that calls it):
 *   engine.c (eng_run) -> setup.c, worker.c, open_files.c, pool.c, file_checks.c,
 *   stats.c, util.c
 *   worker.c -> check.c, deliver.c (the job's sink), limit.c, backends, util.c
 *   file_checks.c -> util.c
 *   backends -> pool.c, util.c;  setup.c -> check.c, open_files.c, limit.c, util.c
 *   test builds only: engine.c, worker.c, open_files.c, backends -> hooks.c;
 *   be_fault.c (the injector) -> its wrapped backend
 */
#ifndef ENGINE_ENG_INT_H
#define ENGINE_ENG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine_types.h"

/* One open file: a buffered descriptor always, an O_DIRECT one where the
 * file system allows and the page cache does not already hold the file;
 * slot 2*i (buffered) and 2*i+1 (direct) in the tables registered with
 * io_uring. */
struct eng_file {
	const char *path;
	int fd;                 /* buffered */
	int dfd;                /* O_DIRECT, -1 if none */
	uint32_t align;         /* max(offset, memory) alignment of dfd */
	struct eng_file_stat st;
};

/* A read request while a worker owns it. */
struct eng_req {
	struct cm_read r;       /* the planner's request, as given */
	uint8_t *dst;           /* where byte 0 of r lands: pool buffer or the sink's */
	int buf;                /* pool buffer index, -1 when dst is the sink's */
	int direct;             /* the current submission uses the O_DIRECT fd */
	unsigned slot;          /* index in the worker's reqs (backends key on it) */
	/* the current (re)submission: io_len bytes at r.off + io_pos */
	uint32_t io_pos;
	uint32_t io_len;
	uint32_t got;           /* bytes from r.off on that arrived so far */
	int res;                /* result: bytes or -errno, set by the backend */
	uint32_t retries;
	uint64_t submit_ns;
	struct eng_req *next;   /* free list, retry list */
};

static inline int eng_req_fd(const struct eng_req *q, const struct eng_file *f)
{
	return q->direct ? f->dfd : f->fd;
}

struct eng_run;
struct eng_worker;

/* A backend instance: ops plus private state; inner for wrappers. */
struct be {
	const struct be_ops *ops;
	struct eng_run *run;
	struct eng_worker *w;
	void *priv;
	struct be *inner;
};

/*
 * The ops table (fio's ioengine shape). All but wake run on the worker
 * that owns the backend (the thread that set it up: io_uring's
 * SINGLE_ISSUER); wake may run on any thread.
 *  setup:    0, or -errno when the backend is unavailable (the reason is
 *            recorded as a fallback); -ENOMEM is our own allocation failing
 *            (fatal) unless the backend set w->setup_kernel_nomem (the
 *            kernel refused its memory: fall back).
 *  queue:    prepares one read (q->io_pos/io_len); 0 or -errno.
 *  commit:   hands every queued read to the kernel; 0 or -errno
 *            (-EAGAIN: the kernel kept refusing them past the backend's
 *            back-off; reap returns that too).
 *  reap:     fills out[] with up to max finished reads (q->res set);
 *            wait != 0 blocks until at least one finished or wake() was
 *            called; returns the count or -errno.
 *  wake:     makes a blocked (or the next) reap return.
 *  teardown: nothing of ours is in the kernel when it returns (what could
 *            not be reaped is counted in w->st.abandoned).
 */
#define ENG_BE_OPS_VERSION 1

struct be_ops {
	unsigned version;       /* ENG_BE_OPS_VERSION */
	int id;                 /* its enum rl_backend value, fixed forever */
	const char *name;       /* what the CLI, rlperf and Python call it */
	unsigned caps;          /* ENG_CAP_* (the public RL_BACKEND_CAP_*) */
	int auto_order;         /* 0: tried by ENG_AUTO, in table order; 1: only by id */
	int (*setup)(struct be *be);
	int (*queue)(struct be *be, struct eng_req *q);
	int (*commit)(struct be *be);
	int (*reap)(struct be *be, struct eng_req **out, unsigned max, int wait);
	void (*wake)(struct be *be);
	void (*teardown)(struct be *be);
};

extern const struct be_ops eng_uring_ops, eng_aio_ops, eng_pread_ops;
#ifdef RL_TEST_HOOKS
extern const struct be_ops eng_test_ops;
#endif

/* backends.c: the table. The ops of backend id (NULL: none); the i-th in
 * fallback order (NULL past the end). */
const struct be_ops *eng_backend_ops(int id);
const struct be_ops *eng_backend_at(size_t i);

/* ---- hooks.c: test hooks, in -DRL_TEST_HOOKS builds only ---------------- */

#ifdef RL_TEST_HOOKS
/* What eng_set_* asked for (hooks.h). */
struct eng_hooks {
	int fault_kind, fault_backend, fault_errno;
	uint64_t fault_nth;
	uint32_t aio_refuse, uring_eagain;
	int uring_setup_err;
	int mincore_only;
};

/* A run's copy: read-only but for the counters, which are atomic: every
 * worker draws from them. */
struct eng_run_hooks {
	struct eng_hooks set;
	atomic_uint_fast64_t fault_seq;   /* read submissions seen by the injectors */
	atomic_uint aio_refuse;           /* io_submit calls to refuse */
	atomic_uint uring_eagain;         /* io_uring_submit calls to answer -EAGAIN */
};

extern const struct be_ops eng_fault_ops;

/* Copies eng's hooks into a run being set up. */
void eng_hooks_start(struct eng_run *rc, const struct eng *eng);
/* The fault injector's ops when the run wraps backend b, else NULL. */
const struct be_ops *eng_hook_fault_ops(const struct eng_run *rc, int b);
/* 1: answer this io_uring_submit (io_submit) with -EAGAIN; takes one. */
int eng_hook_uring_eagain(struct eng_run *rc);
int eng_hook_aio_refuse(struct eng_run *rc);
/* The errno io_uring setup fails with (0: none). */
int eng_hook_uring_setup_err(const struct eng_run *rc);
/* 1: the page-cache probe uses mincore only. */
int eng_hook_mincore_only(const struct eng_run *rc);
#else
/* The release build: no hook, nothing checked (constants, so that not
 * even an -O0 build keeps a call or a symbol). */
#define eng_hooks_start(rc, eng) ((void)(rc), (void)(eng))
#define eng_hook_fault_ops(rc, b) ((void)(rc), (void)(b), (const struct be_ops *)NULL)
#define eng_hook_uring_eagain(rc) ((void)(rc), 0)
#define eng_hook_aio_refuse(rc) ((void)(rc), 0)
#define eng_hook_uring_setup_err(rc) ((void)(rc), 0)
#define eng_hook_mincore_only(rc) ((void)(rc), 0)
#endif

/* An engine: its options (and, in test builds, the hooks set). */
struct eng {
	struct eng_opts o;
#ifdef RL_TEST_HOOKS
	struct eng_hooks hooks;
#endif
};

/* A bounce-buffer pool: nbuf buffers of bytes each, one mapping. */
struct eng_pool {
	uint8_t *base;
	size_t map_len;
	unsigned nbuf;
	uint32_t bytes;
	int locked;
};

/* A bounce buffer whose copies an asynchronous sink may still be reading:
 * held until a wait covers its ticket; then its copies count as landed. */
struct eng_held {
	struct cm_read r;
	uint64_t ticket;
	int buf;
};

/* One worker: owns its backend (ring, aio context or pread pool), its
 * bounce buffers and request slots, and the reads it claimed. Everything
 * here is touched only by its own thread, except `parked` (run->b.lock). */
struct eng_worker {
	struct eng_run *run;
	unsigned id;
	struct be *be;
	int backend;              /* the backend it set up */
	struct eng_pool pool;
	unsigned qd;              /* its reads in flight at most */
	unsigned nbuf_want;       /* bounce buffers to allocate */
	int setup_kernel_nomem;   /* the kernel, not our allocation, said ENOMEM */
	struct eng_req *reqs;
	unsigned nreqs;
	struct eng_req *free_reqs;
	int *free_bufs;
	unsigned nfree_bufs;
	unsigned in_kernel;       /* queued or in the kernel */
	unsigned uncommitted;     /* of those, queued since the last commit */
	struct eng_req *retry;
	uint64_t lim_held;          /* limiter bytes its reads took, not given back */

	/* Reads claimed from the shared cursor (pre-faulted), in order. */
	struct cm_read *claimed;
	unsigned cap, head, count;
	int exhausted;
	int prefault;             /* array job, sink with prepare: prepare ahead */
	int async;                /* the job's sink has fence and wait */
	struct eng_held *held;    /* pool.nbuf entries, oldest at held_head */
	unsigned held_head, nheld;

	/* Its statistics, merged as they are (eng_stats_merge) after the
	 * join: what it holds (workers 1, buffers, queue depth, registrations:
	 * set up once) and what it counts in a batch (bytes, reads, retries,
	 * seconds, the read span: restarted by eng_worker_reset). */
	struct eng_stats st;

	unsigned reg_fixed;       /* fixed regions its ring registered (all or none) */
	unsigned seen;            /* under run->b.lock: the last batch it took */

	int parked;               /* under run->b.lock: asleep in reap, wake it via be */
	int started;              /* set up and ran (read after the join) */
	int joinable;             /* its thread was created */
	pthread_t tid;
};

/*
 * What an engine session holds across its batches: the files, the workers
 * (each with its ring, buffers and registrations) and how they were sized.
 * Set up once (engine.c, setup.c, open_files.c); read-only while a batch runs,
 * but for each worker's own state.
 */
struct eng_ctx {
	const struct eng_opts *o;
#ifdef RL_TEST_HOOKS
	struct eng_run_hooks hooks;
#endif
	struct eng_file *files;
	size_t nfiles;
	int backend;              /* chosen by worker 0, set up by every worker */
	unsigned nworkers;
	struct eng_worker *workers;
	uint32_t buf_bytes;       /* bounce buffer size */
	uint64_t memlock_share;   /* RLIMIT_MEMLOCK bytes each worker may lock/register (UINT64_MAX: no limit) */
	struct eng_integ *integ;  /* file identities (file_checks.c) */

	/* Memory the jobs' staging lies in (a session's windows), each
	 * region at most 1 GiB: io_uring registers them as fixed buffers
	 * after each worker's bounce buffers. */
	const struct eng_fixed *fixed;
	unsigned nfixed;
};

/*
 * The batch under way: its job, where its statistics and error go, the
 * shared cursor, the byte limiter, shard accounting, progress, failure,
 * and the handshake that posts it to the workers. Reset before each batch
 * (engine.c reset_batch); shared by every worker while it runs.
 */
struct eng_batch {
	const struct eng_job *job;
	struct eng_stats *st;
	struct cm_err *e;
	uint64_t staged_planned;  /* bytes the reads bring */
	uint64_t *shard_planned;  /* setup: bytes the checked reads' copies bring */

	/* The shared cursor of array jobs: the next read to claim.
	 * Relaxed: each index is claimed once (fetch_add) and the reads are
	 * immutable job data. */
	atomic_size_t cursor;

	/* The byte limiter: bytes submitted and not yet scattered, all
	 * workers together (limit.c). */
	atomic_uint_fast64_t inflight;
	atomic_uint_fast64_t peak;
	uint64_t bound;
	atomic_uint waiters;       /* workers waiting for bytes */

	/* Shard accounting: bytes landed per shard, from any worker. */
	atomic_uint_fast64_t *shard_done;
	pthread_mutex_t cb_lock;   /* on_shard: never two at once */

	/* Progress: every worker counts, worker 0 (the calling thread)
	 * reports each step crossed, in order (progress.c). */
	atomic_uint_fast64_t done_bytes;
	uint64_t progress_step, progress_last;
	int progress_each;         /* few reads: every one is a step */
	uint64_t marks[256];       /* under lock: byte counts at steps crossed */
	unsigned nmarks;
	atomic_int progress_due;   /* another worker crossed a progress step */

	/* Failure: the first error wins (under lock); `failed` is the flag
	 * every worker polls. */
	atomic_int failed;
	int err;

	/* lock guards err, the marks, the sleeping side of the limiter and
	 * the handshake; cond wakes workers waiting for bytes and the calling
	 * thread waiting for the others. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_mutex_t note_lock; /* st->fallbacks, from any worker */

	/* The handshake: a run is one batch, a session several on the same
	 * workers. Under lock: gen counts the batches posted, live the
	 * helper workers that take part, running those not yet done with
	 * this one, ending asks them to leave; go wakes them. */
	unsigned gen, live, running;
	unsigned pending_setup;    /* helper workers still setting up */
	int ending;
	pthread_cond_t go;
};

/* A session as its workers see it: the context it holds across batches
 * and the batch under way. */
struct eng_run {
	struct eng_ctx cx;
	struct eng_batch b;
};

/* ---- file_checks.c: file identity ------------------------------------- */

/* After the files are opened: records their identity (compared with
 * job->file_ids). */
int eng_integ_open(struct eng_run *rc);
/* After the last read: identities again (RL_E_FILE_CHANGED). */
int eng_integ_finish(struct eng_run *rc);
/* Frees the integrity state; NULL-safe. */
void eng_integ_free(struct eng_run *rc);

/* ---- util.c: leaf helpers --------------------------------------------- */

/* Sets flag (ENG_FALLBACK_*) in the run's stats.fallback_flags and
 * appends "; "-separated text, its reason, to stats.fallbacks, once (the
 * same text from several workers is kept once). Any thread. */
void eng_note(struct eng_batch *b, uint32_t flag, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends text (len bytes) to the "; "-separated notes in s (size bytes)
 * unless s has it already (or it is empty). */
void eng_text_note(char *s, size_t size, const char *text, size_t len);

/* Sleeps a little before retry number attempt (1-based) of something the
 * kernel refused for now: nothing for the first ones, then growing. */
void eng_backoff(uint32_t attempt);

/* Records the run's first error (code, message) and stops every worker.
 * Returns code. Any thread. */
int eng_fail(struct eng_batch *b, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static inline int eng_failed(struct eng_batch *b)
{
	/* Relaxed: a hint to stop early; the error itself is read under
	 * the lock or after the join. */
	return atomic_load_explicit(&b->failed, memory_order_relaxed);
}

/* Starts a thread with a stack of `stack` bytes; pthread_create's code. */
int eng_thread_start(pthread_t *t, size_t stack, void *(*fn)(void *), void *arg);

/* Stacks: a worker runs the runtime's on_shard (a Python callback, say),
 * a pread reader only pread. */
#define ENG_WORKER_STACK (4u << 20)
#define ENG_READER_STACK (256u << 10)

/* The text for a kernel refusing io_uring's ring memory on kernel release
 * `release` (uname -r). */
const char *eng_ring_nomem_reason(const char *release);

/* ---- check.c: the plan is data; never trust a length before checking -- */

int eng_check_read(struct eng_run *rc, const struct cm_read *r);
int eng_plan_shards(struct eng_run *rc, const struct cm_read *r);
/* Where a direct read lands, or NULL when it needs a bounce buffer. */
uint8_t *eng_direct_dst(const struct eng_run *rc, const struct cm_read *r);

/* ---- open_files.c: opening, page-cache and device probes -------------------- */

/* Opens every file of the job (buffered, and O_DIRECT where it is used),
 * measures what the page cache holds of the bytes the reads take (direct
 * AUTO) and finds each file's device queue; fills files[i].st. */
int eng_open_files(struct eng_run *rc);
void eng_close_files(struct eng_run *rc);

/* cache.c: bytes of [off, off + len) of fd in the page cache, in whole
 * pages; *mincore set when mincore answered. -errno when nothing can tell. */
int64_t eng_cached_bytes(int fd, uint64_t off, uint64_t len, int mincore_only,
			 int *mincore);
/* cache.c: 1 when fd's file system keeps its files in the page cache
 * (tmpfs), where resident says nothing about how to read it. */
int eng_cache_is_medium(int fd);

/* ---- limit.c: the byte limiter shared by all workers ------------------- */

/* Takes len bytes if the bound allows; 1 when taken. */
int eng_lim_try(struct eng_run *rc, uint32_t len);
/* Gives len bytes back, waking workers that wait for them. */
void eng_lim_give(struct eng_run *rc, uint64_t len);
/* Sleeps until len bytes could be taken or the run failed. */
void eng_lim_wait(struct eng_run *rc, uint32_t len);
/* Worker w is about to sleep in its backend while blocked on bytes:
 * returns 0 (and records it, so that a release wakes it) or 1 when the
 * bytes are there already. eng_lim_unpark after the sleep. */
int eng_lim_park(struct eng_worker *w, uint32_t len);
void eng_lim_unpark(struct eng_worker *w);

/* ---- worker.c ---------------------------------------------------------- */

/* Sets up w's pool, slots and backend (ENG_AUTO: the first of the order
 * that works, each failure noted); 0 or a negative code with e set. */
int eng_worker_setup(struct eng_worker *w, int backend, struct cm_err *e);
/* Runs w to the end of the job (or of the run), then tears it down. */
void eng_worker_run(struct eng_worker *w);
/* Before each batch (no worker runs): its queue empty, its statistics 0. */
void eng_worker_reset(struct eng_worker *w);
void eng_worker_teardown(struct eng_worker *w);

/* ---- progress.c: counted by every worker, reported on the calling thread */

/* Any worker: records that the bytes done reached `done`, crossing a step. */
void eng_progress_mark(struct eng_batch *b, uint64_t done);
/* Calling thread: calls on_progress for what was recorded, in order
 * (final: and for the exact count after the join, if not said yet). */
void eng_progress_report(struct eng_batch *b, int final);
/* The calling thread, its own share done: waits for the other workers,
 * reporting progress as they signal it. */
void eng_progress_wait(struct eng_batch *b);

/* ---- deliver.c: the job's sink ------------------------------------------ */

/* Has the sink prepare read r's destinations (sink ops prepare). */
void eng_prepare(struct eng_worker *w, const struct cm_read *r);
/* Ends the worker's burst of prepares (sink ops prepare_flush). */
void eng_prepare_flush(struct eng_worker *w);
/* Hands one finished read's copies to the sink (bounce reads) and counts
 * them towards their shards, firing on_shard. An asynchronous sink's
 * copies are fenced and q's buffer is held (q->buf becomes -1) until a
 * wait covers them; they count then. 0, or the sink's error (the run
 * failed). */
int eng_scatter(struct eng_worker *w, struct eng_req *q);
/* Waits for the oldest held buffer (all: for every one), counts the
 * copies that finished and gives their buffers back; after a failure it
 * gives them back without waiting (the sink's finish waits). */
void eng_release(struct eng_worker *w, int all);
/* The end of a run (ret: its result so far): the sink's finish, on the
 * calling thread once no worker runs. Returns ret, or finish's error. */
int eng_sink_finish(struct eng_run *rc, int ret);

/* ---- pool.c ------------------------------------------------------------ */

/* Maps nbuf buffers of bytes (rounded to pages), populated; locks them when
 * lock is set. Returns 0 or -errno (-EINVAL: size out of range). p->locked
 * says whether mlock succeeded. */
int eng_pool_create(struct eng_pool *p, unsigned nbuf, uint32_t bytes, int lock, int small);
void eng_pool_destroy(struct eng_pool *p);
static inline uint8_t *eng_pool_buf(const struct eng_pool *p, int i)
{
	return p->base + (size_t)i * p->bytes;
}

/* ---- setup.c: sizing a run before its workers start -------------------- */

/* Checks an array job, sizes buffers, workers and queue depths. */
/* What the reads of a job (or of every batch of a session) need. */
struct eng_needs {
	uint64_t bounce, bounce_bytes, all_bytes, nreads;
	uint32_t maxlen;        /* longest bounce read */
	uint32_t max_read;
};

/* Checks rc->b.job's reads (against the run's buffer size once it is
 * sized) and sets up its shard tables and progress steps; fills *n. */
int eng_check_job(struct eng_run *rc, struct eng_needs *n);
/* Sizes the run from n: bounce buffer size, workers, queue depths and
 * buffers of each, the memlock share, the shape text (rc->b.st). */
int eng_size_run(struct eng_run *rc, const struct eng_needs *n, int generator);

#endif /* ENGINE_ENG_INT_H */
