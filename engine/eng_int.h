/*
 * eng_int.h - what the engine's files share: one request in flight, the
 * state of one run, and the small ops table every backend implements
 * (io_uring, libaio, a pread pool, and the fault-injecting wrapper).
 */
#ifndef RL_ENG_INT_H
#define RL_ENG_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine.h"

/* One open file: a buffered descriptor always, an O_DIRECT one where the
 * file system allows; slot 2*i (buffered) and 2*i+1 (direct) in the table
 * registered with io_uring. */
struct eng_file {
	const char *path;
	int fd;                 /* buffered */
	int dfd;                /* O_DIRECT, -1 if none */
	uint32_t align;         /* max(offset, memory) alignment of dfd */
};

/* A read request while the engine owns it. */
struct eng_req {
	struct rl_read r;       /* the planner's request, as given */
	uint8_t *dst;           /* where byte 0 of r lands: pool buffer or staging */
	int buf;                /* pool buffer index, -1 when dst is staging */
	int direct;             /* the current submission uses the O_DIRECT fd */
	unsigned slot;          /* index in run->reqs (backends key on it) */
	/* the current (re)submission: io_len bytes at r.off + io_pos */
	uint32_t io_pos;
	uint32_t io_len;
	uint32_t got;           /* bytes from r.off on that arrived so far */
	int res;                /* result: bytes or -errno, set by the backend */
	uint32_t retries;
	uint64_t submit_ns;
	struct eng_req *next;   /* free list, retry list, scatter queue */
};

static inline int eng_req_fd(const struct eng_req *q, const struct eng_file *f)
{
	return q->direct ? f->dfd : f->fd;
}

struct eng_run;

/* A backend instance: ops plus private state; inner for wrappers. */
struct be {
	const struct be_ops *ops;
	struct eng_run *run;
	void *priv;
	struct be *inner;
};

/*
 * The ops table (fio's ioengine shape). All but wake run on the thread
 * that called eng_run; wake may run on any thread.
 *  setup:    0, or -errno when the backend is unavailable (the reason is
 *            recorded as a fallback); -ENOMEM is our own allocation failing
 *            (fatal) unless the backend set run->setup_kernel_nomem (the
 *            kernel refused its memory: fall back).
 *  queue:    prepares one read (q->io_pos/io_len); 0 or -errno.
 *  commit:   hands every queued read to the kernel; 0 or -errno
 *            (-EAGAIN: the kernel kept refusing them past the backend's
 *            back-off; reap returns that too).
 *  reap:     fills out[] with up to max finished reads (q->res set);
 *            wait != 0 blocks until at least one finished or wake() was
 *            called; returns the count or -errno.
 *  wake:     makes a blocked (or the next) reap return.
 */
struct be_ops {
	const char *name;
	int (*setup)(struct be *be);
	int (*queue)(struct be *be, struct eng_req *q);
	int (*commit)(struct be *be);
	int (*reap)(struct be *be, struct eng_req **out, unsigned max, int wait);
	void (*wake)(struct be *be);
	void (*teardown)(struct be *be);
};

extern const struct be_ops eng_uring_ops, eng_aio_ops, eng_pread_ops, eng_fault_ops;

/* The bounce-buffer pool: nbuf buffers of bytes each, one mapping. */
struct eng_pool {
	uint8_t *base;
	size_t map_len;
	unsigned nbuf;
	uint32_t bytes;
	int locked;
};

/* Everything one eng_run owns. */
struct eng_run {
	const struct eng_opts *o;
	const struct eng_job *job;
	struct eng_stats *st;
	struct rl_err *e;
	int fault_kind, fault_backend;
	unsigned uring_first;     /* first io_uring flag set to try */
	uint64_t fault_nth;
	uint32_t aio_refuse;      /* test hook: io_submit calls to refuse */
	int uring_setup_err;      /* test hook: errno the ring setup returns */
	int setup_kernel_nomem;   /* the kernel, not our allocation, said ENOMEM */

	struct eng_file *files;
	size_t nfiles;
	struct eng_pool pool;
	unsigned qd;
	struct eng_req *reqs;
	unsigned nreqs;

	/* Owner-only state (the thread in eng_run). */
	struct be *be;
	unsigned in_kernel;
	struct eng_req *retry;
	size_t next_read;
	int exhausted;
	int err;
	uint64_t done_bytes, progress_next;
	uint64_t *shard_planned;  /* bytes the checked reads' copies bring */

	/* Shared with the completion thread, all under lock: the limiter,
	 * free buffers and request slots, the scatter queue and the flags.
	 * One mutex: every hand-off touches several of these at once. */
	pthread_mutex_t lock;
	pthread_cond_t cond;    /* owner waits for bytes, buffers, slots */
	pthread_cond_t qcond;   /* completion thread waits for work */
	uint64_t inflight;
	uint64_t bound;
	int *free_bufs;
	unsigned nfree_bufs;
	struct eng_req *free_reqs;
	struct eng_req *q_head, *q_tail;
	int stop;               /* no more work will be queued */
	int failed;             /* skip copies and callbacks */
	int owner_in_kernel;    /* owner blocks in reap: wake it via be */

	atomic_int prefault_stop;
	uint64_t staged_planned;  /* bytes the reads bring (for the prefault) */

	/* Completion-thread-only state (read by the owner after join). */
	uint64_t *shard_done;
	size_t incomplete;      /* 1 + the first shard left short, or 0 */
	double scatter_seconds;
};

/* Appends "; "-separated text to the run's stats.fallbacks. */
void eng_note(struct eng_run *rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

uint64_t eng_now_ns(void);

/* Sleeps a little before retry number attempt (1-based) of something the
 * kernel refused for now: nothing for the first ones, then growing. */
void eng_backoff(uint32_t attempt);

/* Completion thread (engine/scatter.c). */
void *eng_scatter_main(void *arg);

/* Staging prefault helper (engine/prefault.c), array jobs only. */
void *eng_prefault_main(void *arg);

/* Pool (engine/pool.c). */
int eng_pool_create(struct eng_pool *p, unsigned nbuf, uint32_t bytes,
		    struct eng_run *rc);
void eng_pool_destroy(struct eng_pool *p);
static inline uint8_t *eng_pool_buf(const struct eng_pool *p, int i)
{
	return p->base + (size_t)i * p->bytes;
}

#endif /* RL_ENG_INT_H */
