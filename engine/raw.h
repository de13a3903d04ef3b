/*
 * raw.h - the engine's raw-read interface: what rlperf (perf/) needs of
 * the engine and no more. Reads of (file, offset, length) handed out one
 * at a time by a generator, kept iodepth deep on one backend, each timed
 * by a callback; no staging, no copies, no shards, no hashes. Everything
 * else of the engine stays behind engine/engine.h, which rlperf does not
 * include (tests/check/layers.py checks that).
 */
#ifndef ENGINE_RAW_H
#define ENGINE_RAW_H

#include <stddef.h>
#include <stdint.h>

#include "plan_io.h"   /* struct cm_read: off, len, min_len and file of one read */

struct eng_raw_opts {
	int backend;            /* enum rl_backend (ringload.h); 0: io_uring, libaio, pread */
	unsigned iodepth;       /* reads in flight (1 .. 4096); pread: threads */
	uint32_t bs;            /* every read's length at most (its buffer's size) */
	int direct;             /* 1: O_DIRECT where the file system allows; 0: buffered */
	int fixedbufs;          /* io_uring: registered buffers */
	int registerfiles;      /* io_uring: registered files */
	int hipri;              /* io_uring: polled completions (IORING_SETUP_IOPOLL) */
	int sqthread_poll;      /* io_uring: a kernel thread submits (IORING_SETUP_SQPOLL) */
	int huge_buffers;       /* buffers in huge pages (fio's iomem=mmaphuge);
				 * 0: 4 KiB pages, as fio's default malloc */
	/* fio's batching, with fio's meanings; 0 takes fio's default */
	unsigned batch_submit;  /* iodepth_batch_submit: reads per submission (1) */
	unsigned batch_complete_min; /* iodepth_batch_complete_min: a full queue
				 * waits for this many completions (1) */
	unsigned batch_complete_max; /* iodepth_batch_complete_max: reaped at
				 * most at once (iodepth_batch_complete_min) */
	unsigned iodepth_low;   /* a full queue is reaped down to this (iodepth) */
};

struct eng_raw_job {
	size_t nfiles;
	const char *const *paths;
	const uint64_t *sizes;  /* each file's size: reads stay below it */
	/* The next read (off, len, min_len == len, file, and ioprio:
	 * ioprio_set(2)'s value, 0 for the thread's own; the rest 0): fills
	 * *out and returns 1, or returns 0 when there is none. */
	int (*next)(void *user, struct cm_read *out);
	/* Every finished read with its submit and completion times
	 * (CLOCK_MONOTONIC ns). */
	void (*on_read)(void *user, const struct cm_read *r, uint64_t submit_ns,
			uint64_t complete_ns);
	/* 1: hand out no read now; the engine reaps what is in flight (or,
	 * with nothing in flight, sleeps a millisecond) and asks again. On the
	 * same thread as next. NULL: never. */
	int (*hold)(void *user);
	/* Each submission of nr reads, leaving depth in flight (fio's
	 * io_u_mark_depth and io_u_mark_submit), and each reap of nr
	 * completions (io_u_mark_complete). On the same thread. May be NULL. */
	void (*on_commit)(void *user, unsigned nr, unsigned depth);
	void (*on_reap)(void *user, unsigned nr);
	void *user;
	uint64_t total_bytes;   /* the generator's bytes, if known (0: unknown) */
};

/* What ran (the engine's own statistics, the part a raw run has). */
struct eng_raw_stats {
	int backend;            /* enum rl_backend that ran */
	int direct_io;          /* some reads went O_DIRECT */
	unsigned buffers, registered_buffers, queue_depth;
	int registered_files;
	uint64_t peak_inflight; /* most bytes in flight at once */
	uint64_t retries;       /* short reads and EAGAIN resubmitted */
	char fallbacks[256];    /* what the engine could not do as asked, and why */
};

/*
 * Runs job on the calling thread: next and on_read are called on it (the
 * thread that owns the ring), never two at once. Returns 0 when every read
 * arrived whole, else a negative code (-errno or RL_E_*) with a one-line
 * message naming the file, offset and length in err (errlen bytes; empty
 * when the engine has none), after draining what was in flight. st is
 * filled either way.
 */
int eng_raw_run(const struct eng_raw_opts *o, const struct eng_raw_job *job,
		struct eng_raw_stats *st, char *err, size_t errlen);

/* The O_DIRECT offset alignment of path (*align) and whether the file
 * system allows O_DIRECT there (*direct). Returns 0 or -errno. */
int eng_raw_align(const char *path, uint32_t *align, int *direct);

#endif /* ENGINE_RAW_H */
